"""QLinearConv (ops/quant/q_linear_conv.py) on its native path (the channel-last int8 conv of onnxep/_native/qconv.h,
x transposed to NHWC and back) and the cases that stay on numpy (grouped, 1-D).

Oracles: the numpy path itself (exact integer conv + MLAS requantization; _qconv.applies patched to refuse) -- equal
bits -- and onnxruntime's QLinearConv (MLAS), to one quantization step (its multiplier may round in another order)."""
import numpy as np
import pytest
from onnx import helper

import onnxep
from onnxep.ops.quant import _qconv
from tests._util import make_model, run_ort

CASES = [  # (x shape, M, kernel, group, strides, pads)
    ((1, 3, 9, 9), 8, (3, 3), 1, (1, 1), (1, 1, 1, 1)),
    ((2, 16, 7, 6), 33, (1, 1), 1, (2, 2), (0, 0, 0, 0)),
    ((1, 3, 12, 12), 16, (7, 7), 1, (2, 2), (3, 3, 3, 3)),
    ((1, 24, 8, 8), 24, (3, 3), 24, (2, 2), (1, 1, 1, 1)),        # depthwise
    ((1, 8, 6, 6), 8, (3, 3), 2, (1, 1), (1, 1, 1, 1)),           # grouped: numpy
    ((1, 4, 10), 6, (3,), 1, (1,), (1, 1)),                        # 1-D: numpy
]


def _model(case, xt, wt, per_channel, seed):
    xshape, m, k, group, strides, pads = case
    rng = np.random.default_rng(seed)
    c = xshape[1]
    xi, wi = np.iinfo(xt), np.iinfo(wt)
    w = rng.integers(wi.min, wi.max + 1, (m, c // group) + k).astype(wt)
    ws = (rng.uniform(0.002, 0.01, m) if per_channel else np.array(0.004)).astype(np.float32)
    wz = (rng.integers(wi.min // 4, wi.max // 4, m) if per_channel else np.array(wi.max // 8)).astype(wt) \
        if wt == np.uint8 else np.zeros(ws.shape, wt)
    inits = {"xs": np.float32(0.02), "xz": np.array(xi.min + 9, xt), "w": w, "ws": ws, "wz": wz,
             "ys": np.float32(0.05 * np.sqrt(c // group * np.prod(k))), "yz": np.array(xi.min + 60, xt),
             "b": rng.integers(-5000, 5000, m).astype(np.int32)}
    node = helper.make_node("QLinearConv", ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz", "b"], ["y"],
                            group=group, strides=list(strides), pads=list(pads))
    feeds = {"x": rng.integers(xi.min, xi.max + 1, xshape).astype(xt)}
    return make_model([node], feeds, ["y"], opset=13, initializers=inits), feeds


@pytest.mark.parametrize("case", CASES, ids=[f"c{i}" for i in range(len(CASES))])
@pytest.mark.parametrize("xt,wt", [(np.uint8, np.int8), (np.int8, np.int8), (np.uint8, np.uint8)])
@pytest.mark.parametrize("per_channel", [False, True])
def test_native_matches_numpy_and_ort(case, xt, wt, per_channel, monkeypatch):
    model, feeds = _model(case, xt, wt, per_channel, seed=len(case[0]) * 7 + case[1])
    got = onnxep.InferenceSession(model.SerializeToString()).run(None, feeds)[0]
    with monkeypatch.context() as mp:
        mp.setattr(_qconv, "applies", lambda *a, **k: False)
        ref = onnxep.InferenceSession(model.SerializeToString()).run(None, feeds)[0]
    assert got.dtype == ref.dtype
    np.testing.assert_array_equal(got, ref)
    want = run_ort(model, feeds)[0]
    assert np.abs(got.astype(np.int32) - want.astype(np.int32)).max() <= 1


def test_native_path_taken(monkeypatch):
    """The 2-D group-1 case calls the native conv (a spy on _qconv.run)."""
    calls = []
    orig = _qconv.run
    monkeypatch.setattr(_qconv, "run", lambda *a, **k: (calls.append(1), orig(*a, **k)))
    model, feeds = _model(CASES[0], np.uint8, np.int8, True, 0)
    onnxep.InferenceSession(model.SerializeToString()).run(None, feeds)
    assert calls
