# int8 GEMM (issue 29): u8 x s8 -> s32 exact, weights packed once; MatMulInteger, DynamicQuantizeLinear and the fused
# DynamicQuantizeMatMul call these. The C (packing, micro-kernels, epilogue) is onnxep/_native/qgemm.h.

from libc.stdlib cimport malloc, free
from libc.stdint cimport int32_t

cdef extern from "_native/qgemm.h":
    ctypedef struct qg_args:
        const uint8_t* Ap
        int64_t lda4
        const int32_t* rs
        const uint8_t* Bp
        const int32_t* cs
        int64_t M, N, K, K4
        const int32_t* za
        int za_stride
        const int32_t* zb
        int zb_stride
        int32_t* Yi
        float* Yf
        int64_t ldy
        const float* scale
        int scale_stride
        const float* bias
        uint8_t* Yq
        const int32_t* bias_i
        float yzp, qlo, qhi
        int y_signed
        int kern
        int64_t nmb, nnb
    int QG_MB, QG_NB
    int qg_force
    int64_t qg_k4(int64_t K) noexcept nogil
    int64_t qg_np(int64_t N) noexcept nogil
    int64_t qg_pack_b_bytes(int64_t K, int64_t N) noexcept nogil
    void qg_pack_b(const uint8_t* B, int b_signed, int64_t K, int64_t N, int64_t ldb, uint8_t* out) noexcept nogil
    void qg_pack_a(const uint8_t* A, int a_signed, int64_t M, int64_t K, int64_t lda, uint8_t* out,
                   int32_t* rs) noexcept nogil
    int qg_have(int k) noexcept nogil
    int qg_kernel() noexcept nogil
    void qg_item(void* ctx, Py_ssize_t item, int tid) noexcept nogil
    int qg_dql_params(const float* x, int64_t n, float* scale, uint8_t* zp) noexcept nogil
    void qg_quantize_tensor(const float* x, int64_t n, float scale, float zp, int is_signed,
                            uint8_t* y) noexcept nogil
    void qg_dequantize_tensor(const uint8_t* q, int64_t n, int is_signed, float scale, float zp,
                              float* y) noexcept nogil
    void qg_qdq_tensor(const float* x, int64_t n, float scale, float zp, int is_signed, float* y) noexcept nogil
    void qg_quantize_rows(const float* x, int64_t M, int64_t K, float scale, uint8_t zp, uint8_t* y, int64_t ldy,
                          int32_t* rs) noexcept nogil
    void qg_qadd_range(const uint8_t* a, int a_s, float sa, float za, const uint8_t* b, int bs, float sb, float zb,
                       int64_t nb, int64_t i0, int64_t i1, float ys, float yz, int y_signed, uint8_t* y) noexcept nogil

#: names the packed int8 B layout (16-column panels of 4-byte k groups, s8, then int32 column sums)
QGEMM_FORMAT = "qgemm_u8s8:p16k4:v1"
QGEMM_KERNELS = ("generic", "avx2", "vnni")


def qgemm_pack_b_size(int64_t K, int64_t N):
    """Bytes of the packed B of a (K, N) int8 / uint8 weight."""
    return qg_pack_b_bytes(K, N)


def qgemm_pack_b(const uint8_t[:, ::1] B, bint b_signed, uint8_t[::1] out):
    """Packs B (K, N) (its bytes; b_signed: int8) into out (qgemm_pack_b_size bytes)."""
    cdef int64_t K = B.shape[0], N = B.shape[1]
    if out.shape[0] < qg_pack_b_bytes(K, N):
        raise ValueError("qgemm_pack_b: output too small")
    with nogil:
        qg_pack_b(&B[0, 0] if K * N else NULL, b_signed, K, N, N, &out[0])


def qgemm_kernel():
    """The micro-kernel qgemm uses now: 'generic', 'avx2' or 'vnni'."""
    return QGEMM_KERNELS[qg_kernel()]


def qgemm_have(name):
    """Whether this variant on this CPU can run micro-kernel `name`."""
    return bool(qg_have(QGEMM_KERNELS.index(name)))


def qgemm_force(name):
    """Tests: force micro-kernel `name` (None: the best available)."""
    global qg_force
    qg_force = -1 if name is None else QGEMM_KERNELS.index(name)


cdef int _qg_threads(int64_t M, int64_t N, int64_t K, int nthreads, int64_t items) noexcept nogil:
    # one thread below ~2M multiply-adds (about 20 us with vpdpbusd): a wake-up costs more than it saves
    if M * N * K < 2000000 or items < 2:
        return 1
    return _nthreads(nthreads)


cdef int _qg_run(const uint8_t* Ap, int64_t lda4, const int32_t* rs, const uint8_t* Bp, int64_t M, int64_t N,
                 int64_t K, const int32_t* za, int za_stride, const int32_t* zb, int zb_stride, int32_t* Yi,
                 float* Yf, int64_t ldy, const float* scale, int scale_stride, const float* bias,
                 int nthreads) noexcept nogil:
    cdef qg_args a
    cdef int64_t K4 = qg_k4(K)
    a.Ap = Ap; a.lda4 = lda4; a.rs = rs; a.Bp = Bp
    a.cs = <const int32_t*>(Bp + qg_np(N) * 16 * K4 * 4)
    a.M = M; a.N = N; a.K = K; a.K4 = K4
    a.za = za; a.za_stride = za_stride; a.zb = zb; a.zb_stride = zb_stride
    a.Yi = Yi; a.Yf = Yf; a.ldy = ldy
    a.scale = scale; a.scale_stride = scale_stride; a.bias = bias
    a.Yq = NULL; a.bias_i = NULL; a.yzp = 0; a.qlo = 0; a.qhi = 0; a.y_signed = 0
    a.kern = qg_kernel()
    a.nmb = (M + QG_MB - 1) // QG_MB
    a.nnb = (N + QG_NB - 1) // QG_NB
    cdef int64_t items = a.nmb * a.nnb
    parallel_for(items, _qg_threads(M, N, K, nthreads, items), <task_fn>qg_item, &a)
    return 0


def qgemm(const uint8_t[:, ::1] A, bint a_signed, const uint8_t[::1] Bp, int64_t K, int64_t N,
          const int32_t[::1] za, const int32_t[::1] zb, int32_t[:, ::1] Y, int nthreads=0):
    """Y (M, N) int32 = (A - za) @ (B - zb) exactly (mod 2**32), B packed by qgemm_pack_b. A (M, K) bytes (a_signed:
    int8). za: 1 or M int32 zero points of A (as A's values); zb: 1 or N of B, already shifted for a uint8 B (zb - 128,
    the packing stores B - 128)."""
    cdef int64_t M = A.shape[0], K4 = qg_k4(K)
    if A.shape[1] != K or Y.shape[0] != M or Y.shape[1] != N or Bp.shape[0] < qg_pack_b_bytes(K, N):
        raise ValueError("qgemm: shapes do not match")
    if za.shape[0] not in (1, M) or zb.shape[0] not in (1, N):
        raise ValueError("qgemm: zero points must have 1 or M (A) / N (B) elements")
    if M == 0 or N == 0:
        return
    cdef int32_t* zas = NULL
    cdef uint8_t* ap = <uint8_t*>malloc(M * K4 * 4 + M * 4 + M * 4 + 64)
    if ap == NULL:
        raise MemoryError()
    cdef int32_t* rs = <int32_t*>(ap + ((M * K4 * 4 + 15) // 16) * 16)
    zas = rs + M
    cdef int64_t i
    cdef int zs = 1 if za.shape[0] == M and M > 1 else 0
    with nogil:
        for i in range(M if zs else 1):
            zas[i] = za[i] + (128 if a_signed else 0)
        if K:
            qg_pack_a(&A[0, 0], a_signed, M, K, K, ap, rs)
        else:
            for i in range(M):
                rs[i] = 0
        _qg_run(ap, K4 * 4, rs, &Bp[0], M, N, K, zas, zs, &zb[0], 1 if zb.shape[0] == N and N > 1 else 0,
                &Y[0, 0], NULL, N, NULL, 0, NULL, nthreads)
    free(ap)


def dynamic_quantize_linear_u8(const float[::1] x, uint8_t[::1] y):
    """ONNX DynamicQuantizeLinear of x into y; returns (scale, zero_point)."""
    cdef float s
    cdef uint8_t z
    cdef int64_t n = x.shape[0]
    if y.shape[0] != n:
        raise ValueError("dynamic_quantize_linear_u8: shapes do not match")
    with nogil:
        qg_dql_params(&x[0] if n else NULL, n, &s, &z)
        if n:
            qg_quantize_rows(&x[0], 1, n, s, z, &y[0], n, NULL)
    return s, z


def dq_matmul_f32(const float[:, ::1] A, const uint8_t[::1] Bp, int64_t K, int64_t N, const int32_t[::1] zb,
                  const float[::1] b_scale, const float[::1] bias, float[:, ::1] Y, int nthreads=0):
    """onnxruntime's DynamicQuantizeMatMul: A (M, K) float32 quantized as DynamicQuantizeLinear does (scale_a, za),
    Y = float((Aq - za) @ (B - zb)) * (scale_a * b_scale[n]) (+ bias[n]). zb as qgemm's (shifted for a uint8 B);
    b_scale 1 or N elements. Returns (scale_a, za)."""
    cdef int64_t M = A.shape[0], K4 = qg_k4(K)
    if A.shape[1] != K or Y.shape[0] != M or Y.shape[1] != N or Bp.shape[0] < qg_pack_b_bytes(K, N):
        raise ValueError("dq_matmul_f32: shapes do not match")
    if zb.shape[0] not in (1, N) or b_scale.shape[0] not in (1, N) or (bias is not None and bias.shape[0] != N):
        raise ValueError("dq_matmul_f32: zero point / scale / bias sizes")
    cdef float sa
    cdef uint8_t z
    cdef int32_t za
    cdef int64_t i
    cdef int ss = 1 if b_scale.shape[0] == N and N > 1 else 0
    if M == 0 or N == 0:
        return
    cdef uint8_t* ap = <uint8_t*>malloc(M * K4 * 4 + M * 4 + N * 4 + 64)
    if ap == NULL:
        raise MemoryError()
    cdef int32_t* rs = <int32_t*>(ap + ((M * K4 * 4 + 15) // 16) * 16)
    cdef float* sc = <float*>(rs + M)
    cdef const float* bp = &bias[0] if bias is not None else NULL
    with nogil:
        qg_dql_params(&A[0, 0] if K else NULL, M * K, &sa, &z)
        za = z
        for i in range(N if ss else 1):
            sc[i] = sa * b_scale[i]
        if K:
            qg_quantize_rows(&A[0, 0], M, K, sa, z, ap, K4 * 4, rs)
        else:
            for i in range(M):
                rs[i] = 0
        _qg_run(ap, K4 * 4, rs, &Bp[0], M, N, K, &za, 0, &zb[0], 1 if zb.shape[0] == N and N > 1 else 0,
                NULL, &Y[0, 0], N, sc, ss, bp, nthreads)
    free(ap)
    return sa, z


cdef int _qg_dq_matmul_raw(const float* A, const uint8_t* Bp, int64_t M, int64_t K, int64_t N, const int32_t* zb,
                           int zb_stride, const float* b_scale, int scale_stride, const float* bias, float* Y,
                           int nthreads) noexcept nogil:
    """dq_matmul_f32 on raw pointers (the run loop's RL_DQ_MATMUL step): 0, or 1 when A holds a NaN or no memory
    (Y untouched; the caller runs the kernel's compute)."""
    cdef int64_t K4 = qg_k4(K), i
    cdef float sa
    cdef uint8_t z
    cdef int32_t za
    if M == 0 or N == 0:
        return 0
    if K == 0 or qg_dql_params(A, M * K, &sa, &z) != 0:
        return 1
    cdef uint8_t* ap = <uint8_t*>malloc(M * K4 * 4 + M * 4 + N * 4 + 64)
    if ap == NULL:
        return 1
    cdef int32_t* rs = <int32_t*>(ap + ((M * K4 * 4 + 15) // 16) * 16)
    cdef float* sc = <float*>(rs + M)
    za = z
    for i in range(N if scale_stride else 1):
        sc[i] = sa * b_scale[i]
    qg_quantize_rows(A, M, K, sa, z, ap, K4 * 4, rs)
    _qg_run(ap, K4 * 4, rs, Bp, M, N, K, &za, 0, zb, zb_stride, NULL, Y, N, sc, scale_stride, bias, nthreads)
    free(ap)
    return 0


def quantize_tensor_f32(const float[::1] x, float scale, float zp, bint is_signed, uint8_t[::1] y):
    """QuantizeLinear per tensor, float32 -> int8 (is_signed; y holds its bytes) or uint8."""
    if x.shape[0] != y.shape[0]:
        raise ValueError("quantize_tensor_f32: sizes differ")
    if x.shape[0]:
        with nogil:
            qg_quantize_tensor(&x[0], x.shape[0], scale, zp, is_signed, &y[0])


def dequantize_tensor_f32(const uint8_t[::1] q, bint is_signed, float scale, float zp, float[::1] y):
    """DequantizeLinear per tensor, int8 (is_signed; q its bytes) or uint8 -> float32."""
    if q.shape[0] != y.shape[0]:
        raise ValueError("dequantize_tensor_f32: sizes differ")
    if q.shape[0]:
        with nogil:
            qg_dequantize_tensor(&q[0], q.shape[0], is_signed, scale, zp, &y[0])


cdef enum:
    QG_QDQ_CHUNK = 16384    # elements per parallel chunk, as _k_eltwise.pxi's elementwise loops: below two, one thread


cdef struct QdqJob:
    const float* x
    float* y
    int64_t n
    float scale
    float zp
    int is_signed


cdef void _qdq_task(void* p, Py_ssize_t c, int tid) noexcept nogil:
    cdef QdqJob* j = <QdqJob*>p
    cdef int64_t o = c * QG_QDQ_CHUNK
    cdef int64_t m = j.n - o
    if m > QG_QDQ_CHUNK:
        m = QG_QDQ_CHUNK
    qg_qdq_tensor(j.x + o, m, j.scale, j.zp, j.is_signed, j.y + o)


cdef void _qg_qdq_run(const float* x, int64_t n, float scale, float zp, int is_signed, float* y,
                      int nthreads) noexcept nogil:
    """qg_qdq_tensor in QG_QDQ_CHUNK chunks over the pool (one thread below two chunks); y may alias x."""
    cdef QdqJob job
    cdef Py_ssize_t nchunks = (n + QG_QDQ_CHUNK - 1) // QG_QDQ_CHUNK
    job.x = x; job.y = y; job.n = n; job.scale = scale; job.zp = zp; job.is_signed = is_signed
    if nchunks < 2:
        qg_qdq_tensor(x, n, scale, zp, is_signed, y)
    else:
        parallel_for(nchunks, _nthreads(nthreads), <task_fn>_qdq_task, &job)


def qdq_tensor_f32(const float[::1] x, float scale, float zp, bint is_signed, float[::1] y, int nthreads=0):
    """QuantizeLinear then DequantizeLinear per tensor (int8 when is_signed, else uint8), float32 -> float32 in one
    pass, bit-identical to the two; chunked over the thread pool from two chunks (y may alias x)."""
    if x.shape[0] != y.shape[0]:
        raise ValueError("qdq_tensor_f32: sizes differ")
    if x.shape[0]:
        with nogil:
            _qg_qdq_run(&x[0], x.shape[0], scale, zp, is_signed, &y[0], nthreads)


cdef int _qg_qlinear_raw(const uint8_t* A, int a_signed, int64_t M, int64_t K, const uint8_t* Bp, int64_t N,
                         int32_t a_zp, const int32_t* zb, int zb_stride, const float* mult, int mult_stride,
                         const int32_t* bias, uint8_t* Y, float yzp, float qlo, float qhi, int y_signed,
                         int nthreads) noexcept nogil:
    """QLinearMatMul on raw pointers (the run loop's RL_QLINEAR_MATMUL step and qlinear_matmul): Y (M, N) bytes :=
    saturate to [qlo, qhi] of rint(float((A - a_zp) @ (B - zb) + bias) * mult) + yzp, A (M, K) bytes (int8 when
    a_signed), B packed by qg_pack_b (zb shifted as qgemm's). A uint8 A with K a multiple of 4 is read in place (its
    rows are the packed layout already); else it is packed. Returns 0, or 1 when no memory (Y untouched)."""
    cdef qg_args a
    cdef int64_t K4 = qg_k4(K), m, k
    cdef int32_t za = a_zp + (128 if a_signed else 0)
    cdef uint8_t* ap = NULL
    cdef int32_t* rs
    cdef int32_t s
    cdef const uint8_t* row
    if M == 0 or N == 0:
        return 0
    cdef int inplace = not a_signed and K == K4 * 4 and K > 0
    ap = <uint8_t*>malloc((0 if inplace else M * K4 * 4) + M * 4 + 64)
    if ap == NULL:
        return 1
    rs = <int32_t*>(ap + (0 if inplace else ((M * K4 * 4 + 15) // 16) * 16))
    if inplace:
        for m in range(M):
            row = A + m * K
            s = 0
            for k in range(K):
                s = s + row[k]
            rs[m] = s
        a.Ap = A
    elif K:
        qg_pack_a(A, a_signed, M, K, K, ap, rs)
        a.Ap = ap
    else:
        for m in range(M):
            rs[m] = 0
        a.Ap = ap
    a.lda4 = K4 * 4; a.rs = rs; a.Bp = Bp
    a.cs = <const int32_t*>(Bp + qg_np(N) * 16 * K4 * 4)
    a.M = M; a.N = N; a.K = K; a.K4 = K4
    a.za = &za; a.za_stride = 0; a.zb = zb; a.zb_stride = zb_stride
    a.Yi = NULL; a.Yf = NULL; a.ldy = N
    a.scale = mult; a.scale_stride = mult_stride; a.bias = NULL
    a.Yq = Y; a.bias_i = bias; a.yzp = yzp; a.qlo = qlo; a.qhi = qhi; a.y_signed = y_signed
    a.kern = qg_kernel()
    a.nmb = (M + QG_MB - 1) // QG_MB
    a.nnb = (N + QG_NB - 1) // QG_NB
    cdef int64_t items = a.nmb * a.nnb
    parallel_for(items, _qg_threads(M, N, K, nthreads, items), <task_fn>qg_item, &a)
    free(ap)
    return 0


def qlinear_matmul(const uint8_t[:, ::1] A, bint a_signed, const uint8_t[::1] Bp, int64_t K, int64_t N, int a_zp,
                   const int32_t[::1] zb, const float[::1] mult, const int32_t[::1] bias, uint8_t[:, ::1] Y,
                   float yzp, float qlo, float qhi, bint y_signed, int nthreads=0):
    """QLinearMatMul with a packed B (qgemm_pack_b): Y (M, N) bytes (int8 when y_signed) := saturate to [qlo, qhi] of
    rint(float((A - a_zp) @ (B - zb) + bias) * mult) + yzp; A (M, K) bytes (a_signed: int8); zb 1 or N zero points
    shifted as qgemm's (zb - 128 for a uint8 B); mult 1 or N float32 multipliers (a_scale * b_scale / y_scale); bias
    N int32 or None."""
    cdef int64_t M = A.shape[0]
    if A.shape[1] != K or Y.shape[0] != M or Y.shape[1] != N or Bp.shape[0] < qg_pack_b_bytes(K, N):
        raise ValueError("qlinear_matmul: shapes do not match")
    if zb.shape[0] not in (1, N) or mult.shape[0] not in (1, N) or (bias is not None and bias.shape[0] != N):
        raise ValueError("qlinear_matmul: zero point / multiplier / bias sizes")
    if M == 0 or N == 0:
        return
    cdef const int32_t* bp = &bias[0] if bias is not None else NULL
    cdef int rc
    with nogil:
        rc = _qg_qlinear_raw(&A[0, 0] if K else NULL, a_signed, M, K, &Bp[0], N, a_zp, &zb[0],
                             1 if zb.shape[0] == N and N > 1 else 0, &mult[0], 1 if mult.shape[0] == N and N > 1 else 0,
                             bp, &Y[0, 0], yzp, qlo, qhi, y_signed, nthreads)
    if rc:
        raise MemoryError()


cdef struct QaddJob:
    const uint8_t* a
    const uint8_t* b
    uint8_t* y
    int64_t n, nb
    int a_signed, b_signed, y_signed
    float sa, za, sb, zb, ys, yz


cdef void _qadd_task(void* p, Py_ssize_t c, int tid) noexcept nogil:
    cdef QaddJob* j = <QaddJob*>p
    cdef int64_t o = c * QG_QDQ_CHUNK
    cdef int64_t e = o + QG_QDQ_CHUNK
    if e > j.n:
        e = j.n
    qg_qadd_range(j.a, j.a_signed, j.sa, j.za, j.b, j.b_signed, j.sb, j.zb, j.nb, o, e, j.ys, j.yz, j.y_signed, j.y)


cdef void _qg_qadd_run(const uint8_t* a, int a_signed, float sa, int za, const uint8_t* b, int b_signed, float sb,
                       int zb, int64_t nb, int64_t n, float ys, int yz, int y_signed, uint8_t* y,
                       int nthreads) noexcept nogil:
    """QLinearAdd (qgemm.h qg_qadd_range) over n elements, b's nb repeating, in QG_QDQ_CHUNK chunks over the pool (one
    thread below two chunks); y may alias a when it is a's exact buffer."""
    cdef QaddJob job
    cdef Py_ssize_t nchunks = (n + QG_QDQ_CHUNK - 1) // QG_QDQ_CHUNK
    job.a = a; job.b = b; job.y = y; job.n = n; job.nb = nb
    job.a_signed = a_signed; job.b_signed = b_signed; job.y_signed = y_signed
    job.sa = sa; job.za = za; job.sb = sb; job.zb = zb; job.ys = ys; job.yz = yz
    if n == 0 or nb == 0:
        return
    if nchunks < 2:
        qg_qadd_range(a, a_signed, sa, za, b, b_signed, sb, zb, nb, 0, n, ys, yz, y_signed, y)
    else:
        parallel_for(nchunks, _nthreads(nthreads), <task_fn>_qadd_task, &job)


def qlinear_add(const uint8_t[::1] a, bint a_signed, float sa, int za, const uint8_t[::1] b, bint b_signed, float sb,
                int zb, uint8_t[::1] y, float ys, int yz, bint y_signed, int nthreads=0):
    """y := saturate(rint(((a - za) * sa + (b - zb) * sb) / ys) + yz) over y's elements (bytes; int8 where *_signed),
    b repeating every b.size elements (b.size divides y.size), a y.size long: bit-identical to DequantizeLinear x 2,
    Add, QuantizeLinear in float32."""
    if a.shape[0] != y.shape[0] or b.shape[0] == 0 or y.shape[0] % b.shape[0]:
        raise ValueError("qlinear_add: sizes")
    if y.shape[0]:
        with nogil:
            _qg_qadd_run(&a[0], a_signed, sa, za, &b[0], b_signed, sb, zb, b.shape[0], y.shape[0], ys, yz, y_signed,
                         &y[0], nthreads)
