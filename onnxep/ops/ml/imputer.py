import numpy as np

from onnxep.errors import InvalidArgument
from onnxep.ops._base import OpKernel
from onnxep.ops.ml._common import NUM4, one_of, output


class Imputer_1(OpKernel):
    """Y := X with every value equal to the replaced value (NaN matches NaN) set to the imputed value: one value, or
    one per feature (X's dimension 1; a 1-D X's dimension 0), as onnxruntime. Float inputs use imputed_value_floats /
    replaced_value_float, integer inputs imputed_value_int64s / replaced_value_int64."""

    domain, op_type, since = "ai.onnx.ml", "Imputer", 1
    type_constraints = {"T": NUM4}
    imputed_value_floats = imputed_value_int64s = None

    @classmethod
    def supports(cls, op):
        return one_of(op, "imputed_value_floats", "imputed_value_int64s")

    def compute(self, ctx):
        x = ctx.input(0)
        what = f"Imputer node {self.name!r}"
        if x.dtype.kind == "f":
            vals, rep = self.imputed_value_floats, np.float32(self.replaced_value_float)
        else:
            vals, rep = self.imputed_value_int64s, self.replaced_value_int64
        if not vals:
            raise InvalidArgument(f"{what}: no imputed values for a {x.dtype} input (imputed_value_"
                                  f"{'floats' if x.dtype.kind == 'f' else 'int64s'} is empty)")
        if x.ndim == 0:
            raise InvalidArgument(f"{what}: X must have at least one dimension")
        vals = np.asarray(vals).astype(x.dtype)
        stride = x.shape[0] if x.ndim == 1 else x.shape[1]
        flat = x.reshape(-1)
        if x.dtype.kind == "f" and np.isnan(rep):
            hit = np.isnan(flat)
        else:
            hit = flat == rep
        y = output(ctx, 0, x.shape, x.dtype, what)
        yf = y.reshape(-1)
        yf[...] = flat
        if vals.size == stride and stride > 0:
            pos = np.flatnonzero(hit)
            yf[pos] = vals[pos % stride]
        else:
            yf[hit] = vals[0]
