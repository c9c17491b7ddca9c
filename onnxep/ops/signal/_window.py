"""The generalized cosine windows (HannWindow, HammingWindow, BlackmanWindow, opset 17):
w[n] = sum_k (-1)^k a_k cos(2 pi k n / N), n in [0, size), N = size (periodic, the default) or size - 1 (symmetric).
Computed in float64 with onnxruntime's float32 coefficients (its float64 Blackman window starts at 1.5e-8 and peaks at
1 + 1.5e-8, so an integer output keeps the peak's 1) and cast to output_datatype (integer types truncate, as a cast).
The size comes from the input's data: it is checked before the output is allocated."""
import numpy as np

from onnxep.errors import InvalidArgument
from onnxep.ops._base import OpKernel
from onnxep.ops.signal._signal import INDEX_TYPES, OUTPUT_DATATYPES, output_dtype, scalar
from onnxep.ops.tensor._helpers import new_output


class CosineWindow(OpKernel):
    """Subclasses set op_type and coefficients (a_0, a_1, ...), float64 values of onnxruntime's float32 constants."""

    domain, since = "", 17
    type_constraints = {"T1": INDEX_TYPES}
    coefficients = ()
    periodic = 1
    output_datatype = 1

    @classmethod
    def supports(cls, op):
        return int(op.node.attrs.get("output_datatype", 1)) in OUTPUT_DATATYPES

    def compute(self, ctx):
        where = f"{self.op_type} node {self.name!r}"
        size = int(scalar(ctx.input(0), "size", where))
        if size < 0:
            raise InvalidArgument(f"{where}: size must be >= 0, got {size}")
        y = new_output(ctx, 0, (size,), output_dtype(self.output_datatype), where)
        if size == 0:
            return
        N = np.float64(size if self.periodic else size - 1)
        with np.errstate(divide="ignore", invalid="ignore"):
            # a symmetric window of one point divides 0 by 0: NaN, as onnxruntime and onnx.reference
            phase = np.arange(size, dtype=np.float64) * (2 * np.pi) / N
            a = self.coefficients
            w = np.full(size, a[0])
            for k in range(1, len(a)):
                w += (-1) ** k * a[k] * np.cos(k * phase)
            np.copyto(y, w, casting="unsafe")
