"""Print the ONNX backend suite's totals (passed / failed / excluded), with or without the reference fallback.

    python -m tests.conformance.count                 # fallback on (the default session)
    python -m tests.conformance.count --no-fallback   # cpu backend only (session.disable_cpu_ep_fallback=1)
    python -m tests.conformance.count --both          # one run each way, then both totals
    python -m tests.conformance.count -- -k conv      # extra pytest arguments after --

Run from the repository root. Each way runs the suite in a fresh pytest process (the fallback mode is read at
import), writes per-case outcomes to a JSON report and prints the table of conftest.py's summary hook (with the
per-op table of what ran on the reference backend). The totals say how many passes ran nodes on onnx.reference: onnx
computes most expected outputs with onnx.reference itself, so those passes do not test onnxep's kernels."""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

from .conftest import reference_split

HERE = os.path.dirname(os.path.abspath(__file__))


def run(no_fallback: bool, extra: list) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        report = os.path.join(tmp, "report.json")
        cmd = [sys.executable, "-m", "pytest", os.path.join(HERE, "test_onnx_backend.py"), "-q", "-p",
               "no:cacheprovider", "--no-header", "-rN", "--tb=no", f"--conformance-report={report}", *extra]
        if no_fallback:
            cmd.append("--no-fallback")
        proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        lines = proc.stdout.splitlines()
        start = next((i for i, ln in enumerate(lines) if "ONNX backend conformance" in ln), None)
        if start is None or not os.path.exists(report):
            sys.stdout.write(proc.stdout)
            raise SystemExit(f"pytest did not run the suite (exit code {proc.returncode})")
        for ln in lines[start:]:
            if ln.startswith("per-case outcomes") or ln.startswith("="):
                if ln.startswith("=") and ln is not lines[start]:
                    break
                continue
            print(ln)
        with open(report) as f:
            return json.load(f)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.conformance.count", description=__doc__.splitlines()[0])
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--no-fallback", action="store_true", help="cpu backend only")
    mode.add_argument("--both", action="store_true", help="run with and without the fallback")
    ap.add_argument("--list-failed", action="store_true", help="print the names of the failed cases")
    ap.add_argument("pytest_args", nargs="*", help="extra pytest arguments (after --)")
    args = ap.parse_args(argv)
    modes = [False, True] if args.both else [args.no_fallback]
    totals, refs = {}, {}
    for nf in modes:
        res = run(nf, args.pytest_args)
        label = "fallback off" if nf else "fallback on"
        on_ref = res.pop("on-reference", {})
        totals[label] = {k: len(v) for k, v in res.items()}
        refs[label] = reference_split(len(res["passed"]), on_ref)
        if args.list_failed:
            for name in sorted({**res["failed"], **res["known-fail"]}):
                print("  FAILED", name.rsplit("::", 1)[-1], "|", res["failed"].get(name) or res["known-fail"][name])
        print()
    for label, t in totals.items():
        r = refs[label]
        print(f"{label:>13}: {t['passed']} passed ({r['on_reference']} with nodes on onnx.reference, "
              f"{r['not_expanded']} of them not _expanded, {r['wholly']} wholly), {t['failed'] + t['known-fail']} "
              f"failed (of which {t['known-fail']} known, exclusions.KNOWN_FAILING), {t['excluded']} excluded, "
              f"{t['skipped']} skipped, {sum(t.values())} cases")
    return 0


if __name__ == "__main__":
    sys.exit(main())
