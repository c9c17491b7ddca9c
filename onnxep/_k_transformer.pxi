# Transformer kernels: Erf and Gelu (a vectorisable polynomial erf), LayerNormalization over rows, Softmax along
# contiguous rows with a vectorised exp, and a batched SGEMM with per-item offsets and arbitrary row / column strides (attention's per-head products).

cdef extern from "_native/erf.h":
    void softmax_row_mask "onnxep_softmax_row_mask"(const float* x, float* y, Py_ssize_t K, const float* mask,
                                                    Py_ssize_t mcs, int log) noexcept nogil
    void softmax_row "onnxep_softmax_row"(const float* x, float* y, Py_ssize_t K, int log) noexcept nogil
    void erf_loop "onnxep_erf_loop"(const float* x, float* y, Py_ssize_t n) noexcept nogil
    void gelu_loop "onnxep_gelu_loop"(const float* x, float* y, Py_ssize_t n) noexcept nogil
    void layernorm_rows "onnxep_layernorm_rows"(const float* x, float* y, Py_ssize_t R, Py_ssize_t C,
                                                const float* scale, const float* bias, float eps, float* mean_out,
                                                float* inv_out) noexcept nogil
    Py_ssize_t LN_ROWS "ONNXEP_LN_ROWS"


cdef enum:
    TF_UNARY_ERF = 0
    TF_UNARY_GELU = 1


cdef inline void _tf_unary(int op, const float* x, float* y, Py_ssize_t n) noexcept nogil:
    if op == TF_UNARY_ERF:
        erf_loop(x, y, n)
    else:
        gelu_loop(x, y, n)


cdef _tf_unary_run(str name, int op, const float[::1] x, float[::1] y, int nthreads):
    cdef Py_ssize_t n = x.shape[0], c, nchunks
    if y.shape[0] != n:
        raise ValueError(f"{name}: x has {n} elements, y has {y.shape[0]}")
    if n == 0:
        return
    nchunks = (n + ELTWISE_CHUNK - 1) // ELTWISE_CHUNK
    cdef TfJob job
    job.x, job.y, job.n, job.op, job.kind = &x[0], &y[0], n, op, 0
    with nogil:
        parallel_for(nchunks, 1 if nchunks < 2 else _nthreads(nthreads), _tf_task, &job)


def erf_f32(const float[::1] x, float[::1] y, int nthreads=0):
    """y := erf(x) (max error 1.3e-7, ~2 ulp; NaN stays NaN), flat contiguous arrays (y may alias x)."""
    _tf_unary_run("erf_f32", TF_UNARY_ERF, x, y, nthreads)


def gelu_f32(const float[::1] x, float[::1] y, int nthreads=0):
    """y := x * 0.5 * (1 + erf(x / sqrt(2))) (y may alias x)."""
    _tf_unary_run("gelu_f32", TF_UNARY_GELU, x, y, nthreads)


def layernorm_f32(const float[:, ::1] x, float[:, ::1] y, const float[::1] scale, const float[::1] bias,
                  float epsilon, float[::1] mean=None, float[::1] inv_std=None, int nthreads=0):
    """Per row r of x (R, C): mean[r], inv_std[r] = 1 / sqrt(var[r] + epsilon) (var: the mean of (x - mean)^2),
    y[r, :] := (x[r, :] - mean[r]) * inv_std[r] * scale + bias. scale / bias have C elements or are None (1 / 0);
    mean / inv_std (R elements) are written when given. y may alias x."""
    cdef Py_ssize_t R = x.shape[0], C = x.shape[1], r
    cdef const float* ps = NULL
    cdef const float* pb = NULL
    cdef float* pm = NULL
    cdef float* pi = NULL
    if y.shape[0] != R or y.shape[1] != C:
        raise ValueError(f"layernorm_f32: x is {R}x{C}, y is {y.shape[0]}x{y.shape[1]}")
    if scale is not None:
        if scale.shape[0] != C:
            raise ValueError(f"layernorm_f32: rows have {C} elements, scale has {scale.shape[0]}")
        if C:
            ps = &scale[0]
    if bias is not None:
        if bias.shape[0] != C:
            raise ValueError(f"layernorm_f32: rows have {C} elements, bias has {bias.shape[0]}")
        if C:
            pb = &bias[0]
    if mean is not None:
        if mean.shape[0] != R:
            raise ValueError(f"layernorm_f32: {R} rows, mean has {mean.shape[0]} elements")
        if R:
            pm = &mean[0]
    if inv_std is not None:
        if inv_std.shape[0] != R:
            raise ValueError(f"layernorm_f32: {R} rows, inv_std has {inv_std.shape[0]} elements")
        if R:
            pi = &inv_std[0]
    if R == 0:
        return
    if C == 0:   # an empty row: mean 0 / 0 and var 0 / 0 are NaN, as numpy's mean of nothing
        for r in range(R):
            if pm != NULL:
                pm[r] = float("nan")
            if pi != NULL:
                pi[r] = float("nan")
        return
    cdef TfJob job
    job.x, job.y, job.n, job.ps, job.pb, job.eps, job.pm, job.pi, job.kind = &x[0, 0], &y[0, 0], C, ps, pb, epsilon, pm, pi, 1
    job.rows = R
    with nogil:
        parallel_for((R + LN_ROWS - 1) // LN_ROWS, 1 if R * C < NORM_PAR_WORK else _nthreads(nthreads), _tf_task,
                     &job)


def softmax_lastaxis_f32(const float[:, ::1] x, float[:, ::1] y, bint log=False, int nthreads=0):
    """y[r, :] := softmax(x[r, :]) (log-softmax when log) for each row of x (R, K); the max subtracted first, exp
    vectorised (onnxep_exp_neg, ~1 ulp; exactly 0 below exp(-87)). y may alias x."""
    cdef Py_ssize_t R = x.shape[0], K = x.shape[1], r
    if y.shape[0] != R or y.shape[1] != K:
        raise ValueError(f"softmax_lastaxis_f32: x is {R}x{K}, y is {y.shape[0]}x{y.shape[1]}")
    if R == 0 or K == 0:
        return
    cdef TfJob job
    job.x, job.y, job.n, job.log, job.kind = &x[0, 0], &y[0, 0], K, log, 2
    with nogil:
        parallel_for(R, 1 if R * K < NORM_PAR_WORK else _nthreads(nthreads), _tf_task, &job)


def softmax_mask_lastaxis_f32(const float[:, ::1] x, float[:, ::1] y, const float[::1] mask,
                              const int64_t[::1] mask_off, Py_ssize_t mask_cs, bint log=False, int nthreads=0):
    """y[r, :] := softmax(x[r, :] + mask[mask_off[r] + j * mask_cs]) along each row of x (R, K) (log-softmax when
    log): an additive mask broadcast to x, its rows given by offsets (mask_cs 1: a mask row of K values, 0: one value
    per row). y may alias x."""
    cdef Py_ssize_t R = x.shape[0], K = x.shape[1], r
    if y.shape[0] != R or y.shape[1] != K:
        raise ValueError(f"softmax_mask_lastaxis_f32: x is {R}x{K}, y is {y.shape[0]}x{y.shape[1]}")
    if mask_off.shape[0] != R or mask_cs not in (0, 1):
        raise ValueError(f"softmax_mask_lastaxis_f32: {mask_off.shape[0]} mask offsets for {R} rows, column stride "
                         f"{mask_cs} (0 or 1)")
    if R == 0 or K == 0:
        return
    for r in range(R):
        if mask_off[r] < 0 or mask_off[r] + (K - 1) * mask_cs >= mask.shape[0]:
            raise ValueError(f"softmax_mask_lastaxis_f32: row {r}'s mask (offset {mask_off[r]}) reaches outside the "
                             f"mask's {mask.shape[0]} elements")
    cdef TfJob job
    job.x, job.y, job.n, job.log, job.kind = &x[0, 0], &y[0, 0], K, log, 3
    job.mask, job.mask_off, job.mask_cs = &mask[0], &mask_off[0], mask_cs
    with nogil:
        parallel_for(R, 1 if R * K < NORM_PAR_WORK else _nthreads(nthreads), _tf_task, &job)


# ---------------------------------------------------------------------------------------------------------------
# Batched SGEMM: for each item t, C_t := alpha * A_t @ B_t with A_t[i, k] = a[a_off[t] + i*rsa + k*csa],
# B_t[k, n] = b[b_off[t] + k*rsb + n*csb], C_t[i, n] = c[c_off[t] + i*rsc + n*csc]. Offsets and strides in
# elements, so broadcast batch dims (offset repeated) and transposed / head-interleaved operands (a Transpose or a
# head split folded into the strides) need no copy. Each item packs its B (sgemm_pack_b_raw) and runs the packed
# SGEMM (sgemm_packed_raw). With several items per thread the items are split over the threads, one thread each
# (one parallel region); otherwise they run one after another, each SGEMM threaded itself.

cdef enum:
    SMALL_ITEM_MNK = 65536     # an item with M*N*K up to this runs _sgemm_item_small (per-head attention products)


cdef void _sgemm_item_small(Py_ssize_t M, Py_ssize_t N, Py_ssize_t K, float alpha, const float* a, Py_ssize_t rsa,
                            Py_ssize_t csa, const float* b, Py_ssize_t rsb, Py_ssize_t csb, float* c,
                            Py_ssize_t rsc, Py_ssize_t csc, float* work) noexcept nogil:
    """C := alpha * A @ B for a small item, as the fused attention computes its scores (at_qk): B copied into rows
    of Np = N rounded up to 16 (zero padded), 4 rows of A at a time read in place, the products in registers, then
    stored through C's strides. No A packing and no SGEMM tiling setup, which cost more than the products here.
    `work` holds K*Np + AT_RB*Np floats."""
    cdef Py_ssize_t Np = _round_up(N, AT_PAD), kk, n, i, r, rb
    cdef float* bp = work
    cdef float* s = work + K * Np
    cdef float* dst
    cdef float* ci
    for kk in range(K):
        dst = bp + kk * Np
        if csb == 1:
            memcpy(dst, b + kk * rsb, N * sizeof(float))
        else:
            for n in range(N):
                dst[n] = b[kk * rsb + n * csb]
        for n in range(N, Np):
            dst[n] = 0.0
    i = 0
    while i < M:
        rb = min(<Py_ssize_t>AT_RB, M - i)
        at_scores(<int>rb, a + i * rsa, rsa, csa, bp, K, Np, s)
        for r in range(rb):
            ci = c + (i + r) * rsc
            for n in range(N):
                ci[n * csc] = alpha * s[r * Np + n]
        i += rb


cdef void _sgemm_item(Py_ssize_t M, Py_ssize_t N, Py_ssize_t K, float alpha, const float* a, Py_ssize_t rsa,
                      Py_ssize_t csa, const float* b, Py_ssize_t rsb, Py_ssize_t csb, float* c, Py_ssize_t rsc,
                      Py_ssize_t csc, float* bpack, float* work, int nth) noexcept nogil:
    if <double>M * N * K <= SMALL_ITEM_MNK and (K + AT_RB) * _round_up(N, AT_PAD) <= SGEMM_WORK_PER_THREAD:
        _sgemm_item_small(M, N, K, alpha, a, rsa, csa, b, rsb, csb, c, rsc, csc, work)
        return
    sgemm_pack_b_raw(K, N, b, rsb, csb, bpack, nth)
    sgemm_packed_raw(M, N, K, alpha, a, rsa, csa, bpack, 0.0, c, rsc, csc, NULL, NULL, NULL, work, nth)


def sgemm_batched_f32(const float[::1] a, const float[::1] b, float[::1] c, const int64_t[::1] a_off,
                      const int64_t[::1] b_off, const int64_t[::1] c_off, Py_ssize_t M, Py_ssize_t N, Py_ssize_t K,
                      Py_ssize_t rsa, Py_ssize_t csa, Py_ssize_t rsb, Py_ssize_t csb, Py_ssize_t rsc, Py_ssize_t csc,
                      float alpha=1.0, int nthreads=0):
    """C_t := alpha * A_t @ B_t for every item t (see above); strides >= 0, every C_t element written once, the
    C_t of different items must not overlap (not checked)."""
    cdef Py_ssize_t T = a_off.shape[0], t, i, blen, wlen, lo, hi
    cdef int nth, per_item
    cdef float* buf = NULL
    cdef BatchedJob job
    cdef int64_t ao, bo, co
    if b_off.shape[0] != T or c_off.shape[0] != T:
        raise ValueError(f"sgemm_batched_f32: {T} A offsets, {b_off.shape[0]} B, {c_off.shape[0]} C")
    if M < 0 or N < 0 or K < 0 or min(rsa, csa, rsb, csb, rsc, csc) < 0:
        raise ValueError(f"sgemm_batched_f32: negative size or stride (M={M}, N={N}, K={K}, strides "
                         f"{(rsa, csa, rsb, csb, rsc, csc)})")
    if T == 0 or M == 0 or N == 0:
        return
    for t in range(T):   # bounds: the last element of each operand is inside its buffer
        ao, bo, co = a_off[t], b_off[t], c_off[t]
        if ao < 0 or bo < 0 or co < 0 or co + (M - 1) * rsc + (N - 1) * csc >= c.shape[0] or (K > 0 and (
                ao + (M - 1) * rsa + (K - 1) * csa >= a.shape[0] or bo + (K - 1) * rsb + (N - 1) * csb >= b.shape[0])):
            raise ValueError(f"sgemm_batched_f32: item {t} (offsets {ao}, {bo}, {co}) reaches outside the buffers "
                             f"of {a.shape[0]}, {b.shape[0]}, {c.shape[0]} elements for M={M}, N={N}, K={K}")
    if K == 0:
        for t in range(T):
            for i in range(M):
                for lo in range(N):
                    c[c_off[t] + i * rsc + lo * csc] = 0.0
        return
    nth = _nthreads(nthreads)
    # whole items per thread when there are at least as many items as threads and the whole call is worth threads
    per_item = nth > 1 and T >= nth and gemm_splits(<double>2.0 * M * N * K * T, nth)
    blen = sgemm_pack_b_len(K, N)
    wlen = blen + SGEMM_WORK_PER_THREAD
    if per_item:
        buf = <float*>malloc(<Py_ssize_t>nth * wlen * sizeof(float))
    else:
        nth = sgemm_threads(M, N, K, nthreads)
        buf = <float*>malloc((blen + sgemm_work_len(nth)) * sizeof(float))
    if buf == NULL:
        raise MemoryError("sgemm_batched_f32: cannot allocate the packing workspace")
    try:
        with nogil:
            if per_item:
                job.M, job.N, job.K, job.alpha, job.a, job.rsa, job.csa = M, N, K, alpha, &a[0], rsa, csa
                job.b, job.rsb, job.csb, job.c, job.rsc, job.csc = &b[0], rsb, csb, &c[0], rsc, csc
                job.a_off, job.b_off, job.c_off, job.buf, job.wlen, job.blen = (
                    &a_off[0], &b_off[0], &c_off[0], buf, wlen, blen)
                parallel_for(T, nth, _sgemm_item_task, &job)
            else:
                for t in range(T):
                    _sgemm_item(M, N, K, alpha, &a[0] + a_off[t], rsa, csa, &b[0] + b_off[t], rsb, csb,
                                &c[0] + c_off[t], rsc, csc, buf, buf + blen, nth)
    finally:
        free(buf)


# ---------------------------------------------------------------------------------------------------------------
# Packed SGEMM with a residual: C := act(A @ B + bias + R), the residual R added in the SGEMM epilogue
# (sgemm_packed_ex's `res`), so a MatMul -> Add(bias) -> Add(residual) chain writes its output once.

def sgemm_packed_res_f32(const float[:, ::1] A, const float[::1] B_packed, Py_ssize_t N, float[:, ::1] C,
                         const float[::1] bias_col, const float[:, ::1] res, bint relu=False, int nthreads=0,
                         activation=None):
    """C := act(A @ B + bias_col[j] + res[i, j]) with B (K x N) packed by sgemm_pack_b; act as sgemm_packed_f32's
    (`activation`, else Relu when relu). bias_col (N) may be None; res has C's shape and must not alias C (C holds
    partial sums between K blocks)."""
    cdef Py_ssize_t M = A.shape[0], K = A.shape[1]
    cdef int nth
    cdef float* work = NULL
    cdef const float* bc = NULL
    cdef Act act = make_act(activation, relu)
    if C.shape[0] != M or C.shape[1] != N or res.shape[0] != M or res.shape[1] != N:
        raise ValueError(f"sgemm_packed_res_f32: A is {M}x{K}, C {C.shape[0]}x{C.shape[1]}, res "
                         f"{res.shape[0]}x{res.shape[1]}, expected C and res {M}x{N}")
    if B_packed.shape[0] != sgemm_pack_b_len(K, N):
        raise ValueError(f"sgemm_packed_res_f32: packed B has {B_packed.shape[0]} elements, expected "
                         f"{sgemm_pack_b_len(K, N)} for K={K}, N={N} ({SGEMM_FORMAT})")
    bc = _opt_ptr(bias_col, N, "bias_col")
    if M == 0 or N == 0:
        return
    if &res[0, 0] == &C[0, 0]:
        raise ValueError("sgemm_packed_res_f32: res must not alias C")
    nth = sgemm_threads(M, N, K, nthreads)
    if K > 0:
        work = <float*>malloc(sgemm_work_len(nth) * sizeof(float))
        if work == NULL:
            raise MemoryError("sgemm_packed_res_f32: cannot allocate the A packing workspace")
    try:
        with nogil:
            sgemm_packed_ex(M, N, K, 1.0, &A[0, 0] if K else NULL, K, 1, NULL, &B_packed[0] if K else NULL, 0.0,
                            &C[0, 0], N, 1, bc, NULL, &res[0, 0], &act, work, nth)
    finally:
        free(work)


cdef struct TfJob:
    # the transformer kernels' arguments on the thread pool; kind: 0 unary chunks, 1 layernorm blocks of LN_ROWS rows
    # (of rows), 2 softmax rows, 3 masked softmax rows
    const float* x
    float* y
    Py_ssize_t n, mask_cs, rows
    int op, kind
    bint log
    const float* ps
    const float* pb
    float eps
    float* pm
    float* pi
    const float* mask
    const int64_t* mask_off


cdef void _tf_task(void* p, Py_ssize_t r, int tid) noexcept nogil:
    cdef TfJob* j = <TfJob*>p
    if j.kind == 0:
        _tf_unary(j.op, j.x + r * ELTWISE_CHUNK, j.y + r * ELTWISE_CHUNK,
                  min(<Py_ssize_t>ELTWISE_CHUNK, j.n - r * ELTWISE_CHUNK))
    elif j.kind == 1:
        r *= LN_ROWS
        layernorm_rows(j.x + r * j.n, j.y + r * j.n, min(LN_ROWS, j.rows - r), j.n, j.ps, j.pb, j.eps,
                       (j.pm + r) if j.pm != NULL else NULL, (j.pi + r) if j.pi != NULL else NULL)
    elif j.kind == 2:
        softmax_row(j.x + r * j.n, j.y + r * j.n, j.n, j.log)
    else:
        softmax_row_mask(j.x + r * j.n, j.y + r * j.n, j.n, j.mask + j.mask_off[r], j.mask_cs, j.log)


cdef struct BatchedJob:
    Py_ssize_t M, N, K, rsa, csa, rsb, csb, rsc, csc, wlen, blen
    float alpha
    const float* a
    const float* b
    float* c
    const int64_t* a_off
    const int64_t* b_off
    const int64_t* c_off
    float* buf


cdef void _sgemm_item_task(void* p, Py_ssize_t t, int tid) noexcept nogil:
    cdef BatchedJob* j = <BatchedJob*>p
    cdef float* bpack = j.buf + <Py_ssize_t>tid * j.wlen
    _sgemm_item(j.M, j.N, j.K, j.alpha, j.a + j.a_off[t], j.rsa, j.csa, j.b + j.b_off[t], j.rsb, j.csb,
                j.c + j.c_off[t], j.rsc, j.csc, bpack, bpack + j.blen, 1)


# ---------------------------------------------------------------------------------------------------------------
# Fused attention: for each item t (a batch x head pair) and each block of query rows,
#     Y_t := softmax(alpha * Q_t @ Kt_t + mask_t) @ V_t      (the softmax along each row of scores)
# with Q_t (M x K), Kt_t (K x N, K^T as read through strides), V_t (N x D) and Y_t (M x D) addressed as
# sgemm_batched_f32's operands (per-item offsets, any row / column strides), and the mask by one element offset per
# scores row (t * M + i) and a column stride 0 / 1, as softmax_mask_lastaxis_f32's.
# Attention heads are small (head dim K, D of 8..128, a few to a few hundred keys), where the packed SGEMM's per-call
# setup (packing A, per-call workspace, a micro-kernel tile for 11 rows) and a softmax over rows shorter than a vector
# (scalar tails) cost more than the arithmetic. So per item: K^T is copied once into Kp (K x Np, rows of keys padded
# to Np, a multiple of 16, with zeros) and V into Vp (N x Dp, Dp = D rounded up to the vector width); then per group
# of RB = 4 query rows, the scores of the group (RB x Np, in L1) are computed in registers (Q read in place, one
# broadcast per element), alpha, the mask and the softmax run over the whole padded row (padding is -inf: exp 0), and
# the product with Vp is accumulated in registers and scaled by 1 / (sum of the exps) on the way out. Every row is
# computed the same way whatever the thread split (items x row blocks over the threads, one each).
# With ATP_BF16 (bf16 sessions: ops/_bf16.py bf16_attention) both products run on bf16 operands instead, on the bf16
# GEMM's micro-kernel and packings (attention.h onnxep_atb_rows), 12 query rows per block, the softmax unchanged.

cdef extern from "_native/attention.h":
    enum:
        AT_VL "ONNXEP_AT_VL"
        AT_RB "ONNXEP_AT_RB"
        AT_PAD "ONNXEP_AT_PAD"
    void at_scores "onnxep_at_scores"(int rb, const float* q, Py_ssize_t rsq, Py_ssize_t csq, const float* kp,
                                      Py_ssize_t K, Py_ssize_t Np, float* s) noexcept nogil
    void at_rows "onnxep_at_rows"(int rb, const float* q, Py_ssize_t rsq, Py_ssize_t csq, const float* kp,
                                  Py_ssize_t K, Py_ssize_t N, Py_ssize_t Np, const float* vp, Py_ssize_t D,
                                  Py_ssize_t Dp, float alpha, const float* const* mrows, float* s, float* o, float* y,
                                  Py_ssize_t rsy, Py_ssize_t csy, int nan_zero) noexcept nogil
    void at_rows_kv "onnxep_at_rows_kv"(int rb, const float* q, Py_ssize_t rsq, const float* kk, Py_ssize_t ldk,
                                        Py_ssize_t K, Py_ssize_t N, Py_ssize_t Np, const float* v, Py_ssize_t ldv,
                                        Py_ssize_t D, float alpha, const float* const* mrows, float* s, float* y,
                                        Py_ssize_t rsy, Py_ssize_t csy, int nan_zero) noexcept nogil
    # the bf16 rows (onnxep.compute_precision=bf16): both products on the bf16 GEMM's micro-kernel and packings
    enum:
        ATB_RB "ONNXEP_ATB_RB"
    ctypedef struct atb_work "onnxep_atb_work":
        float* s
        float* mbuf
    Py_ssize_t atb_work_init "onnxep_atb_work_init"(float* w, Py_ssize_t N, Py_ssize_t K, Py_ssize_t D, Py_ssize_t Np,
                                                    atb_work* wk) noexcept nogil
    void atb_pack_k "onnxep_atb_pack_k"(int kern, const float* k, Py_ssize_t rsk, Py_ssize_t csk, Py_ssize_t K,
                                        Py_ssize_t N, const atb_work* w) noexcept nogil
    void atb_pack_v "onnxep_atb_pack_v"(int kern, const float* v, Py_ssize_t rsv, Py_ssize_t csv, Py_ssize_t N,
                                        Py_ssize_t D, const atb_work* w) noexcept nogil
    void atb_rows "onnxep_atb_rows"(int kern, int rb, const float* q, Py_ssize_t rsq, Py_ssize_t csq, Py_ssize_t K,
                                    Py_ssize_t N, Py_ssize_t Np, Py_ssize_t D, float alpha, const float* const* mrows,
                                    const atb_work* w, float* y, Py_ssize_t rsy, Py_ssize_t csy,
                                    int nan_zero) noexcept nogil

from cpython.buffer cimport PyBUF_SIMPLE, PyBuffer_Release, PyObject_GetBuffer

cdef extern from "<stdlib.h>":
    void* aligned_alloc(size_t alignment, size_t size) noexcept nogil

cdef enum:
    ATTN_ROWS_MIN = 16    # fewest query rows per task when a head's rows are split over the threads
    ATTN_NMASK_MAX = 3    # masks combined per call (the run loop step's slots)
    ATTN_RB_MAX = 12      # query rows per register block, the larger of AT_RB (fp32) and ATB_RB (bf16)

#: masks attention_masked_f32 combines per call
ATTN_MAX_MASKS = ATTN_NMASK_MAX
#: query rows up to which the fp32 attention reads K and V as stored, packing neither (batch-1 decoding)
ATTN_DIRECT_ROWS = AT_RB


cdef struct AttnJob:
    Py_ssize_t M, N, K, D, rsq, csq, rsk, csk, rsv, csv, rsy, csy, nblk, rows, wlen, Np, Dp
    float alpha
    int nmask, nan_zero
    int kern              # -1: fp32; else the bf16 micro-kernel (bgemm.h BG_*) of both products
    # the masks, applied in order to a row that starts at 0: kind 0 adds a float32 mask, kind 1 keeps the row where
    # a bool mask is true and puts fill elsewhere; each addressed by one element offset per scores row and a column
    # stride 0 / 1
    const char* mask[ATTN_NMASK_MAX]
    const int64_t* mask_off[ATTN_NMASK_MAX]
    Py_ssize_t mask_cs[ATTN_NMASK_MAX]
    int mask_kind[ATTN_NMASK_MAX]
    float mask_fill[ATTN_NMASK_MAX]
    const float* q
    const float* k
    const float* v
    float* y
    const int64_t* q_off
    const int64_t* k_off
    const int64_t* v_off
    const int64_t* y_off
    float* buf
    Py_ssize_t* packed     # per thread: the item whose K^T / V its workspace holds (-1: none)


cdef inline Py_ssize_t attn_work_len(Py_ssize_t N, Py_ssize_t K, Py_ssize_t D, Py_ssize_t Np,
                                     Py_ssize_t Dp) noexcept nogil:
    """Floats of one thread's workspace: Kp (K x Np), Vp (N x Dp), scores (RB x Np), RB padded mask rows, the
    output scratch (RB x Dp), each rounded up to 16 floats (64 bytes)."""
    return (_round_up(K * Np, 16) + _round_up(N * Dp, 16) + 2 * AT_RB * Np + _round_up(AT_RB * Dp, 16) + 16)


cdef void _attn_block(const AttnJob* j, Py_ssize_t t, Py_ssize_t blk, float* w, Py_ssize_t* packed) noexcept nogil:
    """Query rows blk*rows .. of item t, `w` the thread's workspace (64-byte aligned), packed[0] the item whose K^T
    and V it holds (another item reading the same K and V, a grouped-query head, reuses them)."""
    cdef Py_ssize_t Np = j.Np, Dp = j.Dp, N = j.N, K = j.K, D = j.D
    cdef Py_ssize_t i0 = blk * j.rows, i1 = min(j.M, i0 + j.rows), i, n, kk, d, r, rb
    cdef Py_ssize_t rbmax = AT_RB if j.kern < 0 else ATB_RB
    cdef float* kp = w
    cdef float* vp = NULL
    cdef float* s = NULL
    cdef float* mbuf = NULL
    cdef float* o = NULL
    cdef atb_work bw
    cdef const float* src
    cdef const float* mrows[ATTN_RB_MAX]
    cdef const char* mlast[ATTN_RB_MAX][ATTN_NMASK_MAX]
    cdef const char* mp
    cdef bint same, direct
    cdef int m
    cdef float* dst
    if j.kern >= 0:
        atb_work_init(w, N, K, D, Np, &bw)
        mbuf = bw.mbuf
    else:                  # the fp32 workspace (attn_work_len)
        vp = kp + _round_up(K * Np, 16)
        s = vp + _round_up(N * Dp, 16)
        mbuf = s + AT_RB * Np
        o = mbuf + AT_RB * Np
    # a few query rows (batch-1 decoding): K and V read as stored (at_rows_kv), nothing packed
    direct = j.kern < 0 and j.M <= AT_RB and j.N > 0 and j.rsk == 1 and j.csv == 1 and j.csq == 1
    if not direct and (packed[0] < 0 or j.k_off[packed[0]] != j.k_off[t] or j.v_off[packed[0]] != j.v_off[t]):
        if j.kern >= 0:
            atb_pack_k(j.kern, j.k + j.k_off[t] if K > 0 else NULL, j.rsk, j.csk, K, N, &bw)
            atb_pack_v(j.kern, j.v + j.v_off[t], j.rsv, j.csv, N, D, &bw)
        else:
            src = j.k + j.k_off[t]       # Kp[kk, n] = Kt[kk, n] = k[kk*rsk + n*csk], zeros for n >= N
            if j.rsk == 1 and j.csk != 1 and K > 0:   # K as stored, a key's row contiguous: a tiled transpose
                _gemm_tr_tile(4, <const uint8_t*>src, j.csk, <uint8_t*>kp, Np, K, N)
            for kk in range(K):
                dst = kp + kk * Np
                if j.csk == 1:
                    memcpy(dst, src + kk * j.rsk, N * sizeof(float))
                elif j.rsk != 1:
                    for n in range(N):
                        dst[n] = src[kk * j.rsk + n * j.csk]
                for n in range(N, Np):
                    dst[n] = 0.0
            src = j.v + j.v_off[t]       # Vp[n, d] = v[n*rsv + d*csv], zeros for d >= D
            for n in range(N):
                dst = vp + n * Dp
                if j.csv == 1:
                    memcpy(dst, src + n * j.rsv, D * sizeof(float))
                else:
                    for d in range(D):
                        dst[d] = src[n * j.rsv + d * j.csv]
                for d in range(D, Dp):
                    dst[d] = 0.0
        packed[0] = t
    for r in range(rbmax):
        for m in range(ATTN_NMASK_MAX):
            mlast[r][m] = NULL
    i = i0
    while i < i1:
        rb = min(rbmax, i1 - i)
        for r in range(rb):    # the combined mask row, padded to Np (rows repeated by a broadcast mask built once)
            same = True
            for m in range(j.nmask):
                mp = j.mask[m] + j.mask_off[m][t * j.M + i + r] * (4 if j.mask_kind[m] == 0 else 1)
                if mp != mlast[r][m]:
                    same = False
                    mlast[r][m] = mp
            if not same:
                _attn_mask_row(j, mbuf + r * Np, &mlast[r][0])
            mrows[r] = mbuf + r * Np
        if direct:
            at_rows_kv(<int>rb, j.q + j.q_off[t] + i * j.rsq, j.rsq, j.k + j.k_off[t], j.csk, K, N, Np,
                       j.v + j.v_off[t], j.rsv, D, j.alpha, mrows if j.nmask > 0 else NULL, s,
                       j.y + j.y_off[t] + i * j.rsy, j.rsy, j.csy, j.nan_zero)
        elif j.kern >= 0:
            atb_rows(j.kern, <int>rb, j.q + j.q_off[t] + i * j.rsq if K > 0 else NULL, j.rsq, j.csq, K, N, Np, D,
                     j.alpha, mrows if j.nmask > 0 else NULL, &bw, j.y + j.y_off[t] + i * j.rsy, j.rsy, j.csy,
                     j.nan_zero)
        else:
            at_rows(<int>rb, j.q + j.q_off[t] + i * j.rsq, j.rsq, j.csq, kp, K, N, Np, vp, D, Dp, j.alpha,
                    mrows if j.nmask > 0 else NULL, s, o, j.y + j.y_off[t] + i * j.rsy, j.rsy, j.csy, j.nan_zero)
        i += rb


cdef void _attn_mask_row(const AttnJob* j, float* dst, const char** mp) noexcept nogil:
    """dst[:N] := the masks combined for one scores row (mp[m]: mask m's row)."""
    cdef Py_ssize_t n, N = j.N, cs
    cdef int m
    cdef const float* f
    cdef const uint8_t* c
    cdef float fill
    for m in range(j.nmask):
        cs = j.mask_cs[m]
        if j.mask_kind[m] == 0:
            f = <const float*>mp[m]
            if m == 0 and cs == 1:
                memcpy(dst, f, N * sizeof(float))
            elif m == 0:
                for n in range(N):
                    dst[n] = f[0]
            else:
                for n in range(N):
                    dst[n] = dst[n] + f[n * cs]
        else:
            c = <const uint8_t*>mp[m]
            fill = j.mask_fill[m]
            for n in range(N):
                if m == 0:
                    dst[n] = 0.0 if c[n * cs] else fill
                elif not c[n * cs]:
                    dst[n] = fill


cdef void _attn_task(void* p, Py_ssize_t it, int tid) noexcept nogil:
    cdef AttnJob* j = <AttnJob*>p
    _attn_block(j, it // j.nblk, it % j.nblk, j.buf + <Py_ssize_t>tid * j.wlen, j.packed + tid)


def attention_f32(const float[::1] q, const float[::1] k, const float[::1] v, const float[::1] mask, float[::1] y,
                  const int64_t[::1] q_off, const int64_t[::1] k_off, const int64_t[::1] v_off,
                  const int64_t[::1] y_off, const int64_t[::1] mask_off, Py_ssize_t mask_cs,
                  Py_ssize_t M, Py_ssize_t N, Py_ssize_t K, Py_ssize_t D, Py_ssize_t rsq, Py_ssize_t csq,
                  Py_ssize_t rsk, Py_ssize_t csk, Py_ssize_t rsv, Py_ssize_t csv, Py_ssize_t rsy, Py_ssize_t csy,
                  float alpha=1.0, int nthreads=0):
    """Y_t := softmax(alpha * Q_t @ Kt_t [+ mask_t]) @ V_t for every item t (see above). mask may be None (then
    mask_off is not read and may be None too); else mask_off holds one offset per scores row (T * M). Strides >= 0; the Y_t of
    different items must not overlap (not checked). N == 0 (no keys) is an error: softmax over nothing."""
    cdef Py_ssize_t T = q_off.shape[0], t, i
    cdef AttnJob job
    cdef int64_t o
    if k_off.shape[0] != T or v_off.shape[0] != T or y_off.shape[0] != T:
        raise ValueError(f"attention_f32: {T} Q offsets, {k_off.shape[0]} K, {v_off.shape[0]} V, "
                         f"{y_off.shape[0]} Y")
    if M < 0 or N < 0 or K < 0 or D < 0 or min(rsq, csq, rsk, csk, rsv, csv, rsy, csy) < 0:
        raise ValueError(f"attention_f32: negative size or stride (M={M}, N={N}, K={K}, D={D})")
    if T == 0 or M == 0 or D == 0:
        return
    if N == 0:
        raise ValueError("attention_f32: no keys (N = 0): the softmax of an empty row is undefined")
    for t in range(T):   # bounds: the last element of each operand is inside its buffer
        if (q_off[t] < 0 or k_off[t] < 0 or v_off[t] < 0 or y_off[t] < 0
                or y_off[t] + (M - 1) * rsy + (D - 1) * csy >= y.shape[0]
                or v_off[t] + (N - 1) * rsv + (D - 1) * csv >= v.shape[0]
                or (K > 0 and (q_off[t] + (M - 1) * rsq + (K - 1) * csq >= q.shape[0]
                               or k_off[t] + (K - 1) * rsk + (N - 1) * csk >= k.shape[0]))):
            raise ValueError(f"attention_f32: item {t} (offsets {q_off[t]}, {k_off[t]}, {v_off[t]}, {y_off[t]}) "
                             f"reaches outside the buffers of {q.shape[0]}, {k.shape[0]}, {v.shape[0]}, "
                             f"{y.shape[0]} elements for M={M}, N={N}, K={K}, D={D}")
    if mask is not None:
        if mask_off is None or mask_off.shape[0] != T * M or mask_cs not in (0, 1):
            raise ValueError(f"attention_f32: {0 if mask_off is None else mask_off.shape[0]} mask offsets for "
                             f"{T * M} scores rows, column stride {mask_cs} (0 or 1)")
        for i in range(T * M):
            o = mask_off[i]
            if o < 0 or o + (N - 1) * mask_cs >= mask.shape[0]:
                raise ValueError(f"attention_f32: scores row {i}'s mask (offset {o}) reaches outside the mask's "
                                 f"{mask.shape[0]} elements")
    job.M, job.N, job.K, job.D, job.alpha = M, N, K, D, alpha
    job.rsq, job.csq, job.rsk, job.csk, job.rsv, job.csv, job.rsy, job.csy = rsq, csq, rsk, csk, rsv, csv, rsy, csy
    job.q, job.k, job.v, job.y = NULL, NULL, &v[0], &y[0]
    if K > 0:
        job.q, job.k = &q[0], &k[0]
    job.q_off, job.k_off, job.v_off, job.y_off = &q_off[0], &k_off[0], &v_off[0], &y_off[0]
    job.nmask, job.nan_zero, job.kern = 0, 0, -1
    if mask is not None:
        job.nmask = 1
        job.mask[0], job.mask_off[0], job.mask_cs[0], job.mask_kind[0] = <const char*>&mask[0], &mask_off[0], mask_cs, 0
    attention_run(&job, T, nthreads)


cdef enum:
    # attention_masked_f32's integer parameters (and the run loop's RL_ATTENTION ints), floats: alpha, fill 0 .. 2
    ATP_T = 0
    ATP_M = 1
    ATP_N = 2
    ATP_K = 3
    ATP_D = 4
    ATP_RSQ = 5           # rsq, csq, rsk, csk, rsv, csv, rsy, csy
    ATP_NAN_ZERO = 13
    ATP_NMASK = 14
    ATP_BF16 = 15         # 1: both products on bf16 operands (the bgemm micro-kernel bg_kernel picks), 0: fp32
    ATP_MASK = 16         # (kind, column stride) per mask
    ATP_LEN = 16 + 2 * ATTN_NMASK_MAX


cdef void attention_job(AttnJob* job, char** ptrs, const Py_ssize_t* n, const float* f) noexcept nogil:
    """Fill `job` from ptrs (q, k, v, y, offsets, masks 0 .. 2) and the parameters (ATP_*). The offsets array holds
    T Q offsets, T K, T V, T Y, then T*M row offsets per mask."""
    cdef Py_ssize_t T = n[ATP_T], TM = n[ATP_T] * n[ATP_M]
    cdef const int64_t* offs = <const int64_t*>ptrs[4]
    cdef int m
    job.M, job.N, job.K, job.D = n[ATP_M], n[ATP_N], n[ATP_K], n[ATP_D]
    job.rsq, job.csq, job.rsk, job.csk = n[ATP_RSQ], n[ATP_RSQ + 1], n[ATP_RSQ + 2], n[ATP_RSQ + 3]
    job.rsv, job.csv, job.rsy, job.csy = n[ATP_RSQ + 4], n[ATP_RSQ + 5], n[ATP_RSQ + 6], n[ATP_RSQ + 7]
    job.alpha = f[0]
    job.q, job.k, job.v, job.y = <const float*>ptrs[0], <const float*>ptrs[1], <const float*>ptrs[2], <float*>ptrs[3]
    job.q_off, job.k_off, job.v_off, job.y_off = offs, offs + T, offs + 2 * T, offs + 3 * T
    job.nan_zero = <int>n[ATP_NAN_ZERO]
    job.nmask = <int>n[ATP_NMASK]
    job.kern = bg_kernel() if n[ATP_BF16] else -1
    for m in range(job.nmask):
        job.mask[m] = ptrs[5 + m]
        job.mask_off[m] = offs + 4 * T + m * TM
        job.mask_kind[m] = <int>n[ATP_MASK + 2 * m]
        job.mask_cs[m] = n[ATP_MASK + 2 * m + 1]
        job.mask_fill[m] = f[1 + m]


cdef inline char* _buf_addr(object obj, Py_ssize_t* nbytes) except? NULL:
    cdef Py_buffer view
    cdef char* addr
    PyObject_GetBuffer(obj, &view, PyBUF_SIMPLE)
    addr, nbytes[0] = <char*>view.buf, view.len
    PyBuffer_Release(&view)
    return addr


def attention_masked_f32(q, k, v, y, const int64_t[::1] offs, tuple masks, const int64_t[::1] params,
                         const float[::1] fparams, int nthreads=0):
    """attention_f32 with up to ATTN_NMASK_MAX masks combined per scores row and the NaN guard, as the run loop's
    RL_ATTENTION step runs it. q, k, v, y: C-contiguous float32 buffers; masks: float32 (kind 0: added) or bool
    (kind 1: where(mask, row, fill)) buffers, applied in order to a row starting at 0; offs: T Q, T K, T V, T Y
    offsets then T*M row offsets per mask; params: ATP_* (T, M, N, K, D, the 8 strides, nan_zero, mask count, bf16
    (1: both products on bf16 operands, bgemm's micro-kernel and packings), then (kind, column stride 0 / 1) per
    mask); fparams: alpha, then the fill per mask. nan_zero: a row whose
    probabilities are NaN (fully masked) gives zeros. Every operand access is checked against its buffer first."""
    cdef char* ptrs[5 + ATTN_NMASK_MAX]
    cdef Py_ssize_t nb[4 + ATTN_NMASK_MAX]
    cdef Py_ssize_t n[ATP_LEN]
    cdef float f[1 + ATTN_NMASK_MAX]
    cdef Py_ssize_t T, M, N, K, D, i, t, cs, es, lim
    cdef int nm, m
    cdef AttnJob job
    cdef int64_t o
    if params.shape[0] < ATP_MASK or params[ATP_NMASK] != len(masks) or len(masks) > ATTN_NMASK_MAX or \
            params.shape[0] != ATP_MASK + 2 * len(masks) or fparams.shape[0] != 1 + len(masks) or \
            params[ATP_BF16] not in (0, 1):
        raise ValueError(f"attention_masked_f32: {params.shape[0]} parameters, {fparams.shape[0]} floats for "
                         f"{len(masks)} masks (at most {ATTN_NMASK_MAX})")
    for i in range(params.shape[0]):
        n[i] = params[i]
    for i in range(fparams.shape[0]):
        f[i] = fparams[i]
    T, M, N, K, D, nm = n[ATP_T], n[ATP_M], n[ATP_N], n[ATP_K], n[ATP_D], <int>n[ATP_NMASK]
    for i, x in enumerate((q, k, v, y) + masks):
        ptrs[i if i < 4 else i + 1] = _buf_addr(x, &nb[i])
    if T < 0 or M < 0 or N < 0 or K < 0 or D < 0 or min(params[ATP_RSQ:ATP_RSQ + 8]) < 0:
        raise ValueError(f"attention_masked_f32: negative size or stride in {list(params)}")
    if offs.shape[0] != 4 * T + nm * T * M:
        raise ValueError(f"attention_masked_f32: {offs.shape[0]} offsets, expected {4 * T + nm * T * M}")
    if T == 0 or M == 0 or D == 0:
        return
    if N == 0:
        raise ValueError("attention_masked_f32: no keys (N = 0): the softmax of an empty row is undefined")
    for t in range(T):   # bounds, in elements of 4 bytes
        if (offs[t] < 0 or offs[T + t] < 0 or offs[2 * T + t] < 0 or offs[3 * T + t] < 0
                or offs[3 * T + t] + (M - 1) * n[ATP_RSQ + 6] + (D - 1) * n[ATP_RSQ + 7] >= nb[3] // 4
                or offs[2 * T + t] + (N - 1) * n[ATP_RSQ + 4] + (D - 1) * n[ATP_RSQ + 5] >= nb[2] // 4
                or (K > 0 and (offs[t] + (M - 1) * n[ATP_RSQ] + (K - 1) * n[ATP_RSQ + 1] >= nb[0] // 4
                               or offs[T + t] + (K - 1) * n[ATP_RSQ + 2] + (N - 1) * n[ATP_RSQ + 3] >= nb[1] // 4))):
            raise ValueError(f"attention_masked_f32: item {t} reaches outside the buffers")
    for m in range(nm):
        if n[ATP_MASK + 2 * m] not in (0, 1) or n[ATP_MASK + 2 * m + 1] not in (0, 1):
            raise ValueError(f"attention_masked_f32: mask {m}: kind {n[ATP_MASK + 2 * m]} (0 float, 1 bool), "
                             f"column stride {n[ATP_MASK + 2 * m + 1]} (0 or 1)")
        es = 4 if n[ATP_MASK + 2 * m] == 0 else 1
        cs = n[ATP_MASK + 2 * m + 1]
        lim = nb[4 + m] // es
        for i in range(T * M):
            o = offs[4 * T + m * T * M + i]
            if o < 0 or o + (N - 1) * cs >= lim:
                raise ValueError(f"attention_masked_f32: scores row {i}'s mask {m} (offset {o}) reaches outside "
                                 f"the mask's {lim} elements")
    ptrs[4] = <char*>&offs[0]
    attention_job(&job, ptrs, n, f)
    with nogil:
        attention_run(&job, T, nthreads)


cdef int attention_run(AttnJob* job, Py_ssize_t T, int nthreads) except -1 nogil:
    """attention_run_raw, MemoryError when the workspace cannot be allocated."""
    if attention_run_raw(job, T, nthreads) != 0:
        with gil:
            raise MemoryError(f"attention: cannot allocate the workspace for N={job.N}, K={job.K}, D={job.D}")
    return 0


cdef int attention_run_raw(AttnJob* job, Py_ssize_t T, int nthreads) noexcept nogil:
    """Run the items of a filled-in job (operands, offsets, sizes; the rest is set here) on the thread pool: one
    thread below the SGEMM's flop break-even (counting an exp as ~24 flops), else (item, row block) tasks, a head's
    rows split into blocks of at least ATTN_ROWS_MIN only when there are too few items to share."""
    cdef Py_ssize_t M = job.M, N = job.N, K = job.K, D = job.D, items, i, nr
    cdef int nth = _nthreads(nthreads)
    if not gemm_splits(<double>T * M * N * (2.0 * (K + D) + 24.0), nth):
        nth = 1
    job.Np = _round_up(N, AT_PAD)
    job.Dp = _round_up(D, AT_VL)
    job.nblk = 1
    if nth > 1 and T < 4 * nth:
        job.nblk = max(<Py_ssize_t>1, min((M + ATTN_ROWS_MIN - 1) // ATTN_ROWS_MIN, (4 * nth + T - 1) // T))
    job.rows = (M + job.nblk - 1) // job.nblk
    job.nblk = (M + job.rows - 1) // job.rows
    job.wlen = attn_work_len(N, K, D, job.Np, job.Dp) if job.kern < 0 else atb_work_init(NULL, N, K, D, job.Np, NULL)
    items = T * job.nblk
    nth = <int>min(<Py_ssize_t>nth, items)
    nr = nth
    if job.wlen > (<Py_ssize_t>1 << 60) // (nr * <Py_ssize_t>sizeof(float)):
        return -1
    job.buf = <float*>aligned_alloc(64, _round_up(nr * job.wlen * sizeof(float), 64))
    job.packed = <Py_ssize_t*>malloc(nr * sizeof(Py_ssize_t))
    if job.buf == NULL or job.packed == NULL:
        free(job.buf)
        free(job.packed)
        return -1
    for i in range(nr):
        job.packed[i] = -1
    if nth > 1:
        parallel_for(items, nth, _attn_task, job)
    else:
        for i in range(items):
            _attn_block(job, i // job.nblk, i % job.nblk, job.buf, job.packed)
    free(job.buf)
    free(job.packed)
    return 0
