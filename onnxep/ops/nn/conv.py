"""Conv, float32 native (float16 / float64 through numpy, nn/_numpy_paths.py), NCW / NCHW / NCDHW (1-, 2- and 3-D):
groups (incl. depthwise), strides, pads incl. asymmetric, auto_pad, dilations, bias. im2col + packed GEMM (the weight
is the packed operand, pre-packed when constant); one input channel per group (depthwise) runs a direct loop."""

import numpy as np

from onnxep import _kernels
from onnxep.ops._base import OpKernel
from onnxep.ops._packed import PackedWeightMixin
from onnxep.ops.nn import _numpy_paths
from onnxep.ops.nn._numpy_paths import NumpyPath

F32 = np.float32
_AUTO_PADS = ("NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID")


def _rank(vt):
    return None if vt is None or vt.shape is None else len(vt.shape)


def conv_geometry(xshape, wshape, auto_pad="NOTSET", kernel_shape=None, strides=None, dilations=None, pads=None):
    """(begin pads, output spatial size) of a conv, per the ONNX spec; raises ValueError on inconsistent shapes."""
    nsp = len(xshape) - 2
    ks = tuple(int(k) for k in wshape[2:])
    if len(wshape) != len(xshape):
        raise ValueError(f"X has shape {tuple(xshape)} but W has shape {tuple(wshape)} (ranks differ)")
    if kernel_shape is not None and tuple(kernel_shape) != ks:
        raise ValueError(f"kernel_shape {tuple(kernel_shape)} does not match W's spatial shape {ks}")
    strides = tuple(strides) if strides else (1,) * nsp
    dilations = tuple(dilations) if dilations else (1,) * nsp
    if len(strides) != nsp or len(dilations) != nsp:
        raise ValueError(f"strides {strides} / dilations {dilations} need {nsp} entries")
    ins = tuple(int(d) for d in xshape[2:])
    dk = tuple((k - 1) * d + 1 for k, d in zip(ks, dilations))
    if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        outs = tuple(-(-i // s) for i, s in zip(ins, strides))
        total = [max(0, (o - 1) * s + k - i) for o, s, k, i in zip(outs, strides, dk, ins)]
        begin = tuple(t // 2 if auto_pad == "SAME_UPPER" else t - t // 2 for t in total)
        return begin, outs
    if auto_pad == "VALID":
        pb = pe = (0,) * nsp
    else:
        pads = tuple(pads) if pads else (0,) * (2 * nsp)
        if len(pads) != 2 * nsp:
            raise ValueError(f"pads {pads} need {2 * nsp} entries")
        pb, pe = pads[:nsp], pads[nsp:]
    outs = []
    for i, b, e, k, s in zip(ins, pb, pe, dk, strides):
        if i + b + e < k:
            raise ValueError(f"the dilated kernel ({k}) is larger than the padded input ({i + b + e})")
        outs.append((i + b + e - k) // s + 1)
    return tuple(pb), tuple(outs)


def _to3(t, fill):
    return (fill,) * (3 - len(t)) + tuple(int(v) for v in t)


class ConvAttrs:
    """Conv's attributes and their defaults (also NhwcConv's, whose com.onnxep domain has no schema to read them
    from, and through quant._common.ConvAttrs ConvInteger's and QLinearConv's)."""

    auto_pad = "NOTSET"
    group = 1
    kernel_shape = None
    strides = None
    dilations = None
    pads = None

    _checked_bias = None         # a read-only (constant) B whose shape compute checked already

    @staticmethod
    def attrs_supported(op) -> bool:
        """auto_pad is one of the four, pads >= 0, strides and dilations >= 1, group >= 1."""
        a = op.node.attrs
        if a.get("auto_pad", "NOTSET") not in _AUTO_PADS:
            return False
        if any(p < 0 for p in (a.get("pads") or ())):
            return False
        if any(s < 1 for s in (a.get("strides") or ())) or any(d < 1 for d in (a.get("dilations") or ())):
            return False
        return int(a.get("group", 1) or 1) >= 1

    def _check_bias(self, B, cout) -> None:
        """B must be (cout,); a read-only B (a constant: the same array every run) is checked once."""
        if B is not None and B is not self._checked_bias:
            if B.shape != (cout,):
                raise ValueError(f"B has shape {B.shape}, expected ({cout},)")
            if not B.flags.writeable:
                self._checked_bias = B


class Conv_1(NumpyPath, ConvAttrs, PackedWeightMixin, OpKernel):
    domain, op_type, since = "", "Conv", 1
    type_constraints = {"T": ("float32", "float16", "float64")}

    def _compute_numpy(self, ctx):
        X, W, B = ctx.input(0), ctx.input(1), ctx.input(2)
        nsp = X.ndim - 2
        (_, yshape, _, _) = self._plan_for(X.shape, tuple(W.shape), int(self.group))
        self._check_bias(B, W.shape[0])
        pb, outs = conv_geometry(X.shape, W.shape, self.auto_pad, self.kernel_shape, self.strides, self.dilations,
                                 self.pads)
        Y = ctx.output(0, yshape, X.dtype)
        if Y.size:
            _numpy_paths.conv(X, W, B, int(self.group), pb, outs, tuple(self.strides or (1,) * nsp),
                              tuple(self.dilations or (1,) * nsp), Y)

    @classmethod
    def supports(cls, op):
        ranks = {r for r in (_rank(op.input_types[0]), _rank(op.input_types[1])) if r is not None}
        if len(ranks) != 1 or ranks.pop() not in (3, 4, 5):
            return False
        return cls.attrs_supported(op)

    def _depthwise(self, wshape):
        return int(self.group) > 1 and wshape[1] == 1

    def prepack_format(self, input_index):
        return f"{_kernels.SGEMM_FORMAT}:conv-weight:group={int(self.group)}"

    def _pack_spec(self, tensor, input_index):
        if input_index != 1 or tensor.ndim not in (3, 4, 5) or tensor.dtype != F32 or self._depthwise(tensor.shape):
            return None
        cout, group = tensor.shape[0], int(self.group)
        if cout == 0 or cout % group:
            return None
        self._wshape = tuple(int(d) for d in tensor.shape)
        kc = int(np.prod(tensor.shape[1:]))
        w = np.ascontiguousarray(tensor).reshape(-1)
        return (_kernels.conv_pack_weight_size(cout, kc, group),
                lambda out: _kernels.conv_pack_weight(w, cout, group, out))

    _shape_plan = None   # ((X shape, W shape), Y shape, kernel xshape, geometry args): the last pair seen

    def _plan_for(self, shape, wshape, group):
        """What compute derives from the X and W shapes alone (checked and computed once per shape pair, not per
        run)."""
        if len(shape) not in (3, 4, 5):
            raise ValueError(f"X must be 3-, 4- or 5-D, got shape {shape}")
        cout = wshape[0]
        if shape[1] != wshape[1] * group:
            raise ValueError(f"X has {shape[1]} channels but W {tuple(wshape)} with group={group} needs "
                             f"{wshape[1] * group}")
        if cout % group:
            raise ValueError(f"W has {cout} output channels, not a multiple of group={group}")
        pb, outs = conv_geometry(shape, wshape, self.auto_pad, self.kernel_shape, self.strides, self.dilations,
                                 self.pads)
        nsp = len(shape) - 2
        xs = (shape[0], shape[1]) + _to3(shape[2:], 1)
        args = (cout, group, _to3(wshape[2:], 1), _to3(self.strides or (1,) * nsp, 1),
                _to3(self.dilations or (1,) * nsp, 1), _to3(pb, 0), _to3(outs, 1))
        return (shape, wshape), (shape[0], cout) + tuple(outs), xs, args

    def compute(self, ctx):
        values, ins = ctx.values, ctx.ins      # inputs 0 and 2 are never packed: read straight from the run's values
        X = values[ins[0]]
        wp = self.packed(1)
        W = None if wp is not None else ctx.input(1)
        wshape = self._wshape if wp is not None else W.shape
        B = values[ins[2]] if len(ins) > 2 and ins[2] else None
        plan = self._shape_plan
        if plan is None or plan[0][0] != X.shape or plan[0][1] != wshape:
            plan = self._shape_plan = self._plan_for(X.shape, tuple(wshape), int(self.group))
        _, yshape, xs, args = plan
        self._check_bias(B, wshape[0])
        Y = ctx.output(0, yshape, F32)
        if wp is None and self._depthwise(wshape):
            _kernels.conv_depthwise_f32(X.reshape(-1), xs, W.reshape(-1), *args, B, Y.reshape(-1), False,
                                        ctx.num_threads)
            return
        if wp is None:
            cout = wshape[0]
            kc = int(np.prod(wshape[1:]))
            wp = np.empty(_kernels.conv_pack_weight_size(cout, kc, int(self.group)), F32)
            if cout:
                _kernels.conv_pack_weight(W.reshape(-1), cout, int(self.group), wp)
        _kernels.conv_f32(X.reshape(-1), xs, wp, *args, B, Y.reshape(-1), False, ctx.num_threads)

    def c_step(self, ins, outs, nthreads):
        """The compiled run loop's entry (RL_CONV_NCHW: conv_f32's computation) for a pre-packed W, a non-depthwise
        group and plain contiguous float32 arrays of the shapes compute planned for; else None (compute runs)."""
        if "compute" in self.__dict__ or type(self).compute is not Conv_1.compute or len(outs) != 1:
            return None
        wp, plan = self.packed(1), self._shape_plan
        if wp is None or plan is None or plan[0][1] != getattr(self, "_wshape", None):
            return None
        X, Y = ins[0], outs[0]
        B = ins[2] if len(ins) > 2 else None
        (shape, _), yshape, xs, args = plan
        if not _plain_f32(X, Y) or X.shape != shape or Y.shape != yshape or X.size == 0 or Y.size == 0:
            return None
        if B is not None and (not _plain_f32(B) or B.shape != (yshape[1],)):
            return None
        if np.may_share_memory(X, Y) or wp.dtype != F32 or not wp.flags.c_contiguous:
            return None
        return "conv_nchw", [0, wp, None if B is None else 2, ~0], _kernels.conv_nchw_step_args(xs, *args), []


def _plain_f32(*arrays) -> bool:
    return all(a.__class__ is np.ndarray and a.dtype == F32 and a.flags.c_contiguous for a in arrays)


class Conv_11(Conv_1):
    since = 11
