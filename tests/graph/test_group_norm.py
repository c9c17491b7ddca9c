"""GroupNorm: the fusion (graph/passes/fuse_group_norm.py) on the chains both torch exporters write for
torch.nn.GroupNorm, the com.onnxep GroupNorm kernel (_kernels.group_norm_f32, every ISA variant the machine runs), and
the compiled run loop's RL_GROUP_NORM step.

Oracles: onnxruntime's CPU provider on the original (unfused) model; the same model through onnxep with the pass
disabled; for the kernel, a float64 numpy GroupNorm. Plans are inspected to check what was fused."""
import collections
import importlib

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import onnxep
from onnxep import _kernels
from tests._util import run_ort

RNG = np.random.default_rng(41)
VARIANTS = {isa: importlib.import_module(f"onnxep._kernels_{isa}") for isa in _kernels.AVAILABLE}


def _session(model, disabled=None, threads=0, level=None):
    so = onnxep.SessionOptions()
    so.intra_op_num_threads = threads
    if level is not None:
        so.graph_optimization_level = level
    kw = {"disabled_optimizers": disabled} if disabled else {}
    return onnxep.InferenceSession(model.SerializeToString(), so, **kw)


def _ops(sess):
    return collections.Counter(st[6] for p in sess.plans for st in getattr(p, "steps", ()))


def _rel_err(got, want):
    return float(np.max(np.abs(got - want)) / max(float(np.max(np.abs(want))), 1e-30))


def numpy_group_norm(x, G, gamma, beta, eps, silu, channels_last=False):
    """Oracle: float64 GroupNorm of (N, C, ...) (channel-last: (N, ..., C))."""
    x64 = x.astype(np.float64)
    if channels_last:
        x64 = np.moveaxis(x64, -1, 1)
    N, C = x64.shape[:2]
    g = x64.reshape(N, G, -1)
    y = ((g - g.mean(axis=2, keepdims=True)) / np.sqrt(g.var(axis=2, keepdims=True) + eps)).reshape(x64.shape)
    bc = (1, C) + (1,) * (x64.ndim - 2)
    y = y * gamma.astype(np.float64).reshape(bc) + beta.astype(np.float64).reshape(bc)
    if silu:
        y = y / (1 + np.exp(-y))
    if channels_last:
        y = np.moveaxis(y, 1, -1)
    return y.astype(np.float32)


# ---------------------------------------------------------------------------------------------------------- kernel
@pytest.mark.parametrize("shape,G", [((1, 1, 1), 1), ((2, 6, 5), 3), ((3, 8, 16, 16), 4), ((1, 32, 9, 7), 32),
                                     ((2, 4, 3000), 2), ((1, 6, 2, 3, 5), 2), ((1, 64, 40, 30), 8),
                                     ((2, 320, 300), 32)])
@pytest.mark.parametrize("silu", [False, True])
@pytest.mark.parametrize("layout", [0, 1, 2])
def test_group_norm_kernel(shape, G, silu, layout):
    """layout 0: NCHW, 1: channel-last, 2: NCHW in, channel-last out. The last two shapes take the channel-last
    moments over several row blocks (about 16K floats each, the last one partial); every thread count gives the
    same bits."""
    x = (RNG.standard_normal(shape) * 3 + 5).astype(np.float32)
    C = shape[1]
    gamma, beta = RNG.standard_normal(C).astype(np.float32), RNG.standard_normal(C).astype(np.float32)
    xl = np.ascontiguousarray(np.moveaxis(x, 1, -1)) if layout == 1 else x
    want = numpy_group_norm(xl, G, gamma, beta, 1e-5, silu, layout == 1)
    if layout == 2:
        want = np.ascontiguousarray(np.moveaxis(want, 1, -1))
    S = int(np.prod(shape[2:]))
    for isa, mod in VARIANTS.items():
        ys = []
        for nt in (1, 2, 3):
            y = np.empty(want.shape, np.float32)
            mod.group_norm_f32(xl.reshape(-1), y.reshape(-1), shape[0], C, S, G, gamma, beta, 1e-5, silu,
                               layout, nt)
            np.testing.assert_allclose(y, want, rtol=2e-5, atol=2e-5, err_msg=f"{isa} {nt}")
            ys.append(y)
        assert all(np.array_equal(ys[0], y) for y in ys[1:]), isa


@pytest.mark.parametrize("layout", [0, 1])
def test_group_norm_kernel_large_offset_and_silu_extremes(layout):
    """A mean 1e4 standard deviations away (no cancellation in the variance), and SiLU of large |y|; channel-last
    over two row blocks."""
    x = (RNG.standard_normal((2, 4, 5000)) + 1e4).astype(np.float32)
    gamma = np.array([1, 50, 100, -100], np.float32)
    beta = np.zeros(4, np.float32)
    xl = np.ascontiguousarray(np.moveaxis(x, 1, -1)) if layout == 1 else x
    for silu in (False, True):
        want = numpy_group_norm(xl, 2, gamma, beta, 1e-5, silu, layout == 1)
        for isa, mod in VARIANTS.items():
            y = np.empty_like(xl)
            mod.group_norm_f32(xl.reshape(-1), y.reshape(-1), 2, 4, 5000, 2, gamma, beta, 1e-5, silu, layout, 1)
            np.testing.assert_allclose(y, want, rtol=1e-3, atol=1e-3, err_msg=isa)


def test_group_norm_kernel_checks_shapes():
    x = np.zeros(24, np.float32)
    with pytest.raises(ValueError):
        _kernels.group_norm_f32(x, x, 2, 6, 2, 4, np.ones(6, np.float32), np.zeros(6, np.float32), 1e-5)
    with pytest.raises(ValueError):
        _kernels.group_norm_f32(x, x, 2, 6, 3, 3, np.ones(6, np.float32), np.zeros(6, np.float32), 1e-5)
    with pytest.raises(ValueError):
        _kernels.group_norm_f32(x, x, 2, 6, 2, 3, np.ones(6, np.float32), np.zeros(6, np.float32), 1e-5, False, 3)


# ---------------------------------------------------------------------------------------------------------- fusion
def _gn_model(form="torchscript", C=8, G=4, spatial=(6, 5), affine=True, silu="sigmoid", conv=False,
              extra_output=None, ones=True, conv_after=False):
    """x -> [Conv] -> Reshape (N, G, -1) -> InstanceNormalization -> Reshape back -> Mul -> Add -> SiLU -> y."""
    rank = 2 + len(spatial)
    nodes, inits = [], []
    x = "x"
    if conv:
        nodes.append(helper.make_node("Conv", ["x", "w"], ["xc"], pads=[1, 1, 1, 1]))
        inits.append(onnx.numpy_helper.from_array(RNG.standard_normal((C, C, 3, 3)).astype(np.float32) * 0.2, "w"))
        x = "xc"
    first = 0 if form == "torchscript" else 2
    inits.append(onnx.numpy_helper.from_array(np.array([first, G, -1], np.int64), "gshape"))
    nodes.append(helper.make_node("Reshape", [x, "gshape"], ["xg"]))
    s = np.ones(G, np.float32) if ones else RNG.standard_normal(G).astype(np.float32)
    b = np.zeros(G, np.float32) if ones else RNG.standard_normal(G).astype(np.float32)
    inits += [onnx.numpy_helper.from_array(s, "s"), onnx.numpy_helper.from_array(b, "b")]
    nodes.append(helper.make_node("InstanceNormalization", ["xg", "s", "b"], ["xn"], epsilon=1e-5))
    if form == "torchscript":
        nodes.append(helper.make_node("Shape", [x], ["xs"]))
        nodes.append(helper.make_node("Reshape", ["xn", "xs"], ["r"]))
    else:
        inits.append(onnx.numpy_helper.from_array(np.array((2, C) + tuple(spatial), np.int64), "xshape"))
        nodes.append(helper.make_node("Reshape", ["xn", "xshape"], ["r"]))
    cur = "r"
    if affine:
        bc = (C,) + (1,) * len(spatial)
        inits += [onnx.numpy_helper.from_array(RNG.standard_normal(bc).astype(np.float32), "gamma"),
                  onnx.numpy_helper.from_array(RNG.standard_normal(bc).astype(np.float32), "beta")]
        nodes += [helper.make_node("Mul", [cur, "gamma"], ["m"]), helper.make_node("Add", ["m", "beta"], ["a"])]
        cur = "a"
    last = "z" if conv_after else "y"
    if silu == "sigmoid":
        nodes += [helper.make_node("Sigmoid", [cur], ["sg"]), helper.make_node("Mul", [cur, "sg"], [last])]
    else:
        nodes.append(helper.make_node("Identity", [cur], [last]))
    if conv_after:
        nodes.append(helper.make_node("Conv", ["z", "w2"], ["y"], pads=[1, 1, 1, 1]))
        inits.append(onnx.numpy_helper.from_array(RNG.standard_normal((C, C, 3, 3)).astype(np.float32) * 0.2, "w2"))
    shape = [2, C] + list(spatial)
    outs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)]
    if extra_output:
        outs.append(helper.make_tensor_value_info(extra_output, TensorProto.FLOAT, None))
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)], outs, inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m, {"x": (RNG.standard_normal(shape) * 2 + 1).astype(np.float32)}, rank


def _check(model, feeds, rtol=1e-5, level=None):
    fused = _session(model, level=level)
    got = fused.run(None, feeds)
    plain = _session(model, ["fuse_group_norm"], level=level).run(None, feeds)
    for g, o, p in zip(got, run_ort(model, feeds), plain):
        assert g.shape == o.shape and g.dtype == o.dtype
        assert _rel_err(g, o) <= rtol
        assert _rel_err(g, p) <= rtol
    got2 = fused.run(None, feeds)          # the second run goes through the compiled run loop
    for g, g2 in zip(got, got2):
        np.testing.assert_array_equal(g, g2)
    return _ops(fused)


@pytest.mark.parametrize("form", ["torchscript", "dynamo"])
@pytest.mark.parametrize("silu", ["sigmoid", None])
@pytest.mark.parametrize("ones", [True, False])
def test_group_norm_fused(form, silu, ones):
    m, feeds, _ = _gn_model(form, silu=silu, ones=ones)
    ops = _check(m, feeds)
    assert ops["GroupNorm"] == 1 and "InstanceNormalization" not in ops and "Sigmoid" not in ops
    assert "Mul" not in ops and "Add" not in ops


def test_group_norm_1d_one_channel_per_group():
    """wav2vec2's feature extractor: GroupNorm(C, C) on (N, C, L)."""
    m, feeds, _ = _gn_model("dynamo", C=16, G=16, spatial=(40,), silu=None)
    ops = _check(m, feeds)
    assert ops["GroupNorm"] == 1


def test_group_norm_no_affine():
    m, feeds, _ = _gn_model("torchscript", affine=False)
    ops = _check(m, feeds)
    assert ops["GroupNorm"] == 1 and "Sigmoid" not in ops


@pytest.mark.parametrize("level", [None, onnxep.GraphOptimizationLevel.ORT_ENABLE_EXTENDED])
@pytest.mark.parametrize("extra", [None, "xc"])
def test_group_norm_between_convs(level, extra):
    """In a conv net, after the layout pass: the GroupNorm reads the channel-last conv output and writes
    channel-last for the next conv (no Transpose left but the graph input's and output's); when the conv output is also read in
    NCHW (a graph output here), it reads NCHW and still writes channel-last."""
    m, feeds, _ = _gn_model("torchscript", C=16, G=4, spatial=(9, 7), conv=True, conv_after=True,
                            extra_output=extra)
    ops = _check(m, feeds, level=level)
    assert ops["GroupNorm"] == 1 and "InstanceNormalization" not in ops
    if level is None:                # all levels: the layout pass and fuse_group_norm_nhwc ran
        assert ops["Transpose"] == (2 if extra is None else 3)


def test_group_norm_intermediate_read_elsewhere_not_fused():
    m, feeds, _ = _gn_model("torchscript", extra_output="xn")
    ops = _check(m, feeds)
    assert "GroupNorm" not in ops and ops["InstanceNormalization"] == 1


def test_group_norm_affine_output_read_elsewhere_keeps_silu_apart():
    m, feeds, _ = _gn_model("dynamo", extra_output="a")
    ops = _check(m, feeds)
    assert ops["GroupNorm"] == 1 and ops["Sigmoid"] + ops["Silu"] == 1     # (fuse_silu takes it: no conv here)


def test_group_norm_output_shape_logic_still_folded():
    """Shape logic on the GroupNorm's result (Shape -> Gather -> Unsqueeze -> Concat -> Reshape) is still cached as a
    ShapeSubgraph: fold_shape_subgraphs sees through GroupNorm."""
    m, feeds, _ = _gn_model("dynamo", silu=None)
    g = m.graph
    g.node[-1].output[0] = "z"
    g.initializer.extend([onnx.numpy_helper.from_array(np.array(0, np.int64), "zero"),
                          onnx.numpy_helper.from_array(np.array([0], np.int64), "ax0"),
                          onnx.numpy_helper.from_array(np.array([-1], np.int64), "minus1")])
    g.node.extend([helper.make_node("Shape", ["z"], ["zs"]), helper.make_node("Gather", ["zs", "zero"], ["n"]),
                   helper.make_node("Unsqueeze", ["n", "ax0"], ["n1"]),
                   helper.make_node("Concat", ["n1", "minus1"], ["shp"], axis=0),
                   helper.make_node("Reshape", ["z", "shp"], ["y"])])
    del g.output[:]
    g.output.append(helper.make_tensor_value_info("y", TensorProto.FLOAT, None))
    ops = _check(m, feeds)
    assert ops["GroupNorm"] == 1 and ops["ShapeSubgraph"] == 1 and "Shape" not in ops
