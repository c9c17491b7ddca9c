"""Every kernel variant this machine runs, forced through ONNXEP_ISA in a fresh process, against the generic one, on
whole models whose shapes include 1, primes and sizes just off the micro-kernel tiles (MR = 12 / 6 / 4 rows, NR = 32 /
16 / 8 columns, runs of 16 channels): channel-last conv blocks with folded BatchNormalization and fused residual /
activation epilogues, depthwise + pointwise blocks, pooling, Gemm and batched MatMul with constant weights.

Oracles: onnxruntime's CPU provider for every variant, the generic one included, and the generic variant
(ONNXEP_ISA=generic) for the others; both within the float32 GEMM error bound (rtol 1e-4, atol 1e-5 on these sizes)."""
import os
import subprocess
import sys
import tempfile

import numpy as np
import pytest

from onnxep import _kernels

MODELS = r'''
import sys
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
import onnxep

def models():
    rng = np.random.default_rng(0)
    w = lambda *s: rng.uniform(-0.5, 0.5, s).astype(np.float32)
    for (n, c, h, wd, co) in [(1, 3, 7, 7, 5), (2, 17, 13, 11, 33), (1, 16, 12, 12, 32), (1, 31, 5, 9, 13)]:
        inits = {"w1": w(co, c, 3, 3), "w2": w(co, co, 1, 1), "wd": w(co, 1, 3, 3), "wg": w(co, 7), "s": w(co) + 1,
                 "b": w(co), "m": w(co), "v": np.abs(w(co)) + 0.5}
        nodes = [helper.make_node("Conv", ["x", "w1"], ["c1"], pads=[1, 1, 1, 1]),
                 helper.make_node("BatchNormalization", ["c1", "s", "b", "m", "v"], ["b1"]),
                 helper.make_node("Relu", ["b1"], ["r1"]),
                 helper.make_node("Conv", ["r1", "wd"], ["d1"], pads=[1, 1, 1, 1], group=co),
                 helper.make_node("Relu", ["d1"], ["d2"]),
                 helper.make_node("Conv", ["d2", "w2"], ["c2"]),
                 helper.make_node("Add", ["c2", "r1"], ["a"]),
                 helper.make_node("LeakyRelu", ["a"], ["l"], alpha=0.1),
                 helper.make_node("MaxPool", ["l"], ["p"], kernel_shape=[2, 2], strides=[1, 1]),
                 helper.make_node("AveragePool", ["p"], ["q"], kernel_shape=[2, 2], pads=[0, 0, 1, 1]),
                 helper.make_node("GlobalAveragePool", ["q"], ["g"]),
                 helper.make_node("Flatten", ["g"], ["f"]),
                 helper.make_node("Gemm", ["f", "wg"], ["y"]),
                 helper.make_node("Transpose", ["q"], ["qt"], perm=[0, 2, 3, 1]),
                 helper.make_node("Identity", ["qt"], ["z"])]
        g = helper.make_graph(nodes, "m", [helper.make_tensor_value_info("x", TensorProto.FLOAT, (n, c, h, wd))],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None),
                               helper.make_tensor_value_info("z", TensorProto.FLOAT, None)],
                              [numpy_helper.from_array(v, k) for k, v in inits.items()])
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
        yield m, {"x": rng.uniform(-1, 1, (n, c, h, wd)).astype(np.float32)}
    for (b, m_, k, n) in [(1, 1, 1, 1), (3, 13, 257, 33), (2, 12, 31, 32)]:
        B = rng.uniform(-1, 1, (k, n)).astype(np.float32)
        g = helper.make_graph([helper.make_node("MatMul", ["a", "B"], ["y"])], "mm",
                              [helper.make_tensor_value_info("a", TensorProto.FLOAT, (b, m_, k))],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              [numpy_helper.from_array(B, "B")])
        yield helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), \
            {"a": rng.uniform(-1, 1, (b, m_, k)).astype(np.float32)}
'''

SCRIPT = MODELS + r'''
out = {}
for i, (m, feeds) in enumerate(models()):
    s = onnxep.InferenceSession(m.SerializeToString())
    for j, v in enumerate(s.run(None, feeds)):
        out[f"{i}_{j}"] = v
out["isa"] = np.array(onnxep._kernels.ISA)
np.savez(sys.argv[1], **out)
'''


def _onnxruntime_outputs():
    ort = pytest.importorskip("onnxruntime")
    ns = {}
    exec(MODELS, ns)
    out = {}
    so = ort.SessionOptions()
    so.log_severity_level = 3
    for i, (m, feeds) in enumerate(ns["models"]()):
        s = ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"])
        for j, v in enumerate(s.run(None, feeds)):
            out[f"{i}_{j}"] = v
    return out


def _compare(got, want, what):
    assert set(got) == set(want) and len(want) >= 10, (sorted(got), sorted(want))
    for k in want:
        assert got[k].shape == want[k].shape and got[k].dtype == want[k].dtype, (what, k)
        np.testing.assert_allclose(got[k], want[k], rtol=1e-4, atol=1e-5, err_msg=f"{what}: {k}")


def _run(isa, path):
    r = subprocess.run([sys.executable, "-c", SCRIPT, path], capture_output=True, text=True,
                       env={**os.environ, "ONNXEP_ISA": isa})
    assert r.returncode == 0, r.stderr
    return dict(np.load(path))


@pytest.mark.parametrize("isa", list(_kernels.AVAILABLE))
def test_forced_isa_matches_onnxruntime_and_generic_on_models(isa):
    want = _onnxruntime_outputs()
    with tempfile.TemporaryDirectory() as d:
        got = _run(isa, os.path.join(d, "v.npz"))
        gen = _run("generic", os.path.join(d, "g.npz")) if isa != "generic" else None
    assert str(got.pop("isa")) == isa
    _compare(got, want, f"{isa} vs onnxruntime")
    if gen is not None:
        assert str(gen.pop("isa")) == "generic"
        _compare(got, gen, f"{isa} vs generic")
