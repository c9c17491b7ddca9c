/* onnxep native code, included by onnxep/_k_transformer.pxi (compiled once per ISA; see setup.py). */
#ifndef ONNXEP_NATIVE_ERF_H
#define ONNXEP_NATIVE_ERF_H

#include <math.h>
/* erf in float32, written so that gcc vectorises the loops below (no calls, no branches: both halves are
   computed and one is selected).
     |x| <= 0.921875:        erf(x) = x * P(x^2)                 (P degree 5)
     0.921875 < |x| < 3.925: erf(|x|) = 1 - exp(Q(|x|))          (Q ~ log erfc, degree 7)
     |x| >= 3.925:           erf(|x|) = 1 (erfc(3.925) = 1.6e-8 is below half an ulp of 1)
   P and Q are near-minimax fits (Lawson-weighted least squares in float64 against math.erf / math.erfc; Q's error
   weighted by erfc so it is small in erf's absolute terms). Measured against math.erf on 2M points in [-6, 6]
   plus 10^-30..1: max |error| 1.3e-7, max 2.4 ulp, 89% correctly rounded (numpy float32 emulation without FMA;
   tests/kernels/test_transformer.py checks the built kernels). exp is onnxep_exp_neg below. */
#define ONNXEP_ERF_SPLIT 0.921875f
#define ONNXEP_ERF_CLAMP 3.925f
static inline float onnxep_erf_p(float t)
{
    return 1.1283791f + t * (-0.37612507f + t * (0.112819284f + t * (-0.026770258f
           + t * (0.0049980325f + t * -0.0006013529f))));
}
static inline float onnxep_erf_q(float a)
{
    return 0.00017636162f + a * (-1.1295232f + a * (-0.6333299f + a * (-0.10829911f + a * (0.025131948f
           + a * (-0.0041759014f + a * (0.00043547782f + a * -2.1184242e-05f))))));
}
/* exp(x) for x <= 0: x = n ln2 + r, |r| <= ln2/2, exp(r) by a degree-6 minimax polynomial (relative error
   1.9e-9), 2^n built in the exponent bits; within ~1 ulp of expf. Below -87 (where expf's result leaves the
   normal range) it returns 0 (an error under 1.7e-38); -inf gives 0, NaN stays NaN. */
static inline float onnxep_exp_neg(float x)
{
    float xc = x < -87.0f ? -87.0f : x;                            /* NaN passes: the comparison is false */
    float n = (xc * 1.44269504f + 12582912.0f) - 12582912.0f;     /* round to nearest integer */
    float r = xc - n * 0.693145751953125f;                         /* ln2 split: hi has 12 zero low bits */
    r = r - n * 1.428606765330187045e-06f;
    float p = 1.0f + r * (1.0f + r * (0.4999999f + r * (0.1666642f + r * (0.041668225f
              + r * (0.008374815f + r * 0.0013836784f)))));
    union { float f; int i; } s;
    s.i = ((int)n + 127) << 23;
    return x < -87.0f ? 0.0f : p * s.f;
}
static inline float onnxep_erf1(float x)
{
    float a = x < 0.0f ? -x : x;
    a = a < ONNXEP_ERF_CLAMP ? a : ONNXEP_ERF_CLAMP;
    float small = a * onnxep_erf_p(a * a);
    float big = 1.0f - onnxep_exp_neg(onnxep_erf_q(a));
    float r = a <= ONNXEP_ERF_SPLIT ? small : big;
    r = x < 0.0f ? -r : r;
    return x != x ? x : r;                                         /* NaN stays NaN */
}
/* Gelu(x) = x * Phi(x), Phi the normal CDF, in one branch-free form (no erf split):
     h = Phi(-|x|) = 2^G(|x|) for |x| < 5.550788 (3.925 sqrt 2), 0 beyond (Phi(-5.55) = 1.4e-8);
     Phi(x) = 1 - h for x >= 0, h for x < 0.
   G ~ log2 Phi(-a) (degree 8; the 1/sqrt2, the 1/2 of 0.5 erfc(a/sqrt2) and log2(e) are in its coefficients), a
   near-minimax fit (Lawson-weighted least squares in float64 against math.erfc, the error weighted by Phi(-a): absolute
   in Phi, which is what x * Phi needs -- Gelu's bound is absolute, 3e-7 max(1, |x|)); fit error 7.6e-9 in Phi.
   2^G: G = n + r (n the nearest integer, r exact, |r| <= 1/2), 2^r by onnxep_exp_neg's polynomial in r ln2, 2^n in
   the exponent bits (G is in [-26.1, -1]: no guard). The built kernels (tests/kernels/test_transformer.py) stay
   within 0.32 (avx512, avx2 with FMA) of that bound, against 0.43 .. 0.44 for erf's two-branch form this replaced,
   in half the instructions per vector: 0.24 against 0.48 ns an element in L2 (AVX-512, dev machine; 2x). */
#define ONNXEP_GELU_CLAMP 5.550788f
static inline float onnxep_gelu1(float x)
{
    float a0 = fabsf(x);
    float a = a0 < ONNXEP_GELU_CLAMP ? a0 : ONNXEP_GELU_CLAMP;      /* NaN -> the clamp; x * Phi stays NaN */
    float g = -0.999999978f + a * (-1.15110573f + a * (-0.459204894f + a * (-0.052505066f + a * (0.00707552421f
              + a * (-0.000145909936f + a * (-0.000182531126f + a * (3.86172687e-05f + a * -2.77175758e-06f)))))));
    float n = (g + 12582912.0f) - 12582912.0f;                      /* round to nearest integer */
    float r = g - n;
    float p = 1.0f + r * (0.693147181f + r * (0.240226459f + r * (0.0555032872f + r * (0.00961848883f
              + r * (0.00133999299f + r * 0.000153457432f)))));
    union { float f; int i; } s;
    s.i = ((int)n + 127) << 23;
    float h = a0 < ONNXEP_GELU_CLAMP ? p * s.f : 0.0f;
    return x * (x >= 0.0f ? 1.0f - h : h);                          /* +inf -> inf, -40 -> -0 */
}
#if defined(__AVX512F__)
#include <immintrin.h>
/* onnxep_gelu1 on NV vectors at once, each step for all NV before the next: the same operations as onnxep_gelu1
   compiled with FMA contraction (so the same bits: tests/kernels/test_transformer.py compares the variants), with
   the rounding to an integer as vrndscaleps (round to nearest even, as the 1.5 * 2^23 trick) and 2^n * p as
   vscalefps (exact: p in [0.7, 1.5], n in [-27, -1]), masked by |x| < the clamp. Why NV vectors in program order:
   one vector's Gelu is a chain of ~20 dependent operations (the two Horner polynomials, 14 FMAs), and the core's
   scheduler holds only a few such chains at once -- written as one vector a loop trip (gcc's vectorized
   onnxep_gelu1) the polynomials ran near their latency, not the FMA units' rate. Kernel alone, in L1, AVX-512
   (Zen 5), ns an element: omp simd loop 0.25; vrndscaleps / vscalefps 0.19 at NV 4; NV 1 / 2 / 8 0.23 / 0.21 /
   0.17. */
static inline __attribute__((always_inline)) void onnxep_gelu_nv(const int NV, __m512* x)
{
    __m512 a[8], g[8], n[8];
    __mmask16 in[8];
    int v;
    const __m512i absm = _mm512_set1_epi32(0x7fffffff);
#define ONNXEP_GELU_STEP(d, s, c) for (v = 0; v < NV; v++) d[v] = _mm512_fmadd_ps(d[v], s[v], _mm512_set1_ps(c));
    for (v = 0; v < NV; v++) {
        a[v] = _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(x[v]), absm));
        in[v] = _mm512_cmp_ps_mask(a[v], _mm512_set1_ps(ONNXEP_GELU_CLAMP), _CMP_LT_OQ);
    }
    for (v = 0; v < NV; v++) g[v] = _mm512_fmadd_ps(a[v], _mm512_set1_ps(-2.77175758e-06f), _mm512_set1_ps(3.86172687e-05f));
    ONNXEP_GELU_STEP(g, a, -0.000182531126f) ONNXEP_GELU_STEP(g, a, -0.000145909936f)
    ONNXEP_GELU_STEP(g, a, 0.00707552421f) ONNXEP_GELU_STEP(g, a, -0.052505066f)
    ONNXEP_GELU_STEP(g, a, -0.459204894f) ONNXEP_GELU_STEP(g, a, -1.15110573f) ONNXEP_GELU_STEP(g, a, -0.999999978f)
    for (v = 0; v < NV; v++) {      /* n = round(g), r = g - n (in g), the polynomial of 2^r in a */
        n[v] = _mm512_roundscale_ps(g[v], _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        g[v] = _mm512_sub_ps(g[v], n[v]);
        a[v] = _mm512_fmadd_ps(g[v], _mm512_set1_ps(0.000153457432f), _mm512_set1_ps(0.00133999299f));
    }
    ONNXEP_GELU_STEP(a, g, 0.00961848883f) ONNXEP_GELU_STEP(a, g, 0.0555032872f)
    ONNXEP_GELU_STEP(a, g, 0.240226459f) ONNXEP_GELU_STEP(a, g, 0.693147181f) ONNXEP_GELU_STEP(a, g, 1.0f)
#undef ONNXEP_GELU_STEP
    for (v = 0; v < NV; v++) {
        __m512 h = _mm512_maskz_scalef_ps(in[v], a[v], n[v]);                   /* h = Phi(-|x|) */
        h = _mm512_mask_sub_ps(h, _mm512_cmp_ps_mask(x[v], _mm512_setzero_ps(), _CMP_GE_OQ), _mm512_set1_ps(1.0f), h);
        x[v] = _mm512_mul_ps(x[v], h);
    }
}
/* y := Gelu(x) over the NV vectors at offsets o[0..NV) (x may be y) */
static inline __attribute__((always_inline)) void onnxep_gelu_at(const int NV, const float* x, float* y,
                                                                 const Py_ssize_t* o)
{
    __m512 v[8];
    int i;
    for (i = 0; i < NV; i++) v[i] = _mm512_loadu_ps(x + o[i]);
    onnxep_gelu_nv(NV, v);
    for (i = 0; i < NV; i++) _mm512_storeu_ps(y + o[i], v[i]);
}
/* y := Gelu(x) over an mr x nr tile (row stride rs in both; x may be y): its whole vectors eight at a time across
   the rows (a GEMM tile's rows are one or two vectors wide), a row's last nr % 16 under a mask */
static void onnxep_gelu_tile(const float* x, float* y, Py_ssize_t rs, Py_ssize_t mr, Py_ssize_t nr)
{
    Py_ssize_t o[8], i, j, nf = nr / 16 * 16;
    int k = 0;
    for (i = 0; i < mr; i++) {
        for (j = 0; j < nf; j += 16) {
            o[k++] = i * rs + j;
            if (k == 8) { onnxep_gelu_at(8, x, y, o); k = 0; }
        }
        if (j < nr) {
            __mmask16 m = (__mmask16)((1u << (nr - j)) - 1u);
            __m512 v = _mm512_maskz_loadu_ps(m, x + i * rs + j);
            onnxep_gelu_nv(1, &v);
            _mm512_mask_storeu_ps(y + i * rs + j, m, v);
        }
    }
    for (i = 0; i < k; i++) onnxep_gelu_at(1, x, y, o + i);
}
#endif
static void onnxep_erf_loop(const float* x, float* y, Py_ssize_t n)
{
    Py_ssize_t i;
    #pragma omp simd
    for (i = 0; i < n; i++) y[i] = onnxep_erf1(x[i]);
}
static void onnxep_gelu_loop(const float* x, float* y, Py_ssize_t n)
{
    Py_ssize_t i;
#if defined(__AVX512F__)
    onnxep_gelu_tile(x, y, 0, 1, n);
    return;
#endif
    #pragma omp simd
    for (i = 0; i < n; i++) y[i] = onnxep_gelu1(x[i]);
}

/* One row of LayerNormalization: mean, then the variance as the mean of (x - mean)^2 (two passes: no
   cancellation), inv = 1 / sqrt(var + eps); y := (x - mean) * inv * scale + bias (bias may be NULL; scale NULL
   means 1). The sums are OpenMP simd reductions (vector partial sums: the order depends on the ISA's width). */
static void onnxep_layernorm_row(const float* x, float* y, Py_ssize_t C, const float* scale, const float* bias,
                                 float eps, float* mean_out, float* inv_out)
{
    Py_ssize_t i;
    float s = 0.0f, v = 0.0f, m, inv;
    #pragma omp simd reduction(+:s)
    for (i = 0; i < C; i++) s += x[i];
    m = s / (float)C;
    #pragma omp simd reduction(+:v)
    for (i = 0; i < C; i++) { float d = x[i] - m; v += d * d; }
    inv = 1.0f / sqrtf(v / (float)C + eps);
    if (mean_out) *mean_out = m;
    if (inv_out) *inv_out = inv;
    if (scale && bias) {
        #pragma omp simd
        for (i = 0; i < C; i++) y[i] = (x[i] - m) * inv * scale[i] + bias[i];
    } else if (scale) {
        #pragma omp simd
        for (i = 0; i < C; i++) y[i] = (x[i] - m) * inv * scale[i];
    } else {
        #pragma omp simd
        for (i = 0; i < C; i++) y[i] = (x[i] - m) * inv;
    }
}

/* Rows r0.. of LayerNormalization, NV at a time (AVX-512): onnxep_layernorm_row's formulas (two passes over the
   row, y := (x - mean) * inv * scale + bias), each step for NV rows before the next. Why: a row's statistics are a
   chain -- the sum, its horizontal add, the mean, the squares' sum, its horizontal add, sqrt and division, ~100 cycles
   -- that the core does not overlap with the next row's past the row's loops and the call; for a short row (ConvNeXt's
   96 channels) that chain is the row's whole time (3136 x 96 at 2 threads: ~45 us, 0.3 ns an element). The sums go
   through 16-lane partial sums (the avx512 loop's reduction order may differ from the omp simd one's; the tests'
   bound covers both). A row's last C % 16 under a mask. */
#if defined(__AVX512F__)
static inline __attribute__((always_inline)) void onnxep_ln_nv(const int NV, const float* x, float* y, Py_ssize_t C,
                                                               const float* scale, const float* bias, float eps,
                                                               float* mean_out, float* inv_out)
{
    __m512 s[4], mv[4], iv[4];
    float m[4], inv[4];
    Py_ssize_t j, cf = C / 16 * 16;
    const __mmask16 mt = (__mmask16)((1u << (C - cf)) - 1u);
    int v;
    for (v = 0; v < NV; v++) s[v] = _mm512_setzero_ps();
    for (j = 0; j < cf; j += 16)
        for (v = 0; v < NV; v++) s[v] = _mm512_add_ps(s[v], _mm512_loadu_ps(x + v * C + j));
    if (mt) for (v = 0; v < NV; v++) s[v] = _mm512_add_ps(s[v], _mm512_maskz_loadu_ps(mt, x + v * C + cf));
    for (v = 0; v < NV; v++) {
        m[v] = _mm512_reduce_add_ps(s[v]) / (float)C;
        mv[v] = _mm512_set1_ps(m[v]);
        s[v] = _mm512_setzero_ps();
    }
    for (j = 0; j < cf; j += 16)
        for (v = 0; v < NV; v++) {
            __m512 d = _mm512_sub_ps(_mm512_loadu_ps(x + v * C + j), mv[v]);
            s[v] = _mm512_fmadd_ps(d, d, s[v]);
        }
    if (mt)
        for (v = 0; v < NV; v++) {
            __m512 d = _mm512_maskz_sub_ps(mt, _mm512_maskz_loadu_ps(mt, x + v * C + cf), mv[v]);
            s[v] = _mm512_fmadd_ps(d, d, s[v]);
        }
    for (v = 0; v < NV; v++) {
        inv[v] = 1.0f / sqrtf(_mm512_reduce_add_ps(s[v]) / (float)C + eps);
        iv[v] = _mm512_set1_ps(inv[v]);
        if (mean_out) mean_out[v] = m[v];
        if (inv_out) inv_out[v] = inv[v];
    }
    for (j = 0; j < C; j += 16) {
        __mmask16 k = j < cf ? (__mmask16)0xFFFF : mt;
        __m512 sc = scale ? _mm512_maskz_loadu_ps(k, scale + j) : _mm512_setzero_ps();
        __m512 bi = bias ? _mm512_maskz_loadu_ps(k, bias + j) : _mm512_setzero_ps();
        for (v = 0; v < NV; v++) {
            __m512 t = _mm512_mul_ps(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, x + v * C + j), mv[v]), iv[v]);
            if (scale && bias) t = _mm512_fmadd_ps(t, sc, bi);
            else if (scale) t = _mm512_mul_ps(t, sc);
            _mm512_mask_storeu_ps(y + v * C + j, k, t);
        }
    }
}
#endif
/* rows 0..R of x (R x C, contiguous) -> y, as onnxep_layernorm_row each (mean_out / inv_out: R values or NULL);
   callers hand a thread ONNXEP_LN_ROWS rows at a time (the same blocks for any thread count: the same bits) */
#define ONNXEP_LN_ROWS 8
static void onnxep_layernorm_rows(const float* x, float* y, Py_ssize_t R, Py_ssize_t C, const float* scale,
                                  const float* bias, float eps, float* mean_out, float* inv_out)
{
    Py_ssize_t r = 0;
#if defined(__AVX512F__)
    for (; r + 4 <= R; r += 4)
        onnxep_ln_nv(4, x + r * C, y + r * C, C, scale, bias, eps, mean_out ? mean_out + r : NULL,
                     inv_out ? inv_out + r : NULL);
    for (; r < R; r++)
        onnxep_ln_nv(1, x + r * C, y + r * C, C, scale, bias, eps, mean_out ? mean_out + r : NULL,
                     inv_out ? inv_out + r : NULL);
    return;
#endif
    for (; r < R; r++)
        onnxep_layernorm_row(x + r * C, y + r * C, C, scale, bias, eps, mean_out ? mean_out + r : NULL,
                             inv_out ? inv_out + r : NULL);
}

/* Softmax (or log-softmax) of one contiguous row of K: the max subtracted first, so every exp argument is <= 0
   and onnxep_exp_neg applies; the max and the sum are OpenMP simd reductions. A row with a NaN gives NaN; a
   row of -inf gives NaN (-inf - -inf), as expf-based softmax does. */
static void onnxep_softmax_row(const float* x, float* y, Py_ssize_t K, int log)
{
    Py_ssize_t i;
    float m = x[0], s = 0.0f;
    #pragma omp simd reduction(max:m)
    for (i = 0; i < K; i++) m = x[i] > m ? x[i] : m;
    if (log) {
        #pragma omp simd reduction(+:s)
        for (i = 0; i < K; i++) s += onnxep_exp_neg(x[i] - m);
        s = logf(s);
        #pragma omp simd
        for (i = 0; i < K; i++) y[i] = (x[i] - m) - s;
        return;
    }
    #pragma omp simd reduction(+:s)
    for (i = 0; i < K; i++) { float e = onnxep_exp_neg(x[i] - m); y[i] = e; s += e; }
    s = 1.0f / s;
    #pragma omp simd
    for (i = 0; i < K; i++) y[i] *= s;
}
/* The same over x + mask: z[i] = x[i] + mask[i * mcs] (mcs 0: one mask value for the row) is formed in y, then
   softmax'd in place while the row is in L1 -- an additive attention mask and its Softmax in one node. */
static void onnxep_softmax_row_mask(const float* x, float* y, Py_ssize_t K, const float* mask, Py_ssize_t mcs,
                                    int log)
{
    Py_ssize_t i;
    if (mcs == 1) {
        #pragma omp simd
        for (i = 0; i < K; i++) y[i] = x[i] + mask[i];
    } else {
        float b = mask[0];
        #pragma omp simd
        for (i = 0; i < K; i++) y[i] = x[i] + b;
    }
    onnxep_softmax_row(y, y, K, log);
}

#endif /* ONNXEP_NATIVE_ERF_H */
