"""Cases of the ONNX backend suite that no implementation can pass, each with a one-line reason.

Keys are regular expressions searched in the test name (`test_<case>_cpu`). Only list a case that no runtime can pass
(onnxruntime fails it too): a case that fails for a reason fixable in onnxep stays in the suite and counts as failed.
KNOWN_FAILING is empty: every case not excluded here passes with the fallback on."""

#: Excluded in every run.
EXCLUDE: dict[str, str] = {
    r"^test_bernoulli": "Bernoulli's output is random; the expected data is one numpy draw no runtime reproduces",
}

#: Expected to fail until a cpu kernel lands; applied as strict expected failures (fallback on only), so the run stays
#: green and a case that starts passing fails loudly ("unexpected success"): then delete its line here.
KNOWN_FAILING: dict[str, str] = {
}

#: Excluded only with --no-fallback (none: with the fallback off, a case whose node the cpu backend lacks is a plain
#: failure, which is the number that run measures).
NO_FALLBACK_EXCLUDE: dict[str, str] = {}
