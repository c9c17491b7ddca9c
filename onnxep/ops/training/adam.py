import numpy as np

from onnxep.ops.training._common import Optimizer


class Adam_1(Optimizer):
    """X_new, V_new, H_new := one Adam step for each optimized tensor (ai.onnx.preview.training opset 1):
    G' = norm_coefficient * X + G, V_new = alpha * V + (1 - alpha) * G', H_new = beta * H + (1 - beta) * G'^2,
    r' = R * sqrt(1 - beta^T) / (1 - alpha^T) when T > 0 else R, X_new = (1 - norm_coefficient_post) *
    (X - r' * V_new / (sqrt(H_new) + epsilon)). Inputs R, T, X1..Xn, G1..Gn, V1..Vn, H1..Hn; outputs X_new1..n,
    V_new1..n, H_new1..n. Computed in the tensors' type, the scalar factors in float64."""

    op_type = "Adam"
    per_input, per_output = 4, 3
    alpha = 0.9
    beta = 0.999
    epsilon = 1e-6
    norm_coefficient = 0.0
    norm_coefficient_post = 0.0

    def compute(self, ctx):
        r, t, groups = self.groups(ctx)
        a, b = float(self.alpha), float(self.beta)
        rate = r * np.sqrt(1 - b ** t) / (1 - a ** t) if t > 0 else r
        for i, (x, g, v, h) in enumerate(groups):
            dt = x.dtype.type
            gr = dt(self.norm_coefficient) * x + g
            v_new = dt(a) * v + dt(1 - a) * gr
            h_new = dt(b) * h + dt(1 - b) * (gr * gr)
            x_new = x - dt(rate) * (v_new / (np.sqrt(h_new) + dt(self.epsilon)))
            x_new *= dt(1 - self.norm_coefficient_post)
            self.publish(ctx, i, len(groups), (x_new, v_new, h_new))
