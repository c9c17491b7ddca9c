"""Batch inference over a data set on a Dask cluster: one onnxep session per worker process, batches mapped to them.

    from dask.distributed import Client, LocalCluster
    import onnxep.batch

    client = Client(LocalCluster(n_workers=2, threads_per_worker=1))       # or Client("tcp://scheduler:8786")
    outputs = onnxep.batch.map_batches(client, "model.onnx", feeds, threads=1)   # feeds: iterable of {name: array}

Why Dask (not Ray Data): its wheels are pure Python (dask, distributed and their dependencies), a local multi-process
cluster starts in about a second with nothing but the registry's packages, and the same code runs unchanged on a
cluster of many machines (`dask-scheduler` / `dask-worker` by hand, dask-jobqueue on Slurm / PBS, dask-kubernetes),
where each worker machine installs the onnxep wheel. Ray Data's `map_batches` with a callable class is the same
pattern (one session per actor) but brings a far heavier runtime for what this needs.

How it works:
- `SessionPlugin` is a Dask WorkerPlugin: each worker process creates the session once in `setup` (the model goes to
  every worker once, as bytes or as a path that every machine can read) and keeps it for all the batches it runs.
- Within a process, every session that a plugin creates shares one `onnxep.PrePackedWeightsContainer`, so several
  models, or the same model registered under two names, pack and hold each weight once per process.
- Size `threads` (the session's intra_op_num_threads) times the worker's threads to the cores of a machine: one worker
  process per machine with `threads_per_worker=1` and `threads=cores` runs one batch at a time on all cores; more worker
  processes with `threads=1` run batches side by side. Batches of a worker with several threads share its session
  (onnxep sessions run concurrently from several threads, as onnxruntime's do).
- `map_batches` returns each batch's outputs in the order of `feeds`; nothing is gathered on the client until the
  end, and `gather=False` returns the futures instead (for data larger than the client's memory, write results out
  from the workers and return paths).
"""
from __future__ import annotations

import threading
from typing import Any, Iterable

try:
    from distributed import WorkerPlugin, get_worker
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError("onnxep.batch needs Dask's distributed scheduler: pip install 'onnxep[batch]' "
                      "(dask[distributed])") from exc

from onnxep.contracts.weight_cache import PrePackedWeightsContainer
from onnxep.session import InferenceSession, SessionOptions

#: the process's shared weight container (one per worker process, created on first use)
_CONTAINER: PrePackedWeightsContainer | None = None
_CONTAINER_LOCK = threading.Lock()


def process_container() -> PrePackedWeightsContainer:
    """The PrePackedWeightsContainer every SessionPlugin of this process shares."""
    global _CONTAINER
    with _CONTAINER_LOCK:
        if _CONTAINER is None:
            _CONTAINER = PrePackedWeightsContainer()
        return _CONTAINER


class SessionPlugin(WorkerPlugin):
    """Creates one onnxep InferenceSession per worker process (in `setup`) and holds it until teardown.

    model: the ONNX file's bytes, or a path every worker can read. threads: intra_op_num_threads of the session
    (None: onnxep's default, all cores). config: session config entries (`SessionOptions.add_session_config_entry`).
    """

    def __init__(self, model: bytes | str, *, name: str = "onnxep", threads: int | None = None,
                 config: dict[str, str] | None = None):
        if not isinstance(model, (bytes, str)):
            raise TypeError(f"SessionPlugin: model must be the ONNX file's bytes or a path, got {type(model).__name__}")
        self.name = name
        self.model = model
        self.threads = threads
        self.config = dict(config or {})
        self.session: InferenceSession | None = None

    def setup(self, worker=None):
        so = SessionOptions()
        if self.threads is not None:
            so.intra_op_num_threads = int(self.threads)
        for key, value in self.config.items():
            so.add_session_config_entry(key, value)
        self.session = InferenceSession(self.model, so, prepacked_weights_container=process_container())

    def teardown(self, worker=None):
        self.session = None


def worker_session(name: str = "onnxep") -> InferenceSession:
    """Inside a task on a worker: the session the SessionPlugin registered as `name` created there."""
    plugin = get_worker().plugins.get(name)
    if plugin is None or getattr(plugin, "session", None) is None:
        raise RuntimeError(f"onnxep.batch: no SessionPlugin named {name!r} on this worker; register one with "
                           f"client.register_plugin(SessionPlugin(model, name={name!r}))")
    return plugin.session


def run_batch(feed: dict[str, Any], output_names: list[str] | None = None, name: str = "onnxep") -> list:
    """A task: run one batch on this worker's session (outputs as session.run returns them)."""
    return worker_session(name).run(output_names, feed)


def map_batches(client, model: bytes | str, feeds: Iterable[dict[str, Any]], *, output_names: list[str] | None = None,
                threads: int | None = None, name: str = "onnxep", config: dict[str, str] | None = None,
                gather: bool = True):
    """Runs every feed dict of `feeds` on the cluster of `client`, one session per worker process.

    Returns the list of each batch's outputs (session.run's list), in the order of `feeds`; with gather=False the
    list of futures. Each call registers the plugin under `name` again (Dask tears down the one it replaces), so each
    worker creates its session once per call: for many calls on one model, register a SessionPlugin once and
    `client.map(run_batch, feeds, pure=False)` yourself.
    """
    client.register_plugin(SessionPlugin(model, name=name, threads=threads, config=config), name=name)
    futures = client.map(run_batch, list(feeds), output_names=output_names, name=name, pure=False)
    return client.gather(futures) if gather else futures
