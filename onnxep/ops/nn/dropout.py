import numpy as np

from onnxep.errors import InvalidArgument
from onnxep.ops._base import OpKernel

_FLOATS = ("float32", "float64", "float16")


class Dropout_7(OpKernel):
    """Inference Dropout: output := data, mask := all ones of the data's type (nothing dropped) (opsets 7-9; ratio
    ignored). The schema types this mask T; onnx.reference returns it as bool ones and onnxruntime as zeros."""

    domain, op_type, since = "", "Dropout", 7
    type_constraints = {"T": _FLOATS}

    @classmethod
    def check_types(cls, op):
        # only the data type matters: onnx's shape inference leaves this mask's type unknown (it is T by the schema)
        vt = op.input_types[0] if op.input_types else None
        return vt is not None and vt.kind == "tensor" and vt.dtype is not None and vt.dtype.name in _FLOATS

    def compute(self, ctx):
        x = ctx.input(0)
        ctx.set_output(0, x)
        if ctx.has_output(1):
            ctx.output(1, x.shape, x.dtype).fill(1)


class Dropout_10(OpKernel):
    """Inference Dropout: output := data, mask := all True (bool) (opset 10; ratio ignored)."""

    domain, op_type, since = "", "Dropout", 10
    type_constraints = {"T": _FLOATS, "T1": ("bool",)}

    def compute(self, ctx):
        _identity_bool_mask(ctx)


def _identity_bool_mask(ctx):
    x = ctx.input(0)
    ctx.set_output(0, x)
    if ctx.has_output(1):
        ctx.output(1, x.shape, np.bool_).fill(True)


# Not a subclass of Dropout_10: the registry fills `until` per class, and a subclass would inherit Dropout_10's.
class Dropout_12(OpKernel):
    """Dropout (opsets 12, 13, 22). Inference (training_mode absent or false, or ratio 0): output := data, mask := all
    True. Training: mask := uniform[0, 1) >= ratio, output := data * mask / (1 - ratio), the uniforms drawn from
    numpy's RandomState -- seeded with the seed attribute when given, so the first run matches onnx.reference, and
    advanced run after run (a new mask each step, as onnxruntime does with its own generator)."""

    domain, op_type, since = "", "Dropout", 12
    type_constraints = {"T": _FLOATS, "T2": ("bool",)}
    seed = None

    def __init__(self, info):
        super().__init__(info)
        self._rng = None

    def compute(self, ctx):
        x = ctx.input(0)
        ratio, training = ctx.input(1), ctx.input(2)
        r = 0.5 if ratio is None else float(np.asarray(ratio).reshape(-1)[0]) if np.size(ratio) == 1 else None
        if r is None or not 0 <= r < 1:
            raise InvalidArgument(f"Dropout: ratio must be one value in [0, 1), got {ratio!r}")
        if training is None or np.size(training) != 1 or not bool(np.asarray(training).reshape(-1)[0]) or r == 0:
            if training is not None and np.size(training) != 1:
                raise InvalidArgument(f"Dropout: training_mode must be one bool, got shape {np.shape(training)}")
            _identity_bool_mask(ctx)
            return
        if self._rng is None:
            self._rng = np.random.RandomState(None if self.seed is None else int(self.seed))
        keep = self._rng.uniform(0, 1.0, x.shape) >= r
        y = ctx.output(0, x.shape, x.dtype)
        np.multiply(x, keep, out=y)
        y *= x.dtype.type(1.0 / (1.0 - r))
        if ctx.has_output(1):
            ctx.output(1, x.shape, np.bool_)[...] = keep
