"""EPContext models through onnxruntime with the plugin (issue 28, build item 3: "When onnxruntime is asked to compile a
model (ep.context_enable) the EPContext nodes reload without packing again"; onnxep/ort_compile.py, OrtEp::Compile in
_k_ort_plugin.pxi).

Oracles: onnxruntime's CPU EP alone (the compiling session, max |plugin - cpu| / max |cpu| <= 1e-4); the compiling
session's own outputs (the reloaded session, bit for bit); counters on onnxep's packing routines and its optimize stage
(monkeypatched; onnxruntime calls Compile on the thread creating the session, so the counters see it); onnxruntime's
exception text for blobs that must be refused.
"""

import os

import numpy as np
import onnx
import pytest

ort = pytest.importorskip("onnxruntime")
if tuple(int(p) for p in ort.__version__.split(".")[:2]) < (1, 24):
    pytest.skip("the plugin needs onnxruntime >= 1.24", allow_module_level=True)

import onnxep  # noqa: E402
from onnxep import _kernels  # noqa: E402
from onnxep import ort as onnxep_ort  # noqa: E402
from tests.ort_plugin.test_compile import _conv_chain, _rel, _split_model, _transformer_block  # noqa: E402
from tests._util import count_packing  # noqa: E402


def _compile(folder, mb, embed="1", **ep_options):
    """Save the model in `folder`, create a plugin session with ep.context_enable=1; returns (session, ctx path)."""
    src = os.path.join(folder, "model.onnx")
    with open(src, "wb") as f:
        f.write(mb)
    so = onnxep_ort.session_options(**ep_options)
    so.add_session_config_entry("ep.context_enable", "1")
    so.add_session_config_entry("ep.context_embed_mode", embed)
    sess = ort.InferenceSession(src, so)
    return sess, os.path.join(folder, "model_ctx.onnx")


def _ctx_nodes(path):
    return [n for n in onnx.load(path, load_external_data=False).graph.node
            if n.op_type == "EPContext" and n.domain == "com.microsoft"]


def _attrs(node):
    return {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}


def _x(shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


@pytest.mark.parametrize("embed", ["0", "1"])
def test_compiled_model_has_onnxep_epcontext_nodes_and_reloads_bit_identical(tmp_path, embed):
    mb = _conv_chain()
    sess, ctx = _compile(str(tmp_path), mb, embed)
    x = _x((2, 3, 15, 17))
    want = sess.run(None, {"x": x})[0]
    cpu = ort.InferenceSession(mb, providers=["CPUExecutionProvider"])
    assert _rel(want, cpu.run(None, {"x": x})[0]) <= 1e-4
    nodes = _ctx_nodes(ctx)
    assert len(nodes) == 1
    a = _attrs(nodes[0])
    assert a["source"] == b"onnxep" and a["main_context"] == 1 and a["embed_mode"] == int(embed)
    assert a["ep_sdk_version"] == onnxep.__version__.encode() and a["hardware_architecture"] == _kernels.ISA.encode()
    assert list(nodes[0].input) == ["x"]          # the weights live packed in the blob, not as node inputs
    if embed == "0":
        side = a["ep_cache_context"].decode()
        assert os.path.isfile(tmp_path / side) and "/" not in side
    else:
        assert len(a["ep_cache_context"]) > 4 * 8 * 3 * 3 * 3       # at least the first conv's weights, packed
    # no weight initializer is left in the EPContext model (all were claimed by the partition)
    assert len(onnx.load(ctx, load_external_data=False).graph.initializer) == 0
    del sess
    loaded = ort.InferenceSession(ctx, onnxep_ort.session_options())
    got = loaded.run(None, {"x": x})[0]
    assert got.dtype == want.dtype and np.array_equal(got, want)
    x3 = _x((3, 3, 15, 17), 1)                     # another batch: a new signature of the loaded plan
    assert _rel(loaded.run(None, {"x": x3})[0], cpu.run(None, {"x": x3})[0]) <= 1e-4


def test_reload_packs_nothing_and_runs_no_passes(tmp_path, monkeypatch):
    # Build item 3: "the EPContext nodes reload without packing again". Counted, not timed: the kernels'
    # prepack_weight, onnxep's native pack routines and the optimize stage.
    import onnxep.session as session_mod

    calls = {}
    counting = count_packing(monkeypatch, calls)
    monkeypatch.setattr(session_mod, "optimize", counting("optimize", session_mod.optimize))
    for embed in ("0", "1"):
        folder = tmp_path / embed
        folder.mkdir()
        calls.clear()
        sess, ctx = _compile(str(folder), _transformer_block(), embed)
        assert calls.get("prepack_weight", 0) > 0 and calls.get("pack", 0) > 0 and calls.get("optimize", 0) > 0, calls
        x = _x((2, 7, 32), 1)
        want = sess.run(None, {"x": x})[0]
        calls.clear()
        loaded = ort.InferenceSession(ctx, onnxep_ort.session_options())
        assert calls == {}, calls
        assert np.array_equal(loaded.run(None, {"x": x})[0], want)


def test_several_partitions_cpu_nodes_stay_plain(tmp_path):
    mb = _split_model()
    sess, ctx = _compile(str(tmp_path), mb, "1")
    x = _x((2, 3, 12, 12), 3)
    want = sess.run(None, {"x": x})[0]
    m = onnx.load(ctx, load_external_data=False)
    ops = [n.op_type for n in m.graph.node]
    assert ops.count("EPContext") == 2 and "Sigmoid" in ops, ops
    assert len({_attrs(n)["partition_name"] for n in _ctx_nodes(ctx)}) == 2
    loaded = ort.InferenceSession(ctx, onnxep_ort.session_options())
    assert np.array_equal(loaded.run(None, {"x": x})[0], want)


def _rewrite(ctx, fn):
    m = onnx.load(ctx, load_external_data=False)
    for n in m.graph.node:
        if n.op_type == "EPContext":
            fn(n)
    onnx.save(m, ctx)


def _set(node, name, value):
    for a in node.attribute:
        if a.name == name:
            node.attribute.remove(a)
            break
    node.attribute.append(onnx.helper.make_attribute(name, value))


def test_blob_of_another_onnxep_version_is_refused(tmp_path):
    _, ctx = _compile(str(tmp_path), _conv_chain(), "1")
    _rewrite(ctx, lambda n: _set(n, "ep_sdk_version", b"0.0.1"))
    with pytest.raises(Exception, match=r"compiled by onnxep 0\.0\.1, this is onnxep " + onnxep.__version__):
        ort.InferenceSession(ctx, onnxep_ort.session_options())


@pytest.mark.skipif(not _kernels.bgemm_hw(), reason="bf16 packing needs a CPU with AVX512_BF16")
def test_blob_of_another_precision_is_refused(tmp_path):
    sess, ctx = _compile(str(tmp_path), _transformer_block(), "0", precision="bf16")
    x = _x((2, 7, 32), 2)
    want = sess.run(None, {"x": x})[0]
    with pytest.raises(Exception, match=r"onnxep Compile: .*compute_precision='bf16'.*this session computes in 'fp32'"):
        ort.InferenceSession(ctx, onnxep_ort.session_options())
    loaded = ort.InferenceSession(ctx, onnxep_ort.session_options(precision="bf16"))
    assert np.array_equal(loaded.run(None, {"x": x})[0], want)


def test_tampered_blob_is_refused(tmp_path):
    _, ctx = _compile(str(tmp_path), _conv_chain(), "0")
    # embed_mode 0: ep_cache_context names onnxep's EPContext model of the partition, whose blobs are files beside it
    (blob,) = [p for p in tmp_path.iterdir() if p.read_bytes()[:8] == b"ONNXEPCX"]
    raw = bytearray(blob.read_bytes())
    raw[4000] ^= 0xFF                                       # inside the packed weights
    blob.write_bytes(bytes(raw))
    with pytest.raises(Exception, match="onnxep Compile: InvalidGraph: .*integrity check failed"):
        ort.InferenceSession(ctx, onnxep_ort.session_options())


def test_missing_side_file_and_escaping_name_are_refused(tmp_path):
    _, ctx = _compile(str(tmp_path), _conv_chain(), "0")
    side = tmp_path / _attrs(_ctx_nodes(ctx)[0])["ep_cache_context"].decode()
    side.rename(tmp_path / "elsewhere.bin")
    with pytest.raises(Exception, match="side file .* not found"):
        ort.InferenceSession(ctx, onnxep_ort.session_options())
    _rewrite(ctx, lambda n: _set(n, "ep_cache_context", b"../elsewhere.bin"))
    with pytest.raises(Exception, match="must be a relative file name inside the model's folder"):
        ort.InferenceSession(ctx, onnxep_ort.session_options())


def test_context_enable_on_a_compiled_model_is_refused(tmp_path):
    _, ctx = _compile(str(tmp_path), _conv_chain(), "1")
    so = onnxep_ort.session_options()
    so.add_session_config_entry("ep.context_enable", "1")
    so.add_session_config_entry("ep.context_file_path", str(tmp_path / "again_ctx.onnx"))
    with pytest.raises(Exception, match="already holds onnxep EPContext nodes"):
        ort.InferenceSession(ctx, so)


def test_context_file_path_is_honoured(tmp_path):
    src = tmp_path / "m.onnx"
    src.write_bytes(_conv_chain())
    out = tmp_path / "sub" / "compiled.onnx"
    out.parent.mkdir()
    so = onnxep_ort.session_options()
    so.add_session_config_entry("ep.context_enable", "1")
    so.add_session_config_entry("ep.context_embed_mode", "0")
    so.add_session_config_entry("ep.context_file_path", str(out))
    sess = ort.InferenceSession(str(src), so)
    x = _x((1, 3, 15, 17), 4)
    want = sess.run(None, {"x": x})[0]
    side = _attrs(_ctx_nodes(str(out))[0])["ep_cache_context"].decode()
    assert (out.parent / side).is_file() and side.startswith("compiled_")
    loaded = ort.InferenceSession(str(out), onnxep_ort.session_options())
    assert np.array_equal(loaded.run(None, {"x": x})[0], want)


def _partitions():
    import gc

    from onnxep import ort_compile
    return [o for o in gc.get_objects() if isinstance(o, ort_compile.Partition)]


def _big_conv_chain():
    """_conv_chain with weights of at least ort_compile.INPLACE_MIN_BYTES (used in place, not copied)."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(5)
    w1 = (rng.standard_normal((64, 32, 3, 3)) * 0.05).astype(np.float32)     # 73 KB
    w2 = (rng.standard_normal((128, 64, 3, 3)) * 0.05).astype(np.float32)    # 295 KB
    b2 = rng.standard_normal(128).astype(np.float32)                          # copied (small)
    nodes = [helper.make_node("Conv", ["x", "w1"], ["c1"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c1"], ["r1"]),
             helper.make_node("Conv", ["r1", "w2", "b2"], ["y"], pads=[1, 1, 1, 1])]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 32, 9, 9])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                          [numpy_helper.from_array(a, n) for n, a in (("w1", w1), ("w2", w2), ("b2", b2))])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 10
    return m.SerializeToString()


def test_large_initializers_are_used_in_place_and_checked_on_the_first_run():
    # Build step 2: onnxruntime's initializer memory is handed to the partition's onnxep session (no copy); the first
    # run checks onnxruntime passes the same memory to the fused node (onnxruntime 1.32 does: nothing moved).
    mb = _big_conv_chain()
    before = {id(p) for p in _partitions()}
    plug = ort.InferenceSession(mb, onnxep_ort.session_options())
    (part,) = [p for p in _partitions() if id(p) not in before]
    assert sorted(part._inplace) == ["w1", "w2"] and part._checking
    cpu = ort.InferenceSession(mb, providers=["CPUExecutionProvider"])
    x = _x((2, 32, 9, 9), 6)
    want = cpu.run(None, {"x": x})[0]
    assert _rel(plug.run(None, {"x": x})[0], want) <= 1e-4
    assert not part._checking and part.moved == 0
    assert _rel(plug.run(None, {"x": x})[0], want) <= 1e-4


def test_initializers_moved_after_compile_rebuild_the_partition():
    # The fallback when the memory seen at Compile is not what the fused node gets: simulated by forgetting where
    # Compile saw the weights; the first run builds the partition again on the run's initializers.
    mb = _big_conv_chain()
    before = {id(p) for p in _partitions()}
    plug = ort.InferenceSession(mb, onnxep_ort.session_options())
    (part,) = [p for p in _partitions() if id(p) not in before]
    part._inplace = {n: 0 for n in part._inplace}
    x = _x((1, 32, 9, 9), 7)
    cpu = ort.InferenceSession(mb, providers=["CPUExecutionProvider"])
    assert _rel(plug.run(None, {"x": x})[0], cpu.run(None, {"x": x})[0]) <= 1e-4
    assert part.moved == 2 and not part._checking
    assert _rel(plug.run(None, {"x": x})[0], cpu.run(None, {"x": x})[0]) <= 1e-4


@pytest.mark.parametrize("embed", [False, True])
def test_model_compiler_api(tmp_path, embed):
    # onnxruntime's ModelCompiler (the compile API) drives the same Compile path as ep.context_enable.
    src = tmp_path / "m.onnx"
    src.write_bytes(_conv_chain())
    x = _x((2, 3, 15, 17), 8)
    want = ort.InferenceSession(str(src), onnxep_ort.session_options()).run(None, {"x": x})[0]
    out = tmp_path / "compiled.onnx"
    ort.ModelCompiler(onnxep_ort.session_options(), str(src), embed_compiled_data_into_model=embed) \
        .compile_to_file(str(out))
    assert len(_ctx_nodes(str(out))) == 1
    assert np.array_equal(ort.InferenceSession(str(out), onnxep_ort.session_options()).run(None, {"x": x})[0], want)
    if embed:   # bytes in, bytes out: the blob travels inside the model
        data = ort.ModelCompiler(onnxep_ort.session_options(), src.read_bytes(),
                                 embed_compiled_data_into_model=True).compile_to_bytes()
        loaded = ort.InferenceSession(data, onnxep_ort.session_options())
        assert np.array_equal(loaded.run(None, {"x": x})[0], want)


def test_reloaded_session_runs_from_several_threads(tmp_path):
    from tests._util import run_threads

    sess, ctx = _compile(str(tmp_path), _conv_chain(), "0")
    loaded = ort.InferenceSession(ctx, onnxep_ort.session_options())
    xs = [_x((1 + i % 3, 3, 15, 17), 10 + i) for i in range(6)]
    want = [sess.run(None, {"x": x})[0] for x in xs]

    def work(i):
        for _ in range(5):
            assert np.array_equal(loaded.run(None, {"x": xs[i]})[0], want[i])

    run_threads(work, len(xs))


@pytest.mark.skipif(not _kernels.bgemm_hw(), reason="bf16 packing needs a CPU with AVX512_BF16")
def test_bf16_blob_of_another_conv_path_is_refused(tmp_path):
    """Which convs of a bf16 session take bf16 (and how each is packed) follows from the CPU's bf16 conv path (AMX,
    vdpbf16ps where it outruns the FMA, or none: ops/_bf16.py); a blob with conv packings records it, and a process
    whose path differs (forced here) refuses it by name; a blob without conv packings loads whatever the path."""
    from onnxep.ops import _bf16
    sess, ctx = _compile(str(tmp_path), _conv_chain(), "0", precision="bf16")
    x = _x((2, 3, 15, 17), 3)
    want = sess.run(None, {"x": x})[0]
    other, before = _bf16.bf16_conv_path() is not None, _bf16._conv_force
    try:
        _bf16.force_bf16_convs(not other)
        with pytest.raises(Exception, match=r"onnxep Compile: .*its convs were packed for the bf16 conv path"):
            ort.InferenceSession(ctx, onnxep_ort.session_options(precision="bf16"))
        sub = tmp_path / "tb"
        sub.mkdir()
        tsess, tctx = _compile(str(sub), _transformer_block(), "0", precision="bf16")
        xt = _x((2, 7, 32), 2)
        tb_want = tsess.run(None, {"x": xt})[0]
        _bf16.force_bf16_convs(other)
        assert np.array_equal(ort.InferenceSession(tctx, onnxep_ort.session_options(precision="bf16"))
                              .run(None, {"x": xt})[0], tb_want)
    finally:
        _bf16.force_bf16_convs(before)
    loaded = ort.InferenceSession(ctx, onnxep_ort.session_options(precision="bf16"))
    assert np.array_equal(loaded.run(None, {"x": x})[0], want)
