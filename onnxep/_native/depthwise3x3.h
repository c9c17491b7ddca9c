/* onnxep native code, included by onnxep/_k_conv.pxi (compiled once per ISA; see setup.py). */
#ifndef ONNXEP_NATIVE_DEPTHWISE3X3_H
#define ONNXEP_NATIVE_DEPTHWISE3X3_H

/* onnxep_dw3x3_plane: one output plane of a 2-D depthwise 3x3 conv (dilation 1, column stride 1 or 2, any row
   stride and pads), AVX-512: 16 output columns per vector; kernel columns that fall outside the input row are
   masked-load zeros (masked lanes are never read, so no padded copy). Each output is bias, then the taps in
   (b, e) order, one FMA each -- the order of the generic loops, so results agree to rounding. */
#if defined(__AVX512F__)
#define ONNXEP_DW3_SIMD 1
static inline __mmask16 onnxep_lanes(Py_ssize_t lo, Py_ssize_t hi)   /* lanes l with lo <= l < hi */
{
    if (lo < 0) lo = 0;
    if (hi > 16) hi = 16;
    if (hi <= lo) return (__mmask16)0;
    return (__mmask16)(((1u << hi) - 1u) & ~((1u << lo) - 1u));
}
static void onnxep_dw3x3_rows(const float* x, Py_ssize_t H, Py_ssize_t W, const float* w, float bias, float* y,
                              Py_ssize_t Wo, Py_ssize_t sh, Py_ssize_t sw, Py_ssize_t ph, Py_ssize_t pw, int relu,
                              Py_ssize_t oh0, Py_ssize_t oh1)   /* output rows oh0 <= oh < oh1 */
{
    __m512 wv[9], vb = _mm512_set1_ps(bias), z = _mm512_setzero_ps();
    const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    const __m512i odd = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
    const __m512i next = _mm512_setr_epi32(1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16);
    Py_ssize_t oh, ow0, ih, c0;
    int b, e, i;
    for (i = 0; i < 9; i++) wv[i] = _mm512_set1_ps(w[i]);
    for (oh = oh0; oh < oh1; oh++) {
        const float* rows[3];
        __m512 wr[9];
        int nb = 0;
        for (b = 0; b < 3; b++) {     /* the kernel rows inside x, and their weights */
            ih = oh * sh - ph + b;
            if (ih >= 0 && ih < H) {
                rows[nb] = x + ih * W;
                for (e = 0; e < 3; e++) wr[nb * 3 + e] = wv[b * 3 + e];
                nb++;
            }
        }
        float* yr = y + oh * Wo;
        for (ow0 = 0; ow0 < Wo; ow0 += 16) {
            __mmask16 mo = onnxep_lanes(0, Wo - ow0);
            __m512 acc = vb;
            if (sw == 1) {
                c0 = ow0 - pw;
                __mmask16 m0 = onnxep_lanes(-c0, W - c0), m1 = onnxep_lanes(-c0 - 1, W - c0 - 1);
                __mmask16 m2 = onnxep_lanes(-c0 - 2, W - c0 - 2);
                #define ONNXEP_DW3_ROW1(R) { const float* r = rows[R] + c0;                     acc = _mm512_fmadd_ps(wr[R * 3], _mm512_maskz_loadu_ps(m0, r), acc);                     acc = _mm512_fmadd_ps(wr[R * 3 + 1], _mm512_maskz_loadu_ps(m1, r + 1), acc);                     acc = _mm512_fmadd_ps(wr[R * 3 + 2], _mm512_maskz_loadu_ps(m2, r + 2), acc); }
                #define ONNXEP_DW3_ROW1F(R) { const float* r = rows[R] + c0;                     acc = _mm512_fmadd_ps(wr[R * 3], _mm512_loadu_ps(r), acc);                     acc = _mm512_fmadd_ps(wr[R * 3 + 1], _mm512_loadu_ps(r + 1), acc);                     acc = _mm512_fmadd_ps(wr[R * 3 + 2], _mm512_loadu_ps(r + 2), acc); }
                if (nb == 3 && (m0 & m1 & m2) == (__mmask16)0xFFFF) {   /* inside the row: plain loads */
                    ONNXEP_DW3_ROW1F(0) ONNXEP_DW3_ROW1F(1) ONNXEP_DW3_ROW1F(2)
                } else if (nb == 3) { ONNXEP_DW3_ROW1(0) ONNXEP_DW3_ROW1(1) ONNXEP_DW3_ROW1(2) }
                else for (i = 0; i < nb; i++) ONNXEP_DW3_ROW1(i)
                #undef ONNXEP_DW3_ROW1
                #undef ONNXEP_DW3_ROW1F
            } else {   /* sw == 2: x[c0 + 2l + e] from the even / odd lanes of 32 (+1) consecutive inputs */
                c0 = 2 * ow0 - pw;
                __mmask16 m0 = onnxep_lanes(-c0, W - c0), m1 = onnxep_lanes(-c0 - 16, W - c0 - 16);
                __mmask16 m2 = onnxep_lanes(-c0 - 32, W - c0 - 32) & (__mmask16)1;
                #define ONNXEP_DW3_ROW2(R) { const float* r = rows[R] + c0;                     __m512 v0 = _mm512_maskz_loadu_ps(m0, r), v1 = _mm512_maskz_loadu_ps(m1, r + 16);                     __m512 v2 = _mm512_maskz_loadu_ps(m2, r + 32);                     __m512 t0 = _mm512_permutex2var_ps(v0, even, v1);                     __m512 t1 = _mm512_permutex2var_ps(v0, odd, v1);                     __m512 t2 = _mm512_permutex2var_ps(t0, next, v2);                     acc = _mm512_fmadd_ps(wr[R * 3], t0, acc);                     acc = _mm512_fmadd_ps(wr[R * 3 + 1], t1, acc);                     acc = _mm512_fmadd_ps(wr[R * 3 + 2], t2, acc); }
                if (nb == 3) { ONNXEP_DW3_ROW2(0) ONNXEP_DW3_ROW2(1) ONNXEP_DW3_ROW2(2) }
                else for (i = 0; i < nb; i++) ONNXEP_DW3_ROW2(i)
                #undef ONNXEP_DW3_ROW2
            }
            if (relu) acc = _mm512_max_ps(acc, z);
            _mm512_mask_storeu_ps(yr + ow0, mo, acc);
        }
    }
}
/* Stride 1, 'same' size (pads 1, Ho = H, Wo = W): output rows oh .. oh + 3, four at a time. The six input rows of
   a group are each loaded once per 16 columns, as the three column-shifted vectors of kernel columns 0..2 (masked
   loads: zeros left of column 0 and right of column W-1, never a read outside x), and each feeds up to three of
   the four outputs: 4.5 loads per output vector instead of 9 (the one-row loop is bound by its misaligned loads).
   Taps are added in (b, e) order after the bias, as everywhere; a kernel row on the padding is left out. */
#define ONNXEP_DW3_LD(J) const float* r##J = x + (oh - 1 + J) * W + c0;     __m512 v##J##0 = _mm512_maskz_loadu_ps(ml, r##J - 1), v##J##1 = _mm512_maskz_loadu_ps(mc, r##J);     __m512 v##J##2 = _mm512_maskz_loadu_ps(mr, r##J + 1);
#define ONNXEP_DW3_TAPS(A, J, B) A = _mm512_fmadd_ps(wv[3 * B], v##J##0, A);     A = _mm512_fmadd_ps(wv[3 * B + 1], v##J##1, A); A = _mm512_fmadd_ps(wv[3 * B + 2], v##J##2, A);
static inline __attribute__((always_inline)) void onnxep_dw3x3_g4(
        const float* x, Py_ssize_t W, const __m512* wv, __m512 vb, float* y, Py_ssize_t oh, int relu,
        const int top, const int bottom)   /* top: input row oh - 1 is padding; bottom: row oh + 4 is */
{
    const __m512 z = _mm512_setzero_ps();
    Py_ssize_t c0;
    for (c0 = 0; c0 < W; c0 += 16) {
        __mmask16 ml = onnxep_lanes(1 - c0, W - c0 + 1), mc = onnxep_lanes(-c0, W - c0);
        __mmask16 mr = onnxep_lanes(-c0 - 1, W - c0 - 1);
        __m512 a0 = vb, a1 = vb, a2 = vb, a3 = vb;
        if (!top) { ONNXEP_DW3_LD(0) ONNXEP_DW3_TAPS(a0, 0, 0) }
        ONNXEP_DW3_LD(1) ONNXEP_DW3_TAPS(a0, 1, 1) ONNXEP_DW3_TAPS(a1, 1, 0)
        ONNXEP_DW3_LD(2) ONNXEP_DW3_TAPS(a0, 2, 2) ONNXEP_DW3_TAPS(a1, 2, 1) ONNXEP_DW3_TAPS(a2, 2, 0)
        ONNXEP_DW3_LD(3) ONNXEP_DW3_TAPS(a1, 3, 2) ONNXEP_DW3_TAPS(a2, 3, 1) ONNXEP_DW3_TAPS(a3, 3, 0)
        ONNXEP_DW3_LD(4) ONNXEP_DW3_TAPS(a2, 4, 2) ONNXEP_DW3_TAPS(a3, 4, 1)
        if (!bottom) { ONNXEP_DW3_LD(5) ONNXEP_DW3_TAPS(a3, 5, 2) }
        if (relu) {
            a0 = _mm512_max_ps(a0, z); a1 = _mm512_max_ps(a1, z);
            a2 = _mm512_max_ps(a2, z); a3 = _mm512_max_ps(a3, z);
        }
        float* yo = y + oh * W + c0;
        _mm512_mask_storeu_ps(yo, mc, a0);
        _mm512_mask_storeu_ps(yo + W, mc, a1);
        _mm512_mask_storeu_ps(yo + 2 * W, mc, a2);
        _mm512_mask_storeu_ps(yo + 3 * W, mc, a3);
    }
}
/* The whole 'same' stride-1 plane (H >= 5) in groups of four rows: the first group (rows 0-3) without the padding
   row above, the last (rows H-4 .. H-1) without the one below, the ones between at 4, 8, ..., each moved up to
   H - 5 at most so that it reads inside x. Groups may overlap (a row is then computed twice, the same way): no
   row is left to the one-row loop, whose single chain of nine FMAs per vector made its rows ~3.5x as costly. */
static void onnxep_dw3x3_same(const float* x, Py_ssize_t H, Py_ssize_t W, const float* w, float bias, float* y,
                              int relu)
{
    __m512 wv[9], vb = _mm512_set1_ps(bias);
    Py_ssize_t oh;
    int i;
    for (i = 0; i < 9; i++) wv[i] = _mm512_set1_ps(w[i]);
    onnxep_dw3x3_g4(x, W, wv, vb, y, 0, relu, 1, 0);
    for (oh = 4; oh < H - 4; oh += 4)
        onnxep_dw3x3_g4(x, W, wv, vb, y, oh < H - 5 ? oh : H - 5, relu, 0, 0);
    onnxep_dw3x3_g4(x, W, wv, vb, y, H - 4, relu, 0, 1);
}
#undef ONNXEP_DW3_LD
#undef ONNXEP_DW3_TAPS
/* Other geometries at stride 1 or 2 in both directions (any pads and output size), also four output rows per
   pass: the input rows of a group (6 at stride 1, 9 at stride 2) are each loaded once per 16 output columns and
   feed every output row that reads them, so four sums are in flight instead of one (a lone sum of nine dependent
   FMAs waits on the FMA latency: one row at a time, stride 2 ran at ~20% of the FMA rate). Stride 2 loads 33
   consecutive inputs per row and splits them into the even / odd / next-even lanes. Kernel columns outside the
   row are masked loads (mask 0 reads nothing: zeros); an edge group (edge = 1: a kernel row outside x, or fewer
   than four output rows left) also masks whole rows outside x and stores only its R rows. Each sum is the bias,
   then the taps in (b, e) order. */
#define ONNXEP_DW3_GROW(J) { const float* r = x + (ih0 + J) * W + c;     __mmask16 k = edge ? rm[J] : (__mmask16)0xFFFF;     if (s == 1) {         v0 = _mm512_maskz_loadu_ps(m0 & k, r); v1 = _mm512_maskz_loadu_ps(m1 & k, r + 1);         v2 = _mm512_maskz_loadu_ps(m2 & k, r + 2);     } else {         __m512 u0 = _mm512_maskz_loadu_ps(m0 & k, r), u1 = _mm512_maskz_loadu_ps(m1 & k, r + 16);         __m512 u2 = _mm512_maskz_loadu_ps(m2 & k, r + 32);         v0 = _mm512_permutex2var_ps(u0, even, u1); v1 = _mm512_permutex2var_ps(u0, odd, u1);         v2 = _mm512_permutex2var_ps(v0, next, u2);     } }
#define ONNXEP_DW3_GTAPS(A, B) A = _mm512_fmadd_ps(wv[3 * B], v0, A);     A = _mm512_fmadd_ps(wv[3 * B + 1], v1, A); A = _mm512_fmadd_ps(wv[3 * B + 2], v2, A);
static inline __attribute__((always_inline)) void onnxep_dw3x3_group(
        const float* x, Py_ssize_t H, Py_ssize_t W, const __m512* wv, __m512 vb, float* y, Py_ssize_t Wo,
        Py_ssize_t ph, Py_ssize_t pw, int relu, Py_ssize_t oh, int R, const int s, const int edge)
{
    const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    const __m512i odd = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
    const __m512i next = _mm512_setr_epi32(1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16);
    const __m512 z = _mm512_setzero_ps();
    Py_ssize_t ih0 = oh * s - ph, ow0, c;
    __mmask16 rm[9];
    int J;
    if (edge)
        for (J = 0; J < 9; J++) rm[J] = (ih0 + J >= 0 && ih0 + J < H) ? (__mmask16)0xFFFF : (__mmask16)0;
    for (ow0 = 0; ow0 < Wo; ow0 += 16) {
        __mmask16 m0, m1, m2, mo = onnxep_lanes(0, Wo - ow0);
        __m512 a0 = vb, a1 = vb, a2 = vb, a3 = vb, v0, v1, v2;
        if (s == 1) {
            c = ow0 - pw;
            m0 = onnxep_lanes(-c, W - c); m1 = onnxep_lanes(-c - 1, W - c - 1);
            m2 = onnxep_lanes(-c - 2, W - c - 2);
            ONNXEP_DW3_GROW(0) ONNXEP_DW3_GTAPS(a0, 0)
            ONNXEP_DW3_GROW(1) ONNXEP_DW3_GTAPS(a0, 1) ONNXEP_DW3_GTAPS(a1, 0)
            ONNXEP_DW3_GROW(2) ONNXEP_DW3_GTAPS(a0, 2) ONNXEP_DW3_GTAPS(a1, 1) ONNXEP_DW3_GTAPS(a2, 0)
            ONNXEP_DW3_GROW(3) ONNXEP_DW3_GTAPS(a1, 2) ONNXEP_DW3_GTAPS(a2, 1) ONNXEP_DW3_GTAPS(a3, 0)
            ONNXEP_DW3_GROW(4) ONNXEP_DW3_GTAPS(a2, 2) ONNXEP_DW3_GTAPS(a3, 1)
            ONNXEP_DW3_GROW(5) ONNXEP_DW3_GTAPS(a3, 2)
        } else {
            c = 2 * ow0 - pw;
            m0 = onnxep_lanes(-c, W - c); m1 = onnxep_lanes(-c - 16, W - c - 16);
            m2 = onnxep_lanes(-c - 32, W - c - 32) & (__mmask16)1;
            ONNXEP_DW3_GROW(0) ONNXEP_DW3_GTAPS(a0, 0)
            ONNXEP_DW3_GROW(1) ONNXEP_DW3_GTAPS(a0, 1)
            ONNXEP_DW3_GROW(2) ONNXEP_DW3_GTAPS(a0, 2) ONNXEP_DW3_GTAPS(a1, 0)
            ONNXEP_DW3_GROW(3) ONNXEP_DW3_GTAPS(a1, 1)
            ONNXEP_DW3_GROW(4) ONNXEP_DW3_GTAPS(a1, 2) ONNXEP_DW3_GTAPS(a2, 0)
            ONNXEP_DW3_GROW(5) ONNXEP_DW3_GTAPS(a2, 1)
            ONNXEP_DW3_GROW(6) ONNXEP_DW3_GTAPS(a2, 2) ONNXEP_DW3_GTAPS(a3, 0)
            ONNXEP_DW3_GROW(7) ONNXEP_DW3_GTAPS(a3, 1)
            ONNXEP_DW3_GROW(8) ONNXEP_DW3_GTAPS(a3, 2)
        }
        if (relu) {
            a0 = _mm512_max_ps(a0, z); a1 = _mm512_max_ps(a1, z);
            a2 = _mm512_max_ps(a2, z); a3 = _mm512_max_ps(a3, z);
        }
        float* yo = y + oh * Wo + ow0;
        _mm512_mask_storeu_ps(yo, mo, a0);
        if (R > 1) _mm512_mask_storeu_ps(yo + Wo, mo, a1);
        if (R > 2) _mm512_mask_storeu_ps(yo + 2 * Wo, mo, a2);
        if (R > 3) _mm512_mask_storeu_ps(yo + 3 * Wo, mo, a3);
    }
}
#undef ONNXEP_DW3_GROW
#undef ONNXEP_DW3_GTAPS
static void onnxep_dw3x3_groups(const float* x, Py_ssize_t H, Py_ssize_t W, const float* w, float bias, float* y,
                                Py_ssize_t Ho, Py_ssize_t Wo, Py_ssize_t s, Py_ssize_t ph, Py_ssize_t pw, int relu)
{
    __m512 wv[9], vb = _mm512_set1_ps(bias);
    Py_ssize_t oh, ih0, rows = s == 1 ? 6 : 9;
    int i, R;
    for (i = 0; i < 9; i++) wv[i] = _mm512_set1_ps(w[i]);
    for (oh = 0; oh < Ho; oh += 4) {
        R = Ho - oh < 4 ? (int)(Ho - oh) : 4;
        ih0 = oh * s - ph;
        if (R == 4 && ih0 >= 0 && ih0 + rows <= H) {
            if (s == 1) onnxep_dw3x3_group(x, H, W, wv, vb, y, Wo, ph, pw, relu, oh, 4, 1, 0);
            else onnxep_dw3x3_group(x, H, W, wv, vb, y, Wo, ph, pw, relu, oh, 4, 2, 0);
        } else {
            if (s == 1) onnxep_dw3x3_group(x, H, W, wv, vb, y, Wo, ph, pw, relu, oh, R, 1, 1);
            else onnxep_dw3x3_group(x, H, W, wv, vb, y, Wo, ph, pw, relu, oh, R, 2, 1);
        }
    }
}
static void onnxep_dw3x3_plane(const float* x, Py_ssize_t H, Py_ssize_t W, const float* w, float bias, float* y,
                               Py_ssize_t Ho, Py_ssize_t Wo, Py_ssize_t sh, Py_ssize_t sw, Py_ssize_t ph,
                               Py_ssize_t pw, int relu)
{
    if (sh == 1 && sw == 1 && ph == 1 && pw == 1 && Ho == H && Wo == W && H >= 5) {
        onnxep_dw3x3_same(x, H, W, w, bias, y, relu);
    } else if (sh == sw) {
        onnxep_dw3x3_groups(x, H, W, w, bias, y, Ho, Wo, sh, ph, pw, relu);
    } else {
        onnxep_dw3x3_rows(x, H, W, w, bias, y, Wo, sh, sw, ph, pw, relu, 0, Ho);
    }
}
#else
#define ONNXEP_DW3_SIMD 0
static inline void onnxep_dw3x3_plane(const float* x, Py_ssize_t H, Py_ssize_t W, const float* w, float bias,
                                      float* y, Py_ssize_t Ho, Py_ssize_t Wo, Py_ssize_t sh, Py_ssize_t sw,
                                      Py_ssize_t ph, Py_ssize_t pw, int relu) { }
#endif

#endif /* ONNXEP_NATIVE_DEPTHWISE3X3_H */
