/* onnxep native code, included by onnxep/_k_nhwc.pxi (compiled once per ISA; see setup.py). */
#ifndef ONNXEP_NATIVE_NHWC_POOL_H
#define ONNXEP_NATIVE_NHWC_POOL_H

/* One output pixel of an NHWC pool over the window's taps (pointers to their C channels, in window order):
   y[c] = max over taps (mode 0: `x > m ? x : m` from the first tap on, the NCHW kernel's comparison, so a NaN
   after the first tap is skipped as there), or the sum in tap order (mode 1; the caller divides). Channels go
   two registers at a time through accumulators (SIMD variants), so y is written once per pixel. */
static void onnxep_pool_px(const float* const* taps, Py_ssize_t ntaps, Py_ssize_t C, float* __restrict__ y,
                           int mode)
{
    Py_ssize_t c = 0, t;
#if ONNXEP_SGEMM_SIMD
#if defined(__AVX512F__)
#define ONNXEP_PV_MAX _mm512_max_ps
#define ONNXEP_PV_ADD _mm512_add_ps
#define ONNXEP_PV_STORE _mm512_storeu_ps
#else
#define ONNXEP_PV_MAX _mm256_max_ps
#define ONNXEP_PV_ADD _mm256_add_ps
#define ONNXEP_PV_STORE _mm256_storeu_ps
#endif
    const Py_ssize_t V = ONNXEP_DV_W;
    for (; c + 2 * V <= C; c += 2 * V) {     /* max(x, m) keeps m when x is NaN: `x > m ? x : m` */
        ONNXEP_DV a0, a1;
        if (mode == 0) {
            a0 = ONNXEP_DV_LOAD(taps[0] + c); a1 = ONNXEP_DV_LOAD(taps[0] + c + V);
            for (t = 1; t < ntaps; t++) {
                a0 = ONNXEP_PV_MAX(ONNXEP_DV_LOAD(taps[t] + c), a0);
                a1 = ONNXEP_PV_MAX(ONNXEP_DV_LOAD(taps[t] + c + V), a1);
            }
        } else {
            a0 = ONNXEP_DV_ZERO(); a1 = ONNXEP_DV_ZERO();
            for (t = 0; t < ntaps; t++) {
                a0 = ONNXEP_PV_ADD(a0, ONNXEP_DV_LOAD(taps[t] + c));
                a1 = ONNXEP_PV_ADD(a1, ONNXEP_DV_LOAD(taps[t] + c + V));
            }
        }
        ONNXEP_PV_STORE(y + c, a0); ONNXEP_PV_STORE(y + c + V, a1);
    }
    for (; c + V <= C; c += V) {
        ONNXEP_DV a0;
        if (mode == 0) {
            a0 = ONNXEP_DV_LOAD(taps[0] + c);
            for (t = 1; t < ntaps; t++) a0 = ONNXEP_PV_MAX(ONNXEP_DV_LOAD(taps[t] + c), a0);
        } else {
            a0 = ONNXEP_DV_ZERO();
            for (t = 0; t < ntaps; t++) a0 = ONNXEP_PV_ADD(a0, ONNXEP_DV_LOAD(taps[t] + c));
        }
        ONNXEP_PV_STORE(y + c, a0);
    }
    if (c < C) {                              /* the last C % V channels: masked loads and store */
#if defined(__AVX512F__)
        __mmask16 k = (__mmask16)((1u << (C - c)) - 1u);
        __m512 a0;
        if (mode == 0) {
            a0 = _mm512_maskz_loadu_ps(k, taps[0] + c);
            for (t = 1; t < ntaps; t++) a0 = _mm512_max_ps(_mm512_maskz_loadu_ps(k, taps[t] + c), a0);
        } else {
            a0 = _mm512_setzero_ps();
            for (t = 0; t < ntaps; t++) a0 = _mm512_add_ps(a0, _mm512_maskz_loadu_ps(k, taps[t] + c));
        }
        _mm512_mask_storeu_ps(y + c, k, a0);
#else
        __m256i k = _mm256_cmpgt_epi32(_mm256_set1_epi32((int)(C - c)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
        __m256 a0;
        if (mode == 0) {
            a0 = _mm256_maskload_ps(taps[0] + c, k);
            for (t = 1; t < ntaps; t++) a0 = _mm256_max_ps(_mm256_maskload_ps(taps[t] + c, k), a0);
        } else {
            a0 = _mm256_setzero_ps();
            for (t = 0; t < ntaps; t++) a0 = _mm256_add_ps(a0, _mm256_maskload_ps(taps[t] + c, k));
        }
        _mm256_maskstore_ps(y + c, k, a0);
#endif
        c = C;
    }
#endif
    for (; c < C; c++) {                      /* the generic variant */
        float m;
        if (mode == 0) {
            m = taps[0][c];
            for (t = 1; t < ntaps; t++) m = taps[t][c] > m ? taps[t][c] : m;
        } else {
            m = 0.0f;
            for (t = 0; t < ntaps; t++) m = m + taps[t][c];
        }
        y[c] = m;
    }
}
/* n consecutive output pixels whose windows lie inside x: pixel i's taps are x0 + i*step + off[t] (fixed
   offsets, window order, ntaps <= ONNXEP_POOLN_MAX_TAPS), through onnxep_pool_px; mode 1 divides each sum by
   ntaps (the full window's count) afterwards, as the per-pixel path does. Against that path (each pixel's window
   clipped and its tap pointers set up in _pooln_row): 0.72-0.93 of the kernel's time on 3x3 stride-2 pools of
   64-256 channels. */
#define ONNXEP_POOLN_MAX_TAPS 64
#if ONNXEP_SGEMM_SIMD
/* the max of a run whose window has NT taps (a compile-time count: 4, 9) and C a multiple of the
   vector width: the tap offsets in registers, no per-pixel pointer table or call; the same comparisons in the
   same order as onnxep_pool_px, so the same bits. 3x3/2 over 3x32x32x16 (the ResNets' stem pool): 0.4x the
   generic run's time, kernel alone, 1 thread. */
static inline __attribute__((always_inline)) void onnxep_pool_run_max(const int NT, const float* x0,
                                                                     Py_ssize_t step, const Py_ssize_t* off,
                                                                     Py_ssize_t C, float* y, Py_ssize_t n)
{
    Py_ssize_t o[9], i, c;
    int t;
    for (t = 0; t < NT; t++) o[t] = off[t];
    for (i = 0; i < n; i++) {
        const float* b = x0 + i * step;
        float* yp = y + i * C;
        for (c = 0; c < C; c += ONNXEP_DV_W) {
            ONNXEP_DV a0 = ONNXEP_DV_LOAD(b + o[0] + c);
            #pragma GCC unroll 9
            for (t = 1; t < NT; t++) a0 = ONNXEP_PV_MAX(ONNXEP_DV_LOAD(b + o[t] + c), a0);
            ONNXEP_PV_STORE(yp + c, a0);
        }
    }
}
#endif
static void onnxep_pool_run(const float* x0, Py_ssize_t step, const Py_ssize_t* off, Py_ssize_t ntaps,
                            Py_ssize_t C, float* y, Py_ssize_t n, int mode)
{
    const float* taps[ONNXEP_POOLN_MAX_TAPS];
    Py_ssize_t i, t, c;
#if ONNXEP_SGEMM_SIMD
    if (mode == 0 && C % ONNXEP_DV_W == 0) {
        if (ntaps == 9) { onnxep_pool_run_max(9, x0, step, off, C, y, n); return; }
        if (ntaps == 4) { onnxep_pool_run_max(4, x0, step, off, C, y, n); return; }
    }
#endif
    for (i = 0; i < n; i++) {
        const float* b = x0 + i * step;
        float* yp = y + i * C;
        for (t = 0; t < ntaps; t++) taps[t] = b + off[t];
        onnxep_pool_px(taps, ntaps, C, yp, mode);
        if (mode == 1) {
            const float fc = (float)ntaps;
            for (c = 0; c < C; c++) yp[c] = yp[c] / fc;
        }
    }
}

#endif /* ONNXEP_NATIVE_NHWC_POOL_H */
