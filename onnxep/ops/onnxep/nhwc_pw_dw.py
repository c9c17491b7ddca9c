"""NhwcPwDw (domain com.onnxep): a 1x1 channel-last conv and the depthwise conv that reads its output, in one kernel
that computes the pointwise output band by band into a buffer that stays in cache (_k_pwdw.pxi). Written by
graph/passes/fuse_pw_dw.py, never by users.

Inputs: X (N, H, W, Cin), W1 (Cm, Cin, 1, 1), B1 (Cm, optional: ""), W2 (Cm, 1, kh, kw), B2 (Cm, optional).
Attributes: the depthwise conv's (auto_pad, group = Cm, kernel_shape, strides, dilations, pads, activation,
activation_params, as NhwcConv's), and pw_activation / pw_activation_params for the pointwise conv's epilogue.
Y = dw(act1(conv1x1(X, W1) + B1), W2) + B2, then the activation: what the two NhwcConv nodes it replaces compute,
bit for bit (tests/kernels/test_pw_dw.py).

Each conv is an NhwcConv kernel of its own (self._pw, self._dw: their packing, bf16 rule and plans), this one hands
them its inputs 1 and 3 as their input 1 (PackedWeightMixin's protocol, EPContext included) and runs them fused."""
from dataclasses import replace

import numpy as np

from onnxep import _kernels
from onnxep.graph.ir import ValueType
from onnxep.graph.passes.fuse_pw_dw import DW_ATTRS
from onnxep.ops._base import F32, OpKernel, f32_shape
from onnxep.ops.onnxep.nhwc_conv import ACTIVATIONS, DOMAIN, DW_ACTIVATIONS, NhwcConv_1, _plain_f32


class NhwcPwDw_1(OpKernel):
    domain, op_type, since = DOMAIN, "NhwcPwDw", 1
    type_constraints = {}        # no onnx schema for this domain: supports() checks the types

    @classmethod
    def supports(cls, op):
        ins = op.node.inputs
        if len(ins) != 5 or len(op.node.outputs) != 1 or not ins[0] or not ins[1] or not ins[3]:
            return False
        x, w1, w2 = (f32_shape(op.input_types[i], 4) for i in (0, 1, 3))
        if x is None or w1 is None or w2 is None or not all(isinstance(d, int) for d in w1 + w2):
            return False
        cm = w1[0]
        a = op.node.attrs
        if w1[2:] != (1, 1) or w2[0] != cm or w2[1] != 1 or int(a.get("group", 1) or 1) != cm:
            return False
        if any(ins[i] and f32_shape(op.input_types[i]) is None for i in (2, 4)):
            return False
        for key, acts in (("pw_activation", ACTIVATIONS), ("activation", DW_ACTIVATIONS)):
            act = a.get(key) or ""
            if act not in acts or len(a.get(key + "_params") or ()) != acts[act][1]:
                return False
        return True

    def __init__(self, info):
        super().__init__(info)
        a, t, c = info.attrs, info.input_types, info.constants
        x = f32_shape(t[0], 4) if t and t[0] is not None else None
        w1 = f32_shape(t[1], 4) if len(t) > 1 and t[1] is not None else None
        mid = ValueType.of_tensor(1, [x[0], x[1], x[2], w1[0]]) if x is not None and w1 is not None else None
        pw_attrs = {"activation": a.get("pw_activation") or "", "activation_params": a.get("pw_activation_params")}
        self._pw = NhwcConv_1(replace(info, name=info.name + "/pw", op_type="NhwcConv", attrs=pw_attrs,
                                      input_types=tuple(t[:3]), output_types=(mid,),
                                      constants={i: c[i] for i in (1, 2) if i in c}))
        self._dw = NhwcConv_1(replace(info, name=info.name + "/dw", op_type="NhwcConv",
                                      attrs={k: a[k] for k in DW_ATTRS if k in a},
                                      input_types=(mid,) + tuple(t[3:5]),
                                      constants={i - 2: c[i] for i in (3, 4) if i in c}))

    # ------------------------------------------------ the packing protocol: input 1 is the pointwise conv's W, 3 the
    # depthwise conv's; each sub-kernel packs it as its input 1
    def _sub(self, input_index):
        return {1: self._pw, 3: self._dw}.get(input_index)

    def prepack_weight(self, tensor, input_index, allocator, cache) -> bool:
        k = self._sub(input_index)
        done = k is not None and k.prepack_weight(tensor, 1, allocator, cache)
        if done and cache is None:
            k.info.constants.pop(1, None)       # packed: the sub-kernel holds no copy of the weight
        return bool(done)

    def prepack_format(self, input_index):
        return self._sub(input_index).prepack_format(1)

    def set_shared_prepacked_weight(self, buffers, input_index) -> None:
        k = self._sub(input_index)
        k.set_shared_prepacked_weight(buffers, 1)
        k.info.constants.pop(1, None)

    def prepacked_weight_info(self, input_index):
        k = self._sub(input_index)
        return None if k is None else k.prepacked_weight_info(1)

    def set_prepacked_weight_info(self, info, input_index) -> None:
        self._sub(input_index).set_prepacked_weight_info(info, 1)

    def packed(self, input_index):
        k = self._sub(input_index)
        return None if k is None else k.packed(1)

    def release(self) -> None:
        self._pw.release()
        self._dw.release()

    # ------------------------------------------------------------------------------------------------- running
    # (X shape, Y shape, ints, floats, packed W1, packed W2): the last seen
    _shape_plan = None

    def _plan_for(self, shape, wp1, wp2):
        pw, dw = self._pw, self._dw
        p = pw._plan_for(shape, pw._wshape, 1, wp1)
        mid = p[1]
        d = dw._plan_for(mid, dw._wshape, int(dw.group), wp2)
        if not d[4]:
            raise ValueError(f"W2 {dw._wshape} with group={dw.group} is not a depthwise conv over {mid[3]} channels")
        di, df = _kernels.dw_nhwc_step_args(mid, dw._wshape[0], *d[3], dw._act)
        ints, floats = _kernels.pw_dw_nhwc_step_args(p[2], shape[3], di, df)
        return shape, d[1], ints, floats, wp1, wp2

    def compute(self, ctx):
        values, ins = ctx.values, ctx.ins
        X = values[ins[0]]
        wp1, wp2 = self._pw._run_weight(ctx, 1), self._dw._run_weight(ctx, 3)
        B1 = values[ins[2]] if ins[2] else None
        B2 = values[ins[4]] if ins[4] else None
        self._pw._check_bias(B1, self._pw._wshape[0])
        self._dw._check_bias(B2, self._dw._wshape[0])
        plan = self._shape_plan
        if plan is None or plan[0] != X.shape or plan[4] is not wp1 or plan[5] is not wp2:
            plan = self._shape_plan = self._plan_for(X.shape, wp1, wp2)
        Y = ctx.output(0, plan[1], F32)
        _kernels.pw_dw_nhwc_f32(plan[2], plan[3], np.ascontiguousarray(X, F32).reshape(-1), wp1,
                                None if B1 is None else np.ascontiguousarray(B1, F32), wp2,
                                None if B2 is None else np.ascontiguousarray(B2, F32), Y.reshape(-1),
                                ctx.num_threads)

    def c_step(self, ins, outs, nthreads):
        """The compiled run loop's RL_PW_DW_NHWC step, for pre-packed weights and plain contiguous float32 arrays of
        the shapes compute planned for."""
        if "compute" in self.__dict__ or type(self).compute is not NhwcPwDw_1.compute:
            return None
        plan = self._shape_plan
        wp1, wp2 = self._pw.packed(1), self._dw.packed(1)
        if plan is None or wp1 is None or wp2 is None or plan[4] is not wp1 or plan[5] is not wp2 or len(outs) != 1:
            return None
        X, Y = ins[0], outs[0]
        if not _plain_f32(X, Y) or X.shape != plan[0] or Y.shape != plan[1]:
            return None
        cm = plan[1][3]
        B1 = ins[2] if len(ins) > 2 else None
        B2 = ins[4] if len(ins) > 4 else None
        for b in (B1, B2):
            if b is not None and (not _plain_f32(b) or b.shape != (cm,)):
                return None
        return "pw_dw_nhwc", [0, wp1, None if B1 is None else 2, wp2, None if B2 is None else 4, ~0], plan[2], plan[3]
