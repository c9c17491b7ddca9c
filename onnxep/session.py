"""InferenceSession, SessionOptions, RunOptions: onnxruntime's Python API, over onnxep's pipeline.

    load -> optimize -> partition -> compile -> plan -> run
`InferenceSession.__init__` runs load..plan; `run` runs the last stage only."""
from __future__ import annotations

import enum
import os
import threading
import weakref

import numpy as np

from onnxep.backends.cpu import CPU_DEVICE
from onnxep.backends.reference import REFERENCE_DEVICE
from onnxep.contracts.allocator import HostBlockPool, Stream, trim_host_heap
from onnxep.contracts.backend import BufferType
from onnxep.contracts.compile import CompileContext, compile as compile_partitions
from onnxep.contracts.weight_cache import PrePackedWeightsContainer
from onnxep.errors import InvalidArgument
from onnxep.graph import epcontext
from onnxep.graph import model as model_mod
from onnxep.graph.executor import Executor, RunContext
from onnxep.graph.planner import ArenaPlanner
from onnxep.graph.ir import ValueType
from onnxep.graph.partition import partition as make_partitions
from onnxep.graph.passes import optimize

PROVIDER = "OnnxepExecutionProvider"
REFERENCE_PROVIDER = "OnnxReferenceExecutionProvider"
#: Names a script written for onnxruntime may pass; they select onnxep's default provider list.
_PROVIDER_ALIASES = {"CPUExecutionProvider", PROVIDER, REFERENCE_PROVIDER}

#: ORT's key: "1" refuses nodes the main provider cannot run instead of falling back.
CONFIG_DISABLE_FALLBACK = "session.disable_cpu_ep_fallback"
CONFIG_DISABLE_PREPACKING = "session.disable_prepacking"
#: onnxep's own: comma-separated op types always run on the reference backend (to bisect a suspected kernel bug).
CONFIG_FALLBACK_OP_TYPES = "onnxep.fallback_op_types"


def get_available_providers():
    return [PROVIDER, REFERENCE_PROVIDER, "CPUExecutionProvider"]


def get_device():
    return "CPU"


class GraphOptimizationLevel(enum.IntEnum):
    ORT_DISABLE_ALL = 0
    ORT_ENABLE_BASIC = 1
    ORT_ENABLE_EXTENDED = 2
    ORT_ENABLE_LAYOUT = 3
    ORT_ENABLE_ALL = 99


class ExecutionMode(enum.IntEnum):
    ORT_SEQUENTIAL = 0
    ORT_PARALLEL = 1


class SessionOptions:
    def __init__(self):
        self.intra_op_num_threads = 0
        self.inter_op_num_threads = 0
        self.graph_optimization_level = GraphOptimizationLevel.ORT_ENABLE_ALL
        self.execution_mode = ExecutionMode.ORT_SEQUENTIAL
        self.optimized_model_filepath = ""
        self.log_severity_level = 2
        self.log_verbosity_level = 0
        self.logid = ""
        self.enable_profiling = False
        self.enable_cpu_mem_arena = True
        self.enable_mem_pattern = True
        self.enable_mem_reuse = True
        self.use_deterministic_compute = False
        self._config = {}

    def add_session_config_entry(self, key: str, value: str):
        if not isinstance(key, str) or not isinstance(value, str):
            raise InvalidArgument(f"session config entries are strings; got {type(key).__name__}: "
                                  f"{type(value).__name__}")
        self._config[key] = value

    def get_session_config_entry(self, key: str) -> str:
        if key not in self._config:
            raise InvalidArgument(f"SessionOptions: config key {key!r} is not set")
        return self._config[key]

    def _flag(self, key) -> bool:
        return self._config.get(key, "0").strip() == "1"


class RunOptions:
    def __init__(self):
        self.log_severity_level = 2
        self.log_verbosity_level = 0
        self.logid = ""
        self.terminate = False
        self.only_execute_path_to_fetches = False
        self._config = {}

    def add_run_config_entry(self, key: str, value: str):
        self._config[key] = value

    def get_run_config_entry(self, key: str) -> str:
        if key not in self._config:
            raise InvalidArgument(f"RunOptions: config key {key!r} is not set")
        return self._config[key]


class NodeArg:
    """onnxruntime.NodeArg: name, type string, shape (ints, symbolic names, or None for unknown)."""

    def __init__(self, name: str, vt: ValueType):
        self.name = name
        self.type = vt.type_str
        if vt.kind == "tensor" and vt.shape is not None:
            self.shape = list(vt.shape)
        else:
            self.shape = [] if vt.kind == "tensor" else None
        self._vt = vt

    def __repr__(self):
        return f"NodeArg(name={self.name!r}, type={self.type!r}, shape={self.shape!r})"


class ModelMetadata:
    def __init__(self, meta: dict):
        self.producer_name = meta.get("producer_name", "")
        self.graph_name = meta.get("graph_name", "")
        self.domain = meta.get("domain", "")
        self.description = meta.get("description", "")
        self.graph_description = meta.get("graph_description", "")
        self.version = meta.get("version", 0)
        self.custom_metadata_map = dict(meta.get("custom_metadata_map", {}))


def _memory_limit() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 1 << 40


class InferenceSession:
    """Drop-in for onnxruntime.InferenceSession on the CPU."""

    def __init__(self, path_or_bytes, sess_options=None, providers=None, provider_options=None, **kwargs):
        self._sess_options = sess_options if sess_options is not None else SessionOptions()
        so = self._sess_options
        self._providers = self._check_providers(providers)
        unknown = set(kwargs) - {"prepacked_weights_container", "stream", "disabled_optimizers"}
        if unknown:
            raise TypeError(f"InferenceSession got unexpected keyword arguments {sorted(unknown)}")
        self._stream = kwargs.get("stream") or Stream("session")
        container = kwargs.get("prepacked_weights_container")
        self._container = container if container is not None else PrePackedWeightsContainer()
        self._lock = threading.Lock()
        self._pool = HostBlockPool()

        export = epcontext.export_options(so._config, path_or_bytes)   # ep.context_* (checked before any work)
        # load; an EPContext model's blobs are read and verified here (graph/epcontext.py)
        model, self._model_dir = model_mod.load_model(path_or_bytes)
        if model is path_or_bytes and any(epcontext.is_context_node(n) for n in model.graph.node):
            model = model.__class__.FromString(model.SerializeToString())   # extract drops blobs: not from the caller's
        weights = BufferType("weights", Stream("weights"))   # packed weights (compiled, or read from EPContext blobs)
        contexts = epcontext.extract(model, self._model_dir, weights)
        if contexts and export is not None:
            raise InvalidArgument(f"{epcontext.CONFIG_ENABLE}=1 on a model that already holds EPContext nodes "
                                  f"({sorted(contexts)[:3]}): export from the original model")
        graph = model_mod.build_graph(model, infer_shapes=not contexts)
        forced = frozenset(t.strip() for t in so._config.get(CONFIG_FALLBACK_OP_TYPES, "").split(",") if t.strip())
        # optimize (an EPContext model holds the optimized graph already: no passes)
        if not contexts:
            graph = optimize(graph, int(so.graph_optimization_level), so.optimized_model_filepath, model, forced)
        del model
        self._inputs = [NodeArg(n, vt) for n, vt in graph.inputs]
        self._outputs = [NodeArg(n, vt) for n, vt in graph.outputs]
        self._overridable = [NodeArg(n, vt) for n, vt in graph.overridable]
        self._input_types = dict(graph.inputs)
        self._input_types.update(dict(graph.overridable))
        # what every run checks against, worked out once
        self._output_names = tuple(o.name for o in self._outputs)
        self._valid_out = frozenset(self._output_names)
        self._required = tuple(i.name for i in self._inputs)
        # name -> (dtype, shape) of a float / int tensor input whose dims are all static: a feed of exactly that
        # dtype and shape, C-contiguous, needs no further checking (_check_value does the rest)
        self._exact = {n: (vt.dtype, tuple(vt.shape)) for n, vt in self._input_types.items()
                       if vt.kind == "tensor" and vt.dtype is not None and vt.dtype != np.dtype(object)
                       and vt.shape is not None and all(isinstance(d, int) for d in vt.shape)}
        self._meta = ModelMetadata(graph.metadata)
        # partition
        fallback = not so._flag(CONFIG_DISABLE_FALLBACK)
        devices = [CPU_DEVICE, REFERENCE_DEVICE]
        partitions = make_partitions(graph, devices, fallback, forced, pinned={n: CPU_DEVICE.name for n in contexts})
        for p in partitions:
            if len(p.nodes) == 1 and p.nodes[0].name in contexts:
                p.context = contexts[p.nodes[0].name]
        del contexts
        self.node_assignment = {n.name: p.backend for p in partitions
                                for n in (p.context.nodes if p.context is not None else p.nodes)}
        nthreads = int(so.intra_op_num_threads or 0)
        self._backends = {d.name: d.init_backend(self._stream, **({"num_threads": nthreads} if d is CPU_DEVICE else {}))
                          for d in devices}
        # compile (kernels + pre-packing); graph objects are not kept past this call
        exporter = epcontext.Exporter(export, [n.name for n in graph.nodes]) if export is not None else None
        ctx = CompileContext(weight_allocator=weights, container=self._container,
                             prepack=not so._flag(CONFIG_DISABLE_PREPACKING), ep_context_export=exporter)
        ctx_nodes = []
        # the executor keeps only the constants that are graph outputs: the plans hold what their kernels still read
        # unpacked, and a pre-packed weight's original must not outlive compile (else every session pins an unpacked
        # copy of its weights beside the packed one a shared container holds once)
        consts = graph.constants
        out_consts = {n: consts[n] for n, _ in graph.outputs if n in consts}
        overridable = {n: graph.initializers[n] for n, _ in graph.overridable}
        del consts
        if exporter is None:
            # from here each partition holds the constants it reads; compiling drops each packed one after its last
            # reader (the EPContext exporter still needs the graph's, so not when exporting)
            graph.initializers = dict(overridable)
        plans = compile_partitions(partitions, self._backends, ctx, ctx_nodes)
        if exporter is not None:  # write the EPContext model while the partitions are still valid
            try:
                exporter.write(graph, partitions, ctx_nodes)
            except BaseException:
                _free_plans(self._backends, plans)
                raise
            del ctx_nodes, exporter
        # plan
        # memory: with enable_mem_pattern (onnxruntime's name, on by default) each input signature's first run is
        # recorded and later ones take their activations from one planned arena (graph/planner.py), borrowed from the
        # pool of the sessions on the stream this one was given, else of those sharing its container
        memory = ArenaPlanner(self._backends[CPU_DEVICE.name], kwargs.get("stream") or self._container) \
            if so.enable_mem_pattern else None
        self._executor = Executor(plans, self._backends, [n for n, _ in graph.outputs], out_consts, overridable,
                                  memory)
        self._limit = _memory_limit()
        # graph_plan_free for every plan (kernels' release()) when the session goes away
        self._finalizer = weakref.finalize(self, _free_plans, self._backends, plans)
        del graph, partitions
        trim_host_heap()     # loading, folding and packing freed more than the session keeps

    # ------------------------------------------------------------------ introspection (onnxruntime names)
    def get_inputs(self):
        return list(self._inputs)

    def get_outputs(self):
        return list(self._outputs)

    def get_overridable_initializers(self):
        return list(self._overridable)

    def get_modelmeta(self):
        return self._meta

    def get_providers(self):
        return list(self._providers)

    def get_provider_options(self):
        return {p: {} for p in self._providers}

    def get_session_options(self):
        return self._sess_options

    @property
    def plans(self):
        """The compiled plans, in run order (for inspection and tests)."""
        return list(self._executor.plans)

    # ------------------------------------------------------------------ run
    def run(self, output_names, input_feed, run_options=None):
        if not isinstance(input_feed, dict):
            raise InvalidArgument(f"input_feed must be a dict of input name -> array, got {type(input_feed).__name__}")
        if output_names is None or len(output_names) == 0:
            output_names = self._output_names
        else:
            valid_out = self._valid_out
            for name in output_names:
                if name not in valid_out:
                    raise InvalidArgument(f"Invalid output name: {name!r} (the model's outputs are "
                                          f"{sorted(valid_out)})")
        feeds = self._check_feeds(input_feed)
        run_ctx = RunContext(self._stream, self._limit, run_options, self._pool)
        return self._executor.run(feeds, list(output_names), run_ctx)

    def _check_feeds(self, input_feed):
        required = self._required
        for n in required:
            if n not in input_feed:
                missing = [n for n in required if n not in input_feed]
                raise ValueError(f"Required inputs ({missing}) are missing from input feed ({list(input_feed)}).")
        feeds = {}
        exact = self._exact
        for name, value in input_feed.items():
            want = exact.get(name)
            if want is not None and type(value) is np.ndarray and value.dtype == want[0] \
                    and value.shape == want[1] and value.flags.c_contiguous:
                feeds[name] = value
                continue
            vt = self._input_types.get(name)
            if vt is None:
                raise InvalidArgument(f"Invalid input name: {name!r} (the model's inputs are {list(required)})")
            feeds[name] = _check_value(name, value, vt)
        return feeds

    @staticmethod
    def _check_providers(providers):
        if not providers:
            return [PROVIDER, REFERENCE_PROVIDER]
        names = [p[0] if isinstance(p, tuple) else p for p in providers]
        for p in names:
            if p not in _PROVIDER_ALIASES:
                raise ValueError(f"Specified provider '{p}' is not in available provider names. Available providers: "
                                 f"'{', '.join(get_available_providers())}'")
        return [PROVIDER, REFERENCE_PROVIDER]


def _free_plans(backends, plans):
    for plan in plans:
        backends[plan.backend_name].graph_plan_free(plan)


def _check_value(name, value, vt: ValueType):
    """Validate one feed against the input's declared type: dtype, rank, static dims."""
    if vt.kind in ("sequence", "map", "optional"):
        return value
    if vt.kind != "tensor":
        return value if not isinstance(value, (list, tuple)) else np.asarray(value)
    if not isinstance(value, np.ndarray):
        try:
            value = np.asarray(value)
        except Exception as e:
            raise InvalidArgument(f"input {name!r}: cannot convert {type(value).__name__} to a tensor: {e}") from None
    expected = vt.dtype
    if expected is not None:
        got = value.dtype
        ok = got == expected or (expected == np.dtype(object) and got.kind in "OUS")
        if not ok:
            raise InvalidArgument(f"Unexpected input data type for input {name!r}. Actual: (tensor({_tname(got)})) , "
                                  f"expected: (tensor({_tname(expected)}))")
    if vt.shape is not None:
        if value.ndim != len(vt.shape):
            raise InvalidArgument(f"Invalid rank for input: {name} Got: {value.ndim} Expected: {len(vt.shape)} "
                                  f"Please fix either the inputs/outputs or the model.")
        bad = [(i, g, e) for i, (g, e) in enumerate(zip(value.shape, vt.shape)) if isinstance(e, int) and g != e]
        if bad:
            detail = "".join(f"\n index: {i} Got: {g} Expected: {e}" for i, g, e in bad)
            raise InvalidArgument(f"Got invalid dimensions for input: {name} for the following indices{detail}\n "
                                  f"Please fix either the inputs/outputs or the model.")
    if expected == np.dtype(object) and value.dtype.kind in "US":
        value = value.astype(object)
    if not value.flags.c_contiguous:
        value = np.ascontiguousarray(value)
    return value


def _tname(dt) -> str:
    dt = np.dtype(dt)
    return {"float32": "float", "float64": "double", "object": "string", "bool": "bool"}.get(dt.name, dt.name)
