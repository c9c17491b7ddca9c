"""User allocators bound to streams, against seed 004_addf7aa1a7373ebc.txt (Ascend ACL aclrtAllocatorRegister).

Oracle: a counting allocator that records every callback, and the seed's restrictions quoted per test."""
import ctypes
import gc
import threading

import numpy as np
import pytest
from onnx import helper

import onnxep
from onnxep.contracts import AllocatorDesc, Stream, register_allocator
from onnxep.errors import Fail, InvalidArgument, RuntimeException
from tests._util import fallback_options, make_model


class CountingAllocator:
    """alloc/free/get-address callbacks over ctypes blocks, recording every call."""

    def __init__(self, name="counting"):
        self.live = {}
        self.allocs = 0
        self.frees = 0
        self.log = []
        self.desc = AllocatorDesc(self, CountingAllocator._alloc, CountingAllocator._free,
                                  CountingAllocator._addr, name=name)

    @staticmethod
    def _alloc(self, size):
        block = ctypes.create_string_buffer(max(int(size), 1) + 64)
        self.live[id(block)] = block
        self.allocs += 1
        self.log.append(("alloc", size))
        return block

    @staticmethod
    def _free(self, block):
        del self.live[id(block)]
        self.frees += 1
        self.log.append(("free",))

    @staticmethod
    def _addr(self, block):
        a = ctypes.addressof(block)
        return a + (-a) % 64


def _chain_model():
    nodes = [helper.make_node("Relu", ["x"], ["a"]), helper.make_node("Neg", ["a"], ["b"]),
             helper.make_node("Relu", ["b"], ["y"])]
    return make_model(nodes, {"x": np.zeros((4, 5), np.float32)}, ["y"])


def test_null_stream_is_an_error():
    # seed 004: stream "The value cannot be null. Otherwise, an error is reported."
    with pytest.raises(InvalidArgument, match="stream must not be None"):
        register_allocator(None, CountingAllocator().desc)


def test_incomplete_descriptor_is_an_error():
    # seed 004: "call aclrtAllocatorCreateDesc ... and then call ... SetAllocFuncToDesc,
    # SetGetAddrFromBlockFuncToDesc, and SetFreeFuncToDesc to set the Allocator object and callback function"
    desc = AllocatorDesc()
    desc.set_obj(object())
    desc.set_alloc_func(lambda o, s: None)
    with pytest.raises(InvalidArgument, match="free_func, get_addr_from_block_func"):
        register_allocator(Stream(), desc)
    with pytest.raises(InvalidArgument):
        register_allocator(Stream(), None)


def test_last_registration_wins():
    # seed 004: "For the same stream, if this API is called for multiple times, the last registration is used."
    s = Stream()
    a, b = CountingAllocator("a"), CountingAllocator("b")
    register_allocator(s, a.desc)
    register_allocator(s, b.desc)
    mem = s.alloc(100)
    assert mem.ctypes.data % 64 == 0 and mem.size == 100
    assert (a.allocs, b.allocs) == (0, 1)
    del mem
    gc.collect()
    assert b.frees == 1


def test_streams_sharing_an_allocator_must_not_run_concurrently():
    # seed 004: "For different streams, if you use the same Allocator, concurrent execution on multiple streams is not
    # allowed. Before you execute the next stream, synchronize the previous one."
    alloc = CountingAllocator()
    s1, s2 = Stream("s1"), Stream("s2")
    register_allocator(s1, alloc.desc)
    register_allocator(s2, alloc.desc)
    with s1.running():
        with pytest.raises(Fail, match="in use by s1"):
            with s2.running():
                pass
    with s2.running():  # s1 finished (and was synchronized): s2 may run now
        pass


def test_sessions_on_streams_sharing_an_allocator_raise_instead_of_racing():
    alloc = CountingAllocator()
    s1, s2 = Stream("s1"), Stream("s2")
    register_allocator(s1, alloc.desc)
    register_allocator(s2, alloc.desc)
    m = _chain_model()
    sess1 = onnxep.InferenceSession(m.SerializeToString(), stream=s1, sess_options=fallback_options())
    sess2 = onnxep.InferenceSession(m.SerializeToString(), stream=s2, sess_options=fallback_options())
    x = np.ones((4, 5), np.float32)
    errors = []
    with s1.running():  # as if sess1 were mid-run on another thread
        t = threading.Thread(target=lambda: errors.append(_try(sess2, x)))
        t.start()
        t.join()
    assert isinstance(errors[0], Fail)
    np.testing.assert_array_equal(sess2.run(None, {"x": x})[0], np.zeros((4, 5)))  # fine once s1 is done


def _try(sess, x):
    try:
        sess.run(None, {"x": x})
    except Exception as e:  # noqa: BLE001 - returned to the test
        return e
    return None


def test_stream_is_synchronized_before_a_buffer_is_released():
    # seed 004: "Before the buffer is released by the Allocator to the operating system, call aclrtSynchronizeStream to
    # synchronize the stream and make sure that tasks in the stream have been executed."
    alloc = CountingAllocator()
    s = Stream()
    register_allocator(s, alloc.desc)
    mem = s.alloc(16)
    s.enqueue(lambda: alloc.log.append(("task",)))
    del mem
    gc.collect()
    assert alloc.log[-2:] == [("task",), ("free",)]


def test_user_allocator_sees_every_activation_and_all_are_freed():
    alloc = CountingAllocator()
    s = Stream()
    register_allocator(s, alloc.desc)
    sess = onnxep.InferenceSession(_chain_model().SerializeToString(), stream=s,
                                   sess_options=fallback_options())
    x = np.arange(20, dtype=np.float32).reshape(4, 5) - 10
    (y,) = sess.run(None, {"x": x})
    np.testing.assert_array_equal(y, np.zeros((4, 5)))  # relu(-relu(x)) == 0
    assert alloc.allocs >= 2  # the cpu kernels' outputs and the boundary copy
    del y
    gc.collect()
    assert alloc.allocs == alloc.frees and not alloc.live


def test_everything_is_freed_after_a_failed_run():
    alloc = CountingAllocator()
    s = Stream()
    register_allocator(s, alloc.desc)
    nodes = [helper.make_node("Relu", ["x"], ["a"]), helper.make_node("Reshape", ["a", "shape"], ["y"])]
    m = make_model(nodes, {"x": np.zeros((4, 5), np.float32), "shape": np.array([3], np.int64)}, ["y"],
                   input_shapes={"x": ["N", 5]})
    sess = onnxep.InferenceSession(m.SerializeToString(), stream=s)
    with pytest.raises(RuntimeException):
        sess.run(None, {"x": np.ones((4, 5), np.float32), "shape": np.array([7], np.int64)})
    gc.collect()
    assert alloc.allocs >= 1 and alloc.allocs == alloc.frees and not alloc.live
    (y,) = sess.run(None, {"x": np.ones((4, 5), np.float32), "shape": np.array([20], np.int64)})
    assert y.shape == (20,)
