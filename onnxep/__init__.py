"""onnxep: a CPU execution provider for ONNX models, a drop-in for onnxruntime.InferenceSession.

    import onnxep as onnxruntime
    sess = onnxruntime.InferenceSession("model.onnx")
    outputs = sess.run(None, {"input": x})
"""
from onnxep import capi, errors
from onnxep.contracts import (AllocatorDesc, PrePackedWeightsContainer, Stream, register_allocator)
from onnxep.errors import (EPFail, EngineError, Fail, InvalidArgument, InvalidGraph, InvalidProtobuf, ModelLoaded,
                           NoModel, NoSuchFile, NotFound, NotImplemented, OnnxepError, RuntimeException)
from onnxep.io_binding import IOBinding
from onnxep.ortvalue import OrtValue
from onnxep.session import (ExecutionMode, GraphOptimizationLevel, InferenceSession, ModelMetadata, NodeArg,
                            RunOptions, SessionOptions, get_all_providers, get_available_providers, get_build_info,
                            get_device, get_version_string, set_default_logger_severity,
                            set_default_logger_verbosity, set_seed)

__version__ = "0.1.0"

from onnxep import _threadpool  # noqa: E402  (after the kernels load: threadpoolctl lists the chosen variant)

_threadpool.register()


def show_config(file=None):
    """Print the kernel variant chosen at import and the thread pool (like numpy.show_config)."""
    import sys

    from onnxep import _kernels
    from threadpoolctl import threadpool_info

    out = file or sys.stdout
    print(f"onnxep {__version__}", file=out)
    print(f"  kernel ISA      : {_kernels.ISA} (CPU supports: {', '.join(_kernels.cpu_features())}; "
          f"built and runnable: {', '.join(_kernels.AVAILABLE)})", file=out)
    print(f"  OpenMP threads  : {_kernels.max_threads()}", file=out)
    from onnxep.ops._bf16 import DP_CONV_MIN_RATIO, bf16_conv_path
    if _kernels.bgemm_hw():
        print(f"  bf16 precision  : GEMM kernel {_kernels.bgemm_kernel()}; convs: {bf16_conv_path() or 'fp32'} "
              f"(vdpbf16ps / FMA products per second {_kernels.bgemm_dp_ratio():.2f}, vdpbf16ps convs from "
              f"{DP_CONV_MIN_RATIO})", file=out)
    else:
        print("  bf16 precision  : runs fp32 (no AVX512_BF16)", file=out)
    for pool in threadpool_info():
        print(f"  thread pool     : {pool.get('user_api')} {pool.get('internal_api')} "
              f"{pool.get('num_threads')} threads ({pool.get('filepath')})", file=out)


__all__ = [
    "AllocatorDesc", "EPFail", "EngineError", "ExecutionMode", "Fail", "GraphOptimizationLevel", "IOBinding",
    "InferenceSession", "InvalidArgument", "InvalidGraph", "InvalidProtobuf", "ModelLoaded", "ModelMetadata",
    "NoModel", "NoSuchFile", "NodeArg", "NotFound", "NotImplemented", "OnnxepError", "OrtValue",
    "PrePackedWeightsContainer", "RunOptions", "SessionOptions", "Stream", "capi", "errors", "get_all_providers",
    "get_available_providers", "get_build_info", "get_device", "get_version_string", "register_allocator",
    "set_default_logger_severity", "set_default_logger_verbosity", "set_seed", "show_config",
]
