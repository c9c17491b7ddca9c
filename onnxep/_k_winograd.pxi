# 3x3 stride-1 convolution over channel-last (NHWC) activations by Winograd's minimal filtering, F(2x2, 3x3) (Lavin &
# Gray, "Fast Algorithms for Convolutional Neural Networks", 2015):
#
#     Y(2x2 tile) = A^T [ (G g G^T) (.) (B^T d B) ] A      d: the tile's 4x4 input patch, g: a 3x3 filter
#
# 16 products per 2x2 outputs instead of 36: each of the 16 positions xi of the 4x4 transformed patch is one GEMM
#     M_xi (tiles x Cout) = V_xi (tiles x Cin) @ U_xi (Cin x Cout),   U_xi = (G g G^T)[xi] over all (Cin, Cout)
# U (the pre-packed weight: 16 packed GEMM B operands one after another, sgemm_pack_b_raw's layout) is made once by
# conv_wino_pack_weight. Per block of tiles a thread transforms the input patches into V (16 x tiles x Cin, channels
# innermost, in its own workspace), multiplies V_xi by U_xi with the direct-path micro-kernel (A read in place: a V
# row is one tile's channels), one weight panel (NR output channels) at a time into M (16 x tiles x NR), and
# transforms M back into the 2x2 outputs of those channels with bias, residual and activation (the epilogue). The
# transforms only add and subtract (and halve, in G), so the result differs from the direct conv's by rounding only:
# tests/kernels/test_conv_winograd.py bounds it against a float64 oracle.


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

    /* The output transform of one tile for nr <= NR channels, with the epilogue: o = A^T m A (m[xi] = m[xi*ms + j],
       A^T = [[1,1,1,0],[0,1,-1,-1]]); output q = a*2 + b of the 2x2 tile goes to yq[q][j] (NULL: outside y) as
       act(o[q] + bias[j] + rq[q][j]) (bias, rq[q]: NULL for none). */
    static void onnxep_wino_out(const float* __restrict__ m, Py_ssize_t ms, Py_ssize_t nr, float* const* yq,
                                const float* const* rq, const float* bias, const onnxep_act* act)
    {
        float o[4][ONNXEP_SGEMM_NR];
        Py_ssize_t j;
        int q, kind = act ? act->kind : ONNXEP_ACT_NONE;
        float lo = act ? act->a : 0.0f, hi = act ? act->b : 0.0f;
        #pragma GCC ivdep
        for (j = 0; j < nr; j++) {
            float s00 = m[0 * ms + j] + m[4 * ms + j] + m[8 * ms + j], s01 = m[1 * ms + j] + m[5 * ms + j] + m[9 * ms + j];
            float s02 = m[2 * ms + j] + m[6 * ms + j] + m[10 * ms + j], s03 = m[3 * ms + j] + m[7 * ms + j] + m[11 * ms + j];
            float s10 = m[4 * ms + j] - m[8 * ms + j] - m[12 * ms + j], s11 = m[5 * ms + j] - m[9 * ms + j] - m[13 * ms + j];
            float s12 = m[6 * ms + j] - m[10 * ms + j] - m[14 * ms + j], s13 = m[7 * ms + j] - m[11 * ms + j] - m[15 * ms + j];
            o[0][j] = s00 + s01 + s02;
            o[1][j] = s01 - s02 - s03;
            o[2][j] = s10 + s11 + s12;
            o[3][j] = s11 - s12 - s13;
        }
        for (q = 0; q < 4; q++) {
            float* __restrict__ y = yq[q];
            const float* r = rq[q];
            float* oq = o[q];
            if (!y) continue;
            if (bias) for (j = 0; j < nr; j++) oq[j] += bias[j];
            if (r) for (j = 0; j < nr; j++) oq[j] += r[j];
            switch (kind) {
            case ONNXEP_ACT_NONE: for (j = 0; j < nr; j++) y[j] = oq[j]; break;
            case ONNXEP_ACT_RELU: for (j = 0; j < nr; j++) y[j] = oq[j] > 0.0f ? oq[j] : 0.0f; break;
            case ONNXEP_ACT_CLIP:
                for (j = 0; j < nr; j++) { float h = oq[j] < lo ? lo : oq[j]; y[j] = h > hi ? hi : h; } break;
            case ONNXEP_ACT_LEAKY_RELU: for (j = 0; j < nr; j++) y[j] = oq[j] >= 0.0f ? oq[j] : oq[j] * lo; break;
            default: for (j = 0; j < nr; j++) y[j] = onnxep_act1(act, oq[j]); break;
            }
        }
    }
    """
    void wino_in "onnxep_wino_in"(const float* const* p, Py_ssize_t C, float* v, Py_ssize_t vs) noexcept nogil
    void wino_out "onnxep_wino_out"(const float* m, Py_ssize_t ms, Py_ssize_t nr, float* const* yq,
                                    const float* const* rq, const float* bias, const Act* act) noexcept nogil


cdef enum:
    WINO_MAX_C = 63 * SGEMM_KC    # input channels of a winograd conv: one run per K block, at most 63 of them
    WINO_V_FLOATS = 65536     # a thread's V block (16 x tiles x Cin) aims at 256 KB (L2: 1 MB here)
    WINO_MAX_TILES = 60       # at most this many tiles per block (5 micro-kernel strips)


def wino_applies(kernel, strides, dilations, Py_ssize_t group, Py_ssize_t cin):
    """Whether conv_nhwc_f32's winograd path takes this conv (SIMD variants: the micro-kernel is the direct path's)."""
    return bool(SGEMM_SIMD) and tuple(kernel) == (3, 3) and tuple(strides) == (1, 1) and tuple(dilations) == (1, 1) \
        and group == 1 and 0 <= cin <= WINO_MAX_C


def conv_wino_pack_weight_size(Py_ssize_t cout, Py_ssize_t cin):
    """float32 elements of a 3x3 conv weight (cout, cin, 3, 3) packed for conv_nhwc_f32's Winograd path."""
    if cout < 1 or cin < 0:
        raise ValueError(f"conv_wino_pack_weight_size: bad cout={cout}, cin={cin}")
    return 16 * sgemm_pack_b_len(cin, cout)


def conv_wino_pack_weight(const float[:, :, :, ::1] w, float[::1] out):
    """out := U = G g G^T of every 3x3 filter g of w (cout, cin, 3, 3), G = [[1,0,0],[.5,.5,.5],[.5,-.5,.5],[0,0,1]]:
    for each of the 16 positions xi, the cin x cout matrix U_xi packed by sgemm_pack_b_raw, one after another."""
    cdef Py_ssize_t cout = w.shape[0], cin = w.shape[1], blen, o, c, r, xi
    cdef float g[9]
    cdef float t[12]
    cdef float* u
    if w.shape[2] != 3 or w.shape[3] != 3 or cout < 1:
        raise ValueError(f"conv_wino_pack_weight: w must be (cout >= 1, cin, 3, 3), got {tuple(w.shape)}")
    blen = sgemm_pack_b_len(cin, cout)
    if out.shape[0] != 16 * blen:
        raise ValueError(f"conv_wino_pack_weight: out has {out.shape[0]} elements, expected {16 * blen}")
    if cin == 0:
        return
    u = <float*>malloc(16 * cin * cout * sizeof(float))
    if u == NULL:
        raise MemoryError("conv_wino_pack_weight: cannot allocate the transformed weight")
    try:
        with nogil:
            for o in range(cout):
                for c in range(cin):
                    for r in range(9):
                        g[r] = w[o, c, r // 3, r % 3]
                    for r in range(3):      # t = G g (4 x 3), column r
                        t[r] = g[r]
                        t[3 + r] = 0.5 * (g[r] + g[3 + r] + g[6 + r])
                        t[6 + r] = 0.5 * (g[r] - g[3 + r] + g[6 + r])
                        t[9 + r] = g[6 + r]
                    for r in range(4):      # u = t G^T (4 x 4), row r; u[xi][c][o]
                        xi = r * 4
                        u[(xi * cin + c) * cout + o] = t[3 * r]
                        u[((xi + 1) * cin + c) * cout + o] = 0.5 * (t[3 * r] + t[3 * r + 1] + t[3 * r + 2])
                        u[((xi + 2) * cin + c) * cout + o] = 0.5 * (t[3 * r] - t[3 * r + 1] + t[3 * r + 2])
                        u[((xi + 3) * cin + c) * cout + o] = t[3 * r + 2]
            for xi in range(16):
                sgemm_pack_b_raw(cin, cout, u + xi * cin * cout, cout, 1, &out[xi * blen])
    finally:
        free(u)


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
    Py_ssize_t H, W, C, K, Ho, Wo, ph, pw, th, tw, ntiles, T, nslabs, pslab, blen, ldy
    float* work               # per thread: V (16 planes vs floats apart) then M (16 planes ms floats apart)
    Py_ssize_t wlen, vs, ms


cdef inline Py_ssize_t _wino_tiles_per_block(Py_ssize_t C) noexcept nogil:
    cdef Py_ssize_t t = WINO_V_FLOATS // (16 * max(C, <Py_ssize_t>1))
    t = t // SGEMM_MR * SGEMM_MR
    return max(<Py_ssize_t>SGEMM_MR, min(t, <Py_ssize_t>WINO_MAX_TILES))


cdef inline Py_ssize_t _odd_lines(Py_ssize_t n) noexcept nogil:
    """n floats rounded up to an odd number of 64-byte lines: the 16 planes of V (and of M) that the transforms
    read or write together then start in 16 different L1 sets. At a multiple of 4 KiB apart (T*C = 24*128 for
    DenseNet's 56x56 128 -> 32 convs) they all fell in one set and the input transform ran 15% slower."""
    n = _round_up(n, 16)
    return n + 16 if (n // 16) % 2 == 0 else n


cdef inline Py_ssize_t _wino_tile(const WinoJob* j, Py_ssize_t ti, Py_ssize_t* ty, Py_ssize_t* tx) noexcept nogil:
    """Tile ti (flat over images, tile rows, tile columns): its image, returned, and its tile row and column."""
    cdef Py_ssize_t HWt = j.th * j.tw, n = ti // HWt
    ty[0] = (ti - n * HWt) // j.tw
    tx[0] = ti - n * HWt - ty[0] * j.tw
    return n


cdef void _wino_task(void* p, Py_ssize_t item, int tid) noexcept nogil:
    """Item = (block of T tiles, slab of weight panels): input transform of the block, then per panel the 16 GEMMs
    and the output transform."""
    cdef WinoJob* j = <WinoJob*>p
    cdef Py_ssize_t sl = item % j.nslabs, blk = item // j.nslabs, T = j.T, C = j.C, K = j.K
    cdef Py_ssize_t t0 = blk * T, nt = min(T, j.ntiles - t0), i, n, ty, tx, ih, iw, a, b, xi, jp, jp1, n0, nr
    cdef Py_ssize_t s, mr, nstrips, r, q, oh, ow
    cdef float* V = j.work + <Py_ssize_t>tid * j.wlen
    cdef float* M = V + 16 * j.vs
    cdef const float* ptrs[16]
    cdef float* yq[4]
    cdef const float* rq[4]
    cdef const float* img
    for i in range(nt):
        n = _wino_tile(j, t0 + i, &ty, &tx)
        img = j.x + n * j.H * j.W * C
        for a in range(4):
            ih = 2 * ty - j.ph + a
            for b in range(4):
                iw = 2 * tx - j.pw + b
                ptrs[a * 4 + b] = img + (ih * j.W + iw) * C if 0 <= ih < j.H and 0 <= iw < j.W else j.zero
        wino_in(ptrs, C, V + i * C, j.vs)
    nstrips = (nt + SGEMM_MR - 1) // SGEMM_MR
    jp1 = min((sl + 1) * j.pslab, (K + SGEMM_NR - 1) // SGEMM_NR)
    for jp in range(sl * j.pslab, jp1):
        n0 = jp * SGEMM_NR
        nr = min(<Py_ssize_t>SGEMM_NR, K - n0)
        for xi in range(16):
            i = 0
            for s in range(nstrips):     # strips of (nearly) equal height
                mr = (nt - i + (nstrips - s) - 1) // (nstrips - s)
                dconv_uk(mr, V + xi * j.vs, i * C, C, j.runs, j.nruns, j.wp + xi * j.blen, jp, nr,
                         M + xi * j.ms + i * SGEMM_NR, SGEMM_NR, 1.0, 0.0, NULL, NULL, NULL, NULL)
                i += mr
        for i in range(nt):
            n = _wino_tile(j, t0 + i, &ty, &tx)
            for q in range(4):
                oh = 2 * ty + q // 2
                ow = 2 * tx + q % 2
                if oh < j.Ho and ow < j.Wo:
                    r = (n * j.Ho + oh) * j.Wo + ow
                    yq[q] = j.y + r * j.ldy + n0
                    rq[q] = (j.res + r * K + n0) if j.res != NULL else NULL
                else:
                    yq[q] = NULL
                    rq[q] = NULL
            wino_out(M + i * SGEMM_NR, j.ms, nr, yq, rq, (j.bias + n0) if j.bias != NULL else NULL, j.act)


cdef int _conv_wino(const float* x, Py_ssize_t N, Py_ssize_t H, Py_ssize_t W, Py_ssize_t C, Py_ssize_t K,
                    Py_ssize_t Ho, Py_ssize_t Wo, Py_ssize_t ph, Py_ssize_t pw, const float* wp, const float* bias,
                    const float* res, float* y, Py_ssize_t ldy, const Act* act, int nth) noexcept nogil:
    """y := act(conv3x3(x, W) [+ bias] [+ res]) by F(2x2, 3x3) over NHWC x (N, H, W, C), y (N, Ho, Wo, K) with pixels
    ldy floats apart, W packed by conv_wino_pack_weight, begin pads (ph, pw). Work items (block of tiles, slab of
    weight panels) are taken dynamically by nth threads; every output element is computed by one thread in the same
    order whatever nth is. Returns -1 (nothing written) when its workspace cannot be allocated, else 0."""
    cdef WinoJob job
    cdef ImplicitA ia
    cdef DTap taps[64]
    cdef DRun runs[64]
    cdef Py_ssize_t i, nblocks, npanels = (K + SGEMM_NR - 1) // SGEMM_NR, items
    cdef float* zero
    memset(&ia, 0, sizeof(ia))
    ia.kh, ia.kw, ia.sh, ia.sw, ia.dh, ia.dw = 1, 1, 1, 1, 1, 1
    ia.H, ia.W, ia.C, ia.Cg = 1, 1, C, C
    if C > WINO_MAX_C:
        return -1
    job.nruns = _dconv_taps(&ia, C, _round_up(K, SGEMM_NR), taps) if C > 0 else 0
    for i in range(job.nruns):
        runs[i] = taps[i].run
    job.runs = runs
    job.x, job.wp, job.bias, job.res, job.y, job.act = x, wp, bias, res, y, act
    job.H, job.W, job.C, job.K, job.Ho, job.Wo, job.ph, job.pw = H, W, C, K, Ho, Wo, ph, pw
    job.th, job.tw = (Ho + 1) // 2, (Wo + 1) // 2
    job.ntiles = N * job.th * job.tw
    job.blen, job.ldy = sgemm_pack_b_len(C, K), ldy
    job.T = _wino_tiles_per_block(C)
    nblocks = (job.ntiles + job.T - 1) // job.T
    job.T = (job.ntiles + nblocks - 1) // nblocks        # blocks of (nearly) equal size
    job.pslab = _panel_slab(npanels, nblocks, nth)
    job.nslabs = (npanels + job.pslab - 1) // job.pslab
    items = nblocks * job.nslabs
    nth = <int>max(1, min(<Py_ssize_t>nth, items))
    job.vs = _odd_lines(job.T * C)
    job.ms = _odd_lines(job.T * SGEMM_NR)
    job.wlen = 16 * (job.vs + job.ms)
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
