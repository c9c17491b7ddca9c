/* onnxep native code, included by onnxep/_k_gemm.pxi (compiled once per ISA; see setup.py). */
#ifndef ONNXEP_NATIVE_GEMV_H
#define ONNXEP_NATIVE_GEMV_H

/* y[n] = act(sum_k a[k] W[n, k] + bias[n]) for n0 <= n < n1, W (N, K) row-major. Each row's dot product is four
   sums of 16 lanes (a 16-float vector of GCC's vector extension; two 8-float halves without AVX-512), sum c taking the
   16-float chunks c, c + 4, c + 8, ... of the row (the last chunk zero-padded); then (s0 + s1) + (s2 + s3) and its
   lanes added pairwise in a fixed order: the same bits whichever rows go together and whatever the thread split.
   Four sums, not one: a single chain of FMAs is latency-bound on long rows (36 GB/s at K = 9216, where four read 40).
   The rows go one at a time or four at a time (onnxep_gemv_nk below). The form this replaced, four rows side by side
   with one sum each, read a batch-1 layer's short rows as four streams a row long each, which the hardware prefetcher
   streamed worse: weights read cold (24 layers cycled, 1 thread, Zen 5, 64-byte aligned) 33-35 GB/s against 41-47 one
   row at a time at K = 576 .. 768, 37-39 against 41-42 at 2048. */
#define ONNXEP_GV_L 16
#define ONNXEP_GV_INLINE static inline __attribute__((always_inline))   /* into the row loops below */
#if defined(__AVX512F__)
typedef float onnxep_gv_v __attribute__((vector_size(64)));
typedef float onnxep_gv_vu __attribute__((vector_size(64), aligned(4), may_alias));   /* unaligned loads */
ONNXEP_GV_INLINE void onnxep_gv_fma(onnxep_gv_v* s, const float* a, const float* w)     /* s += a[0:16] w[0:16] */
{
    *s += *(const onnxep_gv_vu*)a * *(const onnxep_gv_vu*)w;
}
ONNXEP_GV_INLINE void onnxep_gv_fmav(onnxep_gv_v* s, const onnxep_gv_v* a, const onnxep_gv_v* w)
{
    *s += *a * *w;
}
ONNXEP_GV_INLINE void onnxep_gv_sum4(onnxep_gv_v* s0, const onnxep_gv_v* s1, const onnxep_gv_v* s2,
                                     const onnxep_gv_v* s3)    /* s0 := (s0 + s1) + (s2 + s3) */
{
    *s0 = (*s0 + *s1) + (*s2 + *s3);
}
#else
/* Without AVX-512 the 16 lanes are two 8-float halves, the same operations lane by lane (so the same bits). GCC
   lowered the 64-byte vector on AVX2 through the stack (1,272 stack accesses in onnxep_gemv_nk): the AVX2 build read
   a batch-1 weight at 14.7 GB/s (K = 768) and 19.7 (K = 9216), and now at 37.5 and 33.6 (1 thread, Zen 5; the
   AVX-512 build 40.9 and 41.7); gemv_rows over 4096 x 768 x 2 took 3585 us, now 350. */
typedef float onnxep_gv_h __attribute__((vector_size(32)));
typedef float onnxep_gv_hu __attribute__((vector_size(32), aligned(4), may_alias));
typedef struct { onnxep_gv_h lo, hi; } onnxep_gv_v;
ONNXEP_GV_INLINE void onnxep_gv_fma(onnxep_gv_v* s, const float* a, const float* w)
{
    s->lo += *(const onnxep_gv_hu*)a * *(const onnxep_gv_hu*)w;
    s->hi += *(const onnxep_gv_hu*)(a + 8) * *(const onnxep_gv_hu*)(w + 8);
}
ONNXEP_GV_INLINE void onnxep_gv_fmav(onnxep_gv_v* s, const onnxep_gv_v* a, const onnxep_gv_v* w)
{
    s->lo += a->lo * w->lo;
    s->hi += a->hi * w->hi;
}
ONNXEP_GV_INLINE void onnxep_gv_sum4(onnxep_gv_v* s0, const onnxep_gv_v* s1, const onnxep_gv_v* s2,
                                     const onnxep_gv_v* s3)
{
    s0->lo = (s0->lo + s1->lo) + (s2->lo + s3->lo);
    s0->hi = (s0->hi + s1->hi) + (s2->hi + s3->hi);
}
#endif
static inline float onnxep_gv_lanes(const onnxep_gv_v* v)
{
    float s[ONNXEP_GV_L], t[8];
    int l;
    __builtin_memcpy(s, v, sizeof(s));
    for (l = 0; l < 8; l++) t[l] = s[l] + s[l + 8];
    for (l = 0; l < 4; l++) t[l] = t[l] + t[l + 4];
    return (t[0] + t[2]) + (t[1] + t[3]);
}
static inline void onnxep_gv_tail(const float* p, Py_ssize_t n, onnxep_gv_v* v)   /* p[0..n), zeros after */
{
    float t[ONNXEP_GV_L] = {0};
    __builtin_memcpy(t, p, n * sizeof(float));
    __builtin_memcpy(v, t, sizeof(*v));
}
/* the end of one row's dot product: the last r < 64 floats of a and w (r / 16 whole chunks, then the zero-padded
   rest, each to the sum whose turn it is), then (s0 + s1) + (s2 + s3) and its lanes */
ONNXEP_GV_INLINE float onnxep_gv_finish(onnxep_gv_v s0, onnxep_gv_v s1, onnxep_gv_v s2, onnxep_gv_v s3,
                                        const float* __restrict__ a, const float* __restrict__ w, Py_ssize_t r)
{
    Py_ssize_t full = r / ONNXEP_GV_L, k = full * ONNXEP_GV_L;
    onnxep_gv_v av, wv;
    if (full > 0) onnxep_gv_fma(&s0, a, w);
    if (full > 1) onnxep_gv_fma(&s1, a + 16, w + 16);
    if (full > 2) onnxep_gv_fma(&s2, a + 32, w + 32);
    if (k < r) {
        onnxep_gv_tail(a + k, r - k, &av);
        onnxep_gv_tail(w + k, r - k, &wv);
        if (full == 0) onnxep_gv_fmav(&s0, &av, &wv);
        else if (full == 1) onnxep_gv_fmav(&s1, &av, &wv);
        else if (full == 2) onnxep_gv_fmav(&s2, &av, &wv);
        else onnxep_gv_fmav(&s3, &av, &wv);
    }
    onnxep_gv_sum4(&s0, &s1, &s2, &s3);
    return onnxep_gv_lanes(&s0);
}
ONNXEP_GV_INLINE float onnxep_gv_dot(const float* __restrict__ a, const float* __restrict__ w, Py_ssize_t K)
{
    onnxep_gv_v s0, s1, s2, s3;
    Py_ssize_t k, k4 = K / (4 * ONNXEP_GV_L) * (4 * ONNXEP_GV_L);
    __builtin_memset(&s0, 0, sizeof(s0));
    s1 = s0; s2 = s0; s3 = s0;
    for (k = 0; k < k4; k += 4 * ONNXEP_GV_L) {
        onnxep_gv_fma(&s0, a + k, w + k);
        onnxep_gv_fma(&s1, a + k + 16, w + k + 16);
        onnxep_gv_fma(&s2, a + k + 32, w + k + 32);
        onnxep_gv_fma(&s3, a + k + 48, w + k + 48);
    }
    return onnxep_gv_finish(s0, s1, s2, s3, a + k4, w + k4, K - k4);
}
/* four rows at once (w, w + K, w + 2K, w + 3K): onnxep_gv_dot's sums, so the same bits, with each 16 floats of a
   loaded once for the four rows */
ONNXEP_GV_INLINE void onnxep_gv_dot4(const float* __restrict__ a, const float* __restrict__ w, Py_ssize_t K,
                                     float* out)
{
    onnxep_gv_v s[4][4], zero;
    Py_ssize_t k, k4 = K / (4 * ONNXEP_GV_L) * (4 * ONNXEP_GV_L);
    int r, c;
    __builtin_memset(&zero, 0, sizeof(zero));
    #pragma GCC unroll 4
    for (r = 0; r < 4; r++) {
        #pragma GCC unroll 4
        for (c = 0; c < 4; c++) s[r][c] = zero;
    }
    for (k = 0; k < k4; k += 4 * ONNXEP_GV_L) {
        #pragma GCC unroll 4
        for (c = 0; c < 4; c++) {
            #pragma GCC unroll 4
            for (r = 0; r < 4; r++) onnxep_gv_fma(&s[r][c], a + k + c * ONNXEP_GV_L, w + r * K + k + c * ONNXEP_GV_L);
        }
    }
    #pragma GCC unroll 4
    for (r = 0; r < 4; r++)
        out[r] = onnxep_gv_finish(s[r][0], s[r][1], s[r][2], s[r][3], a + k4, w + r * K + k4, K - k4);
}
/* stream (a batch-1 layer: W read once, from memory) with rows of at most ONNXEP_GV_ONE_ROW_BYTES: one row at a
   time, so W is read in memory order as one stream while a stays in L1. Otherwise four rows at a time: a is loaded
   once per four rows -- for long rows it comes from L2 (one row at a time read AlexNet-size rows, K = 9216 and
   18432, at 0.88x the four-row rate with a and W 64-byte aligned, 0.68x with both misaligned), and for many rows of a
   against a small W that stays in cache (the tiny-N dot form) it is the loads that bound the loop (one row at a time
   took 1.3-1.5x the time there). ONNXEP_GV_ONE_ROW_BYTES is a quarter of a 32 KB L1 (the smallest of the x86 cores
   onnxep targets): K <= 2048. Both forms give the same bits. */
#define ONNXEP_GV_ONE_ROW_BYTES 8192
/* Four rows at a time need 16 sums: 16 of AVX-512's 32 registers, but 32 ymm as halves, twice AVX2's 16. Without
   AVX-512 the rows go one at a time (AVX2 build, 1 thread, W in cache, rows of a x K x rows of W, one at a time
   against four: 8192 x 128 x 8 327 us against 434, 4096 x 768 x 8 794 against 808, 1024 x 2048 x 4 288 against 254). */
#if defined(__AVX512F__)
#define ONNXEP_GV_FOUR_ROWS 1
#else
#define ONNXEP_GV_FOUR_ROWS 0
#endif
static void onnxep_gemv_nk(const float* __restrict__ a, const float* __restrict__ w, Py_ssize_t K, Py_ssize_t n0,
                           Py_ssize_t n1, const float* bias, float* __restrict__ y, const onnxep_act* act, int stream)
{
    Py_ssize_t n = n0;
    float d[4];
    int r;
    if (ONNXEP_GV_FOUR_ROWS && (!stream || K * (Py_ssize_t)sizeof(float) > ONNXEP_GV_ONE_ROW_BYTES))
        for (; n + 4 <= n1; n += 4) {
            onnxep_gv_dot4(a, w + n * K, K, d);
            for (r = 0; r < 4; r++) y[n + r] = onnxep_act1(act, d[r] + (bias ? bias[n + r] : 0.0f));
        }
    for (; n < n1; n++)
        y[n] = onnxep_act1(act, onnxep_gv_dot(a, w + n * K, K) + (bias ? bias[n] : 0.0f));
}

/* the same for W (K, N) row-major: y[n0:n1] accumulated over k in order (one product per k; four rows of W per
   pass over y), then bias and act */
static void onnxep_gemv_kn(const float* __restrict__ a, const float* __restrict__ w, Py_ssize_t K, Py_ssize_t N,
                           Py_ssize_t n0, Py_ssize_t n1, const float* bias, float* __restrict__ y,
                           const onnxep_act* act)
{
    Py_ssize_t n, k;
    for (n = n0; n < n1; n++) y[n] = 0.0f;
    for (k = 0; k + 4 <= K; k += 4) {
        const float* __restrict__ w0 = w + k * N;
        const float* __restrict__ w1 = w0 + N;
        const float* __restrict__ w2 = w1 + N;
        const float* __restrict__ w3 = w2 + N;
        float a0 = a[k], a1 = a[k + 1], a2 = a[k + 2], a3 = a[k + 3];
        #pragma GCC ivdep
        for (n = n0; n < n1; n++) {
            float v = y[n];
            v += a0 * w0[n];
            v += a1 * w1[n];
            v += a2 * w2[n];
            v += a3 * w3[n];
            y[n] = v;
        }
    }
    for (; k < K; k++) {
        const float* __restrict__ wk = w + k * N;
        float ak = a[k];
        #pragma GCC ivdep
        for (n = n0; n < n1; n++) y[n] += ak * wk[n];
    }
    for (n = n0; n < n1; n++) y[n] = onnxep_act1(act, y[n] + (bias ? bias[n] : 0.0f));
}

#endif /* ONNXEP_NATIVE_GEMV_H */
