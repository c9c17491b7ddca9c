"""graph/schema_facts.py: the op-schema facts onnxep reads, from its generated table (tools/gen_schema_table.py) or
from onnx's registry. Oracle: onnx.defs (get_schema, get_all_schemas_with_history) of the installed onnx."""
import pickle
import subprocess
import sys

import onnx
import pytest
from onnx import defs, helper

from onnxep.graph import _schema_table, schema_facts as sf

PINNED = _schema_table.ONNX_VERSION == onnx.__version__


def _oracle(op, opset, domain):
    try:
        return defs.get_schema(op, opset, domain)
    except Exception:
        return None


def _same(f, s):
    if s is None:
        return f is None
    assert f is not None
    assert (f.since, f.deprecated, f.inputs, f.outputs) == (
        s.since_version, bool(s.deprecated), (s.min_input, s.max_input), (s.min_output, s.max_output))
    assert f.attrs == {n: int(a.type.value) for n, a in s.attributes.items()}
    assert set(f.required) == {n for n, a in s.attributes.items() if a.required}
    assert f.input_types == tuple(x.type_str for x in s.inputs)
    assert f.output_types == tuple(x.type_str for x in s.outputs)
    want = {}
    for n, a in s.attributes.items():
        d = a.default_value
        if d is not None and d.type != 0:
            v = helper.get_attribute_value(d)
            want[n] = v.decode() if isinstance(v, bytes) else v
    got = f.defaults()
    assert set(got) == set(want)
    for n, v in want.items():
        assert repr(got[n]) == repr(v) if not isinstance(v, onnx.TensorProto) else \
            (got[n] == onnx.numpy_helper.to_array(v)).all()
    return True


@pytest.mark.skipif(not PINNED, reason=f"the table is for onnx {_schema_table.ONNX_VERSION}, not the installed one: "
                                       f"the registry answers (test_registry_path covers it)")
def test_table_is_the_registry():
    """Every schema the installed onnx holds is in the table, and nothing else (a stale table fails here: rerun
    tools/gen_schema_table.py)."""
    want = {}
    for s in defs.get_all_schemas_with_history():
        want.setdefault((s.domain, s.name), []).append(sf.schema_row(s))
    assert {k: tuple(sorted(v)) for k, v in want.items()} == {k: pickle.loads(v) for k, v in _schema_table.TABLE.items()}


def _ops():
    return sorted({(s.domain, s.name, s.since_version) for s in defs.get_all_schemas_with_history()})


@pytest.mark.parametrize("registry", [False, True], ids=["table", "registry"])
def test_lookup_as_get_schema(monkeypatch, registry):
    """schema_facts(op, opset, domain) is get_schema's schema (the newest at most opset; none before the first),
    through the table and through the registry (another onnx installed)."""
    monkeypatch.setattr(sf, "_FACTS", {})
    if registry:
        monkeypatch.setattr(sf, "_TABLE", {})
        monkeypatch.setattr(sf, "_DOMAINS", frozenset())
    for domain, op, since in _ops():
        for opset in (since - 1, since, since + 1):
            assert _same(sf.schema_facts(op, opset, domain), _oracle(op, opset, domain)), (domain, op, opset)
    assert sf.schema_facts("NoSuchOp", 13, "") is None
    assert sf.schema_facts("Relu", 14, "ai.onnx").since == 14
    assert sf.schema_facts("NhwcConv", 1, "com.onnxep") is None


def test_fully_typed_model_leaves_registry_unloaded(tmp_path):
    """A model that types every value (no shape inference to run): creating and running its session asks onnx's
    schema registry nothing (a fresh process in which every registry entry point raises). Oracle for the values:
    onnx.reference."""
    import numpy as np
    from onnx import TensorProto, numpy_helper
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.standard_normal((8, 3, 3, 3)).astype(np.float32), "w")
    b = numpy_helper.from_array(rng.standard_normal(8).astype(np.float32), "b")
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["r"]),
             helper.make_node("MaxPool", ["r"], ["y"], kernel_shape=[2, 2], strides=[2, 2])]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8, 4, 4])], [w, b],
                          value_info=[helper.make_tensor_value_info(v, TensorProto.FLOAT, [1, 8, 8, 8])
                                      for v in ("c", "r")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])
    path = str(tmp_path / "m.onnx")
    onnx.save(m, path)
    x = rng.standard_normal((1, 3, 8, 8)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    from onnx.reference import ReferenceEvaluator
    np.save(tmp_path / "want.npy", ReferenceEvaluator(m).run(None, {"x": x})[0])
    code = f"""
import numpy as np, onnx.defs
def refuse(*a, **k):
    raise AssertionError("onnx's schema registry asked")
for name in ("get_schema", "get_all_schemas", "get_all_schemas_with_history", "has"):
    setattr(onnx.defs, name, refuse)
import onnxep
s = onnxep.InferenceSession({path!r})
y = s.run(None, {{"x": np.load({str(tmp_path / 'x.npy')!r})}})[0]
np.testing.assert_allclose(y, np.load({str(tmp_path / 'want.npy')!r}), rtol=1e-5, atol=1e-5)
print("ok")
"""
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    if not PINNED:
        pytest.skip("the table is for another onnx: the registry answers")
    assert r.returncode == 0 and r.stdout.strip().endswith("ok"), r.stderr[-2000:]
