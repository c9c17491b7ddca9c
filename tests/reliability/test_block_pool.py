"""The session's HostBlockPool: activation blocks are reused across runs only when nothing references them.

Oracles: numpy (the expected values) and the pool's own bookkeeping (how many bytes it holds)."""
import numpy as np
from onnx import helper

import onnxep
from onnxep.contracts.allocator import HostBlockPool
from tests._util import make_model


def _chain_model():
    x = np.zeros((64, 1024), np.float32)
    nodes = [helper.make_node("Relu", ["x"], ["a"]), helper.make_node("Neg", ["a"], ["b"]),
             helper.make_node("Abs", ["b"], ["c"]), helper.make_node("Neg", ["c"], ["y"])]
    return make_model(nodes, {"x": x}, ["y", "a"])


def test_outputs_kept_by_the_caller_are_never_reused():
    """Outputs the caller still holds keep their values after later runs (oracle: numpy)."""
    sess = onnxep.InferenceSession(_chain_model().SerializeToString())
    rng = np.random.default_rng(0)
    x1, x2 = (rng.standard_normal((64, 1024)).astype(np.float32) for _ in range(2))
    y1, a1 = sess.run(None, {"x": x1})
    y1_copy, a1_copy = y1.copy(), a1.copy()
    for _ in range(3):
        y2, a2 = sess.run(None, {"x": x2})
    np.testing.assert_array_equal(y1, y1_copy)
    np.testing.assert_array_equal(a1, a1_copy)
    np.testing.assert_array_equal(y2, -np.abs(np.maximum(x2, 0)))
    assert not np.shares_memory(y1, y2) and not np.shares_memory(a1, a2)


def test_blocks_are_reused_once_free():
    """Repeated runs of a static-shape model stop allocating: the pool's size is the same after run 2 and run 10;
    a block is handed out again only once no array views it."""
    sess = onnxep.InferenceSession(_chain_model().SerializeToString())
    x = np.ones((64, 1024), np.float32)
    sess.run(None, {"x": x})
    sess.run(None, {"x": x})
    held = sess._pool.pooled
    for _ in range(8):
        sess.run(None, {"x": x})
    assert sess._pool.pooled == held > 0
    pool = HostBlockPool()
    a = pool.take(1000)
    b = pool.take(1000)
    assert not np.shares_memory(a, b)          # `a` is alive: its block is not free
    addr = a.__array_interface__["data"][0]
    del a
    c = pool.take(1000)
    assert c.__array_interface__["data"][0] == addr and c.__array_interface__["data"][0] % 64 == 0


def test_pool_limit_bounds_what_it_holds():
    """Past its limit the pool hands out plain blocks and does not keep them."""
    pool = HostBlockPool(limit=4096)
    blocks = [pool.take(1000) for _ in range(10)]
    assert pool.pooled <= 4096 and all(len(b) == 1000 for b in blocks)
