"""QLinearConvNhwc (domain com.onnxep): QLinearConv (ops/quant/q_linear_conv.py) over channel-last 8-bit tensors, X
(N, H, W, C) and Y (N, Ho, Wo, M); the other inputs and the attributes are QLinearConv's (W stays (M, C/group, kh,
kw)). Written by the layout pass (graph/passes/layout_nhwc.py) from the QLinearConvs of a folded QDQ model
(graph/passes/fuse_qdq_ops.py), never by users. Optional attributes qmin / qmax narrow the output's saturation range
(a fused Relu / Clip, quantized). 2-D, group 1 or depthwise, a constant 8-bit W with float32 scales: the native conv
(onnxep/_native/qconv.h), a C step of the compiled run loop (RL_QCONV)."""
import numpy as np

from onnxep.ops import _c_steps
from onnxep.ops.quant import _common as c
from onnxep.ops.quant import _qconv
from onnxep.ops.quant.q_linear_conv import QLinearConv_10

DOMAIN = "com.onnxep"


class QLinearConvNhwc_1(QLinearConv_10):
    domain, op_type, since = DOMAIN, "QLinearConvNhwc", 1
    type_constraints = {}        # no onnx schema for this domain: supports() checks the types
    qmin = None
    qmax = None
    _plan = None                 # (x shape, Prepared, params, y shape, y zero point, qlo, qhi): the last call's

    @classmethod
    def supports(cls, op):
        ins, t = op.node.inputs, op.input_types
        if len(ins) not in (8, 9) or len(op.node.outputs) != 1 or not cls.attrs_supported(op):
            return False
        w = op.constants.get(3)
        if w is None or not ins[0] or t[0] is None or t[0].shape is None or len(t[0].shape) != 4:
            return False
        for i in (1, 4, 6):
            v = op.constants.get(i)
            if v is None or v.dtype != c.F32:
                return False
        xdt = np.dtype(t[0].dtype) if t[0].dtype is not None else None
        return xdt is not None and _qconv.applies(xdt, w, int(op.node.attrs.get("group", 1) or 1))

    def compute(self, ctx):
        x, xs, xz, w, ws, wz, ys, yz, bias = self._inputs(ctx)
        n, h, wd, ch = x.shape
        pb, outs, shape = self.conv_shape((n, ch, h, wd), w.shape)
        out_dt = yz.dtype if yz is not None else x.dtype
        yshape = (n,) + tuple(outs) + (shape[1],)
        y = ctx.output(0, yshape, out_dt)
        if not y.size:
            return
        prep = self._native_prep(x, xs, xz, w, ws, wz, ys, yz, bias, out_dt)
        lo, hi = _qconv.RANGES[out_dt]
        lo = lo if self.qmin is None else max(lo, int(self.qmin))
        hi = hi if self.qmax is None else min(hi, int(self.qmax))
        if prep is None:     # (supports() keeps the layout pass from writing such a node)
            yn = np.empty(shape, out_dt)
            self._numpy(x.transpose(0, 3, 1, 2), xs, xz, w, ws, wz, ys, yz, bias, pb, outs, yn)
            y[...] = np.clip(yn, lo, hi).transpose(0, 2, 3, 1)
            return
        plan = self._plan
        if plan is None or plan[0] != x.shape or plan[1] is not prep:
            params = self._params(prep, x.dtype, out_dt, x.shape, outs, pb, xz)
            plan = self._plan = (x.shape, prep, params, yshape, 0 if yz is None else int(yz.reshape(())), lo, hi)
        _qconv.run(prep, np.ascontiguousarray(x), plan[2], y, plan[4], lo, hi, ctx.num_threads)

    def c_step(self, ins, outs, nthreads):
        """The compiled run loop's entry (RL_QCONV) for the constants and the shapes compute prepared."""
        plan = self._plan
        if plan is None or type(self).compute is not QLinearConvNhwc_1.compute or len(outs) != 1:
            return None
        xshape, prep, params, yshape, yzp, lo, hi = plan
        if self._prep is None or self._prep[1] is not prep:
            return None           # not made from constants
        x, y = ins[0], outs[0]
        if not _c_steps.plain(x, y) or x.shape != xshape or y.shape != yshape or x.dtype.itemsize != 1 \
                or y.dtype.itemsize != 1 or np.may_share_memory(x, y):
            return None
        return "qconv", [0, prep.w8, prep.zb, prep.bias, prep.mult, ~0], [int(v) for v in params], \
            [float(yzp), float(lo), float(hi)]
