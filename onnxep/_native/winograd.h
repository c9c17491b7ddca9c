/* onnxep native code, included by onnxep/_k_winograd.pxi (compiled once per ISA; see setup.py). */
#ifndef ONNXEP_NATIVE_WINOGRAD_H
#define ONNXEP_NATIVE_WINOGRAD_H

/* v[xi*vs + c] := (B^T d B)[xi] for c < C, d[i] = p[i][c] (i = row*4 + col of the 4x4 input patch; a pointer to
   zeros for a pixel outside x). B^T = [[1,0,-1,0],[0,1,1,0],[0,-1,1,0],[0,1,0,-1]]. */
static void onnxep_wino_in(const float* const* p, Py_ssize_t C, float* __restrict__ v, Py_ssize_t vs)
{
    const float* __restrict__ p0 = p[0];  const float* __restrict__ p1 = p[1];
    const float* __restrict__ p2 = p[2];  const float* __restrict__ p3 = p[3];
    const float* __restrict__ p4 = p[4];  const float* __restrict__ p5 = p[5];
    const float* __restrict__ p6 = p[6];  const float* __restrict__ p7 = p[7];
    const float* __restrict__ p8 = p[8];  const float* __restrict__ p9 = p[9];
    const float* __restrict__ p10 = p[10]; const float* __restrict__ p11 = p[11];
    const float* __restrict__ p12 = p[12]; const float* __restrict__ p13 = p[13];
    const float* __restrict__ p14 = p[14]; const float* __restrict__ p15 = p[15];
    Py_ssize_t c;
    #pragma GCC ivdep
    for (c = 0; c < C; c++) {
        /* rows: t0 = d0 - d2, t1 = d1 + d2, t2 = d2 - d1, t3 = d1 - d3 */
        float t00 = p0[c] - p8[c], t01 = p1[c] - p9[c], t02 = p2[c] - p10[c], t03 = p3[c] - p11[c];
        float t10 = p4[c] + p8[c], t11 = p5[c] + p9[c], t12 = p6[c] + p10[c], t13 = p7[c] + p11[c];
        float t20 = p8[c] - p4[c], t21 = p9[c] - p5[c], t22 = p10[c] - p6[c], t23 = p11[c] - p7[c];
        float t30 = p4[c] - p12[c], t31 = p5[c] - p13[c], t32 = p6[c] - p14[c], t33 = p7[c] - p15[c];
        /* columns, the same combination */
        v[0 * vs + c] = t00 - t02;  v[1 * vs + c] = t01 + t02;  v[2 * vs + c] = t02 - t01;  v[3 * vs + c] = t01 - t03;
        v[4 * vs + c] = t10 - t12;  v[5 * vs + c] = t11 + t12;  v[6 * vs + c] = t12 - t11;  v[7 * vs + c] = t11 - t13;
        v[8 * vs + c] = t20 - t22;  v[9 * vs + c] = t21 + t22;  v[10 * vs + c] = t22 - t21; v[11 * vs + c] = t21 - t23;
        v[12 * vs + c] = t30 - t32; v[13 * vs + c] = t31 + t32; v[14 * vs + c] = t32 - t31; v[15 * vs + c] = t31 - t33;
    }
}

/* The output side works on WL channels at a time in a vector of GCC's vector extension (a zmm in the AVX-512
   build, a ymm in the AVX2 one), the transformed values held in registers rather than staged through arrays; a
   panel's last nr % WL channels take a scalar loop with the same arithmetic in the same order. A tile's outputs
   go straight to y (onnxep_wino_dst). */
#if defined(__AVX512F__)
#define ONNXEP_WL 16
#elif defined(__AVX__)
#define ONNXEP_WL 8
#else
#define ONNXEP_WL 4
#endif
typedef float onnxep_wv __attribute__((vector_size(ONNXEP_WL * 4)));
typedef int onnxep_wvi __attribute__((vector_size(ONNXEP_WL * 4)));
typedef float onnxep_wvu __attribute__((vector_size(ONNXEP_WL * 4), aligned(4), may_alias));
#define ONNXEP_WLD(p) (*(const onnxep_wvu*)(p))

/* Where a tile's outputs go: output (a, b) of the tile (row a, column b) at y + a * yrow + b * ypx (the panel's
   first channel), its residual at r + a * rrow + b * rpx (r: NULL for none); only the vh x vw inside the image. */
typedef struct {
    float* y;
    const float* r;
    Py_ssize_t yrow, ypx, rrow, rpx;
    int vh, vw;
} onnxep_wino_dst;

/* y[0 .. WL) := act(o + bias + r) (bias, r: NULL for none); Relu, Clip and LeakyRelu in the vector (NaN handled
   as onnxep_act1 does), the other activations by onnxep_act_row over the stored values. */
static inline onnxep_wvi onnxep_wino_bits(float f)      /* f's bit pattern in every lane */
{
    int b;
    memcpy(&b, &f, sizeof b);
    return (onnxep_wvi){0} + b;
}
static inline __attribute__((always_inline)) void onnxep_wino_put(onnxep_wv o, float* y, const float* r,
                                                                  const float* bias, const onnxep_act* act)
{
    int kind = act ? act->kind : ONNXEP_ACT_NONE;
    onnxep_wvi mk, t;
    if (bias) o += ONNXEP_WLD(bias);
    if (r) o += ONNXEP_WLD(r);
    switch (kind) {
    case ONNXEP_ACT_NONE: break;
    case ONNXEP_ACT_RELU: o = (onnxep_wv)((onnxep_wvi)o & (o > 0.0f)); break;
    case ONNXEP_ACT_CLIP:                        /* lanes below a take a, then those above b take b (NaN stays) */
        t = onnxep_wino_bits(act->a);
        mk = o < act->a;
        o = (onnxep_wv)(((onnxep_wvi)o & ~mk) | (t & mk));
        t = onnxep_wino_bits(act->b);
        mk = o > act->b;
        o = (onnxep_wv)(((onnxep_wvi)o & ~mk) | (t & mk));
        break;
    case ONNXEP_ACT_LEAKY_RELU:
        t = (onnxep_wvi)(o * act->a);
        mk = o >= 0.0f;
        o = (onnxep_wv)(((onnxep_wvi)o & mk) | (t & ~mk));
        break;
    default:
        *(onnxep_wvu*)y = o;
        onnxep_act_row(act, y, ONNXEP_WL);
        return;
    }
    *(onnxep_wvu*)y = o;
}
static inline float onnxep_wino_put1(float o, const float* r, const float* bias, const onnxep_act* act)
{
    if (bias) o += *bias;
    if (r) o += *r;
    return act ? onnxep_act1(act, o) : o;
}
/* plane xi of the GEMM output m at channel j, and output (a, b) of the tile at channels j .. (in the functions
   below: m, ms, d, j, bias, act in scope) */
#define ONNXEP_W_LDV(xi) ONNXEP_WLD(m + (xi) * ms + j)
#define ONNXEP_W_LDS(xi) m[(xi) * ms + j]
#define ONNXEP_WPUT_V(a, b, v) onnxep_wino_put(v, d->y + (a) * d->yrow + (b) * d->ypx + j,         d->r ? d->r + (a) * d->rrow + (b) * d->rpx + j : NULL, bias ? bias + j : NULL, act)
#define ONNXEP_WPUT_S(a, b, v) d->y[(a) * d->yrow + (b) * d->ypx + j] = onnxep_wino_put1(v,         d->r ? d->r + (a) * d->rrow + (b) * d->rpx + j : NULL, bias ? bias + j : NULL, act)

/* F(2x2, 3x3)'s output transform of one tile for nr <= NR channels, then the epilogue: o = A^T m A (m[xi] =
   m[xi*ms + j], A^T = [[1,1,1,0],[0,1,-1,-1]]). */
#define ONNXEP_W2_OUT(T, LD, PUT) do {         T s00 = LD(0) + LD(4) + LD(8), s01 = LD(1) + LD(5) + LD(9);         T s02 = LD(2) + LD(6) + LD(10), s03 = LD(3) + LD(7) + LD(11);         T s10 = LD(4) - LD(8) - LD(12), s11 = LD(5) - LD(9) - LD(13);         T s12 = LD(6) - LD(10) - LD(14), s13 = LD(7) - LD(11) - LD(15);         PUT(0, 0, s00 + s01 + s02);         if (d->vw > 1) PUT(0, 1, s01 - s02 - s03);         if (d->vh > 1) {             PUT(1, 0, s10 + s11 + s12);             if (d->vw > 1) PUT(1, 1, s11 - s12 - s13);         } } while (0)
static void onnxep_wino_out(const float* __restrict__ m, Py_ssize_t ms, Py_ssize_t nr, const onnxep_wino_dst* d,
                            const float* bias, const onnxep_act* act)
{
    Py_ssize_t j;
    for (j = 0; j + ONNXEP_WL <= nr; j += ONNXEP_WL)
        ONNXEP_W2_OUT(onnxep_wv, ONNXEP_W_LDV, ONNXEP_WPUT_V);
    for (; j < nr; j++)
        ONNXEP_W2_OUT(float, ONNXEP_W_LDS, ONNXEP_WPUT_S);
}

/* F(4x4, 3x3): the same over 6x6 input patches and 4x4 output tiles, with the interpolation points 0, +-1, +-2
   (Lavin & Gray's matrices):
       B^T = [[4,0,-5,0,1,0], [0,-4,-4,1,1,0], [0,4,-4,-1,1,0], [0,-2,-1,2,1,0], [0,2,-1,-2,1,0], [0,4,0,-5,0,1]]
       A^T = [[1,1,1,1,1,0], [0,1,-1,2,-2,0], [0,1,1,4,4,0], [0,1,-1,8,-8,1]]
   onnxep_wino4_in: v[xi*vs + c] := (B^T d B)[xi] (xi = row*6 + col, p[i]: the 36 patch pixels, row-major), the
   channels in blocks of ONNXEP_W4_CB through a small buffer (columns first, then rows). */
#define ONNXEP_W4_CB 64
/* the weight transforms' G, row-major: F(2x2, 3x3)'s (4 x 3) and F(4x4, 3x3)'s (6 x 3) */
static const double onnxep_wino_g2[12] = {1, 0, 0, .5, .5, .5, .5, -.5, .5, 0, 0, 1};
static const double onnxep_wino_g4[18] = {.25, 0, 0, -1 / 6., -1 / 6., -1 / 6., -1 / 6., 1 / 6., -1 / 6.,
                                          1 / 24., 1 / 12., 1 / 6., 1 / 24., -1 / 12., 1 / 6., 0, 0, 1};
#define ONNXEP_BT6(x0, x1, x2, x3, x4, x5, Y) do {         float s12_ = (x1) + (x2), d12_ = (x1) - (x2), d42_ = (x4) - (x2), d31_ = (x3) - (x1);         Y(0, 4.0f * (x0) - 5.0f * (x2) + (x4)); Y(1, ((x3) + (x4)) - 4.0f * s12_);         Y(2, ((x4) - (x3)) + 4.0f * d12_); Y(3, d42_ + 2.0f * d31_); Y(4, d42_ - 2.0f * d31_);         Y(5, 4.0f * (x1) - 5.0f * (x3) + (x5)); } while (0)
static void onnxep_wino4_in(const float* const* p, Py_ssize_t C, float* __restrict__ v, Py_ssize_t vs)
{
    float t[36][ONNXEP_W4_CB];
    Py_ssize_t c0, c, n;
    int i, j;
    for (c0 = 0; c0 < C; c0 += ONNXEP_W4_CB) {
        n = C - c0 < ONNXEP_W4_CB ? C - c0 : ONNXEP_W4_CB;
        for (j = 0; j < 6; j++) {        /* column j: t[i*6 + j] = (B^T d)[i][j] */
            const float* __restrict__ q0 = p[j] + c0;      const float* __restrict__ q1 = p[6 + j] + c0;
            const float* __restrict__ q2 = p[12 + j] + c0; const float* __restrict__ q3 = p[18 + j] + c0;
            const float* __restrict__ q4 = p[24 + j] + c0; const float* __restrict__ q5 = p[30 + j] + c0;
            #define ONNXEP_W4_T(i, val) t[(i) * 6 + j][c] = (val)
            #pragma GCC ivdep
            for (c = 0; c < n; c++)
                ONNXEP_BT6(q0[c], q1[c], q2[c], q3[c], q4[c], q5[c], ONNXEP_W4_T);
            #undef ONNXEP_W4_T
        }
        for (i = 0; i < 6; i++) {        /* row i: v[i*6 + k] = (B^T d B)[i][k] */
            float* __restrict__ o = v + i * 6 * vs + c0;
            const float* r = t[i * 6];
            #define ONNXEP_W4_V(k, val) o[(k) * vs + c] = (val)
            #pragma GCC ivdep
            for (c = 0; c < n; c++)
                ONNXEP_BT6(r[c], r[ONNXEP_W4_CB + c], r[2 * ONNXEP_W4_CB + c], r[3 * ONNXEP_W4_CB + c],
                           r[4 * ONNXEP_W4_CB + c], r[5 * ONNXEP_W4_CB + c], ONNXEP_W4_V);
            #undef ONNXEP_W4_V
        }
    }
}
/* F(4x4, 3x3)'s output transform of one tile (o = A^T m A, m as in onnxep_wino_out over 36 planes), then the
   epilogue: columns first (sak = (A^T m)[a][k], 24 values), then output row a from sa0 .. sa5. */
#define ONNXEP_AT6(x0, x1, x2, x3, x4, x5, T, y0, y1, y2, y3)         T s12_ = (x1) + (x2), d12_ = (x1) - (x2), s34_ = (x3) + (x4), d34_ = (x3) - (x4);         y0 = (x0) + s12_ + s34_; y1 = d12_ + 2.0f * d34_; y2 = s12_ + 4.0f * s34_; y3 = d12_ + 8.0f * d34_ + (x5)
#define ONNXEP_W4_COL(T, LD, k) {         ONNXEP_AT6(LD(k), LD(6 + k), LD(12 + k), LD(18 + k), LD(24 + k), LD(30 + k), T,                    s0##k, s1##k, s2##k, s3##k); }
#define ONNXEP_W4_ROW(T, PUT, a) if (d->vh > a) {         T o0, o1, o2, o3;         ONNXEP_AT6(s##a##0, s##a##1, s##a##2, s##a##3, s##a##4, s##a##5, T, o0, o1, o2, o3);         PUT(a, 0, o0);         if (d->vw > 1) PUT(a, 1, o1);         if (d->vw > 2) PUT(a, 2, o2);         if (d->vw > 3) PUT(a, 3, o3); }
#define ONNXEP_W4_OUT(T, LD, PUT) do {         T s00, s01, s02, s03, s04, s05, s10, s11, s12, s13, s14, s15;         T s20, s21, s22, s23, s24, s25, s30, s31, s32, s33, s34, s35;         ONNXEP_W4_COL(T, LD, 0) ONNXEP_W4_COL(T, LD, 1) ONNXEP_W4_COL(T, LD, 2)         ONNXEP_W4_COL(T, LD, 3) ONNXEP_W4_COL(T, LD, 4) ONNXEP_W4_COL(T, LD, 5)         ONNXEP_W4_ROW(T, PUT, 0) ONNXEP_W4_ROW(T, PUT, 1) ONNXEP_W4_ROW(T, PUT, 2) ONNXEP_W4_ROW(T, PUT, 3)     } while (0)
static void onnxep_wino4_out(const float* __restrict__ m, Py_ssize_t ms, Py_ssize_t nr, const onnxep_wino_dst* d,
                             const float* bias, const onnxep_act* act)
{
    Py_ssize_t j;
    for (j = 0; j + ONNXEP_WL <= nr; j += ONNXEP_WL)
        ONNXEP_W4_OUT(onnxep_wv, ONNXEP_W_LDV, ONNXEP_WPUT_V);
    for (; j < nr; j++)
        ONNXEP_W4_OUT(float, ONNXEP_W_LDS, ONNXEP_WPUT_S);
}

#endif /* ONNXEP_NATIVE_WINOGRAD_H */
