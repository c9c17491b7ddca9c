"""Tree ensembles, vectorized: the forest as flat node arrays, every row descending every tree at once, level by level
with fancy indexing (only the (row, tree) pairs not yet at a leaf move), then the leaves' weights aggregated tree by
tree in onnxruntime's order and dtype. Shared by TreeEnsembleRegressor / TreeEnsembleClassifier (opsets 1, 3) and
TreeEnsemble (opset 5)."""
from __future__ import annotations

import numpy as np

from onnxep.errors import InvalidArgument

LEQ, LT, GTE, GT, EQ, NEQ, MEMBER, LEAF = range(8)
MODE_NAMES = {"BRANCH_LEQ": LEQ, "BRANCH_LT": LT, "BRANCH_GTE": GTE, "BRANCH_GT": GT, "BRANCH_EQ": EQ,
              "BRANCH_NEQ": NEQ, "LEAF": LEAF}
_CMP = {LEQ: np.less_equal, LT: np.less, GTE: np.greater_equal, GT: np.greater, EQ: np.equal, NEQ: np.not_equal}


class Forest:
    """Flat arrays over every node (leaves included): feature, threshold, mode, true / false child (global index),
    missing_true; roots (one per tree); per leaf its weights as a dense [n_nodes, n_targets] sum, min and max plus a
    'has a weight' mask, and the first weight (the one-target path of onnxruntime reads only that one)."""

    def __init__(self, feature, threshold, mode, true_idx, false_idx, missing_true, roots, w_node, w_target, w_value,
                 n_targets, what, members=None):
        self.what = what
        self.feature = np.asarray(feature, np.int64)
        self.threshold = threshold
        self.mode = np.asarray(mode, np.int8)
        self.true_idx = np.asarray(true_idx, np.int64)
        self.false_idx = np.asarray(false_idx, np.int64)
        self.missing_true = np.asarray(missing_true, bool)
        self.has_missing = bool(self.missing_true.any())
        self.roots = np.asarray(roots, np.int64)
        self.n_trees = len(self.roots)
        self.is_leaf = self.mode == LEAF
        n = len(self.mode)
        inner = ~self.is_leaf
        for nm, child in (("true", self.true_idx), ("false", self.false_idx)):
            c = child[inner]
            if c.size and (c.min() < 0 or c.max() >= n):
                raise InvalidArgument(f"{what}: a {nm} child index is outside the {n} nodes")
            if c.size and (c == np.flatnonzero(inner)).any():
                raise InvalidArgument(f"{what}: a node cannot point to itself ({nm} child)")
        modes = np.unique(self.mode[inner])
        self.modes = [int(m) for m in modes]
        self.max_feature = int(self.feature[inner].max()) if inner.any() else -1
        self.members = members   # MEMBER nodes: (sorted int64 keys node * (U + 1) + rank, sorted unique values)
        k = int(n_targets)
        self.n_targets = k
        dt = threshold.dtype
        w_node = np.asarray(w_node, np.int64)
        w_target = np.asarray(w_target, np.int64)
        w_value = np.asarray(w_value).astype(dt)
        if w_target.size and (w_target.min() < 0 or w_target.max() >= k):
            raise InvalidArgument(f"{what}: a target / class id is outside [0, {k - 1}]")
        keep = self.is_leaf[w_node] if w_node.size else np.zeros(0, bool)  # weights on inner nodes are ignored
        w_node, w_target, w_value = w_node[keep], w_target[keep], w_value[keep]
        self.sum = np.zeros((n, k), dt)
        np.add.at(self.sum, (w_node, w_target), w_value)
        self.has = np.zeros((n, k), bool)
        self.has[w_node, w_target] = True
        self.min = np.full((n, k), np.inf, dt)
        np.minimum.at(self.min, (w_node, w_target), w_value)
        self.max = np.full((n, k), -np.inf, dt)
        np.maximum.at(self.max, (w_node, w_target), w_value)
        first = np.zeros(n, dt)
        seen = np.zeros(n, bool)
        order = np.arange(len(w_node))[::-1]      # the last write per node is the first weight
        first[w_node[order]] = w_value[order]
        seen[w_node] = True
        self.first = first
        missing = self.is_leaf & ~seen
        if missing.any():
            raise InvalidArgument(f"{what}: leaf node {int(np.flatnonzero(missing)[0])} has no weight (target)")
        self.depth_limit = n + 1

    # ------------------------------------------------------------------ descent
    def leaves(self, x):
        """Leaf index [N, n_trees] reached by each row of x [N, F] in each tree."""
        n = x.shape[0]
        if self.max_feature >= x.shape[1]:
            raise InvalidArgument(f"{self.what}: a node reads feature {self.max_feature} but X has {x.shape[1]} "
                                  f"features")
        idx = np.broadcast_to(self.roots, (n, self.n_trees)).copy()
        flat = idx.reshape(-1)
        rows = np.repeat(np.arange(n, dtype=np.int64), self.n_trees)
        act = np.flatnonzero(~self.is_leaf[flat])
        steps = 0
        while act.size:
            steps += 1
            if steps > self.depth_limit:
                raise InvalidArgument(f"{self.what}: the trees have a cycle")
            nd = flat[act]
            v = x[rows[act], self.feature[nd]]
            cond = self._compare(v, nd)
            if self.has_missing:
                cond |= self.missing_true[nd] & np.isnan(v)
            nxt = np.where(cond, self.true_idx[nd], self.false_idx[nd])
            flat[act] = nxt
            act = act[~self.is_leaf[nxt]]
        return idx

    def _compare(self, v, nd):
        thr = self.threshold[nd]
        if len(self.modes) == 1 and self.modes[0] != MEMBER:
            return _CMP[self.modes[0]](v, thr)
        cond = np.zeros(v.shape, bool)
        md = self.mode[nd]
        for m in self.modes:
            sel = md == m
            if not sel.any():
                continue
            if m == MEMBER:
                cond[sel] = self._member(v[sel], nd[sel])
            else:
                cond[sel] = _CMP[m](v[sel], thr[sel])
        return cond

    def _member(self, v, nd):
        keys, uniq = self.members
        if not uniq.size:
            return np.zeros(v.shape, bool)
        r = np.minimum(np.searchsorted(uniq, v), uniq.size - 1)
        exists = uniq[r] == v
        key = nd * (uniq.size + 1) + r
        p = np.minimum(np.searchsorted(keys, key), max(keys.size - 1, 0))
        return exists & (keys[p] == key) if keys.size else np.zeros(v.shape, bool)

    # ------------------------------------------------------------------ aggregation
    def aggregate(self, leaves, agg):
        """(scores [N, K], has [N, K]) over the trees in order: SUM / AVERAGE sum the leaf sums (AVERAGE divides
        later), MIN / MAX take the extreme weight; with one target onnxruntime reads each leaf's first weight."""
        n = leaves.shape[0]
        k = self.n_targets
        dt = self.threshold.dtype
        s = np.zeros((n, k), dt)
        has = np.zeros((n, k), bool)
        if k == 1:
            for t in range(self.n_trees):
                w = self.first[leaves[:, t]][:, None]
                if agg in ("SUM", "AVERAGE"):
                    s += w
                elif agg == "MIN":
                    s = np.where(~has | (w < s), w, s)
                else:
                    s = np.where(~has | (w > s), w, s)
                has[:] = True
            return s, has
        for t in range(self.n_trees):
            lf = leaves[:, t]
            h = self.has[lf]
            if agg in ("SUM", "AVERAGE"):
                s += self.sum[lf]
            elif agg == "MIN":
                w = self.min[lf]
                s = np.where(h & (~has | (w < s)), w, s)
            else:
                w = self.max[lf]
                s = np.where(h & (~has | (w > s)), w, s)
            has |= h
        return s, has


def legacy_forest(kernel, prefix, n_targets, dtype, what):
    """A Forest from the opset-1/3 attributes (nodes_*, and `prefix`_ids / _nodeids / _treeids / _weights with
    prefix 'target' or 'class'); node values and weights read as `dtype` (from *_as_tensor when given)."""
    g = lambda nm: getattr(kernel, nm, None)  # noqa: E731
    tree = np.asarray(g("nodes_treeids") or [], np.int64)
    node = np.asarray(g("nodes_nodeids") or [], np.int64)
    n = tree.size
    cols = {nm: g(nm) or [] for nm in ("nodes_featureids", "nodes_modes", "nodes_truenodeids", "nodes_falsenodeids")}
    vals = g("nodes_values_as_tensor")
    vals = np.asarray(vals).reshape(-1) if vals is not None else np.asarray(g("nodes_values") or [], np.float32)
    if any(len(v) != n for v in cols.values()) or vals.size != n or node.size != n:
        raise InvalidArgument(f"{what}: the nodes_* attributes differ in length")
    try:
        mode = np.asarray([MODE_NAMES[m] for m in cols["nodes_modes"]], np.int8)
    except KeyError as e:
        raise InvalidArgument(f"{what}: unknown node mode {e}") from None
    miss = np.zeros(n, bool)
    mt = g("nodes_missing_value_tracks_true") or []
    miss[:min(n, len(mt))] = np.asarray(mt[:n], np.int64) == 1
    # (tree, node) -> position, through sorted int64 keys
    span = int(max(node.max(initial=0), np.max(cols["nodes_truenodeids"], initial=0),
                   np.max(cols["nodes_falsenodeids"], initial=0))) + 1
    keys = tree * span + node
    order = np.argsort(keys, kind="stable")
    sk = keys[order]
    if n and (np.diff(sk) == 0).any():
        raise InvalidArgument(f"{what}: a (tree, node) id pair appears twice")

    def find(t, nd, nm):
        k = np.asarray(t, np.int64) * span + np.asarray(nd, np.int64)
        p = np.minimum(np.searchsorted(sk, k), max(n - 1, 0))
        if n == 0 or not (sk[p] == k).all():
            raise InvalidArgument(f"{what}: {nm} names a node that does not exist")
        return order[p]

    inner = mode != LEAF
    true_idx = np.zeros(n, np.int64)
    false_idx = np.zeros(n, np.int64)
    if inner.any():
        true_idx[inner] = find(tree[inner], np.asarray(cols["nodes_truenodeids"], np.int64)[inner], "a true child")
        false_idx[inner] = find(tree[inner], np.asarray(cols["nodes_falsenodeids"], np.int64)[inner], "a false child")
    starts = np.flatnonzero(np.concatenate([[True], tree[1:] != tree[:-1]])) if n else np.zeros(0, np.int64)
    wt = np.asarray(g(f"{prefix}_treeids") or [], np.int64)
    wn = np.asarray(g(f"{prefix}_nodeids") or [], np.int64)
    wi = np.asarray(g(f"{prefix}_ids") or [], np.int64)
    wv = g(f"{prefix}_weights_as_tensor")
    wv = np.asarray(wv).reshape(-1) if wv is not None else np.asarray(g(f"{prefix}_weights") or [], np.float32)
    if not (wt.size == wn.size == wi.size == wv.size):
        raise InvalidArgument(f"{what}: the {prefix}_* attributes differ in length")
    w_node = find(wt, wn, f"{prefix}_nodeids") if wt.size else np.zeros(0, np.int64)
    worder = np.lexsort((wn, wt))   # onnxruntime visits the weights sorted by (tree, node)
    return Forest(np.asarray(cols["nodes_featureids"], np.int64), vals.astype(dtype), mode, true_idx, false_idx, miss,
                  starts, w_node[worder], wi[worder], wv.astype(dtype)[worder], n_targets, what)


def base_values(kernel, dtype):
    t = getattr(kernel, "base_values_as_tensor", None)
    if t is not None:
        return np.asarray(t).reshape(-1).astype(dtype)
    return np.asarray(getattr(kernel, "base_values", None) or [], np.float32).astype(dtype)


def threshold_dtype(x_dtype):
    """onnxruntime's ThresholdType: double for double input, else float."""
    return np.dtype(np.float64) if x_dtype == np.float64 else np.dtype(np.float32)


def regression_scores(forest, x, agg, base, what):
    """onnxruntime's regressor aggregation, before the post transform: (scores [N, K], single) where single says K ==
    1 (whose post transform is PROBIT only)."""
    from onnxep.ops.ml._common import as_2d
    x2 = as_2d(x, what)
    dt = forest.threshold.dtype
    xv = x2 if x2.dtype == dt else x2.astype(dt)
    leaves = forest.leaves(xv)
    s, has = forest.aggregate(leaves, agg)
    k = forest.n_targets
    nt = dt.type(forest.n_trees) if forest.n_trees else dt.type(1)
    if k == 1:
        origin = base[0] if base.size == 1 else dt.type(0)
        if agg == "AVERAGE":
            s = s / nt
        return (s + origin).astype(dt), True
    use = base.size == k
    if agg == "SUM":
        s = s + base if use else s
    elif agg == "AVERAGE":
        s = s / nt + base if use else s / nt
    else:
        s = (base if use else dt.type(0)) + np.where(has, s, dt.type(0))
    return s.astype(dt), False
