/* onnxep native code, included by onnxep/_k_nhwc.pxi (compiled once per ISA; see setup.py). */
#ifndef ONNXEP_NATIVE_NHWC_CONV_H
#define ONNXEP_NATIVE_NHWC_CONV_H

#if defined(__AVX512F__) || defined(__AVX2__)
#include <immintrin.h>
#endif

/* The depthwise epilogue: mode 0 none, 1 Relu (max(v, 0): NaN -> 0, as the SIMD max), 2 Clip to [lo, hi] (NaN
   stays, as the GEMM epilogue's Clip), 3 HardSwish v * min(1, max(0, v/6 + 1/2)) (ONNX's alpha 1/6, beta 0.5). */
typedef struct { int mode; float lo, hi; } onnxep_dwact;

static inline float onnxep_dwn_act1(float v, int mode, float lo, float hi) {
    if (mode == 1) return v > 0.0f ? v : 0.0f;
    if (mode == 2) { float h = v < lo ? lo : v; return h > hi ? hi : h; }   /* min(max(v, lo), hi) */
    if (mode == 3) { float t = v * (1.0f / 6.0f) + 0.5f; t = t < 0.0f ? 0.0f : (t > 1.0f ? 1.0f : t); return v * t; }
    return v;
}
#if defined(__AVX512F__)
#define ONNXEP_DWN_A512(a) (relu == 1 ? _mm512_max_ps(a, _mm512_setzero_ps())                                      : relu == 2 ? _mm512_min_ps(_mm512_set1_ps(hi), _mm512_max_ps(_mm512_set1_ps(lo), a))                         : _mm512_mul_ps(a, _mm512_min_ps(_mm512_set1_ps(1.0f), _mm512_max_ps(_mm512_setzero_ps(),                            _mm512_fmadd_ps(a, _mm512_set1_ps(1.0f / 6.0f), _mm512_set1_ps(0.5f))))))
#endif
#if defined(__AVX2__)
#define ONNXEP_DWN_A256(a) (relu == 1 ? _mm256_max_ps(a, _mm256_setzero_ps())                                      : relu == 2 ? _mm256_min_ps(_mm256_set1_ps(hi), _mm256_max_ps(_mm256_set1_ps(lo), a))                         : _mm256_mul_ps(a, _mm256_min_ps(_mm256_set1_ps(1.0f), _mm256_max_ps(_mm256_setzero_ps(),                            _mm256_fmadd_ps(a, _mm256_set1_ps(1.0f / 6.0f), _mm256_set1_ps(0.5f))))))
#endif

/* y[c] := init[c] (0 when init is NULL; init may be y itself) + sum_t ws[t][c] * xs[t][c], t = 0..nt-1 in order;
   then the activation act (onnxep_dwact). c = 0..C-1. */
static void onnxep_dwn_px(float *y, const float *init, const float *const *xs, const float *const *ws, int nt,
                          Py_ssize_t C, const onnxep_dwact *act)
{
    const int relu = act->mode;
    const float lo = act->lo, hi = act->hi;
    Py_ssize_t c = 0;
    int t;
#if defined(__AVX512F__)
    const __m512 z = _mm512_setzero_ps();
    for (; c + 64 <= C; c += 64) {
        __m512 a0 = z, a1 = z, a2 = z, a3 = z;
        if (init) {
            a0 = _mm512_loadu_ps(init + c); a1 = _mm512_loadu_ps(init + c + 16);
            a2 = _mm512_loadu_ps(init + c + 32); a3 = _mm512_loadu_ps(init + c + 48);
        }
        for (t = 0; t < nt; t++) {
            const float *xp = xs[t] + c, *wp = ws[t] + c;
            a0 = _mm512_fmadd_ps(_mm512_loadu_ps(wp), _mm512_loadu_ps(xp), a0);
            a1 = _mm512_fmadd_ps(_mm512_loadu_ps(wp + 16), _mm512_loadu_ps(xp + 16), a1);
            a2 = _mm512_fmadd_ps(_mm512_loadu_ps(wp + 32), _mm512_loadu_ps(xp + 32), a2);
            a3 = _mm512_fmadd_ps(_mm512_loadu_ps(wp + 48), _mm512_loadu_ps(xp + 48), a3);
        }
        if (relu) {
            a0 = ONNXEP_DWN_A512(a0); a1 = ONNXEP_DWN_A512(a1);
            a2 = ONNXEP_DWN_A512(a2); a3 = ONNXEP_DWN_A512(a3);
        }
        _mm512_storeu_ps(y + c, a0); _mm512_storeu_ps(y + c + 16, a1);
        _mm512_storeu_ps(y + c + 32, a2); _mm512_storeu_ps(y + c + 48, a3);
    }
    for (; c < C; c += 16) {   /* 16 at a time, the last block masked (masked-off lanes are never read) */
        __mmask16 m = (C - c >= 16) ? (__mmask16)0xFFFF : (__mmask16)((1u << (C - c)) - 1u);
        __m512 a0 = init ? _mm512_maskz_loadu_ps(m, init + c) : z;
        for (t = 0; t < nt; t++)
            a0 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, ws[t] + c), _mm512_maskz_loadu_ps(m, xs[t] + c), a0);
        if (relu) a0 = ONNXEP_DWN_A512(a0);
        _mm512_mask_storeu_ps(y + c, m, a0);
    }
#elif defined(__AVX2__)
    const __m256 z = _mm256_setzero_ps();
    for (; c + 32 <= C; c += 32) {
        __m256 a0 = z, a1 = z, a2 = z, a3 = z;
        if (init) {
            a0 = _mm256_loadu_ps(init + c); a1 = _mm256_loadu_ps(init + c + 8);
            a2 = _mm256_loadu_ps(init + c + 16); a3 = _mm256_loadu_ps(init + c + 24);
        }
        for (t = 0; t < nt; t++) {
            const float *xp = xs[t] + c, *wp = ws[t] + c;
            a0 = _mm256_fmadd_ps(_mm256_loadu_ps(wp), _mm256_loadu_ps(xp), a0);
            a1 = _mm256_fmadd_ps(_mm256_loadu_ps(wp + 8), _mm256_loadu_ps(xp + 8), a1);
            a2 = _mm256_fmadd_ps(_mm256_loadu_ps(wp + 16), _mm256_loadu_ps(xp + 16), a2);
            a3 = _mm256_fmadd_ps(_mm256_loadu_ps(wp + 24), _mm256_loadu_ps(xp + 24), a3);
        }
        if (relu) {
            a0 = ONNXEP_DWN_A256(a0); a1 = ONNXEP_DWN_A256(a1);
            a2 = ONNXEP_DWN_A256(a2); a3 = ONNXEP_DWN_A256(a3);
        }
        _mm256_storeu_ps(y + c, a0); _mm256_storeu_ps(y + c + 8, a1);
        _mm256_storeu_ps(y + c + 16, a2); _mm256_storeu_ps(y + c + 24, a3);
    }
    for (; c + 8 <= C; c += 8) {
        __m256 a0 = init ? _mm256_loadu_ps(init + c) : z;
        for (t = 0; t < nt; t++)
            a0 = _mm256_fmadd_ps(_mm256_loadu_ps(ws[t] + c), _mm256_loadu_ps(xs[t] + c), a0);
        if (relu) a0 = ONNXEP_DWN_A256(a0);
        _mm256_storeu_ps(y + c, a0);
    }
#endif
    /* the plain loop: the whole generic variant, the last C % 8 channels of AVX2 */
    for (Py_ssize_t i = c; i < C; i++)
        y[i] = init ? init[i] : 0.0f;
    for (t = 0; t < nt; t++) {
        const float *xp = xs[t], *wp = ws[t];
        for (Py_ssize_t i = c; i < C; i++)
            y[i] = y[i] + wp[i] * xp[i];
    }
    if (relu)
        for (Py_ssize_t i = c; i < C; i++)
            y[i] = onnxep_dwn_act1(y[i], relu, lo, hi);
}

/* A run of np output pixels of one row, every tap the same fixed offset from each pixel's base:
       y[p*ystep + c] := init[c] + sum_t ws[t][c] * xb[p*xstep + off[t] + c]   (t in order; act after)
   Loop order: channel block outer, pixels inner, 8 (then 4, then 1) pixels at a time sharing each weight load;
   the caller passes tiles whose input stays in L1 while the channel blocks sweep it (the per-pixel loop above
   streams every input pixel's channels from L2 once per tap). Each output channel adds in the same order as
   onnxep_dwn_px does. k3: 1 for kw = 3, stride 1, dilation 1 along W; 2 for the same with stride 2; else 0. */
static void onnxep_dwn_run(float *y, Py_ssize_t ystep, const float *init, const float *xb, Py_ssize_t xstep,
                           const Py_ssize_t *off, const float *const *ws, int nt, Py_ssize_t np,
                           Py_ssize_t C, const onnxep_dwact *act, int k3)
{
    const int relu = act->mode;
    const float lo = act->lo, hi = act->hi;
    Py_ssize_t c = 0, p;
    int t;
#if defined(__AVX512F__)
    const __m512 z = _mm512_setzero_ps();
    for (; c < C; c += 16) {
        __mmask16 m = (C - c >= 16) ? (__mmask16)0xFFFF : (__mmask16)((1u << (C - c)) - 1u);
        __m512 bv = init ? _mm512_maskz_loadu_ps(m, init + c) : z;
        int full = C - c >= 16;
        for (p = 0; k3 == 2 && full && p + 8 <= np; p += 8) {
            /* kw = 3, stride 2, dilation 1 along W (k3 == 2; xstep == 2*C): pixel q reads columns 2q, 2q+1,
               2q+2; the 8 pixels of a kernel row read 17 columns, the even ones shared by two pixels and loaded
               once. Same order of additions per output as the general loop. */
            const float *x0 = xb + p * xstep + c;
            __m512 a0 = bv, a1 = bv, a2 = bv, a3 = bv, a4 = bv, a5 = bv, a6 = bv, a7 = bv;
            for (t = 0; t < nt; t += 3) {
                const float *xr = x0 + off[t];
                __m512 w0 = _mm512_loadu_ps(ws[t] + c), w1 = _mm512_loadu_ps(ws[t + 1] + c);
                __m512 w2 = _mm512_loadu_ps(ws[t + 2] + c);
                __m512 xe = _mm512_loadu_ps(xr), xo, xn;
#define ONNXEP_DWN_S2(A, Q)                                                                                 xo = _mm512_loadu_ps(xr + (2 * (Q) + 1) * C);                                                 xn = _mm512_loadu_ps(xr + (2 * (Q) + 2) * C);                                                 A = _mm512_fmadd_ps(w0, xe, A);                                                               A = _mm512_fmadd_ps(w1, xo, A);                                                               A = _mm512_fmadd_ps(w2, xn, A);                                                               xe = xn;
                ONNXEP_DWN_S2(a0, 0) ONNXEP_DWN_S2(a1, 1) ONNXEP_DWN_S2(a2, 2) ONNXEP_DWN_S2(a3, 3)
                ONNXEP_DWN_S2(a4, 4) ONNXEP_DWN_S2(a5, 5) ONNXEP_DWN_S2(a6, 6) ONNXEP_DWN_S2(a7, 7)
#undef ONNXEP_DWN_S2
            }
            if (relu) {
                a0 = ONNXEP_DWN_A512(a0); a1 = ONNXEP_DWN_A512(a1);
                a2 = ONNXEP_DWN_A512(a2); a3 = ONNXEP_DWN_A512(a3);
                a4 = ONNXEP_DWN_A512(a4); a5 = ONNXEP_DWN_A512(a5);
                a6 = ONNXEP_DWN_A512(a6); a7 = ONNXEP_DWN_A512(a7);
            }
            float *yp = y + p * ystep + c;
            _mm512_storeu_ps(yp, a0); _mm512_storeu_ps(yp + ystep, a1);
            _mm512_storeu_ps(yp + 2 * ystep, a2); _mm512_storeu_ps(yp + 3 * ystep, a3);
            _mm512_storeu_ps(yp + 4 * ystep, a4); _mm512_storeu_ps(yp + 5 * ystep, a5);
            _mm512_storeu_ps(yp + 6 * ystep, a6); _mm512_storeu_ps(yp + 7 * ystep, a7);
        }
        for (; k3 == 1 && full && p + 8 <= np; p += 8) {
            /* kw = 3, stride and dilation 1 along W (k3 == 1; xstep == C, off[3r + e] = off[3r] + e*C): the 8
               pixels of a kernel row read 10 input columns; each is loaded once for its (up to 3) taps. Same
               order of additions per output as the general loop (kernel row, then column). */
            const float *x0 = xb + p * xstep + c;
            __m512 a0 = bv, a1 = bv, a2 = bv, a3 = bv, a4 = bv, a5 = bv, a6 = bv, a7 = bv;
            for (t = 0; t < nt; t += 3) {
                const float *xr = x0 + off[t];
                __m512 w0 = _mm512_loadu_ps(ws[t] + c), w1 = _mm512_loadu_ps(ws[t + 1] + c);
                __m512 w2 = _mm512_loadu_ps(ws[t + 2] + c);
                __m512 x0v = _mm512_loadu_ps(xr), x1v = _mm512_loadu_ps(xr + C), x2v = _mm512_loadu_ps(xr + 2 * C);
                __m512 x3v = _mm512_loadu_ps(xr + 3 * C), x4v = _mm512_loadu_ps(xr + 4 * C);
                __m512 x5v = _mm512_loadu_ps(xr + 5 * C), x6v = _mm512_loadu_ps(xr + 6 * C);
                __m512 x7v = _mm512_loadu_ps(xr + 7 * C), x8v = _mm512_loadu_ps(xr + 8 * C);
                __m512 x9v = _mm512_loadu_ps(xr + 9 * C);
                a0 = _mm512_fmadd_ps(w0, x0v, a0); a1 = _mm512_fmadd_ps(w0, x1v, a1);
                a2 = _mm512_fmadd_ps(w0, x2v, a2); a3 = _mm512_fmadd_ps(w0, x3v, a3);
                a4 = _mm512_fmadd_ps(w0, x4v, a4); a5 = _mm512_fmadd_ps(w0, x5v, a5);
                a6 = _mm512_fmadd_ps(w0, x6v, a6); a7 = _mm512_fmadd_ps(w0, x7v, a7);
                a0 = _mm512_fmadd_ps(w1, x1v, a0); a1 = _mm512_fmadd_ps(w1, x2v, a1);
                a2 = _mm512_fmadd_ps(w1, x3v, a2); a3 = _mm512_fmadd_ps(w1, x4v, a3);
                a4 = _mm512_fmadd_ps(w1, x5v, a4); a5 = _mm512_fmadd_ps(w1, x6v, a5);
                a6 = _mm512_fmadd_ps(w1, x7v, a6); a7 = _mm512_fmadd_ps(w1, x8v, a7);
                a0 = _mm512_fmadd_ps(w2, x2v, a0); a1 = _mm512_fmadd_ps(w2, x3v, a1);
                a2 = _mm512_fmadd_ps(w2, x4v, a2); a3 = _mm512_fmadd_ps(w2, x5v, a3);
                a4 = _mm512_fmadd_ps(w2, x6v, a4); a5 = _mm512_fmadd_ps(w2, x7v, a5);
                a6 = _mm512_fmadd_ps(w2, x8v, a6); a7 = _mm512_fmadd_ps(w2, x9v, a7);
            }
            if (relu) {
                a0 = ONNXEP_DWN_A512(a0); a1 = ONNXEP_DWN_A512(a1);
                a2 = ONNXEP_DWN_A512(a2); a3 = ONNXEP_DWN_A512(a3);
                a4 = ONNXEP_DWN_A512(a4); a5 = ONNXEP_DWN_A512(a5);
                a6 = ONNXEP_DWN_A512(a6); a7 = ONNXEP_DWN_A512(a7);
            }
            float *yp = y + p * ystep + c;
            _mm512_storeu_ps(yp, a0); _mm512_storeu_ps(yp + ystep, a1);
            _mm512_storeu_ps(yp + 2 * ystep, a2); _mm512_storeu_ps(yp + 3 * ystep, a3);
            _mm512_storeu_ps(yp + 4 * ystep, a4); _mm512_storeu_ps(yp + 5 * ystep, a5);
            _mm512_storeu_ps(yp + 6 * ystep, a6); _mm512_storeu_ps(yp + 7 * ystep, a7);
        }
        for (; full && p + 8 <= np; p += 8) {
            /* full blocks: 8 pixels, plain (unmasked) loads */
            const float *x0 = xb + p * xstep + c;
            __m512 a0 = bv, a1 = bv, a2 = bv, a3 = bv, a4 = bv, a5 = bv, a6 = bv, a7 = bv;
            for (t = 0; t < nt; t++) {
                const float *xt = x0 + off[t];
                __m512 wv = _mm512_loadu_ps(ws[t] + c);
                a0 = _mm512_fmadd_ps(wv, _mm512_loadu_ps(xt), a0);
                a1 = _mm512_fmadd_ps(wv, _mm512_loadu_ps(xt + xstep), a1);
                a2 = _mm512_fmadd_ps(wv, _mm512_loadu_ps(xt + 2 * xstep), a2);
                a3 = _mm512_fmadd_ps(wv, _mm512_loadu_ps(xt + 3 * xstep), a3);
                a4 = _mm512_fmadd_ps(wv, _mm512_loadu_ps(xt + 4 * xstep), a4);
                a5 = _mm512_fmadd_ps(wv, _mm512_loadu_ps(xt + 5 * xstep), a5);
                a6 = _mm512_fmadd_ps(wv, _mm512_loadu_ps(xt + 6 * xstep), a6);
                a7 = _mm512_fmadd_ps(wv, _mm512_loadu_ps(xt + 7 * xstep), a7);
            }
            if (relu) {
                a0 = ONNXEP_DWN_A512(a0); a1 = ONNXEP_DWN_A512(a1);
                a2 = ONNXEP_DWN_A512(a2); a3 = ONNXEP_DWN_A512(a3);
                a4 = ONNXEP_DWN_A512(a4); a5 = ONNXEP_DWN_A512(a5);
                a6 = ONNXEP_DWN_A512(a6); a7 = ONNXEP_DWN_A512(a7);
            }
            float *yp = y + p * ystep + c;
            _mm512_storeu_ps(yp, a0); _mm512_storeu_ps(yp + ystep, a1);
            _mm512_storeu_ps(yp + 2 * ystep, a2); _mm512_storeu_ps(yp + 3 * ystep, a3);
            _mm512_storeu_ps(yp + 4 * ystep, a4); _mm512_storeu_ps(yp + 5 * ystep, a5);
            _mm512_storeu_ps(yp + 6 * ystep, a6); _mm512_storeu_ps(yp + 7 * ystep, a7);
        }
        for (; p + 4 <= np; p += 4) {
            const float *x0 = xb + p * xstep + c;
            __m512 a0 = bv, a1 = bv, a2 = bv, a3 = bv;
            for (t = 0; t < nt; t++) {
                const float *xt = x0 + off[t];
                __m512 wv = _mm512_maskz_loadu_ps(m, ws[t] + c);
                a0 = _mm512_fmadd_ps(wv, _mm512_maskz_loadu_ps(m, xt), a0);
                a1 = _mm512_fmadd_ps(wv, _mm512_maskz_loadu_ps(m, xt + xstep), a1);
                a2 = _mm512_fmadd_ps(wv, _mm512_maskz_loadu_ps(m, xt + 2 * xstep), a2);
                a3 = _mm512_fmadd_ps(wv, _mm512_maskz_loadu_ps(m, xt + 3 * xstep), a3);
            }
            if (relu) {
                a0 = ONNXEP_DWN_A512(a0); a1 = ONNXEP_DWN_A512(a1);
                a2 = ONNXEP_DWN_A512(a2); a3 = ONNXEP_DWN_A512(a3);
            }
            float *yp = y + p * ystep + c;
            _mm512_mask_storeu_ps(yp, m, a0); _mm512_mask_storeu_ps(yp + ystep, m, a1);
            _mm512_mask_storeu_ps(yp + 2 * ystep, m, a2); _mm512_mask_storeu_ps(yp + 3 * ystep, m, a3);
        }
        for (; p < np; p++) {
            const float *x0 = xb + p * xstep + c;
            __m512 a0 = bv;
            for (t = 0; t < nt; t++)
                a0 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, ws[t] + c), _mm512_maskz_loadu_ps(m, x0 + off[t]),
                                     a0);
            if (relu) a0 = ONNXEP_DWN_A512(a0);
            _mm512_mask_storeu_ps(y + p * ystep + c, m, a0);
        }
    }
#elif defined(__AVX2__)
    const __m256 z = _mm256_setzero_ps();
    for (; c + 8 <= C; c += 8) {
        __m256 bv = init ? _mm256_loadu_ps(init + c) : z;
        for (p = 0; k3 == 1 && p + 4 <= np; p += 4) {
            /* kw = 3, stride and dilation 1 along W: 4 pixels of a kernel row read 6 input columns, each loaded
               once (16 registers: no room for 8 pixels); same order of additions as the general loop */
            const float *x0 = xb + p * xstep + c;
            __m256 a0 = bv, a1 = bv, a2 = bv, a3 = bv;
            for (t = 0; t < nt; t += 3) {
                const float *xr = x0 + off[t];
                __m256 w0 = _mm256_loadu_ps(ws[t] + c), w1 = _mm256_loadu_ps(ws[t + 1] + c);
                __m256 w2 = _mm256_loadu_ps(ws[t + 2] + c);
                __m256 x0v = _mm256_loadu_ps(xr), x1v = _mm256_loadu_ps(xr + C), x2v = _mm256_loadu_ps(xr + 2 * C);
                __m256 x3v = _mm256_loadu_ps(xr + 3 * C), x4v = _mm256_loadu_ps(xr + 4 * C);
                __m256 x5v = _mm256_loadu_ps(xr + 5 * C);
                a0 = _mm256_fmadd_ps(w0, x0v, a0); a1 = _mm256_fmadd_ps(w0, x1v, a1);
                a2 = _mm256_fmadd_ps(w0, x2v, a2); a3 = _mm256_fmadd_ps(w0, x3v, a3);
                a0 = _mm256_fmadd_ps(w1, x1v, a0); a1 = _mm256_fmadd_ps(w1, x2v, a1);
                a2 = _mm256_fmadd_ps(w1, x3v, a2); a3 = _mm256_fmadd_ps(w1, x4v, a3);
                a0 = _mm256_fmadd_ps(w2, x2v, a0); a1 = _mm256_fmadd_ps(w2, x3v, a1);
                a2 = _mm256_fmadd_ps(w2, x4v, a2); a3 = _mm256_fmadd_ps(w2, x5v, a3);
            }
            if (relu) {
                a0 = ONNXEP_DWN_A256(a0); a1 = ONNXEP_DWN_A256(a1);
                a2 = ONNXEP_DWN_A256(a2); a3 = ONNXEP_DWN_A256(a3);
            }
            float *yp = y + p * ystep + c;
            _mm256_storeu_ps(yp, a0); _mm256_storeu_ps(yp + ystep, a1);
            _mm256_storeu_ps(yp + 2 * ystep, a2); _mm256_storeu_ps(yp + 3 * ystep, a3);
        }
        for (; p + 8 <= np; p += 8) {
            const float *x0 = xb + p * xstep + c;
            __m256 a0 = bv, a1 = bv, a2 = bv, a3 = bv, a4 = bv, a5 = bv, a6 = bv, a7 = bv;
            for (t = 0; t < nt; t++) {
                const float *xt = x0 + off[t];
                __m256 wv = _mm256_loadu_ps(ws[t] + c);
                a0 = _mm256_fmadd_ps(wv, _mm256_loadu_ps(xt), a0);
                a1 = _mm256_fmadd_ps(wv, _mm256_loadu_ps(xt + xstep), a1);
                a2 = _mm256_fmadd_ps(wv, _mm256_loadu_ps(xt + 2 * xstep), a2);
                a3 = _mm256_fmadd_ps(wv, _mm256_loadu_ps(xt + 3 * xstep), a3);
                a4 = _mm256_fmadd_ps(wv, _mm256_loadu_ps(xt + 4 * xstep), a4);
                a5 = _mm256_fmadd_ps(wv, _mm256_loadu_ps(xt + 5 * xstep), a5);
                a6 = _mm256_fmadd_ps(wv, _mm256_loadu_ps(xt + 6 * xstep), a6);
                a7 = _mm256_fmadd_ps(wv, _mm256_loadu_ps(xt + 7 * xstep), a7);
            }
            if (relu) {
                a0 = ONNXEP_DWN_A256(a0); a1 = ONNXEP_DWN_A256(a1);
                a2 = ONNXEP_DWN_A256(a2); a3 = ONNXEP_DWN_A256(a3);
                a4 = ONNXEP_DWN_A256(a4); a5 = ONNXEP_DWN_A256(a5);
                a6 = ONNXEP_DWN_A256(a6); a7 = ONNXEP_DWN_A256(a7);
            }
            float *yp = y + p * ystep + c;
            _mm256_storeu_ps(yp, a0); _mm256_storeu_ps(yp + ystep, a1);
            _mm256_storeu_ps(yp + 2 * ystep, a2); _mm256_storeu_ps(yp + 3 * ystep, a3);
            _mm256_storeu_ps(yp + 4 * ystep, a4); _mm256_storeu_ps(yp + 5 * ystep, a5);
            _mm256_storeu_ps(yp + 6 * ystep, a6); _mm256_storeu_ps(yp + 7 * ystep, a7);
        }
        for (; p + 4 <= np; p += 4) {
            const float *x0 = xb + p * xstep + c;
            __m256 a0 = bv, a1 = bv, a2 = bv, a3 = bv;
            for (t = 0; t < nt; t++) {
                const float *xt = x0 + off[t];
                __m256 wv = _mm256_loadu_ps(ws[t] + c);
                a0 = _mm256_fmadd_ps(wv, _mm256_loadu_ps(xt), a0);
                a1 = _mm256_fmadd_ps(wv, _mm256_loadu_ps(xt + xstep), a1);
                a2 = _mm256_fmadd_ps(wv, _mm256_loadu_ps(xt + 2 * xstep), a2);
                a3 = _mm256_fmadd_ps(wv, _mm256_loadu_ps(xt + 3 * xstep), a3);
            }
            if (relu) {
                a0 = ONNXEP_DWN_A256(a0); a1 = ONNXEP_DWN_A256(a1);
                a2 = ONNXEP_DWN_A256(a2); a3 = ONNXEP_DWN_A256(a3);
            }
            float *yp = y + p * ystep + c;
            _mm256_storeu_ps(yp, a0); _mm256_storeu_ps(yp + ystep, a1);
            _mm256_storeu_ps(yp + 2 * ystep, a2); _mm256_storeu_ps(yp + 3 * ystep, a3);
        }
        for (; p < np; p++) {
            const float *x0 = xb + p * xstep + c;
            __m256 a0 = bv;
            for (t = 0; t < nt; t++)
                a0 = _mm256_fmadd_ps(_mm256_loadu_ps(ws[t] + c), _mm256_loadu_ps(x0 + off[t]), a0);
            if (relu) a0 = ONNXEP_DWN_A256(a0);
            _mm256_storeu_ps(y + p * ystep + c, a0);
        }
    }
#endif
    /* the plain loop, in blocks of 16 channels: the whole generic variant, the last C % 8 channels of AVX2 */
    for (; c < C; c += 16) {
        Py_ssize_t cn = C - c < 16 ? C - c : 16, i;
        for (p = 0; p < np; p++) {
            float *yp = y + p * ystep + c;
            const float *x0 = xb + p * xstep + c;
            for (i = 0; i < cn; i++)
                yp[i] = init ? init[c + i] : 0.0f;
            for (t = 0; t < nt; t++) {
                const float *xt = x0 + off[t], *wp = ws[t] + c;
                for (i = 0; i < cn; i++)
                    yp[i] = yp[i] + wp[i] * xt[i];
            }
            if (relu)
                for (i = 0; i < cn; i++)
                    yp[i] = onnxep_dwn_act1(yp[i], relu, lo, hi);
        }
    }
}

#endif /* ONNXEP_NATIVE_NHWC_CONV_H */
