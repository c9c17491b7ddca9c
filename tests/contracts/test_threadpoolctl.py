"""onnxep's kernel pool under threadpoolctl (onnxep/_threadpool.py; issue 27 item 2).

Oracles: threadpoolctl's own info and limits API, and the process's CPU time over wall time while a session runs
(`time.process_time` / `time.perf_counter`), which says how many cores the pool kept busy.
"""
import os
import time

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper
from threadpoolctl import threadpool_info, threadpool_limits

import onnxep
from onnxep import _kernels


def _pool():
    pools = [p for p in threadpool_info() if p["user_api"] == "onnxep"]
    assert len(pools) == 1, pools
    return pools[0]


def test_pool_is_listed():
    p = _pool()
    assert p["internal_api"] == "onnxep" and p["version"] == onnxep.__version__
    assert os.path.basename(p["filepath"]).startswith(f"_kernels_{_kernels.ISA}.")
    assert p["num_threads"] == _kernels.max_threads()


def test_limits_set_and_restore():
    before = _pool()["num_threads"]
    with threadpool_limits(1, user_api="onnxep"):
        assert _pool()["num_threads"] == 1
        assert _kernels.thread_limit() == 1
    assert _pool()["num_threads"] == before
    assert _kernels.thread_limit() == 0          # restoring the count read on entry (all cores) lifts the cap


def test_pool_selftest_obeys_the_cap():
    with threadpool_limits(1, user_api="onnxep"):
        out, tids = _kernels.pool_selftest(10_000, 2)
    assert np.array_equal(out, np.arange(10_000, dtype=np.int64) ** 2)
    assert set(np.unique(tids)) == {0}           # every item ran on the caller: no worker was let in


def _matmul_model(n=512):
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.standard_normal((n, n)).astype(np.float32), "w")
    g = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"])], "mm",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [n, n])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [n, n])], [w])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=9).SerializeToString()


def _cpu_over_wall(sess, feed, seconds=0.4):
    sess.run(None, feed)
    w0, c0 = time.perf_counter(), time.process_time()
    while time.perf_counter() - w0 < seconds:
        sess.run(None, feed)
    return (time.process_time() - c0) / (time.perf_counter() - w0)


@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="needs 2 cores to tell 1 busy core from 2")
def test_two_thread_session_uses_one_core_under_the_limit():
    so = onnxep.SessionOptions()
    so.intra_op_num_threads = 2
    sess = onnxep.InferenceSession(_matmul_model(), so)
    feed = {"x": np.random.default_rng(1).standard_normal((512, 512)).astype(np.float32)}
    with threadpool_limits(1):
        limited = _cpu_over_wall(sess, feed)
    assert limited < 1.3, f"CPU time / wall time {limited:.2f} under threadpool_limits(1)"
    # (without the cap, on an idle 2-core machine, the same loop reads about 1.9: measured in the note; not
    # asserted here, since other jobs on the machine lower it)
