"""onnxep inside onnxruntime: its native kernels as an onnxruntime plugin execution provider (issue 28).

The kernel module onnxep chose for this CPU (onnxep/_kernels_<isa>.so) is itself the plugin library: it exports
CreateEpFactories / ReleaseEpFactory (onnxep/_k_ort_plugin.pxi, ABI onnxep/_native/ort_plugin_abi.h, version 24) and
offers one EP, ``onnxep``, on the CPU device. onnxruntime's CPU EP runs every node onnxep does not claim.

    import onnxruntime as ort
    from onnxep import ort as onnxep_ort

    so = onnxep_ort.session_options()          # registers the library once, adds onnxep's EP device
    sess = ort.InferenceSession("model.onnx", so)

With the default EP option ``compile=1`` onnxep claims whole partitions (OrtEp::Compile) and runs them with its
own plan; ``compile=0`` selects the kernel-registry adapters (see :func:`session_options`).

onnxruntime is optional (the ``ort`` extra, onnxruntime >= 1.24); importing this module does not import it.
"""

from __future__ import annotations

import importlib
import threading

EP_NAME = "onnxep"
REGISTRATION_NAME = "onnxep"
MIN_ORT_VERSION = (1, 24)

_lock = threading.Lock()
_registered = False


def _onnxruntime():
    try:
        import onnxruntime
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise ImportError("onnxep.ort needs onnxruntime >= 1.24: pip install 'onnxep[ort]'") from e
    version = tuple(int(p) for p in onnxruntime.__version__.split(".")[:2] if p.isdigit())
    if version < MIN_ORT_VERSION:
        raise RuntimeError(f"onnxep's plugin EP needs onnxruntime >= 1.24 (ABI version 24 and kernel registries), "
                           f"found {onnxruntime.__version__}")
    return onnxruntime


def library_path() -> str:
    """Path of the plugin library: the ISA variant of onnxep's kernel module chosen for this CPU."""
    from onnxep import _kernels

    return importlib.import_module("onnxep._kernels_" + _kernels.ISA).__file__


def register() -> None:
    """Registers the plugin library with onnxruntime once per process (idempotent, thread-safe)."""
    global _registered
    ort = _onnxruntime()
    with _lock:
        if _registered:
            return
        if not any(d.ep_name == EP_NAME for d in ort.get_ep_devices()):
            ort.register_execution_provider_library(REGISTRATION_NAME, library_path())
        _registered = True


def devices() -> list:
    """onnxruntime's OrtEpDevice objects of the onnxep EP (registers the library first)."""
    register()
    return [d for d in _onnxruntime().get_ep_devices() if d.ep_name == EP_NAME]


def session_options(so=None, **ep_options):
    """An onnxruntime.SessionOptions (``so`` itself when given) with onnxep's EP device added; onnxruntime puts its
    CPU EP after it, so nodes onnxep does not claim run there. ``ep_options`` are passed to the EP as strings:

    - ``compile`` (default 1): fuse connected groups of nodes onnxep runs natively that hold real compute (Conv,
      MatMul, Gemm, attention / normalization) and run each as a whole onnxep plan (onnxep/ort_compile.py);
      0: the kernel-registry path, node by node adapters;
    - ``threads``: onnxep's own thread pool size for compiled partitions (default: onnxep's default, all cores);
    - ``claim_conv`` (kernel-registry path only, default 0): claim lone Conv nodes (measured slower than the CPU EP);
    - ``precision`` (compile path): onnxep.compute_precision of the partitions ("fp32" default, "bf16").

    EPContext models (compile path): with onnxruntime's session config entries ``ep.context_enable=1``,
    ``ep.context_file_path`` and ``ep.context_embed_mode`` (0: side files next to the model, 1: embedded), each
    partition onnxep compiles becomes an EPContext node (source "onnxep") of the model onnxruntime writes; a session
    on that model rebuilds each partition from its blob (optimized graph, packed weights) without packing again. A
    blob from another onnxep version, kernel ISA or precision is refused with an onnxruntime exception.
    """
    ep_options.setdefault("compile", 1)
    ort = _onnxruntime()
    devs = devices()
    if not devs:
        raise RuntimeError("onnxruntime lists no onnxep EP device (no CPU device offered by the plugin)")
    if so is None:
        so = ort.SessionOptions()
    so.add_provider_for_devices(devs, {str(k): str(v) for k, v in ep_options.items()})
    return so
