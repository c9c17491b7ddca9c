/* onnxep native code, included by onnxep/_k_gemm.pxi (compiled once per ISA; see setup.py). */
#ifndef ONNXEP_NATIVE_SGEMM_H
#define ONNXEP_NATIVE_SGEMM_H

/* Register block per ISA: MR rows x NR columns of C held in registers (AVX-512: 12 x 2 zmm = 24 zmm accumulators,
   AVX2: 6 x 2 ymm = 12 ymm, baseline SSE2: 4 x 2 xmm = 8 xmm, the last one gcc-vectorised C loops).
   KC bounds the K block so a B panel (KC x NR) stays near L1 and an A block (MC x KC) in L2; K is split into
   ceil(K/KC) blocks of (almost) equal size. Measured on the 2-vCPU EPYC dev machine (32 KB L1D, 1 MB L2; an
   FMA-only probe peaks at ~117 GFLOP/s per core, i.e. one 512-bit FMA per cycle, so avx2 reaches the same peak
   there): the AVX-512 kernel runs at ~97% of that probe on L1-resident panels; KC 128..512, MC 96..288 and a
   512-column slab cap all came within the +-5% run-to-run noise of KC 256 / MC 144 on the bench_sgemm shapes,
   so those stay. */
#if defined(__AVX512F__)
#define ONNXEP_SGEMM_MR 12
#define ONNXEP_SGEMM_NR 32
#ifndef ONNXEP_SGEMM_KC          /* KC / MC may be given with -D when tuning (bench/bench_sgemm.py) */
#define ONNXEP_SGEMM_KC 256
#endif
#ifndef ONNXEP_SGEMM_MC
#define ONNXEP_SGEMM_MC 144
#endif
#define ONNXEP_SGEMM_SIMD 1
#elif defined(__AVX2__) && defined(__FMA__)
#define ONNXEP_SGEMM_MR 6
#define ONNXEP_SGEMM_NR 16
#define ONNXEP_SGEMM_KC 256
#define ONNXEP_SGEMM_MC 144
#define ONNXEP_SGEMM_SIMD 1
#else
#define ONNXEP_SGEMM_MR 4
#define ONNXEP_SGEMM_NR 8
#define ONNXEP_SGEMM_KC 256
#define ONNXEP_SGEMM_MC 128
#define ONNXEP_SGEMM_SIMD 0
#endif

/* The data cache of one level (2: L2, 1: L1D) of the CPU this runs on, in bytes, as the C library reports it
   (glibc: sysconf reads CPUID's cache leaves on x86, sysfs elsewhere); `dflt` when it says nothing (0, -1, or a
   system without the names). Blocking sizes derive from it instead of one machine's constants. */
#include <unistd.h>
static long onnxep_cache_bytes(int level, long dflt)
{
    long v = -1;
#if defined(_SC_LEVEL2_CACHE_SIZE) && defined(_SC_LEVEL1_DCACHE_SIZE)
    v = sysconf(level == 1 ? _SC_LEVEL1_DCACHE_SIZE : _SC_LEVEL2_CACHE_SIZE);
#endif
    return v > 0 ? v : dflt;
}

/* onnxep_sgemm_uk: the intrinsics micro-kernel with the epilogue fused.
     C[i, j] := alpha * sum_k a[k*MR + i] * b[k*NR + j] + beta * C[i, j] (C not read when beta == 0)
                [+ bias_col[j]] [+ bias_row[i]] [+ res[i*rsc + j]], then act   for i < mr, j < nr;  C[i, j] = c[i*rsc + j]
   a: one packed A panel (kc x MR, column-major), b: one packed B panel (kc x NR, row-major, zero-padded).
   One body per row count (mr = 1..MR, the switch below) and per vector count (a panel's last nr <= NR/2
   columns take one vector of FMAs), so tails compute no padded rows and half the padded columns; column tails are
   masked loads/stores. Every row adds its products in the same k order with one FMA per product, whatever mr
   is, so a row's result does not depend on which panel held it.
   pf (or NULL): the B panel the tile needs next, fetched into L2 along the K loop (one line per 16 floats of a
   K step), so the first A panel over it does not wait on memory for each line (AVX-512 only; in-process A/B on
   the dev machine: 128 x 768 x 768 / x 3072 / 128 x 3072 x 768 0.97-0.99x the time at 2 threads, the encoder
   0.97x, the MLP 0.96x; the conv models 1.00x). */
/* The fused activation of the epilogue (NULL: none). Relu, Clip, LeakyRelu and HardSwish are applied in
   registers; Sigmoid, HardSigmoid and Tanh over the tile just stored (still in L1), vectorised over each row by
   onnxep_act_row. HardSwish is v * min(1, max(0, v/6 + 1/2)) (ONNX's alpha 1/6, beta 1/2, as hard_swish_f32).
   Gelu (the erf form, FusedMatMul's) is erf.h's onnxep_gelu1, vectorised over each stored row: the product is
   still in L1 instead of a pass over the whole output after the GEMM. */
#include <math.h>
#include "erf.h"
#include "eltwise.h"
enum { ONNXEP_ACT_NONE = 0, ONNXEP_ACT_RELU, ONNXEP_ACT_CLIP, ONNXEP_ACT_LEAKY_RELU, ONNXEP_ACT_SIGMOID,
       ONNXEP_ACT_HARD_SIGMOID, ONNXEP_ACT_TANH, ONNXEP_ACT_HARD_SWISH, ONNXEP_ACT_GELU };
#define ONNXEP_ACT_IN_REGS(kind) ((kind) <= ONNXEP_ACT_LEAKY_RELU || (kind) == ONNXEP_ACT_HARD_SWISH)
typedef struct { int kind; float a, b; } onnxep_act;   /* Clip: [a, b]; LeakyRelu: a; HardSigmoid: a, b */
static inline float onnxep_act1(const onnxep_act* act, float v)
{
    switch (act->kind) {
    case ONNXEP_ACT_RELU: return v > 0.0f ? v : 0.0f;             /* NaN -> 0, as max(NaN, 0) in SIMD */
    case ONNXEP_ACT_CLIP: { float h = v < act->a ? act->a : v; return h > act->b ? act->b : h; }  /* NaN stays */
    case ONNXEP_ACT_LEAKY_RELU: return v >= 0.0f ? v : v * act->a;
    case ONNXEP_ACT_SIGMOID: return onnxep_sigmoid1(v);          /* eltwise.h: the Sigmoid / Tanh kernels' bits */
    case ONNXEP_ACT_HARD_SIGMOID: { float h = act->a * v + act->b; return h < 0.0f ? 0.0f : (h > 1.0f ? 1.0f : h); }
    case ONNXEP_ACT_TANH: return onnxep_tanh1(v);
    case ONNXEP_ACT_GELU: return onnxep_gelu1(v);
    case ONNXEP_ACT_HARD_SWISH: {
        float h = v * (1.0f / 6.0f) + 0.5f;
        h = h < 0.0f ? 0.0f : h;
        return v * (h > 1.0f ? 1.0f : h); }
    default: return v;
    }
}
/* the activation over one row of w stored outputs: onnxep_act1's expressions, one loop per kind, so that the
   compiler vectorizes them (onnxep_act1 per element, its switch inside the loop, ran scalar: in the bf16 GEMM's
   epilogue a 1x1 conv + HardSwish alone, 32 -> 96 at 14x14, took 2.1x the fp32 conv's time). Sigmoid and Tanh are
   eltwise.h's branch-free forms, so a fused activation gives the standalone kernel's bits. */
static inline void onnxep_act_row(const onnxep_act* act, float* __restrict y, Py_ssize_t w)
{
    Py_ssize_t j;
    switch (act->kind) {
    case ONNXEP_ACT_RELU:
        for (j = 0; j < w; j++) y[j] = y[j] > 0.0f ? y[j] : 0.0f;
        break;
    case ONNXEP_ACT_CLIP: {
        const float lo = act->a, hi = act->b;
        for (j = 0; j < w; j++) { float h = y[j] < lo ? lo : y[j]; y[j] = h > hi ? hi : h; }
        break; }
    case ONNXEP_ACT_LEAKY_RELU: {
        const float s = act->a;
        for (j = 0; j < w; j++) y[j] = y[j] >= 0.0f ? y[j] : y[j] * s;
        break; }
    case ONNXEP_ACT_HARD_SIGMOID: {
        const float al = act->a, be = act->b;
        for (j = 0; j < w; j++) { float h = al * y[j] + be; y[j] = h < 0.0f ? 0.0f : (h > 1.0f ? 1.0f : h); }
        break; }
    case ONNXEP_ACT_HARD_SWISH:
        for (j = 0; j < w; j++) {
            float v = y[j], h = v * (1.0f / 6.0f) + 0.5f;
            h = h < 0.0f ? 0.0f : h;
            y[j] = v * (h > 1.0f ? 1.0f : h);
        }
        break;
    case ONNXEP_ACT_GELU:
#if defined(__AVX512F__)
        onnxep_gelu_run(y, y, w);
#else
        #pragma omp simd
        for (j = 0; j < w; j++) y[j] = onnxep_gelu1(y[j]);
#endif
        break;
    case ONNXEP_ACT_SIGMOID:
        #pragma omp simd
        for (j = 0; j < w; j++) y[j] = onnxep_sigmoid1(y[j]);
        break;
    case ONNXEP_ACT_TANH:
        #pragma omp simd
        for (j = 0; j < w; j++) y[j] = onnxep_tanh1(y[j]);
        break;
    default:
        for (j = 0; j < w; j++) y[j] = onnxep_act1(act, y[j]);
    }
}
/* the activations that are not applied in registers, over a stored mr x nr tile */
static inline void onnxep_act_tile(const onnxep_act* act, float* c, Py_ssize_t rsc, Py_ssize_t mr, Py_ssize_t nr)
{
    Py_ssize_t i;
#if defined(__AVX512F__)
    if (act->kind == ONNXEP_ACT_GELU) { onnxep_gelu_tile(c, c, rsc, mr, nr); return; }     /* across the rows */
#endif
    for (i = 0; i < mr; i++) onnxep_act_row(act, c + i * rsc, nr);
}

/* onnxep_uk_store's per-tile fast path (onnxep_uk_store_fast) on or off: tests and in-process A/B (sgemm_store_fast;
   SIMD variants) */
static int onnxep_uk_fast_on = 1;
#if ONNXEP_SGEMM_SIMD
#include <immintrin.h>
#define ONNXEP_UK_ARGS Py_ssize_t kc, Py_ssize_t nr, const float* a, const float* b, float* c, Py_ssize_t rsc,                        float alpha, float beta, const float* bias_col, const float* bias_row,                        const float* res, const onnxep_act* act, const float* pf
#define ONNXEP_UK_PASS kc, nr, a, b, c, rsc, alpha, beta, bias_col, bias_row, res, act, pf
#define ONNXEP_ST_ARGS Py_ssize_t nr, float* c, Py_ssize_t rsc, float alpha, float beta, const float* bias_col,                        const float* bias_row, const float* res, const onnxep_act* act
#define ONNXEP_ST_PASS nr, c, rsc, alpha, beta, bias_col, bias_row, res, act
#endif

#if defined(__AVX512F__)
/* onnxep_uk_store's common case for one vector of channels, its choices made once per tile instead of once per row
   and the second vector's work (masked off at nr 16) skipped: a full tile (MRV = MR rows), nr = 16, alpha 1, beta 0,
   a column bias, no row bias, R (RES) or not, act none / Relu / Clip (KIND). The same operations in the same order
   as the general loop, so the same bits. Kernel alone, 1 thread, a 1x1 conv 32 -> 16 at 112x112 or 56x56: 0.91-0.92x
   the time; not for two vectors (nr 32: 16 -> 96 at 112x112 1.02-1.03x, 24 -> 144 at 56x56 1.00x). */
static inline __attribute__((always_inline)) void onnxep_uk_store_fast(const int MRV, const int RES, const int KIND,
                                                                      const __m512* c0, float* c, Py_ssize_t rsc,
                                                                      const float* bias_col, const float* res,
                                                                      const onnxep_act* act)
{
    int i;
    __m512 z = _mm512_setzero_ps(), bc0 = _mm512_loadu_ps(bias_col);
    __m512 lo = _mm512_set1_ps(KIND == ONNXEP_ACT_CLIP ? act->a : 0.0f);
    __m512 hi = _mm512_set1_ps(KIND == ONNXEP_ACT_CLIP ? act->b : 0.0f);
    #pragma GCC unroll 12
    for (i = 0; i < MRV; i++) {
        __m512 v0 = _mm512_add_ps(c0[i], bc0);
        if (RES) v0 = _mm512_add_ps(v0, _mm512_loadu_ps(res + i * rsc));
        if (KIND == ONNXEP_ACT_RELU) v0 = _mm512_max_ps(v0, z);
        else if (KIND == ONNXEP_ACT_CLIP) v0 = _mm512_min_ps(hi, _mm512_max_ps(lo, v0));
        _mm512_storeu_ps(c + i * rsc, v0);
    }
}
/* onnxep_uk_store_fast's case for (RES, the activation kind) */
#define ONNXEP_UK_FAST(MRV, RES)                                                                                      \
    switch (kind) {                                                                                                   \
    case ONNXEP_ACT_RELU: onnxep_uk_store_fast(MRV, RES, ONNXEP_ACT_RELU, c0, c, rsc, bias_col, res, act); break;     \
    case ONNXEP_ACT_CLIP: onnxep_uk_store_fast(MRV, RES, ONNXEP_ACT_CLIP, c0, c, rsc, bias_col, res, act); break;     \
    default: onnxep_uk_store_fast(MRV, RES, ONNXEP_ACT_NONE, c0, c, rsc, bias_col, res, act); }
/* the fused epilogue: C[:MRV, :nr] := act(alpha*acc + beta*C [+ bias] [+ R]) from the accumulators c0 / c1 */
static inline __attribute__((always_inline)) void onnxep_uk_store(const int MRV, const __m512* c0,
                                                                 const __m512* c1, ONNXEP_ST_ARGS)
{
    int i;
    int kind = act ? act->kind : ONNXEP_ACT_NONE;
    if (MRV == ONNXEP_SGEMM_MR && onnxep_uk_fast_on && nr == 16 && alpha == 1.0f && beta == 0.0f && bias_col
            && !bias_row && (kind == ONNXEP_ACT_NONE || kind == ONNXEP_ACT_RELU || kind == ONNXEP_ACT_CLIP)) {
        if (res) { ONNXEP_UK_FAST(MRV, 1) } else { ONNXEP_UK_FAST(MRV, 0) }
        return;
    }
    __mmask16 m0 = nr >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << nr) - 1u);
    __mmask16 m1 = nr >= 32 ? (__mmask16)0xFFFF : nr <= 16 ? (__mmask16)0 : (__mmask16)((1u << (nr - 16)) - 1u);
    __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta), z = _mm512_setzero_ps();
    __m512 bc0 = z, bc1 = z;
    __m512 lo = _mm512_set1_ps(act ? act->a : 0.0f), hi = _mm512_set1_ps(act ? act->b : 0.0f);
    if (bias_col) { bc0 = _mm512_maskz_loadu_ps(m0, bias_col); bc1 = _mm512_maskz_loadu_ps(m1, bias_col + 16); }
    #pragma GCC unroll 12
    for (i = 0; i < MRV; i++) {
        float* ci = c + i * rsc;
        __m512 v0 = c0[i], v1 = c1[i];
        if (alpha != 1.0f) { v0 = _mm512_mul_ps(va, v0); v1 = _mm512_mul_ps(va, v1); }
        if (beta != 0.0f) {
            v0 = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(m0, ci), v0);
            v1 = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(m1, ci + 16), v1);
        }
        if (bias_col) { v0 = _mm512_add_ps(v0, bc0); v1 = _mm512_add_ps(v1, bc1); }
        if (bias_row) { __m512 r = _mm512_set1_ps(bias_row[i]); v0 = _mm512_add_ps(v0, r); v1 = _mm512_add_ps(v1, r); }
        if (res) {
            v0 = _mm512_add_ps(v0, _mm512_maskz_loadu_ps(m0, res + i * rsc));
            v1 = _mm512_add_ps(v1, _mm512_maskz_loadu_ps(m1, res + i * rsc + 16));
        }
        if (kind == ONNXEP_ACT_RELU) { v0 = _mm512_max_ps(v0, z); v1 = _mm512_max_ps(v1, z); }  /* NaN -> 0 */
        else if (kind == ONNXEP_ACT_CLIP) {
            v0 = _mm512_min_ps(hi, _mm512_max_ps(lo, v0)); v1 = _mm512_min_ps(hi, _mm512_max_ps(lo, v1));  /* NaN stays */
        } else if (kind == ONNXEP_ACT_LEAKY_RELU) {
            v0 = _mm512_mask_mul_ps(v0, _mm512_cmp_ps_mask(v0, z, _CMP_LT_OQ), v0, lo);
            v1 = _mm512_mask_mul_ps(v1, _mm512_cmp_ps_mask(v1, z, _CMP_LT_OQ), v1, lo);
        } else if (kind == ONNXEP_ACT_HARD_SWISH) {
            __m512 s6 = _mm512_set1_ps(1.0f / 6.0f), h5 = _mm512_set1_ps(0.5f), one = _mm512_set1_ps(1.0f);
            v0 = _mm512_mul_ps(v0, _mm512_min_ps(one, _mm512_max_ps(z, _mm512_fmadd_ps(v0, s6, h5))));
            v1 = _mm512_mul_ps(v1, _mm512_min_ps(one, _mm512_max_ps(z, _mm512_fmadd_ps(v1, s6, h5))));
        }
        _mm512_mask_storeu_ps(ci, m0, v0);
        _mm512_mask_storeu_ps(ci + 16, m1, v1);
    }
    if (!ONNXEP_ACT_IN_REGS(kind)) onnxep_act_tile(act, c, rsc, MRV, nr);
}
static inline __attribute__((always_inline)) void onnxep_uk_body(const int MRV, const int NV, ONNXEP_UK_ARGS)
{
    __m512 c0[12], c1[12];
    Py_ssize_t k;
    int i;
    #pragma GCC unroll 12
    for (i = 0; i < MRV; i++) {   /* C is written (and maybe read) after the K loop: fetch it meanwhile */
        c0[i] = _mm512_setzero_ps(); c1[i] = _mm512_setzero_ps();
        _mm_prefetch((const char*)(c + i * rsc), _MM_HINT_T0);
        _mm_prefetch((const char*)(c + i * rsc + 31), _MM_HINT_T0);
    }
    for (k = 0; k < kc; k++) {
        __m512 b0 = _mm512_loadu_ps(b), b1 = NV == 2 ? _mm512_loadu_ps(b + 16) : b0;
        if (pf) {
            _mm_prefetch((const char*)(pf + 32 * k), _MM_HINT_T1);
            _mm_prefetch((const char*)(pf + 32 * k + 16), _MM_HINT_T1);
        }
        #pragma GCC unroll 12
        for (i = 0; i < MRV; i++) {
            __m512 ai = _mm512_set1_ps(a[i]);
            c0[i] = _mm512_fmadd_ps(ai, b0, c0[i]);
            if (NV == 2) c1[i] = _mm512_fmadd_ps(ai, b1, c1[i]);
        }
        a += 12;
        b += 32;
    }
    onnxep_uk_store(MRV, c0, c1, ONNXEP_ST_PASS);
}
static void onnxep_sgemm_uk(Py_ssize_t mr, ONNXEP_UK_ARGS)
{
    switch (mr) {
    case 12: if (nr <= 16) onnxep_uk_body(12, 1, ONNXEP_UK_PASS); else onnxep_uk_body(12, 2, ONNXEP_UK_PASS); break;
    case 11: if (nr <= 16) onnxep_uk_body(11, 1, ONNXEP_UK_PASS); else onnxep_uk_body(11, 2, ONNXEP_UK_PASS); break;
    case 10: if (nr <= 16) onnxep_uk_body(10, 1, ONNXEP_UK_PASS); else onnxep_uk_body(10, 2, ONNXEP_UK_PASS); break;
    case 9: if (nr <= 16) onnxep_uk_body(9, 1, ONNXEP_UK_PASS); else onnxep_uk_body(9, 2, ONNXEP_UK_PASS); break;
    case 8: if (nr <= 16) onnxep_uk_body(8, 1, ONNXEP_UK_PASS); else onnxep_uk_body(8, 2, ONNXEP_UK_PASS); break;
    case 7: if (nr <= 16) onnxep_uk_body(7, 1, ONNXEP_UK_PASS); else onnxep_uk_body(7, 2, ONNXEP_UK_PASS); break;
    case 6: if (nr <= 16) onnxep_uk_body(6, 1, ONNXEP_UK_PASS); else onnxep_uk_body(6, 2, ONNXEP_UK_PASS); break;
    case 5: if (nr <= 16) onnxep_uk_body(5, 1, ONNXEP_UK_PASS); else onnxep_uk_body(5, 2, ONNXEP_UK_PASS); break;
    case 4: if (nr <= 16) onnxep_uk_body(4, 1, ONNXEP_UK_PASS); else onnxep_uk_body(4, 2, ONNXEP_UK_PASS); break;
    case 3: if (nr <= 16) onnxep_uk_body(3, 1, ONNXEP_UK_PASS); else onnxep_uk_body(3, 2, ONNXEP_UK_PASS); break;
    case 2: if (nr <= 16) onnxep_uk_body(2, 1, ONNXEP_UK_PASS); else onnxep_uk_body(2, 2, ONNXEP_UK_PASS); break;
    case 1: if (nr <= 16) onnxep_uk_body(1, 1, ONNXEP_UK_PASS); else onnxep_uk_body(1, 2, ONNXEP_UK_PASS); break;
    default: break;
    }
}
#elif defined(__AVX2__) && defined(__FMA__)
static const int onnxep_uk_mask_tab[16] = {-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0};
static inline __m256i onnxep_uk_mask(Py_ssize_t n)   /* first min(max(n, 0), 8) lanes set */
{
    n = n < 0 ? 0 : n > 8 ? 8 : n;
    return _mm256_loadu_si256((const __m256i*)(onnxep_uk_mask_tab + 8 - n));
}
/* onnxep_uk_store's common case, as the AVX-512 variant's onnxep_uk_store_fast, here for a full tile of two whole
   vectors (nr = NR = 16). Kernel alone, 1 thread (ONNXEP_ISA=avx2 on Zen 5), 1x1 convs: 16 -> 96 at 112x112 0.88x
   the time, 24 -> 144 at 56x56 0.92x, 32 -> 16 at 112x112 0.94x, 96 -> 24 + R at 56x56 0.97x, 144 -> 32 + R at
   28x28 0.98x. */
static inline __attribute__((always_inline)) void onnxep_uk_store_fast(const int MRV, const int RES, const int KIND,
                                                                      const __m256* c0,
                                                                      const __m256* c1, float* c, Py_ssize_t rsc,
                                                                      const float* bias_col, const float* res,
                                                                      const onnxep_act* act)
{
    int i;
    __m256 z = _mm256_setzero_ps(), bc0 = _mm256_loadu_ps(bias_col), bc1 = _mm256_loadu_ps(bias_col + 8);
    __m256 lo = _mm256_set1_ps(KIND == ONNXEP_ACT_CLIP ? act->a : 0.0f);
    __m256 hi = _mm256_set1_ps(KIND == ONNXEP_ACT_CLIP ? act->b : 0.0f);
    #pragma GCC unroll 6
    for (i = 0; i < MRV; i++) {
        float* ci = c + i * rsc;
        __m256 v0 = _mm256_add_ps(c0[i], bc0), v1 = _mm256_add_ps(c1[i], bc1);
        if (RES) {
            v0 = _mm256_add_ps(v0, _mm256_loadu_ps(res + i * rsc));
            v1 = _mm256_add_ps(v1, _mm256_loadu_ps(res + i * rsc + 8));
        }
        if (KIND == ONNXEP_ACT_RELU) { v0 = _mm256_max_ps(v0, z); v1 = _mm256_max_ps(v1, z); }
        else if (KIND == ONNXEP_ACT_CLIP) {
            v0 = _mm256_min_ps(hi, _mm256_max_ps(lo, v0));
            v1 = _mm256_min_ps(hi, _mm256_max_ps(lo, v1));
        }
        _mm256_storeu_ps(ci, v0);
        _mm256_storeu_ps(ci + 8, v1);
    }
}
#define ONNXEP_UK_FAST(MRV, RES)                                                                                      \
    switch (kind) {                                                                                                   \
    case ONNXEP_ACT_RELU: onnxep_uk_store_fast(MRV, RES, ONNXEP_ACT_RELU, c0, c1, c, rsc, bias_col, res, act); break;\
    case ONNXEP_ACT_CLIP: onnxep_uk_store_fast(MRV, RES, ONNXEP_ACT_CLIP, c0, c1, c, rsc, bias_col, res, act); break;\
    default: onnxep_uk_store_fast(MRV, RES, ONNXEP_ACT_NONE, c0, c1, c, rsc, bias_col, res, act); }
static inline __attribute__((always_inline)) void onnxep_uk_store(const int MRV, const __m256* c0,
                                                                 const __m256* c1, ONNXEP_ST_ARGS)
{
    int i;
    int full = nr >= 16;
    int kind = act ? act->kind : ONNXEP_ACT_NONE;
    if (MRV == ONNXEP_SGEMM_MR && onnxep_uk_fast_on && full && alpha == 1.0f && beta == 0.0f && bias_col && !bias_row
            && (kind == ONNXEP_ACT_NONE || kind == ONNXEP_ACT_RELU || kind == ONNXEP_ACT_CLIP)) {
        if (res) { ONNXEP_UK_FAST(MRV, 1) } else { ONNXEP_UK_FAST(MRV, 0) }
        return;
    }
    __m256i m0 = onnxep_uk_mask(nr), m1 = onnxep_uk_mask(nr - 8);
    __m256 va = _mm256_set1_ps(alpha), vb = _mm256_set1_ps(beta), z = _mm256_setzero_ps();
    __m256 bc0 = z, bc1 = z;
    __m256 lo = _mm256_set1_ps(act ? act->a : 0.0f), hi = _mm256_set1_ps(act ? act->b : 0.0f);
    if (bias_col) { bc0 = _mm256_maskload_ps(bias_col, m0); bc1 = _mm256_maskload_ps(bias_col + 8, m1); }
    #pragma GCC unroll 6
    for (i = 0; i < MRV; i++) {
        float* ci = c + i * rsc;
        __m256 v0 = c0[i], v1 = c1[i];
        if (alpha != 1.0f) { v0 = _mm256_mul_ps(va, v0); v1 = _mm256_mul_ps(va, v1); }
        if (beta != 0.0f) {
            if (full) {
                v0 = _mm256_fmadd_ps(vb, _mm256_loadu_ps(ci), v0);
                v1 = _mm256_fmadd_ps(vb, _mm256_loadu_ps(ci + 8), v1);
            } else {
                v0 = _mm256_fmadd_ps(vb, _mm256_maskload_ps(ci, m0), v0);
                v1 = _mm256_fmadd_ps(vb, _mm256_maskload_ps(ci + 8, m1), v1);
            }
        }
        if (bias_col) { v0 = _mm256_add_ps(v0, bc0); v1 = _mm256_add_ps(v1, bc1); }
        if (bias_row) { __m256 r = _mm256_set1_ps(bias_row[i]); v0 = _mm256_add_ps(v0, r); v1 = _mm256_add_ps(v1, r); }
        if (res) {
            const float* ri = res + i * rsc;
            if (full) { v0 = _mm256_add_ps(v0, _mm256_loadu_ps(ri)); v1 = _mm256_add_ps(v1, _mm256_loadu_ps(ri + 8)); }
            else { v0 = _mm256_add_ps(v0, _mm256_maskload_ps(ri, m0)); v1 = _mm256_add_ps(v1, _mm256_maskload_ps(ri + 8, m1)); }
        }
        if (kind == ONNXEP_ACT_RELU) { v0 = _mm256_max_ps(v0, z); v1 = _mm256_max_ps(v1, z); }  /* NaN -> 0 */
        else if (kind == ONNXEP_ACT_CLIP) {
            v0 = _mm256_min_ps(hi, _mm256_max_ps(lo, v0)); v1 = _mm256_min_ps(hi, _mm256_max_ps(lo, v1));  /* NaN stays */
        } else if (kind == ONNXEP_ACT_LEAKY_RELU) {
            v0 = _mm256_blendv_ps(v0, _mm256_mul_ps(v0, lo), _mm256_cmp_ps(v0, z, _CMP_LT_OQ));
            v1 = _mm256_blendv_ps(v1, _mm256_mul_ps(v1, lo), _mm256_cmp_ps(v1, z, _CMP_LT_OQ));
        } else if (kind == ONNXEP_ACT_HARD_SWISH) {
            __m256 s6 = _mm256_set1_ps(1.0f / 6.0f), h5 = _mm256_set1_ps(0.5f), one = _mm256_set1_ps(1.0f);
            v0 = _mm256_mul_ps(v0, _mm256_min_ps(one, _mm256_max_ps(z, _mm256_fmadd_ps(v0, s6, h5))));
            v1 = _mm256_mul_ps(v1, _mm256_min_ps(one, _mm256_max_ps(z, _mm256_fmadd_ps(v1, s6, h5))));
        }
        if (full) {
            _mm256_storeu_ps(ci, v0);
            _mm256_storeu_ps(ci + 8, v1);
        } else {
            _mm256_maskstore_ps(ci, m0, v0);
            _mm256_maskstore_ps(ci + 8, m1, v1);
        }
    }
    if (!ONNXEP_ACT_IN_REGS(kind)) onnxep_act_tile(act, c, rsc, MRV, nr);
}
static inline __attribute__((always_inline)) void onnxep_uk_body(const int MRV, const int NV, ONNXEP_UK_ARGS)
{
    __m256 c0[6], c1[6];
    Py_ssize_t k;
    int i;
    #pragma GCC unroll 6
    for (i = 0; i < MRV; i++) { c0[i] = _mm256_setzero_ps(); c1[i] = _mm256_setzero_ps(); }
    for (k = 0; k < kc; k++) {
        __m256 b0 = _mm256_loadu_ps(b), b1 = NV == 2 ? _mm256_loadu_ps(b + 8) : b0;
        #pragma GCC unroll 6
        for (i = 0; i < MRV; i++) {
            __m256 ai = _mm256_broadcast_ss(a + i);
            c0[i] = _mm256_fmadd_ps(ai, b0, c0[i]);
            if (NV == 2) c1[i] = _mm256_fmadd_ps(ai, b1, c1[i]);
        }
        a += 6;
        b += 16;
    }
    onnxep_uk_store(MRV, c0, c1, ONNXEP_ST_PASS);
}
static void onnxep_sgemm_uk(Py_ssize_t mr, ONNXEP_UK_ARGS)
{
    switch (mr) {
    case 6: if (nr <= 8) onnxep_uk_body(6, 1, ONNXEP_UK_PASS); else onnxep_uk_body(6, 2, ONNXEP_UK_PASS); break;
    case 5: if (nr <= 8) onnxep_uk_body(5, 1, ONNXEP_UK_PASS); else onnxep_uk_body(5, 2, ONNXEP_UK_PASS); break;
    case 4: if (nr <= 8) onnxep_uk_body(4, 1, ONNXEP_UK_PASS); else onnxep_uk_body(4, 2, ONNXEP_UK_PASS); break;
    case 3: if (nr <= 8) onnxep_uk_body(3, 1, ONNXEP_UK_PASS); else onnxep_uk_body(3, 2, ONNXEP_UK_PASS); break;
    case 2: if (nr <= 8) onnxep_uk_body(2, 1, ONNXEP_UK_PASS); else onnxep_uk_body(2, 2, ONNXEP_UK_PASS); break;
    case 1: if (nr <= 8) onnxep_uk_body(1, 1, ONNXEP_UK_PASS); else onnxep_uk_body(1, 2, ONNXEP_UK_PASS); break;
    default: break;
    }
}
#else
/* generic variant: never called (ONNXEP_SGEMM_SIMD == 0), the Cython micro-kernel below runs instead */
static inline void onnxep_sgemm_uk(Py_ssize_t mr, Py_ssize_t kc, Py_ssize_t nr, const float* a, const float* b,
                                   float* c, Py_ssize_t rsc, float alpha, float beta, const float* bias_col,
                                   const float* bias_row, const float* res, const onnxep_act* act,
                                   const float* pf) { }
#endif
#if ONNXEP_SGEMM_SIMD
/* onnxep_sgemm_row: one row of C against ncols columns of one packed K block (the panels from b on, kc x NR each,
   one after another), panel by panel with onnxep_sgemm_uk's one-row body inlined: the same products in the same
   order and the same epilogue, so the same bits as a call per panel. c, bias_col and res point at the first column.
   pf 1: each panel fetches the next one into L2 as it goes (onnxep_sgemm_uk's pf); 0: none. */
static void onnxep_sgemm_row(Py_ssize_t kc, Py_ssize_t ncols, const float* a, const float* b, float* c,
                             float alpha, float beta, const float* bias_col, const float* bias_row, const float* res,
                             const onnxep_act* act, int pf)
{
    Py_ssize_t n, nr;
    for (n = 0; n < ncols; n += ONNXEP_SGEMM_NR) {
        const float* bn = b + n * kc;
        const float* nx = pf && n + ONNXEP_SGEMM_NR < ncols ? bn + ONNXEP_SGEMM_NR * kc : NULL;
        const float* bc = bias_col ? bias_col + n : NULL;
        const float* rs = res ? res + n : NULL;
        nr = ncols - n < ONNXEP_SGEMM_NR ? ncols - n : ONNXEP_SGEMM_NR;
        if (2 * nr > ONNXEP_SGEMM_NR)
            onnxep_uk_body(1, 2, kc, nr, a, bn, c + n, 0, alpha, beta, bc, bias_row, rs, act, nx);
        else
            onnxep_uk_body(1, 1, kc, nr, a, bn, c + n, 0, alpha, beta, bc, bias_row, rs, act, nx);
    }
}
#else
static inline void onnxep_sgemm_row(Py_ssize_t kc, Py_ssize_t ncols, const float* a, const float* b, float* c,
                                    float alpha, float beta, const float* bias_col, const float* bias_row,
                                    const float* res, const onnxep_act* act, int pf) { }
#endif

/* KC zeros: the source of A's rows (or row runs) that fall in a conv's padding */
static const float onnxep_zeros[ONNXEP_SGEMM_KC];

/* d[kk*MR + i] := srcs[i][kk] for kk < n, i < MR: MR source runs (a row's run, or onnxep_zeros), transposed
   into n consecutive MR-float rows of a packed A panel. */
#if defined(__AVX512F__)
static void onnxep_pack_rows_t(float* d, const float* const* srcs, Py_ssize_t n)
{
    Py_ssize_t kk = 0;
    const __mmask16 m12 = 0x0FFF;
    for (; kk < n; kk += 16) {
        __m512 r[16], t[16];
        int i, rem = n - kk < 16 ? (int)(n - kk) : 16;     /* the last block: a masked load, rem rows stored */
        __mmask16 ml = (__mmask16)((1u << rem) - 1u);
        for (i = 0; i < 12; i++) r[i] = _mm512_maskz_loadu_ps(ml, srcs[i] + kk);
        for (i = 12; i < 16; i++) r[i] = _mm512_setzero_ps();
        /* 16 x 16 transpose: 32-bit, 64-bit interleaves, then 128-bit lane shuffles */
        for (i = 0; i < 16; i += 2) {
            t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
            t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
        }
        for (i = 0; i < 16; i += 4) {
            r[i] = _mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(t[i]), _mm512_castps_pd(t[i + 2])));
            r[i + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(t[i]), _mm512_castps_pd(t[i + 2])));
            r[i + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(t[i + 1]), _mm512_castps_pd(t[i + 3])));
            r[i + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(t[i + 1]), _mm512_castps_pd(t[i + 3])));
        }
        /* r[4q + s] holds, in 128-bit lane L, rows 4q..4q+3 of column 4L + s */
        for (i = 0; i < 4; i++) {
            __m512 a = _mm512_shuffle_f32x4(r[i], r[4 + i], 0x88);      /* lanes 0,2 of r[i], 0,2 of r[4+i] */
            __m512 b = _mm512_shuffle_f32x4(r[8 + i], r[12 + i], 0x88);
            __m512 c = _mm512_shuffle_f32x4(r[i], r[4 + i], 0xDD);      /* lanes 1,3 */
            __m512 e = _mm512_shuffle_f32x4(r[8 + i], r[12 + i], 0xDD);
            t[i] = _mm512_shuffle_f32x4(a, b, 0x88);                    /* column i      (lane 0) */
            t[8 + i] = _mm512_shuffle_f32x4(a, b, 0xDD);                /* column 8 + i  (lane 2) */
            t[4 + i] = _mm512_shuffle_f32x4(c, e, 0x88);                /* column 4 + i  (lane 1) */
            t[12 + i] = _mm512_shuffle_f32x4(c, e, 0xDD);               /* column 12 + i (lane 3) */
        }
        for (i = 0; i < rem; i++) _mm512_mask_storeu_ps(d + (kk + i) * 12, m12, t[i]);
    }
}
#else
static void onnxep_pack_rows_t(float* d, const float* const* srcs, Py_ssize_t n)
{
    Py_ssize_t kk;
    int i;
    for (kk = 0; kk < n; kk++)
        for (i = 0; i < ONNXEP_SGEMM_MR; i++) d[kk * ONNXEP_SGEMM_MR + i] = srcs[i][kk];
}
#endif

#endif /* ONNXEP_NATIVE_SGEMM_H */
