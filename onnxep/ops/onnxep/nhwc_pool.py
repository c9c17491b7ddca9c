"""Internal channel-last pooling ops of domain "com.onnxep" (float32, 2-D: X and Y are (N, H, W, C)).

Each is exactly the ONNX op of the same name without "Nhwc", with X and Y transposed to NHWC:
    NhwcMaxPool           MaxPool-12: kernel_shape, strides, pads, dilations, auto_pad, ceil_mode (storage_order is
                          accepted and ignored: there is no Indices output)
    NhwcAveragePool       AveragePool-19: the same plus count_include_pad
    NhwcGlobalAveragePool GlobalAveragePool -> Y (N, 1, 1, C)
    NhwcGlobalMaxPool     GlobalMaxPool     -> Y (N, 1, 1, C)
onnx has no schema for this domain, so OpKernel cannot fill attribute defaults from one: they are the class
attributes (the ONNX defaults; the pooling ones are _pool_common.WindowPool's), and supports() checks the input types
itself (type_constraints is empty)."""
import numpy as np

from onnxep import _kernels
from onnxep.ops._base import OpKernel, f32_shape
from onnxep.ops._pool_common import PoolAttrs, WindowPool

DOMAIN = "com.onnxep"
_F32 = np.dtype(np.float32)


def _single_4d_f32_input(op):
    """The shape of the node's one input when it is a float32 tensor of rank 4 (dims may be symbolic) and the node
    has one output, else None."""
    if len(op.node.inputs) != 1 or len(op.node.outputs) != 1:
        return None
    return f32_shape(op.input_types[0], 4)


class _NhwcPool(WindowPool, OpKernel):
    """Y[n, oh, ow, c] := pool over window (oh, ow) of X[n, :, :, c]."""

    domain, since = DOMAIN, 1
    type_constraints = {}

    @classmethod
    def supports(cls, op):
        shape = _single_4d_f32_input(op)
        if shape is None:
            return False
        a = op.node.attrs
        if not a.get("kernel_shape") or len(a["kernel_shape"]) != 2:
            return False
        pa = PoolAttrs(a["kernel_shape"], a.get("strides"), a.get("pads"), a.get("dilations"),
                       a.get("auto_pad") or "NOTSET", a.get("ceil_mode") or 0)
        # PoolAttrs reads NCHW shapes: (N, C, H, W) of the NHWC input
        return pa.valid() and pa.statically_ok((shape[0], shape[3], shape[1], shape[2]))

    def _prepare(self, ctx):
        x = ctx.input(0)
        if x.ndim != 4:
            raise ValueError(f"{self.op_type} ({self.name}): input rank {x.ndim}, expected 4 (N, H, W, C)")
        out, g = self._geom[x.shape[1:3]]
        y = ctx.output(0, (x.shape[0], out[0], out[1], x.shape[3]), np.float32)
        return x, y, g

    _mode = 0
    count_include_pad = 0

    def c_step(self, ins, outs, nthreads):
        """The compiled run loop's entry (RL_POOL_NHWC: the kernel compute calls, on its geometry vector), for plain
        contiguous float32 arrays (no Python per pool)."""
        if "compute" in self.__dict__ or len(outs) != 1:
            return None
        x, y = ins[0], outs[0]
        if not (_plain_f32(x) and _plain_f32(y)) or x.ndim != 4:
            return None
        out, g = self._geom[x.shape[1:3]]       # a geometry that raises: the run loop leaves the step in Python
        if y.shape != (x.shape[0], out[0], out[1], x.shape[3]) or y.size == 0:
            return None
        return "pool_nhwc", [0, ~0], [x.shape[0], x.shape[3], self._mode, int(self.count_include_pad)] \
            + [int(v) for v in g], []


def _plain_f32(a):
    return a.__class__ is np.ndarray and a.dtype == _F32 and a.flags.c_contiguous


class NhwcMaxPool_1(_NhwcPool):
    """MaxPool-12 on NHWC (no Indices output)."""

    op_type = "NhwcMaxPool"
    storage_order = 0

    def compute(self, ctx):
        x, y, g = self._prepare(ctx)
        _kernels.maxpool_nhwc_f32(x.reshape(-1), y.reshape(-1), x.shape[0], x.shape[3], g, ctx.num_threads)


class NhwcAveragePool_1(_NhwcPool):
    """AveragePool-19 on NHWC: the divisor counts the taps inside the input, or inside the padded input when
    count_include_pad (never the ceil_mode overhang past the end pad)."""

    op_type = "NhwcAveragePool"
    count_include_pad = 0
    _mode = 1

    def compute(self, ctx):
        x, y, g = self._prepare(ctx)
        _kernels.avgpool_nhwc_f32(x.reshape(-1), y.reshape(-1), x.shape[0], x.shape[3], g,
                                  int(self.count_include_pad), ctx.num_threads)


class NhwcGlobalAveragePool_1(OpKernel):
    """Y[n, 0, 0, c] := mean(X[n, :, :, c]) (accumulated in double)."""

    domain, op_type, since = DOMAIN, "NhwcGlobalAveragePool", 1
    type_constraints = {}
    is_max = False

    @classmethod
    def supports(cls, op):
        shape = _single_4d_f32_input(op)
        if shape is None:
            return False
        # an empty spatial extent has no mean / max (as GlobalAveragePool_1: leave it to another backend)
        return not any(isinstance(d, int) and d == 0 for d in shape[1:3])

    def compute(self, ctx):
        x = ctx.input(0)
        if x.ndim != 4:
            raise ValueError(f"{self.op_type} ({self.name}): input rank {x.ndim}, expected 4 (N, H, W, C)")
        y = ctx.output(0, (x.shape[0], 1, 1, x.shape[3]), np.float32)
        fn = _kernels.global_maxpool_nhwc_f32 if self.is_max else _kernels.global_avgpool_nhwc_f32
        fn(x.reshape(-1), tuple(x.shape), y.reshape(-1), ctx.num_threads)

    def c_step(self, ins, outs, nthreads):
        """The compiled run loop's entry: RL_GPOOL_NHWC, the kernel compute runs (global_pool_nhwc_c)."""
        from onnxep.ops._c_steps import plain
        x, y = ins[0], outs[0]
        if x is None or not plain(x, y) or x.dtype != np.float32 or y.dtype != np.float32 or x.ndim != 4 \
                or y.shape != (x.shape[0], 1, 1, x.shape[3]) or x.size == 0 or y.size == 0 \
                or np.may_share_memory(x, y):
            return None
        n, h, w, c = x.shape
        return "gpool_nhwc", [0, ~0], [n, h * w, c, 1 if self.is_max else 0], []


class NhwcGlobalMaxPool_1(NhwcGlobalAveragePool_1):
    """Y[n, 0, 0, c] := max(X[n, :, :, c])."""

    domain, op_type, since = DOMAIN, "NhwcGlobalMaxPool", 1
    is_max = True
