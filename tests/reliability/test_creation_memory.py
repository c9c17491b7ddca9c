"""Session creation holds each weight about once: a fresh process that creates a session of a large-weight model and
runs it peaks at less than twice the model's weight bytes above its RSS right after the imports (issue 25 item 5).

The model is a chain of four MatMuls by 3584 x 3584 float32 random weights (~205 MB of weights, built here), loaded
from its file, from its file with external data, and from bytes. Before loading read the weights straight into arrays
of their own, a process held the file's bytes, the parsed message, shape inference's copy and numpy's copy of every
weight at once (5x its weight bytes on VGG-19). Oracle: the weight bytes. Each case runs in its own subprocess (peak
RSS is per process); the outputs are checked against numpy. No timing is asserted."""
import json
import os
import subprocess
import sys

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
N = 3584            # 4 weights of N x N float32: 205.5 MB
LAYERS = 4

CHILD = r"""
import json, os, sys
sys.path.insert(0, sys.argv[1])
import numpy as np
import onnxep

def status(key):
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith(key + ":")) * 1024

path, mode = sys.argv[2], sys.argv[3]
source = path
if mode == "bytes":
    with open(path, "rb") as f:
        source = f.read()          # the caller's bytes: part of the baseline, as a caller holding them
base = status("VmRSS")
sess = onnxep.InferenceSession(source)
x = np.random.default_rng(1).standard_normal((2, %d)).astype(np.float32)
y = sess.run(None, {"x": x})[0]
print(json.dumps({"base": base, "peak": status("VmHWM"), "y": y[:, :8].tolist(), "x": x[:, :8].tolist()}))
""" % N


@pytest.fixture(scope="module")
def chain(tmp_path_factory):
    """(folder, weights): the MatMul chain saved as chain.onnx (weights inline) and chain_ext.onnx (weights in
    chain_ext.bin)."""
    folder = tmp_path_factory.mktemp("creation_memory")
    rng = np.random.default_rng(0)
    weights = [(rng.standard_normal((N, N), dtype=np.float32) / np.float32(np.sqrt(N))) for _ in range(LAYERS)]
    nodes = [helper.make_node("MatMul", ["x" if i == 0 else f"h{i}", f"w{i}"],
                              ["y" if i == LAYERS - 1 else f"h{i + 1}"]) for i in range(LAYERS)]
    graph = helper.make_graph(nodes, "chain", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", N])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", N])],
                              [numpy_helper.from_array(w, f"w{i}") for i, w in enumerate(weights)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.save(model, str(folder / "chain.onnx"))
    onnx.save(model, str(folder / "chain_ext.onnx"), save_as_external_data=True, location="chain_ext.bin",
              size_threshold=1024)
    del model, graph
    return folder, weights


@pytest.mark.parametrize("mode", ["path", "external", "bytes"])
def test_creation_peak_under_twice_the_weights(chain, mode):
    folder, weights = chain
    path = folder / ("chain_ext.onnx" if mode == "external" else "chain.onnx")
    r = subprocess.run([sys.executable, "-c", CHILD, ROOT, str(path), mode], capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    out = json.loads(r.stdout.strip().splitlines()[-1])
    weight_bytes = sum(w.nbytes for w in weights)
    added = out["peak"] - out["base"]
    assert added < 2 * weight_bytes, (f"{mode}: creating and running the session peaked {added / 1e6:.0f} MB above "
                                      f"the baseline, {added / weight_bytes:.2f}x the {weight_bytes / 1e6:.0f} MB of "
                                      f"weights (limit 2x)")
    # the session computes the chain (oracle: numpy, in float64)
    x = np.random.default_rng(1).standard_normal((2, N)).astype(np.float32)
    want = x.astype(np.float64)
    for w in weights:
        want = want @ w.astype(np.float64)
    np.testing.assert_allclose(np.array(out["y"]), want[:, :8], rtol=1e-3, atol=1e-3)


IMPORTS = r"""
import sys
sys.path.insert(0, sys.argv[1])
import onnxep
import numpy as np
from onnx import TensorProto, helper
print(sorted(m for m in sys.modules if m == "onnx.reference" or m.startswith("onnx.reference.")))
g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
                      [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3])],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3])])
m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
onnxep.InferenceSession(m.SerializeToString()).run(None, {"x": np.array([-1, 0, 2], np.float32)})
print(sorted(m for m in sys.modules if m == "onnx.reference" or m.startswith("onnx.reference.")))
so = onnxep.SessionOptions()
so.add_session_config_entry("onnxep.fallback_op_types", "Relu")
y, = onnxep.InferenceSession(m.SerializeToString(), so).run(None, {"x": np.array([-1, 0, 2], np.float32)})
print(y.tolist(), "onnx.reference" in sys.modules)
"""


def test_onnx_reference_imported_only_by_a_fallback():
    """Importing onnxep, and creating and running a session whose nodes all run natively, leave onnx.reference (about
    200 modules, ~12 MB of RSS) unimported; a node on the reference backend imports it and runs (oracle: Relu)."""
    r = subprocess.run([sys.executable, "-c", IMPORTS, ROOT], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    lines = r.stdout.strip().splitlines()
    assert lines[-3:] == ["[]", "[]", "[0.0, 0.0, 2.0] True"]
