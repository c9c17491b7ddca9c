import numpy as np

from onnxep.errors import InvalidArgument
from onnxep.graph.model import check_size
from onnxep.ops._base import OpKernel
from onnxep.ops._data import norm_axes
from onnxep.ops.tensor._helpers import ALL_TYPES, fill_value, first_input_type_ok, ints, new_output

_MODES = ("constant", "reflect", "edge", "wrap")


def pad(ctx, x, pads, mode, value, axes, what):
    """Y := X padded by pads ([begins..., ends...] on axes, negative ones crop) in mode."""
    r = x.ndim
    if axes is None:
        axes = list(range(r))
    else:
        try:
            axes = norm_axes(axes, r, "Pad")
        except ValueError as e:
            raise InvalidArgument(str(e)) from None
    if len(pads) != 2 * len(axes):
        raise InvalidArgument(f"{what}: pads {pads} must hold 2 values per padded axis ({len(axes)} axes)")
    begin, end = [0] * r, [0] * r
    for j, a in enumerate(axes):
        begin[a], end[a] = pads[j], pads[j + len(axes)]
    shape = tuple(n + b + e for n, b, e in zip(x.shape, begin, end))
    if any(d < 0 for d in shape):
        raise InvalidArgument(f"{what}: pads {pads} crop more than input shape {x.shape} holds")
    # negative pads crop first; what remains is padded
    crop = tuple(slice(-b if b < 0 else 0, n + e if e < 0 else n) for n, b, e in zip(x.shape, begin, end))
    xc = x[crop]
    widths = [(max(b, 0), max(e, 0)) for b, e in zip(begin, end)]
    if mode == "constant":
        y = new_output(ctx, 0, shape, x.dtype, what)
        if y.size:
            if any(w != (0, 0) for w in widths):
                y[...] = value
            y[tuple(slice(b, b + n) for (b, _), n in zip(widths, xc.shape))] = xc
        return
    check_size(shape, x.dtype, what)
    if not any(w != (0, 0) for w in widths):
        np.copyto(new_output(ctx, 0, shape, x.dtype, what), xc)
        return
    for a, (w, n) in enumerate(zip(widths, xc.shape)):
        if w != (0, 0) and n == 0:
            raise InvalidArgument(f"{what}: {mode} mode cannot pad axis {a}, empty in input shape {x.shape}")
        if mode == "reflect" and w != (0, 0) and max(w) >= n:
            raise InvalidArgument(f"{what}: reflect pads {w} on axis {a} must be below its size {n}")
    # np.pad's edge, reflect and wrap are ONNX's: one numpy call, then published
    ctx.set_output(0, np.pad(xc, widths, mode=mode))


class Pad_1(OpKernel):
    """Y := X padded by the pads attribute (begins then ends, negative crops) in mode constant (value), reflect or
    edge (opsets 1 (attribute paddings), 2)."""

    domain, op_type, since = "", "Pad", 1
    type_constraints = {"T": ALL_TYPES}
    mode = "constant"
    value = 0.0

    @classmethod
    def check_types(cls, op):
        return super().check_types(op) if op.node.opset >= 2 else first_input_type_ok(op, ("float16", "float32",
                                                                                               "float64"))

    @classmethod
    def supports(cls, op):
        m = op.node.attrs.get("mode", "constant")
        return m in ("constant", "reflect", "edge")

    def compute(self, ctx):
        x = ctx.input(0)
        pads = getattr(self, "pads", None)
        if pads is None:
            pads = getattr(self, "paddings", None)
        if pads is None:
            raise InvalidArgument("Pad: the pads attribute is missing")
        value = fill_value(x.dtype) if x.dtype.hasobject else np.asarray(self.value).astype(x.dtype)
        mode = self.mode
        pad(ctx, x, ints(pads, "Pad pads"), mode, value, None, f"Pad node {self.name!r}")


class Pad_11(OpKernel):
    """Y := X padded by the pads input on the axes input (all axes when absent; opset 18), negative pads crop, in
    mode constant (constant_value input, default 0 / ''), reflect, edge or wrap (opset 19) (opsets 11, 13, 18, 19,
    21, 23-25)."""

    domain, op_type, since = "", "Pad", 11
    type_constraints = {"T": ALL_TYPES, "Tind": ("int32", "int64")}
    mode = "constant"

    @classmethod
    def supports(cls, op):
        m = op.node.attrs.get("mode", "constant")
        return m in _MODES and (m != "wrap" or op.node.opset >= 19)

    def compute(self, ctx):
        x = ctx.input(0)
        v = ctx.input(2)
        if v is None or v.size == 0:
            value = fill_value(x.dtype)
        else:
            value = v.reshape(-1)[0]
        axes = ctx.input(3)
        axes = None if axes is None else ints(axes, "Pad axes")
        mode = self.mode
        pad(ctx, x, ints(ctx.input(1), "Pad pads"), mode, value, axes, f"Pad node {self.name!r}")
