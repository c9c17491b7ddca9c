"""The session's HostBlockPool: activation blocks are reused across runs only when nothing references them.

Oracles: numpy (the expected values) and the pool's own bookkeeping (how many bytes it holds)."""
import numpy as np
from onnx import TensorProto, helper, numpy_helper

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


def test_smaller_request_takes_the_smallest_free_block_up_to_best_fit():
    """A request with no free block of its size takes the smallest free block of at most BEST_FIT times its size
    (the pool then holds fewer blocks for models with many activation sizes), never a busy one, never a far larger
    one; the view has the requested length and is aligned."""
    pool = HostBlockPool()
    big = pool.take(4000)
    mid = pool.take(1500)
    far = pool.take(100000)
    addr = {id(v): v.__array_interface__["data"][0] for v in (big, mid, far)}
    a_big, a_mid, a_far = addr[id(big)], addr[id(mid)], addr[id(far)]
    del big, mid, far
    held = pool.pooled
    v = pool.take(1000)                          # 1500 and 4000 are free: 1500 is the smallest within 2x
    assert len(v) == 1000 and v.__array_interface__["data"][0] == a_mid and a_mid % 64 == 0
    w = pool.take(1000)                          # 1500 busy now, 4000 > 2 x 1000: a new block
    assert w.__array_interface__["data"][0] not in (a_mid, a_big, a_far) and pool.pooled > held
    u = pool.take(2500)                          # 4000 is within 2 x 2500
    assert u.__array_interface__["data"][0] == a_big
    t = pool.take(40000)                         # 100000 is more than 2 x 40000: not taken
    assert t.__array_interface__["data"][0] != a_far


def test_best_fit_reuse_shrinks_a_many_sized_model_pool():
    """A chain of shrinking activations keeps fewer pooled bytes than one block per size would (oracle: the sum of
    the distinct sizes it asked for), and results stay exact (numpy)."""
    n = 8
    sizes = [4096 - 256 * i for i in range(n)]
    nodes, inits = [], []
    prev = "x"
    for i, sz in enumerate(sizes[1:]):
        nodes.append(helper.make_node("Slice", [prev, f"s{i}", f"e{i}"], [f"t{i}"]))
        inits += [numpy_helper.from_array(np.array([0], np.int64), f"s{i}"),
                  numpy_helper.from_array(np.array([sz], np.int64), f"e{i}")]
        nodes.append(helper.make_node("Relu", [f"t{i}"], [f"r{i}"]))
        prev = f"r{i}"
    g = helper.make_graph(nodes, "shrink", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [sizes[0]])],
                          [helper.make_tensor_value_info(prev, TensorProto.FLOAT, [sizes[-1]])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    sess = onnxep.InferenceSession(m.SerializeToString())
    x = np.linspace(-1, 1, sizes[0]).astype(np.float32)
    for _ in range(3):
        y = sess.run(None, {"x": x})[0]
    np.testing.assert_array_equal(y, np.maximum(x[:sizes[-1]], 0))
    assert sess._pool.pooled < sum(4 * s for s in sizes[1:])


def test_size_classes_serve_a_growing_tensor_and_outgrown_blocks_are_dropped():
    """A new block is size_class(request) bytes (at most 12.5% more), so a tensor that grows a little each run -- a
    decoder's key / value cache -- takes the block an earlier run freed; a request that outgrows the free blocks drops
    them (oracle: the pool's own bookkeeping and the blocks' addresses)."""
    from onnxep.contracts.allocator import size_class
    for n in (17, 1000, 4097, 3 * 2 ** 20 + 3072):
        assert n <= size_class(n) <= 1.125 * n and size_class(size_class(n)) == size_class(n)
    pool = HostBlockPool()
    a = pool.take(1_000_000)
    addr = a.__array_interface__["data"][0]
    held = pool.pooled
    del a
    b = pool.take(1_000_000 + 3072)              # one row more: the same block
    assert b.__array_interface__["data"][0] == addr and pool.pooled == held
    del b
    c = pool.take(2 * size_class(1_000_000) - 8)  # outgrows it, within BEST_FIT: the free block is dropped
    # (not by address: the heap may hand the dropped block's memory to the new one)
    assert size_class(1_000_000) not in pool._sizes and len(c) == 2 * size_class(1_000_000) - 8
    assert pool.pooled == size_class(2 * size_class(1_000_000) - 8) + 64
    busy = pool.take(4000)
    d = pool.take(7000)                          # outgrows a busy block: that one stays
    assert pool.pooled == size_class(2 * size_class(1_000_000) - 8) + size_class(4000) + size_class(7000) + 3 * 64
    del busy, d
