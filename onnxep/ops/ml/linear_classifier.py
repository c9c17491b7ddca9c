import numpy as np

from onnxep.errors import InvalidArgument
from onnxep.ops._base import OpKernel
from onnxep.ops.ml._common import LABELS, NUM4, F32, check_post, first_max, label_array, put_classified, \
    update_scores


class LinearClassifier_1(OpKernel):
    """scores := X @ coefficients.reshape(K, F).T + intercepts (K = len(intercepts)), float32 as onnxruntime.
    Label: K == 1 -> score > 0 ? the second label : the first (or 1/0, '1'/'0' without two labels); else the label
    of the first maximum. Scores: K == 1 with two labels -> [1 - s, s] (no transform, onnxruntime's expansion); else
    the post transform (K == 1: PROBIT only)."""

    domain, op_type, since = "ai.onnx.ml", "LinearClassifier", 1
    type_constraints = {"T1": NUM4, "T2": LABELS}
    classlabels_ints = classlabels_strings = intercepts = coefficients = None

    @classmethod
    def supports(cls, op):
        a = op.node.attrs
        if not check_post(op) or not a.get("coefficients"):
            return False
        labels = a.get("classlabels_strings") or a.get("classlabels_ints") or ()
        k = len(a.get("intercepts") or ())
        # two labels over one score with PROBIT: onnxruntime leaves half the output unwritten
        return k >= 1 and not (k == 1 and len(labels) == 2 and a.get("post_transform") == "PROBIT")

    def __init__(self, info):
        super().__init__(info)
        self._strings = bool(self.classlabels_strings)
        self._labels = list(self.classlabels_strings) if self._strings else list(self.classlabels_ints or [])
        self._icp = np.asarray(self.intercepts, F32)
        self._k = len(self._icp)
        self._coef = np.asarray(self.coefficients, F32)

    def compute(self, ctx):
        x = ctx.input(0)
        what = f"LinearClassifier node {self.name!r}"
        if x.ndim == 0:
            raise InvalidArgument(f"{what}: X must have at least one dimension")
        x2 = x.reshape(1, -1) if x.ndim == 1 else x.reshape(x.shape[0], -1)
        n, f = x2.shape
        k = self._k
        if self._coef.size != k * f:
            raise InvalidArgument(f"{what}: {self._coef.size} coefficients do not make {k} classes of {f} "
                                  f"features (X shape {x.shape})")
        s = x2.astype(F32, copy=False) @ self._coef.reshape(k, f).T + self._icp
        s = s.astype(F32, copy=False)
        two = len(self._labels) == 2
        if k == 1:
            pos = s[:, 0] > 0
            if two:
                lab = label_array(self._labels, pos.astype(np.intp), self._strings)
            elif self._strings:
                lab = np.where(pos, "1", "0").astype(object)
            else:
                lab = pos.astype(np.int64)
        else:
            if len(self._labels) < k:
                raise InvalidArgument(f"{what}: {k} classes but {len(self._labels)} class labels")
            lab = label_array(self._labels, first_max(s), self._strings)
        add = 1 if (k == 1 and two) else -1
        if self.post_transform != "NONE" or add >= 0:
            s = update_scores(s, self.post_transform, add)
        put_classified(ctx, n, lab, s, self._strings, what)
