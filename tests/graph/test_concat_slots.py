"""Concat elimination (backends/cpu/device.py concat_slots, KernelContext.slot, Kernel.strided_output): a conv whose
only reader is a channel Concat writes straight into the Concat's output.

Oracles: onnx.reference for the numbers; the same session with its slots removed for bit-identity (a conv writing a
channel slice computes exactly what it computes into its own tensor)."""
import numpy as np
import pytest
from onnx import helper

import onnxep
from tests._util import make_model, run_reference


def _inception_model(C=8, H=10):
    """Four branches into one Concat, as in Inception: two convs that only the Concat reads (slots), a conv that a
    later node also reads (no slot: two readers), a MaxPool (no slot: not a strided-output kernel); then a conv over
    the Concat. A second Concat reads a depthwise conv (no slot) and a conv with a fused residual (no slot)."""
    rng = np.random.default_rng(0)

    def w(o, i, k):
        return (rng.standard_normal((o, i, k, k)) / (i * k)).astype(np.float32)

    inits = {"w1": w(6, C, 1), "w2": w(5, C, 3), "w3": w(7, C, 1), "w4": w(4, 22, 1), "wd": w(C, 1, 3),
             "wr": w(C, C, 3), "b2": rng.standard_normal(5).astype(np.float32)}
    nodes = [
        helper.make_node("Conv", ["x", "w1"], ["a"]),
        helper.make_node("Conv", ["x", "w2", "b2"], ["b0"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["b0"], ["b"]),
        helper.make_node("Conv", ["x", "w3"], ["c"]),
        helper.make_node("MaxPool", ["x"], ["d"], kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[1, 1]),
        helper.make_node("Concat", ["a", "b", "c", "d"], ["cat"], axis=1),        # 6 + 5 + 7 + 8 = 26 channels
        helper.make_node("Slice", ["cat", "s0", "s1", "s_ax"], ["cat22"]),
        helper.make_node("Conv", ["cat22", "w4"], ["e"]),
        helper.make_node("Relu", ["c"], ["c2"]),                                  # c's second reader
        helper.make_node("Conv", ["x", "wd"], ["dw"], group=C, pads=[1, 1, 1, 1]),
        helper.make_node("Conv", ["x", "wr"], ["r0"], pads=[1, 1, 1, 1]),
        helper.make_node("Add", ["r0", "x"], ["r"]),                              # fused as the conv's residual
        helper.make_node("Concat", ["dw", "r"], ["cat2"], axis=1),
    ]
    inits.update(s0=np.array([0], np.int64), s1=np.array([22], np.int64), s_ax=np.array([1], np.int64))
    return make_model(nodes, {"x": np.zeros((1, C, H, H), np.float32)}, ["e", "c2", "cat2"], initializers=inits)


def _slots(sess):
    return {v for p in sess._executor.plans for v in getattr(p, "slots", {}).values()}


@pytest.mark.parametrize("mem_pattern", [True, False], ids=["arena", "no-arena"])
def test_convs_write_into_the_concat_and_match_the_reference(mem_pattern):
    m = _inception_model()
    so = onnxep.SessionOptions()
    so.enable_mem_pattern = mem_pattern
    sess = onnxep.InferenceSession(m.SerializeToString(), so)
    # the two single-reader convs have slots (offsets 0 and 6 of 26 channels); c (two readers), the MaxPool, the
    # depthwise conv and the conv with a residual do not
    assert {(off, ch) for _, off, ch in _slots(sess)} == {(0, 26), (6, 26)}
    plain = onnxep.InferenceSession(m.SerializeToString(), so)
    for p in plain._executor.plans:
        p.slots = {}
    rng = np.random.default_rng(1)
    for _ in range(3):                                      # run 1 records, runs 2.. are planned (arena)
        x = rng.standard_normal((1, 8, 10, 10)).astype(np.float32)
        got = sess.run(None, {"x": x})
        for g, w in zip(got, run_reference(m, {"x": x})):
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)
        for g, p in zip(got, plain.run(None, {"x": x})):
            np.testing.assert_array_equal(g, p)


def test_a_concat_as_the_last_node():
    """The Concat is the last node (its output goes straight to the partition edge), two images: written in place,
    and what the session returns is C-contiguous."""
    rng = np.random.default_rng(2)
    inits = {"w1": rng.standard_normal((3, 4, 1, 1)).astype(np.float32),
             "w2": rng.standard_normal((5, 4, 3, 3)).astype(np.float32)}
    nodes = [helper.make_node("Conv", ["x", "w1"], ["a"]),
             helper.make_node("Conv", ["x", "w2"], ["b"], pads=[1, 1, 1, 1]),
             helper.make_node("Concat", ["a", "b"], ["y"], axis=1)]
    m = make_model(nodes, {"x": np.zeros((2, 4, 6, 7), np.float32)}, ["y"], initializers=inits)
    sess = onnxep.InferenceSession(m.SerializeToString())
    assert len(_slots(sess)) == 2
    x = rng.standard_normal((2, 4, 6, 7)).astype(np.float32)
    for _ in range(3):
        (y,) = sess.run(None, {"x": x})
        assert y.flags.c_contiguous
        np.testing.assert_allclose(y, run_reference(m, {"x": x})[0], rtol=1e-5, atol=1e-5)


def _concat_step(values, ins, slots):
    """A Concat over `ins` (NHWC, axis -1) whose producers' outputs went through KernelContext.output with `slots`
    (name -> (target, offset, channels)), as a plan's steps would: returns the Concat's output."""
    from onnxep.backends.cpu.device import KernelInfo
    from onnxep.contracts.kernel import KernelContext
    from onnxep.ops.tensor.concat import Concat_4

    def alloc(shape, dtype):
        return np.empty(shape, dtype)
    for name, slot in slots.items():
        x = values.pop("src_" + name)
        KernelContext(values, (), (name,), alloc, slot=slot).output(0, x.shape)[...] = x
    kernel = Concat_4(KernelInfo("cat", "Concat", "", 13, {"axis": -1}, (), (), {}))
    kernel.compute(KernelContext(values, ins, ("y",), alloc))
    return values["y"]


def test_concat_skips_only_inputs_its_producers_placed_at_their_offsets():
    """Concat's shortcut (_all_placed: every input written into its slot of the output the Concat finds allocated,
    at the offset the Concat would copy it to) against numpy's concatenate: taken when the slots match, and not
    taken -- the inputs are copied -- when a slot belongs to another tensor, is at another offset, an input has no
    slot, or the inputs do not fill the output's channels."""
    rng = np.random.default_rng(3)
    a = rng.standard_normal((1, 2, 3, 4)).astype(np.float32)
    b = rng.standard_normal((1, 2, 3, 5)).astype(np.float32)
    want = np.concatenate([a, b], axis=-1)
    # both placed at offsets 0 and 4 of a 9-channel target: the target is the result, no copy
    values = {"src_a": a, "src_b": b}
    y = _concat_step(values, ("a", "b"), {"a": ("y", 0, 9), "b": ("y", 4, 9)})
    assert y is values["y"] and np.shares_memory(y, values["a"])
    np.testing.assert_array_equal(y, want)
    # b went into another tensor's slot: the Concat copies it into y
    values = {"src_a": a, "src_b": b}
    y = _concat_step(values, ("a", "b"), {"a": ("y", 0, 9), "b": ("other", 4, 9)})
    np.testing.assert_array_equal(y, want)
    # both placed in y but in the other order (b at 0, a at 5): not where the Concat puts them, and copying either
    # would overwrite the other first, so the result is a new tensor
    values = {"src_a": a, "src_b": b}
    y = _concat_step(values, ("a", "b"), {"b": ("y", 0, 9), "a": ("y", 5, 9)})
    np.testing.assert_array_equal(y, want)
    # only b placed (at 4): a is copied, b left where it is
    values = {"src_b": b, "a": a.copy()}
    y = _concat_step(values, ("a", "b"), {"b": ("y", 4, 9)})
    np.testing.assert_array_equal(y, want)
    # a 12-channel target with 9 channels placed: not the result (y is allocated again, 9 channels)
    values = {"src_a": a, "src_b": b}
    y = _concat_step(values, ("a", "b"), {"a": ("y", 0, 12), "b": ("y", 4, 12)})
    assert y.shape == want.shape
    np.testing.assert_array_equal(y, want)


def test_a_slot_entry_does_not_keep_the_concat_output_alive():
    """KernelContext.output's (PLACED, name) entry holds its target weakly: a run without a memory plan frees the
    Concat output when its last reader is done, not at the end of the run (holding it raised DenseNet's peak RSS by
    20 MB). Oracle: a weak reference to the target."""
    import weakref

    from onnxep.contracts.kernel import PLACED, KernelContext
    values = {}
    ctx = KernelContext(values, (), ("a",), lambda shape, dtype: np.empty(shape, dtype), slot=("y", 0, 9))
    ctx.output(0, (1, 2, 3, 4))
    ref = weakref.ref(values["y"])
    assert values[(PLACED, "a")][0]() is values["y"]
    del values["y"], values["a"]
    assert ref() is None and values[(PLACED, "a")][0]() is None
