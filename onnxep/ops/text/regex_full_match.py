"""RegexFullMatch: the spec says RE2 syntax; onnxep matches with Python's `re` (fullmatch), translating what differs.

What this kernel does to stay close to RE2 (as onnxruntime runs it):
- compiles with re.ASCII: RE2's \\w \\d \\b are ASCII-only ([0-9A-Za-z_], [0-9], ASCII word boundary), Python's are
  Unicode by default; RE2's \\s is [\\t\\n\\f\\r ] (Python's ASCII \\s adds \\v): \\s and \\S are spelled out;
- translates RE2's \\z (end of text) to Python's \\Z, and the POSIX classes inside a bracket expression
  ([[:alpha:]], [[:digit:]_], ...) to their ASCII ranges;
- refuses (supports() False: the node goes to the fallback; onnxruntime rejects such a model outright) what RE2
  does not accept and Python does: lookaround, backreferences, atomic groups, possessive quantifiers, conditionals,
  comments, the inline flags a L u x, Python's \\Z, a negated POSIX class ([[:^alpha:]]) or \\S inside a bracket
  expression; and what Python cannot compile (\\p{..} Unicode classes, \\Q..\\E, \\C...).

Still different (documented, not refused): with re.ASCII, (?i) folds ASCII letters only (RE2 folds Unicode).
"""
from __future__ import annotations

import functools
import re

import numpy as np

from onnxep.errors import InvalidArgument
from onnxep.ops._base import OpKernel, attr
from onnxep.ops.tensor._helpers import new_output
from onnxep.ops.text._strings import STRING, as_str

_POSIX = {"alnum": "0-9A-Za-z", "alpha": "A-Za-z", "ascii": "\\x00-\\x7f", "blank": "\\t ", "cntrl": "\\x00-\\x1f\\x7f",
          "digit": "0-9", "graph": "!-~", "lower": "a-z", "print": " -~", "punct": "!-/:-@\\[-`{-~",
          "space": "\\t\\n\\v\\f\\r ", "upper": "A-Z", "word": "0-9A-Za-z_", "xdigit": "0-9A-Fa-f"}
_SPACE = "\\t\\n\\f\\r "
_POSIX_RE = re.compile(r"\[:(\^?)([a-z]+):\]")
# constructs Python accepts and RE2 refuses (outside a bracket expression)
_NOT_RE2 = re.compile(r"\(\?(?:=|!|<=|<!|>|\(|P=|#|[a-zA-Z-]*[aLux])|(?:[*+?}])\+")


@functools.lru_cache(maxsize=256)
def translate(pattern: str):
    """The Python equivalent of an RE2 pattern, or None when it has no faithful one (see the module docstring)."""
    out, i, n, in_class, class_start = [], 0, len(pattern), False, False
    while i < n:
        c = pattern[i]
        if c == "\\":
            if i + 1 >= n:
                return None
            e = pattern[i + 1]
            if e.isdigit() and e != "0" and not in_class:
                return None                      # a backreference
            if e == "Z" or e in "pPQEC":
                return None
            if e == "s":                         # RE2's \\s is [\\t\\n\\f\\r ] (Python's ASCII \\s adds \\v)
                out.append(_SPACE if in_class else "[" + _SPACE + "]")
            elif e == "S":
                if in_class:
                    return None
                out.append("[^" + _SPACE + "]")
            else:
                out.append("\\Z" if e == "z" and not in_class else pattern[i:i + 2])
            class_start = False
            i += 2
            continue
        if in_class:
            if c == "[" and pattern.startswith("[:", i):
                m = _POSIX_RE.match(pattern, i)
                if m is None or m.group(1) or m.group(2) not in _POSIX:
                    return None
                out.append(_POSIX[m.group(2)])
                class_start = False
                i = m.end()
                continue
            if c == "]" and not class_start:
                in_class = False
            class_start = False
            out.append(c)
            i += 1
            continue
        if c == "[":
            in_class = True
            out.append(c)
            i += 1
            if i < n and pattern[i] == "^":
                out.append("^")
                i += 1
            class_start = True                  # a ']' right after '[' or '[^' is a literal
            continue
        if _NOT_RE2.match(pattern, i):
            return None
        out.append(c)
        i += 1
    if in_class:
        return None
    try:
        return re.compile("".join(out), re.ASCII)
    except (re.error, OverflowError, RecursionError):
        return None


class RegexFullMatch_20(OpKernel):
    """Y := whether each element of X matches the pattern attribute in full (opset 20). One compiled regex per node;
    a comprehension over the strings (numpy has no faster path for arbitrary str)."""

    domain, op_type, since = "", "RegexFullMatch", 20
    type_constraints = {"T1": STRING, "T2": ("bool",)}

    @classmethod
    def supports(cls, op):
        pattern = attr(op, "pattern")
        return isinstance(pattern, str) and translate(pattern) is not None

    def __init__(self, info):
        super().__init__(info)
        self.regex = translate(self.pattern) if isinstance(getattr(self, "pattern", None), str) else None
        if self.regex is None:
            raise InvalidArgument(f"RegexFullMatch node {self.name!r}: pattern {getattr(self, 'pattern', None)!r} "
                                  f"is not an RE2 pattern this kernel can run")

    def compute(self, ctx):
        what = f"RegexFullMatch node {self.name!r}"
        x = as_str(ctx.input(0), what)
        y = new_output(ctx, 0, x.shape, np.bool_, what)
        if y.size:
            fm = self.regex.fullmatch
            y.reshape(-1)[:] = np.fromiter((fm(s) is not None for s in x.flat), np.bool_, x.size)
