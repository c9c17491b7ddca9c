/* onnxep native code, included by onnxep/_k_transpose.pxi (compiled once per ISA; see setup.py). */
#ifndef ONNXEP_NATIVE_TRANSPOSE_H
#define ONNXEP_NATIVE_TRANSPOSE_H

#include <stdint.h>
#include <string.h>
#if defined(__AVX2__)
#include <immintrin.h>
#define ONNXEP_TR_SIMD 1
#else
#define ONNXEP_TR_SIMD 0
#endif

/* dst[a*ldb + b] := src[b*lda + a] for a < na, b < nb, elements of type T (portable). The inner loop runs along
   the longer side: contiguous stores when nb >= na, contiguous loads otherwise (tiles of a dim of 3 channels). */
#define ONNXEP_TR_SCALAR(T, src, lda, dst, ldb, na, nb) do {                    \
    const T* s_ = (const T*)(src); T* d_ = (T*)(dst);                           \
    if ((nb) >= (na)) {                                                         \
        for (Py_ssize_t a_ = 0; a_ < (na); a_++)                                \
            for (Py_ssize_t b_ = 0; b_ < (nb); b_++)                            \
                d_[a_ * (ldb) + b_] = s_[b_ * (lda) + a_];                      \
    } else {                                                                    \
        for (Py_ssize_t b_ = 0; b_ < (nb); b_++)                                \
            for (Py_ssize_t a_ = 0; a_ < (na); a_++)                            \
                d_[a_ * (ldb) + b_] = s_[b_ * (lda) + a_];                      \
    }                                                                           \
} while (0)

#if ONNXEP_TR_SIMD
/* Register transposes: load M rows of M elements from src (row b at src + b*lda), store M columns to dst (column
   a at dst + a*ldb). Moves and shuffles only, so every bit pattern (NaN payloads included) is copied as is. */
static inline void onnxep_tr8x8_32(const float* s, Py_ssize_t lda, float* d, Py_ssize_t ldb)
{
    __m256 r0 = _mm256_loadu_ps(s), r1 = _mm256_loadu_ps(s + lda), r2 = _mm256_loadu_ps(s + 2 * lda),
           r3 = _mm256_loadu_ps(s + 3 * lda), r4 = _mm256_loadu_ps(s + 4 * lda), r5 = _mm256_loadu_ps(s + 5 * lda),
           r6 = _mm256_loadu_ps(s + 6 * lda), r7 = _mm256_loadu_ps(s + 7 * lda);
    __m256 t0 = _mm256_unpacklo_ps(r0, r1), t1 = _mm256_unpackhi_ps(r0, r1);
    __m256 t2 = _mm256_unpacklo_ps(r2, r3), t3 = _mm256_unpackhi_ps(r2, r3);
    __m256 t4 = _mm256_unpacklo_ps(r4, r5), t5 = _mm256_unpackhi_ps(r4, r5);
    __m256 t6 = _mm256_unpacklo_ps(r6, r7), t7 = _mm256_unpackhi_ps(r6, r7);
    __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xEE);
    __m256 u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xEE);
    __m256 u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xEE);
    __m256 u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xEE);
    _mm256_storeu_ps(d, _mm256_permute2f128_ps(u0, u4, 0x20));
    _mm256_storeu_ps(d + ldb, _mm256_permute2f128_ps(u1, u5, 0x20));
    _mm256_storeu_ps(d + 2 * ldb, _mm256_permute2f128_ps(u2, u6, 0x20));
    _mm256_storeu_ps(d + 3 * ldb, _mm256_permute2f128_ps(u3, u7, 0x20));
    _mm256_storeu_ps(d + 4 * ldb, _mm256_permute2f128_ps(u0, u4, 0x31));
    _mm256_storeu_ps(d + 5 * ldb, _mm256_permute2f128_ps(u1, u5, 0x31));
    _mm256_storeu_ps(d + 6 * ldb, _mm256_permute2f128_ps(u2, u6, 0x31));
    _mm256_storeu_ps(d + 7 * ldb, _mm256_permute2f128_ps(u3, u7, 0x31));
}

#if defined(__AVX512F__)
/* 16 x 16 floats in zmm registers: every load and store is one whole 64-byte line (when rows are aligned). After
   the in-lane unpack + shuffle, u[4j + c] holds, in 128-bit lane L, column 4L + c of rows 4j..4j+3; two rounds of
   shuffle_f32x4 gather the four lanes of a column. */
static inline void onnxep_tr16x16_32(const float* s, Py_ssize_t lda, float* d, Py_ssize_t ldb)
{
    __m512 r[16], t[16], u[16];
    int i, c;
    for (i = 0; i < 16; i++) r[i] = _mm512_loadu_ps(s + i * lda);
    for (i = 0; i < 8; i++) {
        t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    for (i = 0; i < 4; i++) {
        u[4 * i + 0] = _mm512_shuffle_ps(t[4 * i], t[4 * i + 2], 0x44);
        u[4 * i + 1] = _mm512_shuffle_ps(t[4 * i], t[4 * i + 2], 0xEE);
        u[4 * i + 2] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0x44);
        u[4 * i + 3] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0xEE);
    }
    for (c = 0; c < 4; c++) {
        __m512 v0 = _mm512_shuffle_f32x4(u[c], u[4 + c], 0x88);
        __m512 w0 = _mm512_shuffle_f32x4(u[8 + c], u[12 + c], 0x88);
        __m512 v1 = _mm512_shuffle_f32x4(u[c], u[4 + c], 0xDD);
        __m512 w1 = _mm512_shuffle_f32x4(u[8 + c], u[12 + c], 0xDD);
        _mm512_storeu_ps(d + c * ldb, _mm512_shuffle_f32x4(v0, w0, 0x88));
        _mm512_storeu_ps(d + (8 + c) * ldb, _mm512_shuffle_f32x4(v0, w0, 0xDD));
        _mm512_storeu_ps(d + (4 + c) * ldb, _mm512_shuffle_f32x4(v1, w1, 0x88));
        _mm512_storeu_ps(d + (12 + c) * ldb, _mm512_shuffle_f32x4(v1, w1, 0xDD));
    }
}
#define ONNXEP_TR_M32 16
#define ONNXEP_TR_K32 onnxep_tr16x16_32
#else
#define ONNXEP_TR_M32 8
#define ONNXEP_TR_K32 onnxep_tr8x8_32
#endif

static inline void onnxep_tr4x4_64(const double* s, Py_ssize_t lda, double* d, Py_ssize_t ldb)
{
    __m256d r0 = _mm256_loadu_pd(s), r1 = _mm256_loadu_pd(s + lda), r2 = _mm256_loadu_pd(s + 2 * lda),
            r3 = _mm256_loadu_pd(s + 3 * lda);
    __m256d t0 = _mm256_unpacklo_pd(r0, r1), t1 = _mm256_unpackhi_pd(r0, r1);
    __m256d t2 = _mm256_unpacklo_pd(r2, r3), t3 = _mm256_unpackhi_pd(r2, r3);
    _mm256_storeu_pd(d, _mm256_permute2f128_pd(t0, t2, 0x20));
    _mm256_storeu_pd(d + ldb, _mm256_permute2f128_pd(t1, t3, 0x20));
    _mm256_storeu_pd(d + 2 * ldb, _mm256_permute2f128_pd(t0, t2, 0x31));
    _mm256_storeu_pd(d + 3 * ldb, _mm256_permute2f128_pd(t1, t3, 0x31));
}

static inline void onnxep_tr8x8_16(const uint16_t* s, Py_ssize_t lda, uint16_t* d, Py_ssize_t ldb)
{
    __m128i r[8], t[8], u[8];
    int i;
    for (i = 0; i < 8; i++) r[i] = _mm_loadu_si128((const __m128i*)(s + i * lda));
    for (i = 0; i < 4; i++) {
        t[2 * i] = _mm_unpacklo_epi16(r[2 * i], r[2 * i + 1]);      /* cols 0..3 of rows 2i, 2i+1 */
        t[2 * i + 1] = _mm_unpackhi_epi16(r[2 * i], r[2 * i + 1]);  /* cols 4..7 */
    }
    for (i = 0; i < 2; i++) {   /* rows 4i..4i+3: u[4i + m] holds cols 2m, 2m+1 */
        u[4 * i + 0] = _mm_unpacklo_epi32(t[4 * i], t[4 * i + 2]);
        u[4 * i + 1] = _mm_unpackhi_epi32(t[4 * i], t[4 * i + 2]);
        u[4 * i + 2] = _mm_unpacklo_epi32(t[4 * i + 1], t[4 * i + 3]);
        u[4 * i + 3] = _mm_unpackhi_epi32(t[4 * i + 1], t[4 * i + 3]);
    }
    for (i = 0; i < 4; i++) {
        _mm_storeu_si128((__m128i*)(d + (2 * i) * ldb), _mm_unpacklo_epi64(u[i], u[4 + i]));
        _mm_storeu_si128((__m128i*)(d + (2 * i + 1) * ldb), _mm_unpackhi_epi64(u[i], u[4 + i]));
    }
}

static inline void onnxep_tr16x16_8(const uint8_t* s, Py_ssize_t lda, uint8_t* d, Py_ssize_t ldb)
{
    __m128i r[16], a[16], b[16], c[16];
    int i, j, m;
    for (i = 0; i < 16; i++) r[i] = _mm_loadu_si128((const __m128i*)(s + i * lda));
    for (i = 0; i < 8; i++) {   /* a[2i]: cols 0..7 of rows 2i, 2i+1 (byte pairs); a[2i+1]: cols 8..15 */
        a[2 * i] = _mm_unpacklo_epi8(r[2 * i], r[2 * i + 1]);
        a[2 * i + 1] = _mm_unpackhi_epi8(r[2 * i], r[2 * i + 1]);
    }
    for (j = 0; j < 4; j++) {   /* rows 4j..4j+3: b[4j + m] holds cols 4m..4m+3 */
        b[4 * j + 0] = _mm_unpacklo_epi16(a[4 * j], a[4 * j + 2]);
        b[4 * j + 1] = _mm_unpackhi_epi16(a[4 * j], a[4 * j + 2]);
        b[4 * j + 2] = _mm_unpacklo_epi16(a[4 * j + 1], a[4 * j + 3]);
        b[4 * j + 3] = _mm_unpackhi_epi16(a[4 * j + 1], a[4 * j + 3]);
    }
    for (j = 0; j < 2; j++)     /* rows 8j..8j+7: c[8j + p] holds cols 2p, 2p+1 */
        for (m = 0; m < 4; m++) {
            c[8 * j + 2 * m] = _mm_unpacklo_epi32(b[8 * j + m], b[8 * j + 4 + m]);
            c[8 * j + 2 * m + 1] = _mm_unpackhi_epi32(b[8 * j + m], b[8 * j + 4 + m]);
        }
    for (i = 0; i < 8; i++) {
        _mm_storeu_si128((__m128i*)(d + (2 * i) * ldb), _mm_unpacklo_epi64(c[i], c[8 + i]));
        _mm_storeu_si128((__m128i*)(d + (2 * i + 1) * ldb), _mm_unpackhi_epi64(c[i], c[8 + i]));
    }
}
#endif

/* One tile: dst[a*ldb + b] := src[b*lda + a] for a < na, b < nb (lda, ldb in elements of esz bytes). Full M x M
   blocks go through the register transposes, the ragged right and bottom edges through the scalar loop. */
#if ONNXEP_TR_SIMD
#define ONNXEP_TR_TILE_BODY(T, M, KERNEL) do {                                                              \
    const T* s = (const T*)src; T* d = (T*)dst;                                                             \
    Py_ssize_t fa = na - na % (M), fb = nb - nb % (M), a0, b0;                                              \
    for (a0 = 0; a0 < fa; a0 += (M))                                                                        \
        for (b0 = 0; b0 < fb; b0 += (M))                                                                    \
            KERNEL(s + b0 * lda + a0, lda, d + a0 * ldb + b0, ldb);                                         \
    if (fb < nb) ONNXEP_TR_SCALAR(T, s + fb * lda, lda, d + fb, ldb, fa, nb - fb);                          \
    if (fa < na) ONNXEP_TR_SCALAR(T, s + fa, lda, d + fa * ldb, ldb, na - fa, nb);                          \
} while (0)
#endif

/* Narrow tiles (a side of at most 4 elements: 3-channel images): walk the long side with the short one unrolled
   (NA / NB compile-time), so every step moves a few elements between a few contiguous streams. Kept scalar:
   gcc's AVX-512 vectorisation of these strided loops ran 2x slower than the scalar code on the dev machine. */
#define ONNXEP_TR_NARROW_DEF(T)                                                                                 \
static __attribute__((noinline, optimize("no-tree-vectorize"))) void                                        \
onnxep_tr_narrow_##T(const T* s, Py_ssize_t lda, T* d, Py_ssize_t ldb, Py_ssize_t na, Py_ssize_t nb)         \
{                                                                                                           \
    Py_ssize_t a, b;                                                                                        \
    int k;                                                                                                  \
    if (na <= nb) {                                                                                         \
        switch (na) {   /* input rows of na elements, each spread over na output rows */                   \
        case 1: for (b = 0; b < nb; b++) d[b] = s[b * lda]; break;                                          \
        case 2: for (b = 0; b < nb; b++) for (k = 0; k < 2; k++) d[k * ldb + b] = s[b * lda + k]; break;    \
        case 3: for (b = 0; b < nb; b++) for (k = 0; k < 3; k++) d[k * ldb + b] = s[b * lda + k]; break;    \
        default: for (b = 0; b < nb; b++) for (k = 0; k < 4; k++) d[k * ldb + b] = s[b * lda + k]; break;   \
        }                                                                                                   \
    } else {                                                                                                \
        switch (nb) {   /* output rows of nb elements, each gathered from nb input rows */                  \
        case 1: for (a = 0; a < na; a++) d[a * ldb] = s[a]; break;                                          \
        case 2: for (a = 0; a < na; a++) for (k = 0; k < 2; k++) d[a * ldb + k] = s[k * lda + a]; break;    \
        case 3: for (a = 0; a < na; a++) for (k = 0; k < 3; k++) d[a * ldb + k] = s[k * lda + a]; break;    \
        default: for (a = 0; a < na; a++) for (k = 0; k < 4; k++) d[a * ldb + k] = s[k * lda + a]; break;   \
        }                                                                                                   \
    }                                                                                                       \
}
ONNXEP_TR_NARROW_DEF(uint8_t)
ONNXEP_TR_NARROW_DEF(uint16_t)
ONNXEP_TR_NARROW_DEF(uint32_t)
ONNXEP_TR_NARROW_DEF(uint64_t)

static void onnxep_tr_tile(int esz, const uint8_t* src, Py_ssize_t lda, uint8_t* dst, Py_ssize_t ldb,
                           Py_ssize_t na, Py_ssize_t nb)
{
    if (na <= 4 || nb <= 4) {
        switch (esz) {
        case 1: onnxep_tr_narrow_uint8_t(src, lda, dst, ldb, na, nb); break;
        case 2: onnxep_tr_narrow_uint16_t((const uint16_t*)src, lda, (uint16_t*)dst, ldb, na, nb); break;
        case 4: onnxep_tr_narrow_uint32_t((const uint32_t*)src, lda, (uint32_t*)dst, ldb, na, nb); break;
        default: onnxep_tr_narrow_uint64_t((const uint64_t*)src, lda, (uint64_t*)dst, ldb, na, nb); break;
        }
        return;
    }
#if ONNXEP_TR_SIMD
    switch (esz) {
    case 1: ONNXEP_TR_TILE_BODY(uint8_t, 16, onnxep_tr16x16_8); break;
    case 2: ONNXEP_TR_TILE_BODY(uint16_t, 8, onnxep_tr8x8_16); break;
    case 4: ONNXEP_TR_TILE_BODY(float, ONNXEP_TR_M32, ONNXEP_TR_K32); break;
    default: ONNXEP_TR_TILE_BODY(double, 4, onnxep_tr4x4_64); break;
    }
#else
    switch (esz) {
    case 1: ONNXEP_TR_SCALAR(uint8_t, src, lda, dst, ldb, na, nb); break;
    case 2: ONNXEP_TR_SCALAR(uint16_t, src, lda, dst, ldb, na, nb); break;
    case 4: ONNXEP_TR_SCALAR(uint32_t, src, lda, dst, ldb, na, nb); break;
    default: ONNXEP_TR_SCALAR(uint64_t, src, lda, dst, ldb, na, nb); break;
    }
#endif
}

#endif /* ONNXEP_NATIVE_TRANSPOSE_H */
