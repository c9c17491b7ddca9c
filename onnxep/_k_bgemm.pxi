# bf16 GEMM (issue 29, onnxep.compute_precision=bf16): fp32 A and a bf16-packed constant B, vdpbf16ps with fp32
# accumulation, the fp32 GEMM's epilogue (alpha, column bias, residual, activation). The C (packing, CPUID choice,
# micro-kernels, epilogue) is onnxep/_native/bgemm.h.

from libc.stdlib cimport malloc, free
from libc.stdint cimport uint16_t, uint32_t

cdef extern from "_native/bgemm.h":
    ctypedef struct bg_conv:
        const float* x
        int64_t H, W, C, kh, kw, sh, sw, dh, dw, ph, pw, Ho, Wo, xc
        const uint32_t* xb
        const uint16_t* xh
    ctypedef struct bg_xconv:
        const float* x
        uint32_t* xb
        uint16_t* xh
        int64_t P, xc
        int simd
    int BG_XPIX
    void bg_conv_x_item(void* ctx, Py_ssize_t item, int tid) noexcept nogil
    ctypedef struct bg_args:
        const float* A
        int64_t lda
        uint32_t* Ap
        const uint16_t* Bp
        int64_t M, N, K, K2
        int64_t lda2, K2P
        const bg_conv* cv
        float* rows
        uint32_t* abuf
        float alpha
        const float* bias
        const float* R
        int64_t ldr
        float* Y
        int64_t ldy
        const Act* act
        int kern
        int64_t nmb, nnb
        int64_t nbw
    int BG_MB, BG_MBP, BG_NB, BG_NR, BG_MR, BG_KC
    int BG_AMX_K "BG_AMX"
    int bg_force
    int bg_prefetch
    int bg_ep_regs
    int64_t bg_k2(int64_t K) noexcept nogil
    int64_t bg_nmb(int64_t M) noexcept nogil
    int64_t bg_narrow(int64_t nmb, int64_t N, int nth, int kern) noexcept nogil
    int64_t bg_k2p(int64_t K) noexcept nogil
    int64_t bg_pack_b_len(int64_t K, int64_t N) noexcept nogil
    void bg_pack_b(const float* B, int64_t K, int64_t N, int64_t sk, int64_t sn, uint16_t* out) noexcept nogil
    int bg_have(int k) noexcept nogil
    int bg_kernel() noexcept nogil
    double bg_dp_ratio() noexcept nogil
    void bg_item(void* ctx, Py_ssize_t item, int tid) noexcept nogil
    void bg_pack_item(void* ctx, Py_ssize_t item, int tid) noexcept nogil
    void bg_conv_item(void* ctx, Py_ssize_t item, int tid) noexcept nogil
    void bg_micro(int kern, const uint32_t* A, int64_t lda2, const uint16_t* Bp, int64_t kp, int mr, int nr,
                  float* C, int64_t ldc, int load, const uint16_t* pf, int64_t kpf) noexcept nogil
    void bg_pack_a(int kern, const float* A, int64_t lda, int64_t K, int64_t ld2, int64_t m0, int64_t m1,
                   uint32_t* out) noexcept nogil

#: names the packed bf16 B layout (32-column panels of k-pair-interleaved bf16, counted in float slots)
BGEMM_FORMAT = f"bgemm-bf16-b-panels:nr={BG_NR}:kpair=2:kpad=16:v2"
BGEMM_KERNELS = ("generic", "avx512bf16", "amx")


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
    """The micro-kernel bgemm uses now: 'generic', 'avx512bf16' or 'amx' (AMX-BF16 tiles)."""
    return BGEMM_KERNELS[bg_kernel()]


def bgemm_have(name):
    """Whether this CPU runs the named bgemm micro-kernel."""
    return bool(bg_have(BGEMM_KERNELS.index(name)))


def bgemm_hw():
    """True when the CPU has AVX512_BF16 (vdpbf16ps; AMX-BF16 CPUs have it too): the sessions' bf16 precision is
    used only then."""
    return bool(bg_have(1))


def bgemm_dp_ratio():
    """Products per second of vdpbf16ps over the fp32 FMA's on this core (bgemm.h bg_dp_ratio: timed once per
    process, ~0.1 ms); 0.0 without AVX512_BF16. About 2 where vdpbf16ps issues at the FMA's rate (Zen 4, Zen 5),
    about 1 where it issues at half of it (Sapphire Rapids)."""
    cdef double r
    with nogil:
        r = bg_dp_ratio()
    return r


def bgemm_force(name):
    """Tests: force a micro-kernel (None: the best available)."""
    global bg_force
    bg_force = -1 if name is None else BGEMM_KERNELS.index(name)


def bgemm_epilogue_in_regs(on=None):
    """Whether the bf16 GEMM applies the epilogue (bias, residual, Relu / Clip) in the registers of the last K block's
    tiles, stored straight to Y (on by default; bgemm.h bg_ep, bg_block), else through its buffer; `on` sets it
    (tests, in-process A/B). Returns the setting before. Results do not depend on it."""
    global bg_ep_regs
    cdef int before = bg_ep_regs
    if on is not None:
        bg_ep_regs = 1 if on else 0
    return bool(before)


# Whether a GEMM of few items narrows its column blocks so that its threads get even work (bgemm.h bg_narrow; on by
# default); bgemm_narrow() reads / sets it (tests, in-process A/B). Results do not depend on it.
cdef int _bg_narrow_on = 1


def bgemm_narrow(on=None):
    """Whether the bf16 GEMM narrows its column blocks to whole panels when its BG_NB blocks would leave a thread
    idle (on by default); `on` sets it. Returns the setting before the call."""
    global _bg_narrow_on
    cdef int before = _bg_narrow_on
    if on is not None:
        _bg_narrow_on = 1 if on else 0
    return bool(before)


def bgemm_prefetch(on=None):
    """Whether the bf16 GEMM fetches the next B block into L2 while it multiplies the current one (on by default;
    bgemm.h bg_block); `on` sets it (tests, in-process A/B). Returns the setting before. Results do not depend on
    it."""
    global bg_prefetch
    cdef int before = bg_prefetch
    if on is not None:
        bg_prefetch = 1 if on else 0
    return bool(before)


cdef int bgemm_run(const float* A, int64_t lda, const float* Bp, int64_t M, int64_t N, int64_t K, float alpha,
                   const float* bias, const float* R, int64_t ldr, float* Y, int64_t ldy, const Act* act,
                   int nthreads) noexcept nogil:
    """Y = act(alpha * bf16(A) @ B + bias + R) with B packed by bg_pack_b; returns -1 when out of memory."""
    return bgemm_run_ex(A, lda, NULL, Bp, M, N, K, alpha, bias, R, ldr, Y, ldy, act, nthreads, 0)


cdef int bgemm_run_ex(const float* A, int64_t lda, const bg_conv* cv, const float* Bp, int64_t M, int64_t N,
                      int64_t K, float alpha, const float* bias, const float* R, int64_t ldr, float* Y, int64_t ldy,
                      const Act* act, int nthreads, bint conv) noexcept nogil:
    """bgemm_run, or with cv the channel-last conv whose im2col rows are A (M = N * Ho * Wo, K = kh * kw * C); conv:
    a conv's GEMM (cv, or a 1x1 conv's X as A), which takes the conv break-even (conv_threads)."""
    cdef bg_args a
    cdef int nth, nw
    cdef int64_t Mp
    if M == 0 or N == 0:
        return 0
    a.A = A; a.lda = lda
    a.K = K; a.K2 = bg_k2(K); a.K2P = bg_k2p(K); a.M = M; a.N = N
    a.kern = bg_kernel()
    # AMX reads A in 16-row x 16-group tiles: rows padded to 16, groups to K2P, both with zeros
    Mp = (M + 15) // 16 * 16 if a.kern == BG_AMX_K else M
    a.lda2 = a.K2P if a.kern == BG_AMX_K else a.K2
    a.cv = cv
    a.rows = NULL
    a.abuf = NULL
    a.Ap = NULL
    a.Bp = <const uint16_t*>Bp
    a.alpha = alpha; a.bias = bias; a.R = R; a.ldr = ldr; a.Y = Y; a.ldy = ldy
    a.act = act if act != NULL and act.kind != ACT_NONE else NULL
    a.nmb = bg_nmb(M)
    # the fp32 GEMM's thread rule on half the work (vdpbf16ps does two products per lane)
    nth = conv_threads(M, N, (K + 1) // 2, nthreads) if conv else sgemm_threads(M, N, (K + 1) // 2, nthreads)
    # bg_item's column blocks (bg_conv_item below runs BG_NB blocks of its own)
    a.nbw = bg_narrow(a.nmb, N, nth, a.kern) if _bg_narrow_on else BG_NB
    a.nnb = (N + a.nbw - 1) // a.nbw
    nw = nth if a.nmb > 1 else 1
    if cv != NULL and K:
        a.rows = <float*>malloc(<size_t>nw * K * 4 + 64)
        if a.rows == NULL:
            return -1
    if cv != NULL and a.nmb >= 4 * nw:
        # a conv of many pixels packs each item's rows in its thread's buffer (bg_conv_item), every column block
        # from there: no packed im2col matrix of the whole image; fewer pixels than 4 items a thread keep the two
        # passes below (items over columns too, so both threads have work)
        a.abuf = <uint32_t*>malloc(<size_t>nw * BG_MBP * a.lda2 * 4 + 64)
        if a.abuf == NULL:
            free(a.rows)
            return -1
        parallel_for(a.nmb, nw, <task_fn>bg_conv_item, &a)
        free(a.abuf)
        free(a.rows)
        return 0
    a.Ap = <uint32_t*>malloc(Mp * a.lda2 * 4 + 64)
    if a.Ap == NULL:
        free(a.rows)
        return -1
    if Mp > M:
        memset(a.Ap + M * a.lda2, 0, (Mp - M) * a.lda2 * 4)
    if K:
        parallel_for(a.nmb, nw, <task_fn>bg_pack_item, &a)
    free(a.rows)
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


def bconv_pack_weight_size(int64_t cout, int64_t cg, int64_t kh, int64_t kw, int64_t group=1):
    """Length in float32 slots of a conv weight (cout, cg, kh, kw) packed by bconv_pack_weight: one bgemm_pack_b
    packing of (kh * kw * cg) x (cout / group) per group, one after the other."""
    if group < 1 or cout % group or min(cout, cg, kh, kw) < 0:
        raise ValueError(f"bconv_pack_weight_size: bad shape cout={cout} cg={cg} kernel={kh}x{kw} group={group}")
    return group * bg_pack_b_len(kh * kw * cg, cout // group)


def bconv_pack_weight(w, int64_t group, float[::1] out):
    """Packs W (cout, cg, kh, kw; float32) for BConvNhwc: per group g, its cout / group filters as B = (kh * kw * cg)
    x (cout / group), rows in (ky, kx, c) order (the im2col rows' order), at g * bg_pack_b_len(...) of `out`."""
    cdef int64_t cout = w.shape[0], cg = w.shape[1], kh = w.shape[2], kw = w.shape[3]
    cdef int64_t one = bconv_pack_weight_size(cout, cg, kh, kw, group) // group, g, og = cout // group
    import numpy as np
    if out.shape[0] != one * group:
        raise ValueError(f"bconv_pack_weight: out has {out.shape[0]} slots, expected {one * group}")
    for g in range(group):
        b = np.ascontiguousarray(np.asarray(w[g * og:(g + 1) * og], dtype=np.float32).transpose(2, 3, 1, 0)
                                 .reshape(kh * kw * cg, og))
        bgemm_pack_b(b, False, out[g * one:(g + 1) * one])


cdef class BConvNhwc:
    """A channel-last conv on the bf16 GEMM: Y (N, Ho, Wo, cout) = act(conv(X, W) + bias + res), the im2col rows
    gathered while A is packed (bgemm.h bg_conv), W packed by bconv_pack_weight (per group (kh * kw * cg) x
    (cout / group), rows in (ky, kx, c) order). A grouped conv runs its groups one after the other, each a GEMM on the
    group's channels of X (pixel stride C) into its columns of Y (row stride cout). Everything that depends only on
    the shapes is checked once here; run() checks the arrays."""
    cdef bg_conv cv
    cdef Act act
    cdef int64_t N, cout, K, M, group
    cdef bint plain          # 1x1, stride 1, no pad: X itself is A (M x C)
    cdef const float[::1] w

    def __init__(self, tuple xshape, const float[::1] w_packed, int64_t cout, tuple kernel, tuple strides,
                 tuple dilations, tuple pads, tuple out_spatial, activation=None, int64_t group=1):
        if len(xshape) != 4 or len(kernel) != 2 or len(strides) != 2 or len(dilations) != 2 or len(pads) != 2 \
                or len(out_spatial) != 2:
            raise ValueError("BConvNhwc: xshape must be (N, H, W, C) and kernel/strides/dilations/pads/out_spatial "
                             "(h, w) pairs")
        self.act = make_act(activation, False)
        self.N, self.cv.H, self.cv.W, self.cv.xc = xshape
        if group < 1 or cout % group or self.cv.xc % group:
            raise ValueError(f"BConvNhwc: group={group} does not divide cout={cout} and C={self.cv.xc}")
        self.group = group
        self.cv.C = self.cv.xc // group
        self.cv.kh, self.cv.kw = kernel
        self.cv.sh, self.cv.sw = strides
        self.cv.dh, self.cv.dw = dilations
        self.cv.ph, self.cv.pw = pads
        self.cv.Ho, self.cv.Wo = out_spatial
        self.cv.x = NULL
        self.cv.xb = NULL
        self.cv.xh = NULL
        if min(self.cv.kh, self.cv.kw, self.cv.sh, self.cv.sw, self.cv.dh, self.cv.dw, cout) < 1 \
                or min(self.cv.ph, self.cv.pw, self.cv.Ho, self.cv.Wo, self.N, self.cv.C) < 0:
            raise ValueError(f"BConvNhwc: bad geometry kernel={kernel} strides={strides} dilations={dilations} "
                             f"pads={pads} out={out_spatial} cout={cout}")
        self.cout = cout
        self.K = self.cv.kh * self.cv.kw * self.cv.C
        self.M = self.N * self.cv.Ho * self.cv.Wo
        if w_packed.shape[0] != group * bg_pack_b_len(self.K, cout // group):
            raise ValueError(f"BConvNhwc: packed weight has {w_packed.shape[0]} slots, expected "
                             f"{group * bg_pack_b_len(self.K, cout // group)} for K={self.K}, cout={cout}, "
                             f"group={group} ({BGEMM_FORMAT})")
        self.plain = self.cv.kh == 1 and self.cv.kw == 1 and self.cv.sh == 1 and self.cv.sw == 1 \
            and self.cv.ph == 0 and self.cv.pw == 0 and self.cv.Ho == self.cv.H and self.cv.Wo == self.cv.W
        self.w = w_packed

    def run(self, const float[::1] x, const float[::1] bias, const float[::1] res, float[::1] y, int nthreads=0,
            int64_t ldy=0):
        """ldy: y's pixels ldy floats apart (a channel slice of a Concat's output, from its first channel; no
        residual), 0: cout (y contiguous)."""
        cdef int rc
        cdef int64_t ylen = self.M * self.cout if ldy == 0 else (self.M - 1) * ldy + self.cout if self.M else 0
        if ldy != 0 and (ldy < self.cout or res is not None):
            raise ValueError(f"BConvNhwc: ldy={ldy} must be at least cout={self.cout}, and without a residual")
        if x.shape[0] != self.N * self.cv.H * self.cv.W * self.cv.xc or y.shape[0] != ylen:
            raise ValueError(f"BConvNhwc: x has {x.shape[0]} elements, y {y.shape[0]}; expected "
                             f"{self.N * self.cv.H * self.cv.W * self.cv.xc} and {ylen}")
        if bias is not None and bias.shape[0] != self.cout:
            raise ValueError(f"BConvNhwc: bias has {bias.shape[0]} elements, expected {self.cout}")
        if res is not None and res.shape[0] != self.M * self.cout:
            raise ValueError(f"BConvNhwc: residual has {res.shape[0]} elements, expected {self.M * self.cout}")
        if self.M == 0:
            return
        with nogil:
            rc = bconv_exec(&self.cv, self.plain, &self.act, &x[0] if x.shape[0] else NULL, &self.w[0], self.M,
                            self.cout, self.K, &bias[0] if bias is not None else NULL,
                            &res[0] if res is not None else NULL, &y[0], nthreads, self.group, ldy)
        if rc:
            raise MemoryError("BConvNhwc: no memory for the packed rows")

    def step_args(self):
        """(ints, floats) describing this conv to the compiled run loop's RL_BCONV_NHWC step (bconv_step)."""
        return ([self.M, self.cout, self.K, self.plain, self.act.kind, self.cv.H, self.cv.W, self.cv.xc, self.cv.kh,
                 self.cv.kw, self.cv.sh, self.cv.sw, self.cv.dh, self.cv.dw, self.cv.ph, self.cv.pw, self.cv.Ho,
                 self.cv.Wo, self.group], [self.act.a, self.act.b])


# X rounded to bf16 once for the rows (bconv_exec) while its bf16 copy takes at most this many bytes: half a 2 MiB L2,
# so the copy is still in cache when the rows are gathered from it; a larger one (VGG-19's 224x224x64: 6.4 MB) is one
# more pass over memory than converting each tap from X's rows, which the gather reads from cache anyway (3x3 64 -> 64
# at 224x224 alone, bf16 / fp32 time at 1 / 2 threads, one sitting on a loaded machine: 0.92x / 1.09x with the copy,
# 0.80x / 0.81x without)
cdef int64_t BCONV_XB_MAX_BYTES = 1 << 20
# ... and with fewer than this many channels (per group): a tap of 128 or more converts as fast as it copies, and the
# copy is one more pass. Kernel alone, in-process alternating, idle machine, per-tap -> copy time at 1 / 2 threads:
# 3x3 64 -> 64 at 56x56 0.87x / 0.51x, 64 -> 96 at 28x28 0.91x / 0.97x, 32 -> 128 at 27x27 0.94x / 0.90x, 5x5
# 2 groups of 48 -> 128 at 27x27 0.93x / 0.94x; 3x3 128 -> 32 at 28x28 1.07x / 1.09x, 128 -> 128 at 28x28
# 1.04x / 0.97x, 256 -> 256 at 14x14 1.02x / 1.03x
cdef int64_t BCONV_XB_MAX_CHANNELS = 128
# (by the rule stride 1 only: ZFNet-512's 5x5 stride-2 96 -> 256 at 55x55 ran 1.06x / 1.05x the per-tap time with it)
cdef int bconv_xb_mode = -1     # tests and benches (bconv_xb): -1 by the size rule, 0 never, 1 whenever it applies


def bconv_xb(mode):
    """Tests / benches: whether BConvNhwc rounds X to bf16 once before gathering its rows (1: whenever the taps
    overlap and the channels are even, 0: never, None: as BCONV_XB_MAX_BYTES / _CHANNELS decide). Same bits
    either way."""
    global bconv_xb_mode
    bconv_xb_mode = -1 if mode is None else (1 if mode else 0)


cdef int bconv_exec(const bg_conv* cv0, bint plain, const Act* act, const float* x, const float* wp, int64_t M,
                    int64_t cout, int64_t K, const float* bias, const float* res, float* y, int nthreads,
                    int64_t group, int64_t ldy) noexcept nogil:
    """The conv's groups one after the other (cv0.C channels each, of cv0.xc), each a GEMM of M x (cout / group)
    into its columns of y (row stride ldy, 0: cout), weight group g at g * bg_pack_b_len(K, cout / group)."""
    cdef bg_conv cv = cv0[0]
    cdef int64_t g, og = cout // group, wlen = bg_pack_b_len(K, cout // group)
    cdef int rc = 0, nth
    cdef uint32_t* xb = NULL
    cdef uint16_t* xh = NULL
    cdef bg_xconv xc
    cdef bint odd = cv.C % 2 == 1 and bg_kernel() != 0
    if ldy == 0:
        ldy = cout
    # taps that overlap (each input pixel gathered kh * kw / (sh * sw) times): X rounded to bf16 once, the rows then
    # copied from it (bgemm.h bg_conv.xb: even channel counts, a tap's channels are whole pairs; bg_conv.xh: odd ones
    # on the vdpbf16ps / AMX kernels, a row's values in order). Odd channel counts (the 3-channel stems) at any stride:
    # their kernel rows are short runs, each converted ~kh * kw / (sh * sw) times, and a 16-bit copy of a run costs
    # less than its conversion (7x7 stride-2 3 -> 64 at 224x224: bench/NOTES.md)
    xc.P = (M // (cv.Ho * cv.Wo)) * cv.H * cv.W
    if cv.kh * cv.kw > cv.sh * cv.sw and cv.C > 0 and (cv.C % 2 == 0 or odd) and M >= 4 * BG_MB \
            and bconv_xb_mode != 0 \
            and (bconv_xb_mode == 1 or (xc.P * cv.xc * 2 <= BCONV_XB_MAX_BYTES and cv.C < BCONV_XB_MAX_CHANNELS
                                       and (cv.sh * cv.sw == 1 or odd))):
        xc.xc = cv.xc
        xc.x = x
        xc.simd = bg_kernel() != 0
        xc.xb = NULL
        xc.xh = NULL
        if odd:
            xh = <uint16_t*>malloc(<size_t>xc.P * cv.xc * 2 + 64)
            xc.xh = xh
        else:
            xb = <uint32_t*>malloc(<size_t>xc.P * (cv.xc // 2) * 4 + 64)
            xc.xb = xb
        if xb != NULL or xh != NULL:    # else the rows convert from X as they are gathered
            nth = conv_threads(M, og, (K + 1) // 2, nthreads)
            parallel_for((xc.P + BG_XPIX - 1) // BG_XPIX, nth if xc.P > BG_XPIX else 1, <task_fn>bg_conv_x_item,
                         &xc)
    for g in range(group):
        cv.x = x + g * cv.C
        cv.xb = xb + g * (cv.C // 2) if xb != NULL else NULL
        cv.xh = xh + g * cv.C if xh != NULL else NULL
        if plain and M < 4 * BG_MB:  # a 1x1 conv's X is A: the plain GEMM when too few pixels for per-item packing
            rc = bgemm_run_ex(cv.x, cv.xc, NULL, wp + g * wlen, M, og, K, 1.0,
                              bias + g * og if bias != NULL else NULL, res + g * og if res != NULL else NULL, cout,
                              y + g * og, ldy, act, nthreads, 1)
        else:
            rc = bgemm_run_ex(NULL, 0, &cv, wp + g * wlen, M, og, K, 1.0, bias + g * og if bias != NULL else NULL,
                              res + g * og if res != NULL else NULL, cout, y + g * og, ldy, act, nthreads, 1)
        if rc:
            break
    free(xb)
    free(xh)
    return rc


cdef int bconv_step(const Py_ssize_t* n, const float* f, const float* xp, const float* wp, const float* bptr,
                    const float* rptr, float* yp, int nthreads, int64_t ldy) noexcept nogil:
    """bconv_exec from BConvNhwc.step_args' numbers (the run loop's RL_BCONV_NHWC; RL_BCONV_NHWC_LDY with ldy)."""
    cdef bg_conv cv
    cdef Act act
    cv.xb = NULL
    cv.xh = NULL
    act.kind, act.a, act.b = <int>n[4], f[0], f[1]
    cv.H, cv.W, cv.xc, cv.kh, cv.kw, cv.sh, cv.sw = n[5], n[6], n[7], n[8], n[9], n[10], n[11]
    cv.dh, cv.dw, cv.ph, cv.pw, cv.Ho, cv.Wo = n[12], n[13], n[14], n[15], n[16], n[17]
    cv.C = cv.xc // n[18]
    if n[0] == 0:
        return 0
    return bconv_exec(&cv, <bint>n[3], &act, xp, wp, n[0], n[1], n[2], bptr, rptr, yp, nthreads, n[18], ldy)
