/* onnxep int8 GEMM (issue 29): u8 x s8 -> s32, exact (int32 accumulation with wraparound, as ONNX's MatMulInteger and
   onnxruntime's MLAS).

   Every operand pair is brought to u8 (A) x s8 (B) with int32 zero points, so one kernel serves all four type pairs:
     A s8: Au = A ^ 0x80 = A + 128, so A - za = Au - (za + 128);
     B u8: Bs = B ^ 0x80 = B - 128, so B - zb = Bs - (zb - 128).
   Then sum_k (Au - za')(Bs - zb') = C - zb'[n] rowsum(Au)[m] - za'[m] colsum(Bs)[n] + K za'[m] zb'[n], C = Au @ Bs,
   all modulo 2**32 (computed in uint32 so the wraparound is defined).

   Packed B (qg_pack_b): panels of 16 columns (N padded to 16), each K4 = ceil(K / 4) groups of 64 bytes, group g
   holding column c's bytes k = 4g .. 4g+3 at [4c .. 4c+3] (vpdpbusd's layout), zero padded; then the int32 column
   sums of Bs (N padded to 16). Packed A (qg_pack_a): rows of K4 * 4 bytes (zero padded) plus int32 row sums.

   Micro-kernels: AVX512-VNNI vpdpbusd (6 rows x 32 columns; chosen at run time by CPUID leaf 7 ECX bit 11 plus the
   OS's ZMM state; compiled with a target attribute, never by -m flags), AVX2 (exact: operands widened to s16 and
   multiplied pairwise by vpmaddwd, whose s32 pair sums cannot overflow -- vpmaddubsw's s16 pair sums saturate at
   255 * 127 * 2 > 32767, which onnxruntime / oneDNN accept or avoid with 7-bit weights; here the result stays exact),
   and generic C. */
#ifndef ONNXEP_QGEMM_H
#define ONNXEP_QGEMM_H
#include <stdint.h>
#include <string.h>
#include <math.h>
#include "cpuid.h"
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define QG_X86 1
#else
#define QG_X86 0
#endif

#define QG_NR 16
#define QG_MB 48          /* rows per work item */
#define QG_NB 128         /* columns per work item (8 panels) */

static inline int64_t qg_k4(int64_t K) { return (K + 3) / 4; }
static inline int64_t qg_np(int64_t N) { return (N + QG_NR - 1) / QG_NR; }
static inline int64_t qg_pack_b_bytes(int64_t K, int64_t N) {
    return qg_np(N) * QG_NR * qg_k4(K) * 4 + qg_np(N) * QG_NR * 4;
}

/* B (K, N) row-major, u8 (b_signed 0) or s8 (1) bytes, row stride ldb -> packed (see above). */
static void qg_pack_b(const uint8_t* B, int b_signed, int64_t K, int64_t N, int64_t ldb, uint8_t* out) {
    int64_t K4 = qg_k4(K), NP = qg_np(N);
    uint8_t flip = b_signed ? 0 : 0x80;
    int32_t* cs = (int32_t*)(out + NP * QG_NR * K4 * 4);
    memset(out, 0, (size_t)qg_pack_b_bytes(K, N));
    for (int64_t p = 0; p < NP; p++) {
        uint8_t* pan = out + p * QG_NR * K4 * 4;
        for (int64_t c = 0; c < QG_NR; c++) {
            int64_t n = p * QG_NR + c;
            if (n >= N) break;
            int32_t s = 0;
            for (int64_t k = 0; k < K; k++) {
                uint8_t v = B[k * ldb + n] ^ flip;
                pan[(k / 4) * 64 + c * 4 + (k & 3)] = v;
                s += (int8_t)v;
            }
            cs[n] = s;
        }
    }
}

/* A (M, K) row-major u8 / s8 (a_signed), row stride lda -> rows of K4 * 4 u8 bytes + row sums. */
static void qg_pack_a(const uint8_t* A, int a_signed, int64_t M, int64_t K, int64_t lda, uint8_t* out, int32_t* rs) {
    int64_t K4 = qg_k4(K);
    uint8_t flip = a_signed ? 0x80 : 0;
    for (int64_t m = 0; m < M; m++) {
        uint8_t* o = out + m * K4 * 4;
        const uint8_t* a = A + m * lda;
        int32_t s = 0;
        for (int64_t k = 0; k < K; k++) { uint8_t v = a[k] ^ flip; o[k] = v; s += v; }
        for (int64_t k = K; k < K4 * 4; k++) o[k] = 0;
        rs[m] = s;
    }
}

/* ---------------------------------------------------------------- kernel selection */
enum { QG_GENERIC = 0, QG_AVX2 = 1, QG_VNNI = 2 };
static int qg_force = -1;        /* tests: force a kernel (-1: best available) */

static int qg_cpu_vnni(void) { return onnxep_cpu_has(8); }

static int qg_have(int k) {
    if (k == QG_GENERIC) return 1;
#if defined(__AVX2__)
    if (k == QG_AVX2) return 1;
#endif
    if (k == QG_VNNI) return qg_cpu_vnni();
    return 0;
}

static int qg_kernel(void) {
    if (qg_force >= 0 && qg_have(qg_force)) return qg_force;
    if (qg_have(QG_VNNI)) return QG_VNNI;
    if (qg_have(QG_AVX2)) return QG_AVX2;
    return QG_GENERIC;
}

/* ---------------------------------------------------------------- micro-kernels: C[mr, 16*np] (int32, ldc) */
static void qg_micro_generic(const uint8_t* A, int64_t lda4, const uint8_t* Bp, int64_t pstride, int64_t K4, int mr,
                             int np, int32_t* C, int64_t ldc) {
    for (int i = 0; i < mr; i++) {
        const uint8_t* a = A + i * lda4;
        for (int p = 0; p < np; p++) {
            const int8_t* b = (const int8_t*)(Bp + p * pstride);
            int32_t acc[QG_NR];
            for (int c = 0; c < QG_NR; c++) acc[c] = 0;
            for (int64_t g = 0; g < K4; g++) {
                const uint8_t* ag = a + 4 * g;
                const int8_t* bg = b + 64 * g;
                for (int c = 0; c < QG_NR; c++)
                    acc[c] += (int32_t)ag[0] * bg[4 * c] + (int32_t)ag[1] * bg[4 * c + 1]
                            + (int32_t)ag[2] * bg[4 * c + 2] + (int32_t)ag[3] * bg[4 * c + 3];
            }
            memcpy(C + i * ldc + p * QG_NR, acc, sizeof acc);
        }
    }
}

#if defined(__AVX2__)
/* 2 rows x 16 columns: 4-column chunks widened to s16, vpmaddwd against the row's 4 A bytes (s16) repeated. */
static inline __attribute__((always_inline)) void qg_avx2_rows(const uint8_t* A, int64_t lda4, const uint8_t* b,
                                                               int64_t K4, int mr, int32_t* C, int64_t ldc) {
    __m256i acc[2][4];
    for (int i = 0; i < 2; i++) for (int j = 0; j < 4; j++) acc[i][j] = _mm256_setzero_si256();
    for (int64_t g = 0; g < K4; g++) {
        __m256i bw[4];
        for (int j = 0; j < 4; j++)
            bw[j] = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i*)(b + 64 * g + 16 * j)));
        for (int i = 0; i < mr; i++) {
            int32_t a4;
            memcpy(&a4, A + i * lda4 + 4 * g, 4);
            __m128i aw = _mm_cvtepu8_epi16(_mm_cvtsi32_si128(a4));
            __m256i ab = _mm256_broadcastq_epi64(aw);
            for (int j = 0; j < 4; j++) acc[i][j] = _mm256_add_epi32(acc[i][j], _mm256_madd_epi16(ab, bw[j]));
        }
    }
    for (int i = 0; i < mr; i++) {
        __m256i lo = _mm256_permute4x64_epi64(_mm256_hadd_epi32(acc[i][0], acc[i][1]), 0xD8);
        __m256i hi = _mm256_permute4x64_epi64(_mm256_hadd_epi32(acc[i][2], acc[i][3]), 0xD8);
        _mm256_storeu_si256((__m256i*)(C + i * ldc), lo);
        _mm256_storeu_si256((__m256i*)(C + i * ldc + 8), hi);
    }
}

static void qg_micro_avx2(const uint8_t* A, int64_t lda4, const uint8_t* Bp, int64_t pstride, int64_t K4, int mr,
                          int np, int32_t* C, int64_t ldc) {
    for (int i = 0; i < mr; i += 2) {
        int r = mr - i < 2 ? mr - i : 2;
        for (int p = 0; p < np; p++) {
            if (r == 2) qg_avx2_rows(A + i * lda4, lda4, Bp + p * pstride, K4, 2, C + i * ldc + p * QG_NR, ldc);
            else qg_avx2_rows(A + i * lda4, lda4, Bp + p * pstride, K4, 1, C + i * ldc + p * QG_NR, ldc);
        }
    }
}
#endif

#if QG_X86
#define QG_VNNI_T __attribute__((target("avx512vnni,avx512bw,avx512f"), always_inline)) inline
/* MR rows x 32 columns (two panels) or x 16 (np 1): vpdpbusd, A's 4 bytes broadcast. */
static QG_VNNI_T void qg_vnni_tile(const uint8_t* A, int64_t lda4, const uint8_t* Bp, int64_t pstride, int64_t K4,
                                   const int MR, const int NP, int32_t* C, int64_t ldc) {
    __m512i acc[6][2];
    for (int i = 0; i < MR; i++) for (int j = 0; j < NP; j++) acc[i][j] = _mm512_setzero_si512();
    const uint8_t* b0 = Bp;
    const uint8_t* b1 = Bp + pstride;
    for (int64_t g = 0; g < K4; g++) {
        __m512i w0 = _mm512_loadu_si512((const void*)(b0 + 64 * g));
        __m512i w1 = NP > 1 ? _mm512_loadu_si512((const void*)(b1 + 64 * g)) : w0;
        for (int i = 0; i < MR; i++) {
            int32_t a4;
            memcpy(&a4, A + i * lda4 + 4 * g, 4);
            __m512i ab = _mm512_set1_epi32(a4);
            acc[i][0] = _mm512_dpbusd_epi32(acc[i][0], ab, w0);
            if (NP > 1) acc[i][1] = _mm512_dpbusd_epi32(acc[i][1], ab, w1);
        }
    }
    for (int i = 0; i < MR; i++)
        for (int j = 0; j < NP; j++) _mm512_storeu_si512((void*)(C + i * ldc + j * QG_NR), acc[i][j]);
}

#define QG_VNNI_CASE(R) \
    case R: if (n2) qg_vnni_tile(Ar, lda4, Bp + p * pstride, pstride, K4, R, 2, C + p * QG_NR, ldc); \
            else qg_vnni_tile(Ar, lda4, Bp + p * pstride, pstride, K4, R, 1, C + p * QG_NR, ldc); break;

__attribute__((target("avx512vnni,avx512bw,avx512f")))
static void qg_micro_vnni(const uint8_t* A, int64_t lda4, const uint8_t* Bp, int64_t pstride, int64_t K4, int mr,
                          int np, int32_t* C0, int64_t ldc) {
    for (int i = 0; i < mr; i += 6) {
        int r = mr - i < 6 ? mr - i : 6;
        const uint8_t* Ar = A + i * lda4;
        int32_t* C = C0 + i * ldc;
        for (int p = 0; p < np; p += 2) {
            int n2 = p + 1 < np;
            switch (r) { QG_VNNI_CASE(1) QG_VNNI_CASE(2) QG_VNNI_CASE(3) QG_VNNI_CASE(4) QG_VNNI_CASE(5)
                         QG_VNNI_CASE(6) }
        }
    }
}
#endif

/* ---------------------------------------------------------------- 8-bit stores and requantization
   qg_store_q16 / qg_store_q8: clamped integral floats (already within the 8-bit type's range) stored as bytes, int8
   (is_signed) or uint8. AVX-512: cvtps2dq then the low byte of each lane (vpmovdb). AVX2: offset by 128 for int8 so
   every value is 0 .. 255, cvtps2dq, pack with unsigned saturation (exact: nothing saturates), flip back with ^ 0x80.
   QuantizeLinear (qg_quantize_tensor), the requantization below and qconv.h store through these. */
#if defined(__AVX512F__)
static inline void qg_store_q16(uint8_t* y, __m512 f) {
    _mm_storeu_si128((__m128i*)y, _mm512_cvtepi32_epi8(_mm512_cvtps_epi32(f)));
}
#elif defined(__AVX2__)
static inline void qg_store_q8(uint8_t* y, __m256 f, int is_signed) {
    __m256i q = _mm256_cvtps_epi32(_mm256_add_ps(f, _mm256_set1_ps(is_signed ? 128.f : 0.f)));      /* 0 .. 255 */
    __m128i p16 = _mm_packus_epi32(_mm256_castsi256_si128(q), _mm256_extracti128_si256(q, 1));
    const __m128i flip = _mm_set1_epi8((char)(is_signed ? 0x80 : 0));
    _mm_storel_epi64((__m128i*)y, _mm_xor_si128(_mm_packus_epi16(p16, p16), flip));
}
#endif

/* acc (w int32, + off, + add[j] when add) -> y bytes: rint(float(acc) * mult) + zp, clamped to [lo, hi] (int8 when
   y_signed, else uint8); mult one value (mst 0) or one per column. AVX-512 / AVX2: the same float32 operations 16 /
   8 lanes at a time (cvtdq2ps, mulps, round to nearest even, addps, max / min, cvtps2dq: bit-identical to the scalar
   loop), which gcc does not vectorize itself. The requantization of onnxruntime's MLAS (and of ops/quant/_common.py
   requantize); qconv.h's conv and the QLinearMatMul epilogue (qg_item) share it. */
static inline void qg_requant_add(const int32_t* __restrict acc, const int32_t* __restrict add, int32_t off,
                                  int64_t w, const float* __restrict mult, int mst, float zp, float lo, float hi,
                                  int y_signed, uint8_t* __restrict y) {
    int64_t j = 0;
#if defined(__AVX512F__)
    {
        const __m512 vz = _mm512_set1_ps(zp), vlo = _mm512_set1_ps(lo), vhi = _mm512_set1_ps(hi),
                     vm0 = _mm512_set1_ps(mult[0]);
        const __m512i voff = _mm512_set1_epi32(off);
        for (; j + 16 <= w; j += 16) {
            __m512i iv = _mm512_add_epi32(_mm512_loadu_si512((const void*)(acc + j)), voff);
            if (add) iv = _mm512_add_epi32(iv, _mm512_loadu_si512((const void*)(add + j)));
            __m512 f = _mm512_cvtepi32_ps(iv);
            f = _mm512_mul_ps(f, mst ? _mm512_loadu_ps(mult + j) : vm0);
            f = _mm512_roundscale_ps(f, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
            f = _mm512_min_ps(_mm512_max_ps(_mm512_add_ps(f, vz), vlo), vhi);
            qg_store_q16(y + j, f);
        }
    }
#elif defined(__AVX2__)
    {
        const __m256 vz = _mm256_set1_ps(zp), vlo = _mm256_set1_ps(lo), vhi = _mm256_set1_ps(hi),
                     vm0 = _mm256_set1_ps(mult[0]);
        const __m256i voff = _mm256_set1_epi32(off);
        for (; j + 8 <= w; j += 8) {
            __m256i iv = _mm256_add_epi32(_mm256_loadu_si256((const __m256i*)(acc + j)), voff);
            if (add) iv = _mm256_add_epi32(iv, _mm256_loadu_si256((const __m256i*)(add + j)));
            __m256 f = _mm256_cvtepi32_ps(iv);
            f = _mm256_mul_ps(f, mst ? _mm256_loadu_ps(mult + j) : vm0);
            f = _mm256_round_ps(f, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
            f = _mm256_min_ps(_mm256_max_ps(_mm256_add_ps(f, vz), vlo), vhi);
            qg_store_q8(y + j, f, y_signed);
        }
    }
#endif
    for (; j < w; j++) {
        int32_t v = (int32_t)((uint32_t)acc[j] + (uint32_t)off + (add ? (uint32_t)add[j] : 0u));
        float r = rintf((float)v * mult[mst ? j : 0]) + zp;
        r = r > lo ? r : lo; r = r < hi ? r : hi;
        y[j] = y_signed ? (uint8_t)(int8_t)(int32_t)r : (uint8_t)(int32_t)r;
    }
}

/* ---------------------------------------------------------------- the GEMM with its epilogue
   Y[m, n] = C - zb[n] rs[m] - za[m] cs[n] + K za[m] zb[n] (uint32 arithmetic), za / zb with strides 0 or 1 (already
   shifted, see above). Output int32 (Yf and Yq NULL), float: Yf = float(acc) * scale[n * scale_stride] + bias[n], or
   8-bit (QLinearMatMul, Yq): Yq = qg_requant_add of acc + bias_i[n] (int32 or NULL) by the multipliers in scale. */
typedef struct {
    const uint8_t* Ap; int64_t lda4; const int32_t* rs;
    const uint8_t* Bp; const int32_t* cs;
    int64_t M, N, K, K4;
    const int32_t* za; int za_stride; const int32_t* zb; int zb_stride;
    int32_t* Yi; float* Yf; int64_t ldy;
    const float* scale; int scale_stride; const float* bias;
    uint8_t* Yq; const int32_t* bias_i; float yzp, qlo, qhi; int y_signed;
    int kern;
    int64_t nmb, nnb;
} qg_args;

/* fp-contract off: the float epilogue rounds as the unfused Cast, Mul and Add nodes do (a product, then a sum), never
   as one fused multiply-add (gcc contracts by default where the ISA has FMA) */
__attribute__((optimize("fp-contract=off")))
static void qg_item(void* ctx, Py_ssize_t item, int tid) {
    qg_args* a = (qg_args*)ctx;
    int64_t nb = item / a->nmb, mb = item % a->nmb;
    int64_t m0 = mb * QG_MB, m1 = m0 + QG_MB < a->M ? m0 + QG_MB : a->M;
    int64_t n0 = nb * QG_NB, n1 = n0 + QG_NB < a->N ? n0 + QG_NB : a->N;
    int np = (int)((n1 - n0 + QG_NR - 1) / QG_NR);
    int64_t pstride = QG_NR * a->K4 * 4;
    int32_t buf[QG_MB * QG_NB];
    const uint8_t* Bp = a->Bp + (n0 / QG_NR) * pstride;
    const uint8_t* Ap = a->Ap + m0 * a->lda4;
    int mr = (int)(m1 - m0);
    (void)tid;
#if QG_X86
    if (a->kern == QG_VNNI) qg_micro_vnni(Ap, a->lda4, Bp, pstride, a->K4, mr, np, buf, QG_NB);
    else
#endif
#if defined(__AVX2__)
    if (a->kern == QG_AVX2) qg_micro_avx2(Ap, a->lda4, Bp, pstride, a->K4, mr, np, buf, QG_NB);
    else
#endif
    qg_micro_generic(Ap, a->lda4, Bp, pstride, a->K4, mr, np, buf, QG_NB);
    /* the epilogue on locals (Python's -fno-strict-aliasing makes every a-> field a reload after a store), one loop
       per stride case so gcc vectorizes each: the zero-point correction in place in buf, then the float or int32
       output */
    const uint32_t K = (uint32_t)a->K;
    const int32_t* __restrict zbp = a->zb + (a->zb_stride ? n0 : 0);
    const int32_t* __restrict csp = a->cs + n0;
    const int zst = a->zb_stride;
    const uint32_t zb0 = (uint32_t)zbp[0];
    float* const Yf = a->Yf;
    int32_t* const Yi = a->Yi;
    const int64_t ldy = a->ldy, w = n1 - n0;
    const float* __restrict scp = (a->Yf || a->Yq) ? a->scale + (a->scale_stride ? n0 : 0) : NULL;
    uint8_t* const Yq = a->Yq;
    const int32_t* const bqp = a->bias_i ? a->bias_i + n0 : NULL;
    const int sst = a->scale_stride;
    const float* __restrict bp = a->bias ? a->bias + n0 : NULL;
    const int32_t* zap = a->za;
    const int zast = a->za_stride;
    const int32_t* rsp = a->rs;
    for (int64_t m = m0; m < m1; m++) {
        uint32_t* __restrict c = (uint32_t*)(buf + (m - m0) * QG_NB);
        const uint32_t za = (uint32_t)zap[m * zast], rs = (uint32_t)rsp[m];
        const uint32_t kza = K * za;
        if (zst) {
            for (int64_t j = 0; j < w; j++) {
                uint32_t zb = (uint32_t)zbp[j];
                c[j] = c[j] - zb * rs - za * (uint32_t)csp[j] + kza * zb;
            }
        } else {
            const uint32_t off = zb0 * rs - kza * zb0;
            for (int64_t j = 0; j < w; j++) c[j] = c[j] - off - za * (uint32_t)csp[j];
        }
        if (Yf) {
            float* __restrict y = Yf + m * ldy + n0;
            const int32_t* __restrict ci = (const int32_t*)c;
            if (sst) for (int64_t j = 0; j < w; j++) y[j] = (float)ci[j] * scp[j];
            else { const float s0 = scp[0]; for (int64_t j = 0; j < w; j++) y[j] = (float)ci[j] * s0; }
            if (bp) for (int64_t j = 0; j < w; j++) y[j] = y[j] + bp[j];
        } else if (Yq) {
            qg_requant_add((const int32_t*)c, bqp, 0, w, scp, sst, a->yzp, a->qlo, a->qhi, a->y_signed,
                           Yq + m * ldy + n0);
        } else {
            memcpy(Yi + m * ldy + n0, c, (size_t)w * 4);
        }
    }
}

/* ---------------------------------------------------------------- DynamicQuantizeLinear (ONNX): float -> u8 */
/* Range [min(0, min x), max(0, max x)] -> scale (hi - lo) / 255 (1 when equal), zp = rint(clamp(-lo / scale, 0, 255)),
   all float32, as the spec and onnxruntime. */
static int qg_dql_params(const float* x, int64_t n, float* scale, uint8_t* zp) {
    float lo = 0.f, hi = 0.f;
    int nan = 0;
    int64_t i0 = 0;
#if defined(__AVX512F__)
    if (n >= 16) {      /* min / max ignore a NaN as the scalar compares do (the NaN operand first: the other wins) */
        __m512 vlo = _mm512_setzero_ps(), vhi = _mm512_setzero_ps();
        __mmask16 bad = 0;
        for (; i0 + 16 <= n; i0 += 16) {
            __m512 v = _mm512_loadu_ps(x + i0);
            vlo = _mm512_min_ps(v, vlo);
            vhi = _mm512_max_ps(v, vhi);
            bad |= _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
        }
        lo = _mm512_reduce_min_ps(vlo);
        hi = _mm512_reduce_max_ps(vhi);
        nan = bad != 0;
    }
#elif defined(__AVX2__)
    if (n >= 8) {
        __m256 vlo = _mm256_setzero_ps(), vhi = _mm256_setzero_ps(), bad = _mm256_setzero_ps();
        for (; i0 + 8 <= n; i0 += 8) {
            __m256 v = _mm256_loadu_ps(x + i0);
            vlo = _mm256_min_ps(v, vlo);
            vhi = _mm256_max_ps(v, vhi);
            bad = _mm256_or_ps(bad, _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
        }
        float l8[8], h8[8];
        _mm256_storeu_ps(l8, vlo);
        _mm256_storeu_ps(h8, vhi);
        for (int j = 0; j < 8; j++) { lo = l8[j] < lo ? l8[j] : lo; hi = h8[j] > hi ? h8[j] : hi; }
        nan = _mm256_movemask_ps(bad) != 0;
    }
#endif
    for (int64_t i = i0; i < n; i++) { float v = x[i]; lo = v < lo ? v : lo; hi = v > hi ? v : hi; nan |= v != v; }
    float s = hi == lo ? 1.f : (hi - lo) / 255.f;
    float z = 0.f - lo / s;
    z = z > 0.f ? z : 0.f;
    z = z < 255.f ? z : 255.f;
    *scale = s;
    *zp = (uint8_t)nearbyintf(z);
    return nan;      /* 1: x holds a NaN (the parameters ignore it) */
}

/* y = saturate(rint(x / scale) + zp) (round half to even; NaN -> 0); optionally rows of K into a K4*4 padded buffer
   with the rows' sums (rs non-NULL). */
static void qg_quantize_rows(const float* x, int64_t M, int64_t K, float scale, uint8_t zp, uint8_t* y, int64_t ldy,
                             int32_t* rs) {
    float z = (float)zp;
    for (int64_t m = 0; m < M; m++) {
        const float* xr = x + m * K;
        uint8_t* yr = y + m * ldy;
        int32_t s = 0;
        int64_t k0 = 0;
#if defined(__AVX512F__)
        {   /* x / scale, round half to even (the current mode, as rintf), + zp, clamp (a NaN -> 0 as below) */
            const __m512 vs = _mm512_set1_ps(scale), vz = _mm512_set1_ps(z), v0 = _mm512_setzero_ps(),
                         v255 = _mm512_set1_ps(255.f);
            __m512i acc = _mm512_setzero_si512();
            for (; k0 + 16 <= K; k0 += 16) {
                __m512 r = _mm512_roundscale_ps(_mm512_div_ps(_mm512_loadu_ps(xr + k0), vs),
                                                _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
                r = _mm512_min_ps(_mm512_max_ps(_mm512_add_ps(r, vz), v0), v255);
                __m512i q = _mm512_cvtps_epi32(r);
                acc = _mm512_add_epi32(acc, q);
                _mm_storeu_si128((__m128i*)(yr + k0), _mm512_cvtepi32_epi8(q));
            }
            s = _mm512_reduce_add_epi32(acc);
        }
#elif defined(__AVX2__)
        {
            const __m256 vs = _mm256_set1_ps(scale), vz = _mm256_set1_ps(z), v0 = _mm256_setzero_ps(),
                         v255 = _mm256_set1_ps(255.f);
            __m256i acc = _mm256_setzero_si256();
            for (; k0 + 8 <= K; k0 += 8) {
                __m256 r = _mm256_round_ps(_mm256_div_ps(_mm256_loadu_ps(xr + k0), vs),
                                           _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
                r = _mm256_min_ps(_mm256_max_ps(_mm256_add_ps(r, vz), v0), v255);
                __m256i q = _mm256_cvtps_epi32(r);
                acc = _mm256_add_epi32(acc, q);
                __m128i p16 = _mm_packus_epi32(_mm256_castsi256_si128(q), _mm256_extracti128_si256(q, 1));
                _mm_storel_epi64((__m128i*)(yr + k0), _mm_packus_epi16(p16, p16));
            }
            int32_t t[8];
            _mm256_storeu_si256((__m256i*)t, acc);
            for (int j = 0; j < 8; j++) s += t[j];
        }
#endif
        for (int64_t k = k0; k < K; k++) {
            float r = rintf(xr[k] / scale) + z;
            r = r > 0.f ? r : 0.f;
            r = r < 255.f ? r : 255.f;
            uint8_t q = (uint8_t)(int32_t)r;
            yr[k] = q;
            s += q;
        }
        if (rs) {
            for (int64_t k = K; k < ldy; k++) yr[k] = 0;
            rs[m] = s;
        }
    }
}
#endif

/* ---------------------------------------------------------------- QuantizeLinear / DequantizeLinear, per tensor
   (QDQ graphs' activations): y = saturate(rint(x / scale) + zp) into int8 (is_signed) or uint8, a NaN giving the
   type's minimum (as onnxruntime and ops/quant/_common.py quantize_into); x = (q - zp) * scale, q - zp exact in
   float32. The same float32 operations, in the same order, as the numpy paths of ops/quant. */
/* round-half-even(x / scale) + zp clamped to [lo, hi], as float: the step quantize and quantize-dequantize share
   (so the fused Q -> DQ stays bit-identical to the two nodes). NaN: max gives lo. */
static inline float qg_qstep(float x, float scale, float zp, float lo, float hi) {
    float r = rintf(x / scale) + zp;
    r = r > lo ? r : lo;
    return r < hi ? r : hi;
}
#if defined(__AVX512F__)
static inline __m512 qg_qstep16(const float* x, __m512 vs, __m512 vz, __m512 vlo, __m512 vhi) {
    __m512 r = _mm512_roundscale_ps(_mm512_div_ps(_mm512_loadu_ps(x), vs), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    return _mm512_min_ps(_mm512_max_ps(_mm512_add_ps(r, vz), vlo), vhi);
}
#elif defined(__AVX2__)
static inline __m256 qg_qstep8(const float* x, __m256 vs, __m256 vz, __m256 vlo, __m256 vhi) {
    __m256 r = _mm256_round_ps(_mm256_div_ps(_mm256_loadu_ps(x), vs), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    return _mm256_min_ps(_mm256_max_ps(_mm256_add_ps(r, vz), vlo), vhi);
}
#endif

static void qg_quantize_tensor(const float* x, int64_t n, float scale, float zp, int is_signed, uint8_t* y) {
    const float lo = is_signed ? -128.f : 0.f, hi = is_signed ? 127.f : 255.f;
    int64_t i = 0;
#if defined(__AVX512F__)
    {
        const __m512 vs = _mm512_set1_ps(scale), vz = _mm512_set1_ps(zp), vlo = _mm512_set1_ps(lo),
                     vhi = _mm512_set1_ps(hi);
        for (; i + 16 <= n; i += 16) {
            qg_store_q16(y + i, qg_qstep16(x + i, vs, vz, vlo, vhi));
        }
    }
#elif defined(__AVX2__)
    {
        const __m256 vs = _mm256_set1_ps(scale), vz = _mm256_set1_ps(zp), vlo = _mm256_set1_ps(lo),
                     vhi = _mm256_set1_ps(hi);
        for (; i + 8 <= n; i += 8) qg_store_q8(y + i, qg_qstep8(x + i, vs, vz, vlo, vhi), is_signed);
    }
#endif
    for (; i < n; i++) y[i] = (uint8_t)(int32_t)qg_qstep(x[i], scale, zp, lo, hi);
}

static void qg_dequantize_tensor(const uint8_t* q, int64_t n, int is_signed, float scale, float zp, float* y) {
    if (is_signed) {
        const int8_t* s = (const int8_t*)q;
        for (int64_t i = 0; i < n; i++) y[i] = ((float)s[i] - zp) * scale;
    } else {
        for (int64_t i = 0; i < n; i++) y[i] = ((float)q[i] - zp) * scale;
    }
}

/* ---------------------------------------------------------------- QuantizeLinear -> DequantizeLinear, per tensor
   (a QDQ graph's pair between two float ops, fused by graph/passes/fuse_qdq_pair.py): y = (saturate(rint(x / scale)
   + zp) - zp) * scale, the float32 operations of qg_quantize_tensor then qg_dequantize_tensor in the same order, so
   bit-identical to the two nodes; lo / hi the 8-bit type's range. One pass, no 8-bit tensor in between. */
static void qg_qdq_tensor(const float* x, int64_t n, float scale, float zp, int is_signed, float* y) {
    const float lo = is_signed ? -128.f : 0.f, hi = is_signed ? 127.f : 255.f;
    int64_t i = 0;
#if defined(__AVX512F__)
    {
        const __m512 vs = _mm512_set1_ps(scale), vz = _mm512_set1_ps(zp), vlo = _mm512_set1_ps(lo),
                     vhi = _mm512_set1_ps(hi);
        for (; i + 16 <= n; i += 16) {
            __m512 r = qg_qstep16(x + i, vs, vz, vlo, vhi);
            _mm512_storeu_ps(y + i, _mm512_mul_ps(_mm512_sub_ps(r, vz), vs));
        }
    }
#elif defined(__AVX2__)
    {
        const __m256 vs = _mm256_set1_ps(scale), vz = _mm256_set1_ps(zp), vlo = _mm256_set1_ps(lo),
                     vhi = _mm256_set1_ps(hi);
        for (; i + 8 <= n; i += 8) {
            __m256 r = qg_qstep8(x + i, vs, vz, vlo, vhi);
            _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_sub_ps(r, vz), vs));
        }
    }
#endif
    for (; i < n; i++) y[i] = (qg_qstep(x[i], scale, zp, lo, hi) - zp) * scale;
}

/* ---------------------------------------------------------------- QLinearAdd (a folded DequantizeLinear x 2 -> Add
   -> QuantizeLinear, graph/passes/fuse_qdq_ops.py; com.onnxep QLinearAdd), per tensor, 8-bit a / b / y each int8 or
   uint8: y = saturate(rint(((a - za) * sa + (b - zb) * sb) / ys) + yz), the float32 operations of the two
   DequantizeLinear nodes, the Add and the QuantizeLinear in that order (no fused multiply-add), so bit-identical to
   the four nodes. b holds nb elements repeated along y (nb == n: the same shape; else b broadcast over y's leading
   dimensions); the caller puts the broadcast operand in b (the float add is commutative). */
#if defined(__AVX512F__)
static inline __m512 qg_deq16(const uint8_t* p, int s, __m512 z, __m512 sc) {
    __m128i v = _mm_loadu_si128((const __m128i*)p);
    __m512i w = s ? _mm512_cvtepi8_epi32(v) : _mm512_cvtepu8_epi32(v);
    return _mm512_mul_ps(_mm512_sub_ps(_mm512_cvtepi32_ps(w), z), sc);
}
#elif defined(__AVX2__)
static inline __m256 qg_deq8(const uint8_t* p, int s, __m256 z, __m256 sc) {
    __m128i v = _mm_loadl_epi64((const __m128i*)p);
    __m256i w = s ? _mm256_cvtepi8_epi32(v) : _mm256_cvtepu8_epi32(v);
    return _mm256_mul_ps(_mm256_sub_ps(_mm256_cvtepi32_ps(w), z), sc);
}
#endif

static inline float qg_deq1(const uint8_t* p, int s, float z, float sc) {
    return ((s ? (float)(int8_t)p[0] : (float)p[0]) - z) * sc;
}

__attribute__((optimize("fp-contract=off")))
static void qg_qadd_run(const uint8_t* a, int as, float sa, float za, const uint8_t* b, int bs, float sb, float zb,
                        int64_t n, float ys, float yz, int y_signed, uint8_t* y) {
    const float lo = y_signed ? -128.f : 0.f, hi = y_signed ? 127.f : 255.f;
    int64_t i = 0;
#if defined(__AVX512F__)
    {
        const __m512 vsa = _mm512_set1_ps(sa), vza = _mm512_set1_ps(za), vsb = _mm512_set1_ps(sb),
                     vzb = _mm512_set1_ps(zb), vys = _mm512_set1_ps(ys), vyz = _mm512_set1_ps(yz),
                     vlo = _mm512_set1_ps(lo), vhi = _mm512_set1_ps(hi);
        for (; i + 16 <= n; i += 16) {
            __m512 s = _mm512_add_ps(qg_deq16(a + i, as, vza, vsa), qg_deq16(b + i, bs, vzb, vsb));
            __m512 r = _mm512_roundscale_ps(_mm512_div_ps(s, vys), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
            qg_store_q16(y + i, _mm512_min_ps(_mm512_max_ps(_mm512_add_ps(r, vyz), vlo), vhi));
        }
    }
#elif defined(__AVX2__)
    {
        const __m256 vsa = _mm256_set1_ps(sa), vza = _mm256_set1_ps(za), vsb = _mm256_set1_ps(sb),
                     vzb = _mm256_set1_ps(zb), vys = _mm256_set1_ps(ys), vyz = _mm256_set1_ps(yz),
                     vlo = _mm256_set1_ps(lo), vhi = _mm256_set1_ps(hi);
        for (; i + 8 <= n; i += 8) {
            __m256 s = _mm256_add_ps(qg_deq8(a + i, as, vza, vsa), qg_deq8(b + i, bs, vzb, vsb));
            __m256 r = _mm256_round_ps(_mm256_div_ps(s, vys), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
            qg_store_q8(y + i, _mm256_min_ps(_mm256_max_ps(_mm256_add_ps(r, vyz), vlo), vhi), y_signed);
        }
    }
#endif
    for (; i < n; i++) {
        float s = qg_deq1(a + i, as, za, sa) + qg_deq1(b + i, bs, zb, sb);
        float r = qg_qstep(s, ys, yz, lo, hi);
        y[i] = y_signed ? (uint8_t)(int8_t)(int32_t)r : (uint8_t)(int32_t)r;
    }
}

/* elements [i0, i1) of y, b's index wrapping every nb */
static void qg_qadd_range(const uint8_t* a, int as, float sa, float za, const uint8_t* b, int bs, float sb, float zb,
                          int64_t nb, int64_t i0, int64_t i1, float ys, float yz, int y_signed, uint8_t* y) {
    int64_t i = i0;
    while (i < i1) {
        int64_t j = i % nb, len = nb - j < i1 - i ? nb - j : i1 - i;
        qg_qadd_run(a + i, as, sa, za, b + j, bs, sb, zb, len, ys, yz, y_signed, y + i);
        i += len;
    }
}
