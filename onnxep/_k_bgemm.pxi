# bf16 GEMM (issue 29, onnxep.compute_precision=bf16): fp32 A and a bf16-packed constant B, vdpbf16ps with fp32
# accumulation, the fp32 GEMM's epilogue (alpha, column bias, residual, activation). The C (packing, CPUID choice,
# micro-kernels, epilogue) is onnxep/_native/bgemm.h.

from libc.stdlib cimport malloc, free
from libc.stdint cimport uint16_t, uint32_t

cdef extern from "_native/bgemm.h":
    ctypedef struct bg_args:
        const float* A
        int64_t lda
        uint32_t* Ap
        const uint16_t* Bp
        int64_t M, N, K, K2
        float alpha
        const float* bias
        const float* R
        int64_t ldr
        float* Y
        int64_t ldy
        const Act* act
        int kern
        int64_t nmb, nnb
    int BG_MB, BG_NB, BG_NR, BG_MR, BG_KC
    int bg_force
    int64_t bg_k2(int64_t K) noexcept nogil
    int64_t bg_pack_b_len(int64_t K, int64_t N) noexcept nogil
    void bg_pack_b(const float* B, int64_t K, int64_t N, int64_t sk, int64_t sn, uint16_t* out) noexcept nogil
    int bg_have(int k) noexcept nogil
    int bg_kernel() noexcept nogil
    void bg_item(void* ctx, Py_ssize_t item, int tid) noexcept nogil
    void bg_pack_item(void* ctx, Py_ssize_t item, int tid) noexcept nogil

#: names the packed bf16 B layout (32-column panels of k-pair-interleaved bf16, counted in float slots)
BGEMM_FORMAT = f"bgemm-bf16-b-panels:nr={BG_NR}:kpair=2:v1"
BGEMM_KERNELS = ("generic", "avx512bf16")


def bgemm_pack_b_size(int64_t K, int64_t N):
    """Length in float32 slots (one bf16 pair each) of B (K x N) packed by bgemm_pack_b."""
    if K < 0 or N < 0:
        raise ValueError(f"bgemm_pack_b_size: negative size K={K}, N={N}")
    return bg_pack_b_len(K, N)


def bgemm_pack_b(const float[:, ::1] B, bint trans_b, float[::1] out):
    """Packs B (K x N; N x K when trans_b) to bf16 panels (round to nearest even) into `out` (float32 slots)."""
    cdef int64_t K = B.shape[1] if trans_b else B.shape[0]
    cdef int64_t N = B.shape[0] if trans_b else B.shape[1]
    if out.shape[0] != bg_pack_b_len(K, N):
        raise ValueError(f"bgemm_pack_b: out has {out.shape[0]} slots, expected {bg_pack_b_len(K, N)}")
    if out.shape[0] == 0:
        return
    with nogil:
        bg_pack_b(&B[0, 0] if K * N else NULL, K, N, 1 if trans_b else N, K if trans_b else 1,
                  <uint16_t*>&out[0])


def bgemm_kernel():
    """The micro-kernel bgemm uses now: 'generic' or 'avx512bf16'."""
    return BGEMM_KERNELS[bg_kernel()]


def bgemm_have(name):
    """Whether this CPU runs the named bgemm micro-kernel."""
    return bool(bg_have(BGEMM_KERNELS.index(name)))


def bgemm_hw():
    """True when the CPU has AVX512_BF16 (vdpbf16ps): the sessions' bf16 precision is used only then."""
    return bool(bg_have(1))


def bgemm_force(name):
    """Tests: force a micro-kernel (None: the best available)."""
    global bg_force
    bg_force = -1 if name is None else BGEMM_KERNELS.index(name)


cdef int bgemm_run(const float* A, int64_t lda, const float* Bp, int64_t M, int64_t N, int64_t K, float alpha,
                   const float* bias, const float* R, int64_t ldr, float* Y, int64_t ldy, const Act* act,
                   int nthreads) noexcept nogil:
    """Y = act(alpha * bf16(A) @ B + bias + R) with B packed by bg_pack_b; returns -1 when out of memory."""
    cdef bg_args a
    cdef int nth
    if M == 0 or N == 0:
        return 0
    a.A = A; a.lda = lda
    a.K = K; a.K2 = bg_k2(K); a.M = M; a.N = N
    a.Ap = <uint32_t*>malloc(M * a.K2 * 4 + 64)
    if a.Ap == NULL:
        return -1
    a.Bp = <const uint16_t*>Bp
    a.alpha = alpha; a.bias = bias; a.R = R; a.ldr = ldr; a.Y = Y; a.ldy = ldy
    a.act = act if act != NULL and act.kind != ACT_NONE else NULL
    a.kern = bg_kernel()
    a.nmb = (M + BG_MB - 1) // BG_MB
    a.nnb = (N + BG_NB - 1) // BG_NB
    # the fp32 GEMM's thread rule on half the work (vdpbf16ps does two products per lane)
    nth = sgemm_threads(M, N, (K + 1) // 2, nthreads)
    if K:
        parallel_for(a.nmb, nth if a.nmb > 1 else 1, <task_fn>bg_pack_item, &a)
    parallel_for(a.nmb * a.nnb, nth if a.nmb * a.nnb > 1 else 1, <task_fn>bg_item, &a)
    free(a.Ap)
    return 0


def bgemm_f32(const float[:, ::1] A, const float[::1] B_packed, int64_t N, float[:, ::1] Y,
              const float[::1] bias=None, R=None, float alpha=1.0, activation=None, bint relu=False,
              int nthreads=0):
    """Y (M x N) := act(alpha * A @ B + bias[n] + R[m, n]), A (M x K) rounded to bf16, B packed by bgemm_pack_b,
    fp32 accumulation. R: None or an (M x N) float32 C-contiguous array. act as sgemm_packed_f32's."""
    cdef int64_t M = A.shape[0], K = A.shape[1]
    cdef Act act = make_act(activation, relu)
    cdef const float[:, ::1] Rv
    cdef const float* rp = NULL
    cdef const float* bp = NULL
    cdef int rc
    if Y.shape[0] != M or Y.shape[1] != N:
        raise ValueError(f"bgemm_f32: Y is {Y.shape[0]}x{Y.shape[1]}, expected {M}x{N}")
    if B_packed.shape[0] != bg_pack_b_len(K, N):
        raise ValueError(f"bgemm_f32: packed B has {B_packed.shape[0]} slots, expected {bg_pack_b_len(K, N)} for "
                         f"K={K}, N={N} ({BGEMM_FORMAT})")
    if bias is not None:
        if bias.shape[0] != N:
            raise ValueError(f"bgemm_f32: bias has {bias.shape[0]} elements, expected {N}")
        bp = &bias[0] if N else NULL
    if R is not None:
        Rv = R
        if Rv.shape[0] != M or Rv.shape[1] != N:
            raise ValueError(f"bgemm_f32: R is {Rv.shape[0]}x{Rv.shape[1]}, expected {M}x{N}")
        rp = &Rv[0, 0] if M * N else NULL
    if M == 0 or N == 0:
        return
    with nogil:
        rc = bgemm_run(&A[0, 0] if K else NULL, K, &B_packed[0], M, N, K, alpha, bp, rp, N, &Y[0, 0], N, &act,
                       nthreads)
    if rc:
        raise MemoryError()
