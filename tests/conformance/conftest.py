"""Options and the totals line of the ONNX backend conformance suite.

    --no-fallback               run with session.disable_cpu_ep_fallback=1 (same as ONNXEP_CONFORMANCE_NO_FALLBACK=1)
    --conformance-report=PATH   write {"passed": [...], "failed": {name: message}, "excluded": {name: reason},
                                "on-reference": {passed name: {op type: nodes on the reference backend}}} as JSON

The totals say how many passes ran nodes on the reference backend: onnx generates most node cases' expected outputs
with onnx.reference itself, so such a pass does not test onnxep's kernels. The table under them lists, per op type, the
passing cases that ran it there (what the native op coverage still lacks).
"""
from __future__ import annotations

import json
import os
from collections import Counter

import pytest

from . import _placement

_MODULE = "test_onnx_backend.py"
#: outcomes of this session's conformance cases (filled in the process that reports: the controller under xdist)
_RESULTS = {"passed": [], "failed": {}, "known-fail": {}, "excluded": {}, "skipped": {}}
#: passed case -> {op type: nodes it placed on the reference backend, "(cpu nodes)": nodes on the cpu backend} (only
#: cases with at least one node on the reference backend)
_ON_REFERENCE: dict[str, dict] = {}


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


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """Move what the case's sessions placed on the reference backend onto its call report (user_properties travel
    from an xdist worker to the controller)."""
    outcome = yield
    if call.when == "call" and _MODULE in item.nodeid:
        ops = _placement.pop(item.nodeid)
        if ops and set(ops) != {_placement.CPU_NODES}:
            outcome.get_result().user_properties.append(("on_reference", dict(ops)))


def pytest_runtest_logreport(report):
    if _MODULE not in report.nodeid:
        return
    res = _RESULTS
    name = report.nodeid
    if report.when == "call" and report.passed:
        res["passed"].append(name)
        ops = dict(report.user_properties).get("on_reference")
        if ops:
            _ON_REFERENCE[name] = ops
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
    for line in reference_lines(len(res["passed"]), _ON_REFERENCE):
        tr.write_line(line)
    path = config.getoption("--conformance-report", default=None)
    if path:
        with open(path, "w") as f:
            json.dump({**res, "on-reference": _ON_REFERENCE}, f, indent=1, sort_keys=True)
        tr.write_line(f"per-case outcomes written to {path}")


def _is_expanded(nodeid: str) -> bool:
    """A node case that runs an op's function body (test_<op>_expanded_cpu, test_<op>_expanded_ver18_cpu, ...)."""
    return "_expanded" in nodeid.rsplit("::", 1)[-1]


def reference_split(n_passed: int, on_reference: dict) -> dict:
    """How many passes ran nodes on the reference backend: with any node there (`on_reference`), of them not
    _expanded (`not_expanded`), with every node there (`wholly`), and with every node on the cpu backend (`cpu_only`)."""
    cpu = _placement.CPU_NODES
    return {"on_reference": len(on_reference), "not_expanded": sum(1 for n in on_reference if not _is_expanded(n)),
            "wholly": sum(1 for ops in on_reference.values() if not ops.get(cpu)),
            "cpu_only": n_passed - len(on_reference)}


def reference_lines(n_passed: int, on_reference: dict, columns: int = 4) -> list:
    """The totals line about the reference backend and the per-op table (op type -> passing cases that ran it
    there), most cases first."""
    r = reference_split(n_passed, on_reference)
    lines = [f"passed {n_passed:,} (of which {r['on_reference']:,} with nodes on onnx.reference, "
             f"{r['not_expanded']:,} of them not _expanded, {r['wholly']:,} wholly on it; {r['cpu_only']:,} on the "
             f"cpu backend alone)"]
    if not on_reference:
        return lines
    per_op = Counter(op for ops in on_reference.values() for op in ops if op != _placement.CPU_NODES)
    lines.append(f"op types on the reference backend in passing cases ({len(per_op)}; op: cases):")
    cells = [f"{op} {n}" for op, n in sorted(per_op.items(), key=lambda kv: (-kv[1], kv[0]))]
    width = max(len(c) for c in cells) + 2
    for i in range(0, len(cells), columns):
        lines.append("  " + "".join(f"{c:<{width}}" for c in cells[i:i + columns]).rstrip())
    return lines
