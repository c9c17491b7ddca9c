"""The ONNX backend test data, regenerated from the installed onnx's own case generators.

The onnx wheel ships the model cases (data/light, pytorch-converted, pytorch-operator, simple, real) but not the node
cases' data; onnx 1.23.2 builds the node cases in memory from `onnx.backend.test.case.node` on every import (~7 s,
once per process, so once per pytest-xdist worker too). `ensure_data()` writes them once per onnx version into a
cache, in the on-disk layout onnx's runner and onnxruntime's test runner read:

    <cache>/onnx-<version>/node/<case>/model.onnx
    <cache>/onnx-<version>/node/<case>/test_data_set_0/{input,output}_<i>.pb
    <cache>/onnx-<version>/node/<case>/data.json            (rtol, atol)
    <cache>/onnx-<version>/COMPLETE                          (case count; written last)

The serialisation is onnx's own (`onnx.backend.test.cmd_tools.generate_data`, fed the node cases instead of the model
cases, which is what its `generate-data` command did before onnx moved node cases in memory). Concurrent callers
(xdist workers) are safe: the data is built in a temporary folder and renamed into place; the loser of the race
discards its copy.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import tempfile
import warnings

import onnx

CACHE_ROOT = os.environ.get("ONNXEP_CONFORMANCE_DATA",
                            os.path.join(os.path.dirname(os.path.abspath(__file__)), "_data"))


def data_dir(root: str = CACHE_ROOT) -> str:
    return os.path.join(root, f"onnx-{onnx.__version__}")


def _complete(path: str) -> bool:
    return os.path.isfile(os.path.join(path, "COMPLETE"))


def generate(out_dir: str) -> int:
    """Write every node case of the installed onnx under out_dir/node; return the number of cases."""
    import onnx.backend.test.case.model as model_cases
    import onnx.backend.test.case.node as node_cases
    from onnx.backend.test import cmd_tools

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the generators compute overflowing casts and log(0) on purpose
        cases = list(node_cases.collect_testcases())
    names = [c.name for c in cases]
    if len(set(names)) != len(names):
        raise RuntimeError("duplicate node case names in onnx.backend.test.case.node")
    saved = model_cases.collect_testcases
    model_cases.collect_testcases = lambda: cases  # cmd_tools reads its cases from here
    try:
        cmd_tools.generate_data(argparse.Namespace(output=out_dir))
    finally:
        model_cases.collect_testcases = saved
    for c in cases:
        with open(os.path.join(out_dir, c.kind, c.name, "data.json"), "w") as f:
            json.dump({"rtol": c.rtol, "atol": c.atol}, f)
    return len(cases)


def ensure_data(root: str = CACHE_ROOT) -> str:
    """The data folder for the installed onnx version, generated if it is missing or incomplete."""
    path = data_dir(root)
    if _complete(path):
        return path
    os.makedirs(root, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=f".onnx-{onnx.__version__}-", dir=root)
    try:
        n = generate(tmp)
        with open(os.path.join(tmp, "COMPLETE"), "w") as f:
            f.write(f"onnx {onnx.__version__}: {n} node cases\n")
        if os.path.isdir(path) and not _complete(path):
            shutil.rmtree(path, ignore_errors=True)   # a partial folder from an older layout
        try:
            os.rename(tmp, path)
        except OSError:
            if not _complete(path):                   # someone else won the race only if theirs is complete
                raise
    finally:
        if os.path.isdir(tmp):
            shutil.rmtree(tmp, ignore_errors=True)
    return path


def node_case_count(path: str) -> int:
    return len([d for d in os.listdir(os.path.join(path, "node")) if os.path.isdir(os.path.join(path, "node", d))])


if __name__ == "__main__":
    p = ensure_data()
    with contextlib.suppress(OSError):
        print(open(os.path.join(p, "COMPLETE")).read().strip(), "->", p)
