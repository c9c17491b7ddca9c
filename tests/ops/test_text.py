"""The string ops: StringNormalizer, StringConcat, StringSplit, RegexFullMatch, on the cpu backend (fallback off).
Oracle: onnxruntime 1.32 (StringNormalizer with locale "C.UTF-8" or "C": its default en_US.UTF-8 is not installed on
this machine and onnxruntime refuses a locale it cannot construct; the Turkish-locale case has hand-written expected
values, no oracle having that locale here). onnx.reference is not an oracle for StringNormalizer (it strips accents
and drops empty strings) nor for StringSplit's edge cases (empty strings, whitespace other than ' ')."""
import numpy as np
import pytest

import onnxep
from onnxep.errors import Fail, InvalidArgument
from tests.ops._tensor_cases import cpu_session, model, ort, same

S = lambda *v: np.array(v, object)  # noqa: E731
WORDS = S("Monday", "", "straße", "İstanbul", "MONDAY", "a b", "Éclair", "ǅ", "ﬁ", "ŉ", "ᾳ", "Σ", "ⓐ", "Ⅻ", "x y")


def _any_rank(m):
    """m with its inputs of unknown rank (so a run may feed any shape)."""
    for i in m.graph.input:
        i.type.tensor_type.ClearField("shape")
    return m


def _check(op, ins, n_out=1, opset=20, **attrs):
    m = model(op, ins, n_out, opset, **attrs)
    got = cpu_session(m).run(None, ins)
    want = ort(m, ins)
    assert want is not None
    same(got, want)
    return got


# ------------------------------------------------------------------------------------------------ StringNormalizer
@pytest.mark.parametrize("locale", ["C.UTF-8", "C"])
@pytest.mark.parametrize("action", ["NONE", "LOWER", "UPPER"])
@pytest.mark.parametrize("sensitive", [0, 1])
@pytest.mark.parametrize("two_d", [False, True])
def test_string_normalizer(locale, action, sensitive, two_d):
    x = WORDS[None] if two_d else WORDS
    _check("StringNormalizer", {"x": x}, opset=10, case_change_action=action, is_case_sensitive=sensitive,
           stopwords=["monday", "ǆ", "ⓐ", "X Y", ""], locale=locale)


@pytest.mark.parametrize("two_d", [False, True])
def test_string_normalizer_all_stopwords(two_d):
    """Every element dropped: [""] of shape [1] (or [1, 1]), as the spec says."""
    x = S("monday", "MONDAY", "Monday")
    got = _check("StringNormalizer", {"x": x[None] if two_d else x}, opset=10, case_change_action="UPPER",
                 stopwords=["monday"], locale="C.UTF-8")
    assert got[0].shape == ((1, 1) if two_d else (1,))


def test_string_normalizer_no_stopwords_default_locale():
    got = cpu_session(model("StringNormalizer", {"x": WORDS}, opset=10, case_change_action="LOWER")).run(
        None, {"x": WORDS})[0]
    want = _check("StringNormalizer", {"x": WORDS}, opset=10, case_change_action="LOWER", locale="C.UTF-8")[0]
    same([got], [want])


def test_string_normalizer_turkish():
    """tr_TR: i <-> İ and ı <-> I (hand-written expected values)."""
    x = S("istanbul", "IĞDIR", "İzmir", "ılık")
    m = model("StringNormalizer", {"x": x}, opset=10, case_change_action="UPPER", locale="tr_TR.UTF-8")
    same(cpu_session(m).run(None, {"x": x}), [S("İSTANBUL", "IĞDIR", "İZMİR", "ILIK")])
    m = model("StringNormalizer", {"x": x}, opset=10, case_change_action="LOWER", locale="tr_TR.UTF-8")
    same(cpu_session(m).run(None, {"x": x}), [S("istanbul", "ığdır", "izmir", "ılık")])


def test_string_normalizer_bad_shape():
    """[2, C] and [0] inputs: InvalidArgument naming the node; the session still runs."""
    x = S("a", "b")
    m = _any_rank(model("StringNormalizer", {"x": x}, opset=10, case_change_action="UPPER"))
    sess = cpu_session(m)
    for bad in (np.array([["a"], ["b"]], object), S()):
        with pytest.raises(InvalidArgument, match=r"stringnormalizer_0.*\[C\] or \[1, C\]"):
            sess.run(None, {"x": bad})
    same(sess.run(None, {"x": x}), [S("A", "B")])


# ------------------------------------------------------------------------------------------------ StringConcat
@pytest.mark.parametrize("a,b", [
    (S("abc", "", "的"), S("", "x", "中")),
    (S("cat", "dog"), S("s")),
    (np.array([["a"], ["b"]], object), S("1", "2", "3")),
    (np.array("cat", object), np.array("s", object)),
    (np.zeros((0, 2), object), S("x", "y")),
])
def test_string_concat(a, b):
    _check("StringConcat", {"a": a, "b": b})


def test_string_concat_bad_and_bomb():
    m = _any_rank(model("StringConcat", {"a": S("a"), "b": S("b")}, opset=20))
    sess = cpu_session(m)
    with pytest.raises(InvalidArgument, match="stringconcat_0.*cannot be broadcast"):
        sess.run(None, {"a": S("a", "b"), "b": S("a", "b", "c")})
    big = np.full((1 << 20, 1), "a", object)
    with pytest.raises(Fail, match="stringconcat_0.*over the"):
        sess.run(None, {"a": big, "b": big.reshape(1, -1)})
    same(sess.run(None, {"a": S("a"), "b": S("b")}), [S("ab")])


# ------------------------------------------------------------------------------------------------ StringSplit
X_SPLIT = np.array([["", "  a  b ", "a..b.", "."], ["a\u3000b\x1cc", "a  b  c ", "\ta\vb\fc", "o-n-n--x-"]], object)


@pytest.mark.parametrize("attrs", [{}, dict(delimiter="."), dict(delimiter=".", maxsplit=0), dict(maxsplit=0),
                                   dict(maxsplit=1), dict(maxsplit=2), dict(delimiter="..", maxsplit=-1),
                                   dict(delimiter=".", maxsplit=-2), dict(delimiter=" "), dict(delimiter="-"),
                                   dict(delimiter="", maxsplit=1)])
def test_string_split(attrs):
    _check("StringSplit", {"x": X_SPLIT}, n_out=2, **attrs)
    _check("StringSplit", {"x": X_SPLIT[0]}, n_out=2, **attrs)


@pytest.mark.parametrize("x", [S(), np.zeros((2, 0), object), S("", ""), np.array("a b", object)])
def test_string_split_empty_and_scalar(x):
    _check("StringSplit", {"x": x}, n_out=2)


def test_string_split_bomb():
    """The padded output is (elements, longest split): its size, from the data, is checked before it is allocated."""
    m = model("StringSplit", {"x": S("a b")}, n_out=2, opset=20, dynamic=True)
    sess = cpu_session(m)
    x = np.full(1 << 20, "", object)
    x[0] = "a " * 140000
    with pytest.raises(Fail, match=r"stringsplit_0.*\(1048576, 140000\).*over the"):
        sess.run(None, {"x": x})
    same(sess.run(None, {"x": S("a b")}), [np.array([["a", "b"]], object), np.array([2], np.int64)])


# ------------------------------------------------------------------------------------------------ RegexFullMatch
X_RE = np.array(["www.google.com", "account@gmail.com", "héllo", "abc_12", "ABC", "a\nb", "é", "12:30", "",
                 "x y", "[a]", "\x0b"], object)


@pytest.mark.parametrize("pattern", [
    r"www\.[\w.-]+\.\bcom\b", r"(\W|^)[\w.\-]{0,25}@(yahoo|gmail)\.com(\W|$)", r"\w+", r"h\w+o", r"[[:alpha:]_0-9]+",
    r"[[:digit:]]+:[[:digit:]]{2}", r"(?i)abc", r"abc\z", r"a.b", r"(?s)a.b", r"\S+", r"\s", r"[]a]+|\[a\]", r"",
    r"[^[:lower:]]+", r"(?P<n>x) y", r"\d+:\d+", r"(?U)ab*",
])
def test_regex_full_match(pattern):
    m = model("RegexFullMatch", {"x": X_RE}, opset=20, pattern=pattern)
    want = ort(m, {"x": X_RE})
    if pattern == r"(?U)ab*":   # RE2's ungreedy flag: Python has none, the node is refused (fallback)
        assert onnxep.InferenceSession(m.SerializeToString()).node_assignment["regexfullmatch_0"] == "reference"
        return
    got = cpu_session(m).run(None, {"x": X_RE})
    same(got, want)
    x2 = X_RE.reshape(3, 4)
    same(cpu_session(model("RegexFullMatch", {"x": x2}, opset=20, pattern=pattern)).run(None, {"x": x2})[0:1],
         [got[0].reshape(3, 4)])


@pytest.mark.parametrize("pattern", [r"a(?=b)", r"(a)\1", r"(?>a)", r"a++", r"\p{L}+", r"\Qa.b\E", r"a\Z",
                                     r"[[:^alpha:]]", r"[[:nope:]]", r"[\S]", r"(?x) a", r"(unclosed", r"(?#c)a"])
def test_regex_refused(pattern):
    """Patterns RE2 rejects or Python cannot compile: the cpu backend refuses the node (the fallback takes it, or
    with the fallback off the session says the node is not supported)."""
    m = model("RegexFullMatch", {"x": X_RE}, opset=20, pattern=pattern)
    with pytest.raises(onnxep.NotImplemented, match="regexfullmatch_0"):
        cpu_session(m)


def test_regex_empty_input():
    _check("RegexFullMatch", {"x": np.zeros((2, 0), object)}, pattern="a+")
