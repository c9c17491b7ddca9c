"""LogSoftmax (float32): the Softmax kernel in log mode, y := x - max - log(sum exp(x - max))."""
from onnxep.ops.math.softmax import _Softmax


class LogSoftmax_1(_Softmax):
    domain, op_type, since = "", "LogSoftmax", 1
    log = True


class LogSoftmax_11(_Softmax):
    domain, op_type, since = "", "LogSoftmax", 11
    log = True


class LogSoftmax_13(_Softmax):
    domain, op_type, since = "", "LogSoftmax", 13
    coerce_2d = False
    log = True
