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


def _odd_tensor_types():
    """Tensor types whose fields alone do not give the message back: from_proto must keep their bytes."""
    no_elem = TypeProto()
    no_elem.tensor_type.shape.dim.add().dim_value = 3
    empty_param = helper.make_tensor_type_proto(TensorProto.FLOAT, (2, 2))
    empty_param.tensor_type.shape.dim[1].dim_param = ""
    dim_denoted = helper.make_tensor_type_proto(TensorProto.FLOAT, (1, 3, "H", "W"))
    dim_denoted.tensor_type.shape.dim[1].denotation = "DATA_CHANNEL"
    zero = helper.make_tensor_type_proto(TensorProto.INT64, (0, None))
    return [no_elem, empty_param, dim_denoted, zero, helper.make_tensor_type_proto(TensorProto.FLOAT, (1, "N", None))]


@pytest.mark.parametrize("i", range(5), ids=["no_elem", "empty_param", "dim_denotation", "zero_dim", "plain"])
def test_tensor_round_trip_decided_from_the_fields(i):
    # from_proto decides from the fields whether to keep the bytes; the message must come back byte for byte, and
    # a plain one keeps none (every kernel holds its ValueTypes)
    tp = _odd_tensor_types()[i]
    vt = ValueType.from_proto(tp)
    assert vt.proto.SerializeToString() == tp.SerializeToString()
    assert (vt.proto_bytes == b"") == (i in (3, 4))
    assert vt.type_str == ("tensor(undefined)" if i == 0 else "tensor(int64)" if i == 3 else "tensor(float)")


def _bytes_cases():
    out = [helper.make_tensor_type_proto(TensorProto.FLOAT, (1, "N", None, -3, 2 ** 40)),
           helper.make_tensor_type_proto(TensorProto.INT64, None), helper.make_tensor_type_proto(TensorProto.FLOAT, ()),
           helper.make_tensor_type_proto(TensorProto.FLOAT, ("\u00e9", 5)), TypeProto()] + list(CASES)
    t = helper.make_tensor_type_proto(TensorProto.FLOAT, (1, 2))
    t.denotation = "IMAGE"
    out.append(t)
    t = helper.make_tensor_type_proto(TensorProto.FLOAT, (1, 2))
    t.tensor_type.shape.dim[0].denotation = "BATCH"
    out.append(t)
    t = helper.make_tensor_type_proto(TensorProto.FLOAT, (1, 2))
    t.tensor_type.shape.dim[0].dim_param = ""            # set but empty
    out.append(t)
    t = TypeProto()
    t.tensor_type.shape.dim.add().dim_value = 3           # no element type
    out.append(t)
    t = TypeProto()
    t.tensor_type.SetInParent()                           # an empty tensor_type
    out.append(t)
    return out


@pytest.mark.parametrize("i", range(len(_bytes_cases())))
def test_from_proto_bytes_is_from_proto(i):
    # build_graph decodes plain tensor types from their bytes (graph/ir.py _tensor_fields). Oracle: from_proto of the
    # message, for the plain encodings and every one the decoder hands back to from_proto
    tp = _bytes_cases()[i]
    raw = tp.SerializeToString()
    want = ValueType.from_proto(tp)
    assert ValueType.from_proto_bytes(raw) == want
    assert ValueType.from_proto_bytes(raw, tp) == want
    for cut in range(1, len(raw)):      # a truncated encoding: from_proto's answer on what protobuf parses, or an error
        try:
            part = TypeProto.FromString(raw[:cut])
        except Exception:
            continue
        assert ValueType.from_proto_bytes(raw[:cut], part) == ValueType.from_proto(part)


def test_hash_worked_out_once_and_again_after_pickling():
    # the hash is kept from construction (graph/ir.py ValueType._hash); a pickled one is made again, so its hash is
    # the loading process's. Oracle: hash of the same fields, equality, and a fresh process's dict lookup
    import pickle
    import subprocess
    import sys
    vt = ValueType.from_proto(helper.make_tensor_type_proto(TensorProto.FLOAT, (2, "N")))
    assert hash(vt) == hash((vt.kind, vt.elem_type, vt.shape, vt.type_str, vt.proto_bytes))
    again = pickle.loads(pickle.dumps(vt))
    assert again == vt and hash(again) == hash(vt)
    code = ("import pickle, sys; vt = pickle.loads(sys.stdin.buffer.read()); "
            "from onnxep.graph.ir import ValueType; "
            "print({ValueType('tensor', vt.elem_type, vt.shape, vt.type_str): 1}.get(vt))")
    out = subprocess.run([sys.executable, "-c", code], input=pickle.dumps(vt), capture_output=True, check=True,
                         env={**__import__("os").environ, "PYTHONHASHSEED": "random"})
    assert out.stdout.strip() == b"1"


def test_weak_intern_files_one_live_object_per_key_and_forgets_dead_ones():
    # graph/ir.py WeakIntern (what ValueTypes and build_graph's small tensors are held once by). Oracle: identity and
    # weak references, as weakref.WeakValueDictionary's get / setdefault answer
    import gc
    import weakref
    from onnxep.graph.ir import WeakIntern
    table, oracle = WeakIntern(), weakref.WeakValueDictionary()
    a, b = np.zeros(3), np.ones(3)
    assert table.get("k") is None
    assert table.file("k", a) is a is oracle.setdefault("k", a)
    assert table.file("k", b) is a is oracle.setdefault("k", b)     # the live one wins
    assert table.get("k") is a and len(table) == 1
    assert table.file(("t", 1), b) is b and len(table) == 2
    del a
    gc.collect()
    assert table.get("k") is None and oracle.get("k") is None and len(table) == 1
    c = np.full(3, 2.0)
    assert table.file("k", c) is c                 # filed again after its object died
    assert table.get(("t", 1)) is b
