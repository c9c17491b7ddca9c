"""RotaryEmbedding (opset 23) on the cpu backend: 3-D (num_heads) and 4-D input, interleaved or halves, position_ids
or per-token caches, a partial rotary_embedding_dim; float16 / float32. Oracles: onnx.reference, and numpy (a rotation
keeps each pair's norm)."""
import numpy as np
import pytest

import onnxep
from onnxep.errors import InvalidArgument
from tests._util import assert_outputs_match, cpu_only_options, fallback_nodes, make_model, run_onnxep, \
    run_reference
from tests.ops._eltshape import node, rand

B, S, H, D = 2, 3, 2, 8


def _feeds(dtype, four_d, positions, rot):
    x = rand((B, H, S, D) if four_d else (B, S, H * D), 0, dtype)
    half = (rot or D) // 2
    if positions:
        ang = rand((10, half), 1) * 3
        feeds = {"x": x, "cos": np.cos(ang).astype(dtype), "sin": np.sin(ang).astype(dtype),
                 "pos": np.random.default_rng(2).integers(0, 10, (B, S)).astype(np.int64)}
    else:
        ang = rand((B, S, half), 1) * 3
        feeds = {"x": x, "cos": np.cos(ang).astype(dtype), "sin": np.sin(ang).astype(dtype)}
    return feeds


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("rot", [0, 4])
@pytest.mark.parametrize("interleaved", [0, 1])
@pytest.mark.parametrize("positions", [False, True])
@pytest.mark.parametrize("four_d", [False, True])
def test_rotary_embedding(four_d, positions, interleaved, rot, dtype):
    feeds = _feeds(dtype, four_d, positions, rot)
    attrs = {"interleaved": interleaved, "rotary_embedding_dim": rot}
    if not four_d:
        attrs["num_heads"] = H
    n = node("RotaryEmbedding", list(feeds), ["y"], **attrs)
    m = make_model([n], feeds, ["y"], opset=23, ir_version=10)
    got, sess = run_onnxep(m, feeds, sess_options=cpu_only_options())
    assert fallback_nodes(sess) == []
    tol = 5e-3 if dtype == np.float16 else 1e-6
    assert_outputs_match(got, run_reference(m, feeds), rtol=tol, atol=tol)
    if dtype == np.float32 and not rot and not interleaved:   # numpy: each (x1, x2) pair keeps its norm
        x = feeds["x"] if four_d else feeds["x"].reshape(B, S, H, D)
        y = got[0] if four_d else got[0].reshape(B, S, H, D)
        np.testing.assert_allclose(np.hypot(y[..., :D // 2], y[..., D // 2:]),
                                   np.hypot(x[..., :D // 2], x[..., D // 2:]), rtol=1e-5)


def test_rotary_embedding_bad_position():
    """Oracle: none -- a position past the cache raises InvalidArgument naming the node."""
    feeds = _feeds(np.float32, True, True, 0)
    m = make_model([node("RotaryEmbedding", list(feeds), ["y"])], feeds, ["y"], opset=23, ir_version=10)
    sess = onnxep.InferenceSession(m.SerializeToString(), cpu_only_options())
    with pytest.raises(InvalidArgument, match=r"rotaryembedding_0.*position_ids must be in \[0, 9\]"):
        sess.run(None, {**feeds, "pos": np.full((B, S), 10, np.int64)})
    assert sess.run(None, feeds)[0].shape == feeds["x"].shape
