import numpy as np

from onnxep.ops.training._common import Optimizer


class Adagrad_1(Optimizer):
    """X_new, H_new := one ADAGRAD step for each optimized tensor (ai.onnx.preview.training opset 1):
    r' = R / (1 + T * decay_factor), G' = norm_coefficient * X + G, H_new = H + G'^2,
    X_new = X - r' * G' / (sqrt(H_new) + epsilon). Inputs R, T, X1..Xn, G1..Gn, H1..Hn; outputs X_new1..n, H_new1..n.
    Computed in the tensors' type, the scalar factors in float64."""

    op_type = "Adagrad"
    per_input, per_output = 3, 2
    decay_factor = 0.0
    epsilon = 1e-6
    norm_coefficient = 0.0

    def compute(self, ctx):
        r, t, groups = self.groups(ctx)
        rate = r / (1 + t * self.decay_factor)
        for i, (x, g, h) in enumerate(groups):
            dt = x.dtype.type
            gr = dt(self.norm_coefficient) * x + g
            h_new = h + gr * gr
            x_new = x - dt(rate) * gr / (np.sqrt(h_new) + dt(self.epsilon))
            self.publish(ctx, i, len(groups), (x_new, h_new))
