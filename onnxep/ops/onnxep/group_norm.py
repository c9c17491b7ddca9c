"""GroupNorm (domain com.onnxep), as onnxruntime's com.microsoft GroupNorm: per instance and group of C / groups
channels, Y = (X - mean) / sqrt(var + epsilon) * gamma[c] + beta[c], then SiLU (Y * Sigmoid(Y)) when activation is
"Silu". What graph/passes/fuse_group_norm.py makes of the exporters' GroupNorm chain (Reshape -> InstanceNormalization
-> Reshape -> Mul -> Add [-> Sigmoid / Mul]). Written by passes, never by users.

X float32 of rank >= 3: (N, C, spatial...) or, with channels_last 1, (N, spatial..., C); Y in X's layout, or
channel-last from an NCHW X with output_channels_last 1 (what graph/passes/fuse_group_norm.py's post-layout step makes
of a GroupNorm whose result the layout pass transposes channel-last); gamma and beta constant float32 (C,). Kernel: _kernels.group_norm_f32 (_k_norm.pxi), also the compiled run loop's RL_GROUP_NORM step."""
import numpy as np

from onnxep import _kernels
from onnxep.errors import InvalidArgument
from onnxep.ops._base import F32, OpKernel, f32_shape

DOMAIN = "com.onnxep"
ACTIVATIONS = ("", "Silu")


class GroupNorm_1(OpKernel):
    domain, op_type, since = DOMAIN, "GroupNorm", 1
    type_constraints = {}        # no onnx schema for this domain: supports() checks the types
    groups = 1
    epsilon = 1e-5
    activation = ""
    channels_last = 0
    output_channels_last = None      # default: channels_last

    @classmethod
    def supports(cls, op):
        n = op.node
        if len(n.inputs) != 3 or len(n.outputs) != 1 or not all(n.inputs):
            return False
        if n.attrs.get("activation", "") not in ACTIVATIONS:
            return False
        shape = f32_shape(op.input_types[0])
        if shape is None or len(shape) < 3:
            return False
        cl = int(n.attrs.get("channels_last", 0) or 0)
        ocl = n.attrs.get("output_channels_last")
        if ocl is not None and int(ocl) != cl and (cl or len(shape) != 4):
            return False             # NCHW -> NHWC only, and only 4-D
        c = shape[-1] if cl else shape[1]
        g = int(n.attrs.get("groups", 1) or 0)
        if not isinstance(c, int) or g <= 0 or c % g:
            return False
        return all(i in op.constants and op.constants[i].dtype == F32 and op.constants[i].shape == (c,)
                   for i in (1, 2))

    def _layout(self):
        """The kernel's layout code: 0 NCHW, 1 NHWC, 2 NCHW X to NHWC Y."""
        cl = int(bool(self.channels_last))
        ocl = cl if self.output_channels_last is None else int(bool(self.output_channels_last))
        return 2 if ocl and not cl else cl

    def _y_shape(self, shape):
        return (shape[0],) + tuple(shape[2:]) + (shape[1],) if self._layout() == 2 else shape

    def _dims(self, shape):
        """(N, C, S) of X's shape."""
        if len(shape) < 3:
            raise InvalidArgument(f"GroupNorm {self.name}: X must have rank >= 3, got shape {shape}")
        n, c = shape[0], shape[-1] if self.channels_last else shape[1]
        s = int(np.prod(shape[1:-1] if self.channels_last else shape[2:], dtype=np.int64))
        return n, c, s

    def compute(self, ctx):
        x, gamma, beta = np.ascontiguousarray(ctx.input(0)), ctx.input(1), ctx.input(2)
        n, c, s = self._dims(x.shape)
        if gamma.shape != (c,) or beta.shape != (c,) or c % int(self.groups):
            raise InvalidArgument(f"GroupNorm {self.name}: X {x.shape} has {c} channels, gamma {gamma.shape}, "
                                  f"beta {beta.shape}, {self.groups} groups")
        y = ctx.output(0, self._y_shape(x.shape), np.float32)
        if self._layout() == 2 and np.may_share_memory(x, y):
            x = x.copy()             # (written across: not in place)
        _kernels.group_norm_f32(x.reshape(-1), y.reshape(-1), n, c, s, int(self.groups), gamma, beta,
                                float(self.epsilon), self.activation == "Silu", self._layout(), ctx.num_threads)

    def c_step(self, ins, outs, nthreads):
        """The compiled run loop's entry: RL_GROUP_NORM, the same kernel."""
        x, gamma, beta, y = ins[0], ins[1], ins[2], outs[0]
        if x.dtype != F32 or y.dtype != F32 or not x.flags.c_contiguous or x.ndim < 3 \
                or y.shape != self._y_shape(x.shape):
            return None
        if self._layout() == 2 and np.may_share_memory(x, y):
            return None
        n, c, s = self._dims(x.shape)
        for v in (gamma, beta):
            if v.dtype != F32 or not v.flags.c_contiguous or v.shape != (c,):
                return None
        return ("group_norm", [0, 1, 2, ~0],
                [n, c, s, int(self.groups), int(self.activation == "Silu"), self._layout()],
                [float(self.epsilon)])
