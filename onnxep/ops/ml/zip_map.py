import numpy as np

from onnxep.errors import InvalidArgument
from onnxep.ops._base import OpKernel
from onnxep.ops.ml._common import input_type_name, one_of


class ZipMap_1(OpKernel):
    """Z := one dict per row of X [N, C] (1-D: one row), {classlabels[j]: X[n, j]}: a list of dicts, as onnxruntime's
    Python API returns seq(map(string | int64, float)). Keys are str or int, values Python floats."""

    domain, op_type, since = "ai.onnx.ml", "ZipMap", 1
    classlabels_strings = classlabels_int64s = None

    @classmethod
    def check_types(cls, op):
        return input_type_name(op) == "float32"

    @classmethod
    def supports(cls, op):
        return one_of(op, "classlabels_strings", "classlabels_int64s")

    def __init__(self, info):
        super().__init__(info)
        self._keys = list(self.classlabels_strings) if self.classlabels_strings else \
            [int(k) for k in self.classlabels_int64s]

    def compute(self, ctx):
        x = ctx.input(0)
        what = f"ZipMap node {self.name!r}"
        if x.ndim not in (1, 2):
            raise InvalidArgument(f"{what}: X must be 1-D or 2-D, got shape {x.shape}")
        x2 = x.reshape(1, -1) if x.ndim == 1 else x
        if x2.shape[1] != len(self._keys):
            raise InvalidArgument(f"{what}: X has {x2.shape[1]} columns but there are {len(self._keys)} class labels")
        keys = self._keys
        ctx.set_output(0, [dict(zip(keys, row)) for row in x2.astype(np.float64).tolist()])
