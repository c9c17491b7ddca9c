/* onnxep native code, included by onnxep/_k_transformer.pxi (compiled once per ISA; see setup.py). */
#ifndef ONNXEP_NATIVE_ATTENTION_H
#define ONNXEP_NATIVE_ATTENTION_H

#if defined(__AVX512F__)
#define ONNXEP_AT_VL 16            /* floats per vector */
#define ONNXEP_AT_PV_NV 4          /* vectors of D per register block of the second product: 4 rows x 4 = 16 zmm */
#elif defined(__AVX2__)
#define ONNXEP_AT_VL 8
#define ONNXEP_AT_PV_NV 2          /* 4 rows x 2 = 8 of the 16 ymm */
#else
#define ONNXEP_AT_VL 4
#define ONNXEP_AT_PV_NV 2
#endif
#define ONNXEP_AT_RB 4             /* query rows per register block */
#define ONNXEP_AT_PAD 16           /* scores rows padded to a multiple of this (every VL divides it) */
typedef float onnxep_at_v __attribute__((vector_size(ONNXEP_AT_VL * 4)));
typedef float onnxep_at_vu __attribute__((vector_size(ONNXEP_AT_VL * 4), aligned(4), may_alias));

typedef int onnxep_at_vi __attribute__((vector_size(ONNXEP_AT_VL * 4)));
static const float onnxep_at_iota[16] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
static inline onnxep_at_v onnxep_at_splat(float x) { return (onnxep_at_v){0} + x; }
static inline onnxep_at_v onnxep_at_sel(onnxep_at_vi m, onnxep_at_v a, onnxep_at_v b)   /* m ? a : b */
{
    return (onnxep_at_v)(((onnxep_at_vi)a & m) | ((onnxep_at_vi)b & ~m));
}
static inline onnxep_at_v onnxep_at_max(onnxep_at_v a, onnxep_at_v b) { return onnxep_at_sel(b > a, b, a); }
/* x with lanes >= n (n < VL) set to -inf */
static inline onnxep_at_v onnxep_at_pad(onnxep_at_v x, Py_ssize_t n)
{
    onnxep_at_v idx = *(const onnxep_at_vu*)onnxep_at_iota;
    return onnxep_at_sel(idx < onnxep_at_splat((float)n), x, onnxep_at_splat(-INFINITY));
}
/* horizontal max / sum: a tree over the lanes */
static inline float onnxep_at_hmax(onnxep_at_v v)
{
    float t[ONNXEP_AT_VL];
    int w, l;
    __builtin_memcpy(t, &v, sizeof(t));
    for (w = ONNXEP_AT_VL / 2; w > 0; w /= 2)
        for (l = 0; l < w; l++) t[l] = t[l + w] > t[l] ? t[l + w] : t[l];
    return t[0];
}
static inline float onnxep_at_hsum(onnxep_at_v v)
{
    float t[ONNXEP_AT_VL];
    int w, l;
    __builtin_memcpy(t, &v, sizeof(t));
    for (w = ONNXEP_AT_VL / 2; w > 0; w /= 2)
        for (l = 0; l < w; l++) t[l] += t[l + w];
    return t[0];
}

/* s[r*Np + n0 + j] := sum_k q[r*rsq + k*csq] * kp[k*Np + n0 + j] for r < RB, j < NV*VL. With one vector per row
   the k loop alternates two accumulators (two FMA chains per row instead of one), added at the end. */
static inline __attribute__((always_inline)) void onnxep_at_qk(const int RB, const int NV, const float* q,
    Py_ssize_t rsq, Py_ssize_t csq, const float* kp, Py_ssize_t K, Py_ssize_t Np, Py_ssize_t n0, float* s)
{
    onnxep_at_v acc[ONNXEP_AT_RB][2];
    Py_ssize_t k = 0;
    int r;
    #pragma GCC unroll 4
    for (r = 0; r < RB; r++) { acc[r][0] = (onnxep_at_v){0}; acc[r][1] = (onnxep_at_v){0}; }
    if (NV == 1) {
        for (; k + 2 <= K; k += 2) {
            onnxep_at_v b0 = *(const onnxep_at_vu*)(kp + k * Np + n0);
            onnxep_at_v b1 = *(const onnxep_at_vu*)(kp + (k + 1) * Np + n0);
            #pragma GCC unroll 4
            for (r = 0; r < RB; r++) {
                acc[r][0] += q[r * rsq + k * csq] * b0;
                acc[r][1] += q[r * rsq + (k + 1) * csq] * b1;
            }
        }
        if (k < K) {
            onnxep_at_v b0 = *(const onnxep_at_vu*)(kp + k * Np + n0);
            #pragma GCC unroll 4
            for (r = 0; r < RB; r++) acc[r][0] += q[r * rsq + k * csq] * b0;
        }
        #pragma GCC unroll 4
        for (r = 0; r < RB; r++) *(onnxep_at_vu*)(s + r * Np + n0) = acc[r][0] + acc[r][1];
        return;
    }
    for (; k < K; k++) {
        onnxep_at_v b0 = *(const onnxep_at_vu*)(kp + k * Np + n0);
        onnxep_at_v b1 = *(const onnxep_at_vu*)(kp + k * Np + n0 + ONNXEP_AT_VL);
        #pragma GCC unroll 4
        for (r = 0; r < RB; r++) {
            float a = q[r * rsq + k * csq];
            acc[r][0] += a * b0;
            acc[r][1] += a * b1;
        }
    }
    #pragma GCC unroll 4
    for (r = 0; r < RB; r++) {
        *(onnxep_at_vu*)(s + r * Np + n0) = acc[r][0];
        *(onnxep_at_vu*)(s + r * Np + n0 + ONNXEP_AT_VL) = acc[r][1];
    }
}

/* o[r*Dp + d0 + j] := inv[r] * sum_{n < N} p[r*Np + n] * vp[n*Dp + d0 + j] for r < RB, j < NV*VL; with one
   vector the n loop alternates two accumulators, as onnxep_at_qk's k loop. Written straight to y
   (y[r*rsy + d0 + j]) when csy == 1 and the block is inside D, else to o. */
static inline __attribute__((always_inline)) void onnxep_at_pv(const int RB, const int NV, const float* p,
    Py_ssize_t Np, const float* vp, Py_ssize_t N, Py_ssize_t Dp, Py_ssize_t d0, const float* inv, float* o,
    float* y, Py_ssize_t rsy, int direct)
{
    onnxep_at_v acc[ONNXEP_AT_RB][ONNXEP_AT_PV_NV > 2 ? ONNXEP_AT_PV_NV : 2];
    Py_ssize_t n = 0;
    int r, v;
    #pragma GCC unroll 4
    for (r = 0; r < RB; r++) {
        #pragma GCC unroll 4
        for (v = 0; v < (NV > 2 ? NV : 2); v++) acc[r][v] = (onnxep_at_v){0};
    }
    if (NV == 1) {
        for (; n + 2 <= N; n += 2) {
            onnxep_at_v b0 = *(const onnxep_at_vu*)(vp + n * Dp + d0);
            onnxep_at_v b1 = *(const onnxep_at_vu*)(vp + (n + 1) * Dp + d0);
            #pragma GCC unroll 4
            for (r = 0; r < RB; r++) {
                acc[r][0] += p[r * Np + n] * b0;
                acc[r][1] += p[r * Np + n + 1] * b1;
            }
        }
        if (n < N) {
            onnxep_at_v b0 = *(const onnxep_at_vu*)(vp + n * Dp + d0);
            #pragma GCC unroll 4
            for (r = 0; r < RB; r++) acc[r][0] += p[r * Np + n] * b0;
        }
        #pragma GCC unroll 4
        for (r = 0; r < RB; r++) acc[r][0] += acc[r][1];
    } else {
        for (; n < N; n++) {
            onnxep_at_v b[ONNXEP_AT_PV_NV];
            #pragma GCC unroll 4
            for (v = 0; v < NV; v++) b[v] = *(const onnxep_at_vu*)(vp + n * Dp + d0 + v * ONNXEP_AT_VL);
            #pragma GCC unroll 4
            for (r = 0; r < RB; r++) {
                float a = p[r * Np + n];
                #pragma GCC unroll 4
                for (v = 0; v < NV; v++) acc[r][v] += a * b[v];
            }
        }
    }
    #pragma GCC unroll 4
    for (r = 0; r < RB; r++) {
        float* dst = direct ? y + r * rsy + d0 : o + r * Dp + d0;
        #pragma GCC unroll 4
        for (v = 0; v < NV; v++) *(onnxep_at_vu*)(dst + v * ONNXEP_AT_VL) = acc[r][v] * inv[r];
    }
}

#define ONNXEP_AT_SW4(rb, CALL) switch (rb) { case 4: CALL(4); break; case 3: CALL(3); break;                                              case 2: CALL(2); break; default: CALL(1); break; }

/* s[r*Np + n] := sum_k q[r*rsq + k*csq] * kp[k*Np + n] for r < rb <= RB, n < Np (a multiple of 16) */
static void onnxep_at_scores(int rb, const float* q, Py_ssize_t rsq, Py_ssize_t csq, const float* kp,
                             Py_ssize_t K, Py_ssize_t Np, float* s)
{
    Py_ssize_t n0;
    for (n0 = 0; n0 + 2 * ONNXEP_AT_VL <= Np; n0 += 2 * ONNXEP_AT_VL) {
        #define ONNXEP_AT_QS2(R) onnxep_at_qk(R, 2, q, rsq, csq, kp, K, Np, n0, s)
        ONNXEP_AT_SW4(rb, ONNXEP_AT_QS2)
    }
    if (n0 < Np) {
        #define ONNXEP_AT_QS1(R) onnxep_at_qk(R, 1, q, rsq, csq, kp, K, Np, n0, s)
        ONNXEP_AT_SW4(rb, ONNXEP_AT_QS1)
    }
}

/* Query rows i0 .. i0+rb-1 (rb <= RB) of one item: scores into s (RB x Np), softmax, product with Vp into y.
   mask rows: mrow(r) the padded copy (Np floats) or NULL; o: RB x Dp scratch. */
static void onnxep_at_rows(int rb, const float* q, Py_ssize_t rsq, Py_ssize_t csq, const float* kp,
                           Py_ssize_t K, Py_ssize_t N, Py_ssize_t Np, const float* vp, Py_ssize_t D, Py_ssize_t Dp,
                           float alpha, const float* const* mrows, float* s, float* o, float* y, Py_ssize_t rsy,
                           Py_ssize_t csy, int nan_zero)
{
    Py_ssize_t n0, d0, n, d;
    float inv[ONNXEP_AT_RB];
    int r;
    for (n0 = 0; n0 + 2 * ONNXEP_AT_VL <= Np; n0 += 2 * ONNXEP_AT_VL) {
        #define ONNXEP_AT_QK2(R) onnxep_at_qk(R, 2, q, rsq, csq, kp, K, Np, n0, s)
        ONNXEP_AT_SW4(rb, ONNXEP_AT_QK2)
    }
    if (n0 < Np) {    /* one vector left (Np is a multiple of 16, so of VL) */
        #define ONNXEP_AT_QK1(R) onnxep_at_qk(R, 1, q, rsq, csq, kp, K, Np, n0, s)
        ONNXEP_AT_SW4(rb, ONNXEP_AT_QK1)
    }
    for (r = 0; r < rb; r++) {     /* alpha, mask, softmax over the padded row (padding -inf: exp 0) */
        float* row = s + r * Np;
        const float* mr = mrows ? mrows[r] : NULL;
        onnxep_at_v vm = onnxep_at_splat(-INFINITY), vs = onnxep_at_splat(0.0f);
        float m;
        for (n0 = 0; n0 < Np; n0 += ONNXEP_AT_VL) {
            onnxep_at_v x = *(const onnxep_at_vu*)(row + n0) * alpha;
            if (mr) x += *(const onnxep_at_vu*)(mr + n0);
            if (n0 + ONNXEP_AT_VL > N) x = onnxep_at_pad(x, N - n0);
            *(onnxep_at_vu*)(row + n0) = x;
            vm = onnxep_at_max(vm, x);
        }
        m = onnxep_at_hmax(vm);
        #pragma omp simd
        for (n = 0; n < Np; n++) row[n] = onnxep_exp_neg(row[n] - m);
        for (n0 = 0; n0 < Np; n0 += ONNXEP_AT_VL) vs += *(const onnxep_at_vu*)(row + n0);
        inv[r] = 1.0f / onnxep_at_hsum(vs);
        if (nan_zero && inv[r] != inv[r]) {    /* NaN probabilities (a fully masked row) -> 0 */
            for (n = 0; n < Np; n++) row[n] = 0.0f;
            inv[r] = 1.0f;
        }
    }
    for (d0 = 0; d0 < Dp; ) {
        int nv = (int)((Dp - d0) / ONNXEP_AT_VL);
        int direct;
        nv = nv < ONNXEP_AT_PV_NV ? nv : ONNXEP_AT_PV_NV;
        direct = csy == 1 && d0 + nv * ONNXEP_AT_VL <= D;
        #define ONNXEP_AT_PVN(R, NVV) onnxep_at_pv(R, NVV, s, Np, vp, N, Dp, d0, inv, o, y, rsy, direct)
        #define ONNXEP_AT_PV1(R) ONNXEP_AT_PVN(R, 1)
        #define ONNXEP_AT_PV2(R) ONNXEP_AT_PVN(R, 2)
        #if ONNXEP_AT_PV_NV > 2
        #define ONNXEP_AT_PV3(R) ONNXEP_AT_PVN(R, 3)
        #define ONNXEP_AT_PV4(R) ONNXEP_AT_PVN(R, 4)
        #endif
        switch (nv) {
        case 1: ONNXEP_AT_SW4(rb, ONNXEP_AT_PV1) break;
        #if ONNXEP_AT_PV_NV > 2
        case 3: ONNXEP_AT_SW4(rb, ONNXEP_AT_PV3) break;
        case 4: ONNXEP_AT_SW4(rb, ONNXEP_AT_PV4) break;
        #endif
        default: ONNXEP_AT_SW4(rb, ONNXEP_AT_PV2) break;
        }
        if (!direct) {
            Py_ssize_t d1 = d0 + nv * ONNXEP_AT_VL < D ? d0 + nv * ONNXEP_AT_VL : D;
            for (r = 0; r < rb; r++) {
                if (csy == 1) memcpy(y + r * rsy + d0, o + r * Dp + d0, (d1 - d0) * sizeof(float));
                else for (d = d0; d < d1; d++) y[r * rsy + d * csy] = o[r * Dp + d];
            }
        }
        d0 += nv * ONNXEP_AT_VL;
    }
}

#endif /* ONNXEP_NATIVE_ATTENTION_H */
