"""Options and the totals line of the ONNX backend conformance suite.

    --no-fallback               run with session.disable_cpu_ep_fallback=1 (same as ONNXEP_CONFORMANCE_NO_FALLBACK=1)
    --conformance-report=PATH   write {"passed": [...], "failed": {name: message}, "excluded": {name: reason}} as JSON
"""
from __future__ import annotations

import json
import os
from collections import Counter

_MODULE = "test_onnx_backend.py"
#: outcomes of this session's conformance cases (filled in the process that reports: the controller under xdist)
_RESULTS = {"passed": [], "failed": {}, "known-fail": {}, "excluded": {}, "skipped": {}}


def pytest_addoption(parser):
    group = parser.getgroup("onnxep conformance")
    group.addoption("--no-fallback", action="store_true", default=False,
                    help="ONNX backend suite: disable the reference fallback (cpu backend only)")
    group.addoption("--conformance-report", default=None, metavar="PATH",
                    help="ONNX backend suite: write per-case outcomes as JSON to PATH")


def pytest_configure(config):
    if config.getoption("--no-fallback", default=False):
        os.environ["ONNXEP_CONFORMANCE_NO_FALLBACK"] = "1"


def _case(report):
    return report.nodeid.rsplit("::", 1)[-1]


def _category(nodeid: str) -> str:
    parts = nodeid.split("::")
    return parts[-2].replace("OnnxBackend", "").replace("ModelTest", "") if len(parts) >= 3 else "?"


def pytest_runtest_logreport(report):
    if _MODULE not in report.nodeid:
        return
    res = _RESULTS
    name = report.nodeid
    if report.when == "call" and report.passed:
        res["passed"].append(name)
    elif report.failed:
        msg = str(report.longrepr).strip().splitlines()
        res["failed"][name] = msg[-1][:300] if msg else ""
    elif report.skipped and hasattr(report, "wasxfail"):
        res["known-fail"][name] = "expected failure (exclusions.KNOWN_FAILING)"
    elif report.skipped:
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        reason = reason.replace("Skipped: ", "")
        (res["excluded"] if reason.startswith("excluded:") else res["skipped"])[name] = reason


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    res = _RESULTS
    if not (res["passed"] or res["failed"] or res["excluded"] or res["skipped"]):
        return
    mode = "fallback OFF (cpu backend only)" if os.environ.get("ONNXEP_CONFORMANCE_NO_FALLBACK") == "1" \
        else "fallback on (reference backend for unsupported nodes)"
    tr = terminalreporter
    tr.section("ONNX backend conformance (onnx backend test suite)")
    cats = sorted({_category(n) for k in res for n in res[k]})
    counts = {k: Counter(_category(n) for n in res[k]) for k in res}
    tr.write_line(f"mode: {mode}")
    keys = ("passed", "failed", "known-fail", "excluded", "skipped")
    tr.write_line(f"{'kind':<18}" + "".join(f"{k:>11}" for k in keys) + f"{'total':>8}")
    for c in cats:
        row = [counts[k][c] for k in keys]
        tr.write_line(f"{c:<18}" + "".join(f"{v:>11}" for v in row) + f"{sum(row):>8}")
    tot = [len(res[k]) for k in keys]
    tr.write_line(f"{'TOTAL':<18}" + "".join(f"{v:>11}" for v in tot) + f"{sum(tot):>8}")
    tr.write_line("known-fail: expected failures listed in exclusions.KNOWN_FAILING (not counted as passed)")
    path = config.getoption("--conformance-report", default=None)
    if path:
        with open(path, "w") as f:
            json.dump(res, f, indent=1, sort_keys=True)
        tr.write_line(f"per-case outcomes written to {path}")
