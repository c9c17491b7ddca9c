/* onnxep native code, included by onnxep/_k_conv_nhwc.pxi (compiled once per ISA; see setup.py). */
#ifndef ONNXEP_NATIVE_DIRECT_CONV_H
#define ONNXEP_NATIVE_DIRECT_CONV_H

#include <string.h>
#include <stdint.h>

/* onnxep_dconv_uk: the direct-conv micro-kernel (A not packed). Row i < mr of the C tile is an output pixel whose
   inputs start at x + xo + i*rs; the K loop walks `runs`: run r covers n consecutive k whose A value for row i is
   x[xo + i*rs + a + kk] and whose packed-B rows start at bp + b + jp*sb (NR floats per k; sb: the run's K block's
   panel stride, so panel jp of a K-blocked packed weight is reached through the same runs). Products are added
   in k order with one FMA each, as in onnxep_sgemm_uk; the epilogue is onnxep_uk_store.
   pfo: the packed-B floats to fetch into L2 along the K loop, as onnxep_sgemm_uk's pf (the lines of the NR floats of
   each k at b + pfo): 0 none, -1 each run's sb (the same k rows of the next panel, jp + 1), else that offset (the
   Winograd path: the next plane's panel). The direct path reads a weight panel in place, K x NR floats (64 KiB at
   K 512: past L1), once per tile; without a fetch ahead the first tile over each panel waits on L3 for every line
   (ResNet-50's 7x7 1x1 convs, weight rotated over 8 copies as in a model: 1.2x the packed path's time).
   pfc: nonzero to fetch the tile's C rows (and the residual's, res) into L1 before the K loop, as onnxep_sgemm_uk
   does: the epilogue then neither waits on their lines (a 56x56 conv's output and residual, 3 MiB each, are past
   the L2 by the time a tile is stored) nor on the stores' read-for-ownership. */
typedef struct { Py_ssize_t a, b, n, sb; } onnxep_drun;
#if ONNXEP_SGEMM_SIMD
#if defined(__AVX512F__)
#define ONNXEP_DV __m512
#define ONNXEP_DV_SET1 _mm512_set1_ps
#define ONNXEP_DV_LOAD _mm512_loadu_ps
#define ONNXEP_DV_FMA _mm512_fmadd_ps
#define ONNXEP_DV_ZERO _mm512_setzero_ps
#define ONNXEP_DV_W 16
#else
#define ONNXEP_DV __m256
#define ONNXEP_DV_SET1 _mm256_set1_ps
#define ONNXEP_DV_LOAD _mm256_loadu_ps
#define ONNXEP_DV_FMA _mm256_fmadd_ps
#define ONNXEP_DV_ZERO _mm256_setzero_ps
#define ONNXEP_DV_W 8
#endif
#define ONNXEP_DUK_ARGS const float* x, Py_ssize_t xo, Py_ssize_t rs, const onnxep_drun* runs, Py_ssize_t nruns,                         const float* bp, Py_ssize_t jp, Py_ssize_t pfo, int pfc, ONNXEP_ST_ARGS
#define ONNXEP_DUK_PASS x, xo, rs, runs, nruns, bp, jp, pfo, pfc, ONNXEP_ST_PASS
/* one k step of the direct micro-kernel: c0 / c1[i] += a[i * rs] times B's one or two vectors at b; a and b move on */
#define ONNXEP_DUK_STEP(MRV, NV) do {                                                                   \
        ONNXEP_DV b0 = ONNXEP_DV_LOAD(b), b1 = (NV) == 2 ? ONNXEP_DV_LOAD(b + ONNXEP_DV_W) : b0;       \
        _Pragma("GCC unroll 12")                                                                        \
        for (i = 0; i < (MRV); i++) {                                                                   \
            ONNXEP_DV ai = ONNXEP_DV_SET1(a[i * rs]);                                                   \
            c0[i] = ONNXEP_DV_FMA(ai, b0, c0[i]);                                                       \
            if ((NV) == 2) c1[i] = ONNXEP_DV_FMA(ai, b1, c1[i]);                                        \
        }                                                                                               \
        a += 1;                                                                                         \
        b += 2 * ONNXEP_DV_W;                                                                           \
    } while (0)
/* the tile's C rows (and the residual's) into L1 before the K loop: their first and last lines (pfc) */
static inline __attribute__((always_inline)) void onnxep_dk_fetch_c(const int MRV, const float* c, Py_ssize_t rsc,
                                                                    const float* res, Py_ssize_t nr)
{
    int i;
    #pragma GCC unroll 12
    for (i = 0; i < MRV; i++) {
        _mm_prefetch((const char*)(c + i * rsc), _MM_HINT_T0);
        _mm_prefetch((const char*)(c + i * rsc + (nr > 0 ? nr - 1 : 0)), _MM_HINT_T0);
        if (res) {
            _mm_prefetch((const char*)(res + i * rsc), _MM_HINT_T0);
            _mm_prefetch((const char*)(res + i * rsc + (nr > 0 ? nr - 1 : 0)), _MM_HINT_T0);
        }
    }
}
static inline __attribute__((always_inline)) void onnxep_duk_body(const int MRV, const int NV, ONNXEP_DUK_ARGS)
{
    ONNXEP_DV c0[ONNXEP_SGEMM_MR], c1[ONNXEP_SGEMM_MR];
    Py_ssize_t r, k;
    int i;
    #pragma GCC unroll 12
    for (i = 0; i < MRV; i++) { c0[i] = ONNXEP_DV_ZERO(); c1[i] = ONNXEP_DV_ZERO(); }
    if (pfc) onnxep_dk_fetch_c(MRV, c, rsc, res, nr);
    for (r = 0; r < nruns; r++) {
        const float* a = x + (xo + runs[r].a);
        const float* b = bp + (runs[r].b + jp * runs[r].sb);
        Py_ssize_t n = runs[r].n;
        if (pfo) {
            const float* q = b + (pfo < 0 ? runs[r].sb : pfo);
            for (k = 0; k < n; k++) {
                _mm_prefetch((const char*)q, _MM_HINT_T1);
                if (2 * ONNXEP_DV_W > 16) _mm_prefetch((const char*)(q + 16), _MM_HINT_T1);
                ONNXEP_DUK_STEP(MRV, NV);
                q += 2 * ONNXEP_DV_W;
            }
            continue;
        }
        for (k = 0; k < n; k++)
            ONNXEP_DUK_STEP(MRV, NV);
    }
    onnxep_uk_store(MRV, c0, c1, ONNXEP_ST_PASS);
}
/* one case per tile height 1..ONNXEP_SGEMM_MR, each a micro-kernel body specialized for it (the switches below) */
#if ONNXEP_SGEMM_MR == 12
#define ONNXEP_MR_CASES(C) C(12) C(11) C(10) C(9) C(8) C(7) C(6) C(5) C(4) C(3) C(2) C(1)
#else
#define ONNXEP_MR_CASES(C) C(6) C(5) C(4) C(3) C(2) C(1)
#endif
#define ONNXEP_DUK_CASE(M) case M: if (nr <= ONNXEP_DV_W) onnxep_duk_body(M, 1, ONNXEP_DUK_PASS);                                    else onnxep_duk_body(M, 2, ONNXEP_DUK_PASS); break;
static void onnxep_dconv_uk(Py_ssize_t mr, ONNXEP_DUK_ARGS)
{
    switch (mr) {
    ONNXEP_MR_CASES(ONNXEP_DUK_CASE)
    default: break;
    }
}
/* onnxep_dconv_kp: onnxep_dconv_uk for a conv of at most one vector of output channels (nr <= W, the
   vector width), on k-pair rows of the weight (onnxep_dconv_kp_pack): lane 2j + q of a pair row holds B[2p + q, j],
   so one 64-bit broadcast of x's two consecutive k values (a run's A is contiguous in k) feeds W / 2 channels of two
   k at once. The plain kernel's tile, one vector of B a k, does one FMA per broadcast load and per B load (13 loads
   for 12 FMAs at MR 12: load-bound, ~7 FMA/ns on Zen 5 against 8.1 for two vectors) and leaves half of every vector
   unused at 8 channels; here a pair row of NV vectors (NV = 2 up to W channels, 1 up to W / 2) makes NV FMAs per
   broadcast, and 8 channels fill the vector. A run starting at an odd k (or ending at an even one) takes that k
   alone, its broadcast zeroed in the other parity's lanes. The two parities' sums are added when the tile is
   stored (onnxep_kp_fold): the products of a C element are summed in another order than onnxep_dconv_uk's (even k,
   odd k, then the two), the same for every thread count. */
#define ONNXEP_KP_MAXN ONNXEP_DV_W
#if defined(__AVX512F__)
static inline __m512 onnxep_kp_pair(const float* p)   /* x's two k at p in every 64-bit lane */
{
    double d;
    memcpy(&d, p, sizeof d);
    return _mm512_castpd_ps(_mm512_set1_pd(d));
}
#define ONNXEP_KP_EVEN(p) _mm512_maskz_mov_ps((__mmask16)0x5555, _mm512_set1_ps(*(p)))
#define ONNXEP_KP_ODD(p) _mm512_maskz_mov_ps((__mmask16)0xAAAA, _mm512_set1_ps(*(p)))
static inline __m512 onnxep_kp_fold(const int NV, __m512 c0, __m512 c1)   /* channel j := lanes 2j + 2j+1 */
{
    const __m512i ev = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    __m512 s0 = _mm512_add_ps(c0, _mm512_permute_ps(c0, 0xB1));
    if (NV == 1) return _mm512_permutexvar_ps(ev, s0);
    return _mm512_permutex2var_ps(s0, ev, _mm512_add_ps(c1, _mm512_permute_ps(c1, 0xB1)));
}
#else
static inline __m256 onnxep_kp_pair(const float* p)
{
    double d;
    memcpy(&d, p, sizeof d);
    return _mm256_castpd_ps(_mm256_set1_pd(d));
}
#define ONNXEP_KP_EVEN(p) _mm256_blend_ps(_mm256_setzero_ps(), _mm256_set1_ps(*(p)), 0x55)
#define ONNXEP_KP_ODD(p) _mm256_blend_ps(_mm256_setzero_ps(), _mm256_set1_ps(*(p)), 0xAA)
static inline __m256 onnxep_kp_fold(const int NV, __m256 c0, __m256 c1)
{
    __m256 s0 = _mm256_add_ps(c0, _mm256_permute_ps(c0, 0xB1));
    __m256 s1 = NV == 1 ? s0 : _mm256_add_ps(c1, _mm256_permute_ps(c1, 0xB1));
    __m256 t = _mm256_shuffle_ps(s0, s1, _MM_SHUFFLE(2, 0, 2, 0));     /* channels 0 1 4 5 | 2 3 6 7 */
    return _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(t), _MM_SHUFFLE(3, 1, 2, 0)));
}
#endif
/* the pair rows of a one-panel packed weight (row k of B at wp + k * NR, NR >= W, zero past the channels): pair row p
   at out + p * NV * W, lane 2j + q := B[2p + q, j] for j < NV * W / 2 (zero for 2p + q >= K) */
static void onnxep_dconv_kp_pack(const float* wp, Py_ssize_t K, int NV, float* out)
{
    Py_ssize_t p;
    for (p = 0; 2 * p < K; p++) {
        const float* r0 = wp + 2 * p * ONNXEP_SGEMM_NR;
        float* o = out + p * NV * ONNXEP_DV_W;
#if defined(__AVX512F__)
        __m512 a = _mm512_loadu_ps(r0), b = 2 * p + 1 < K ? _mm512_loadu_ps(r0 + ONNXEP_SGEMM_NR) : _mm512_setzero_ps();
        const __m512i ilo = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
        const __m512i ihi = _mm512_setr_epi32(8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
        _mm512_storeu_ps(o, _mm512_permutex2var_ps(a, ilo, b));
        if (NV == 2) _mm512_storeu_ps(o + 16, _mm512_permutex2var_ps(a, ihi, b));
#else
        __m256 a = _mm256_loadu_ps(r0), b = 2 * p + 1 < K ? _mm256_loadu_ps(r0 + ONNXEP_SGEMM_NR) : _mm256_setzero_ps();
        __m256 lo = _mm256_unpacklo_ps(a, b), hi = _mm256_unpackhi_ps(a, b);
        _mm256_storeu_ps(o, _mm256_permute2f128_ps(lo, hi, 0x20));
        if (NV == 2) _mm256_storeu_ps(o + 8, _mm256_permute2f128_ps(lo, hi, 0x31));
#endif
    }
}
#define ONNXEP_DKP_STEP(MRV, NV, LOADA) do {                                                            \
        ONNXEP_DV b0 = ONNXEP_DV_LOAD(b), b1 = (NV) == 2 ? ONNXEP_DV_LOAD(b + ONNXEP_DV_W) : b0;       \
        _Pragma("GCC unroll 12")                                                                        \
        for (i = 0; i < (MRV); i++) {                                                                   \
            ONNXEP_DV ai = LOADA(a + i * rs);                                                           \
            c0[i] = ONNXEP_DV_FMA(ai, b0, c0[i]);                                                       \
            if ((NV) == 2) c1[i] = ONNXEP_DV_FMA(ai, b1, c1[i]);                                        \
        }                                                                                               \
        b += (NV) * ONNXEP_DV_W;                                                                        \
    } while (0)
static inline __attribute__((always_inline)) void onnxep_dkp_body(const int MRV, const int NV, const float* x,
                                                                  Py_ssize_t xo, Py_ssize_t rs,
                                                                  const onnxep_drun* runs, Py_ssize_t nruns,
                                                                  const float* kp, int pfc, ONNXEP_ST_ARGS)
{
    ONNXEP_DV c0[ONNXEP_SGEMM_MR], c1[ONNXEP_SGEMM_MR];
    Py_ssize_t r;
    int i;
    #pragma GCC unroll 12
    for (i = 0; i < MRV; i++) { c0[i] = ONNXEP_DV_ZERO(); c1[i] = ONNXEP_DV_ZERO(); }
    if (pfc) onnxep_dk_fetch_c(MRV, c, rsc, res, nr);
    for (r = 0; r < nruns; r++) {
        const float* a = x + (xo + runs[r].a);
        Py_ssize_t k = runs[r].b / ONNXEP_SGEMM_NR, n = runs[r].n;
        const float* b = kp + (k >> 1) * (NV * ONNXEP_DV_W);
        if (k & 1) { ONNXEP_DKP_STEP(MRV, NV, ONNXEP_KP_ODD); a += 1; n -= 1; }
        for (; n >= 2; n -= 2) { ONNXEP_DKP_STEP(MRV, NV, onnxep_kp_pair); a += 2; }
        if (n) ONNXEP_DKP_STEP(MRV, NV, ONNXEP_KP_EVEN);
    }
    #pragma GCC unroll 12
    for (i = 0; i < MRV; i++) c0[i] = onnxep_kp_fold(NV, c0[i], c1[i]);
    onnxep_uk_store(MRV, c0, c0, ONNXEP_ST_PASS);
}
#define ONNXEP_DKP_PASS x, xo, rs, runs, nruns, kp, pfc, ONNXEP_ST_PASS
#define ONNXEP_DKP_CASE(M) case M: if (2 * nr <= ONNXEP_DV_W) onnxep_dkp_body(M, 1, ONNXEP_DKP_PASS);                                 else onnxep_dkp_body(M, 2, ONNXEP_DKP_PASS); break;
static void onnxep_dconv_kp(Py_ssize_t mr, const float* x, Py_ssize_t xo, Py_ssize_t rs, const onnxep_drun* runs,
                            Py_ssize_t nruns, const float* kp, int pfc, ONNXEP_ST_ARGS)
{
    switch (mr) {
    ONNXEP_MR_CASES(ONNXEP_DKP_CASE)
    default: break;
    }
}
#if defined(__AVX512F__)
/* onnxep_dconv_kpb: onnxep_dconv_kp on bf16 operands (a bf16 session's convs of at most 16 output channels,
   where the CPU has vdpbf16ps: bg_kernel), x and the weight's rows rounded to bf16 (nearest even) once per call
   (onnxep_cvt_bf16, onnxep_dconv_kpb_pack). vdpbf16ps adds the products of a pair of bf16 in each 32-bit lane. 9-16
   channels (Q 1): lane j of a row holds B[2p, j], B[2p + 1, j], and one vdpbf16ps of x's two consecutive k (a 32-bit
   broadcast) does the two FMAs of onnxep_dconv_kp's two pair vectors. Up to 8 channels (Q 2): a row holds k quads,
   lane 2j + h the pair B[4p + 2h, j], B[4p + 2h + 1, j], and a 64-bit broadcast of x's four k feeds both pairs of
   each channel (the lanes' sums are folded at the store, onnxep_kp_fold): four k a vdpbf16ps, where the fp32 pair
   vector does two an FMA. A run's k not on a row border go in a step of their own, x's other values zero. */
#define ONNXEP_KPB_OK 1
__attribute__((target("avx512bf16,avx512bw,avx512f")))
static void onnxep_cvt_bf16(const float* x, Py_ssize_t n, uint16_t* out)
{
    Py_ssize_t i = 0;
    for (; i + 32 <= n; i += 32)
        _mm512_storeu_si512((void*)(out + i),
                            (__m512i)_mm512_cvtne2ps_pbh(_mm512_loadu_ps(x + i + 16), _mm512_loadu_ps(x + i)));
    for (; i < n; i += 16) {
        __mmask16 m = n - i >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (n - i)) - 1u);
        uint16_t t[16];
        _mm256_storeu_si256((__m256i*)t, (__m256i)_mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(m, x + i)));
        memcpy(out + i, t, (size_t)(n - i < 16 ? n - i : 16) * sizeof(uint16_t));
    }
}
/* the rows of a one-panel packed weight (row k at wp + k * NR, zero past the channels) in bf16, 32 halves each: Q 1,
   row p's element 2j + e := B[2p + e, j] (j < 16); Q 2, row p's element 4j + m := B[4p + m, j] (j < 8); zero past K */
__attribute__((target("avx512bf16,avx512bw,avx512f")))
static void onnxep_dconv_kpb_pack(const float* wp, Py_ssize_t K, int Q, uint16_t* out)
{
    const __m512i ilo = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
    const __m512i ihi = _mm512_setr_epi32(8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
    const __m512i qlo = _mm512_setr_epi32(0, 1, 16, 17, 2, 3, 18, 19, 4, 5, 20, 21, 6, 7, 22, 23);
    const __m512i qhi = _mm512_setr_epi32(8, 9, 24, 25, 10, 11, 26, 27, 12, 13, 28, 29, 14, 15, 30, 31);
    const Py_ssize_t KQ = 2 * Q;
    Py_ssize_t p, m;
    for (p = 0; KQ * p < K; p++) {
        __m512 r[4], lo, hi;
        for (m = 0; m < KQ; m++)
            r[m] = KQ * p + m < K ? _mm512_loadu_ps(wp + (KQ * p + m) * ONNXEP_SGEMM_NR) : _mm512_setzero_ps();
        if (Q == 1) {
            lo = _mm512_permutex2var_ps(r[0], ilo, r[1]);
            hi = _mm512_permutex2var_ps(r[0], ihi, r[1]);
        } else {                /* t01 / t23: element 2j + e = B[4p + e (+ 2), j]; then element 4j + 2h + e */
            __m512 t01 = _mm512_permutex2var_ps(r[0], ilo, r[1]), t23 = _mm512_permutex2var_ps(r[2], ilo, r[3]);
            lo = _mm512_permutex2var_ps(t01, qlo, t23);
            hi = _mm512_permutex2var_ps(t01, qhi, t23);
        }
        _mm512_storeu_si512((void*)(out + 32 * p), (__m512i)_mm512_cvtne2ps_pbh(hi, lo));
    }
}
/* x's k values p[0 .. take) in the 16-bit slots off .. off + take of a 64-bit lane value, the others zero */
static inline uint64_t onnxep_kpb_part(const uint16_t* p, int off, int take)
{
    uint64_t v = 0;
    for (int t = 0; t < take; t++) v |= (uint64_t)p[t] << (16 * (off + t));
    return v;
}
/* the broadcast of x's Q pairs at p (one 32- or 64-bit load), or of the 64-bit lane value v */
__attribute__((target("avx512bf16,avx512bw,avx512f"), always_inline))
static inline __m512i onnxep_kpb_full(const int Q, const uint16_t* p)
{
    if (Q == 1) { uint32_t v; memcpy(&v, p, sizeof v); return _mm512_set1_epi32((int)v); }
    long long v; memcpy(&v, p, sizeof v); return _mm512_set1_epi64(v);
}
__attribute__((target("avx512bf16,avx512bw,avx512f"), always_inline))
static inline __m512i onnxep_kpb_bcast(const int Q, uint64_t v)
{
    return Q == 1 ? _mm512_set1_epi32((int)(uint32_t)v) : _mm512_set1_epi64((long long)v);
}
#define ONNXEP_KPB_STEP(MRV, ABCAST) do {                                                               \
        __m512bh b0 = (__m512bh)_mm512_loadu_si512((const void*)b);                                     \
        _Pragma("GCC unroll 12")                                                                        \
        for (i = 0; i < (MRV); i++)                                                                     \
            c0[i] = _mm512_dpbf16_ps(c0[i], (__m512bh)(ABCAST), b0);                                    \
        b += 32;                                                                                        \
    } while (0)
__attribute__((target("avx512bf16,avx512bw,avx512f"), always_inline))
static inline void onnxep_dkpb_body(const int MRV, const int Q, const uint16_t* x, Py_ssize_t xo, Py_ssize_t rs,
                                    const onnxep_drun* runs, Py_ssize_t nruns, const uint16_t* kp, int pfc,
                                    ONNXEP_ST_ARGS)
{
    const int KQ = 2 * Q;
    __m512 c0[ONNXEP_SGEMM_MR];
    Py_ssize_t r;
    int i;
    #pragma GCC unroll 12
    for (i = 0; i < MRV; i++) c0[i] = _mm512_setzero_ps();
    if (pfc) onnxep_dk_fetch_c(MRV, c, rsc, res, nr);
    for (r = 0; r < nruns; r++) {
        const uint16_t* a = x + (xo + runs[r].a);
        Py_ssize_t k = runs[r].b / ONNXEP_SGEMM_NR, n = runs[r].n;
        const uint16_t* b = kp + (k / KQ) * 32;
        int off = (int)(k % KQ);
        if (off) {              /* Q 1: the odd k alone, in the pair's high half */
            int take = n < KQ - off ? (int)n : KQ - off;
            if (Q == 1) ONNXEP_KPB_STEP(MRV, _mm512_set1_epi32((int)((uint32_t)a[i * rs] << 16)));
            else ONNXEP_KPB_STEP(MRV, onnxep_kpb_bcast(Q, onnxep_kpb_part(a + i * rs, off, take)));
            a += take; n -= take;
        }
        for (; n >= KQ; n -= KQ) { ONNXEP_KPB_STEP(MRV, onnxep_kpb_full(Q, a + i * rs)); a += KQ; }
        if (n) {                /* Q 1: the last k alone, in the pair's low half */
            if (Q == 1) ONNXEP_KPB_STEP(MRV, _mm512_set1_epi32((int)a[i * rs]));
            else ONNXEP_KPB_STEP(MRV, onnxep_kpb_bcast(Q, onnxep_kpb_part(a + i * rs, 0, (int)n)));
        }
    }
    if (Q == 2) {
        #pragma GCC unroll 12
        for (i = 0; i < MRV; i++) c0[i] = onnxep_kp_fold(1, c0[i], c0[i]);
    }
    onnxep_uk_store(MRV, c0, c0, ONNXEP_ST_PASS);
}
#define ONNXEP_DKPB_CASE(M) case M: if (2 * nr <= 16) onnxep_dkpb_body(M, 2, x, xo, rs, runs, nruns, kp, pfc, ONNXEP_ST_PASS); else onnxep_dkpb_body(M, 1, x, xo, rs, runs, nruns, kp, pfc, ONNXEP_ST_PASS); break;
__attribute__((target("avx512bf16,avx512bw,avx512f")))
static void onnxep_dconv_kpb(Py_ssize_t mr, const uint16_t* x, Py_ssize_t xo, Py_ssize_t rs, const onnxep_drun* runs,
                             Py_ssize_t nruns, const uint16_t* kp, int pfc, ONNXEP_ST_ARGS)
{
    switch (mr) {
    ONNXEP_MR_CASES(ONNXEP_DKPB_CASE)
    default: break;
    }
}
#else
#define ONNXEP_KPB_OK 0
static inline void onnxep_cvt_bf16(const float* x, Py_ssize_t n, uint16_t* out) { }
static inline void onnxep_dconv_kpb_pack(const float* wp, Py_ssize_t K, int Q, uint16_t* out) { }
static inline void onnxep_dconv_kpb(Py_ssize_t mr, const uint16_t* x, Py_ssize_t xo, Py_ssize_t rs,
                                    const onnxep_drun* runs, Py_ssize_t nruns, const uint16_t* kp, int pfc,
                                    ONNXEP_ST_ARGS) { }
#endif
/* onnxep_dconv_uk, or onnxep_dconv_kp on the pair rows kp when kp is not NULL (then jp 0, no pfo), or
   onnxep_dconv_kpb on the bf16 pair rows kpb and xb (x's bf16 copy, the same offsets) when kpb is not NULL */
static inline void onnxep_dconv_call(Py_ssize_t mr, const float* kp, const uint16_t* kpb, const uint16_t* xb,
                                     ONNXEP_DUK_ARGS)
{
    if (kpb) onnxep_dconv_kpb(mr, xb, xo, rs, runs, nruns, kpb, pfc, ONNXEP_ST_PASS);
    else if (kp) onnxep_dconv_kp(mr, x, xo, rs, runs, nruns, kp, pfc, ONNXEP_ST_PASS);
    else onnxep_dconv_uk(mr, ONNXEP_DUK_PASS);
}
#else
/* generic variant: never called (convs take the packed path there) */
#define ONNXEP_KP_MAXN 0
#define ONNXEP_KPB_OK 0
static inline void onnxep_dconv_kp_pack(const float* wp, Py_ssize_t K, int NV, float* out) { }
static inline void onnxep_cvt_bf16(const float* x, Py_ssize_t n, uint16_t* out) { }
static inline void onnxep_dconv_kpb_pack(const float* wp, Py_ssize_t K, int Q, uint16_t* out) { }
static inline void onnxep_dconv_call(Py_ssize_t mr, const float* kp, const uint16_t* kpb, const uint16_t* xb,
                                     const float* x, Py_ssize_t xo, Py_ssize_t rs,
                                     const onnxep_drun* runs, Py_ssize_t nruns, const float* bp, Py_ssize_t jp,
                                     Py_ssize_t pfo, int pfc, Py_ssize_t nr,
                                     float* c, Py_ssize_t rsc, float alpha, float beta, const float* bias_col,
                                     const float* bias_row, const float* res, const onnxep_act* act) { }
static inline void onnxep_dconv_uk(Py_ssize_t mr, const float* x, Py_ssize_t xo, Py_ssize_t rs,
                                   const onnxep_drun* runs, Py_ssize_t nruns, const float* bp, Py_ssize_t jp,
                                   Py_ssize_t pfo, int pfc, Py_ssize_t nr,
                                   float* c, Py_ssize_t rsc, float alpha, float beta, const float* bias_col,
                                   const float* bias_row, const float* res, const onnxep_act* act) { }
#endif

#endif /* ONNXEP_NATIVE_DIRECT_CONV_H */
