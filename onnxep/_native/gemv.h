/* onnxep native code, included by onnxep/_k_gemm.pxi (compiled once per ISA; see setup.py). */
#ifndef ONNXEP_NATIVE_GEMV_H
#define ONNXEP_NATIVE_GEMV_H

/* y[n] = act(sum_k a[k] W[n, k] + bias[n]) for n0 <= n < n1, W (N, K) row-major: four rows at a time, each
   summed in 16 lanes (lane l takes k = l, l + 16, ...; a 16-float vector of GCC's vector extension, two ymm
   registers on AVX2), the lanes then added pairwise in a fixed order -- the same sums whatever the thread
   split. */
#define ONNXEP_GV_L 16
typedef float onnxep_gv_v __attribute__((vector_size(64)));
typedef float onnxep_gv_vu __attribute__((vector_size(64), aligned(4), may_alias));   /* unaligned loads */
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
static void onnxep_gemv_nk(const float* __restrict__ a, const float* __restrict__ w, Py_ssize_t K, Py_ssize_t n0,
                           Py_ssize_t n1, const float* bias, float* __restrict__ y, const onnxep_act* act)
{
    Py_ssize_t n, k, kv = K / ONNXEP_GV_L * ONNXEP_GV_L;
    const onnxep_gv_v zero = {0};
    for (n = n0; n + 4 <= n1; n += 4) {
        const float* w0 = w + n * K;
        const float* w1 = w0 + K;
        const float* w2 = w1 + K;
        const float* w3 = w2 + K;
        onnxep_gv_v s0 = zero, s1 = zero, s2 = zero, s3 = zero, av;
        for (k = 0; k < kv; k += ONNXEP_GV_L) {
            av = *(const onnxep_gv_vu*)(a + k);
            s0 += av * *(const onnxep_gv_vu*)(w0 + k);
            s1 += av * *(const onnxep_gv_vu*)(w1 + k);
            s2 += av * *(const onnxep_gv_vu*)(w2 + k);
            s3 += av * *(const onnxep_gv_vu*)(w3 + k);
        }
        if (k < K) {
            onnxep_gv_v wt;
            onnxep_gv_tail(a + k, K - k, &av);
            onnxep_gv_tail(w0 + k, K - k, &wt); s0 += av * wt;
            onnxep_gv_tail(w1 + k, K - k, &wt); s1 += av * wt;
            onnxep_gv_tail(w2 + k, K - k, &wt); s2 += av * wt;
            onnxep_gv_tail(w3 + k, K - k, &wt); s3 += av * wt;
        }
        y[n] = onnxep_act1(act, onnxep_gv_lanes(&s0) + (bias ? bias[n] : 0.0f));
        y[n + 1] = onnxep_act1(act, onnxep_gv_lanes(&s1) + (bias ? bias[n + 1] : 0.0f));
        y[n + 2] = onnxep_act1(act, onnxep_gv_lanes(&s2) + (bias ? bias[n + 2] : 0.0f));
        y[n + 3] = onnxep_act1(act, onnxep_gv_lanes(&s3) + (bias ? bias[n + 3] : 0.0f));
    }
    for (; n < n1; n++) {
        const float* w0 = w + n * K;
        onnxep_gv_v s0 = zero;
        for (k = 0; k < kv; k += ONNXEP_GV_L)
            s0 += *(const onnxep_gv_vu*)(a + k) * *(const onnxep_gv_vu*)(w0 + k);
        if (k < K) {
            onnxep_gv_v av, wt;
            onnxep_gv_tail(a + k, K - k, &av);
            onnxep_gv_tail(w0 + k, K - k, &wt);
            s0 += av * wt;
        }
        y[n] = onnxep_act1(act, onnxep_gv_lanes(&s0) + (bias ? bias[n] : 0.0f));
    }
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
