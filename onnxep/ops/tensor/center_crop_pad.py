from onnxep.errors import InvalidArgument
from onnxep.ops._base import OpKernel
from onnxep.ops._data import norm_axes
from onnxep.ops.tensor._helpers import ALL_TYPES, fill_value, ints, new_output


class CenterCropPad_18(OpKernel):
    """Y := X center-cropped or zero-padded to the shape input on axes (all axes when absent) (opset 18): a crop
    starts at (in - out) // 2, a pad puts (out - in) // 2 before and the rest after. One fill and one slice copy; the
    output size is checked before it is allocated."""

    domain, op_type, since = "", "CenterCropPad", 18
    type_constraints = {"T": ALL_TYPES + ("complex64", "complex128"), "Tind": ("int32", "int64")}
    axes = None

    def compute(self, ctx):
        what = f"CenterCropPad node {self.name!r}"
        x = ctx.input(0)
        size = ints(ctx.input(1), f"{what}: shape")
        try:
            axes = norm_axes(self.axes if self.axes is not None else range(x.ndim), x.ndim, what)
        except ValueError as e:
            raise InvalidArgument(str(e)) from None
        if len(size) != len(axes):
            raise InvalidArgument(f"{what}: shape must have one value per axis ({len(axes)}), got {size}")
        if any(s < 0 for s in size):
            raise InvalidArgument(f"{what}: negative size in shape {size}")
        out = list(x.shape)
        src, dst = [slice(None)] * x.ndim, [slice(None)] * x.ndim
        for a, s in zip(axes, size):
            d = x.shape[a]
            if s < d:
                lo = (d - s) // 2
                src[a] = slice(lo, lo + s)
            elif s > d:
                lo = (s - d) // 2
                dst[a] = slice(lo, lo + d)
            out[a] = s
        y = new_output(ctx, 0, out, x.dtype, what)
        if not y.size:
            return
        if any(s != slice(None) for s in dst):
            y[...] = fill_value(x.dtype)
        y[tuple(dst)] = x[tuple(src)]
