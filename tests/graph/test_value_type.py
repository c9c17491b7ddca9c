"""ValueType keeps its onnx TypeProto serialized; `proto` gives back an equal message. Oracle: the TypeProto it was
made from (protobuf equality)."""
import numpy as np
import pytest
from onnx import TensorProto, TypeProto, helper

from onnxep.graph.ir import ValueType

CASES = [
    helper.make_tensor_type_proto(TensorProto.FLOAT, (1, "N", None, 7)),
    helper.make_tensor_type_proto(TensorProto.INT64, None),            # rank unknown
    helper.make_tensor_type_proto(TensorProto.DOUBLE, ()),             # scalar
    helper.make_sequence_type_proto(helper.make_tensor_type_proto(TensorProto.FLOAT, (2, 3))),
    helper.make_optional_type_proto(helper.make_tensor_type_proto(TensorProto.BOOL, (1,))),
    helper.make_map_type_proto(TensorProto.STRING, helper.make_tensor_type_proto(TensorProto.FLOAT, (4,))),
]


@pytest.mark.parametrize("tp", CASES, ids=lambda tp: tp.WhichOneof("value"))
def test_proto_round_trip(tp):
    tp.denotation = "IMAGE"       # a field ValueType does not decode: kept all the same
    vt = ValueType.from_proto(tp)
    assert vt.proto == tp and vt.proto is not vt.proto    # a fresh, equal message: no reference to `tp`
    assert not isinstance(vt.proto_bytes, TypeProto)


def test_of_array_and_unknown():
    vt = ValueType.of_array(np.zeros((2, 5), np.float32))
    assert (vt.kind, vt.elem_type, vt.shape, vt.type_str) == ("tensor", TensorProto.FLOAT, (2, 5), "tensor(float)")
    assert vt.proto == helper.make_tensor_type_proto(TensorProto.FLOAT, (2, 5))
    assert ValueType().proto is None and ValueType.from_proto(None).proto is None
    # a plain tensor type keeps no bytes: its fields give the proto back
    assert ValueType.from_proto(helper.make_tensor_type_proto(TensorProto.FLOAT, (2, "N"))).proto_bytes == b""


def test_value_types_are_frozen_and_held_once_while_in_use():
    # a model names a few distinct types for hundreds of values: equal ValueTypes made by from_proto / of_array are one
    # object while any is held, and none is kept once every holder is gone. Oracle: equality, identity, weak refs
    import dataclasses
    import gc
    import weakref
    tp = helper.make_tensor_type_proto(TensorProto.FLOAT, (3, "N", 17))
    a = ValueType.from_proto(tp)
    assert ValueType.from_proto(helper.make_tensor_type_proto(TensorProto.FLOAT, (3, "N", 17))) is a
    assert ValueType.of_array(np.zeros((3, 4, 17), np.float32)) is not a
    assert ValueType.of_array(np.zeros((5, 9), np.int64)) is ValueType.of_array(np.ones((5, 9), np.int64))
    assert ValueType.from_proto(helper.make_tensor_type_proto(TensorProto.FLOAT, (3, "M", 17))) is not a
    assert hash(a) == hash(ValueType("tensor", TensorProto.FLOAT, (3, "N", 17), "tensor(float)"))
    with pytest.raises(dataclasses.FrozenInstanceError):   # shared between holders: nobody may change it
        a.shape = (1,)
    ref = weakref.ref(a)
    del a
    gc.collect()
    assert ref() is None


@pytest.mark.parametrize("elem", [1, 6, 7, 9, 10, 11, 16, 0, 999])
@pytest.mark.parametrize("dims", [None, [], [1], [0], [-1], [3, "N", None], ["a", "b"], [None], [1, 2, 3, 4, 5],
                                  ["", 2], (2, "x")])
def test_of_tensor_is_from_proto_of_the_message(elem, dims):
    """ValueType.of_tensor (what the passes make for each value they add) hands out the very object from_proto gives
    for helper.make_tensor_type_proto(elem, dims) (oracle: that message), without building it."""
    assert ValueType.of_tensor(elem, dims) is ValueType.from_proto(helper.make_tensor_type_proto(elem, dims))
