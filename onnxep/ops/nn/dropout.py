import numpy as np

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
    """Inference Dropout: output := data, mask := all True (opsets 12, 13, 22). The training_mode input must be absent
    or a constant false (else the node goes to the reference backend); ratio and seed are ignored."""

    domain, op_type, since = "", "Dropout", 12
    type_constraints = {"T": _FLOATS, "T2": ("bool",)}

    @classmethod
    def supports(cls, op):
        if len(op.node.inputs) > 2 and op.node.inputs[2]:
            tm = op.constants.get(2)
            return tm is not None and tm.size == 1 and not bool(tm.reshape(-1)[0])
        return True

    def compute(self, ctx):
        _identity_bool_mask(ctx)
