"""The batch-inference recipe (onnxep/batch.py) on a local multi-process Dask cluster.

Oracle: a plain loop over the same batches with one onnxep session in this process (same kernels, 1 thread, so the
outputs must be identical), and onnxruntime for the model's values. The cluster has two worker processes, so the
batches are spread over two sessions created in two other processes.
"""
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import onnxep

distributed = pytest.importorskip("distributed", reason="the batch recipe's test needs onnxep[test] (dask[distributed])")
import onnxep.batch  # noqa: E402  (needs distributed)

from tests._util import run_ort  # noqa: E402


def conv_model() -> bytes:
    rng = np.random.default_rng(7)
    w = rng.standard_normal((8, 3, 3, 3)).astype(np.float32)
    b = rng.standard_normal(8).astype(np.float32)
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["r"]),
             helper.make_node("GlobalAveragePool", ["r"], ["y"])]
    graph = helper.make_graph(
        nodes, "conv", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 16, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 8, 1, 1])],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=9).SerializeToString()


@pytest.fixture(scope="module")
def client():
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
                                       worker_dashboard_address=None)
    c = distributed.Client(cluster)
    yield c
    c.close()
    cluster.close()


def test_map_batches_equals_plain_loop(client):
    model = conv_model()
    rng = np.random.default_rng(0)
    feeds = [{"x": rng.standard_normal((n, 3, 16, 16)).astype(np.float32)} for n in (1, 4, 2, 3, 1, 5)]
    got = onnxep.batch.map_batches(client, model, feeds, threads=1)
    so = onnxep.SessionOptions()
    so.intra_op_num_threads = 1
    sess = onnxep.InferenceSession(model, so)
    assert len(got) == len(feeds)
    for feed, outs in zip(feeds, got):
        want = sess.run(None, feed)
        assert len(outs) == 1 and outs[0].shape == want[0].shape
        np.testing.assert_array_equal(outs[0], want[0])
        np.testing.assert_allclose(outs[0], run_ort(onnx.load_from_string(model), feed)[0], rtol=1e-5, atol=1e-5)
    # the batches ran in both worker processes, each on its own session
    pids = client.run(lambda: __import__("os").getpid())
    assert len(set(pids.values())) == 2


def test_sessions_live_in_the_workers_and_share_a_container(client):
    model = conv_model()
    client.register_plugin(onnxep.batch.SessionPlugin(model, name="a", threads=1), name="a")
    client.register_plugin(onnxep.batch.SessionPlugin(model, name="b", threads=1), name="b")

    def probe(dask_worker):            # client.run passes the worker to a function that takes `dask_worker`
        p = dask_worker.plugins
        sa, sb = p["a"].session, p["b"].session
        return (sa is not None, sb is not None, sa is not sb,
                sa._container is sb._container is onnxep.batch.process_container())

    for result in client.run(probe).values():
        assert result == (True, True, True, True)


def test_missing_plugin_is_a_clear_error(client):
    fut = client.submit(onnxep.batch.run_batch, {"x": np.zeros((1, 3, 16, 16), np.float32)}, name="nope", pure=False)
    with pytest.raises(RuntimeError, match="no SessionPlugin named 'nope'"):
        fut.result()


def test_bad_model_argument():
    with pytest.raises(TypeError, match="bytes or a path"):
        onnxep.batch.SessionPlugin(123)
