"""GlobalMaxPool (float32 native, float16 / float64 through numpy; any rank >= 3)."""
from onnxep.ops.nn.global_average_pool import GlobalAveragePool_1


class GlobalMaxPool_1(GlobalAveragePool_1):
    """Y[n, c, 1, ...] := max(X[n, c, ...])"""

    domain, op_type, since = "", "GlobalMaxPool", 1
    is_max = True
