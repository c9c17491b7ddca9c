from onnxep.ops._base import attr
from onnxep.ops.training._common import Optimizer


class Momentum_1(Optimizer):
    """X_new, V_new := one step of stochastic gradient descent with momentum for each optimized tensor
    (ai.onnx.preview.training opset 1): G' = norm_coefficient * X + G, V_new = alpha * V + beta' * G' (beta' = 1 at
    T == 0, else beta), X_new = X - R * V_new ("standard") or X - R * (G' + alpha * V_new) ("nesterov"). Inputs R, T,
    X1..Xn, G1..Gn, V1..Vn; outputs X_new1..n, V_new1..n. The four attributes are required (no defaults)."""

    op_type = "Momentum"
    per_input, per_output = 3, 2
    required = ("alpha", "beta", "mode", "norm_coefficient")

    @classmethod
    def supports(cls, op):
        return super().supports(op) and attr(op, "mode") in ("standard", "nesterov")

    def compute(self, ctx):
        r, t, groups = self.groups(ctx)
        beta = self.beta if t > 0 else 1.0
        for i, (x, g, v) in enumerate(groups):
            dt = x.dtype.type
            gr = dt(self.norm_coefficient) * x + g
            v_new = dt(self.alpha) * v + dt(beta) * gr
            step = v_new if self.mode == "standard" else gr + dt(self.alpha) * v_new
            self.publish(ctx, i, len(groups), (x - dt(r) * step, v_new))
