"""StringNormalizer as onnxruntime computes it (the oracle; onnx.reference differs: it strips accents, removes
stopwords inside space-separated text and drops empty strings).

Case mapping is per character (C++ towlower / towupper, what onnxruntime's std::ctype<wchar_t> does): a character whose
Python full case mapping is several characters ('ß'.upper() == 'SS') keeps its simple mapping ('İ' -> 'i', 'ᾳ' -> 'ᾼ')
or stays as it is ('ß', 'ŉ', 'ﬁ'). The locale attribute: "C" / "POSIX" map ASCII letters only (C.UTF-8 by
Unicode), tr_* / az_* map i <-> İ and ı <-> I the Turkish way, any other name maps by Unicode (glibc's UTF-8
locales). Unlike onnxruntime, a locale that is not installed on the machine is not an error (onnxruntime refuses the
model; its default, en_US.UTF-8, is not installed here).
"""
from __future__ import annotations

import functools

from onnxep.errors import InvalidArgument
from onnxep.ops._base import OpKernel, attr
from onnxep.ops.tensor._helpers import new_output
from onnxep.ops.text._strings import as_str, object_array

_ACTIONS = ("NONE", "LOWER", "UPPER")
_ASCII_LOWER = {c: c + 32 for c in range(ord("A"), ord("Z") + 1)}
_ASCII_UPPER = {c + 32: c for c in range(ord("A"), ord("Z") + 1)}


@functools.lru_cache(maxsize=4096)
def _char(c: str, upper: bool) -> str:
    full = c.upper() if upper else c.lower()
    if len(full) == 1:
        return full
    if upper:
        t = c.title()
        return t if len(t) == 1 else c
    return full[0] if c == "\u0130" else c    # the one character whose full lowercase is longer: İ -> i + U+0307


class _Case:
    """The case mapping of one locale: lower(s) / upper(s)."""

    def __init__(self, locale: str):
        self.ascii = (locale or "") in ("C", "POSIX")      # C.UTF-8 maps by Unicode
        name = (locale or "").split(".")[0].split("@")[0]
        self.turkic = name[:3].lower() in ("tr_", "az_") or name.lower() in ("tr", "az")

    def map(self, s: str, upper: bool) -> str:
        if self.ascii:
            return s.translate(_ASCII_UPPER if upper else _ASCII_LOWER)
        if self.turkic:
            s = s.replace("i", "\u0130") if upper else s.replace("I", "\u0131")
        m = s.upper() if upper else s.lower()
        if len(m) == len(s):      # full case mappings only ever lengthen: every character mapped to one
            return m
        return "".join(_char(c, upper) for c in s)


class StringNormalizer_10(OpKernel):
    """Y := the elements of X ([C] or [1, C]) that are not stopwords (compared as they are when is_case_sensitive,
    else lowercased in the locale), then lower- or upper-cased as case_change_action says (opset 10). When every
    element is a stopword, Y is [""] of shape [1] ([1, 1] for a [1, C] input), as the spec says. One str method call
    per element (numpy has no faster path for arbitrary str)."""

    domain, op_type, since = "", "StringNormalizer", 10
    stopwords = ()
    locale = ""

    @classmethod
    def check_types(cls, op):
        vt = op.input_types[0] if op.input_types else None
        return vt is not None and vt.kind == "tensor" and vt.type_str == "tensor(string)"

    @classmethod
    def supports(cls, op):
        return attr(op, "case_change_action", "NONE") in _ACTIONS

    def __init__(self, info):
        super().__init__(info)
        self.case = _Case(self.locale)
        stops = [s.decode("utf-8") if isinstance(s, bytes) else s for s in (self.stopwords or ())]
        self.sensitive = bool(self.is_case_sensitive)
        self.stops = frozenset(stops if self.sensitive else (self.case.map(s, False) for s in stops))

    def compute(self, ctx):
        what = f"StringNormalizer node {self.name!r}"
        x = as_str(ctx.input(0), what)
        if not (x.ndim == 1 and x.shape[0] > 0 or x.ndim == 2 and x.shape[0] == 1 and x.shape[1] > 0):
            raise InvalidArgument(f"{what}: the input must have shape [C] or [1, C] with C > 0, got {x.shape}")
        words = x.reshape(-1).tolist()
        if self.stops:
            stops = self.stops
            if self.sensitive:
                words = [w for w in words if w not in stops]
            else:
                low = self.case.map
                words = [w for w in words if low(w, False) not in stops]
        action = self.case_change_action
        if action != "NONE" and words:
            m, up = self.case.map, action == "UPPER"
            words = [m(w, up) for w in words]
        if not words:
            words = [""]
        shape = (len(words),) if x.ndim == 1 else (1, len(words))
        y = new_output(ctx, 0, shape, object, what)
        y[...] = object_array(words, shape)
