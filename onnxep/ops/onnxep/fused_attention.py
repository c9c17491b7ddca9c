"""FusedAttention (domain com.onnxep): Y = Transpose(Softmax(alpha * Transpose(Q, perm_q) @ Transpose(K, perm_k)
[+ Mask]) @ Transpose(V, perm_v), perm_y), the softmax along the last axis, Mask (optional) broadcast to the scores
-- what graph/passes/fuse_attention.py makes of StridedMatMul -> MaskedSoftmax | Softmax -> StridedMatMul, i.e. of an
exported attention block's per-head products once their transposes and scale are folded. One native call
(_kernels.attention_f32): per head (batch item of the products) and block of query rows, both products, the mask and
the softmax run back to back on a scores block in the thread's workspace; no scores or probabilities tensor is
written. The operands are read in place through their permuted strides, as StridedMatMul reads them. Written by
passes, never by users. Attributes: perm_q, perm_k, perm_v, perm_y (ints; absent: no transpose), alpha (float,
default 1). float32, same rank >= 2 for Q, K and V.

In a bf16 session (onnxep.compute_precision=bf16) both products take bf16 operands with fp32 accumulation and an
fp32 softmax where ops/_bf16.py bf16_attention says it pays (the kernel's ATP_BF16 parameter).

When the second product broadcasts batch dims the scores do not have (V with more heads than the scores), the
scores are materialized and the two products and the softmax run one after another (sgemm_batched_f32).

What graph/passes/fuse_exporter_attention.py writes adds (all optional):
  mask_kinds (ints), mask_fills (floats): inputs 3, 4, ... are masks applied to the scores in order, kind 0 adding a
      float mask, kind 1 a Where(cond, scores, fill) with a bool cond; they are combined into one additive mask
      (m = m + X | where(cond, m, fill)) that the native call adds per row (scores + fill rounds to fill for a finite
      fill such as float32's lowest, and stays -inf for -inf); a fill above -1e30 (where that would not hold) runs
      the numpy path.
  nan_zero (int): NaN probabilities -> 0 (the exporters' guard for fully masked rows): NaN output elements -> 0.
  k_view_at / v_view_at (input index), k_view_allowzero / v_view_allowzero (ints): K (V) is first
      Reshape(Transpose(Reshape(x, input[at]), (0, 2, 1)), input[at + 1]) (the dynamo exporter's transpose through a
      3-D view): when the views merge and split back the leading dims, a transpose of the last two dims composed
      into perm_k (perm_v); else computed with numpy.
  k_expand / v_expand (int axis), k_expand_at / v_expand_at (input index), k_expand_allowzero / v_expand_allowzero:
      x is Reshape(Expand(Unsqueeze(input, axis), input[at]), input[at + 1]), the grouped-query repeat of the kv heads;
      when it repeats dim axis - 1 (the shapes are checked per call), the shared head is read in place (the items'
      offsets point into the unexpanded tensor), else it is expanded with numpy first.
Whatever the native call cannot take (a mask that broadcasts the scores up) runs the graph's ops with numpy.
Native change that would remove the Python-side work: mask kinds / causal flag and a nan_zero flag in
attention_f32 itself (the per-call mask combination and the output NaN scan would go)."""
import numpy as np

from onnxep import _kernels
from onnxep.graph.ir import WeakIntern
from onnxep.ops import _bf16, _grow
from onnxep.ops._base import F32, OpKernel, f32_shape
from onnxep.ops._c_steps import plain
from onnxep.ops._memo import ShapeMemo
from onnxep.ops.onnxep.masked_softmax import mask_rows
from onnxep.ops.onnxep.strided_mat_mul import _c_strides, strided_plan

DOMAIN = "com.onnxep"


def _onnx_reshape(shape, target, allowzero=0):
    """Reshape's output shape: 0 copies the input dim (allowzero 0), one -1 is inferred."""
    out = [int(shape[i]) if int(t) == 0 and not allowzero and i < len(shape) else int(t)
           for i, t in enumerate(target)]
    if out.count(-1) == 1:
        known = int(np.prod([d for d in out if d != -1], dtype=np.int64))
        total = int(np.prod(shape, dtype=np.int64))
        out[out.index(-1)] = total // known if known else 0
    return tuple(out)


def _transpose(x, perm):
    return x if perm is None else np.transpose(x, [int(i) for i in perm])


#: the attributes a call's plans depend on besides its shapes (FusedAttention_1._caches)
_PLAN_ATTRS = ("perm_q", "perm_k", "perm_v", "perm_y", "alpha", "mask_kinds", "mask_fills", "nan_zero", "k_expand",
               "k_expand_at", "k_expand_allowzero", "v_expand", "v_expand_at", "v_expand_allowzero", "k_view_at",
               "k_view_allowzero", "v_view_at", "v_view_allowzero")


class _Caches:
    """Per-shape plans shared by the FusedAttention nodes of equal attributes (weakly registered: they go with the
    last such node): a decoder's layers all read keys of one shape, so a step's new shape is planned once, not once
    per layer (SmolLM-135M fed its growing past: 30 plans a step)."""
    __slots__ = ("plans", "natives", "views", "expands", "calls", "lengths", "__weakref__")

    def __init__(self):
        self.plans, self.natives, self.views, self.expands = ShapeMemo(), ShapeMemo(), ShapeMemo(), ShapeMemo()
        self.calls = ShapeMemo()     # _call_key -> (the fused native prep, the mask inputs' indices)
        # the inputs' ranks -> (K's key-count dim, _length_key, prep, mask indices) of the last call whose prep
        # depends on its key count only through that count (_by_length)
        self.lengths = ShapeMemo()


_SHARED = WeakIntern()


def _attr_key(v):
    if isinstance(v, (list, tuple, np.ndarray)):
        return tuple(_attr_key(x) for x in v)
    if isinstance(v, (np.integer, np.floating)):
        return v.item()
    return v


class FusedAttention_1(OpKernel):
    domain, op_type, since = DOMAIN, "FusedAttention", 1
    type_constraints = {}        # no onnx schema for this domain: supports() checks the types
    strided_inputs = (1, 2)      # K and V: a key / value cache with spare rows read in place (_strided)
    perm_q = None
    perm_k = None
    perm_v = None
    perm_y = None
    alpha = 1.0
    mask_kinds = None
    mask_fills = None
    nan_zero = 0
    k_expand = None
    k_expand_at = None
    k_expand_allowzero = 0
    v_expand = None
    v_expand_at = None
    v_expand_allowzero = 0
    k_view_at = None
    k_view_allowzero = None
    v_view_at = None
    v_view_allowzero = None

    @classmethod
    def supports(cls, op):
        ins = op.node.inputs
        a = op.node.attrs
        kinds = [int(i) for i in a.get("mask_kinds") or ()]
        n_exp = 2 * sum(a.get(k) is not None for k in ("k_expand", "v_expand", "k_view_at", "v_view_at"))
        n_masks = len(kinds) if kinds else len(ins) - 3 - n_exp
        if kinds and len(a.get("mask_fills") or ()) != len(kinds):
            return False
        if len(ins) != 3 + n_masks + n_exp or not all(ins) or len(op.node.outputs) != 1:
            return False
        if not kinds and n_masks > 1:
            return False
        shapes = [f32_shape(op.input_types[i]) for i in range(3)]
        if any(s is None for s in shapes) or len({len(s) for s in shapes}) != 1 or len(shapes[0]) < 2:
            return False
        rank = len(shapes[0])
        for i in range(n_masks):
            vt = op.input_types[3 + i]
            want = "tensor(bool)" if kinds and kinds[i] == 1 else "tensor(float)"
            if vt is None or vt.kind != "tensor" or vt.type_str != want or vt.shape is None or len(vt.shape) > rank:
                return False
        for key, at_key in (("k_expand", "k_expand_at"), ("v_expand", "v_expand_at"), ("k_view_at", "k_view_at"),
                            ("v_view_at", "v_view_at")):
            if a.get(key) is not None:
                at = a.get(at_key)
                if at is None or not (3 + n_masks <= int(at) < len(ins) - 1):
                    return False
                for j in (int(at), int(at) + 1):
                    vt = op.input_types[j]
                    if vt is None or vt.kind != "tensor" or vt.type_str != "tensor(int64)":
                        return False
        for name in ("perm_q", "perm_k", "perm_v", "perm_y"):
            p = a.get(name)
            if p is not None and sorted(int(i) for i in p) != list(range(rank)):
                return False
        return True

    def _caches(self) -> _Caches:
        c = self.__dict__.get("_shared_caches")
        if c is None:
            key = tuple(_attr_key(getattr(self, a)) for a in _PLAN_ATTRS)
            try:
                c = _SHARED.file(key, _Caches())
            except TypeError:        # (an attribute value that does not hash: plans of its own)
                c = _Caches()
            self._shared_caches = c
        return c

    def _plan(self, q_shape, k_shape, v_shape, m_shape, k_rep=None, v_rep=None, perm_k="attr", perm_v="attr",
              k_str=None, v_str=None):
        """Per input shapes: (fused, the first product's StridedPlan, the second's, mask rows), cached; None when
        the mask does not broadcast to the scores (numpy path). k_rep / v_rep: (dim, repeat) of a grouped-query
        operand given unexpanded; k_str / v_str: the element strides of a strided K / V (None: C-contiguous)."""
        perm_k = _key(self.perm_k) if perm_k == "attr" else perm_k
        perm_v = _key(self.perm_v) if perm_v == "attr" else perm_v
        cache = self._caches().plans
        key = (q_shape, k_shape, v_shape, m_shape, k_rep, v_rep, perm_k, perm_v, k_str, v_str)
        if key in cache:
            return cache[key]
        if not (len(q_shape) == len(k_shape) == len(v_shape) >= 2):
            raise ValueError(f"FusedAttention: Q {q_shape}, K {k_shape} and V {v_shape} must have the same rank >= 2")
        kv_shape = _virtual(k_shape, k_rep)
        vv_shape = _virtual(v_shape, v_rep)
        p1 = strided_plan(q_shape, kv_shape, self.perm_q, perm_k, None, "FusedAttention",
                          k_str if k_rep is None else None)
        s_shape = p1.y_shape
        p2 = strided_plan(s_shape, vv_shape, None, perm_v, self.perm_y, "FusedAttention",
                          v_str if v_rep is None else None)
        if k_rep is not None:
            p1 = _rep_plan(p1, "b", k_shape, k_rep, perm_k, s_shape[:-2], k_str)
        if v_rep is not None:
            p2 = _rep_plan(p2, "b", v_shape, v_rep, perm_v, p2_batch(s_shape, vv_shape, perm_v), v_str)
        rows = None
        plan = None
        if m_shape is not None:
            rows = mask_rows(s_shape, m_shape)
        if m_shape is None or rows is not None:
            # fused: the second product's items are the scores' items, in the same order (scores contiguous)
            plan = (np.array_equal(p2.a_off, p1.c_off), p1, p2, rows)
        cache.keep(key, plan)
        return plan

    def _mask_ops(self, get):
        """[(kind, mask, fill, input index)] of one call, in the order they apply (get(i): input i or None)."""
        if self.mask_kinds is None:
            legacy = all(x is None for x in (self.k_expand, self.v_expand, self.k_view_at, self.v_view_at))
            m = get(3) if legacy else None
            return [] if m is None else [(0, m, 0.0, 3)]
        kinds = [int(i) for i in self.mask_kinds]
        fills = [float(x) for x in self.mask_fills]
        return [(kinds[i], get(3 + i), fills[i], 3 + i) for i in range(len(kinds))]

    @staticmethod
    def _combine(ops):
        """The masks combined into one additive float32 mask (None without masks)."""
        if not ops:
            return None
        if len(ops) == 1 and ops[0][0] == 0:
            return ops[0][1]
        m = None
        with np.errstate(over="ignore", invalid="ignore"):
            for kind, x, fill, _ in ops:
                if kind == 0:
                    m = x if m is None else m + x
                else:
                    m = np.where(x, F32(0.0) if m is None else m, F32(fill))
        return np.ascontiguousarray(m, dtype=F32)

    def _native(self, q, k, v, k_rep, v_rep, perm_k, perm_v, ops, k_str=None, v_str=None):
        """How the native kernels run this call, cached per shapes: None (the numpy path), ("fused", y shape, keys,
        offsets, params, fparams) for attention_masked_f32 (the masks combined in the kernel), or ("unfused", p1, p2)
        (V broadcasts batch dims the scores do not have: scores materialized, see the module docstring). k_str /
        v_str: element strides of a K / V read in place though not C-contiguous (_strided)."""
        pk, pv = _key(perm_k), _key(perm_v)
        bf16 = _bf16.use_bf16(self)
        key = (q.shape, k.shape, v.shape, k_rep, v_rep, pk, pv, k_str, v_str,
               tuple((kind, x.shape, x.dtype.char, fill) for kind, x, fill, _ in ops), bf16 and _bf16.attention_key())
        cache = self._caches().natives
        if key in cache:
            return cache[key]
        prep = None
        ok = (q.ndim == k.ndim == v.ndim >= 2 and len(ops) <= _kernels.ATTN_MAX_MASKS
              and all((kind == 0 and x.dtype == F32) or (kind == 1 and x.dtype == np.bool_ and fill <= -1e30)
                      for kind, x, fill, _ in ops))
        plan = None
        if ok:
            try:
                plan = self._plan(q.shape, k.shape, v.shape, None, k_rep, v_rep, pk, pv, k_str, v_str)
            except ValueError:
                plan = None
        if plan is not None:
            fused, p1, p2, _ = plan
            rows = [mask_rows(p1.y_shape, x.shape) for _, x, _, _ in ops]
            if fused and all(r is not None for r in rows):
                q_off, k_off, v_off, y_off = p1.a_off, p1.b_off, p2.b_off, p2.c_off
                M, rsq, rsy = p1.M, p1.rsa, p2.rsc
                g = _shared_kv_rows(q_off, k_off, v_off, y_off) if M == 1 else None
                if g is not None:       # one item per g query heads that read one K and V (one row each)
                    M, rsq, rsy = g
                    q_off, k_off, v_off, y_off = q_off[::M], k_off[::M], v_off[::M], y_off[::M]
                offs = np.concatenate([q_off, k_off, v_off, y_off] + [r[0] for r in rows]).astype(np.int64)
                params = [len(q_off), M, p1.N, p1.K, p2.N, rsq, p1.csa, p1.rsb, p1.csb, p2.rsb, p2.csb,
                          rsy, p2.csc, int(self.nan_zero), len(ops),
                          int(bf16 and _bf16.bf16_attention(M, p1.N, p1.K, p2.N))]
                for (kind, _, _, _), r in zip(ops, rows):
                    params += [kind, r[1]]
                fparams = [float(self.alpha)] + [fill for _, _, fill, _ in ops]
                # (the scores' shape last: what a call of another key count reads its mask rows by, _by_length)
                prep = ("fused", tuple(p2.y_shape), p1.N, np.ascontiguousarray(offs),
                        np.array(params, np.int64), np.array(fparams, F32), tuple(p1.y_shape))
            elif not fused and (not ops or self._combined_rows(p1.y_shape, ops) is not None):
                prep = ("unfused", p1, p2)
        cache.keep(key, prep)
        return prep

    @staticmethod
    def _combined_rows(s_shape, ops):
        shape = tuple(np.broadcast_shapes(*(x.shape for _, x, _, _ in ops)))
        return mask_rows(s_shape, shape)

    def _operand(self, get, i, axis, at, allowzero, view_at, view_az, perm):
        """(tensor, rep, perm) of K or V: the input itself, or the unexpanded kv and (dim, repeat) of a grouped-query
        repeat, or the expanded copy when the repeat is not one of a head dim; a 3-D view transpose (view_at)
        composed into the perm when it swaps the last two dims, else applied with numpy. The shape decisions are
        cached per (shapes, shape inputs)."""
        x, rep = self._expand(get, i, axis, at, allowzero)
        if view_at is None:
            return x, rep, perm
        s1 = get(int(view_at))
        s2 = get(int(view_at) + 1)
        cache = self._caches().views
        key = (i, x.shape, rep, s1.tobytes(), s2.tobytes())
        hit = cache.get(key)
        if hit is None:
            hit = self._view(x.shape, rep, s1.reshape(-1), s2.reshape(-1), view_az, perm)
            cache.keep(key, hit)
        if hit[0] == "perm":
            return x, rep, hit[1]
        _, shape1, shape2 = hit
        if rep is not None:
            x = np.repeat(x, rep[1], axis=rep[0])
        y = np.ascontiguousarray(np.transpose(x.reshape(shape1), (0, 2, 1)))
        return y.reshape(shape2), None, perm

    @staticmethod
    def _view(xshape, rep, s1, s2, view_az, perm):
        az1, az2 = (int(a) for a in (view_az or (0, 0)))
        vshape = _virtual(xshape, rep)
        r = len(vshape)
        shape1 = _onnx_reshape(vshape, s1, az1)
        lead = int(np.prod(vshape[:-2], dtype=np.int64))
        if r >= 2 and shape1 == (lead,) + tuple(vshape[-2:]):
            shape2 = _onnx_reshape((lead, vshape[-1], vshape[-2]), s2, az2)
            if shape2 == tuple(vshape[:-2]) + (vshape[-1], vshape[-2]):
                p0 = list(range(r - 2)) + [r - 1, r - 2]
                p1 = list(range(r)) if perm is None else [int(j) for j in perm]
                return ("perm", tuple(p0[j] for j in p1))
        if len(shape1) != 3:
            raise ValueError(f"FusedAttention: the view of {vshape} as {shape1} is not 3-D")
        return ("copy", shape1, _onnx_reshape((shape1[0], shape1[2], shape1[1]), s2, az2))

    def _expand(self, get, i, axis, at, allowzero):
        x = get(i)
        if axis is None:
            return x, None
        se, sr = get(int(at)), get(int(at) + 1)
        cache = self._caches().expands
        key = (i, x.shape, se.tobytes(), sr.tobytes())
        hit = cache.get(key)
        if hit is None:
            hit = self._expand_plan(x.shape, int(axis), se.reshape(-1), sr.reshape(-1), int(allowzero))
            cache.keep(key, hit)
        if hit[0] == "rep":
            return x, hit[1]
        _, u_shape, e_shape, r_shape = hit
        return np.ascontiguousarray(np.broadcast_to(x.reshape(u_shape), e_shape)).reshape(r_shape), None

    @staticmethod
    def _expand_plan(xshape, axis, shape_e, shape_r, allowzero):
        u_shape = xshape[:axis] + (1,) + xshape[axis:]
        e_shape = tuple(np.broadcast_shapes(u_shape, tuple(int(d) for d in shape_e)))
        r_shape = _onnx_reshape(e_shape, shape_r, allowzero)
        rep = e_shape[axis]
        merged = xshape[:axis - 1] + (xshape[axis - 1] * rep,) + xshape[axis:]
        if (e_shape[:axis] == xshape[:axis] and e_shape[axis + 1:] == xshape[axis:] and r_shape == merged
                and rep >= 1):
            return ("rep", None if rep == 1 else (axis - 1, rep))
        if int(np.prod(e_shape, dtype=np.int64)) != int(np.prod(r_shape, dtype=np.int64)):
            raise ValueError(f"FusedAttention: cannot reshape the expanded {e_shape} to {r_shape}")
        return ("copy", u_shape, e_shape, r_shape)

    @property
    def c_value_inputs(self):
        """The shape inputs of the grouped-query / view forms: their values decide how K and V are read."""
        return tuple(j for at in (self.k_expand_at, self.v_expand_at, self.k_view_at, self.v_view_at)
                     if at is not None for j in (int(at), int(at) + 1))

    def _resolve(self, get):
        """(q, (k, k_rep, perm_k), (v, v_rep, perm_v), mask ops) of one call."""
        k = self._operand(get, 1, self.k_expand, self.k_expand_at, self.k_expand_allowzero, self.k_view_at,
                          self.k_view_allowzero, self.perm_k)
        v = self._operand(get, 2, self.v_expand, self.v_expand_at, self.v_expand_allowzero, self.v_view_at,
                          self.v_view_allowzero, self.perm_v)
        return get(0), k, v, self._mask_ops(get)

    def compute(self, ctx):
        values = ctx.values
        xs = [values[x] if x else None for x in ctx.ins]
        caches = self._caches()
        calls = caches.calls
        key = _call_key(xs, _bf16.use_bf16(self) and _bf16.attention_key())
        hit = calls.get(key) if key is not None else None
        if hit is None and key is not None:
            hit = _by_length(caches.lengths, xs, key[0])
            if hit is not None:
                calls.keep(key, hit)
        if hit is not None and self._run_fused(ctx, xs, *hit):
            return
        q, (k, k_rep, perm_k), (v, v_rep, perm_v), ops = self._resolve(ctx.input)
        inplace = k is xs[1] and v is xs[2]
        k, k_str = _strided(k)
        v, v_str = _strided(v)
        prep = self._native(q, k, v, k_rep, v_rep, perm_k, perm_v, ops, k_str, v_str)
        if key is not None and inplace and prep is not None and prep[0] == "fused" and k is xs[1] and v is xs[2]:
            # (K and V read as given: a call of the same key runs this prep on its own inputs, _run_fused)
            mask_at = tuple(i for _, _, _, i in ops)
            calls.keep(key, (prep, mask_at))
            _keep_length(caches.lengths, xs, key[0], prep, mask_at)
        if prep is not None and prep[0] != "fused" and (k_str or v_str):
            # (strided operands on the fused path only)
            k, v, k_str, v_str = np.ascontiguousarray(k), np.ascontiguousarray(v), None, None
            prep = self._native(q, k, v, k_rep, v_rep, perm_k, perm_v, ops)
        if prep is None:
            self._numpy(ctx, q, k, v, k_rep, v_rep, ops, perm_k, perm_v)
            return
        nt = ctx.num_threads
        if prep[0] == "fused":
            _, y_shape, n_keys, offs, params, fparams, _ = prep
            y = ctx.output(0, y_shape, F32)
            if y.size == 0:
                return
            if n_keys == 0:    # no keys: the probabilities are empty, their product with V (0 x D) is zeros
                y.fill(0.0)
                return
            _kernels.attention_masked_f32(_c(q), _c(k) if k_str is None else _grow.flat(k),
                                          _c(v) if v_str is None else _grow.flat(v), y, offs,
                                          tuple(_c(x) for _, x, _, _ in ops), params, fparams, nt)
            return
        _, p1, p2 = prep
        y = ctx.output(0, p2.y_shape, F32)
        if y.size == 0:
            return
        if p1.N == 0:
            y.fill(0.0)
            return
        mask = self._combine(ops)
        s = np.empty(p1.y_shape, F32)    # the unfused order: scores, softmax in place, then the second product
        _kernels.sgemm_batched_f32(q.reshape(-1), k.reshape(-1), s.reshape(-1), p1.a_off, p1.b_off, p1.c_off,
                                   p1.M, p1.N, p1.K, p1.rsa, p1.csa, p1.rsb, p1.csb, p1.rsc, p1.csc,
                                   float(self.alpha), nt)
        s2 = s.reshape(-1, p1.N)
        if mask is None:
            _kernels.softmax_lastaxis_f32(s2, s2, False, nt)
        else:
            m_off, m_cs = mask_rows(p1.y_shape, mask.shape)
            _kernels.softmax_mask_lastaxis_f32(s2, s2, mask.reshape(-1), m_off, m_cs, False, nt)
        if int(self.nan_zero):
            s[np.isnan(s)] = 0.0
        _kernels.sgemm_batched_f32(s.reshape(-1), v.reshape(-1), y.reshape(-1), p2.a_off, p2.b_off, p2.c_off,
                                   p2.M, p2.N, p2.K, p2.rsa, p2.csa, p2.rsb, p2.csb, p2.rsc, p2.csc, 1.0, nt)

    @staticmethod
    def _run_fused(ctx, xs, prep, mask_at) -> bool:
        """A call whose _call_key was seen: the fused native call on this call's inputs (what compute's resolution
        would give: K and V as given, the masks at mask_at); False when K or V is strided but no view of ops/_grow.py
        (then compute resolves it)."""
        q, k, v = xs[0], xs[1], xs[2]
        kf = k if k.flags.c_contiguous else _grow.flat(k)
        vf = v if v.flags.c_contiguous else _grow.flat(v)
        if kf is None or vf is None:
            return False
        _, y_shape, n_keys, offs, params, fparams, _ = prep
        y = ctx.output(0, y_shape, F32)
        if y.size == 0:
            return True
        if n_keys == 0:
            y.fill(0.0)
            return True
        _kernels.attention_masked_f32(_c(q), kf, vf, y, offs, tuple([_c(xs[i]) for i in mask_at]), params, fparams,
                                      ctx.num_threads)
        return True

    def c_step(self, ins, outs, nthreads):
        """The compiled run loop's entry (RL_ATTENTION): attention_masked_f32 as compute runs it, when K and V are
        read in place (no numpy copy of a view or a repeat) and the call takes the fused native path."""
        if type(self).compute is not FusedAttention_1.compute or "compute" in self.__dict__:
            return None

        def get(i):
            return ins[i] if i < len(ins) else None

        q, (k, k_rep, perm_k), (v, v_rep, perm_v), ops = self._resolve(get)
        if k is not ins[1] or v is not ins[2]:
            return None
        prep = self._native(q, k, v, k_rep, v_rep, perm_k, perm_v, ops)
        y = outs[0]
        if prep is None or prep[0] != "fused" or prep[2] == 0 or y is None:
            return None
        _, y_shape, _, offs, params, fparams, _ = prep
        masks = [x for _, x, _, _ in ops]
        if (not plain(q, k, v, y, *masks) or y.dtype != F32 or y.shape != y_shape or y.size == 0
                or any(np.may_share_memory(y, x) for x in [q, k, v] + masks)):
            return None
        args = [0, 1, 2, ~0, offs] + [i for _, _, _, i in ops]
        return "attention", args, [int(n) for n in params], [float(f) for f in fparams]

    def _numpy(self, ctx, q, k, v, k_rep, v_rep, ops, perm_k, perm_v):
        """The graph's ops one after another (numpy broadcasting): what the native call cannot take."""
        if k_rep is not None:
            k = np.repeat(k, k_rep[1], axis=k_rep[0])
        if v_rep is not None:
            v = np.repeat(v, v_rep[1], axis=v_rep[0])
        s = np.matmul(_transpose(q, self.perm_q), _transpose(k, perm_k)).astype(F32, copy=False)
        s = s * F32(self.alpha)
        for kind, x, fill, _ in ops:
            s = s + x if kind == 0 else np.where(x, s, F32(fill))
        s = s.astype(F32, copy=False)
        with np.errstate(invalid="ignore", over="ignore"):
            e = np.exp(s - np.max(s, axis=-1, keepdims=True))
            p = e / np.sum(e, axis=-1, keepdims=True)
        if int(self.nan_zero):
            p = np.where(np.isnan(p), F32(0.0), p)
        y = _transpose(np.matmul(p.astype(F32, copy=False), _transpose(v, perm_v)), self.perm_y)
        out = ctx.output(0, y.shape, F32)
        out[...] = y


def _c(x):
    return x if x.flags.c_contiguous else np.ascontiguousarray(x)


#: integer inputs (the shape inputs of the grouped-query and view forms) up to this many elements key a call by
#: their values
_KEY_INTS = 16


def _call_key(xs, extra):
    """What decides how a call runs, besides the node's attributes and `extra`: per input its shape, strides and
    dtype, an integer input (a shape) by its values too; None when an integer input is larger than _KEY_INTS or an
    input is no array (then the call is resolved anew)."""
    key = [extra]
    for x in xs:
        if x is None:
            key.append(None)
        elif not isinstance(x, np.ndarray):
            return None
        elif x.dtype.kind in "iu":
            if x.size > _KEY_INTS:
                return None
            key.append((x.shape, x.dtype.char, x.tobytes()))
        else:
            key.append((x.shape, x.strides, x.dtype.char))
    return tuple(key)


#: what _length_key writes for the key count
_KEYS = ("<key count>",)
#: attention_masked_f32's parameters: the first mask's (kind, column stride) (_k_transformer.pxi ATP_MASK)
_ATP_MASK = 16


def _length_key(xs, extra, n):
    """_call_key with the key count `n` written as _KEYS wherever it is a dim or an integer input's value, the
    strides of Q, K and V with their size-1 dims' left out, a mask's not at all (C-contiguous: its shape gives them):
    equal for two calls that differ only in their key count when no stride of Q, K or V depends on it (K and V in a
    buffer with spare rows, ops/_grow.py). None when a mask is not C-contiguous or an input no array, or an integer
    input is larger than _KEY_INTS."""
    key = [extra]
    for j, x in enumerate(xs):
        if x is None:
            key.append(None)
            continue
        if not isinstance(x, np.ndarray) or (j > 2 and not x.flags.c_contiguous):
            return None
        shape = tuple(_KEYS if d == n else d for d in x.shape)
        if x.dtype.kind in "iu":
            if x.size > _KEY_INTS:
                return None
            key.append((shape, x.dtype.char, tuple(_KEYS if v == n else v for v in x.reshape(-1).tolist())))
        elif j > 2:         # a mask, C-contiguous: its rows are found from its shape (_by_length)
            key.append((shape, x.dtype.char))
        else:
            key.append((shape, tuple(0 if d == 1 else st for d, st in zip(x.shape, x.strides)), x.dtype.char))
    return tuple(key)


def _ranks(xs):
    return tuple(None if x is None else getattr(x, "ndim", -1) for x in xs)


def _keep_length(lengths, xs, extra, prep, mask_at):
    """Note a fused fp32 call whose prep a call differing only in its key count can take with that count written in
    (_by_length): K's shape holds its key count once, the output's shape not at all."""
    n = int(prep[4][2])
    k = xs[1]
    if extra or prep[1].count(n) or not isinstance(k, np.ndarray) or k.shape.count(n) != 1:
        return
    lk = _length_key(xs, extra, n)
    if lk is not None:
        lengths.keep(_ranks(xs), (k.shape.index(n), lk, prep, mask_at))


def _by_length(lengths, xs, extra):
    """(prep, mask indices) for a call whose _length_key equals the noted one's (_keep_length) at its own key count:
    the noted prep with the count written into it (n_keys, the ATP_N parameter, the scores' last dim) and the masks'
    row offsets found again for the new scores shape (a batch of masks lies the key count apart); Q's, K's and V's
    offsets, the strides and the other parameters do not depend on the count, which the equal keys vouch for (every
    stride and shape value but the count's is the same). None otherwise. A decoder's step: the first layer's new key
    count planned from the last step's."""
    e = lengths.get(_ranks(xs))
    if e is None or extra:
        return None
    pos, lk, prep, mask_at = e
    k = xs[1]
    if not isinstance(k, np.ndarray) or k.ndim <= pos:
        return None
    n = k.shape[pos]
    if n < 1 or n == prep[2] or _length_key(xs, extra, n) != lk:
        return None
    params = prep[4].copy()
    params[2] = n
    offs = prep[3]
    s_shape = prep[6][:-1] + (n,)
    if mask_at:
        rows = [mask_rows(s_shape, xs[i].shape) for i in mask_at]
        if any(r is None or r[1] != params[_ATP_MASK + 2 * m + 1] for m, r in enumerate(rows)):
            return None
        lead = 4 * int(params[0])
        offs = np.ascontiguousarray(np.concatenate([offs[:lead]] + [r[0] for r in rows]).astype(np.int64))
    return (prep[0], prep[1], n, offs, params, prep[5], s_shape), mask_at


def _strided(x):
    """(x, None) for a C-contiguous x; (x, its element strides) for a view with spare rows (ops/_grow.py: a key /
    value cache appended in place), read in place through its buffer; else (a C-contiguous copy, None)."""
    if x.flags.c_contiguous:
        return x, None
    if x.dtype == F32 and _grow.is_view(x):
        return x, tuple(s // 4 for s in x.strides)
    return np.ascontiguousarray(x), None


def _shared_kv_rows(q_off, k_off, v_off, y_off):
    """(rows, Q row stride, Y row stride) when the one-query-row items come in runs of `rows` (2 ..
    _kernels.ATTN_DIRECT_ROWS, the most that divides their count) that read one K and one V, with Q and Y offsets
    stepping by one stride each in every run: a grouped-query decoding step, whose heads of a kv group then go to the
    kernel as the rows of one item and each key row is read once for all of them (SmolLM-135M, 3 query heads a kv
    head: each K and V was read 3 times). None when no such runs."""
    T = len(q_off)
    for g in range(min(int(_kernels.ATTN_DIRECT_ROWS), T), 1, -1):
        if T % g:
            continue
        k, v = k_off.reshape(-1, g), v_off.reshape(-1, g)
        if not ((k == k[:, :1]).all() and (v == v[:, :1]).all()):
            continue
        dq, dy = np.diff(q_off.reshape(-1, g), axis=1), np.diff(y_off.reshape(-1, g), axis=1)
        sq, sy = int(dq[0, 0]), int(dy[0, 0])
        if sq >= 0 and sy >= 0 and (dq == sq).all() and (dy == sy).all():
            return g, sq, sy
    return None


def _key(perm):
    return None if perm is None else tuple(int(i) for i in perm)


def _virtual(shape, rep):
    if rep is None:
        return shape
    d, r = rep
    return shape[:d] + (shape[d] * r,) + shape[d + 1:]


def p2_batch(s_shape, vv_shape, perm_v):
    pv = tuple(range(len(vv_shape))) if perm_v is None else tuple(int(i) for i in perm_v)
    vt = [vv_shape[p] for p in pv]
    return tuple(np.broadcast_shapes(tuple(s_shape[:-2]), tuple(vt[:-2])))


def _rep_plan(plan, which, shape, rep, perm, batch, strides=None):
    """`plan` with operand `which`'s offsets / strides for the unexpanded `shape` (element `strides`, None:
    C-contiguous) whose dim rep[0] is repeated rep[1] times (repeat-interleave: item index // repeat); ValueError when
    the repeated dim is one of the matrix dims (then the numpy path runs)."""
    d, r = rep
    rank = len(shape)
    p = tuple(range(rank)) if perm is None else tuple(int(i) for i in perm)
    if d in p[-2:]:
        raise ValueError("FusedAttention: the repeated kv dim is a matrix dim")
    strides = strides or _c_strides(shape)
    vshape = _virtual(shape, rep)
    nb = len(batch)
    off = np.zeros(batch, np.int64)
    for j in range(nb):
        src = p[j]
        if vshape[src] == 1:
            continue
        idx = np.arange(batch[j], dtype=np.int64)
        if src == d:
            idx = idx // r
        dims = [1] * nb
        dims[j] = batch[j]
        off = off + (idx * strides[src]).reshape(dims)
    off = np.ascontiguousarray(off.reshape(-1))
    return plan._replace(b_off=off, rsb=strides[p[-2]], csb=strides[p[-1]])
