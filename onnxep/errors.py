"""Exception types, named like onnxruntime's (onnxruntime.capi.onnxruntime_pybind11_state), so code written
for onnxruntime catches the same names. Every message says what was wrong and where (input, node, op)."""

__all__ = [
    "OnnxepError", "Fail", "InvalidArgument", "NoSuchFile", "NoModel", "EngineError", "RuntimeException",
    "InvalidProtobuf", "ModelLoaded", "NotImplemented", "InvalidGraph", "EPFail", "NotFound", "OptionWarning",
]


class OnnxepError(Exception):
    """Base of every onnxep error. `code` is the onnxruntime status name it corresponds to."""

    code = "FAIL"

    def __str__(self):
        return f"[onnxep] {self.code} : {super().__str__()}"


class Fail(OnnxepError):
    code = "FAIL"


class InvalidArgument(OnnxepError):
    code = "INVALID_ARGUMENT"


class NoSuchFile(OnnxepError):
    code = "NO_SUCHFILE"


class NoModel(OnnxepError):
    code = "NO_MODEL"


class EngineError(OnnxepError):
    code = "ENGINE_ERROR"


class RuntimeException(OnnxepError):
    code = "RUNTIME_EXCEPTION"


class InvalidProtobuf(OnnxepError):
    code = "INVALID_PROTOBUF"


class ModelLoaded(OnnxepError):
    code = "MODEL_LOADED"


class NotImplemented(OnnxepError):  # noqa: A001 - the name onnxruntime uses
    code = "NOT_IMPLEMENTED"


class InvalidGraph(OnnxepError):
    code = "INVALID_GRAPH"


class EPFail(OnnxepError):
    code = "EP_FAIL"


class NotFound(OnnxepError):
    code = "NOT_FOUND"


class OptionWarning(UserWarning):
    """An option onnxep accepts but cannot apply as asked on a CPU provider (said once per process per option)."""
