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
/* Gelu(x) = x * 0.5 * (1 + erf(x / sqrt(2))). For z = x/sqrt(2) < -0.921875, 1 + erf(z) = erfc(|z|) =
   exp(Q(|z|)) is taken directly (no cancellation in 1 - (1 - erfc)); 0 below z = -3.925, as 1 + erf(z) is. */
static inline float onnxep_gelu1(float x)
{
    float z = x * 0.70710678f;
    float a = z < 0.0f ? -z : z;
    float ac = a < ONNXEP_ERF_CLAMP ? a : ONNXEP_ERF_CLAMP;
    float small = ac * onnxep_erf_p(ac * ac);
    float e = onnxep_exp_neg(onnxep_erf_q(ac));
    float onep;
    if (z >= 0.0f) onep = a <= ONNXEP_ERF_SPLIT ? 1.0f + small : 2.0f - e;
    else onep = a <= ONNXEP_ERF_SPLIT ? 1.0f - small : (a < ONNXEP_ERF_CLAMP ? e : 0.0f);
    return x * 0.5f * onep;                                         /* NaN: z >= 0 is false, NaN * ... = NaN */
}
static void onnxep_erf_loop(const float* x, float* y, Py_ssize_t n)
{
    Py_ssize_t i;
    #pragma omp simd
    for (i = 0; i < n; i++) y[i] = onnxep_erf1(x[i]);
}
static void onnxep_gelu_loop(const float* x, float* y, Py_ssize_t n)
{
    Py_ssize_t i;
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
