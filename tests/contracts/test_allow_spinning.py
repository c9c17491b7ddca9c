"""session.intra_op.allow_spinning (onnxruntime's session config entry; onnxep/session.py allow_spinning, the CPU
backend's spin_us, _native/threads.h onnxep_caller_spin_ns): "0" -- the pool's workers sleep right after a job of
the session instead of spinning for the next; "1" (default) -- they spin ONNXEP_SPIN_US first.

Oracles: numpy for the outputs (a MatMul big enough to be split over two threads), the pool's own counters
(_kernels.pool_stats: waits that spun, waits that slept), and onnxruntime's accepted values ("0", "1")."""
import os
import time

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import onnxep
from onnxep import _kernels
from tests._util import wait_for

N = 256          # 2 * N^3 = 34 MFLOP: far above the GEMM's two-thread break-even (SGEMM_MT_FLOPS)


def _session(spin=None):
    rng = np.random.default_rng(0)
    w = rng.standard_normal((N, N)).astype(np.float32)
    g = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"])], "mm",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [N, N])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [N, N])],
                          [numpy_helper.from_array(w, "w")])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=9).SerializeToString()
    so = onnxep.SessionOptions()
    so.intra_op_num_threads = 2
    if spin is not None:
        so.add_session_config_entry("session.intra_op.allow_spinning", spin)
    return onnxep.InferenceSession(model, so), w


def _run_checked(sess, w, x):
    (y,) = sess.run(None, {"x": x})
    np.testing.assert_allclose(y, x @ w, rtol=1e-4, atol=1e-3 * N ** 0.5)


@pytest.mark.skipif((os.cpu_count() or 1) < 2 or _kernels.max_threads() < 2, reason="needs two threads")
def test_allow_spinning_0_workers_do_not_spin():
    """Runs of an allow_spinning=0 session leave the worker asleep between parallel steps (no wait of it spins);
    a default session's run makes it spin again afterwards (so the counter would have seen spinning)."""
    x = np.random.default_rng(1).standard_normal((N, N)).astype(np.float32)
    quiet, w = _session("0")
    spinning, _ = _session()
    slept = _kernels.pool_stats()[1]
    _run_checked(quiet, w, x)
    assert wait_for(lambda: _kernels.pool_stats()[1] > slept), "the worker never slept after the run"
    spins, slept = _kernels.pool_stats()[:2]
    for _ in range(10):
        _run_checked(quiet, w, x)
        time.sleep(0.001)
    assert wait_for(lambda: _kernels.pool_stats()[1] > slept)
    assert _kernels.pool_stats()[0] == spins, "a worker spun after the runs of an allow_spinning=0 session"
    _run_checked(spinning, w, x)
    assert wait_for(lambda: _kernels.pool_stats()[0] > spins), "no spin after a default session's run"


@pytest.mark.parametrize("value", ["2", "yes", "", "true"])
def test_allow_spinning_bad_value(value):
    """Anything but "0" or "1" is refused when the session is made, naming the key and the value."""
    with pytest.raises(onnxep.errors.InvalidArgument, match=r"session\.intra_op\.allow_spinning"):
        _session(value)


def test_allow_spinning_1_accepted():
    """"1" (onnxruntime's default) is accepted and the session computes (oracle: numpy)."""
    x = np.random.default_rng(2).standard_normal((N, N)).astype(np.float32)
    sess, w = _session("1")
    _run_checked(sess, w, x)
