"""InferenceSession, SessionOptions, RunOptions: onnxruntime's Python API, over onnxep's pipeline.

    load -> optimize -> partition -> compile -> plan -> run
`InferenceSession.__init__` runs load..plan; `run` runs the last stage only."""
from __future__ import annotations

import collections.abc
import enum
import functools
import json
import logging
import os
import sys
import threading
import time
import warnings
import weakref

import numpy as np

from onnxep.backends.cpu import CPU_DEVICE
from onnxep.backends.reference import REFERENCE_DEVICE
from onnxep.contracts.allocator import HostBlockPool, Stream, trim_host_heap
from onnxep.contracts.backend import BufferType
from onnxep.contracts.compile import CompileContext, compile as compile_partitions
from onnxep.contracts.weight_cache import PrePackedWeightsContainer
from onnxep.errors import (Fail, InvalidArgument, NotImplemented as OnnxepNotImplemented, OnnxepError,
                           OptionWarning)
from onnxep.graph import epcontext
from onnxep.graph import model as model_mod
from onnxep.graph.executor import TERMINATED, Executor, RunContext, StepTrace
from onnxep.graph.planner import ArenaPlanner, ArenaRun, signature
from onnxep.graph.ir import ValueType
from onnxep.graph.partition import partition as make_partitions
from onnxep.graph.passes import disabled_passes, optimize
from onnxep.ops import _grow

PROVIDER = "OnnxepExecutionProvider"
REFERENCE_PROVIDER = "OnnxReferenceExecutionProvider"

#: ORT's key: "1" refuses nodes the main provider cannot run instead of falling back.
CONFIG_DISABLE_FALLBACK = "session.disable_cpu_ep_fallback"
CONFIG_DISABLE_PREPACKING = "session.disable_prepacking"
#: onnxep's own: comma-separated op types always run on the reference backend (to bisect a suspected kernel bug).
CONFIG_FALLBACK_OP_TYPES = "onnxep.fallback_op_types"
#: opt-in reduced-precision compute (issue 29): "bf16" runs the GEMMs with constant weights (MatMul, Gemm, the fused
#: MatMul ops, 1x1 / im2col convs) on bf16 operands with fp32 accumulation where the CPU has AVX512_BF16
#: (vdpbf16ps), else in fp32; "fp32" (the default) changes nothing
CONFIG_COMPUTE_PRECISION = "onnxep.compute_precision"
COMPUTE_PRECISIONS = ("fp32", "bf16")
#: onnxruntime's entry: "0" -- the intra-op pool's workers sleep as soon as a job of this session is done instead of
#: spinning for the next (ONNXEP_SPIN_US); less CPU burnt between runs, a wake-up (20-35 us here) per parallel step
CONFIG_ALLOW_SPINNING = "session.intra_op.allow_spinning"
#: onnxep's own: "0" -- every output C-contiguous, as onnxruntime's; "1" (default) -- a Concat output fed back as the
#: next run's input (a decoder's key / value cache) is a view with spare rows the next run appends to (ops/_grow.py)
CONFIG_APPEND_IN_PLACE = "onnxep.append_in_place"


def get_available_providers():
    return [PROVIDER, REFERENCE_PROVIDER, "CPUExecutionProvider"]


def get_device():
    return "CPU"


def get_all_providers():
    """Every provider name this build of onnxep knows (all of them available: get_available_providers)."""
    return get_available_providers()


def get_version_string() -> str:
    from onnxep import __version__
    return __version__


def get_build_info() -> str:
    """One line on this build: version, the kernel variant chosen at import, the variants built."""
    from onnxep import __version__, _kernels
    return (f"onnxep Build Info: version={__version__}, kernel ISA={_kernels.ISA}, "
            f"built variants={','.join(_kernels.AVAILABLE)}, build type=Release")


def set_default_logger_severity(severity: int) -> None:
    """onnxruntime's default log severity (0 verbose .. 4 fatal) as the level of the "onnxep" logger: what the
    sessions and runs without a log_severity_level of their own log."""
    severity = _int_arg("set_default_logger_severity", severity)
    if not 0 <= severity <= 4:
        raise RuntimeError(f"Invalid logging severity {severity}. 0:Verbose, 1:Info, 2:Warning, 3:Error, 4:Fatal")
    LOGGER.setLevel(SEVERITY_LEVELS[severity])


_DEFAULT_VERBOSITY = [0]


def set_default_logger_verbosity(verbosity: int) -> None:
    """The verbose log level (with severity 0) of the sessions and runs that set no log_verbosity_level."""
    _DEFAULT_VERBOSITY[0] = _int_arg("set_default_logger_verbosity", verbosity)


def set_seed(seed: int) -> None:
    """The seed of the random ops (RandomNormal, RandomUniform, Multinomial, Bernoulli ... without a seed attribute):
    they draw from numpy's global generator (the reference backend's), seeded here."""
    seed = _int_arg("set_seed", seed)
    np.random.seed(seed & 0xFFFFFFFF)


class GraphOptimizationLevel(enum.IntEnum):
    ORT_DISABLE_ALL = 0
    ORT_ENABLE_BASIC = 1
    ORT_ENABLE_EXTENDED = 2
    ORT_ENABLE_LAYOUT = 3
    ORT_ENABLE_ALL = 99


class ExecutionMode(enum.IntEnum):
    ORT_SEQUENTIAL = 0
    ORT_PARALLEL = 1


class ExecutionOrder(enum.IntEnum):
    DEFAULT = 0
    PRIORITY_BASED = 1
    MEMORY_EFFICIENT = 2


# ------------------------------------------------------------------------------------------ warnings and logging
LOGGER = logging.getLogger("onnxep")
#: onnxruntime's log severities 0 verbose, 1 info, 2 warning, 3 error, 4 fatal, as logging levels
SEVERITY_LEVELS = (logging.DEBUG, logging.INFO, logging.WARNING, logging.ERROR, logging.CRITICAL)
_WARNED = set()
_WARNED_LOCK = threading.Lock()
_RUNS_LOCK = threading.Lock()          # between threads setting RunOptions.terminate


def warn_once(key, message: str) -> None:
    """An OptionWarning the first time `key` (an option, an option and value) comes up in this process, pointing at
    the caller's line outside onnxep."""
    with _WARNED_LOCK:
        if key in _WARNED:
            return
        _WARNED.add(key)
    level, frame = 2, sys._getframe(1)
    while frame is not None and frame.f_code.co_filename.startswith(_PACKAGE_DIR):
        level, frame = level + 1, frame.f_back
    warnings.warn(message, OptionWarning, stacklevel=level)


_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep


class _Log:
    """Records to the "onnxep" logger, tagged with a logid (the record's `logid`, and the message's "[logid]"). A
    severity >= 0 (onnxruntime's log_severity_level) is the session's or run's own gate, as onnxruntime's session
    logger is its own: records at or above it go to the logger's handlers whatever the logger's level; -1 (the
    default) leaves the choice to the logger's level. Verbose records need severity 0 set explicitly."""

    __slots__ = ("level", "verbosity", "logid")

    def __init__(self, severity, verbosity, logid):
        severity = int(severity)
        self.level = None if severity < 0 else SEVERITY_LEVELS[min(severity, 4)]
        self.verbosity = int(verbosity) or _DEFAULT_VERBOSITY[0]
        self.logid = str(logid)

    @property
    def verbose(self) -> bool:
        return self.level == logging.DEBUG

    def enabled(self, level) -> bool:
        return LOGGER.isEnabledFor(level) if self.level is None else level >= self.level

    def log(self, level, msg, *args) -> None:
        if self.enabled(level):
            record = LOGGER.makeRecord(LOGGER.name, level, __file__, 0, "[%s] " + msg, (self.logid, *args), None,
                                       extra={"logid": self.logid})
            LOGGER.handle(record)


def _not_in_onnxep(what, instead=""):
    def refuse(self, *args, **kwargs):
        raise OnnxepNotImplemented(f"{type(self).__name__}.{what} is not supported by onnxep{instead}")
    refuse.__name__ = what
    refuse.__doc__ = f"onnxruntime's {what}: refused (NotImplemented){instead}."
    return refuse


class SessionOptions:
    """onnxruntime.SessionOptions: the same attributes (a misspelt one raises AttributeError, as onnxruntime's does).
    What each does in onnxep is in the README's "Session options that matter" table; the methods onnxep has no
    meaning for raise NotImplemented."""

    __slots__ = ("intra_op_num_threads", "inter_op_num_threads", "graph_optimization_level", "execution_mode",
                 "execution_order", "optimized_model_filepath", "log_severity_level", "log_verbosity_level", "logid",
                 "enable_profiling", "profile_file_prefix", "enable_cpu_mem_arena", "enable_mem_pattern",
                 "enable_mem_reuse", "use_deterministic_compute", "use_per_session_threads", "_config",
                 "_initializers", "_dims_by_name", "_dims_by_denotation", "__weakref__")

    def __init__(self):
        self.intra_op_num_threads = 0
        self.inter_op_num_threads = 0
        self.graph_optimization_level = GraphOptimizationLevel.ORT_ENABLE_ALL
        self.execution_mode = ExecutionMode.ORT_SEQUENTIAL
        self.execution_order = ExecutionOrder.DEFAULT
        self.optimized_model_filepath = ""
        self.log_severity_level = -1
        self.log_verbosity_level = 0
        self.logid = ""
        self.enable_profiling = False
        self.profile_file_prefix = "onnxep_profile_"
        self.enable_cpu_mem_arena = True
        self.enable_mem_pattern = True
        self.enable_mem_reuse = True
        self.use_deterministic_compute = False
        self.use_per_session_threads = True
        self._config = {}
        self._initializers = {}          # name -> OrtValue (add_initializer): used as the initializer, not copied
        self._dims_by_name = {}          # dim_param -> value (add_free_dimension_override_by_name)
        self._dims_by_denotation = {}    # denotation -> value (add_free_dimension_override_by_denotation)

    def add_session_config_entry(self, key: str, value: str):
        if not isinstance(key, str) or not isinstance(value, str):
            raise TypeError(f"add_session_config_entry(): incompatible function arguments: keys and values are str, "
                            f"got {type(key).__name__}, {type(value).__name__}")
        self._config[key] = value

    def get_session_config_entry(self, key: str) -> str:
        if key not in self._config:
            raise InvalidArgument(f"SessionOptions: config key {key!r} is not set")
        return self._config[key]

    def _flag(self, key) -> bool:
        return self._config.get(key, "0").strip() == "1"

    def has_providers(self) -> bool:
        return False            # providers are given to InferenceSession (add_provider is refused)

    def add_initializer(self, name: str, ortvalue) -> None:
        """The model's initializer `name` is this OrtValue's array, used as it is (no copy: it must outlive the
        sessions made with these options, as in onnxruntime). A name that is no initializer of the model is ignored
        (onnxruntime's behaviour); another shape or type than the model's is refused when the session is made."""
        if not isinstance(name, str):
            raise TypeError(f"add_initializer(): incompatible function arguments: name is a str, got "
                            f"{type(name).__name__}")
        from onnxep.ortvalue import OrtValue
        if not isinstance(ortvalue, OrtValue) or not ortvalue.is_tensor():
            raise RuntimeError(f"add_initializer({name!r}): the value must be an OrtValue holding a tensor "
                               f"(OrtValue.ortvalue_from_numpy), got {type(ortvalue).__name__}")
        self._initializers[name] = ortvalue

    def add_free_dimension_override_by_name(self, dim_name: str, dim_value: int) -> None:
        """Every dimension of a graph input named `dim_name` (its dim_param) becomes `dim_value`."""
        self._dims_by_name[_str_arg("add_free_dimension_override_by_name", dim_name)] = \
            _int_arg("add_free_dimension_override_by_name", dim_value)

    def add_free_dimension_override_by_denotation(self, dim_denotation: str, dim_value: int) -> None:
        """Every dimension of a graph input whose denotation is `dim_denotation` (e.g. DATA_BATCH) becomes
        `dim_value`."""
        self._dims_by_denotation[_str_arg("add_free_dimension_override_by_denotation", dim_denotation)] = \
            _int_arg("add_free_dimension_override_by_denotation", dim_value)

    add_external_initializers = _not_in_onnxep("add_external_initializers", ": keep initializers in the model")
    add_external_initializers_from_files_in_memory = _not_in_onnxep("add_external_initializers_from_files_in_memory")
    add_provider = _not_in_onnxep("add_provider", ": pass providers= to InferenceSession")
    add_provider_for_devices = _not_in_onnxep("add_provider_for_devices", ": pass providers= to InferenceSession")
    clear_ep_context_data_read_func = _not_in_onnxep("clear_ep_context_data_read_func")
    register_custom_ops_library = _not_in_onnxep("register_custom_ops_library",
                                                 ": register an OpKernel with onnxep.ops._registry.register")
    set_ep_context_data_read_func = _not_in_onnxep("set_ep_context_data_read_func")
    set_load_cancellation_flag = _not_in_onnxep("set_load_cancellation_flag")
    set_provider_selection_policy = _not_in_onnxep("set_provider_selection_policy",
                                                   ": pass providers= to InferenceSession")
    set_provider_selection_policy_delegate = _not_in_onnxep("set_provider_selection_policy_delegate",
                                                            ": pass providers= to InferenceSession")


def _str_arg(fn, v) -> str:
    if not isinstance(v, str):
        raise TypeError(f"{fn}(): incompatible function arguments: expected a str, got {type(v).__name__}")
    return v


def _int_arg(fn, v) -> int:
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
        raise TypeError(f"{fn}(): incompatible function arguments: expected an int, got {type(v).__name__}")
    return int(v)


def _override_free_dims(model, so) -> None:
    """add_free_dimension_override_by_name / _by_denotation on the graph inputs of `model` (the session's copy)."""
    for vi in model.graph.input:
        if not vi.type.HasField("tensor_type") or not vi.type.tensor_type.HasField("shape"):
            continue
        for d in vi.type.tensor_type.shape.dim:
            value = so._dims_by_name.get(d.dim_param) if d.dim_param else None
            if value is None and d.denotation:
                value = so._dims_by_denotation.get(d.denotation)
            if value is None:
                continue
            if value < 0:
                raise InvalidArgument(f"free dimension override of {d.dim_param or d.denotation!r} (graph input "
                                      f"{vi.name!r}): {value} is negative")
            d.dim_value = value


def _use_initializers(graph, so) -> None:
    """SessionOptions.add_initializer: the caller's arrays become the graph's initializers, as they are."""
    for name, ov in so._initializers.items():
        held = graph.initializers.get(name)
        if held is None:
            continue                # (onnxruntime ignores a name the model has no initializer of)
        arr = ov._get_c_value()
        if isinstance(held, np.ndarray) and (held.shape != arr.shape or held.dtype != arr.dtype):
            raise InvalidArgument(f"SessionOptions.add_initializer({name!r}): the model's initializer is "
                                  f"tensor({_tname(held.dtype)}) {list(held.shape)}, the OrtValue given is "
                                  f"tensor({_tname(arr.dtype)}) {list(arr.shape)}")
        graph.initializers[name] = arr


def _adopt_initializers(model, weights: dict, so) -> None:
    """SessionOptions.add_initializer for an initializer the model declares without data (name, type, dims only):
    the OrtValue's array is its data, as load_model's own `weights` are (the plugin EP's partitions hand onnxruntime's
    initializer memory over this way, uncopied; _use_initializers checks type and shape)."""
    if not so._initializers:
        return
    for t in model.graph.initializer:
        ov = so._initializers.get(t.name)
        if ov is not None and t.name not in weights and not t.HasField("raw_data") and t.data_location == 0 \
                and not (t.float_data or t.int32_data or t.int64_data or t.double_data or t.uint64_data
                         or t.string_data):
            weights[t.name] = ov._get_c_value()


#: onnxruntime's run config key; a value naming "cpu" hands the session's pooled memory back after the run
CONFIG_ARENA_SHRINKAGE = "memory.enable_memory_arena_shrinkage"
#: run config keys onnxruntime documents that have nothing to act on in a CPU-only, synchronous run
_RUN_KEYS_NOT_FOR_CPU = ("disable_synchronize_execution_providers", "gpu_graph_id")
_RUN_KEY_PREFIXES_NOT_FOR_CPU = ("qnn.", "dml.", "nv.", "cuda.", "trt.", "webgpu.")


class RunOptions:
    """onnxruntime.RunOptions. `terminate = True` -- set before a run, or from another thread during one -- stops the
    run (Fail, onnxruntime's message) at the next node that allocates, plan boundary or traced step; the session
    stays usable."""

    __slots__ = ("log_severity_level", "log_verbosity_level", "logid", "_terminate", "only_execute_path_to_fetches",
                 "_config", "_runs", "__weakref__")

    def __init__(self):
        self.log_severity_level = -1
        self.log_verbosity_level = 0
        self.logid = ""
        self._terminate = False
        self.only_execute_path_to_fetches = False
        self._config = {}
        self._runs = set()                  # RunContexts of the runs under way with these options

    @property
    def terminate(self) -> bool:
        return self._terminate

    @terminate.setter
    def terminate(self, value):
        value = bool(value)
        with _RUNS_LOCK:
            self._terminate = value
            if value:
                for run_ctx in tuple(self._runs):
                    run_ctx.stop = True

    def add_run_config_entry(self, key: str, value: str):
        if not isinstance(key, str) or not isinstance(value, str):
            raise TypeError(f"add_run_config_entry(): incompatible function arguments: keys and values are str, "
                            f"got {type(key).__name__}, {type(value).__name__}")
        self._config[key] = value

    def get_run_config_entry(self, key: str) -> str:
        if key not in self._config:
            raise InvalidArgument(f"RunOptions: config key {key!r} is not set")
        return self._config[key]

    add_active_adapter = _not_in_onnxep("add_active_adapter")


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


#: a session's creation hands the freed heap back to the OS (trim_host_heap) when its model's initializers hold at
#: least this many bytes: a smaller model frees a few hundred KB, which malloc_trim took ~0.07 ms to give back on
#: every creation (and the next allocations take from again)
TRIM_WEIGHT_BYTES = 1 << 20


@functools.lru_cache(maxsize=1)
def _memory_limit() -> int:
    """The machine's physical memory (asked of the system once per process, not at every session's creation)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 1 << 40


class InferenceSession:
    """Drop-in for onnxruntime.InferenceSession on the CPU."""

    def __init__(self, path_or_bytes, sess_options=None, providers=None, provider_options=None, **kwargs):
        self._token = object()           # what IOBindings of this session hold (set_providers makes a new one)
        self._args = (path_or_bytes, dict(kwargs))     # what set_providers rebuilds the session from
        self._enable_fallback = True
        self._profile_start = 0
        self._sess_options = sess_options if sess_options is not None else SessionOptions()
        so = self._sess_options
        if not isinstance(so, SessionOptions):
            raise TypeError(f"sess_options must be an onnxep.SessionOptions, got {type(so).__name__}")
        unknown = set(kwargs) - {"prepacked_weights_container", "stream", "disabled_optimizers"}
        if unknown:
            raise TypeError(f"InferenceSession got unexpected keyword arguments {sorted(unknown)}")
        self._log = _Log(so.log_severity_level, so.log_verbosity_level, so.logid)
        self._severity = int(so.log_severity_level)
        self._profiler = _Profiler(so.profile_file_prefix) if so.enable_profiling else None
        t_start = time.perf_counter_ns()
        fallback = not so._flag(CONFIG_DISABLE_FALLBACK)
        devices, self._providers, self._provider_options = _select_providers(providers, provider_options, fallback)
        _check_session_options(so)
        precision = compute_precision(so._config)
        spinning = allow_spinning(so._config)
        appends = append_in_place(so._config)
        disabled, unknown_passes = disabled_passes(kwargs.get("disabled_optimizers"))
        for name in unknown_passes:
            warn_once(("disabled_optimizers", name), f"disabled_optimizers: {name!r} names no onnxep pass nor an "
                      f"onnxruntime optimizer one stands in for; ignored (onnxep.graph.passes.PASS_NAMES lists them)")
        self._stream = kwargs.get("stream") or Stream("session")
        container = kwargs.get("prepacked_weights_container")
        self._container = container if container is not None else PrePackedWeightsContainer()
        self._lock = threading.Lock()
        # enable_cpu_mem_arena (or the provider option use_arena=0) off: no memory kept between runs -- no host block
        # pool, and a planned run's arena is allocated for that run and dropped after it; enable_mem_reuse off: no
        # tensor takes a freed one's memory -- no pool either, and the planner gives each tensor its own region
        arena = so.enable_cpu_mem_arena and self._provider_options.get(PROVIDER, {}).get("use_arena", "1") == "1"
        self._pool = HostBlockPool() if arena and so.enable_mem_reuse else None

        export = epcontext.export_options(so._config, path_or_bytes)   # ep.context_* (checked before any work)
        # load; an EPContext model's blobs are read and verified here (graph/epcontext.py)
        # large initializers are read into arrays of their own, outside the message (each weight held once)
        weights = {}
        model, self._model_dir = model_mod.load_model(path_or_bytes, weights)
        _adopt_initializers(model, weights, so)
        if so._dims_by_name or so._dims_by_denotation:
            if model is path_or_bytes:
                model = model.__class__.FromString(model.SerializeToString())   # not the caller's
            _override_free_dims(model, so)
        if self._profiler is not None:
            self._profiler.session_event("model_loading_uri" if isinstance(path_or_bytes, (str, os.PathLike))
                                         else "model_loading_array", t_start, time.perf_counter_ns())
        t_init = time.perf_counter_ns()
        if model is path_or_bytes and any(epcontext.is_context_node(n) for n in model.graph.node):
            model = model.__class__.FromString(model.SerializeToString())   # extract drops blobs: not from the caller's
        # packed weights (compiled, or read from EPContext blobs)
        weight_buft = BufferType("weights", Stream("weights"))
        contexts = epcontext.extract(model, self._model_dir, weight_buft)
        if contexts and export is not None:
            raise InvalidArgument(f"{epcontext.CONFIG_ENABLE}=1 on a model that already holds EPContext nodes "
                                  f"({sorted(contexts)[:3]}): export from the original model")
        model_mod.check_graph(model)      # onnxruntime's load-time checks (graph/model.py)
        graph = model_mod.build_graph(model, infer_shapes=not contexts, weights=weights)
        del weights          # the graph holds them now (and drops each once packed)
        weight_bytes = sum(getattr(a, "nbytes", 0) for a in graph.initializers.values())
        if so._initializers:
            _use_initializers(graph, so)
        forced = frozenset(t.strip() for t in so._config.get(CONFIG_FALLBACK_OP_TYPES, "").split(",") if t.strip())
        level = int(so.graph_optimization_level)
        if CPU_DEVICE not in devices:
            if contexts:
                raise InvalidArgument(f"an EPContext model ({sorted(contexts)[:3]}) runs on {PROVIDER}, which the "
                                      f"providers given ({self._providers}) leave out")
            # the reference backend alone: no pass may leave com.onnxep ops (those come from level 2 on)
            level = min(level, int(GraphOptimizationLevel.ORT_ENABLE_BASIC))
        if devices[0] is not CPU_DEVICE:
            forced = frozenset()      # (onnxep.fallback_op_types moves op types off the cpu backend when it is first)
        # optimize (an EPContext model holds the optimized graph already: no passes)
        if not contexts:
            graph = optimize(graph, level, so.optimized_model_filepath, model, forced, disabled)
        del model
        self._inputs = [NodeArg(n, vt) for n, vt in graph.inputs]
        self._outputs = [NodeArg(n, vt) for n, vt in graph.outputs]
        self._overridable = [NodeArg(n, vt) for n, vt in graph.overridable]
        self._input_types = dict(graph.inputs)
        self._input_types.update(dict(graph.overridable))
        # what every run checks against, worked out once
        self._output_names = tuple(o.name for o in self._outputs)
        self._output_types = dict(graph.outputs)
        self._copied = None          # (the bound outputs the last IOBinding run copied in: for tests)
        self._valid_out = frozenset(self._output_names)
        self._required = tuple(i.name for i in self._inputs)
        # name -> (dtype, shape) of a float / int tensor input whose dims are all static: a feed of exactly that
        # dtype and shape, C-contiguous, needs no further checking (_check_value does the rest)
        self._exact = {n: (vt.dtype, tuple(vt.shape)) for n, vt in self._input_types.items()
                       if vt.kind == "tensor" and vt.dtype is not None and vt.dtype != np.dtype(object)
                       and vt.shape is not None and all(isinstance(d, int) for d in vt.shape)}
        self._meta = ModelMetadata(graph.metadata)
        # partition
        partitions = make_partitions(graph, devices, fallback, forced, pinned={n: CPU_DEVICE.name for n in contexts})
        for p in partitions:
            if len(p.nodes) == 1 and p.nodes[0].name in contexts:
                p.context = contexts[p.nodes[0].name]
        contexts_loaded = bool(contexts)
        del contexts
        self.node_assignment = {n.name: p.backend for p in partitions
                                for n in (p.context.nodes if p.context is not None else p.nodes)}
        nthreads = int(so.intra_op_num_threads or 0)
        cpu_opts = {"num_threads": nthreads, "compute_precision": precision, "allow_spinning": spinning}
        self._backends = {d.name: d.init_backend(self._stream, **(cpu_opts if d is CPU_DEVICE else {}))
                          for d in (CPU_DEVICE, REFERENCE_DEVICE)}
        log = self._log
        if log.enabled(logging.DEBUG):
            for n, b in self.node_assignment.items():
                log.log(logging.DEBUG, "node %r -> %s backend (%s)", n, b, _BACKEND_PROVIDERS[b])
        # per plan, its nodes as (name, op type, index in the session's node order): profile events and traces
        order = {}
        plan_nodes = []
        for p in partitions:
            nodes = p.context.nodes if p.context is not None else p.nodes
            plan_nodes.append([(n.name, n.op_type, order.setdefault(n.name, len(order))) for n in nodes])
        # compile (kernels + pre-packing); graph objects are not kept past this call
        exporter = epcontext.Exporter(export, [n.name for n in graph.nodes]) if export is not None else None
        ctx = CompileContext(weight_allocator=weight_buft, container=self._container,
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
        memory = ArenaPlanner(self._backends[CPU_DEVICE.name], kwargs.get("stream") or self._container,
                              reuse=bool(so.enable_mem_reuse), pooled=arena) if so.enable_mem_pattern else None
        self._executor = Executor(plans, self._backends, [n for n, _ in graph.outputs], out_consts, overridable,
                                  memory, plan_nodes, _BACKEND_PROVIDERS)
        # graph inputs that take a view with spare rows as it is (an output of the last run, appended in place)
        self._strided_feeds = self._executor.enable_appends(self._input_types) if appends else frozenset()
        # a run takes the plain path unless profiled or logged verbosely (RunOptions may ask for either)
        self._plain = self._profiler is None and not log.verbose
        self._limit = _memory_limit()
        # graph_plan_free for every plan (kernels' release()) when the session goes away
        self._finalizer = weakref.finalize(self, _free_plans, self._backends, plans)
        if log.enabled(logging.INFO):
            counts = {}
            for b in self.node_assignment.values():
                counts[b] = counts.get(b, 0) + 1
            log.log(logging.INFO, "session ready: %d nodes (%s) in %d plans, providers %s", len(self.node_assignment),
                    ", ".join(f"{k} {v}" for k, v in counts.items()), len(plans), self._providers)
        del graph, partitions
        if weight_bytes >= TRIM_WEIGHT_BYTES or contexts_loaded:
            trim_host_heap()     # loading, folding and packing freed more than the session keeps
        if self._profiler is not None:
            self._profiler.session_event("session_initialization", t_init, time.perf_counter_ns())

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
        """Per provider in use, the options it took (string values, as onnxruntime returns them)."""
        return {p: dict(self._provider_options.get(p, {})) for p in self._providers}

    # ------------------------------------------------------------------ profiling (onnxruntime names)
    def end_profiling(self) -> str:
        """Write the profile (enable_profiling) to profile_file_prefix + timestamp + ".json" and return its name;
        profiling stops. "" when the session is not profiling (onnxruntime's answer too)."""
        profiler, self._profiler = self._profiler, None
        self._plain = not self._log.verbose
        if profiler is not None:
            self._profile_start = profiler.start_ns
        return "" if profiler is None else profiler.write()

    def get_profiling_start_time_ns(self) -> int:
        """When profiling started, comparable to time.monotonic_ns() (0 when the session never profiled; after
        end_profiling still the start of the profile written, as onnxruntime)."""
        profiler = self._profiler
        return self._profile_start if profiler is None else profiler.start_ns

    def get_session_options(self):
        return self._sess_options

    @property
    def plans(self):
        """The compiled plans, in run order (for inspection and tests)."""
        return list(self._executor.plans)

    # ------------------------------------------------------------------ run
    _fast = None        # _FastRun of the last input signature run the plain way, or None
    _fast_misses = 0    # plain runs after which no _FastRun could be made (stop trying after _FAST_TRIES)

    def run(self, output_names, input_feed, run_options=None):
        fast = self._fast
        if fast is not None and run_options is None and self._plain:
            out = fast.run(self, output_names, input_feed)
            if out is not None:
                return out
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
        if run_options is None and self._plain:
            out = self._executor.run(feeds, list(output_names), run_ctx)
            if self._fast_misses < _FAST_TRIES:
                self._fast = _FastRun.make(self, feeds, output_names)
                if self._fast is None:
                    self._fast_misses += 1
            return out
        return self._run_with_options(feeds, list(output_names), run_ctx, run_options)

    def _run_bound(self, output_names, input_feed, run_options, bound):
        """run() whose outputs `bound` (name -> (array, strict)) are written into the arrays given (IOBinding)."""
        valid_out = self._valid_out
        for name in output_names:
            if name not in valid_out:
                raise InvalidArgument(f"Invalid output name: {name}")
        feeds = self._check_feeds(input_feed)
        for name in output_names:
            binding = bound.get(name)
            if binding is not None and binding[1]:
                want = self._output_types.get(name)
                dtype = None if want is None else want.dtype
                if dtype is not None and binding[0].dtype != dtype:
                    raise InvalidArgument(f"Unexpected output data type. Actual: (tensor({_tname(binding[0].dtype)}))"
                                          f" , expected: (tensor({_tname(dtype)})) (output {name!r})")
        run_ctx = RunContext(self._stream, self._limit, run_options, self._pool)
        if bound:
            run_ctx.bound = bound
            run_ctx.copied = []
        if run_options is None and self._plain:
            out = self._executor.run(feeds, list(output_names), run_ctx)
        else:
            out = self._run_with_options(feeds, list(output_names), run_ctx, run_options)
        self._copied = run_ctx.copied
        return out

    # ------------------------------------------------------------------ IOBinding, OrtValue, async (onnxruntime names)
    def io_binding(self):
        """An onnxruntime.IOBinding for this session."""
        from onnxep.io_binding import IOBinding
        return IOBinding(self)

    def _binding_input_names(self) -> frozenset:
        return frozenset(self._input_types)

    def run_with_iobinding(self, iobinding, run_options=None) -> None:
        """Run with the inputs and outputs bound to `iobinding`; an error is a RuntimeError("Error in execution:
        ..."), as onnxruntime's."""
        if iobinding._session is not self._token:
            raise ValueError("IOBinding must be used with the session that created it.")
        names = list(iobinding._outputs)
        try:
            if not names:
                raise InvalidArgument("At least one output should be requested.")
            out = self._run_bound(names, dict(iobinding._inputs), run_options, iobinding._bound())
        except (OnnxepError, ValueError) as e:
            raise RuntimeError(f"Error in execution: {_status_message(e)}") from e
        iobinding._store(names, out)

    def run_with_ort_values(self, output_names, input_dict_ort_values, run_options=None) -> list:
        """run() with OrtValues in and out (the outputs hold the arrays the run made: no copy)."""
        feeds = {n: v._get_c_value() for n, v in input_dict_ort_values.items()}
        from onnxep.ortvalue import OrtValue
        return [OrtValue._wrap(v) for v in self.run(output_names, feeds, run_options)]

    def run_async(self, output_names, input_feed, callback, user_data, run_options=None) -> None:
        """run() on a worker thread; `callback(results, user_data, err)` is called there: results the list of
        outputs and err "" after a run that worked, [] and the error's message after one that failed (as
        onnxruntime's, whose intra-op thread calls it). Missing inputs raise here, before the run starts."""
        if not callable(callback):
            raise TypeError(f"run_async: callback must be callable, got {type(callback).__name__}")
        missing = [n for n in self._required if n not in input_feed]
        if missing:
            raise ValueError(f"Required inputs ({missing}) are missing from input feed ({list(input_feed)}).")
        feeds = {n: (v._get_c_value() if hasattr(v, "_get_c_value") else v) for n, v in input_feed.items()}

        def work():
            try:
                results, err = self.run(output_names, feeds, run_options), ""
            except Exception as e:       # noqa: BLE001 - handed to the callback, as onnxruntime does
                results, err = [], _status_message(e)
            try:
                callback(results, user_data, err)
            except Exception:            # noqa: BLE001 - nobody else could see it
                LOGGER.exception("run_async: the callback raised")

        _async_pool().submit(work)

    # ------------------------------------------------------------------ providers (onnxruntime names)
    def set_providers(self, providers=None, provider_options=None) -> None:
        """Make the session again with these providers (and the same model and options), as onnxruntime re-creates
        its session; IOBindings of the old one are refused from then on."""
        for p in providers or ():
            name = p[0] if isinstance(p, tuple) else p
            if isinstance(name, str) and name not in _PROVIDER_DEVICES:
                raise RuntimeError(f"Unknown Provider Type: {name} (onnxep's providers are "
                                   f"{get_available_providers()})")
        path_or_bytes, kwargs = self._args
        new = InferenceSession(path_or_bytes, self._sess_options, providers, provider_options, **kwargs)
        # the new session's plans are this session's from now on: its finalizer goes, this one's frees the old plans
        _, func, args, _ = new._finalizer.detach()
        old = self._finalizer
        fallback = self._enable_fallback
        self.__dict__.update(new.__dict__)
        self._enable_fallback = fallback
        self._finalizer = weakref.finalize(self, func, *args)
        old()

    def disable_fallback(self) -> None:
        """onnxruntime's: no re-run on its fallback providers after an EP failure (onnxep's runs raise no EPFail to
        fall back from; nodes the cpu backend cannot run go to the reference backend when the session is made,
        which session.disable_cpu_ep_fallback controls)."""
        self._enable_fallback = False

    def enable_fallback(self) -> None:
        self._enable_fallback = True

    def _run_with_options(self, feeds, output_names, run_ctx, ro):
        """A run with RunOptions, or profiled, or logged verbosely."""
        log = self._log
        shrink = False
        if ro is not None:
            if not isinstance(ro, RunOptions):
                raise TypeError(f"run_options must be an onnxep.RunOptions, got {type(ro).__name__}")
            if ro._terminate:
                raise Fail(TERMINATED)
            if ro._config:
                shrink = _run_config(ro._config)
            severity = int(ro.log_severity_level)
            if severity >= 0 or ro.logid or ro.log_verbosity_level:
                log = _Log(severity if severity >= 0 else self._severity, ro.log_verbosity_level,
                           ro.logid or log.logid)
            run_ctx.prune = bool(ro.only_execute_path_to_fetches)
        profiler = self._profiler
        verbose = log.verbose
        if profiler is not None or (verbose and log.verbosity >= 1):
            run_ctx.trace = StepTrace(run_ctx, None if profiler is None else [],
                                      log if verbose and log.verbosity >= 1 else None,
                                      0 if profiler is None else profiler.origin, os.getpid(),
                                      threading.get_native_id())
        if verbose:
            log.log(logging.DEBUG, "run: outputs %s%s", output_names,
                    " (only the nodes they need)" if run_ctx.prune else "")
        timed = profiler is not None or verbose
        t0 = time.perf_counter_ns() if timed else 0
        if ro is not None:
            runs = ro._runs
            # no lock: the run adds itself, then reads the flag; the setter writes the flag, then reads the runs --
            # one of the two sees the other (and stop is only ever set to True, so no stale write undoes it)
            runs.add(run_ctx)
            if ro._terminate:
                run_ctx.stop = True
        try:
            out = self._executor.run(feeds, output_names, run_ctx)
        finally:
            if ro is not None:
                runs.discard(run_ctx)
        if timed:
            t1 = time.perf_counter_ns()
            if profiler is not None:
                # the run's span leaves out the recording of a compiled run's steps after its walk
                profiler.run_events(run_ctx.trace.events, t0, t1 - run_ctx.trace.post_ns)
            if verbose:
                log.log(logging.DEBUG, "run done in %.1f us", (t1 - t0) / 1000)
        if shrink:
            self._shrink()
        return out

    def _shrink(self):
        """memory.enable_memory_arena_shrinkage: hand back the memory kept between runs -- the host block pool's
        blocks no tensor uses, the arena pool's buffers no run holds -- and trim the heap."""
        if self._pool is not None:
            self._pool = HostBlockPool()
        memory = self._executor.memory
        if memory is not None:
            memory.shrink()
        trim_host_heap()

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
            feeds[name] = _check_value(name, value, vt, name in self._strided_feeds)
        return feeds



#: plain runs that may fail to make a _FastRun before a session stops trying (a model whose runs never qualify; a
#: run whose feeds are not the fast path's makes one for its own signature: a few microseconds)
_FAST_TRIES = 16


class _FastRun:
    """The plain run() of one input signature with the per-run checks and look-ups worked out once (issue 25 item 2).

    Made after a plain run (no RunOptions, not profiled) whose feeds were exact C-contiguous arrays, when the
    session's memory planner has planned that signature in a pooled arena of the default allocator and every plan
    runs without boundary copies. A later run whose feeds are arrays of exactly those shapes and dtypes (and, for
    small integer feeds, the same values: the planner's signature) skips the feed checks, the signature, the
    executor's and the planner's generic code: it borrows an arena buffer, runs each plan through its backend (the
    compiled run loop for cpu plans, backends/cpu/runloop.py) and builds the output list as Executor._run does.
    Anything else -- other feeds or output names, a signature the planner dropped or re-records, a session whose
    executor set_providers replaced -- returns None and the caller takes the generic path."""

    __slots__ = ("ex", "memory", "key", "mplan", "nfeeds", "outputs", "names", "plans", "views", "size")

    @classmethod
    def make(cls, sess, feeds, output_names):
        ex = sess._executor
        memory = ex.memory
        if (memory is None or memory.__class__ is not ArenaPlanner or not memory.pooled or ex.overridable
                or any(ex.copies) or not sess._stream.uses_default_allocator
                or not memory.stream.uses_default_allocator):
            return None
        for v in feeds.values():
            if v.__class__ is not np.ndarray or v.dtype == object or not v.flags.c_contiguous:
                return None
        key = signature(feeds)
        mplan = memory.plans.get(key)
        if mplan is None:
            return None
        f = cls()
        f.ex, f.memory, f.key, f.mplan = ex, memory, key, mplan
        f.nfeeds = len(key)
        f.outputs = sess._output_names
        f.names = tuple(output_names)
        f.plans = tuple((p, ex.backends[p.backend_name], frees) for p, frees in zip(ex.plans, ex.frees))
        f.views = {}
        f.size = max(mplan.arena_size, 1)
        return f

    def run(self, sess, output_names, feeds):
        """The outputs, or None (nothing done) when this run is not one of the signature's plain runs."""
        if (tuple(output_names) if output_names else self.outputs) != self.names:
            return None
        if feeds.__class__ is not dict or len(feeds) != self.nfeeds or sess._executor is not self.ex:
            return None
        for name, shape, dtype, small in self.key:       # (the planner's signature of the feeds)
            v = feeds.get(name)
            if v.__class__ is not np.ndarray or v.shape != shape or v.dtype != dtype or not v.flags.c_contiguous or (
                    small is not None and v.tobytes() != small):
                return None
        memory = self.memory
        key = self.key
        mplan = self.mplan
        if memory.plans.get(key) is not mplan:
            sess._fast = None
            return None
        run_ctx = RunContext(sess._stream, sess._limit, None, sess._pool)
        pool = memory._pool
        buf = pool.borrow(self.size, memory.backend)
        views = self.views.get(buf)
        if views is None:
            if len(self.views) >= 8:        # (buffers the pool freed: do not keep them)
                self.views.clear()
            views = self.views[buf] = pool.views(buf, mplan)
        arena = run_ctx.arena = ArenaRun(mplan, buf.memory(), views)
        values = dict(feeds)
        ok = False
        try:
            for plan, backend, frees in self.plans:
                backend.graph_plan_compute(plan, values, run_ctx)
                for x in frees:
                    values.pop(x, None)
            ok = True
        finally:
            if ok and not arena.diverged:
                run_ctx.arena = None
                pool.give_back(buf)
            else:
                memory.finish((key, arena, buf, None), run_ctx, self.ex.graph_outputs, ok)
                sess._fast = None
        out = []
        diverged = arena.diverged
        constants = self.ex.constants
        for name in self.names:
            v = values[name] if name in values else constants[name]
            if v.__class__ is np.ndarray and (not v.flags.writeable or name not in values or (
                    diverged and np.may_share_memory(v, arena.mem))):
                v = v.copy()
            out.append(v)
        return out


def _status_message(e) -> str:
    """The message of an error without onnxep's "[onnxep] CODE : " prefix (what onnxruntime hands run_async's
    callback and puts after "Error in execution: ")."""
    return str(e.args[0]) if e.args else str(e)


_ASYNC_POOL = None
_ASYNC_LOCK = threading.Lock()


def _async_pool():
    """The worker threads of run_async (made on first use)."""
    global _ASYNC_POOL
    with _ASYNC_LOCK:
        if _ASYNC_POOL is None:
            from concurrent.futures import ThreadPoolExecutor
            _ASYNC_POOL = ThreadPoolExecutor(max_workers=max(2, os.cpu_count() or 2),
                                             thread_name_prefix="onnxep-run-async")
        return _ASYNC_POOL


_BACKEND_PROVIDERS = {CPU_DEVICE.name: PROVIDER, REFERENCE_DEVICE.name: REFERENCE_PROVIDER}
_PROVIDER_DEVICES = {PROVIDER: CPU_DEVICE, "CPUExecutionProvider": CPU_DEVICE, REFERENCE_PROVIDER: REFERENCE_DEVICE}
#: provider option keys each provider reads ("use_arena": "0" is enable_cpu_mem_arena = False for this session)
_PROVIDER_OPTION_KEYS = {PROVIDER: {"use_arena": ("0", "1")}, REFERENCE_PROVIDER: {}}


def _select_providers(providers, provider_options, fallback: bool):
    """(devices in order, provider names in use, {provider: {key: str value}}) from InferenceSession's providers and
    provider_options, read as onnxruntime reads them (names, or (name, options) tuples; or names and a parallel list
    of option dicts). "CPUExecutionProvider" is onnxep's native provider. As onnxruntime appends its CPU provider, the
    reference provider is appended as the fallback unless session.disable_cpu_ep_fallback is "1"; the reference
    provider alone runs every node on the reference backend."""
    if providers is None or (not providers and provider_options is None):
        names, options = [PROVIDER], [{}]
    else:
        if not isinstance(providers, collections.abc.Sequence):
            raise ValueError("'providers' should be a sequence.")
        if provider_options is not None:
            if not isinstance(provider_options, collections.abc.Sequence):
                raise ValueError("'provider_options' should be a sequence.")
            if len(providers) != len(provider_options):
                raise ValueError("'providers' and 'provider_options' should be the same length if both are given.")
            if not all(isinstance(p, str) for p in providers):
                raise ValueError("Only string values for 'providers' are supported if 'provider_options' is given.")
            if not all(isinstance(o, dict) for o in provider_options):
                raise ValueError("'provider_options' values must be dicts.")
            names, options = list(providers), list(provider_options)
        else:
            names, options = [], []
            for p in providers:
                if isinstance(p, str):
                    names.append(p)
                    options.append({})
                elif isinstance(p, tuple) and len(p) == 2 and isinstance(p[0], str) and isinstance(p[1], dict):
                    names.append(p[0])
                    options.append(p[1])
                else:
                    raise ValueError("'providers' values must be either strings or (string, dict) tuples.")
    devices, used, used_options = [], [], {}
    for pos, (name, opts) in enumerate(zip(names, options)):
        dev = _PROVIDER_DEVICES.get(name)
        if dev is None:
            raise ValueError(f"Specified provider '{name}' is not in available provider names. Available providers: "
                             f"'{', '.join(get_available_providers())}'")
        provider = _BACKEND_PROVIDERS[dev.name]
        if dev in devices:          # a repeat, or both spellings of the native provider: the first one counts
            if name in names[:pos]:
                warnings.warn(f"Duplicate provider '{name}' encountered, ignoring.")
            continue
        known = _PROVIDER_OPTION_KEYS[provider]
        taken = {}
        for key, value in opts.items():
            key, value = str(key), str(value)
            if key not in known:
                warn_once((provider, key), f"provider option {key!r} is not one {provider} knows "
                          f"({sorted(known) or 'it takes none'}); ignored")
                continue
            if value not in known[key]:
                raise InvalidArgument(f"provider option {key!r} of {provider}: {value!r} is not one of {known[key]}")
            taken[key] = value
        devices.append(dev)
        used.append(provider)
        used_options[provider] = taken
    if fallback and REFERENCE_DEVICE not in devices:
        devices.append(REFERENCE_DEVICE)
        used.append(REFERENCE_PROVIDER)
        used_options[REFERENCE_PROVIDER] = {}
    return devices, used, used_options


def _check_session_options(so: SessionOptions) -> None:
    """The session options onnxep accepts but cannot apply as asked: a one-time warning each."""
    if int(so.inter_op_num_threads) > 1:
        warn_once("inter_op_num_threads", f"inter_op_num_threads={so.inter_op_num_threads}: onnxep has no inter-op "
                  f"thread pool (nodes run one after another, each on intra_op_num_threads threads); ignored")
    if int(so.execution_mode) == ExecutionMode.ORT_PARALLEL:
        warn_once("execution_mode", "execution_mode ORT_PARALLEL: onnxep runs nodes sequentially (each node uses "
                  "intra_op_num_threads threads); running as ORT_SEQUENTIAL")
    if int(so.execution_order) != ExecutionOrder.DEFAULT:
        warn_once("execution_order", f"execution_order {ExecutionOrder(int(so.execution_order)).name}: onnxep runs "
                  f"nodes in the model's topological order; running as DEFAULT")
    if not so.use_per_session_threads:
        warn_once("use_per_session_threads", "use_per_session_threads=False: onnxep's kernels use its one "
                  "process-wide thread pool either way (intra_op_num_threads still limits each session's calls)")


def _switch(config: dict, key: str) -> bool:
    """A "0" / "1" session config entry (True when not set), else InvalidArgument naming the key and the value."""
    value = config.get(key, "1").strip()
    if value not in ("0", "1"):
        raise InvalidArgument(f"session config {key}={value!r}: allowed values are '0', '1'")
    return value == "1"


def allow_spinning(config: dict) -> bool:
    """The session's session.intra_op.allow_spinning entry ("0" and "1" are allowed, as in onnxruntime)."""
    return _switch(config, CONFIG_ALLOW_SPINNING)


def append_in_place(config: dict) -> bool:
    """The session's onnxep.append_in_place entry."""
    return _switch(config, CONFIG_APPEND_IN_PLACE)


def compute_precision(config: dict) -> str:
    """The session's onnxep.compute_precision entry ("fp32" when not set), else InvalidArgument naming the key, the
    value and the allowed values."""
    value = config.get(CONFIG_COMPUTE_PRECISION, "fp32")
    if value.strip().lower() not in COMPUTE_PRECISIONS:
        raise InvalidArgument(f"session config {CONFIG_COMPUTE_PRECISION}={value!r}: allowed values are "
                              f"{', '.join(repr(v) for v in COMPUTE_PRECISIONS)}")
    return value.strip().lower()


def _run_config(config: dict) -> bool:
    """Reads a run's config entries: True when memory.enable_memory_arena_shrinkage names the cpu device; a one-time
    warning for a key that has nothing to act on in onnxep, or that onnxep does not know."""
    shrink = False
    for key, value in config.items():
        if key == CONFIG_ARENA_SHRINKAGE:
            devices = [d.split(":")[0].strip().lower() for d in value.split(";") if d.strip()]
            if "cpu" in devices:
                shrink = True
            else:
                warn_once((key, value), f"run config {key}={value!r}: onnxep has only cpu memory; nothing to shrink")
        elif key in _RUN_KEYS_NOT_FOR_CPU or key.startswith(_RUN_KEY_PREFIXES_NOT_FOR_CPU):
            warn_once(("run config", key), f"run config entry {key!r} has nothing to act on in onnxep's CPU runs "
                      f"(synchronous, no device graphs); ignored")
        else:
            warn_once(("run config", key), f"run config entry {key!r} is not one onnxep knows; ignored")
    return shrink


class _Profiler:
    """enable_profiling: onnxruntime's trace format -- a JSON list of Chrome-trace "X" events, "Session" events for
    loading, initialization and each run ("model_run", "SequentialExecutor::Execute") and a "Node" event per kernel
    ("<node>_kernel_time", args op_name, provider, node_index, input / output type and shape), ts and dur in
    microseconds from the start -- written by end_profiling to profile_file_prefix + "_" + date and time + ".json"."""

    def __init__(self, prefix):
        self.prefix = str(prefix)
        self.start_ns = time.monotonic_ns()
        self.origin = time.perf_counter_ns()
        self.started = time.time()
        self.pid = os.getpid()
        # records, not the JSON's dicts: (thread id, t0 ns, t1 ns, name) for a session event; a kernel's is
        # StepTrace's flat tuple (the same four, then op, provider, node index, the number of inputs and the
        # inputs' and outputs' (type, shape) pairs). Tuples of atomic values leave the garbage collector's old
        # generation alone (see StepTrace.end_step).
        self.events = []

    def session_event(self, name, t0, t1) -> None:
        self.events.append((threading.get_native_id(), t0, t1, name))

    def run_events(self, steps, t0, t1) -> None:
        tid = threading.get_native_id()
        events = list(steps)
        # SequentialExecutor::Execute spans the kernels as onnxruntime's does (the run's own span without any)
        events.append((tid, min((e[1] for e in steps), default=t0), max((e[2] for e in steps), default=t1),
                       "SequentialExecutor::Execute"))
        events.append((tid, t0, t1, "model_run"))
        self.events.extend(events)        # (one extend: runs on other threads interleave whole runs)

    def _event(self, rec) -> dict:
        tid, t0, t1, name = rec[:4]
        e = {"cat": "Session", "pid": self.pid, "tid": tid, "dur": (t1 - t0) // 1000,
             "ts": (t0 - self.origin) // 1000, "ph": "X", "name": name, "args": {}}
        if len(rec) > 4:
            op, provider, index, n_in = rec[4:8]
            pairs = [{rec[k]: list(rec[k + 1])} for k in range(8, len(rec), 2)]
            e["cat"], e["name"] = "Node", f"{name}_kernel_time"
            e["args"] = {"op_name": op, "provider": provider, "node_index": str(index),
                         "input_type_shape": pairs[:n_in], "output_type_shape": pairs[n_in:]}
        return e

    def write(self) -> str:
        stamp = time.strftime("%Y-%m-%d_%H-%M-%S", time.localtime(self.started))
        path = f"{self.prefix}_{stamp}_{int(self.started * 1000) % 1000:03d}.json"
        with open(path, "w") as f:
            f.write("[\n" + ",\n".join(json.dumps(self._event(e)) for e in self.events) + "\n]\n")
        return path


def _free_plans(backends, plans):
    for plan in plans:
        backends[plan.backend_name].graph_plan_free(plan)


def _check_value(name, value, vt: ValueType, strided=False):
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
        if not got.isnative and got.newbyteorder("=") == expected:
            # non-native byte order (a big-endian array on this little-endian host): converted to the input's type.
            # (onnxruntime 1.32 reads such an array's bytes as native ones and computes on garbage)
            value = value.astype(expected)
            got = expected
        ok = got == expected or (expected == np.dtype(object) and got.kind in "OUS")
        if not ok:
            what = ""
            if got.kind in "OUS" and expected.kind not in "OUS":
                what = (f": {'an object' if got.kind == 'O' else 'a string'} array ({got}) was fed to a numeric "
                        f"input; convert it with .astype({expected.name!r}) if it holds numbers")
            raise InvalidArgument(f"Unexpected input data type for input {name!r}. Actual: (tensor({_tname(got)})) , "
                                  f"expected: (tensor({_tname(expected)})){what}")
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
    if not value.flags.c_contiguous and not (strided and _grow.is_view(value)):
        value = np.ascontiguousarray(value)
    return value


def _tname(dt) -> str:
    """onnxruntime's name of a numpy dtype (strings and objects: "string", as onnxruntime names them)."""
    dt = np.dtype(dt)
    if dt.kind in "OUS":
        return "string"
    return {"float32": "float", "float64": "double", "object": "string", "bool": "bool"}.get(dt.name, dt.name)
