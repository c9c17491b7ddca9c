from onnxep.ops._base import OpKernel, static_dtype
from onnxep.ops.ml._common import NUM4, F32, check_post, output, probit, update_scores
from onnxep.ops.ml._tree import base_values, legacy_forest, regression_scores, threshold_dtype


class TreeEnsembleRegressor_1(OpKernel):
    """Y [N, n_targets] float32: the targets' leaf weights of every tree, aggregated (SUM, AVERAGE, MIN, MAX) plus
    base_values, then the post transform as onnxruntime applies it (one target: PROBIT only). Nodes compare in float32
    (float64 for double X, with the *_as_tensor attributes of opset 3). Opsets 1 and 3 (deprecated at 5)."""

    domain, op_type, since = "ai.onnx.ml", "TreeEnsembleRegressor", 1
    until = 5
    type_constraints = {"T": NUM4}

    @classmethod
    def supports(cls, op):
        a = op.node.attrs
        return check_post(op) and a.get("aggregate_function", "SUM") in ("SUM", "AVERAGE", "MIN", "MAX") and \
            int(a.get("n_targets") or 0) > 0

    def __init__(self, info):
        super().__init__(info)
        self._what = f"{self.op_type} node {self.name!r}"
        dt = threshold_dtype(static_dtype(info, 0))
        self._forest = legacy_forest(self, "target", int(self.n_targets), dt, self._what)
        self._base = base_values(self, dt)

    def compute(self, ctx):
        x = ctx.input(0)
        s, single = regression_scores(self._forest, x, self.aggregate_function, self._base, self._what)
        post = self.post_transform
        if single:
            s = probit(s) if post == "PROBIT" else s
        elif post != "NONE":
            s = update_scores(s.astype(F32), post)
        y = output(ctx, 0, s.shape, F32, self._what)
        y[...] = s


class TreeEnsembleRegressor_3(TreeEnsembleRegressor_1):
    since = 3
