"""The whole ONNX backend suite with the reference fallback off (session.disable_cpu_ep_fallback=1), in a pytest
subprocess (the mode is read at import): every case that is not excluded passes on onnxep's own kernels, control-flow
bodies included. The default run of the suite keeps the fallback on, where a node that silently left the cpu backend
would still pass; this run is what catches it. Oracle: the suite's expected outputs."""
import re

from .count import run
from .exclusions import EXCLUDE


def test_backend_suite_passes_with_the_fallback_off():
    res = run(True, [])
    failed = {**res["failed"], **res["known-fail"]}
    assert not failed, "\n".join(f"{k.rsplit('::', 1)[-1]}: {v}" for k, v in sorted(failed.items())[:20])
    excluded = {k.rsplit("::", 1)[-1] for k in res["excluded"]}
    assert all(any(re.search(p, k) for p in EXCLUDE) for k in excluded), excluded    # only the listed exclusions
    assert len(res["passed"]) >= 2000, len(res["passed"])      # the whole suite ran (2,033 cases in onnx 1.23.2)
