"""Conv+BatchNormalization folding, the NHWC layout pass and the NhwcConv epilogue fusions.

Oracles: onnxruntime's CPU provider on the same model (values), and the same model through onnxep with
graph_optimization_level=ORT_DISABLE_ALL (no pass ran). The plans are inspected to check what the passes did."""
import numpy as np
import onnx
import pytest
from onnx import helper

import onnxep
from tests._util import assert_outputs_match, make_model, run_ort

RNG = np.random.default_rng(7)


def _w(*shape):
    return RNG.uniform(-0.5, 0.5, shape).astype(np.float32)


def _session(model, level=onnxep.GraphOptimizationLevel.ORT_ENABLE_ALL, config=None):
    so = onnxep.SessionOptions()
    so.graph_optimization_level = level
    for k, v in (config or {}).items():
        so.add_session_config_entry(k, v)
    return onnxep.InferenceSession(model.SerializeToString(), so)


def _steps(sess):
    return [(st[6], st[0]) for p in sess.plans for st in getattr(p, "steps", ())]


def _ops(sess):
    return [op for op, _ in _steps(sess)]


def _bn_params(c, prefix):
    return {f"{prefix}_s": RNG.uniform(0.5, 1.5, c).astype(np.float32), f"{prefix}_b": _w(c),
            f"{prefix}_m": _w(c), f"{prefix}_v": RNG.uniform(0.5, 1.5, c).astype(np.float32)}


def _resnet_block():
    """Conv-BN-Relu -> Conv-BN (+ shortcut Conv-BN) -> Add -> Relu -> MaxPool -> GlobalAveragePool -> Flatten -> Gemm:
    the shape of a ResNet stage, with both the projection and the main branch ending in a Conv."""
    c = 16
    inits = {"w1": _w(c, 8, 3, 3), "w2": _w(c, c, 3, 3), "ws": _w(c, 8, 1, 1), "wg": _w(c, 10), "bg": _w(10)}
    nodes = [helper.make_node("Conv", ["x", "w1"], ["c1"], pads=[1, 1, 1, 1]),
             helper.make_node("BatchNormalization", ["c1", "a_s", "a_b", "a_m", "a_v"], ["b1"], epsilon=1e-3),
             helper.make_node("Relu", ["b1"], ["r1"]),
             helper.make_node("Conv", ["r1", "w2"], ["c2"], pads=[1, 1, 1, 1]),
             helper.make_node("BatchNormalization", ["c2", "b_s", "b_b", "b_m", "b_v"], ["b2"]),
             helper.make_node("Conv", ["x", "ws"], ["cs"]),
             helper.make_node("BatchNormalization", ["cs", "s_s", "s_b", "s_m", "s_v"], ["bs"]),
             helper.make_node("Add", ["b2", "bs"], ["sum"]),
             helper.make_node("Relu", ["sum"], ["r2"]),
             helper.make_node("MaxPool", ["r2"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("GlobalAveragePool", ["p"], ["gap"]),
             helper.make_node("Flatten", ["gap"], ["f"]),
             helper.make_node("Gemm", ["f", "wg", "bg"], ["y"])]
    for p in ("a", "b", "s"):
        inits.update(_bn_params(c, p))
    x = RNG.uniform(-1, 1, (2, 8, 9, 10)).astype(np.float32)
    return make_model(nodes, {"x": x}, ["y"], initializers=inits), {"x": x}


def test_resnet_block_runs_nhwc_with_fused_epilogues():
    """Oracle: onnxruntime. All BatchNormalizations fold, the block runs channel-last with one Transpose in and one
    out (the pooled (N, C, 1, 1) value leaves as a Reshape: both layouts hold the same bytes), the residual Add and
    both Relus live in NhwcConv epilogues."""
    model, feeds = _resnet_block()
    sess = _session(model)
    ops = _ops(sess)
    assert "BatchNormalization" not in ops and "Add" not in ops and "Relu" not in ops, ops
    assert ops.count("Transpose") == 1 and ops.index("Transpose") == 0, ops
    assert ops[ops.index("NhwcGlobalAveragePool") + 1] == "Reshape", ops
    convs = [k for op, k in _steps(sess) if op == "NhwcConv"]
    assert len(convs) == 3
    assert sorted(k.activation for k in convs) == ["", "Relu", "Relu"]
    assert sum(len(st[1]) == 4 and bool(st[1][3]) for p in sess.plans for st in p.steps if st[6] == "NhwcConv") == 1
    assert {"NhwcMaxPool", "NhwcGlobalAveragePool"} <= set(ops) or "MaxPool" in ops   # pools: NHWC when available
    assert_outputs_match(sess.run(None, feeds), run_ort(model, feeds), rtol=1e-4, atol=1e-5)


def test_passes_off_keeps_the_graph():
    """ORT_DISABLE_ALL: no pass runs (the original ops execute); values agree with the optimized session."""
    model, feeds = _resnet_block()
    plain = _session(model, onnxep.GraphOptimizationLevel.ORT_DISABLE_ALL)
    assert _ops(plain).count("BatchNormalization") == 3 and "NhwcConv" not in _ops(plain)
    basic = _session(model, onnxep.GraphOptimizationLevel.ORT_ENABLE_BASIC)
    assert "BatchNormalization" not in _ops(basic) and "NhwcConv" not in _ops(basic)   # folding only
    want = plain.run(None, feeds)
    assert_outputs_match(basic.run(None, feeds), want, rtol=1e-4, atol=1e-5)
    assert_outputs_match(_session(model).run(None, feeds), want, rtol=1e-4, atol=1e-5)


def test_forced_fallback_ops_stay_nchw():
    """Conv forced onto the reference backend (onnxep.fallback_op_types) is not rewritten. Oracle: onnxruntime."""
    model, feeds = _resnet_block()
    sess = _session(model, config={"onnxep.fallback_op_types": "Conv"})
    assert "NhwcConv" not in _ops(sess)
    assert {sess.node_assignment[n] for n in sess.node_assignment if n.startswith("Conv") or "conv" in n.lower()} \
        <= {"reference", "cpu"}
    assert_outputs_match(sess.run(None, feeds), run_ort(model, feeds), rtol=1e-4, atol=1e-5)


def test_intermediate_graph_output_and_shared_conv_output():
    """A conv output that is also a graph output (and read by two nodes) is not fused away and comes back in NCHW.
    Oracle: onnxruntime."""
    x = RNG.uniform(-1, 1, (1, 4, 6, 5)).astype(np.float32)
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[0, 1, 0, 1]),
             helper.make_node("Relu", ["c"], ["r"]),
             helper.make_node("Add", ["c", "r"], ["y"])]
    model = make_model(nodes, {"x": x}, ["y", "c"], initializers={"w": _w(6, 4, 1, 3)})
    sess = _session(model)
    assert "NhwcConv" in _ops(sess)
    assert all(k.activation == "" for op, k in _steps(sess) if op == "NhwcConv")
    got = sess.run(None, {"x": x})
    assert got[1].shape == (1, 6, 6, 5)
    assert_outputs_match(got, run_ort(model, {"x": x}), rtol=1e-5, atol=1e-6)


def test_concat_on_channels_and_grouped_conv_stay_nhwc():
    """Concat over channels of two NHWC branches stays NHWC (axis remapped); a grouped conv runs NHWC too.
    Oracle: onnxruntime."""
    x = RNG.uniform(-1, 1, (1, 6, 7, 7)).astype(np.float32)
    nodes = [helper.make_node("Conv", ["x", "w1"], ["a"], group=3),
             helper.make_node("Conv", ["x", "w2"], ["b"], pads=[1, 1, 1, 1], strides=[2, 2]),
             helper.make_node("MaxPool", ["a"], ["ap"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),
             helper.make_node("Concat", ["ap", "b"], ["cat"], axis=1),
             helper.make_node("Conv", ["cat", "w3"], ["y"])]
    model = make_model(nodes, {"x": x}, ["y"],
                       initializers={"w1": _w(9, 2, 1, 1), "w2": _w(5, 6, 3, 3), "w3": _w(4, 14, 1, 1)})
    sess = _session(model)
    ops = _ops(sess)
    assert ops.count("NhwcConv") == 3 and ops.count("Transpose") == 2, ops
    assert_outputs_match(sess.run(None, {"x": x}), run_ort(model, {"x": x}), rtol=1e-5, atol=1e-5)


def test_non_2d_conv_and_unknown_rank_stay_nchw():
    """1-D convs have no NHWC twin; they run as before. Oracle: onnxruntime."""
    x = RNG.uniform(-1, 1, (2, 3, 11)).astype(np.float32)
    model = make_model([helper.make_node("Conv", ["x", "w"], ["y"], pads=[1, 1])], {"x": x}, ["y"],
                       initializers={"w": _w(4, 3, 3)})
    sess = _session(model)
    assert _ops(sess) == ["Conv"]
    assert_outputs_match(sess.run(None, {"x": x}), run_ort(model, {"x": x}), rtol=1e-5, atol=1e-6)


def test_conv_bn_not_folded_when_conv_output_is_shared():
    """BN is folded only into a conv whose output nothing else reads. Oracle: onnxruntime."""
    x = RNG.uniform(-1, 1, (1, 3, 5, 5)).astype(np.float32)
    inits = {"w": _w(4, 3, 3, 3)}
    inits.update(_bn_params(4, "n"))
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("BatchNormalization", ["c", "n_s", "n_b", "n_m", "n_v"], ["b"]),
             helper.make_node("Add", ["b", "c"], ["y"])]
    model = make_model(nodes, {"x": x}, ["y"], initializers=inits)
    sess = _session(model, onnxep.GraphOptimizationLevel.ORT_ENABLE_BASIC)
    assert "BatchNormalization" in _ops(sess)
    assert_outputs_match(sess.run(None, {"x": x}), run_ort(model, {"x": x}), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("act", [("Relu", {}, []), ("LeakyRelu", {"alpha": 0.2}, []), ("Sigmoid", {}, []),
                                 ("HardSigmoid", {"alpha": 0.3, "beta": 0.4}, []), ("Tanh", {}, []),
                                 ("Clip", {}, ["lo", "hi"]), ("Clip", {}, ["", "hi"]), ("HardSwish", {}, [])],
                         ids=lambda a: a[0] + "".join(a[2]))
def test_activation_fuses_into_nhwc_conv(act):
    """Conv -> activation becomes one NhwcConv with that epilogue activation. Oracle: onnxruntime."""
    op, attrs, extra = act
    x = RNG.uniform(-1, 1, (1, 5, 8, 8)).astype(np.float32)
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node(op, ["c"] + extra, ["y"], **attrs)]
    inits = {"w": _w(7, 5, 3, 3), "b": _w(7), "lo": np.array(-0.2, np.float32), "hi": np.array(0.3, np.float32)}
    model = make_model(nodes, {"x": x}, ["y"], initializers=inits)
    sess = _session(model)
    assert _ops(sess) == ["Transpose", "NhwcConv", "Transpose"]
    assert [k.activation for op_, k in _steps(sess) if op_ == "NhwcConv"] == [op]
    assert_outputs_match(sess.run(None, {"x": x}), run_ort(model, {"x": x}), rtol=1e-5, atol=1e-5)


def test_isolated_depthwise_conv_and_pool_stay_nchw():
    """A depthwise conv or a pool fed by NCHW stays NCHW (no Transposes for one op); after a dense conv they run
    channel-last. Oracle: onnxruntime."""
    x = RNG.uniform(-1, 1, (1, 4, 6, 6)).astype(np.float32)
    nodes = [helper.make_node("Conv", ["x", "wd"], ["d"], group=4, pads=[1, 1, 1, 1]),
             helper.make_node("MaxPool", ["d"], ["p"], kernel_shape=[2, 2]),
             helper.make_node("Conv", ["p", "w"], ["c"]),
             helper.make_node("Conv", ["c", "wd"], ["e"], group=4, pads=[1, 1, 1, 1]),
             helper.make_node("MaxPool", ["e"], ["y"], kernel_shape=[2, 2])]
    model = make_model(nodes, {"x": x}, ["y"], initializers={"wd": _w(4, 1, 3, 3), "w": _w(4, 4, 1, 1)})
    sess = _session(model)
    assert _ops(sess) == ["Conv", "MaxPool", "Transpose", "NhwcConv", "NhwcConv", "NhwcMaxPool", "Transpose"], \
        _ops(sess)
    assert_outputs_match(sess.run(None, {"x": x}), run_ort(model, {"x": x}), rtol=1e-5, atol=1e-6)


def test_per_channel_mul_add_fold_into_conv():
    """Conv -> Mul (C,1,1) -> Add (1,C,1,1) -> Relu (BatchNormalization as some exporters write it) becomes one conv
    with a Relu epilogue; a Mul by a per-pixel constant does not fold. Oracle: onnxruntime."""
    x = RNG.uniform(-1, 1, (1, 3, 6, 6)).astype(np.float32)
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Mul", ["c", "s"], ["m"]),
             helper.make_node("Add", ["t", "m"], ["a"]),
             helper.make_node("Relu", ["a"], ["r"]),
             helper.make_node("Conv", ["r", "w2"], ["c2"]),
             helper.make_node("Mul", ["c2", "pix"], ["y"])]
    inits = {"w": _w(5, 3, 3, 3), "s": _w(5, 1, 1) + 1, "t": _w(1, 5, 1, 1), "w2": _w(4, 5, 1, 1),
             "pix": _w(1, 1, 6, 6)}
    model = make_model(nodes, {"x": x}, ["y"], initializers=inits)
    sess = _session(model)
    ops = _ops(sess)
    assert ops.count("NhwcConv") == 2 and "Add" not in ops and "Relu" not in ops and ops.count("Mul") == 1, ops
    assert_outputs_match(sess.run(None, {"x": x}), run_ort(model, {"x": x}), rtol=1e-5, atol=1e-5)


def test_preactivation_batchnorm_and_channel_constants_stay_nhwc():
    """A DenseNet block (Concat -> BatchNormalization -> Relu -> Conv, a per-channel Mul between) runs channel-last
    with no Transpose inside: the BatchNormalization becomes a ChannelAffine that absorbs the Relu; the per-channel
    constant of the Mul after it is re-laid out as a (C,) vector. Oracle: onnxruntime."""
    x = RNG.uniform(-1, 1, (1, 4, 5, 5)).astype(np.float32)
    inits = {"w0": _w(6, 4, 3, 3), "w1": _w(3, 10, 1, 1), "k": _w(10, 1, 1) + 1, "w2": _w(2, 13, 3, 3)}
    inits.update(_bn_params(10, "n"))
    nodes = [helper.make_node("Conv", ["x", "w0"], ["c0"], pads=[1, 1, 1, 1]),
             helper.make_node("Concat", ["c0", "x"], ["cat"], axis=1),
             helper.make_node("BatchNormalization", ["cat", "n_s", "n_b", "n_m", "n_v"], ["bn"]),
             helper.make_node("Relu", ["bn"], ["r"]),
             helper.make_node("Mul", ["k", "r"], ["rk"]),
             helper.make_node("Conv", ["rk", "w1"], ["c1"]),
             helper.make_node("Concat", ["c1", "cat"], ["cat2"], axis=1),
             helper.make_node("Conv", ["cat2", "w2"], ["y"], pads=[1, 1, 1, 1])]
    model = make_model(nodes, {"x": x}, ["y"], initializers=inits)
    sess = _session(model)
    ops = _ops(sess)
    assert "BatchNormalization" not in ops and "Relu" not in ops and ops.count("Transpose") == 2, ops   # x in, y out
    assert [k.activation for op, k in _steps(sess) if op == "ChannelAffine"] == ["Relu"] and "Mul" in ops
    assert_outputs_match(sess.run(None, {"x": x}), run_ort(model, {"x": x}), rtol=1e-5, atol=1e-5)


def test_channel_affine_absorbs_mul_add_relu_chain():
    """BatchNormalization -> Mul (C,1,1) -> Add (C,1,1) -> Relu after a channel-last op is one ChannelAffine.
    Oracle: onnxruntime."""
    x = RNG.uniform(-1, 1, (2, 3, 5, 5)).astype(np.float32)
    inits = {"w": _w(6, 3, 1, 1), "s": _w(6, 1, 1) + 1, "t": _w(6, 1, 1)}
    inits.update(_bn_params(6, "n"))
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"]),
             helper.make_node("MaxPool", ["c"], ["p"], kernel_shape=[2, 2]),
             helper.make_node("BatchNormalization", ["p", "n_s", "n_b", "n_m", "n_v"], ["bn"]),
             helper.make_node("Mul", ["bn", "s"], ["m"]),
             helper.make_node("Add", ["t", "m"], ["a"]),
             helper.make_node("Relu", ["a"], ["y"])]
    model = make_model(nodes, {"x": x}, ["y"], initializers=inits)
    sess = _session(model)
    assert _ops(sess) == ["Transpose", "NhwcConv", "NhwcMaxPool", "ChannelAffine", "Transpose"], _ops(sess)
    assert_outputs_match(sess.run(None, {"x": x}), run_ort(model, {"x": x}), rtol=1e-5, atol=1e-5)


def test_channel_shuffle_stays_channel_last():
    """ShuffleNet's channel shuffle (Reshape to (N, g, C/g, H, W), Transpose (0, 2, 1, 3, 4), Reshape back) between
    two convs runs channel-last as one com.onnxep ChannelShuffle node (a swap of the last two axes of
    (N, H, W, g, C/g)); the grouped convs around it stay NHWC. Oracle: onnxruntime."""
    x = RNG.uniform(-1, 1, (1, 6, 5, 4)).astype(np.float32)
    nodes = [helper.make_node("Conv", ["x", "w1"], ["c"], group=2),
             helper.make_node("Reshape", ["c", "s5"], ["r5"]),
             helper.make_node("Transpose", ["r5"], ["t5"], perm=[0, 2, 1, 3, 4]),
             helper.make_node("Reshape", ["t5", "s4"], ["sh"]),
             helper.make_node("Conv", ["sh", "w2"], ["y"], group=3)]
    inits = {"w1": _w(12, 3, 1, 1), "w2": _w(6, 4, 1, 1), "s5": np.array([1, 3, 4, 5, 4], np.int64),
             "s4": np.array([1, 12, 5, 4], np.int64)}
    model = make_model(nodes, {"x": x}, ["y"], initializers=inits)
    sess = _session(model)
    assert _ops(sess) == ["Transpose", "NhwcConv", "ChannelShuffle", "NhwcConv", "Transpose"], _ops(sess)
    assert [int(k.group) for op, k in _steps(sess) if op == "ChannelShuffle"] == [3]
    assert_outputs_match(sess.run(None, {"x": x}), run_ort(model, {"x": x}), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int8, np.float16])
@pytest.mark.parametrize("shape,group", [((2, 3, 5, 12), 4), ((7, 6), 2), ((4, 9), 9), ((3, 5), 1), ((0, 4), 2)])
def test_channel_shuffle_op(shape, group, dtype):
    """com.onnxep ChannelShuffle alone (as an optimized model file carries it): y[..., c*G + g] = x[..., g*Cg + c].
    Oracle: numpy (reshape, swap the last two axes, reshape)."""
    x = (np.arange(int(np.prod(shape))) % 97).astype(dtype).reshape(shape)
    model = make_model([helper.make_node("ChannelShuffle", ["x"], ["y"], domain="com.onnxep", group=group)],
                       {"x": x}, ["y"])
    model.opset_import.append(helper.make_opsetid("com.onnxep", 1))
    sess = onnxep.InferenceSession(model.SerializeToString())
    assert _ops(sess) == ["ChannelShuffle"]
    want = x.reshape(shape[:-1] + (group, shape[-1] // group)).swapaxes(-1, -2).reshape(shape)
    np.testing.assert_array_equal(sess.run(None, {"x": x})[0], want)


def test_channel_shuffle_op_refuses_a_channel_count_off_the_groups():
    model = make_model([helper.make_node("ChannelShuffle", ["x"], ["y"], domain="com.onnxep", group=2)],
                       {"x": np.zeros((2, 5), np.float32)}, ["y"], input_shapes={"x": [2, None]})
    model.opset_import.append(helper.make_opsetid("com.onnxep", 1))
    sess = onnxep.InferenceSession(model.SerializeToString())
    with pytest.raises(onnxep.OnnxepError, match="ChannelShuffle.*multiple of group=2"):
        sess.run(None, {"x": np.zeros((2, 5), np.float32)})
    np.testing.assert_array_equal(sess.run(None, {"x": np.arange(8, dtype=np.float32).reshape(2, 4)})[0],
                                  [[0, 2, 1, 3], [4, 6, 5, 7]])


def test_optimized_model_filepath_writes_the_optimized_graph(tmp_path):
    """optimized_model_filepath holds the graph after the passes (folded BatchNormalization, channel-last convs with
    fused epilogues, the com.onnxep opset imported); loading that file gives the same outputs. Oracle: the session that
    wrote it."""
    model, feeds = _resnet_block()
    path = tmp_path / "opt.onnx"
    so = onnxep.SessionOptions()
    so.optimized_model_filepath = str(path)
    sess = onnxep.InferenceSession(model.SerializeToString(), so)
    written = onnx.load(str(path))
    ops = [n.op_type for n in written.graph.node]
    assert "BatchNormalization" not in ops and ops.count("NhwcConv") == 3 and "Relu" not in ops, ops
    assert {o.domain: o.version for o in written.opset_import}.get("com.onnxep") == 1
    again = onnxep.InferenceSession(str(path))
    np.testing.assert_array_equal(again.run(None, feeds)[0], sess.run(None, feeds)[0])
    assert [st[6] for p in again.plans for st in p.steps] == _ops(sess)


def test_lrn_after_a_conv_runs_channel_last():
    """Conv -> Relu -> LRN -> MaxPool (AlexNet / ZFNet) stays channel-last: NhwcLRN between the conv and the pool,
    no Transpose inside. Oracle: onnxruntime."""
    x = RNG.uniform(-1, 1, (1, 3, 9, 9)).astype(np.float32)
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["r"]),
             helper.make_node("LRN", ["r"], ["l"], size=5, alpha=1e-3, beta=0.75, bias=2.0),
             helper.make_node("MaxPool", ["l"], ["y"], kernel_shape=[3, 3], strides=[2, 2])]
    model = make_model(nodes, {"x": x}, ["y"], initializers={"w": _w(12, 3, 3, 3)})
    sess = _session(model)
    assert _ops(sess) == ["Transpose", "NhwcConv", "NhwcLRN", "NhwcMaxPool", "Transpose"], _ops(sess)
    assert_outputs_match(sess.run(None, {"x": x}), run_ort(model, {"x": x}), rtol=1e-5, atol=1e-6)


def _se_block(act="HardSwish"):
    """Dense conv -> act -> depthwise 5x5 -> squeeze-excite (GlobalAveragePool, two 1x1 convs, HardSigmoid, the
    broadcast Mul over H, W) -> 1x1 projection + residual: a MobileNetV3 / EfficientNet block."""
    c, e = 8, 16
    inits = {"w0": _w(e, c, 1, 1), "wd": _w(e, 1, 5, 5), "bd": _w(e), "w1": _w(4, e, 1, 1), "b1": _w(4),
             "w2": _w(e, 4, 1, 1), "b2": _w(e), "w3": _w(c, e, 1, 1)}
    nodes = [helper.make_node("Conv", ["x", "w0"], ["c0"]),
             helper.make_node(act, ["c0"], ["a0"]),
             helper.make_node("Conv", ["a0", "wd", "bd"], ["cd"], group=e, pads=[2, 2, 2, 2]),
             helper.make_node(act, ["cd"], ["ad"]),
             helper.make_node("GlobalAveragePool", ["ad"], ["g"]),
             helper.make_node("Conv", ["g", "w1", "b1"], ["s1"]),
             helper.make_node("Relu", ["s1"], ["r1"]),
             helper.make_node("Conv", ["r1", "w2", "b2"], ["s2"]),
             helper.make_node("HardSigmoid", ["s2"], ["h"], alpha=1 / 6),
             helper.make_node("Mul", ["ad", "h"], ["m"]),
             helper.make_node("Conv", ["m", "w3"], ["c3"]),
             helper.make_node("Add", ["c3", "x"], ["y"])]
    x = RNG.uniform(-1, 1, (2, c, 9, 11)).astype(np.float32)
    return make_model(nodes, {"x": x}, ["y"], initializers=inits), {"x": x}


@pytest.mark.parametrize("act", ["HardSwish", "Gelu", "Relu"])
def test_squeeze_excite_block_stays_nhwc(act):
    """Oracle: onnxruntime. The depthwise conv, the pool, the 1x1 convs on the pooled vector and the broadcast Mul of
    the (N, C, 1, 1) scale run channel-last: one Transpose in, one out, and no other layout change."""
    model, feeds = _se_block(act)
    model.opset_import[0].version = max(model.opset_import[0].version, 20)    # Gelu
    sess = _session(model)
    ops = _ops(sess)
    assert ops.count("Transpose") == 2, ops
    assert ops.count("NhwcConv") == 5 and "NhwcGlobalAveragePool" in ops and "Reshape" not in ops, ops
    assert_outputs_match(sess.run(None, feeds), run_ort(model, feeds), rtol=1e-4, atol=1e-5)


def test_broadcast_of_any_4d_operand():
    """A Mul of a twin and a computed (N, 1, H, 1) operand runs channel-last too (the operand transposed the same
    way broadcasts the same way). Oracle: onnxruntime."""
    c = 8
    inits = {"w0": _w(c, c, 3, 3), "s": _w(1, 1, 7, 1)}
    nodes = [helper.make_node("Conv", ["x", "w0"], ["c0"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c0"], ["r"]),
             helper.make_node("Mul", ["r", "z"], ["y"])]
    x = RNG.uniform(-1, 1, (2, c, 7, 5)).astype(np.float32)
    z = RNG.uniform(-1, 1, (2, 1, 7, 1)).astype(np.float32)
    model = make_model(nodes, {"x": x, "z": z}, ["y"], initializers=inits)
    sess = _session(model)
    ops = _ops(sess)
    assert ops.count("Transpose") == 3 and ops[-1] == "Transpose", ops
    assert_outputs_match(sess.run(None, {"x": x, "z": z}), run_ort(model, {"x": x, "z": z}), rtol=1e-4, atol=1e-5)


def test_model_transposes_fold_into_the_layout():
    """ConvNeXt's block: depthwise 7x7 -> Transpose to channel-last -> LayerNormalization -> MatMul -> Transpose back
    -> residual Add. Oracle: onnxruntime. The model's Transposes cost nothing: the first is the conv's twin (a view),
    the second is the next conv's NHWC input; only the graph input and output change layout."""
    c = 16
    inits = {"w0": _w(c, 3, 2, 2), "wd": _w(c, 1, 7, 7), "bd": _w(c), "ls": _w(c), "lb": _w(c), "wm": _w(c, c),
             "wd2": _w(c, 1, 7, 7)}
    nodes = [helper.make_node("Conv", ["x", "w0"], ["c0"], strides=[2, 2]),
             helper.make_node("Conv", ["c0", "wd", "bd"], ["cd"], group=c, pads=[3, 3, 3, 3]),
             helper.make_node("Transpose", ["cd"], ["t"], perm=[0, 2, 3, 1]),
             helper.make_node("LayerNormalization", ["t", "ls", "lb"], ["ln"], axis=-1),
             helper.make_node("MatMul", ["ln", "wm"], ["mm"]),
             helper.make_node("Transpose", ["mm"], ["tb"], perm=[0, 3, 1, 2]),
             helper.make_node("Add", ["tb", "c0"], ["r"]),
             helper.make_node("Conv", ["r", "wd2"], ["y"], group=c, pads=[3, 3, 3, 3])]
    x = RNG.uniform(-1, 1, (2, 3, 16, 18)).astype(np.float32)
    model = make_model(nodes, {"x": x}, ["y"], initializers=inits)
    sess = _session(model)
    ops = _ops(sess)
    assert ops.count("Transpose") == 2 and ops.count("NhwcConv") == 3, ops
    assert_outputs_match(sess.run(None, {"x": x}), run_ort(model, {"x": x}), rtol=1e-4, atol=1e-5)
    # the NCHW value the second Transpose makes is materialised when an NCHW reader needs it
    model.graph.output.append(helper.make_tensor_value_info("tb", onnx.TensorProto.FLOAT, None))
    sess = _session(model)
    assert_outputs_match(sess.run(None, {"x": x}), run_ort(model, {"x": x}), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("opset", [13, 18])
@pytest.mark.parametrize("keepdims", [1, 0])
def test_spatial_reduce_mean_is_the_nhwc_global_pool(opset, keepdims):
    """ReduceMean over (H, W) of a channel-last value (torch's squeeze-excite / head pooling) runs as
    NhwcGlobalAveragePool, keepdims=0 through a Reshape view; a ReduceMean over C stays as it is. Oracle:
    onnxruntime."""
    c = 12
    inits = {"w0": _w(c, 4, 3, 3), "w1": _w(c, c, 1, 1)}
    axes = [-2, 3] if keepdims else [2, 3]
    if opset >= 18:
        inits["ax"] = np.array(axes, np.int64)
        inits["axc"] = np.array([1], np.int64)
        mean = helper.make_node("ReduceMean", ["r", "ax"], ["m"], keepdims=keepdims)
        mean_c = helper.make_node("ReduceMean", ["r", "axc"], ["mc"])
    else:
        mean = helper.make_node("ReduceMean", ["r"], ["m"], axes=axes, keepdims=keepdims)
        mean_c = helper.make_node("ReduceMean", ["r"], ["mc"], axes=[1])
    nodes = [helper.make_node("Conv", ["x", "w0"], ["c0"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c0"], ["r"]), mean, mean_c]
    outs = ["m", "mc"]
    if keepdims:
        nodes.append(helper.make_node("Conv", ["m", "w1"], ["s"]))
        nodes.append(helper.make_node("Mul", ["r", "s"], ["y"]))
        outs.append("y")
    x = RNG.uniform(-1, 1, (2, 4, 7, 9)).astype(np.float32)
    model = make_model(nodes, {"x": x}, outs, initializers=inits, opset=opset)
    sess = _session(model)
    ops = _ops(sess)
    assert ops.count("NhwcGlobalAveragePool") == 1 and ops.count("ReduceMean") == 1, ops
    assert_outputs_match(sess.run(None, {"x": x}), run_ort(model, {"x": x}), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("act", ["Clip", "HardSwish", "Sigmoid"])
def test_depthwise_epilogue_activations(act):
    """MobileNetV2's ReLU6 (Clip 0..6) and MobileNetV3's HardSwish after a channel-last depthwise conv run in its
    kernel's epilogue; Sigmoid (no depthwise epilogue for it) stays a node. Oracle: onnxruntime."""
    c = 16
    inits = {"w0": _w(c, 4, 1, 1), "wd": _w(c, 1, 3, 3), "bd": _w(c), "w1": _w(8, c, 1, 1), "lo": np.float32(0),
             "hi": np.float32(6)}
    act_node = helper.make_node("Clip", ["cd", "lo", "hi"], ["a"]) if act == "Clip" \
        else helper.make_node(act, ["cd"], ["a"])
    nodes = [helper.make_node("Conv", ["x", "w0"], ["c0"]),
             helper.make_node("Conv", ["c0", "wd", "bd"], ["cd"], group=c, pads=[1, 1, 1, 1], strides=[2, 2]),
             act_node,
             helper.make_node("Conv", ["a", "w1"], ["y"])]
    x = RNG.uniform(-4, 4, (2, 4, 10, 9)).astype(np.float32)
    model = make_model(nodes, {"x": x}, ["y"], initializers=inits)
    sess = _session(model)
    ops = _ops(sess)
    convs = [k for op, k in _steps(sess) if op == "NhwcConv"]
    if act == "Sigmoid":
        assert act in ops and convs[1].activation == "", ops
    else:
        assert act not in ops and convs[1].activation == act, ops
    assert_outputs_match(sess.run(None, {"x": x}), run_ort(model, {"x": x}), rtol=1e-4, atol=1e-5)


def test_internal_silu_runs_on_twins():
    """A com.onnxep Silu (what fuse_silu writes for x * Sigmoid(x)) between channel-last convs stays channel-last:
    one Transpose in, one out. Oracle: the same model with Sigmoid and Mul through onnxruntime."""
    c = 8
    inits = {"w0": _w(c, 4, 3, 3), "w1": _w(c, c, 1, 1)}
    x = RNG.uniform(-2, 2, (2, 4, 7, 6)).astype(np.float32)
    ref = make_model([helper.make_node("Conv", ["x", "w0"], ["c0"], pads=[1, 1, 1, 1]),
                      helper.make_node("Sigmoid", ["c0"], ["s"]), helper.make_node("Mul", ["c0", "s"], ["a"]),
                      helper.make_node("Conv", ["a", "w1"], ["y"])], {"x": x}, ["y"], initializers=inits)
    model = make_model([helper.make_node("Conv", ["x", "w0"], ["c0"], pads=[1, 1, 1, 1]),
                        helper.make_node("Silu", ["c0"], ["a"], domain="com.onnxep"),
                        helper.make_node("Conv", ["a", "w1"], ["y"])], {"x": x}, ["y"], initializers=inits)
    model.opset_import.append(helper.make_opsetid("com.onnxep", 1))
    sess = _session(model)
    ops = _ops(sess)
    assert ops.count("Transpose") == 2 and "Silu" in ops, ops
    assert_outputs_match(sess.run(None, {"x": x}), run_ort(ref, {"x": x}), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("batch,groups,stride,extra_reader", [("n", 12, 1, False), (2, 12, 2, False),
                                                              (2, 1, 1, False), (2, 12, 1, True)])
def test_sequence_conv_runs_channel_last(batch, groups, stride, extra_reader):
    """SegFormer's Mix-FFN conv between token sequences, (N, L, C) -> Transpose (0, 2, 1) -> Reshape (N, C, H, W) ->
    Conv -> Reshape (N, C', L') -> Transpose (0, 2, 1): NhwcConv between two Reshapes, no Transpose (depthwise or
    dense, strided, a symbolic batch); a second reader of the NCHW map keeps the model's nodes. Oracle: onnxruntime."""
    c, h, w = 12, 5, 7
    ho, wo = (h + stride - 1) // stride, (w + stride - 1) // stride
    inits = {"w": _w(c, c // groups, 3, 3), "b": _w(c), "s1": np.array([0, c, h, w], np.int64),
             "s2": np.array([0, c, ho * wo], np.int64)}
    nodes = [helper.make_node("Transpose", ["x"], ["t"], perm=[0, 2, 1]),
             helper.make_node("Reshape", ["t", "s1"], ["r"]),
             helper.make_node("Conv", ["r", "w", "b"], ["c"], pads=[1, 1, 1, 1], group=groups,
                              strides=[stride, stride]),
             helper.make_node("Reshape", ["c", "s2"], ["r2"]),
             helper.make_node("Transpose", ["r2"], ["t2"], perm=[0, 2, 1]),
             helper.make_node("Relu", ["t2"], ["y"])]
    outs = ["y"]
    if extra_reader:
        nodes.append(helper.make_node("Sigmoid", ["c"], ["z"]))
        outs.append("z")
    x = RNG.uniform(-1, 1, (2, h * w, c)).astype(np.float32)
    model = make_model(nodes, {"x": x}, outs, initializers=inits, input_shapes={"x": [batch, h * w, c]})
    sess = _session(model)
    ops = _ops(sess)
    if extra_reader:
        assert "Transpose" in ops, ops
    else:
        assert "NhwcConv" in ops and "Transpose" not in ops and "Conv" not in ops, ops
    assert_outputs_match(sess.run(None, {"x": x}), run_ort(model, {"x": x}), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("batch,runtime", [("n", False), (2, False), (2, True)])
def test_sequence_conv_allowzero_constant_shapes(batch, runtime):
    """torch.onnx's dynamo export: the two Reshapes carry allowzero=1 with constant (-1, C, H, W) / (-1, C, L)
    shapes (no 0 entry, so allowzero changes nothing): still NhwcConv between two Reshapes, no Transpose. The first
    shape fed at run time with allowzero=1 (a 0 would then be a real 0-sized dim) keeps the model's Transposes.
    Oracle: onnxruntime."""
    c, h, w = 12, 5, 7
    s1 = np.array([-1, c, h, w], np.int64)
    inits = {"w": _w(c, 1, 3, 3), "b": _w(c), "s2": np.array([-1, c, h * w], np.int64)}
    if not runtime:
        inits["s1"] = s1
    nodes = [helper.make_node("Transpose", ["x"], ["t"], perm=[0, 2, 1]),
             helper.make_node("Reshape", ["t", "s1"], ["r"], allowzero=1),
             helper.make_node("Conv", ["r", "w", "b"], ["c"], pads=[1, 1, 1, 1], group=c),
             helper.make_node("Reshape", ["c", "s2"], ["r2"], allowzero=1),
             helper.make_node("Transpose", ["r2"], ["t2"], perm=[0, 2, 1]),
             helper.make_node("Relu", ["t2"], ["y"])]
    x = RNG.uniform(-1, 1, (2, h * w, c)).astype(np.float32)
    feeds = {"x": x, "s1": s1} if runtime else {"x": x}
    model = make_model(nodes, feeds, ["y"], opset=18, initializers=inits, input_shapes={"x": [batch, h * w, c]})
    sess = _session(model)
    ops = _ops(sess)
    if runtime:
        assert "Transpose" in ops, ops
    else:
        assert "NhwcConv" in ops and "Transpose" not in ops and "Conv" not in ops, ops
    assert_outputs_match(sess.run(None, feeds), run_ort(model, feeds), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("zeros", [False, True])
def test_sequence_conv_with_runtime_shapes(zeros):
    """The same with the Reshape shapes computed at run time from Shape nodes (torch.onnx's TorchScript export, a
    dynamic sequence length), the conv's output also read by a Shape (a graph output here), and 0 entries ("copy
    this dim") that move under the permutation: the channel-last conv, no Transpose, onnxruntime's results
    (oracle) for two sequence lengths."""
    c, h = 8, 4
    w_len = np.array([-1], np.int64)
    inits = {"w": _w(c, 1, 3, 3), "b": _w(c), "i0": np.array([0], np.int64), "i01": np.array([0, 1], np.int64),
             "hc": np.array([h], np.int64), "m1": w_len,
             "s1c": np.array([0, 0], np.int64) if zeros else np.array([c], np.int64)}
    nodes = [helper.make_node("Shape", ["x"], ["sx"]),
             helper.make_node("Gather", ["sx", "i0"], ["n"], axis=0),
             helper.make_node("Concat", ["s1c", "hc", "m1"] if zeros else ["n", "s1c", "hc", "m1"], ["s1"], axis=0),
             helper.make_node("Transpose", ["x"], ["t"], perm=[0, 2, 1]),
             helper.make_node("Reshape", ["t", "s1"], ["r"]),
             helper.make_node("Conv", ["r", "w", "b"], ["c"], pads=[1, 1, 1, 1], group=c),
             helper.make_node("Shape", ["c"], ["sc"]),
             helper.make_node("Gather", ["sc", "i01"], ["nc"], axis=0),
             helper.make_node("Concat", ["nc", "m1"], ["s2"], axis=0),
             helper.make_node("Reshape", ["c", "s2"], ["r2"]),
             helper.make_node("Transpose", ["r2"], ["t2"], perm=[0, 2, 1]),
             helper.make_node("Relu", ["t2"], ["y"])]
    x = RNG.uniform(-1, 1, (2, h * 6, c)).astype(np.float32)
    model = make_model(nodes, {"x": x}, ["y", "sc"], initializers=inits, input_shapes={"x": ["n", "l", c]})
    sess = _session(model)
    ops = _ops(sess)
    assert "NhwcConv" in ops and "Transpose" not in ops and "Conv" not in ops, ops
    for x in (x, RNG.uniform(-1, 1, (3, h * 5, c)).astype(np.float32)):
        assert_outputs_match(sess.run(None, {"x": x}), run_ort(model, {"x": x}), rtol=1e-4, atol=1e-5)


def test_residual_add_of_unproven_equal_shapes_stays_nhwc():
    """A residual Add whose operands carry different symbolic dims (what onnx's inference leaves on a TorchScript
    export: unk__54 beside unk__60, equal at run time) runs on the twins, not between a pair of Transposes: the same
    permutation of two 4-D operands broadcasts the same way whatever their dims. Oracle: onnxruntime."""
    c = 8
    f = onnx.TensorProto.FLOAT

    def vi(name, dims):
        return helper.make_tensor_value_info(name, f, dims)

    nodes = [helper.make_node("Conv", ["x", "w1"], ["c1"], pads=[1, 1, 1, 1]),
             helper.make_node("Conv", ["x", "w2"], ["c2"]),
             helper.make_node("Add", ["c1", "c2"], ["s"]),
             helper.make_node("Conv", ["s", "w3"], ["y"], pads=[1, 1, 1, 1])]
    g = helper.make_graph(nodes, "g", [vi("x", ["n", c, "h", "w"])], [vi("y", ["n", c, "h4", "w4"])],
                          [onnx.numpy_helper.from_array(_w(c, c, 3, 3), "w1"),
                           onnx.numpy_helper.from_array(_w(c, c, 1, 1), "w2"),
                           onnx.numpy_helper.from_array(_w(c, c, 3, 3), "w3")],
                          value_info=[vi("c1", ["n", c, "h1", "w1_"]), vi("c2", ["n", c, "h2", "w2_"]),
                                      vi("s", ["n", c, "h3", "w3_"])])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    sess = _session(model)
    ops = _ops(sess)
    assert ops.count("Transpose") == 2 and ops[0] == "Transpose" and ops[-1] == "Transpose", ops
    # ... and folds into the conv as its residual Z (checked against the conv's output shape per signature)
    assert "Add" not in ops and len(_residual_convs(sess)) == 1, ops
    for shape in ((2, c, 9, 7), (1, c, 5, 6), (2, c, 9, 7)):
        x = RNG.uniform(-1, 1, shape).astype(np.float32)
        for _ in range(3):       # the first run records, the next ones run the compiled loop (the conv's C step)
            assert_outputs_match(sess.run(None, {"x": x}), run_ort(model, {"x": x}), rtol=1e-4, atol=1e-5)
    assert _residual_convs(sess)[0]._bare_conv is None       # never a broadcast: always the fused epilogue


def _residual_convs(sess):
    return [st[0] for p in sess.plans for st in p.steps if st[6] == "NhwcConv" and len(st[1]) == 4 and st[1][3]]


_ACTS = [("Relu", {}, ()), ("Clip", {}, (-0.3, 0.4)), ("LeakyRelu", {"alpha": 0.2}, ()), ("Sigmoid", {}, ()),
         ("HardSigmoid", {"alpha": 0.3, "beta": 0.4}, ()), ("Tanh", {}, ()), ("HardSwish", {}, ()), (None, {}, ())]


@pytest.mark.parametrize("act,attrs,bounds", _ACTS, ids=[a[0] or "none" for a in _ACTS])
@pytest.mark.parametrize("k,c", [(1, 8), (3, 16)])      # 3x3 16 -> 16: the Winograd path
def test_residual_add_that_broadcasts_at_run_time(act, attrs, bounds, k, c):
    """Conv(x1) + Conv(x2) [-> activation] over two inputs of independent symbolic shapes: the Add folds into the second
    conv (its shapes may be equal), and on the signatures where they are not -- the residual (N, 1, 1, C) against the
    conv's (N, H, W, C), the conv's (1, 1, 1, C) against a (N, H, W, C) residual, a batch of 1 against 3 -- the conv
    takes the Add's broadcast, then the activation; equal shapes run the fused epilogue. Oracle: onnxruntime."""
    f = onnx.TensorProto.FLOAT
    nodes = [helper.make_node("Conv", ["x1", "w1"], ["c1"]),
             helper.make_node("Conv", ["x2", "w2"], ["c2"], pads=[k // 2] * 4),
             helper.make_node("Add", ["c1", "c2"], ["s"])]
    inits = [onnx.numpy_helper.from_array(_w(c, c, 1, 1), "w1"), onnx.numpy_helper.from_array(_w(c, c, k, k), "w2")]
    if act:
        names = []
        for i, b in enumerate(bounds):
            inits.append(onnx.numpy_helper.from_array(np.array(b, np.float32), f"b{i}"))
            names.append(f"b{i}")
        nodes.append(helper.make_node(act, ["s", *names], ["a"], **attrs))
    nodes.append(helper.make_node("Conv", ["a" if act else "s", "w3"], ["y"]))
    inits.append(onnx.numpy_helper.from_array(_w(c, c, 1, 1), "w3"))
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x1", f, ["n1", c, "h1", "w1"]),
                                       helper.make_tensor_value_info("x2", f, ["n2", c, "h2", "w2"])],
                          [helper.make_tensor_value_info("y", f, None)], inits)
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    sess = _session(model)
    ops = _ops(sess)
    assert "Add" not in ops and (act is None or act not in ops), ops
    fused = _residual_convs(sess)
    assert len(fused) == 1 and fused[0].activation == (act or ""), ops

    def x(*shape):
        return RNG.uniform(-2, 2, shape).astype(np.float32)

    for x1, x2, broadcast in ((x(2, c, 5, 6), x(2, c, 1, 1), True), (x(1, c, 1, 1), x(2, c, 5, 6), True),
                              (x(2, c, 5, 6), x(2, c, 5, 6), False), (x(1, c, 4, 3), x(3, c, 4, 3), True),
                              (x(2, c, 5, 6), x(2, c, 1, 1), True)):
        feeds = {"x1": x1, "x2": x2}
        fused[0]._bare_conv = None
        for _ in range(3):
            assert_outputs_match(sess.run(None, feeds), run_ort(model, feeds), rtol=1e-4, atol=1e-5)
        assert (fused[0]._bare_conv is not None) == broadcast


@pytest.mark.parametrize("shape1,shape2", [(["n", 8, "h", "w"], ["n", 8, 1, 1]), ([2, 8, 5, 6], [2, 8, 1, 6])])
def test_residual_add_not_folded_where_it_always_broadcasts(shape1, shape2):
    """A static 1 beside another dim, or two different static dims: the Add broadcasts on every run, so it stays an
    Add (folding it would gain nothing). Oracle: onnxruntime."""
    c = 8
    f = onnx.TensorProto.FLOAT
    nodes = [helper.make_node("Conv", ["x1", "w1"], ["c1"]), helper.make_node("Conv", ["x2", "w2"], ["c2"]),
             helper.make_node("Add", ["c1", "c2"], ["y"])]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x1", f, shape1),
                                       helper.make_tensor_value_info("x2", f, shape2)],
                          [helper.make_tensor_value_info("y", f, None)],
                          [onnx.numpy_helper.from_array(_w(c, c, 1, 1), "w1"),
                           onnx.numpy_helper.from_array(_w(c, c, 1, 1), "w2")])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    sess = _session(model)
    assert "Add" in _ops(sess) and not _residual_convs(sess)
    feeds = {"x1": RNG.uniform(-1, 1, (2, c, 5, 6)).astype(np.float32),
             "x2": RNG.uniform(-1, 1, (2, c, 1, shape2[3] if isinstance(shape2[3], int) else 6)).astype(np.float32)}
    assert_outputs_match(sess.run(None, feeds), run_ort(model, feeds), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("batch,shape,extra_reader", [("n", [0, 8, -1], False), (2, [2, 8, 16], False),
                                                      (2, [-1, 8, 16], True)])
def test_conv_tokens_view_the_twin(batch, shape, extra_reader):
    """A vision transformer's patch embedding, Conv -> Reshape (N, C, H * W) -> Transpose (0, 2, 1): the NHWC twin
    reshaped to (N, H * W, C), no Transpose back to NCHW nor the model's (only the input's to NHWC); a second reader
    of the map still gets it in NCHW. Oracle: onnxruntime."""
    inits = {"w": _w(8, 3, 2, 2), "b": _w(8), "s": np.array(shape, np.int64)}
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("Reshape", ["c", "s"], ["r"]),
             helper.make_node("Transpose", ["r"], ["t"], perm=[0, 2, 1]),
             helper.make_node("Relu", ["t"], ["y"])]
    outs = ["y"]
    if extra_reader:
        nodes.append(helper.make_node("Sigmoid", ["c"], ["z"]))
        outs.append("z")
    x = RNG.uniform(-1, 1, (2, 3, 8, 8)).astype(np.float32)
    model = make_model(nodes, {"x": x}, outs, initializers=inits, input_shapes={"x": [batch, 3, 8, 8]})
    sess = _session(model)
    ops = _ops(sess)
    assert "NhwcConv" in ops and ops.count("Transpose") == (2 if extra_reader else 1), ops
    assert_outputs_match(sess.run(None, {"x": x}), run_ort(model, {"x": x}), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("case", ["rows", "perm", "not_flat"])
def test_conv_tokens_leaves_other_chains(case):
    """Not a spatial flatten then (0, 2, 1): a Reshape to (N, C * H, W), a Transpose (1, 0, 2), a Reshape keeping
    (N, C, H, W) -- the model's Transpose stays, after the map's Transpose back to NCHW. Oracle: onnxruntime."""
    shape = {"rows": [2, 8 * 4, 4], "perm": [2, 8, 16], "not_flat": [2, 8, 4, 4]}[case]
    perm = {"rows": [0, 2, 1], "perm": [1, 0, 2], "not_flat": [0, 2, 3, 1]}[case]
    inits = {"w": _w(8, 3, 2, 2), "s": np.array(shape, np.int64)}
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("Reshape", ["c", "s"], ["r"]),
             helper.make_node("Transpose", ["r"], ["t"], perm=perm),
             helper.make_node("Relu", ["t"], ["y"])]
    x = RNG.uniform(-1, 1, (2, 3, 8, 8)).astype(np.float32)
    model = make_model(nodes, {"x": x}, ["y"], initializers=inits)
    sess = _session(model)
    ops = _ops(sess)
    assert "NhwcConv" in ops and ops.count("Transpose") == 3, ops
    assert_outputs_match(sess.run(None, {"x": x}), run_ort(model, {"x": x}), rtol=1e-4, atol=1e-5)
