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

/* ---- Sliding blocks along W: a whole output row, borders included ----
   A block is P consecutive output pixels ow0 .. ow0+P-1 of one row and one block of channels. Pixel q's tap (row b,
   column e) reads input column S*q + e of the block (block column j = iw - (ow0*S - pw)), so the block reads the
   S*(P-1) + KW columns j of each kernel row once each, and column j feeds every (q, e) with S*q + e == j: P
   accumulators, KW weights and one input vector in registers (AVX-512: P = 16 for 16 + KW + 1 <= 32 zmm; AVX2: P = 8,
   16 ymm, the weights may stay in memory operands; generic: P = 8 of 4-float vectors). Loads per FMA fall from (1 + 1/8) in the general loop to
   (KW + S*(P-1) + KW) / (P*KW): 0.44 for 3x3 stride 1, 0.26 for 7x7. Columns outside x (j < jlo or j >= jhi: the
   left / right border pixels) are skipped, which is the clipped tap list of onnxep_dwn_px in its order; every output
   adds its taps in the general loops' order (kernel row, then e ascending = j ascending), so a pixel's value does not
   depend on which block computes it. A row whose width is not a multiple of P ends with a block shifted back to
   Wo - P (its first pixels are recomputed, to the same values); a row narrower than P is one block that stores its
   first Wo pixels only. */
#define ONNXEP_DWN_SL_BLOCK(VEC, LOADX, FMA, ACT, STOREY, CLIP)                                                      \
    {                                                                                                                 \
        VEC a[P], w[KW];                                                                                              \
        _Pragma("GCC unroll 16") for (int q = 0; q < P; q++) a[q] = bv;                                               \
        for (int t = 0; t < nt; t += KW) {                                                                            \
            const float *xp = x0 + off[t];                                                                            \
            _Pragma("GCC unroll 16") for (int e = 0; e < KW; e++) w[e] = LOADW(ws[t + e] + c);                        \
            _Pragma("GCC unroll 64") for (int j = 0; j < S * (P - 1) + KW; j++, xp += C) {                            \
                if (CLIP && (j < jlo || j >= jhi)) continue;                                                          \
                VEC xv = LOADX(xp);                                                                                   \
                _Pragma("GCC unroll 16") for (int e = 0; e < KW; e++)                                                 \
                    if (j - e >= 0 && (j - e) % S == 0 && (j - e) / S < P)                                            \
                        a[(j - e) / S] = FMA(w[e], xv, a[(j - e) / S]);                                               \
            }                                                                                                         \
        }                                                                                                             \
        _Pragma("GCC unroll 16") for (int q = 0; q < P; q++) {                                                        \
            VEC v = a[q];                                                                                             \
            if (relu) v = ACT(v);                                                                                     \
            if (q < nq) STOREY(yb + q * ystep, v);                                                                    \
        }                                                                                                             \
    }

/* The pixel blocks of one output row: tiles of T pixels (a multiple of P), channel blocks outer inside a tile. */
#define ONNXEP_DWN_SL_ROW(BLOCKS)                                                                                     \
    const int relu = act->mode;                                                                                       \
    const float lo = act->lo, hi = act->hi;                                                                           \
    const int ncol = S * (P - 1) + KW;                                                                                \
    for (Py_ssize_t tw = 0; tw < Wo; tw += T) {                                                                       \
        Py_ssize_t tend = tw + T < Wo ? tw + T : Wo;                                                                  \
        BLOCKS                                                                                                        \
    }

#define ONNXEP_DWN_SL_PIXELS(BODY)                                                                                    \
    for (Py_ssize_t ow = tw; ow < tend; ow += P) {                                                                    \
        Py_ssize_t o0 = ow + P <= Wo ? ow : Wo >= P ? Wo - P : 0, iw0 = o0 * S - pw;                                  \
        int nq = Wo - o0 < P ? (int)(Wo - o0) : P;                                                                    \
        int jlo = iw0 < 0 ? (int)-iw0 : 0;                                                                            \
        int jhi = W - iw0 < ncol ? (int)(W - iw0) : ncol;                                                             \
        const float *x0 = xb + iw0 * C + c;                                                                           \
        float *yb = y + o0 * ystep + c;                                                                               \
        BODY                                                                                                          \
    }

/* Per ISA: the vector type and its channel step, the per-block mask (AVX-512's channel tail), loads and stores of
   x / y / the bias (masked on AVX-512), zero, the multiply-add and the activation; ONNXEP_DWN_SL_DEF below is the
   one function body all three variants instantiate. */
#if defined(__AVX512F__)
#define LOADW(p) _mm512_loadu_ps(p)
#define ONNXEP_DWN_SL_V __m512
#define ONNXEP_DWN_SL_CSTEP 16
#define ONNXEP_DWN_SL_CMASK                                                                                           \
    __mmask16 m = (C - c >= 16) ? (__mmask16)0xFFFF : (__mmask16)((1u << (C - c)) - 1u);
#define ONNXEP_DWN_SL_LX(p) _mm512_maskz_loadu_ps(m, p)
#define ONNXEP_DWN_SL_SY(p, v) _mm512_mask_storeu_ps(p, m, v)
#define ONNXEP_DWN_SL_ZERO _mm512_setzero_ps
#define ONNXEP_DWN_SL_FMA _mm512_fmadd_ps
#define ONNXEP_DWN_SL_ACT ONNXEP_DWN_A512
#define ONNXEP_DWN_SL_P16 16
#elif defined(__AVX2__)
#define LOADW(p) _mm256_loadu_ps(p)
#define ONNXEP_DWN_SL_V __m256
#define ONNXEP_DWN_SL_CSTEP 8
#define ONNXEP_DWN_SL_CMASK
#define ONNXEP_DWN_SL_LX(p) _mm256_loadu_ps(p)
#define ONNXEP_DWN_SL_SY(p, v) _mm256_storeu_ps(p, v)
#define ONNXEP_DWN_SL_ZERO _mm256_setzero_ps
#define ONNXEP_DWN_SL_FMA _mm256_fmadd_ps
#define ONNXEP_DWN_SL_ACT ONNXEP_DWN_A256
#define ONNXEP_DWN_SL_P16 8     /* (16 ymm: the _16 functions are 8 pixels wide) */
#else
/* the generic variant: GCC vector extensions of 4 floats (SSE2 on x86-64), 16 registers: P = 8. Each tap is a
   multiply then an add, as in the plain loop (y + w*x; no FMA in this variant's instruction set), and the
   activation is onnxep_dwn_act1 per lane, so the blocks give the plain loop's bits. */
typedef float onnxep_dwn_v4 __attribute__((vector_size(16)));
static inline onnxep_dwn_v4 onnxep_dwn_v4_load(const float *p) {
    onnxep_dwn_v4 v;
    __builtin_memcpy(&v, p, sizeof v);
    return v;
}
static inline void onnxep_dwn_v4_store(float *p, onnxep_dwn_v4 v) { __builtin_memcpy(p, &v, sizeof v); }
static inline onnxep_dwn_v4 onnxep_dwn_v4_zero(void) {
    onnxep_dwn_v4 z = {0.0f, 0.0f, 0.0f, 0.0f};
    return z;
}
static inline onnxep_dwn_v4 onnxep_dwn_v4_madd(onnxep_dwn_v4 w, onnxep_dwn_v4 x, onnxep_dwn_v4 a) { return a + w * x; }
static inline onnxep_dwn_v4 onnxep_dwn_v4_act(onnxep_dwn_v4 v, int mode, float lo, float hi) {
    for (int i = 0; i < 4; i++) v[i] = onnxep_dwn_act1(v[i], mode, lo, hi);
    return v;
}
#define ONNXEP_DWN_A4(v) onnxep_dwn_v4_act(v, relu, lo, hi)
#define LOADW(p) onnxep_dwn_v4_load(p)
#define ONNXEP_DWN_SL_V onnxep_dwn_v4
#define ONNXEP_DWN_SL_CSTEP 4
#define ONNXEP_DWN_SL_CMASK
#define ONNXEP_DWN_SL_LX(p) onnxep_dwn_v4_load(p)
#define ONNXEP_DWN_SL_SY(p, v) onnxep_dwn_v4_store(p, v)
#define ONNXEP_DWN_SL_ZERO onnxep_dwn_v4_zero
#define ONNXEP_DWN_SL_FMA onnxep_dwn_v4_madd
#define ONNXEP_DWN_SL_ACT ONNXEP_DWN_A4
#define ONNXEP_DWN_SL_P16 8
#endif

#define ONNXEP_DWN_SL_DEF(NAME, KW_, S_, P_)                                                                          \
static void NAME(float *y, Py_ssize_t ystep, const float *init, const float *xb, const Py_ssize_t *off,              \
                 const float *const *ws, int nt, Py_ssize_t W, Py_ssize_t pw, Py_ssize_t Wo, Py_ssize_t C,            \
                 Py_ssize_t T, const onnxep_dwact *act)                                                               \
{                                                                                                                     \
    enum { KW = KW_, S = S_, P = P_ };                                                                                \
    ONNXEP_DWN_SL_ROW(                                                                                                \
        for (Py_ssize_t c = 0; c < C; c += ONNXEP_DWN_SL_CSTEP) {                                                     \
            ONNXEP_DWN_SL_CMASK                                                                                       \
            ONNXEP_DWN_SL_V bv = init ? ONNXEP_DWN_SL_LX(init + c) : ONNXEP_DWN_SL_ZERO();                            \
            ONNXEP_DWN_SL_PIXELS(                                                                                     \
                if (jlo == 0 && jhi == ncol)                                                                          \
                    ONNXEP_DWN_SL_BLOCK(ONNXEP_DWN_SL_V, ONNXEP_DWN_SL_LX, ONNXEP_DWN_SL_FMA, ONNXEP_DWN_SL_ACT,       \
                                        ONNXEP_DWN_SL_SY, 0)                                                          \
                else                                                                                                  \
                    ONNXEP_DWN_SL_BLOCK(ONNXEP_DWN_SL_V, ONNXEP_DWN_SL_LX, ONNXEP_DWN_SL_FMA, ONNXEP_DWN_SL_ACT,       \
                                        ONNXEP_DWN_SL_SY, 1))                                                         \
        })                                                                                                            \
}

#ifdef ONNXEP_DWN_SL_DEF
typedef void (*onnxep_dwn_sl_fn)(float *, Py_ssize_t, const float *, const float *, const Py_ssize_t *,
                                 const float *const *, int, Py_ssize_t, Py_ssize_t, Py_ssize_t, Py_ssize_t, Py_ssize_t,
                                 const onnxep_dwact *);
#define ONNXEP_DWN_SL_SET(K)                                                                                          \
    ONNXEP_DWN_SL_DEF(onnxep_dwn_sl_##K##_1_16, K, 1, ONNXEP_DWN_SL_P16)                                              \
    ONNXEP_DWN_SL_DEF(onnxep_dwn_sl_##K##_2_16, K, 2, ONNXEP_DWN_SL_P16)                                              \
    ONNXEP_DWN_SL_DEF(onnxep_dwn_sl_##K##_1_8, K, 1, 8)                                                               \
    ONNXEP_DWN_SL_DEF(onnxep_dwn_sl_##K##_2_8, K, 2, 8)
ONNXEP_DWN_SL_SET(3)
ONNXEP_DWN_SL_SET(5)
ONNXEP_DWN_SL_SET(7)
#undef LOADW
#endif

/* The sliding block width onnxep_dwn_slide_row uses for a row of Wo output pixels with a kw-wide kernel at stride sw
   along W (dilation 1): P > 0, or 0 when it has no loop for them (kw not 3, 5, 7; sw > 2; AVX-512 and AVX2: 3x3 at
   stride 2; AVX2: C % 8 != 0; generic: C % 4 != 0). AVX-512: 16 for rows of 16 pixels or more, else 8 (a row under 8 pixels
   is one block whose extra accumulators are not stored: 8 independent FMA chains rather than Wo). The caller sizes
   its tiles in multiples of P. */
static int onnxep_dwn_slide_p(Py_ssize_t kw, Py_ssize_t sw, Py_ssize_t Wo, Py_ssize_t C) {
#ifdef ONNXEP_DWN_SL_DEF
#if defined(__AVX2__)
    /* 3x3 at stride 2 stays on onnxep_dwn_run's 8-pixel loops (AVX-512: its own stride-2 loop), which already load
       each input column once: MobileNetV2's four stride-2 depthwise convs in the model (1 thread, in-process A/B)
       were 0-19% slower through sliding blocks (isolated: 1-16% faster); AVX2, isolated: 5-11% slower. */
    if (kw == 3 && sw == 2) return 0;
#endif
#if defined(__AVX2__) && !defined(__AVX512F__)
    if (C % 8) return 0;     /* (AVX2: whole 8-channel blocks only) */
#elif !defined(__AVX2__)
    if (C % 4) return 0;     /* (generic: whole 4-channel blocks only) */
#endif
    if ((kw != 3 && kw != 5 && kw != 7) || (sw != 1 && sw != 2) || Wo < 1) return 0;
    return Wo >= ONNXEP_DWN_SL_P16 ? ONNXEP_DWN_SL_P16 : 8;
#else
    (void)kw; (void)sw; (void)Wo; (void)C;
    return 0;
#endif
}

/* One output row y[ow*ystep + c], ow < Wo, c < C, through the sliding blocks of width P (onnxep_dwn_slide_p):
   xb is the first input row the kernel rows inside x read (column 0), off[t] / ws[t] (t = r*kw + e) the offset of
   tap row r's start from xb and its weight row, nt the taps (kernel rows inside x times kw); pw the left pad, W the
   input width, T the tile width (a multiple of P). */
static void onnxep_dwn_slide_row(float *y, Py_ssize_t ystep, const float *init, const float *xb, const Py_ssize_t *off,
                                 const float *const *ws, int nt, Py_ssize_t kw, Py_ssize_t sw, Py_ssize_t W,
                                 Py_ssize_t pw, Py_ssize_t Wo, Py_ssize_t C, Py_ssize_t T, int P,
                                 const onnxep_dwact *act)
{
#ifdef ONNXEP_DWN_SL_DEF
    static const onnxep_dwn_sl_fn fns[3][2][2] = {   /* [kw 3, 5, 7][stride 1, 2][P 16, 8] */
        {{onnxep_dwn_sl_3_1_16, onnxep_dwn_sl_3_1_8}, {onnxep_dwn_sl_3_2_16, onnxep_dwn_sl_3_2_8}},
        {{onnxep_dwn_sl_5_1_16, onnxep_dwn_sl_5_1_8}, {onnxep_dwn_sl_5_2_16, onnxep_dwn_sl_5_2_8}},
        {{onnxep_dwn_sl_7_1_16, onnxep_dwn_sl_7_1_8}, {onnxep_dwn_sl_7_2_16, onnxep_dwn_sl_7_2_8}}};
    onnxep_dwn_sl_fn fn = fns[(kw - 3) / 2][sw - 1][P == ONNXEP_DWN_SL_P16 ? 0 : 1];
    fn(y, ystep, init, xb, off, ws, nt, W, pw, Wo, C, T, act);
#else
    (void)y; (void)ystep; (void)init; (void)xb; (void)off; (void)ws; (void)nt; (void)kw; (void)sw; (void)W; (void)pw;
    (void)Wo; (void)C; (void)T; (void)P; (void)act;
#endif
}

#endif /* ONNXEP_NATIVE_NHWC_CONV_H */
