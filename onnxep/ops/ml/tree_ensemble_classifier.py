import numpy as np

from onnxep.ops._base import OpKernel, static_dtype
from onnxep.ops.ml._common import LABELS, NUM4, F32, as_2d, check_post, label_array, logistic, probit, put_classified, \
    transform
from onnxep.ops.ml._tree import base_values, legacy_forest, threshold_dtype


class TreeEnsembleClassifier_1(OpKernel):
    """Label and scores [N, classes] float32 from the summed class weights of every tree, with onnxruntime's rules:
    more than two classes -> base_values added, the label of the first maximum among the classes that got a weight,
    the post transform over the row; two classes -> onnxruntime's binary cases (weights for one class only: that
    score against 0.5 or 0 picks the label and expands to two columns, [1 - s, s], [-s, s] or the two logistics).
    Opsets 1 and 3 (deprecated at 5)."""

    domain, op_type, since = "ai.onnx.ml", "TreeEnsembleClassifier", 1
    until = 5
    type_constraints = {"T1": NUM4, "T2": LABELS}
    classlabels_strings = classlabels_int64s = None

    @classmethod
    def supports(cls, op):
        a = op.node.attrs
        k = len(a.get("classlabels_strings") or a.get("classlabels_int64s") or ())
        if not check_post(op) or k < 2:
            return False
        # two classes, base_values, weights that never name class 0: onnxruntime 1.32 departs from its own
        # aggregator's source here (class 0's score ignores base_values); left to the reference backend
        base = a.get("base_values") or a.get("base_values_as_tensor")
        return not (k == 2 and base is not None and len(np.asarray(base).reshape(-1)) and
                    0 not in set(a.get("class_ids") or ()))

    def __init__(self, info):
        super().__init__(info)
        self._what = f"{self.op_type} node {self.name!r}"
        self._strings = bool(self.classlabels_strings)
        self._labels = list(self.classlabels_strings) if self._strings else [int(v) for v in self.classlabels_int64s]
        k = len(self._labels)
        dt = threshold_dtype(static_dtype(info, 0))
        self._forest = legacy_forest(self, "class", k, dt, self._what)
        self._base = base_values(self, dt)
        ids = np.asarray(self.class_ids or [], np.int64)
        w = getattr(self, "class_weights_as_tensor", None)
        w = np.asarray(w).reshape(-1) if w is not None else np.asarray(self.class_weights or [], np.float32)
        self._binary = k == 2 and np.unique(ids).size == 1
        self._all_pos = bool((w >= 0).all())

    def compute(self, ctx):
        x = ctx.input(0)
        what = self._what
        fo = self._forest
        x2 = as_2d(x, what)
        dt = fo.threshold.dtype
        leaves = fo.leaves(x2 if x2.dtype == dt else x2.astype(dt))
        s, has = fo.aggregate(leaves, "SUM")
        k = fo.n_targets
        n = s.shape[0]
        base = self._base
        post = self.post_transform
        if k > 2:
            nb = min(base.size, k)
            if nb:
                s[:, :nb] = np.where(has[:, :nb], s[:, :nb] + base[:nb], base[:nb])
                has[:, :nb] = True
            masked = np.where(has, s, -np.inf)
            idx = np.argmax(masked, axis=1)
            lab = label_array(self._labels, idx, self._strings)
            z = transform(s.astype(F32), post)
        else:
            s0, s1 = s[:, 0].copy(), s[:, 1].copy()
            h0, h1 = has[:, 0].copy(), has[:, 1].copy()
            single = np.zeros(n, bool)      # the row's scores shrank to one value
            wa = -1
            if base.size == 2:
                p1 = base[1] + s0
                s1 = np.where(h1, p1, s1 + base[1])
                s0 = np.where(h1, -p1, s0 + base[0])
            elif base.size == 1:
                s0 = s0 + base[0]
                single = ~h1
            elif base.size == 0:
                wa = 3
                single = ~h1
            # _set_score_binary: the positive weight
            pos_w = np.where(~single & h1, s1, np.where(h0, s0, 0))
            if self._binary:
                if self._all_pos:
                    pos = pos_w > 0.5
                    wa = 0
                else:
                    pos = pos_w > 0
                    wa = 2
                lab = label_array(self._labels, pos.astype(np.intp), self._strings)
            else:
                pos = pos_w > 0
                lab = label_array(self._labels, pos.astype(np.intp), True) if self._strings else pos.astype(np.int64)
            z = np.zeros((n, 2), F32)
            pair = ~single
            if pair.any():
                z[pair] = transform(np.stack([s0[pair], s1[pair]], axis=1).astype(F32), post)
            if single.any():
                v = s0[single].astype(F32)
                if post == "PROBIT":
                    z[single, 0] = probit(v)
                elif wa in (0, 1):
                    z[single, 0], z[single, 1] = F32(1) - v, v
                elif wa in (2, 3):
                    if post == "LOGISTIC":
                        z[single, 0], z[single, 1] = logistic(-v), logistic(v)
                    else:
                        z[single, 0], z[single, 1] = -v, v
                else:
                    z[single, 0] = v
        put_classified(ctx, n, lab, z, self._strings, what)


class TreeEnsembleClassifier_3(TreeEnsembleClassifier_1):
    since = 3
