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
/* horizontal max: a tree over the lanes */
static inline float onnxep_at_hmax(onnxep_at_v v)
{
    float t[ONNXEP_AT_VL];
    int w, l;
    __builtin_memcpy(t, &v, sizeof(t));
    for (w = ONNXEP_AT_VL / 2; w > 0; w /= 2)
        for (l = 0; l < w; l++) t[l] = t[l + w] > t[l] ? t[l + w] : t[l];
    return t[0];
}
/* horizontal sum: halves added pairwise (lane l + lane l + w, w = VL/2 .. 1), on register shuffles (it runs once
   per key in onnxep_at_kv_scores, once per row in onnxep_at_softmax) */
static inline float onnxep_at_hsum(onnxep_at_v v)
{
#if ONNXEP_AT_VL == 16
    typedef float h8 __attribute__((vector_size(32)));
    typedef float h4 __attribute__((vector_size(16)));
    h8 a = __builtin_shufflevector(v, v, 0, 1, 2, 3, 4, 5, 6, 7)
         + __builtin_shufflevector(v, v, 8, 9, 10, 11, 12, 13, 14, 15);
    h4 b = __builtin_shufflevector(a, a, 0, 1, 2, 3) + __builtin_shufflevector(a, a, 4, 5, 6, 7);
#elif ONNXEP_AT_VL == 8
    typedef float h4 __attribute__((vector_size(16)));
    h4 b = __builtin_shufflevector(v, v, 0, 1, 2, 3) + __builtin_shufflevector(v, v, 4, 5, 6, 7);
#else
    onnxep_at_v b = v;
#endif
    float t0 = b[0] + b[2], t1 = b[1] + b[3];
    return t0 + t1;
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
/* CALLN(R, NV) for rb rows (1..4) and nv vectors (1..ONNXEP_AT_PV_NV) of the second product */
#if ONNXEP_AT_PV_NV > 2
#define ONNXEP_AT_SWNV(nv, rb, CALLN) switch (nv) {                                                              \
    case 1: switch (rb) { case 4: CALLN(4, 1); break; case 3: CALLN(3, 1); break; case 2: CALLN(2, 1); break;     \
                          default: CALLN(1, 1); break; } break;                                                      \
    case 3: switch (rb) { case 4: CALLN(4, 3); break; case 3: CALLN(3, 3); break; case 2: CALLN(2, 3); break;     \
                          default: CALLN(1, 3); break; } break;                                                      \
    case 4: switch (rb) { case 4: CALLN(4, 4); break; case 3: CALLN(3, 4); break; case 2: CALLN(2, 4); break;     \
                          default: CALLN(1, 4); break; } break;                                                      \
    default: switch (rb) { case 4: CALLN(4, 2); break; case 3: CALLN(3, 2); break; case 2: CALLN(2, 2); break;    \
                           default: CALLN(1, 2); break; } break; }
#else
#define ONNXEP_AT_SWNV(nv, rb, CALLN) switch (nv) {                                                              \
    case 1: switch (rb) { case 4: CALLN(4, 1); break; case 3: CALLN(3, 1); break; case 2: CALLN(2, 1); break;     \
                          default: CALLN(1, 1); break; } break;                                                      \
    default: switch (rb) { case 4: CALLN(4, 2); break; case 3: CALLN(3, 2); break; case 2: CALLN(2, 2); break;    \
                           default: CALLN(1, 2); break; } break; }
#endif

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

/* Rows r < rb of the scores s (row stride Np, N keys): alpha, the mask rows (mrows[r], Np floats, or NULL), then
   exp(x - max) over the whole padded row (padding -inf: exp 0), unnormalized; inv[r] := 1 / the row's sum. nan_zero:
   NaN probabilities (a fully masked row) -> a row of zeros, inv 1. */
static void onnxep_at_softmax(int rb, float* s, Py_ssize_t N, Py_ssize_t Np, float alpha,
                              const float* const* mrows, int nan_zero, float* inv)
{
    Py_ssize_t n0, n;
    int r;
    for (r = 0; r < rb; r++) {
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
        if (nan_zero && inv[r] != inv[r]) {
            for (n = 0; n < Np; n++) row[n] = 0.0f;
            inv[r] = 1.0f;
        }
    }
}

/* Query rows i0 .. i0+rb-1 (rb <= RB) of one item: scores into s (RB x Np), softmax, product with Vp into y.
   mask rows: mrow(r) the padded copy (Np floats) or NULL; o: RB x Dp scratch. */
static void onnxep_at_rows(int rb, const float* q, Py_ssize_t rsq, Py_ssize_t csq, const float* kp,
                           Py_ssize_t K, Py_ssize_t N, Py_ssize_t Np, const float* vp, Py_ssize_t D, Py_ssize_t Dp,
                           float alpha, const float* const* mrows, float* s, float* o, float* y, Py_ssize_t rsy,
                           Py_ssize_t csy, int nan_zero)
{
    Py_ssize_t n0, d0, d;
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
    onnxep_at_softmax(rb, s, N, Np, alpha, mrows, nan_zero, inv);
    for (d0 = 0; d0 < Dp; ) {
        int nv = (int)((Dp - d0) / ONNXEP_AT_VL);
        int direct;
        nv = nv < ONNXEP_AT_PV_NV ? nv : ONNXEP_AT_PV_NV;
        direct = csy == 1 && d0 + nv * ONNXEP_AT_VL <= D;
        #define ONNXEP_AT_PVN(R, NVV) onnxep_at_pv(R, NVV, s, Np, vp, N, Dp, d0, inv, o, y, rsy, direct)
        ONNXEP_AT_SWNV(nv, rb, ONNXEP_AT_PVN)
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


/* Query rows 0 .. rb-1 (rb <= RB, q rows contiguous: q[r*rsq + k]) of one item against K and V as stored, without
   packing either: key n's row at kk + n*ldk (K floats), value n's row at v + n*ldv (D floats). For a few query rows
   (batch-1 decoding) the packed path's copies of K^T and V cost more than its products, which read each key and
   value once either way. Scores: per key, VL-lane partial sums of q . k then their tree (onnxep_at_hsum), into
   s (RB x Np, softmax as onnxep_at_rows); output: per NV-vector block of D, the sum over keys of p * v in registers,
   times 1 / the row's sum, and the last D % VL columns one at a time. */
static inline __attribute__((always_inline)) void onnxep_at_kv_scores(const int RB, const float* q, Py_ssize_t rsq,
    const float* kk, Py_ssize_t ldk, Py_ssize_t K, Py_ssize_t N, Py_ssize_t Np, float* s)
{
    Py_ssize_t n, k, Kv = K / ONNXEP_AT_VL * ONNXEP_AT_VL;
    int r;
    for (n = 0; n < N; n++) {
        const float* kr = kk + n * ldk;
        onnxep_at_v acc[ONNXEP_AT_RB];
        #pragma GCC unroll 4
        for (r = 0; r < RB; r++) acc[r] = (onnxep_at_v){0};
        for (k = 0; k < Kv; k += ONNXEP_AT_VL) {
            onnxep_at_v kv = *(const onnxep_at_vu*)(kr + k);
            #pragma GCC unroll 4
            for (r = 0; r < RB; r++) acc[r] += *(const onnxep_at_vu*)(q + r * rsq + k) * kv;
        }
        #pragma GCC unroll 4
        for (r = 0; r < RB; r++) {
            float t = onnxep_at_hsum(acc[r]);
            for (k = Kv; k < K; k++) t += q[r * rsq + k] * kr[k];
            s[r * Np + n] = t;
        }
    }
}
static inline __attribute__((always_inline)) void onnxep_at_kv_pv(const int RB, const int NV, const float* s,
    Py_ssize_t Np, const float* v, Py_ssize_t ldv, Py_ssize_t N, Py_ssize_t d0, const float* inv, float* y,
    Py_ssize_t rsy, Py_ssize_t csy)
{
    onnxep_at_v acc[ONNXEP_AT_RB][ONNXEP_AT_PV_NV];
    Py_ssize_t n;
    int r, b, d;
    #pragma GCC unroll 4
    for (r = 0; r < RB; r++) {
        #pragma GCC unroll 4
        for (b = 0; b < NV; b++) acc[r][b] = (onnxep_at_v){0};
    }
    for (n = 0; n < N; n++) {
        const float* vr = v + n * ldv + d0;
        #pragma GCC unroll 4
        for (b = 0; b < NV; b++) {
            onnxep_at_v vv = *(const onnxep_at_vu*)(vr + b * ONNXEP_AT_VL);
            #pragma GCC unroll 4
            for (r = 0; r < RB; r++) acc[r][b] += s[r * Np + n] * vv;
        }
    }
    #pragma GCC unroll 4
    for (r = 0; r < RB; r++) {
        #pragma GCC unroll 4
        for (b = 0; b < NV; b++) {
            onnxep_at_v o = acc[r][b] * inv[r];
            if (csy == 1) *(onnxep_at_vu*)(y + r * rsy + d0 + b * ONNXEP_AT_VL) = o;
            else for (d = 0; d < ONNXEP_AT_VL; d++) y[r * rsy + (d0 + b * ONNXEP_AT_VL + d) * csy] = o[d];
        }
    }
}
static void onnxep_at_rows_kv(int rb, const float* q, Py_ssize_t rsq, const float* kk, Py_ssize_t ldk, Py_ssize_t K,
                              Py_ssize_t N, Py_ssize_t Np, const float* v, Py_ssize_t ldv, Py_ssize_t D, float alpha,
                              const float* const* mrows, float* s, float* y, Py_ssize_t rsy, Py_ssize_t csy,
                              int nan_zero)
{
    Py_ssize_t n, d, d0, Dv = D / ONNXEP_AT_VL * ONNXEP_AT_VL;
    float inv[ONNXEP_AT_RB];
    int r;
    #define ONNXEP_AT_KVS(R) onnxep_at_kv_scores(R, q, rsq, kk, ldk, K, N, Np, s)
    ONNXEP_AT_SW4(rb, ONNXEP_AT_KVS)
    onnxep_at_softmax(rb, s, N, Np, alpha, mrows, nan_zero, inv);
    for (d0 = 0; d0 < Dv; ) {
        int nv = (int)((Dv - d0) / ONNXEP_AT_VL);
        nv = nv < ONNXEP_AT_PV_NV ? nv : ONNXEP_AT_PV_NV;
        #define ONNXEP_AT_KVPN(R, NVV) onnxep_at_kv_pv(R, NVV, s, Np, v, ldv, N, d0, inv, y, rsy, csy)
        ONNXEP_AT_SWNV(nv, rb, ONNXEP_AT_KVPN)
        d0 += nv * ONNXEP_AT_VL;
    }
    for (d = Dv; d < D; d++)
        for (r = 0; r < rb; r++) {
            float t = 0.0f;
            for (n = 0; n < N; n++) t += s[r * Np + n] * v[n * ldv + d];
            y[r * rsy + d * csy] = t * inv[r];
        }
}

/* ---------------------------------------------------------------- bf16 (onnxep.compute_precision=bf16, issue 29)
   The same rows with both products on bf16 operands and fp32 accumulation, on the bf16 GEMM's micro-kernel and
   packings (bgemm.h; vdpbf16ps where the CPU has AVX512_BF16, its generic C elsewhere): per item K^T goes into
   bg_pack_b's panels (32 keys a panel, pairs along the head dim) and V into the same panels (32 columns of D a panel,
   pairs along the keys), each value rounded once (round to nearest even); per block of ONNXEP_ATB_RB query rows, Q's
   rows are rounded to pairs, the scores (fp32) come from bg_micro, the softmax runs in fp32 (onnxep_at_softmax), and
   the unnormalized probabilities are rounded to pairs for the second bg_micro, scaled by 1 / sum on the way out.
   ONNXEP_ATB_RB = BG_MR: the micro-kernel's full register block (2 x 12 accumulators, one broadcast per pair and
   row, two panel loads per pair for 12 rows). */
#include "bgemm.h"
#define ONNXEP_ATB_RB BG_MR

typedef struct {
    uint16_t* kp;      /* K^T panels: bg_pack_b_len(K, N) slots */
    uint16_t* vp;      /* V panels: bg_pack_b_len(N, D) slots */
    uint32_t* tmp;     /* BG_NR keys x K2 pairs (the K^T transpose) */
    uint32_t* qa;      /* RB x K2 pairs */
    float* qrow;       /* K floats (a Q row gathered when csq != 1) */
    uint32_t* pa;      /* RB x N2 pairs */
    float* s;          /* RB x Np scores */
    float* mbuf;       /* RB x Np mask rows */
    float* o;          /* RB x D products */
} onnxep_atb_work;

/* Floats of one thread's bf16 workspace (each part rounded up to 16 floats); with w != NULL, its parts' addresses
   in w (64-byte aligned when w is) */
static Py_ssize_t onnxep_atb_work_init(float* w, Py_ssize_t N, Py_ssize_t K, Py_ssize_t D, Py_ssize_t Np,
                                       onnxep_atb_work* wk)
{
    Py_ssize_t len[9], n = 0;
    float* at[9];
    int i;
    len[0] = bg_pack_b_len(K, N); len[1] = bg_pack_b_len(N, D); len[2] = BG_NR * bg_k2(K);
    len[3] = ONNXEP_ATB_RB * bg_k2(K); len[4] = K; len[5] = ONNXEP_ATB_RB * bg_k2(N);
    len[6] = ONNXEP_ATB_RB * Np; len[7] = ONNXEP_ATB_RB * Np; len[8] = ONNXEP_ATB_RB * D;
    for (i = 0; i < 9; i++) {
        at[i] = w ? w + n : NULL;
        n += (len[i] + 15) / 16 * 16;
    }
    if (wk) {
        wk->kp = (uint16_t*)at[0]; wk->vp = (uint16_t*)at[1]; wk->tmp = (uint32_t*)at[2]; wk->qa = (uint32_t*)at[3];
        wk->qrow = at[4]; wk->pa = (uint32_t*)at[5]; wk->s = at[6]; wk->mbuf = at[7]; wk->o = at[8];
    }
    return n;
}

#if BG_X86
/* V rows 2g, 2g+1 (the second absent: zeros), columns d0 .. d0 + n (n <= 16) -> n pair words at out */
__attribute__((target("avx512bf16,avx512bw,avx512vl,avx512f")))
static void onnxep_atb_vpairs(const float* v0, const float* v1, int n, uint32_t* out)
{
    __mmask16 m = n >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << n) - 1u);
    __m512i lo = _mm512_cvtepu16_epi32((__m256i)_mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(m, v0)));
    __m512i hi = v1 ? _mm512_cvtepu16_epi32((__m256i)_mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(m, v1)))
                    : _mm512_setzero_si512();
    _mm512_storeu_si512((void*)out, _mm512_or_si512(lo, _mm512_slli_epi32(hi, 16)));
}
#endif

/* K^T (element (k, n) at k[k * rsk + n * csk]) -> bg_pack_b(k, K, N, rsk, csk)'s panels. With the head dim
   contiguous (rsk == 1) each key's row is rounded to pairs by bg_pack_a (vcvtne2ps2bf16) and the pair words
   transposed into the panel; elsewhere bg_pack_b itself. */
static void onnxep_atb_pack_k(int kern, const float* k, Py_ssize_t rsk, Py_ssize_t csk, Py_ssize_t K, Py_ssize_t N,
                              const onnxep_atb_work* w)
{
    const int64_t K2 = bg_k2(K), K2P = bg_k2p(K), NP = bg_np(N);
    int64_t p, g, c;
    if (rsk != 1 || kern == BG_GENERIC || K2 == 0) { bg_pack_b(k, K, N, rsk, csk, w->kp); return; }
    for (p = 0; p < NP; p++) {
        uint32_t* pan = (uint32_t*)w->kp + p * K2P * BG_NR;
        int64_t c1 = N - p * BG_NR < BG_NR ? N - p * BG_NR : BG_NR;
        bg_pack_a(kern, k + p * BG_NR * csk, csk, K, K2, 0, c1, w->tmp);
        for (g = 0; g < K2; g++) {
            for (c = 0; c < c1; c++) pan[g * BG_NR + c] = w->tmp[c * K2 + g];
            for (; c < BG_NR; c++) pan[g * BG_NR + c] = 0;
        }
        memset(pan + K2 * BG_NR, 0, (size_t)((K2P - K2) * BG_NR) * 4);
    }
}

/* V (element (n, d) at v[n * rsv + d * csv]) -> bg_pack_b(v, N, D, rsv, csv)'s panels; rows contiguous (csv == 1):
   two rows at a time rounded and interleaved into pair words (onnxep_atb_vpairs) */
static void onnxep_atb_pack_v(int kern, const float* v, Py_ssize_t rsv, Py_ssize_t csv, Py_ssize_t N, Py_ssize_t D,
                              const onnxep_atb_work* w)
{
#if BG_X86
    const int64_t N2 = bg_k2(N), N2P = bg_k2p(N), DP = bg_np(D);
    int64_t p, g, c;
    if (csv == 1 && kern != BG_GENERIC) {
        for (p = 0; p < DP; p++) {
            uint32_t* pan = (uint32_t*)w->vp + p * N2P * BG_NR;
            int64_t c1 = D - p * BG_NR < BG_NR ? D - p * BG_NR : BG_NR;
            for (g = 0; g < N2; g++) {
                const float* v0 = v + 2 * g * rsv + p * BG_NR;
                const float* v1 = 2 * g + 1 < N ? v0 + rsv : NULL;
                for (c = 0; c < BG_NR; c += 16) {
                    if (c < c1) onnxep_atb_vpairs(v0 + c, v1 ? v1 + c : NULL, (int)(c1 - c), pan + g * BG_NR + c);
                    else memset(pan + g * BG_NR + c, 0, 16 * 4);
                }
            }
            memset(pan + N2 * BG_NR, 0, (size_t)((N2P - N2) * BG_NR) * 4);
        }
        return;
    }
#endif
    bg_pack_b(v, N, D, rsv, csv, w->vp);
}

/* Query rows 0 .. rb-1 (rb <= ONNXEP_ATB_RB) of q (row stride rsq, column stride csq) against the item's packed K^T
   and V in w: y[r * rsy + d * csy] := softmax(alpha * q_r . K^T + mask row r) . V, as onnxep_at_rows. */
static void onnxep_atb_rows(int kern, int rb, const float* q, Py_ssize_t rsq, Py_ssize_t csq, Py_ssize_t K,
                            Py_ssize_t N, Py_ssize_t Np, Py_ssize_t D, float alpha, const float* const* mrows,
                            const onnxep_atb_work* w, float* y, Py_ssize_t rsy, Py_ssize_t csy, int nan_zero)
{
    const int64_t K2 = bg_k2(K), K2P = bg_k2p(K), N2 = bg_k2(N), N2P = bg_k2p(N);
    float inv[ONNXEP_ATB_RB];
    Py_ssize_t c0, d, kk;
    int r;
    if (csq == 1) bg_pack_a(kern, q, rsq, K, K2, 0, rb, w->qa);
    else for (r = 0; r < rb; r++) {
        for (kk = 0; kk < K; kk++) w->qrow[kk] = q[r * rsq + kk * csq];
        bg_pack_a(kern, w->qrow, 0, K, K2, 0, 1, w->qa + r * K2);
    }
    for (c0 = 0; c0 < Np; c0 += BG_NR)
        bg_micro(kern, w->qa, K2, w->kp + (c0 / BG_NR) * K2P * BG_NR * 2, K2, rb,
                 (int)(Np - c0 < BG_NR ? Np - c0 : BG_NR), w->s + c0, Np, 0, NULL, 0);
    onnxep_at_softmax(rb, w->s, N, Np, alpha, mrows, nan_zero, inv);
    bg_pack_a(kern, w->s, Np, N, N2, 0, rb, w->pa);
    for (c0 = 0; c0 < D; c0 += BG_NR)
        bg_micro(kern, w->pa, N2, w->vp + (c0 / BG_NR) * N2P * BG_NR * 2, N2, rb,
                 (int)(D - c0 < BG_NR ? D - c0 : BG_NR), w->o + c0, D, 0, NULL, 0);
    for (r = 0; r < rb; r++) {
        const float* o = w->o + r * D;
        float* yr = y + r * rsy;
        if (csy == 1) for (d = 0; d < D; d++) yr[d] = o[d] * inv[r];
        else for (d = 0; d < D; d++) yr[d * csy] = o[d] * inv[r];
    }
}

#endif /* ONNXEP_NATIVE_ATTENTION_H */
