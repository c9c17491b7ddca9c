"""Cases of the ONNX backend suite that cannot pass, each with a one-line reason.

Keys are regular expressions searched in the test name (`test_<case>_cpu`). Only list a case that cannot pass for the
stated reason; a case that fails for a fixable reason in onnxep stays in the suite and counts as failed."""

#: Excluded in every run.
EXCLUDE: dict[str, str] = {
}

#: Excluded only with --no-fallback (none: with the fallback off, a case whose node the cpu backend lacks is a plain
#: failure, which is the number that run measures).
NO_FALLBACK_EXCLUDE: dict[str, str] = {}
