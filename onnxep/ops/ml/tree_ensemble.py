import numpy as np

from onnxep.errors import InvalidArgument
from onnxep.ops._base import OpKernel
from onnxep.ops.ml._common import TRANSFORM_CODES, output, probit, update_scores
from onnxep.ops.ml._tree import LEAF, MEMBER, Forest

_AGG = {0: "AVERAGE", 1: "SUM", 2: "MIN", 3: "MAX"}


def _arr(v):
    return None if v is None else np.asarray(v).reshape(-1)


class TreeEnsemble_5(OpKernel):
    """Y [N, n_targets] in X's type: every tree descended (modes LEQ, LT, GTE, GT, EQ, NEQ and set membership, NaN
    to the true branch where nodes_missing_value_tracks_true), the leaves' weights aggregated (0 AVERAGE, 1 SUM,
    2 MIN, 3 MAX) and post-transformed (0 NONE, 1 SOFTMAX, 2 LOGISTIC, 3 SOFTMAX_ZERO, 4 PROBIT) as onnxruntime
    does (one target: PROBIT only). float16 computes in float32."""

    domain, op_type, since = "ai.onnx.ml", "TreeEnsemble", 5
    type_constraints = {"T": ("float32", "float64", "float16")}

    @classmethod
    def supports(cls, op):
        a = op.node.attrs
        return int(a.get("aggregate_function", 1)) in _AGG and int(a.get("post_transform", 0)) in TRANSFORM_CODES

    def __init__(self, info):
        super().__init__(info)
        what = self._what = f"TreeEnsemble node {self.name!r}"
        splits = _arr(self.nodes_splits)
        self._dt = dt = np.dtype(np.float64) if splits.dtype == np.float64 else np.dtype(np.float32)
        feat = np.asarray(self.nodes_featureids, np.int64)
        modes = _arr(self.nodes_modes).astype(np.int64)
        tn = np.asarray(self.nodes_truenodeids, np.int64)
        fn = np.asarray(self.nodes_falsenodeids, np.int64)
        tl = np.asarray(getattr(self, "nodes_trueleafs", None) or [0] * len(tn), np.int64)
        fl = np.asarray(getattr(self, "nodes_falseleafs", None) or [0] * len(fn), np.int64)
        n = feat.size
        if not (splits.size == modes.size == tn.size == fn.size == tl.size == fl.size == n):
            raise InvalidArgument(f"{what}: the nodes_* attributes differ in length")
        if modes.size and (modes.min() < 0 or modes.max() > MEMBER):
            raise InvalidArgument(f"{what}: node modes must be in [0, 6], got {sorted(set(modes.tolist()))}")
        lt = np.asarray(self.leaf_targetids, np.int64)
        lw = _arr(self.leaf_weights).astype(dt)
        if lt.size != lw.size:
            raise InvalidArgument(f"{what}: leaf_targetids and leaf_weights differ in length")
        nl = lt.size
        for nm, child, leaf in (("true", tn, tl), ("false", fn, fl)):
            lim = np.where(leaf == 1, nl, n)
            if n and ((child < 0) | (child >= lim)).any():
                raise InvalidArgument(f"{what}: a {nm} child index is out of range")
        mt = getattr(self, "nodes_missing_value_tracks_true", None) or []
        miss = np.zeros(n + nl, bool)
        miss[:min(n, len(mt))] = np.asarray(mt[:n], np.int64) == 1
        members = None
        if (modes == MEMBER).any():
            mv = _arr(self.membership_values)
            if mv is None:
                raise InvalidArgument(f"{what}: set membership nodes need membership_values")
            mv = mv.astype(dt)
            cut = np.isnan(mv)
            set_id = np.cumsum(cut)[~cut]
            vals = mv[~cut]
            mem_nodes = np.flatnonzero(modes == MEMBER)
            if set_id.size and set_id.max() >= mem_nodes.size:
                raise InvalidArgument(f"{what}: membership_values has more sets than set-membership nodes")
            uniq = np.unique(vals)
            rank = np.searchsorted(uniq, vals)
            keys = np.unique(mem_nodes[set_id] * (uniq.size + 1) + rank)
            members = (keys, uniq)
        # nodes 0..n-1, then the leaves n..n+nl-1
        mode_all = np.concatenate([modes, np.full(nl, LEAF)]).astype(np.int8)
        feat_all = np.concatenate([feat, np.zeros(nl, np.int64)])
        thr = np.concatenate([splits.astype(dt), np.zeros(nl, dt)])
        t_all = np.concatenate([np.where(tl == 1, tn + n, tn), np.zeros(nl, np.int64)])
        f_all = np.concatenate([np.where(fl == 1, fn + n, fn), np.zeros(nl, np.int64)])
        roots = np.asarray(self.tree_roots, np.int64)
        if roots.size and (roots.min() < 0 or roots.max() >= n):
            raise InvalidArgument(f"{what}: tree_roots must index nodes [0, {n - 1}]")
        k = int(self.n_targets)
        self._forest = Forest(feat_all, thr, mode_all, t_all, f_all, miss, roots, np.arange(nl) + n, lt, lw, k, what,
                              members)

    def compute(self, ctx):
        x = ctx.input(0)
        what = self._what
        x2 = x.reshape(1, -1) if x.ndim == 1 else x
        if x2.ndim != 2:
            raise InvalidArgument(f"{what}: X must be 1-D or 2-D, got shape {x.shape}")
        dt = self._dt
        fo = self._forest
        leaves = fo.leaves(x2 if x2.dtype == dt else x2.astype(dt))
        agg = _AGG[int(self.aggregate_function)]
        s, has = fo.aggregate(leaves, agg)
        nt = dt.type(max(fo.n_trees, 1))
        if agg == "AVERAGE":
            s = s / nt
        elif agg in ("MIN", "MAX"):
            s = np.where(has, s, dt.type(0))
        post = TRANSFORM_CODES[int(self.post_transform)]
        if fo.n_targets == 1:
            s = probit(s) if post == "PROBIT" else s
        elif post != "NONE":
            s = update_scores(s.astype(np.float32), post)
        y = output(ctx, 0, s.shape, x.dtype, what)
        y[...] = s
