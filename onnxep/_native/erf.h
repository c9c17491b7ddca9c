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
/* Gelu on AVX-512 by a table: h = Phi(-|x|) on 16 equal intervals of [0, 5.550788) (onnxep_gelu1's clamp; 0
   beyond), u = |x| * 16 / 5.550788, interval i = min(floor(u), 15), t = u - i - 1/2 in [-1/2, 1/2], h = P_i(t) with
   P_i of degree 5 (ONNXEP_GELU_TAB[d][i], the coefficient of t^d: near-minimax fits, Lawson-weighted least squares in
   float64 against math.erfc, fit error 2.6e-9 in Phi), its coefficients picked per lane by vpermps; then x * (1 - h)
   for x >= 0, x * h below, as onnxep_gelu1. Five FMAs and one multiply a vector on the FMA units (onnxep_gelu1's
   exp2 form: fourteen FMAs and two multiplies), six vpermps on the shuffle units. Error (the built kernel on
   tests/kernels/test_transformer.py's grid): 0.316 of Gelu's bound 3e-7 max(1, |x|), the exp2 form's 0.313. Each step runs for NV vectors before the next (program order): one vector's chain alone left the
   units idle. Kernel alone, 1 thread, in L1, AVX-512 (Zen 5), ns an element: onnxep_gelu1's omp simd loop 0.23-0.25,
   its operations on 8 vectors at a time (vrndscaleps, vscalefps) 0.146-0.159, this table 0.113. */
static const float ONNXEP_GELU_TAB[6][16] __attribute__((aligned(64))) = {
    {0.431144089f, 0.301397145f, 0.19288592f, 0.112329021f, 0.0592431054f, 0.0281902198f, 0.0120664239f, 0.00463501317f,
     0.0015947622f, 0.000490743725f, 0.000134894304f, 3.30884504e-05f, 7.23675339e-06f, 1.41025362e-06f, 2.44729819e-07f, 3.78008949e-08f},
    {-0.136336133f, -0.120876208f, -0.0950168371f, -0.0662201494f, -0.0409175493f, -0.0224160422f, -0.0108877486f, -0.00468864245f,
     -0.00179013598f, -0.00060597522f, -0.000181866882f, -4.83929834e-05f, -1.14167196e-05f, -2.38797907e-06f, -4.42843373e-07f, -7.28115737e-08f},
    {0.00410214812f, 0.0109109823f, 0.014294697f, 0.0139474887f, 0.0110806059f, 0.00741935102f, 0.00425889483f, 0.002116177f,
     0.000915676646f, 0.000346419954f, 0.00011490695f, 3.34851284e-05f, 8.58574913e-06f, 1.93923438e-06f, 3.86192767e-07f, 6.7860249e-08f},
    {0.00265248585f, 0.00176807796f, 0.000472275424f, -0.000630081224f, -0.00117962109f, -0.00118743512f, -0.000892196025f, -0.000542691676f,
     -0.000276351901f, -0.000119879856f, -4.47588354e-05f, -1.44794103e-05f, -4.07708012e-06f, -1.00254488e-06f, -2.15814808e-07f, -4.07474019e-08f},
    {-0.00012128934f, -0.000296644517f, -0.000320540625f, -0.000212908635f, -6.31138464e-05f, 4.67732825e-05f, 8.84216206e-05f, 7.97970206e-05f,
     5.23591953e-05f, 2.74447739e-05f, 1.1937308e-05f, 4.39409905e-06f, 1.38490759e-06f, 3.76579976e-07f, 8.8810566e-08f, 1.82348767e-08f},
    {-4.60961855e-05f, -2.10547114e-05f, 1.06916705e-05f, 2.91062443e-05f, 2.7929882e-05f, 1.51308177e-05f, 2.25160738e-06f, -4.57774786e-06f,
     -5.68282303e-06f, -4.08114101e-06f, -2.19216713e-06f, -9.47455533e-07f, -3.40326466e-07f, -1.03407878e-07f, -2.68697846e-08f, -6.01442451e-09f},
};
static inline __attribute__((always_inline)) void onnxep_gelu_nv(const int NV, __m512* x)
{
    __m512 u[8], t[8], h[8];
    __m512i ix[8];
    const __m512i absm = _mm512_set1_epi32(0x7fffffff);
    int v, d;
    for (v = 0; v < NV; v++) {
        u[v] = _mm512_mul_ps(_mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(x[v]), absm)),
                             _mm512_set1_ps(16.0f / ONNXEP_GELU_CLAMP));
        __m512 fl = _mm512_min_ps(_mm512_roundscale_ps(u[v], _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC),
                                  _mm512_set1_ps(15.0f));                  /* NaN, inf -> 15 (masked below) */
        ix[v] = _mm512_cvttps_epi32(fl);
        t[v] = _mm512_sub_ps(_mm512_sub_ps(u[v], fl), _mm512_set1_ps(0.5f));
        h[v] = _mm512_permutexvar_ps(ix[v], _mm512_load_ps(ONNXEP_GELU_TAB[5]));
    }
    for (d = 4; d >= 0; d--)
        for (v = 0; v < NV; v++)
            h[v] = _mm512_fmadd_ps(h[v], t[v], _mm512_permutexvar_ps(ix[v], _mm512_load_ps(ONNXEP_GELU_TAB[d])));
    for (v = 0; v < NV; v++) {
        __m512 p = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(u[v], _mm512_set1_ps(16.0f), _CMP_LT_OQ), h[v]);
        p = _mm512_mask_sub_ps(p, _mm512_cmp_ps_mask(x[v], _mm512_setzero_ps(), _CMP_GE_OQ), _mm512_set1_ps(1.0f), p);
        x[v] = _mm512_mul_ps(x[v], p);                                   /* NaN stays; +inf -> inf */
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
/* y := Gelu(x) over n contiguous values: 8 vectors at a time, then one, then the last n % 16 under a mask */
static inline void onnxep_gelu_run(const float* x, float* y, Py_ssize_t n)
{
    Py_ssize_t i = 0;
    int v;
    for (; i + 128 <= n; i += 128) {
        __m512 b[8];
        for (v = 0; v < 8; v++) b[v] = _mm512_loadu_ps(x + i + 16 * v);
        onnxep_gelu_nv(8, b);
        for (v = 0; v < 8; v++) _mm512_storeu_ps(y + i + 16 * v, b[v]);
    }
    for (; i < n; i += 16) {
        __mmask16 m = n - i >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (n - i)) - 1u);
        __m512 b = _mm512_maskz_loadu_ps(m, x + i);
        onnxep_gelu_nv(1, &b);
        _mm512_mask_storeu_ps(y + i, m, b);
    }
}
/* y := Gelu(x) over an mr x nr tile (row stride rs in both; x may be y): contiguous rows as one run, rows of 128 or
   more one run each (a bf16 GEMM block's); else a row's whole vectors eight at a time across the rows (a GEMM tile's rows are one or two vectors wide), its last nr % 16
   under a mask */
static void onnxep_gelu_tile(const float* x, float* y, Py_ssize_t rs, Py_ssize_t mr, Py_ssize_t nr)
{
    Py_ssize_t o[8], i, j, nf = nr / 16 * 16;
    int k = 0;
    if (mr == 1 || rs == nr) { onnxep_gelu_run(x, y, mr * nr); return; }
    if (nr >= 128) {                    /* rows of 8 vectors or more: row by row */
        for (i = 0; i < mr; i++) onnxep_gelu_run(x + i * rs, y + i * rs, nr);
        return;
    }
    for (i = 0; i < mr; i++) {
        for (j = 0; j < nf; j += 16) {
            o[k++] = i * rs + j;
            if (k == 8) { onnxep_gelu_at(8, x, y, o); k = 0; }
        }
        if (j < nr) onnxep_gelu_run(x + i * rs + j, y + i * rs + j, nr - j);
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
#if defined(__AVX512F__)
    onnxep_gelu_run(x, y, n);
#else
    Py_ssize_t i;
    #pragma omp simd
    for (i = 0; i < n; i++) y[i] = onnxep_gelu1(x[i]);
#endif
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
#else
    for (; r < R; r++)
        onnxep_layernorm_row(x + r * C, y + r * C, C, scale, bias, eps, mean_out ? mean_out + r : NULL,
                             inv_out ? inv_out + r : NULL);
#endif
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
