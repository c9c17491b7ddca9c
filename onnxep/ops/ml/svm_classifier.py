import numpy as np

from onnxep.errors import InvalidArgument
from onnxep.ops._base import OpKernel
from onnxep.ops.ml._common import LABELS, NUM4, F32, as_2d, check_post, first_max, label_array, put_classified, \
    update_scores
from onnxep.ops.ml._svm import kernel_dot, kernel_params


def _coupling(r, k):
    """Pairwise coupling of libsvm (Wu, Lin, Weng), onnxruntime's multiclass_probability, for all rows at once: r
    [N, k, k] pairwise probabilities -> p [N, k]. Each row stops iterating once it converges, as there."""
    n = r.shape[0]
    q = np.zeros((n, k, k), F32)
    for i in range(k):
        for j in range(k):
            if j != i:
                q[:, i, i] += r[:, j, i] * r[:, j, i]
        for j in range(i):
            q[:, i, j] = q[:, j, i]
        for j in range(i + 1, k):
            q[:, i, j] = -r[:, j, i] * r[:, i, j]
    p = np.full((n, k), F32(1) / F32(k), F32)
    eps = F32(0.005) / F32(k)
    active = np.ones(n, bool)
    for _ in range(100):
        qp = np.einsum("nij,nj->ni", q, p).astype(F32)
        pqp = (p * qp).sum(axis=1, dtype=F32)
        err = np.abs(qp - pqp[:, None]).max(axis=1)
        active &= ~(err < eps)
        if not active.any():
            break
        a = active
        for i in range(k):
            diff = (-qp[a, i] + pqp[a]) / q[a, i, i]
            p[a, i] += diff
            pqp[a] = (pqp[a] + diff * (diff * q[a, i, i] + F32(2) * qp[a, i])) / (F32(1) + diff) / (F32(1) + diff)
            qp[a] = (qp[a] + diff[:, None] * q[a, i, :]) / (F32(1) + diff)[:, None]
            p[a] = p[a] / (F32(1) + diff)[:, None]
    return p


class SVMClassifier_1(OpKernel):
    """libsvm's one-vs-one SVC (vectors_per_class given: votes pick the label; with prob_a/prob_b the scores are the
    pairwise-coupled probabilities) or liblinear's form (no support vectors: X @ coefficients.T + rho[0], the first
    maximum picks the label), float32, with onnxruntime's score layouts and post transforms."""

    domain, op_type, since = "ai.onnx.ml", "SVMClassifier", 1
    type_constraints = {"T1": NUM4, "T2": LABELS}
    coefficients = support_vectors = rho = kernel_params = vectors_per_class = prob_a = prob_b = None
    classlabels_ints = classlabels_strings = None

    @classmethod
    def supports(cls, op):
        a = op.node.attrs
        if not check_post(op) or not a.get("coefficients") or not a.get("rho"):
            return False
        if a.get("kernel_type", "LINEAR") not in ("LINEAR", "POLY", "RBF", "SIGMOID"):
            return False
        k = len(a.get("classlabels_strings") or a.get("classlabels_ints") or ())
        if k < 2 or len(a.get("prob_a") or ()) != len(a.get("prob_b") or ()):
            return False
        vpc = a.get("vectors_per_class") or ()
        if vpc and sum(vpc) > 0 and len(vpc) != k:
            return False
        # two classes by votes, no probabilities, a post transform: onnxruntime's score layout differs from its source
        return not (vpc and sum(vpc) > 0 and k == 2 and not a.get("prob_a") and
                    a.get("post_transform", "NONE") != "NONE")

    def __init__(self, info):
        super().__init__(info)
        self._strings = bool(self.classlabels_strings)
        self._labels = list(self.classlabels_strings) if self._strings else list(self.classlabels_ints)
        self._k = len(self._labels)
        self._vpc = [int(v) for v in (self.vectors_per_class or [])]
        self._nsv = sum(self._vpc)
        self._svc = self._nsv > 0
        self._coef = np.asarray(self.coefficients, F32)
        self._sv = np.asarray(self.support_vectors or [], F32)
        self._rho = np.asarray(self.rho, F32)
        self._pa = np.asarray(self.prob_a or [], F32)
        self._pb = np.asarray(self.prob_b or [], F32)
        self._g, self._c0, self._deg = kernel_params(self)
        self._all_pos = bool((self._coef >= 0).all())
        self._start = np.concatenate([[0], np.cumsum(self._vpc)]).astype(int) if self._vpc else None

    def compute(self, ctx):
        x = ctx.input(0)
        what = f"SVMClassifier node {self.name!r}"
        x2 = as_2d(x, what)
        n, f = x2.shape
        k = self._k
        npairs = k * (k - 1) // 2
        have_proba = self._pa.size > 0
        post = self.post_transform
        if not self._svc:
            if self._coef.size != k * f:
                raise InvalidArgument(f"{what}: {self._coef.size} coefficients do not make {k} classes of {f} "
                                      f"features (X shape {x.shape})")
            s = (x2.astype(F32, copy=False) @ self._coef.reshape(k, f).T + self._rho[0]).astype(F32)
            best = first_max(s)
            maxw = s[np.arange(n), best]
            if npairs == 1 and not have_proba:
                pos = (maxw >= 0.5) if self._all_pos else (maxw > 0)
                cls_idx = np.where(pos, 1, best)
            else:
                cls_idx = best
            scores = update_scores(s, post, -1)
        else:
            nsv = self._nsv
            if self._sv.size != nsv * f:
                raise InvalidArgument(f"{what}: {self._sv.size} support vector values do not make {nsv} vectors of "
                                      f"{f} features (X shape {x.shape})")
            if self._coef.size < (k - 1) * nsv or self._rho.size < npairs or (have_proba and self._pa.size < npairs):
                raise InvalidArgument(f"{what}: coefficients / rho / prob_a do not match {k} classes and {nsv} "
                                      f"support vectors")
            kern = kernel_dot(self.kernel_type, x2, self._sv.reshape(nsv, f), self._g, self._c0, self._deg)
            coef = self._coef[:(k - 1) * nsv].reshape(k - 1, nsv).astype(np.float64)
            kd = kern.astype(np.float64)
            st = self._start
            pair = np.empty((n, npairs), F32)
            votes = np.zeros((n, k), np.int64)
            idx = 0
            for i in range(k - 1):
                si = slice(st[i], st[i + 1])
                for j in range(i + 1, k):
                    sj = slice(st[j], st[j + 1])
                    v = kd[:, si] @ coef[j - 1, si] + kd[:, sj] @ coef[i, sj] + np.float64(self._rho[idx])
                    pair[:, idx] = v
                    win = v > 0
                    votes[:, i] += win
                    votes[:, j] += ~win
                    idx += 1
            cls_idx = first_max(votes)
            if have_proba:
                r = np.zeros((n, k, k), F32)
                idx = 0
                for i in range(k - 1):
                    for j in range(i + 1, k):
                        v1 = F32(1) - _logistic1(pair[:, idx] * self._pa[idx] + self._pb[idx])
                        v2 = np.minimum(np.maximum(v1, F32(1e-7)), F32(1) - F32(1e-7))
                        r[:, i, j] = v2
                        r[:, j, i] = F32(1) - v2
                        idx += 1
                scores = update_scores(_coupling(r, k), post, -1)
            elif k <= 2:
                scores = update_scores(pair, post, 2 if post == "NONE" else 0)
            else:
                scores = update_scores(pair, post, -1)
        lab = label_array(self._labels, cls_idx, self._strings)
        put_classified(ctx, n, lab, scores, self._strings, what)


def _logistic1(v):
    from onnxep.ops.ml._common import logistic
    return logistic(v)
