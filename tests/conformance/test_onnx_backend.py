"""The ONNX backend conformance suite (onnx.backend.test.BackendTest) over onnxep, tinygrad
external_test_onnx_backend.py style. Oracle: the expected outputs onnx ships or generates for each case (computed by
onnx's own numpy implementations), compared with onnx's assert_similar_outputs (shape, dtype, rtol/atol per case).

Case kinds (onnx 1.23.2, 2,033 cases, one test each, device CPU):
  node               1,884  regenerated once per onnx version into tests/conformance/_data (see _data.py)
  pytorch-converted     82  shipped in the onnx wheel
  pytorch-operator      35  shipped in the onnx wheel
  simple                23  shipped in the onnx wheel
  real (light)           9  the light model-zoo models shipped in the wheel (onnx/backend/test/data/light), run on
                            onnx's dummy input with the shipped expected outputs; nothing is downloaded
onnx's runner also adds a `_cuda` twin of every case; onnxep is CPU-only, so those are not generated at all.

Fallback: by default nodes the cpu backend does not support run on the reference backend. `--no-fallback` (or
ONNXEP_CONFORMANCE_NO_FALLBACK=1) sets session.disable_cpu_ep_fallback=1, so a case passes only if every node runs on
the cpu backend. `python -m tests.conformance.count [--no-fallback|--both]` prints the totals.

Passes on the reference backend: onnx computes most node cases' expected outputs with numpy code of its own or with
onnx.reference itself, so a case whose nodes ran on onnx.reference says little about onnxep. ConformanceBackend records
per case which nodes the session placed there (_placement.py); the summary (conftest.py) counts those passes (any
node, not _expanded, every node) and tabulates their op types.

exclusions.py lists the excluded cases: only those no runtime can pass (Bernoulli's unseeded random output), each
with its reason. Its KNOWN_FAILING (strict expected failures)
is empty: every other case passes with the fallback on.

onnx's comparison of sequence outputs is replaced (Runner.assert_similar_outputs): it fails on a 0-d element and does
not check a sequence's length."""
from __future__ import annotations

import json
import os
import re
import unittest

import numpy as np
from onnx.backend.test import BackendTest
from onnx.backend.test.case.test_case import TestCase
from onnx.backend.test.loader import load_model_tests

from onnxep.onnx_backend import OnnxepBackend

from . import _data, _placement
from .exclusions import EXCLUDE, KNOWN_FAILING, NO_FALLBACK_EXCLUDE

NO_FALLBACK = os.environ.get("ONNXEP_CONFORMANCE_NO_FALLBACK", "").strip() == "1"
DATA = _data.ensure_data()
# onnx's runner writes the light models' dummy inputs and expected outputs under $ONNX_MODELS (default ~/.onnx):
# keep them in the cache instead of the user's home.
os.environ.setdefault("ONNX_MODELS", os.path.join(DATA, "light-models"))


class ConformanceBackend(OnnxepBackend):
    @classmethod
    def prepare(cls, model, device="CPU", **kwargs):
        if NO_FALLBACK:
            kwargs.setdefault("session.disable_cpu_ep_fallback", "1")
        rep = super().prepare(model, device, **kwargs)
        _placement.record(rep.session)  # for the summary: did this case run nodes on onnx.reference?
        return rep


def _node_cases(path: str) -> list[TestCase]:
    """The node cases from the regenerated data (onnx's loader only builds them in memory)."""
    root = os.path.join(path, "node")
    cases = []
    for name in sorted(os.listdir(root)):
        case_dir = os.path.join(root, name)
        with open(os.path.join(case_dir, "data.json")) as f:
            tol = json.load(f)
        cases.append(TestCase(name=name, model_name=name, url=None, model_dir=case_dir, model=None, data_sets=None,
                              kind="node", rtol=tol["rtol"], atol=tol["atol"]))
    return cases


class Runner(BackendTest):
    """onnx's Runner with the node cases read from the regenerated data, CPU cases only, and exclusions that carry
    their reason into the skip message."""

    def __init__(self, backend, data_path, parent_module=None):  # noqa: D107 (same fields as onnx's Runner)
        from collections import defaultdict
        self.backend = backend
        self._parent_module = parent_module
        self._include_patterns = set()
        self._exclude_patterns = set()
        self._xfail_patterns = set()
        self._test_kwargs = {}
        self._test_items = defaultdict(dict)
        self._excluded = []             # (compiled pattern, reason)
        for kind, category in (("node", "Node"), ("real", "Real"), ("simple", "Simple"),
                               ("pytorch-converted", "PyTorchConverted"), ("pytorch-operator", "PyTorchOperator")):
            cases = _node_cases(data_path) if kind == "node" else load_model_tests(kind=kind)
            for case in cases:
                self._add_model_test(case, category)

    @classmethod
    def assert_similar_outputs(cls, ref_outputs, outputs, rtol, atol, model_dir=None):
        """onnx's comparison, also for sequence outputs: it recurses into a sequence with each element standing for
        a list of outputs, so a 0-d element fails on len() and a tensor element is compared row by row. Compare an
        element as a one-output list instead (shape, dtype and values as a whole)."""
        if isinstance(ref_outputs, np.ndarray) and isinstance(outputs, np.ndarray):
            ref_outputs, outputs = [ref_outputs], [outputs]
        elif isinstance(ref_outputs, (list, tuple)) and isinstance(outputs, (list, tuple)):
            for i, (r, o) in enumerate(zip(ref_outputs, outputs)):
                if isinstance(r, (list, tuple)) and isinstance(o, (list, tuple)) and len(r) != len(o):
                    raise AssertionError(f"output {i}: a sequence of {len(o)} elements, expected {len(r)}")
        super().assert_similar_outputs(ref_outputs, outputs, rtol, atol, model_dir=model_dir)

    def _add_test(self, category, test_name, test_func, report_item, devices=("CPU",), **kwargs):
        super()._add_test(category, test_name, test_func, report_item, devices=("CPU",), **kwargs)

    def exclude_with_reason(self, pattern: str, reason: str):
        self._excluded.append((re.compile(pattern), reason))
        return self

    @property
    def _filtered_test_items(self):
        filtered = super()._filtered_test_items
        for items in filtered.values():
            for name, item in items.items():
                reasons = [r for p, r in self._excluded if p.search(name)]
                if reasons:
                    item.func = unittest.skip(f"excluded: {'; '.join(reasons)}")(item.func)
        return filtered


backend_test = Runner(ConformanceBackend, DATA, __name__)
for _pattern, _reason in EXCLUDE.items():
    backend_test.exclude_with_reason(_pattern, _reason)
if NO_FALLBACK:
    for _pattern, _reason in NO_FALLBACK_EXCLUDE.items():
        backend_test.exclude_with_reason(_pattern, _reason)
else:  # with the fallback off these fail anyway, among all the others; count them as plain failures there
    for _pattern in KNOWN_FAILING:
        backend_test.xfail(_pattern)

globals().update(backend_test.test_cases)

