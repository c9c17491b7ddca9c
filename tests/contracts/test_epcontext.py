"""EPContext export and load against seed 003_a6c6328fd6e65493.txt (OrtEp::Compile) and DESIGN.md ("With the session
config entry `ep.context_enable=1` the session writes an EPContext model whose nodes carry the compiled plan and
packed weights; loading it skips compiling and packing").

Oracles: the session that compiled (outputs bit for bit), onnxruntime's CPU provider (light ResNet-50 logits with
seeded random weights, max diff / max |ort| <= 1e-5), counters on the packing / hashing / optimizing functions (monkeypatched), and the exception types
of onnxep.errors (a bad blob is InvalidGraph, never wrong numbers)."""
import os
import subprocess
import sys

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import onnxep
from onnxep import _kernels
from onnxep.errors import Fail, InvalidArgument, InvalidGraph, NoSuchFile
from onnxep.graph import epcontext
from onnxep.ops import _registry
from onnxep.ops._base import OpKernel
from onnxep._bench import REL_ERR, random_feeds, rel_err, with_presoftmax_output
from onnxep._light import light_model
from tests._util import count_packing

SEED = "seed 003_a6c6328fd6e65493.txt"


# ----------------------------------------------------------------------------------------------- helpers
def _synthetic():
    """Conv -> Relu -> Flatten -> [Sin -> Pow(p)] -> Gemm(w2, b2) -> y, plus MatMul(f, w3) -> z.
    Sin and Pow are forced onto the reference backend by _options (onnxep.fallback_op_types): a partition between two
    cpu partitions, reading the constant p. b2 is an overridable initializer (listed as a graph input, IR 8). w3 holds the same bytes as w2
    (Gemm transB=0 and MatMul pack to the same format) so the container shares one packing."""
    rng = np.random.default_rng(0)
    w1 = rng.uniform(-0.5, 0.5, (8, 3, 3, 3)).astype(np.float32)
    b1 = rng.uniform(-0.5, 0.5, (8,)).astype(np.float32)
    w2 = rng.uniform(-0.5, 0.5, (8 * 6 * 6, 5)).astype(np.float32)
    b2 = rng.uniform(-0.5, 0.5, (5,)).astype(np.float32)
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["c"], name="conv"),
             helper.make_node("Relu", ["c"], ["r"], name="relu"),
             helper.make_node("Flatten", ["r"], ["q"], name="flatten"),
             helper.make_node("Sin", ["q"], ["e"], name="sin"),
             helper.make_node("Pow", ["e", "p"], ["f"], name="pow"),
             helper.make_node("Gemm", ["f", "w2", "b2"], ["y"], name="gemm"),
             helper.make_node("MatMul", ["f", "w3"], ["z"], name="matmul")]
    inits = [numpy_helper.from_array(a, n) for n, a in
             (("w1", w1), ("b1", b1), ("w2", w2), ("b2", b2), ("w3", w2.copy()), ("p", np.float32(2.0)))]
    g = helper.make_graph(nodes, "synthetic",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, (2, 3, 8, 8)),
                           helper.make_tensor_value_info("b2", TensorProto.FLOAT, (5,))],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, (2, 5)),
                           helper.make_tensor_value_info("z", TensorProto.FLOAT, (2, 5))], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    m.metadata_props.append(onnx.StringStringEntryProto(key="who", value="test"))
    return m, {"x": rng.uniform(-1, 1, (2, 3, 8, 8)).astype(np.float32)}


def _options(enable="1", embed=None, path=None, **extra):
    so = onnxep.SessionOptions()
    so.add_session_config_entry("onnxep.fallback_op_types", "Sin,Pow")   # the synthetic model's reference partition
    so.add_session_config_entry("ep.context_enable", enable)
    if embed is not None:
        so.add_session_config_entry("ep.context_embed_mode", embed)
    if path is not None:
        so.add_session_config_entry("ep.context_file_path", str(path))
    for k, v in extra.items():
        so.add_session_config_entry(k, v)
    return so


def _export(model, folder, embed="0", name="model"):
    """Save `model` in `folder`, create an exporting session on it; returns (session, model path, ctx path)."""
    src = os.path.join(folder, f"{name}.onnx")
    onnx.save(model, src)
    sess = onnxep.InferenceSession(src, _options(embed=embed))
    return sess, src, os.path.join(folder, f"{name}_ctx.onnx")


def _assert_bit_identical(got, want):
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape
        assert np.array_equal(g, w), float(np.max(np.abs(g - w)))


def _ctx_nodes(path):
    return [n for n in onnx.load(path, load_external_data=False).graph.node if epcontext.is_context_node(n)]


def _attrs(node):
    return {a.name: helper.get_attribute_value(a) for a in node.attribute}


@pytest.fixture
def exported(tmp_path):
    """The synthetic model exported with embed_mode 0: (session, model path, ctx path, feeds)."""
    model, feeds = _synthetic()
    sess, src, ctx = _export(model, str(tmp_path), "0")
    return sess, src, ctx, feeds


# ----------------------------------------------------------------------------------------------- export
@pytest.mark.parametrize("embed", ["0", "1"])
def test_one_epcontext_node_per_cpu_partition_with_its_inputs_and_outputs(tmp_path, embed):
    # seed 003: "If the session is configured to generate a pre-compiled model, the execution provider must return
    # EPContext nodes, as OrtNode instances, that ONNX Runtime uses to create a pre-compiled model, known as an
    # "EPContext model". An EPContext model contains EPContext nodes." and "Each fused node is an OrtNode initialized
    # with the intended fused node name and input/output information."
    model, _ = _synthetic()
    sess, _, ctx = _export(model, str(tmp_path), embed)
    cpu_plans = [p for p in sess.plans if p.backend_name == "cpu"]
    nodes = _ctx_nodes(ctx)
    assert len(nodes) == len(cpu_plans) == 2
    for node, plan in zip(nodes, cpu_plans):
        assert node.domain == "com.microsoft" and node.op_type == "EPContext"
        assert tuple(node.input) == plan.inputs and tuple(node.output) == plan.outputs
        a = _attrs(node)
        assert a["main_context"] == 1 and a["embed_mode"] == int(embed) and a["source"] == b"onnxep"
        assert a["partition_name"] == node.name.encode()
        assert a["ep_sdk_version"] == onnxep.__version__.encode()
        assert a["hardware_architecture"] == _kernels.ISA.encode() and a["notes"] == _kernels.SGEMM_FORMAT.encode()
        if embed == "1":
            assert a["ep_cache_context"][:8] == epcontext.MAGIC
        else:
            assert a["ep_cache_context"] == f"model_ctx_{node.name}.bin".encode()


def test_reference_nodes_stay_plain_onnx_nodes(exported):
    # seed 003: "Each graph contains only the nodes for which the execution provider indicated support." -- the
    # nodes onnxep's cpu backend did not take (reference fallback) are not in any EPContext node.
    sess, _, ctx, _ = exported
    m = onnx.load(ctx)
    assert [(n.domain, n.op_type) for n in m.graph.node] == [
        ("com.microsoft", "EPContext"), ("", "Sin"), ("", "Pow"), ("com.microsoft", "EPContext")]
    assert {t.name for t in m.graph.initializer} == {"p", "b2"}   # the reference partition's constant; the override
    assert {o.domain: o.version for o in m.opset_import} == {"": 17, "com.microsoft": 1}
    assert {p.key: p.value for p in m.metadata_props} == {"who": "test"}


def test_nothing_is_written_unless_enabled(tmp_path):
    # seed 003: "Should be ignored if the session is not configured to generate an EPContext model."
    model, _ = _synthetic()
    src = str(tmp_path / "model.onnx")
    onnx.save(model, src)
    onnxep.InferenceSession(src)
    onnxep.InferenceSession(src, _options(enable="0"))
    assert os.listdir(tmp_path) == ["model.onnx"]


def test_default_path_is_next_to_the_model_and_side_file_next_to_it_by_relative_name(tmp_path):
    # DESIGN / issue 5: ep.context_file_path defaults to <name>_ctx.onnx next to the input model; embed_mode 0 puts
    # the blob in a side file next to the EPContext model, named by a relative file name.
    model, _ = _synthetic()
    sess, src, ctx = _export(model, str(tmp_path), "0")
    assert os.path.isfile(ctx)
    for node in _ctx_nodes(ctx):
        ref = _attrs(node)["ep_cache_context"].decode()
        assert os.path.basename(ref) == ref and not os.path.isabs(ref)
        assert os.path.isfile(os.path.join(os.path.dirname(ctx), ref))
    # an explicit path in another folder: the side files follow the EPContext model, not the input model
    other = tmp_path / "out"
    other.mkdir()
    onnxep.InferenceSession(src, _options(embed="0", path=other / "m.onnx"))
    assert sorted(os.listdir(other)) == ["m.onnx", "m_onnxep_cpu_0.bin", "m_onnxep_cpu_1.bin"]


def test_bytes_model_needs_a_file_path_and_an_existing_file_is_not_overwritten(tmp_path):
    model, feeds = _synthetic()
    with pytest.raises(InvalidArgument, match="ep.context_file_path"):
        onnxep.InferenceSession(model.SerializeToString(), _options())
    path = tmp_path / "from_bytes.onnx"
    onnxep.InferenceSession(model.SerializeToString(), _options(embed="1", path=path))
    assert os.path.isfile(path)
    with pytest.raises(Fail, match="exists already"):     # as onnxruntime: never overwrite
        onnxep.InferenceSession(model.SerializeToString(), _options(embed="1", path=path))
    with pytest.raises(InvalidArgument, match="ep.context_embed_mode"):
        onnxep.InferenceSession(model.SerializeToString(), _options(embed="2", path=tmp_path / "x.onnx"))
    with pytest.raises(InvalidArgument, match="already holds EPContext"):
        onnxep.InferenceSession(str(path), _options(path=tmp_path / "again.onnx"))


# ----------------------------------------------------------------------------------------------- load
@pytest.mark.parametrize("embed", ["0", "1"])
def test_reload_is_bit_identical_to_the_compiling_session(tmp_path, embed):
    # seed 003: "Each EPContext node encapsulates the pre-compiled binary data for a OrtGraph compiled for a specific
    # execution provider." Oracle: the session that compiled, bit for bit (incl. an overridden initializer).
    model, feeds = _synthetic()
    sess, _, ctx = _export(model, str(tmp_path), embed)
    loaded = onnxep.InferenceSession(ctx, _options(enable="0"))   # the same placement: Sin, Pow on the reference
    _assert_bit_identical(loaded.run(None, feeds), sess.run(None, feeds))
    b2 = np.full((5,), 3.0, np.float32)
    _assert_bit_identical(loaded.run(None, dict(feeds, b2=b2)), sess.run(None, dict(feeds, b2=b2)))
    assert loaded.node_assignment == sess.node_assignment
    assert [p.backend_name for p in loaded.plans] == [p.backend_name for p in sess.plans] == ["cpu", "reference", "cpu"]
    assert [(i.name, i.type, i.shape) for i in loaded.get_inputs()] == [(i.name, i.type, i.shape)
                                                                       for i in sess.get_inputs()]
    assert [(o.name, o.type, o.shape) for o in loaded.get_outputs()] == [(o.name, o.type, o.shape)
                                                                        for o in sess.get_outputs()]
    assert loaded.get_modelmeta().custom_metadata_map == {"who": "test"}


def test_embedded_model_loads_from_bytes_and_side_file_model_does_not(tmp_path):
    model, feeds = _synthetic()
    sess, _, ctx1 = _export(model, str(tmp_path), "1", name="embedded")
    with open(ctx1, "rb") as f:
        _assert_bit_identical(onnxep.InferenceSession(f.read()).run(None, feeds), sess.run(None, feeds))
    proto = onnx.load(ctx1)
    before = proto.SerializeToString()
    _assert_bit_identical(onnxep.InferenceSession(proto).run(None, feeds), sess.run(None, feeds))
    assert proto.SerializeToString() == before       # the caller's ModelProto keeps its blobs
    _, _, ctx0 = _export(model, str(tmp_path), "0", name="side")
    with open(ctx0, "rb") as f, pytest.raises(InvalidGraph, match="given as bytes"):
        onnxep.InferenceSession(f.read())


@pytest.mark.parametrize("name,embed", [("resnet50", "0"), ("resnet50", "1"), ("vgg19", "0")])
def test_light_models_reload_bit_identical(tmp_path, name, embed):
    # seed 003: "Each EPContext node encapsulates the pre-compiled binary data for a OrtGraph compiled for a specific
    # execution provider." Oracle: the compiling session (bit for bit), and for ResNet-50 onnxruntime on the
    # pre-softmax logits (seeded random weights: the shipped ones are all 0.02 and give one repeated logit).
    model, pre = with_presoftmax_output(light_model(name))
    sess, _, ctx = _export(model, str(tmp_path), embed, name=name)
    feeds = random_feeds(sess, seed=1)
    want = sess.run(None, feeds)
    del sess
    loaded = onnxep.InferenceSession(ctx)
    assert all(b == "cpu" for b in loaded.node_assignment.values())
    got = loaded.run(None, feeds)
    _assert_bit_identical(got, want)
    if name == "resnet50" and embed == "0":
        ort = pytest.importorskip("onnxruntime")
        so = ort.SessionOptions()
        so.log_severity_level = 3
        ref = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
        (theirs,) = ref.run([pre], feeds)
        (ours,) = loaded.run([pre], feeds)
        assert rel_err(ours, theirs) <= REL_ERR


def test_loading_runs_no_passes_no_packing_no_weight_hash(tmp_path, monkeypatch):
    # DESIGN.md: "loading it skips compiling and packing". Proven by counting calls (not by timing): the kernels'
    # prepack_weight, the native pack routines, the container's content hash, the optimize stage and shape inference.
    from onnxep.contracts.weight_cache import PrePackedWeightsContainer

    calls = {}
    counting = count_packing(monkeypatch, calls)
    monkeypatch.setattr(PrePackedWeightsContainer, "hash_function",
                        staticmethod(counting("hash", PrePackedWeightsContainer.hash_function)))
    import onnxep.session as session_mod
    monkeypatch.setattr(session_mod, "optimize", counting("optimize", session_mod.optimize))
    monkeypatch.setattr(onnx.shape_inference, "infer_shapes", counting("infer", onnx.shape_inference.infer_shapes))

    model, _ = with_presoftmax_output(light_model("resnet50"))
    sess, _, ctx = _export(model, str(tmp_path), "0", name="resnet50")
    assert all(calls.get(k, 0) > 0 for k in ("prepack_weight", "pack", "hash", "optimize", "infer")), calls
    feeds = random_feeds(sess, seed=2)
    want = sess.run(None, feeds)
    del sess
    calls.clear()
    loaded = onnxep.InferenceSession(ctx)
    assert calls == {}, calls
    _assert_bit_identical(loaded.run(None, feeds), want)


def test_loaded_packings_are_shared_through_the_container(tmp_path):
    # DESIGN.md (000): "the container can be shared by several sessions so one weight is packed and held once per
    # process" -- packings read from a blob go through the same PrePackedWeightsContainer.
    model, feeds = _synthetic()
    sess, src, ctx = _export(model, str(tmp_path), "0")
    container = onnxep.PrePackedWeightsContainer()
    a = onnxep.InferenceSession(ctx, prepacked_weights_container=container)
    n, nbytes = len(container), container.nbytes
    assert n == 2 and container.hits == 1          # w1's conv packing; w2 and w3 (same bytes, same format): one
    b = onnxep.InferenceSession(ctx, prepacked_weights_container=container)
    c = onnxep.InferenceSession(src, prepacked_weights_container=container)   # compiles, and hits the loaded ones
    assert (len(container), container.nbytes) == (n, nbytes)
    ka = [s[0] for p in a.plans if p.backend_name == "cpu" for s in p.steps if s[3]]
    kc = [s[0] for p in c.plans if p.backend_name == "cpu" for s in p.steps if s[3]]
    assert [k.packed(1).ctypes.data for k in ka] == [k.packed(1).ctypes.data for k in kc]
    want = sess.run(None, feeds)
    for s in (a, b, c):
        _assert_bit_identical(s.run(None, feeds), want)


# ----------------------------------------------------------------------------------------------- bad blobs
def _side_file(ctx, i=0):
    ref = _attrs(_ctx_nodes(ctx)[i])["ep_cache_context"].decode()
    return os.path.join(os.path.dirname(ctx), ref)


def _split(blob: bytes):
    magic, version, hlen, isa_len, fmt_len, _, mlen, dlen, digest = epcontext._HEADER.unpack_from(blob, 0)
    return blob[hlen:], mlen, dlen, digest


def _rewrite(path, fn):
    with open(path, "rb") as f:
        blob = f.read()
    with open(path, "wb") as f:
        f.write(fn(blob))


def _still_works(src, ctx_ok, feeds, want):
    """After an error: a fresh session on the original model, and on an intact EPContext model, still work."""
    _assert_bit_identical(onnxep.InferenceSession(src).run(None, feeds), want)
    if ctx_ok is not None:
        _assert_bit_identical(onnxep.InferenceSession(ctx_ok).run(None, feeds), want)


@pytest.fixture
def two_exports(tmp_path):
    """The synthetic model exported twice (side files): one copy to damage, one intact."""
    model, feeds = _synthetic()
    bad_dir, ok_dir = tmp_path / "bad", tmp_path / "ok"
    bad_dir.mkdir()
    ok_dir.mkdir()
    sess, src, bad = _export(model, str(bad_dir), "0")
    _, _, ok = _export(model, str(ok_dir), "0")
    return src, bad, ok, feeds, sess.run(None, feeds)


@pytest.mark.parametrize("where", ["data", "manifest"])
def test_tampered_blob_is_refused(two_exports, where):
    # seed 003: "Each EPContext node encapsulates the pre-compiled binary data for a OrtGraph compiled for a specific
    # execution provider." -- a blob that is not byte for byte what was compiled is refused (integrity hash), never run.
    src, bad, ok, feeds, want = two_exports

    def flip(blob):
        payload, mlen, _, _ = _split(blob)
        pos = len(blob) - 1 if where == "data" else len(blob) - len(payload) + mlen // 2
        return blob[:pos] + bytes([blob[pos] ^ 0x01]) + blob[pos + 1:]

    _rewrite(_side_file(bad), flip)
    with pytest.raises(InvalidGraph, match=r"EPContext node 'onnxep_cpu_0': integrity check failed: the header "
                                           r"records XXH64 [0-9a-f]{16}, the payload hashes to [0-9a-f]{16}"):
        onnxep.InferenceSession(bad)
    _still_works(src, ok, feeds, want)


def test_tampered_embedded_blob_is_refused(tmp_path):
    model, feeds = _synthetic()
    sess, src, ctx = _export(model, str(tmp_path), "1")
    m = onnx.load(ctx)
    node = [n for n in m.graph.node if epcontext.is_context_node(n)][1]
    attr = next(a for a in node.attribute if a.name == "ep_cache_context")
    blob = bytearray(attr.s)
    blob[-3] ^= 0x80
    attr.s = bytes(blob)
    with pytest.raises(InvalidGraph, match="'onnxep_cpu_1': integrity check failed"):
        onnxep.InferenceSession(m.SerializeToString())
    _still_works(src, ctx, feeds, sess.run(None, feeds))


def test_blob_for_another_isa_is_refused(two_exports):
    # seed 003: "pre-compiled binary data for a OrtGraph compiled for a specific execution provider": packed for one
    # ISA, it is refused on another (the header names both).
    src, bad, ok, feeds, want = two_exports
    other = "generic" if _kernels.ISA != "generic" else "avx2"

    def reisa(blob):
        payload, mlen, dlen, digest = _split(blob)
        return epcontext._header(mlen, dlen, digest, isa=other) + payload

    _rewrite(_side_file(bad), reisa)
    with pytest.raises(InvalidGraph, match=f"made for kernel ISA '{other}', this process runs '{_kernels.ISA}'"):
        onnxep.InferenceSession(bad)
    _still_works(src, ok, feeds, want)


def test_blob_with_another_packing_format_is_refused(two_exports):
    src, bad, ok, feeds, want = two_exports

    def refmt(blob):
        payload, mlen, dlen, digest = _split(blob)
        return epcontext._header(mlen, dlen, digest, fmt=_kernels.SGEMM_FORMAT.replace("kc=", "kc=1")) + payload

    _rewrite(_side_file(bad), refmt)
    with pytest.raises(InvalidGraph, match="weights are packed as .*kc=1.*, this process packs"):
        onnxep.InferenceSession(bad)
    _still_works(src, ok, feeds, want)


def test_blob_of_another_format_version_is_refused(two_exports):
    src, bad, ok, feeds, want = two_exports

    def reversion(blob):
        payload, mlen, dlen, digest = _split(blob)
        return epcontext._header(mlen, dlen, digest, version=epcontext.FORMAT_VERSION + 1) + payload

    _rewrite(_side_file(bad), reversion)
    with pytest.raises(InvalidGraph, match=f"blob format version {epcontext.FORMAT_VERSION + 1}, this onnxep reads "
                                           f"version {epcontext.FORMAT_VERSION}"):
        onnxep.InferenceSession(bad)
    _still_works(src, ok, feeds, want)


def test_truncated_blob_and_wrong_magic_are_refused(two_exports):
    src, bad, ok, feeds, want = two_exports
    _rewrite(_side_file(bad, 1), lambda b: b[:-64])
    with pytest.raises(InvalidGraph, match="'onnxep_cpu_1': the blob is .* bytes; its header says"):
        onnxep.InferenceSession(bad)
    _rewrite(_side_file(bad, 1), lambda b: b"NOTONNXE" + b[8:])
    with pytest.raises(InvalidGraph, match="not an onnxep EPContext blob"):
        onnxep.InferenceSession(bad)
    _still_works(src, ok, feeds, want)


@pytest.mark.parametrize("lie,message", [
    ("shape", r"node 'conv' input 1: the packed weight is recorded as float32 \(16, 3, 3, 3\), the blob's graph types "
              r"'w1' as tensor\(float\) \(8, 3, 3, 3\)"),
    ("nfloats", r"node 'conv'.*packs to \d+ floats for this kernel, the blob holds \d+"),
    ("buffer", r"node 'conv'.*the packed buffer holds 64 bytes, the packing needs \d+"),
])
def test_consistent_but_lying_manifest_is_refused(two_exports, lie, message):
    # The hash is integrity, not authenticity: a manifest rewritten with a fresh hash must still not run wrong numbers
    # or read out of bounds. The recorded weight shape must match the graph's type for it, and the packed length what
    # the kernel packs for that shape (a longer claim would make the kernel read past the buffer).
    import json
    src, bad, ok, feeds, want = two_exports

    def rewrite(blob):
        payload, mlen, dlen, _ = _split(blob)
        manifest = json.loads(payload[:mlen])
        entry = next(e for e in manifest["prepacked"] if e["node"] == 1)      # the conv (after x_to_nhwc)
        if lie == "shape":
            entry["weight"]["shape"][0] *= 2          # twice the output channels
        elif lie == "nfloats":
            entry["info"]["nfloats"] += 1024
        else:
            entry["buffers"][0][1] = 64               # a buffer shorter than the packing
        mbytes = json.dumps(manifest).encode()
        new = mbytes + bytes(epcontext._pad(len(mbytes)) - len(mbytes)) + payload[epcontext._pad(mlen):]
        digest = _kernels.xxh64(np.frombuffer(new, np.uint8))
        return epcontext._header(len(mbytes), dlen, digest) + new

    _rewrite(_side_file(bad), rewrite)
    with pytest.raises(InvalidGraph, match="EPContext node 'onnxep_cpu_0': .*" + message):
        onnxep.InferenceSession(bad)
    _still_works(src, ok, feeds, want)


@pytest.mark.parametrize("ref", ["../escape.bin", "sub/../../escape.bin", "ABSOLUTE", "..\\escape.bin", ""])
def test_side_file_outside_the_model_folder_is_refused(two_exports, ref):
    # issue 5: the side file is referenced by a relative file name which must never resolve outside the model's folder
    # (the file it names exists, with intact contents: the name alone is refused).
    src, bad, ok, feeds, want = two_exports
    side = _side_file(bad)
    escape = os.path.join(os.path.dirname(os.path.dirname(bad)), "escape.bin")
    with open(side, "rb") as f, open(escape, "wb") as g:
        g.write(f.read())
    if ref == "ABSOLUTE":
        ref = escape
    m = onnx.load(bad)
    node = next(n for n in m.graph.node if epcontext.is_context_node(n))
    next(a for a in node.attribute if a.name == "ep_cache_context").s = ref.encode()
    onnx.save(m, bad)
    with pytest.raises(InvalidGraph, match="'onnxep_cpu_0': side file .* must be a relative file name inside the "
                                           "model's folder"):
        onnxep.InferenceSession(bad)
    _still_works(src, ok, feeds, want)


def test_side_file_symlink_out_of_the_folder_is_refused(two_exports):
    src, bad, ok, feeds, want = two_exports
    side = _side_file(bad)
    outside = os.path.join(os.path.dirname(os.path.dirname(bad)), "outside.bin")
    os.replace(side, outside)
    os.symlink(outside, side)
    with pytest.raises(InvalidGraph, match="resolves to .* outside the model's folder"):
        onnxep.InferenceSession(bad)
    os.remove(side)
    with pytest.raises(NoSuchFile, match="side file .* not found"):
        onnxep.InferenceSession(bad)
    _still_works(src, ok, feeds, want)


def test_blob_exported_under_another_forced_isa_is_refused(tmp_path):
    # seed 003: "compiled for a specific execution provider" -- a real blob from a process running another kernel
    # variant (ONNXEP_ISA) is refused here, and the exporting process's own loader accepts it.
    if _kernels.ISA == "generic":
        pytest.skip("this process already runs the generic variant")
    model, feeds = _synthetic()
    src = tmp_path / "model.onnx"
    onnx.save(model, src)
    script = ("import sys, onnxep\n"
              "so = onnxep.SessionOptions(); so.add_session_config_entry('ep.context_enable', '1')\n"
              "onnxep.InferenceSession(sys.argv[1], so)\n"
              "onnxep.InferenceSession(sys.argv[1][:-5] + '_ctx.onnx')\n")
    r = subprocess.run([sys.executable, "-c", script, str(src)], capture_output=True, text=True,
                       env={**os.environ, "ONNXEP_ISA": "generic"})
    assert r.returncode == 0, r.stderr
    with pytest.raises(InvalidGraph, match=f"made for kernel ISA 'generic', this process runs '{_kernels.ISA}'"):
        onnxep.InferenceSession(str(tmp_path / "model_ctx.onnx"))


def test_foreign_epcontext_nodes_are_refused(exported):
    from onnxep.errors import NotImplemented as OnnxepNotImplemented
    _, _, ctx, _ = exported
    m = onnx.load(ctx)
    node = next(n for n in m.graph.node if epcontext.is_context_node(n))
    next(a for a in node.attribute if a.name == "source").s = b"QNNExecutionProvider"
    with pytest.raises(OnnxepNotImplemented, match="source 'QNNExecutionProvider'"):
        onnxep.InferenceSession(m.SerializeToString())


# ----------------------------------------------------------------------------------------------- kernels
DOMAIN = "test.epcontext"
PACKS = []


class OpaquePackedMatMul(OpKernel):
    """Packs W as W.T in sharing mode but cannot describe its packing (no prepacked_weight_info): an EPContext blob
    keeps its weight unpacked and loading packs it again."""

    domain, op_type, since = DOMAIN, "OpaquePackedMatMul", 1

    def prepack_weight(self, tensor, input_index, allocator, cache):
        if input_index != 1 or cache is None:
            return False
        PACKS.append(self.name)
        buf = allocator.alloc_buffer(tensor.nbytes)
        buf.view(np.float32, tensor.T.shape)[...] = tensor.T
        self.kn = tensor.shape
        cache.store_weight_data([buf])
        return True

    def prepack_format(self, input_index):
        return "test:W.T"

    def set_shared_prepacked_weight(self, buffers, input_index):
        self.w_t = buffers[0].view(np.float32, (self.kn[1], self.kn[0]))

    def compute(self, ctx):
        x = ctx.input(0)
        y = ctx.output(0, (x.shape[0], self.w_t.shape[0]))
        np.matmul(x, self.w_t.T, out=y)


def test_kernel_that_cannot_describe_its_packing_is_packed_again_on_load(tmp_path):
    # Kernel contract: prepacked_weight_info returning None (the default) keeps the original weight in the blob.
    _registry.register(OpaquePackedMatMul)
    try:
        w = np.random.default_rng(3).standard_normal((4, 3)).astype(np.float32)
        g = helper.make_graph([helper.make_node("OpaquePackedMatMul", ["x", "w"], ["y"], domain=DOMAIN, name="mm")],
                              "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])],
                              [numpy_helper.from_array(w, "w")])
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(DOMAIN, 1)],
                              ir_version=8)
        x = np.arange(8, dtype=np.float32).reshape(2, 4)
        PACKS.clear()
        sess, _, ctx = _export(m, str(tmp_path), "1")
        assert PACKS == ["mm"]
        loaded = onnxep.InferenceSession(ctx)
        assert PACKS == ["mm", "mm"]
        _assert_bit_identical(loaded.run(None, {"x": x}), sess.run(None, {"x": x}))
        np.testing.assert_allclose(loaded.run(None, {"x": x})[0], x @ w, rtol=1e-6)   # oracle: numpy
    finally:
        _registry.unregister(OpaquePackedMatMul)


def test_loaded_plans_keep_no_graph_objects(exported):
    # seed 003: "Do NOT cache the provided OrtGraph instances ... the graphs are only valid for the duration of the call
    # to Compile." -- plans rebuilt from a blob keep no Node, Graph, Partition or decoded blob either.
    import gc

    from onnxep.graph.ir import Graph, Node
    from onnxep.graph.partition import Partition
    _, _, ctx, _ = exported
    loaded = onnxep.InferenceSession(ctx)
    seen, stack = {}, [p for p in loaded.plans if p.backend_name == "cpu"]   # (the reference plan holds its own model)
    while stack and len(seen) < 200000:
        o = stack.pop()
        if id(o) in seen or isinstance(o, type) or type(o).__name__ == "module":
            continue
        seen[id(o)] = o
        stack.extend(gc.get_referents(o))
    bad = [type(o).__name__ for o in seen.values()
           if isinstance(o, (Graph, Node, Partition, epcontext.LoadedContext, onnx.NodeProto, onnx.GraphProto))]
    assert not bad, bad


@pytest.mark.parametrize("embed", ["0", "1"])
def test_zero_d_constants_keep_their_shape(tmp_path, embed):
    """A 0-d constant (the scalars torch.onnx writes) is saved in the blob as 0-d, not as shape (1,): reloaded, a
    0-d input times it is still 0-d (oracle: the exporting session, bit for bit, and numpy)."""
    nodes = [helper.make_node("Mul", ["x", "scale"], ["y"])]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                          [numpy_helper.from_array(np.array(2.0, np.float32), "scale")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    x = np.array(3.0, np.float32)
    sess, _, ctx = _export(m, tmp_path, embed=embed)
    want = sess.run(None, {"x": x})
    np.testing.assert_array_equal(want[0], np.array(6.0, np.float32))
    _assert_bit_identical(onnxep.InferenceSession(ctx).run(None, {"x": x}), want)
