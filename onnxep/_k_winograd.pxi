# 3x3 stride-1 convolution over channel-last (NHWC) activations by Winograd's minimal filtering, F(m x m, 3x3) for
# m = 2 and m = 4 (Lavin & Gray, "Fast Algorithms for Convolutional Neural Networks", 2015):
#
#     Y(m x m tile) = A^T [ (G g G^T) (.) (B^T d B) ] A      d: the tile's (m+2)x(m+2) input patch, g: a 3x3 filter
#
# (m+2)^2 products per m x m outputs instead of 9 m^2 (F(2x2): 16 per 4, F(4x4): 36 per 16): each position xi of the
# transformed patch is one GEMM
#     M_xi (tiles x Cout) = V_xi (tiles x Cin) @ U_xi (Cin x Cout),   U_xi = (G g G^T)[xi] over all (Cin, Cout)
# U (the pre-packed weight: one packed GEMM B operand per position, sgemm_pack_b_raw's layout, one after another) is
# made once by conv_wino_pack_weight. Per block of tiles a thread transforms the input patches into V (positions x
# tiles x Cin, channels innermost, in its own workspace), multiplies V_xi by U_xi with the direct-path micro-kernel (A
# read in place: a V row is one tile's channels), one weight panel (NR output channels) at a time into M (positions x
# tiles x NR), and transforms M back into the m x m outputs of those channels with bias, residual and activation (the
# epilogue). F(2x2)'s transforms only add and subtract (and halve, in G); F(4x4)'s scale by up to 8 (interpolation
# points 0, +-1, +-2), so its rounding error is larger: tests/kernels/test_conv_winograd.py bounds both against a
# float64 oracle.


cdef extern from *:
    """
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
       as onnxep_act1 does), the other activations by onnxep_act1 over the stored values. */
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
        default: {
            int l;
            *(onnxep_wvu*)y = o;
            for (l = 0; l < ONNXEP_WL; l++) y[l] = onnxep_act1(act, y[l]);
            return; }
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
    #define ONNXEP_WPUT_V(a, b, v) onnxep_wino_put(v, d->y + (a) * d->yrow + (b) * d->ypx + j, \
            d->r ? d->r + (a) * d->rrow + (b) * d->rpx + j : NULL, bias ? bias + j : NULL, act)
    #define ONNXEP_WPUT_S(a, b, v) d->y[(a) * d->yrow + (b) * d->ypx + j] = onnxep_wino_put1(v, \
            d->r ? d->r + (a) * d->rrow + (b) * d->rpx + j : NULL, bias ? bias + j : NULL, act)

    /* F(2x2, 3x3)'s output transform of one tile for nr <= NR channels, then the epilogue: o = A^T m A (m[xi] =
       m[xi*ms + j], A^T = [[1,1,1,0],[0,1,-1,-1]]). */
    #define ONNXEP_W2_OUT(T, LD, PUT) do { \
            T s00 = LD(0) + LD(4) + LD(8), s01 = LD(1) + LD(5) + LD(9); \
            T s02 = LD(2) + LD(6) + LD(10), s03 = LD(3) + LD(7) + LD(11); \
            T s10 = LD(4) - LD(8) - LD(12), s11 = LD(5) - LD(9) - LD(13); \
            T s12 = LD(6) - LD(10) - LD(14), s13 = LD(7) - LD(11) - LD(15); \
            PUT(0, 0, s00 + s01 + s02); \
            if (d->vw > 1) PUT(0, 1, s01 - s02 - s03); \
            if (d->vh > 1) { \
                PUT(1, 0, s10 + s11 + s12); \
                if (d->vw > 1) PUT(1, 1, s11 - s12 - s13); \
            } } while (0)
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
    #define ONNXEP_BT6(x0, x1, x2, x3, x4, x5, Y) do { \
            float s12_ = (x1) + (x2), d12_ = (x1) - (x2), d42_ = (x4) - (x2), d31_ = (x3) - (x1); \
            Y(0, 4.0f * (x0) - 5.0f * (x2) + (x4)); Y(1, ((x3) + (x4)) - 4.0f * s12_); \
            Y(2, ((x4) - (x3)) + 4.0f * d12_); Y(3, d42_ + 2.0f * d31_); Y(4, d42_ - 2.0f * d31_); \
            Y(5, 4.0f * (x1) - 5.0f * (x3) + (x5)); } while (0)
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
    #define ONNXEP_AT6(x0, x1, x2, x3, x4, x5, T, y0, y1, y2, y3) \
            T s12_ = (x1) + (x2), d12_ = (x1) - (x2), s34_ = (x3) + (x4), d34_ = (x3) - (x4); \
            y0 = (x0) + s12_ + s34_; y1 = d12_ + 2.0f * d34_; y2 = s12_ + 4.0f * s34_; y3 = d12_ + 8.0f * d34_ + (x5)
    #define ONNXEP_W4_COL(T, LD, k) { \
            ONNXEP_AT6(LD(k), LD(6 + k), LD(12 + k), LD(18 + k), LD(24 + k), LD(30 + k), T, \
                       s0##k, s1##k, s2##k, s3##k); }
    #define ONNXEP_W4_ROW(T, PUT, a) if (d->vh > a) { \
            T o0, o1, o2, o3; \
            ONNXEP_AT6(s##a##0, s##a##1, s##a##2, s##a##3, s##a##4, s##a##5, T, o0, o1, o2, o3); \
            PUT(a, 0, o0); \
            if (d->vw > 1) PUT(a, 1, o1); \
            if (d->vw > 2) PUT(a, 2, o2); \
            if (d->vw > 3) PUT(a, 3, o3); }
    #define ONNXEP_W4_OUT(T, LD, PUT) do { \
            T s00, s01, s02, s03, s04, s05, s10, s11, s12, s13, s14, s15; \
            T s20, s21, s22, s23, s24, s25, s30, s31, s32, s33, s34, s35; \
            ONNXEP_W4_COL(T, LD, 0) ONNXEP_W4_COL(T, LD, 1) ONNXEP_W4_COL(T, LD, 2) \
            ONNXEP_W4_COL(T, LD, 3) ONNXEP_W4_COL(T, LD, 4) ONNXEP_W4_COL(T, LD, 5) \
            ONNXEP_W4_ROW(T, PUT, 0) ONNXEP_W4_ROW(T, PUT, 1) ONNXEP_W4_ROW(T, PUT, 2) ONNXEP_W4_ROW(T, PUT, 3) \
        } while (0)
    static void onnxep_wino4_out(const float* __restrict__ m, Py_ssize_t ms, Py_ssize_t nr, const onnxep_wino_dst* d,
                                 const float* bias, const onnxep_act* act)
    {
        Py_ssize_t j;
        for (j = 0; j + ONNXEP_WL <= nr; j += ONNXEP_WL)
            ONNXEP_W4_OUT(onnxep_wv, ONNXEP_W_LDV, ONNXEP_WPUT_V);
        for (; j < nr; j++)
            ONNXEP_W4_OUT(float, ONNXEP_W_LDS, ONNXEP_WPUT_S);
    }
    """
    ctypedef struct WinoDst "onnxep_wino_dst":
        float* y
        const float* r
        Py_ssize_t yrow, ypx, rrow, rpx
        int vh, vw
    void wino_in "onnxep_wino_in"(const float* const* p, Py_ssize_t C, float* v, Py_ssize_t vs) noexcept nogil
    void wino_out "onnxep_wino_out"(const float* m, Py_ssize_t ms, Py_ssize_t nr, const WinoDst* d,
                                    const float* bias, const Act* act) noexcept nogil
    const double* WINO_G2 "onnxep_wino_g2"
    const double* WINO_G4 "onnxep_wino_g4"
    void wino4_in "onnxep_wino4_in"(const float* const* p, Py_ssize_t C, float* v, Py_ssize_t vs) noexcept nogil
    void wino4_out "onnxep_wino4_out"(const float* m, Py_ssize_t ms, Py_ssize_t nr, const WinoDst* d,
                                      const float* bias, const Act* act) noexcept nogil


cdef enum:
    WINO_MAX_C = 63 * SGEMM_KC    # input channels of a winograd conv: one run per K block, at most 63 of them
    WINO_V_FLOATS = 65536     # a thread's V block (planes x tiles x Cin) aims at 256 KB (L2: 1 MB here)
    WINO_MAX_TILES = 60       # at most this many tiles per block (5 micro-kernel strips)
    WINO_MIN_TILES = 12       # at least this many when blocks are cut smaller to give the threads work


def wino_applies(kernel, strides, dilations, Py_ssize_t group, Py_ssize_t cin):
    """Whether conv_nhwc_f32's winograd paths take this conv (SIMD variants: the micro-kernel is the direct path's)."""
    return bool(SGEMM_SIMD) and tuple(kernel) == (3, 3) and tuple(strides) == (1, 1) and tuple(dilations) == (1, 1) \
        and group == 1 and 0 <= cin <= WINO_MAX_C


cdef inline Py_ssize_t _wino_planes(Py_ssize_t m) except -1:
    """Transformed positions of F(m x m, 3x3): (m + 2)^2 (16 for m = 2, 36 for m = 4)."""
    if m != 2 and m != 4:
        raise ValueError(f"winograd tile m must be 2 (F(2x2, 3x3)) or 4 (F(4x4, 3x3)), got {m}")
    return (m + 2) * (m + 2)


def conv_wino_pack_weight_size(Py_ssize_t cout, Py_ssize_t cin, Py_ssize_t m=2):
    """float32 elements of a 3x3 conv weight (cout, cin, 3, 3) packed for conv_nhwc_f32's F(m x m, 3x3) path."""
    if cout < 1 or cin < 0:
        raise ValueError(f"conv_wino_pack_weight_size: bad cout={cout}, cin={cin}")
    return _wino_planes(m) * sgemm_pack_b_len(cin, cout)


def conv_wino_pack_weight(const float[:, :, :, ::1] w, float[::1] out, Py_ssize_t m=2):
    """out := U = G g G^T of every 3x3 filter g of w (cout, cin, 3, 3), in double then rounded once (G: WINO_G2 for
    m = 2, WINO_G4 for m = 4): for each of the (m + 2)^2 positions xi, the cin x cout matrix U_xi packed by
    sgemm_pack_b_raw, one after another."""
    cdef Py_ssize_t cout = w.shape[0], cin = w.shape[1], blen, o, c, r, q, xi, planes = _wino_planes(m)
    cdef Py_ssize_t al = m + 2
    cdef const double* G = WINO_G2 if m == 2 else WINO_G4
    cdef double g0, g1, g2
    cdef float* wt           # wt[(c*9 + e)*cout + o] = w[o, c, e // 3, e % 3]: W transposed, filters side by side
    cdef double* tt          # tt[r*3 + q][o] = (G g)[r][q] of one input channel's filters
    cdef const float* f0
    cdef const float* f1
    cdef const float* f2
    cdef const double* s0
    cdef const double* s1
    cdef const double* s2
    cdef Py_ssize_t i0, j0, i, j, rows
    cdef double* dt
    cdef float* du
    cdef float* u
    if w.shape[2] != 3 or w.shape[3] != 3 or cout < 1:
        raise ValueError(f"conv_wino_pack_weight: w must be (cout >= 1, cin, 3, 3), got {tuple(w.shape)}")
    blen = sgemm_pack_b_len(cin, cout)
    if out.shape[0] != planes * blen:
        raise ValueError(f"conv_wino_pack_weight: out has {out.shape[0]} elements, expected {planes * blen}")
    if cin == 0:
        return
    cdef const float* wp = &w[0, 0, 0, 0]
    rows = cin * 9
    u = <float*>malloc(planes * cin * cout * sizeof(float))
    wt = <float*>malloc(rows * cout * sizeof(float))
    tt = <double*>malloc(3 * al * cout * sizeof(double))
    if u == NULL or wt == NULL or tt == NULL:
        free(u)
        free(wt)
        free(tt)
        raise MemoryError("conv_wino_pack_weight: cannot allocate the transformed weight")
    try:
        with nogil:
            for i0 in range(0, cout, 32):       # wt := W (cout x cin*9) transposed, in 32 x 32 tiles
                for j0 in range(0, rows, 32):
                    for i in range(i0, min(i0 + 32, cout)):
                        for j in range(j0, min(j0 + 32, rows)):
                            wt[j * cout + i] = wp[i * rows + j]
            # The same sums in the same order as G g G^T filter by filter, run over all cout filters of one input
            # channel at once: the inner loops are over o, contiguous, and vectorise; u[xi][c][o] is written in rows.
            for c in range(cin):
                for r in range(al):             # t = G g (al x 3)
                    g0, g1, g2 = G[r * 3], G[r * 3 + 1], G[r * 3 + 2]
                    for q in range(3):
                        f0, f1, f2 = wt + (c * 9 + q) * cout, wt + (c * 9 + 3 + q) * cout, wt + (c * 9 + 6 + q) * cout
                        dt = tt + (r * 3 + q) * cout
                        for o in range(cout):
                            dt[o] = g0 * f0[o] + g1 * f1[o] + g2 * f2[o]
                for r in range(al):             # u = t G^T (al x al)
                    s0, s1, s2 = tt + (r * 3) * cout, tt + (r * 3 + 1) * cout, tt + (r * 3 + 2) * cout
                    for q in range(al):
                        g0, g1, g2 = G[q * 3], G[q * 3 + 1], G[q * 3 + 2]
                        du = u + ((r * al + q) * cin + c) * cout
                        for o in range(cout):
                            du[o] = <float>(s0[o] * g0 + s1[o] * g1 + s2[o] * g2)
            for xi in range(planes):
                sgemm_pack_b_raw(cin, cout, u + xi * cin * cout, cout, 1, &out[xi * blen])
    finally:
        free(u)
        free(wt)
        free(tt)


cdef struct WinoJob:
    const float* x
    const float* wp
    const float* bias
    const float* res
    float* y
    const Act* act
    const float* zero         # C zeros: the input of padding pixels
    const DRun* runs          # the reduction over Cin as runs (one per K block of the packed U_xi)
    Py_ssize_t nruns
    Py_ssize_t m, al, planes  # output tile m x m, input patch al x al (al = m + 2), planes = al^2
    Py_ssize_t H, W, C, K, Ho, Wo, ph, pw, th, tw, ntiles, T, nslabs, pslab, blen, ldy
    float* work               # per thread: V (planes vs floats apart) then M (planes ms floats apart)
    Py_ssize_t wlen, vs, ms


cdef inline Py_ssize_t _wino_tiles_per_block(Py_ssize_t C, Py_ssize_t planes, Py_ssize_t ntiles,
                                             int nth) noexcept nogil:
    """Tiles per work item: as many as keep V within WINO_V_FLOATS (whole micro-kernel strips, at most
    WINO_MAX_TILES), but no more than give every thread DCONV_ITEMS_PER_THREAD blocks, down to WINO_MIN_TILES: more
    blocks rather than slabs of weight panels, which redo the block's input transform (SqueezeNet's 55x55 16 -> 64
    F(4x4) at 2 threads: 196 tiles in 8 blocks instead of 4 blocks x 2 slabs, 0.70x the time)."""
    cdef Py_ssize_t t = WINO_V_FLOATS // (planes * max(C, <Py_ssize_t>1))
    cdef Py_ssize_t want = (ntiles + <Py_ssize_t>nth * DCONV_ITEMS_PER_THREAD - 1) // (nth * DCONV_ITEMS_PER_THREAD)
    t = max(<Py_ssize_t>SGEMM_MR, min(t // SGEMM_MR * SGEMM_MR, <Py_ssize_t>WINO_MAX_TILES))
    return min(t, max(want, <Py_ssize_t>WINO_MIN_TILES))


cdef inline Py_ssize_t _odd_lines(Py_ssize_t n) noexcept nogil:
    """n floats rounded up to an odd number of 64-byte lines: the planes of V (and of M) that the transforms read or
    write together then start in different L1 sets. At a multiple of 4 KiB apart (T*C = 24*128 for DenseNet's 56x56
    128 -> 32 convs) they all fell in one set and the input transform ran 15% slower."""
    n = _round_up(n, 16)
    return n + 16 if (n // 16) % 2 == 0 else n


cdef inline Py_ssize_t _wino_tile(const WinoJob* j, Py_ssize_t ti, Py_ssize_t* ty, Py_ssize_t* tx) noexcept nogil:
    """Tile ti (flat over images, tile rows, tile columns): its image, returned, and its tile row and column."""
    cdef Py_ssize_t HWt = j.th * j.tw, n = ti // HWt
    ty[0] = (ti - n * HWt) // j.tw
    tx[0] = ti - n * HWt - ty[0] * j.tw
    return n


cdef void _wino_task(void* p, Py_ssize_t item, int tid) noexcept nogil:
    """Item = (block of T tiles, slab of weight panels): input transform of the block, then per panel the GEMMs (one
    per plane) and the output transform."""
    cdef WinoJob* j = <WinoJob*>p
    cdef Py_ssize_t sl = item % j.nslabs, blk = item // j.nslabs, T = j.T, C = j.C, K = j.K, m = j.m, al = j.al
    cdef Py_ssize_t t0 = blk * T, nt = min(T, j.ntiles - t0), i, n, ty, tx, ih, iw, a, b, xi, jp, jp1, n0, nr
    cdef Py_ssize_t s, mr, nstrips
    cdef float* V = j.work + <Py_ssize_t>tid * j.wlen
    cdef float* M = V + j.planes * j.vs
    cdef const float* ptrs[36]
    cdef Py_ssize_t pix[WINO_MAX_TILES]     # per tile of the block: its first output pixel (flat over N, Ho, Wo)
    cdef int vh[WINO_MAX_TILES]
    cdef int vw[WINO_MAX_TILES]
    cdef WinoDst d
    cdef const float* img
    for i in range(nt):
        n = _wino_tile(j, t0 + i, &ty, &tx)
        pix[i] = (n * j.Ho + m * ty) * j.Wo + m * tx
        vh[i] = <int>min(m, j.Ho - m * ty)
        vw[i] = <int>min(m, j.Wo - m * tx)
        img = j.x + n * j.H * j.W * C
        for a in range(al):
            ih = m * ty - j.ph + a
            for b in range(al):
                iw = m * tx - j.pw + b
                ptrs[a * al + b] = img + (ih * j.W + iw) * C if 0 <= ih < j.H and 0 <= iw < j.W else j.zero
        if m == 2:
            wino_in(ptrs, C, V + i * C, j.vs)
        else:
            wino4_in(ptrs, C, V + i * C, j.vs)
    nstrips = (nt + SGEMM_MR - 1) // SGEMM_MR
    jp1 = min((sl + 1) * j.pslab, (K + SGEMM_NR - 1) // SGEMM_NR)
    d.yrow, d.ypx, d.rrow, d.rpx = j.Wo * j.ldy, j.ldy, j.Wo * K, K
    for jp in range(sl * j.pslab, jp1):
        n0 = jp * SGEMM_NR
        nr = min(<Py_ssize_t>SGEMM_NR, K - n0)
        for xi in range(j.planes):
            i = 0
            for s in range(nstrips):     # strips of (nearly) equal height
                mr = (nt - i + (nstrips - s) - 1) // (nstrips - s)
                dconv_uk(mr, V + xi * j.vs, i * C, C, j.runs, j.nruns, j.wp + xi * j.blen, jp, nr,
                         M + xi * j.ms + i * SGEMM_NR, SGEMM_NR, 1.0, 0.0, NULL, NULL, NULL, NULL)
                i += mr
        for i in range(nt):
            d.y = j.y + pix[i] * j.ldy + n0
            d.r = (j.res + pix[i] * K + n0) if j.res != NULL else NULL
            d.vh, d.vw = vh[i], vw[i]
            if m == 2:
                wino_out(M + i * SGEMM_NR, j.ms, nr, &d, (j.bias + n0) if j.bias != NULL else NULL, j.act)
            else:
                wino4_out(M + i * SGEMM_NR, j.ms, nr, &d, (j.bias + n0) if j.bias != NULL else NULL, j.act)


cdef int _conv_wino(const float* x, Py_ssize_t N, Py_ssize_t H, Py_ssize_t W, Py_ssize_t C, Py_ssize_t K,
                    Py_ssize_t Ho, Py_ssize_t Wo, Py_ssize_t ph, Py_ssize_t pw, const float* wp, const float* bias,
                    const float* res, float* y, Py_ssize_t ldy, const Act* act, int nth, Py_ssize_t m) noexcept nogil:
    """y := act(conv3x3(x, W) [+ bias] [+ res]) by F(m x m, 3x3) (m = 2 or 4) over NHWC x (N, H, W, C), y (N, Ho, Wo,
    K) with pixels ldy floats apart, W packed by conv_wino_pack_weight(..., m), begin pads (ph, pw). Work items (block
    of tiles, slab of weight panels) are taken dynamically by nth threads; every output element is computed by one
    thread in the same order whatever nth is. Returns -1 (nothing written) when its workspace cannot be allocated,
    else 0."""
    cdef WinoJob job
    cdef ImplicitA ia
    cdef DTap taps[64]
    cdef DRun runs[64]
    cdef Py_ssize_t i, nblocks, npanels = (K + SGEMM_NR - 1) // SGEMM_NR, items
    cdef float* zero
    memset(&ia, 0, sizeof(ia))
    ia.kh, ia.kw, ia.sh, ia.sw, ia.dh, ia.dw = 1, 1, 1, 1, 1, 1
    ia.H, ia.W, ia.C, ia.Cg = 1, 1, C, C
    if C > WINO_MAX_C or (m != 2 and m != 4):
        return -1
    job.nruns = _dconv_taps(&ia, C, _round_up(K, SGEMM_NR), taps) if C > 0 else 0
    for i in range(job.nruns):
        runs[i] = taps[i].run
    job.runs = runs
    job.x, job.wp, job.bias, job.res, job.y, job.act = x, wp, bias, res, y, act
    job.H, job.W, job.C, job.K, job.Ho, job.Wo, job.ph, job.pw = H, W, C, K, Ho, Wo, ph, pw
    job.m, job.al = m, m + 2
    job.planes = job.al * job.al
    job.th, job.tw = (Ho + m - 1) // m, (Wo + m - 1) // m
    job.ntiles = N * job.th * job.tw
    job.blen, job.ldy = sgemm_pack_b_len(C, K), ldy
    job.T = _wino_tiles_per_block(C, job.planes, job.ntiles, nth)
    nblocks = (job.ntiles + job.T - 1) // job.T
    job.T = (job.ntiles + nblocks - 1) // nblocks        # blocks of (nearly) equal size
    job.pslab = _panel_slab(npanels, nblocks, nth)
    job.nslabs = (npanels + job.pslab - 1) // job.pslab
    items = nblocks * job.nslabs
    nth = <int>max(1, min(<Py_ssize_t>nth, items))
    job.vs = _odd_lines(job.T * C)
    job.ms = _odd_lines(job.T * SGEMM_NR)
    job.wlen = job.planes * (job.vs + job.ms)
    zero = <float*>calloc(C + 16, sizeof(float))
    job.work = <float*>malloc(nth * job.wlen * sizeof(float))
    if zero == NULL or job.work == NULL:
        free(zero)
        free(job.work)
        return -1
    job.zero = zero
    parallel_for(items, nth, _wino_task, &job)
    free(job.work)
    free(zero)
    return 0
