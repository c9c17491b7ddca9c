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
#
# bf16 (onnxep.compute_precision=bf16, issue 29): the same transforms in fp32, the plane GEMMs on bf16 operands with
# fp32 accumulation (bgemm.h's micro-kernel, vdpbf16ps): U packed once to bf16 panels (conv_wino_pack_weight_bf16,
# half the bytes), each block's V rounded to bf16 pairs after its input transform. The rounding of V and U adds at
# most 2u |U_xi||V_xi| (u = 2^-8) to each product before the output transform sums them with A's weights:
# tests/kernels/test_conv_winograd_bf16.py derives the per-element bound from that and checks it against float64.

from libc.stdint cimport uint16_t, uint32_t


cdef extern from "_native/winograd.h":
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
    WINO_MAX_TILES = 96       # at most this many tiles per block (8 micro-kernel strips)
    WINO_MIN_TILES = 12       # at least this many when blocks are cut smaller to give the threads work

# The V block budget: a quarter of the L2 (256 KB on the 1 MiB-L2 dev machine, where this was tuned as
# a constant; 512 KB on a 2 MiB L2), read from the CPU at import. And the weight rule: when the packed U (planes x Cin
# x Cout floats) is larger than half the L2, it cannot stay in a core's L2 from one block of tiles to the next, so
# every block streams all of it again from L3 -- ResNet-50's 14x14 256 -> 256 F(2x2): 4 MiB of U, 5 blocks of 10
# tiles, 20 MiB read per conv on one thread. Then blocks are as large as twice the V budget allows (all 49 tiles
# there: 0.8 MiB of V) and the threads get _wino_slabs_per_thread slabs of weight panels each instead of smaller
# blocks (each slab redoes its block's input transform, a few % of the products at these channel counts).
# Kernel alone, U cycled through 8 copies (from L3, as in a model), min over 11-15 interleaved rounds, on a VM
# loaded by other builds (load 2.5-3): 14x14 256 -> 256 F(2x2) thread CPU time 1t 2064 -> 1420-1468 us, both
# threads' CPU 2t 2237 -> 1558-1708 us; 28x28 128 -> 128 F(4x4) 1045 -> 914-967, 2t 1175 -> 1037-1130.
# Whole models, in-process A/B of this blocking against the old one (wino_blocking(262144, False, 0)), process CPU
# time per run, min over 7-15 alternating rounds, same VM load: ResNet-50 1t 0.94-0.97x, 2t 0.96-0.98x; VGG-19 1t and
# 2t 0.87x; Inception-v1/v2, SqueezeNet, DenseNet-121 within the noise (0.95-1.02x). Tried and dropped: slab-major
# items under a big U (slabs of U of half the L2, each over every block: U read once per thread, the input transform
# once per slab) -- 1.3-1.45x the time on 56x56 256 -> 256 F(4x4) and 28x28 128 -> 128 F(4x4): the repeated
# transforms cost more than streaming U from L3 saves.
# wino_blocking() reads / sets these (tests, in-process A/B).
cdef Py_ssize_t _wino_l2 = cache_bytes(2, 1 << 20)
cdef Py_ssize_t _wino_v_bytes = _wino_l2 // 4
cdef bint _wino_weight_rule = True
cdef Py_ssize_t _wino_slabs_per_thread = 2     # big U on several threads: items per thread (0: _panel_slab's)


cdef bint _wino_even_blocks = True


def wino_even_blocks(on=None):
    """Whether a Winograd conv under the weight rule rounds its block count up to a multiple of the threads (on by
    default); `on` sets it. Returns the setting before the call. Results do not depend on it."""
    global _wino_even_blocks
    before = bool(_wino_even_blocks)
    if on is not None:
        _wino_even_blocks = bool(on)
    return before


def wino_blocking(v_bytes=None, weight_rule=None, slabs_per_thread=None):
    """(V block budget in bytes, weight rule on, slabs per thread under it, the L2 bytes they derive from) before the
    call; the arguments set them when given (v_bytes 0: back to a quarter of the L2; slabs_per_thread 0: _panel_slab's
    DCONV_ITEMS_PER_THREAD items per thread). Results do not depend on the blocking (each output sums its products in
    the same order whatever the blocks and slabs are)."""
    global _wino_v_bytes, _wino_weight_rule, _wino_slabs_per_thread
    before = (_wino_v_bytes, bool(_wino_weight_rule), _wino_slabs_per_thread, _wino_l2)
    if v_bytes is not None:
        _wino_v_bytes = v_bytes if v_bytes > 0 else _wino_l2 // 4
    if weight_rule is not None:
        _wino_weight_rule = bool(weight_rule)
    if slabs_per_thread is not None:
        _wino_slabs_per_thread = max(0, slabs_per_thread)
    return before


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
    _wino_pack(w, out, m, False)


def conv_wino_pack_weight_bf16_size(Py_ssize_t cout, Py_ssize_t cin, Py_ssize_t m=2):
    """float32 slots (one bf16 pair each) of a 3x3 conv weight (cout, cin, 3, 3) packed for conv_nhwc_f32's bf16
    F(m x m, 3x3) path (conv_wino_pack_weight_bf16)."""
    if cout < 1 or cin < 0:
        raise ValueError(f"conv_wino_pack_weight_bf16_size: bad cout={cout}, cin={cin}")
    return _wino_planes(m) * bg_pack_b_len(cin, cout)


def conv_wino_pack_weight_bf16(const float[:, :, :, ::1] w, float[::1] out, Py_ssize_t m=2):
    """conv_wino_pack_weight's U, each U_xi then rounded to bf16 and packed by bgemm_pack_b's layout (cin x cout,
    32-column panels of k pairs), one after another (bg_pack_b_len(cin, cout) float slots each)."""
    _wino_pack(w, out, m, True)


cdef _wino_pack(const float[:, :, :, ::1] w, float[::1] out, Py_ssize_t m, bint bf16):
    """U of conv_wino_pack_weight into out, each plane packed for the fp32 GEMM (sgemm_pack_b_raw) or, with bf16,
    for the bf16 one (bg_pack_b)."""
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
    cdef str name = "conv_wino_pack_weight_bf16" if bf16 else "conv_wino_pack_weight"
    if w.shape[2] != 3 or w.shape[3] != 3 or cout < 1:
        raise ValueError(f"{name}: w must be (cout >= 1, cin, 3, 3), got {tuple(w.shape)}")
    blen = bg_pack_b_len(cin, cout) if bf16 else sgemm_pack_b_len(cin, cout)
    if out.shape[0] != planes * blen:
        raise ValueError(f"{name}: out has {out.shape[0]} elements, expected {planes * blen}")
    if cin == 0:
        if bf16 and out.shape[0]:
            out[:] = 0
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
        raise MemoryError(f"{name}: cannot allocate the transformed weight")
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
                if bf16:
                    bg_pack_b(u + xi * cin * cout, cin, cout, cout, 1, <uint16_t*>&out[xi * blen])
                else:
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
    float* work               # per thread: V (planes vs floats apart), M (planes ms floats apart), then for bf16 V
    Py_ssize_t wlen, vs, ms   # rounded to bf16 pairs (planes vbs pairs apart, rows c2 pairs)
    int bkern                 # bf16: the bgemm.h micro-kernel (U packed by conv_wino_pack_weight_bf16); -1: fp32
    Py_ssize_t nr_panel       # output channels per weight panel: SGEMM_NR (fp32) or BG_NR (bf16)
    Py_ssize_t c2, k2p, vbs   # bf16: V's pairs per row, U's pair groups per panel (bg_k2p), V's plane stride


cdef inline Py_ssize_t _wino_tiles_per_block(Py_ssize_t C, Py_ssize_t K, Py_ssize_t planes, Py_ssize_t ntiles,
                                             int nth, Py_ssize_t wsize) noexcept nogil:
    """Tiles per work item: as many as keep V within _wino_v_bytes (whole micro-kernel strips, at most
    WINO_MAX_TILES), but no more than give every thread DCONV_ITEMS_PER_THREAD blocks, down to WINO_MIN_TILES: more
    blocks rather than slabs of weight panels, which redo the block's input transform (SqueezeNet's 55x55 16 -> 64
    F(4x4) at 2 threads: 196 tiles in 8 blocks instead of 4 blocks x 2 slabs, 0.70x the time) -- unless U (K output
    channels) is past half the L2 (_wino_weight_rule): then each extra block reads all of U again from L3. wsize:
    bytes per element of U (4, bf16 2)."""
    cdef bint big = _wino_big_u(C, K, planes, wsize)
    cdef Py_ssize_t t = (2 if big else 1) * _wino_v_bytes // (<Py_ssize_t>sizeof(float) * planes * max(C, <Py_ssize_t>1))
    cdef Py_ssize_t want = (ntiles + <Py_ssize_t>nth * DCONV_ITEMS_PER_THREAD - 1) // (nth * DCONV_ITEMS_PER_THREAD)
    t = max(<Py_ssize_t>SGEMM_MR, min(t // SGEMM_MR * SGEMM_MR, <Py_ssize_t>WINO_MAX_TILES))
    if big:
        return t        # U does not stay in L2 between blocks: fewest blocks (V up to half the L2), threads take slabs
    return min(t, max(want, <Py_ssize_t>WINO_MIN_TILES))


cdef Py_ssize_t _wino_pslab_even(Py_ssize_t npanels, Py_ssize_t nblocks, Py_ssize_t want, int nth) noexcept nogil:
    """Weight panels per slab for nblocks blocks under the weight rule on nth threads, where the rule asks for `want`
    slabs a block: the fewest equal slabs (a divisor of npanels), from want / 2 up, that give the threads an equal
    count of (block, slab) items; the rule's own slabs when no count does. `want` alone can leave the items uneven:
    6 panels in 4 wanted slabs were 3 slabs of 2 on 2 threads, one thread with two. Kernel alone, 2 threads, new /
    before, same bits: F(2x2) 14x14 128 -> 192 0.74 (3 threads 0.82), 128 -> 128 0.87, 96 -> 128 0.88, 192 -> 192
    0.94, 160 -> 224 0.96, 7x7 192 -> 320 0.87; F(4x4) 28x28 96 -> 128 0.85, 64 -> 96 0.83; 128 -> 160 (5 panels)
    and nine shapes the rule already split evenly 0.99-1.01. (A cost model that also took larger slabs than the
    rule's read 14x14 128 -> 160 at 1.16.) Whole models, 2 threads, in-process A/B: SqueezeNet 0.954, Inception-v2
    0.973 (bf16 0.989), Inception-v1 0.988, ResNet-50 / DenseNet-121 / VGG-19 / ZFNet-512 1.00-1.01."""
    cdef Py_ssize_t ns
    for ns in range(max(<Py_ssize_t>1, want // 2), npanels + 1):
        if npanels % ns == 0 and (nblocks * ns) % nth == 0:
            return npanels // ns
    return (npanels + want - 1) // want


cdef inline bint _wino_big_u(Py_ssize_t C, Py_ssize_t K, Py_ssize_t planes, Py_ssize_t wsize) noexcept nogil:
    """The weight rule: U (planes x C x K elements of wsize bytes) past half the L2."""
    return _wino_weight_rule and <double>wsize * planes * C * K > _wino_l2 // 2


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
    cdef Py_ssize_t s, mr, nstrips, pfo, g0, kp, pnr = j.nr_panel
    cdef float* V = j.work + <Py_ssize_t>tid * j.wlen
    cdef float* M = V + j.planes * j.vs
    cdef uint32_t* Vb = <uint32_t*>(M + j.planes * j.ms)
    cdef const uint16_t* Up
    cdef const uint16_t* Upf
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
    if j.bkern >= 0:        # bf16: the block's V rounded to pairs, plane by plane
        for xi in range(j.planes):
            bg_pack_a(j.bkern, V + xi * j.vs, C, C, j.c2, 0, nt, Vb + xi * j.vbs)
    nstrips = (nt + SGEMM_MR - 1) // SGEMM_MR
    jp1 = min((sl + 1) * j.pslab, (K + pnr - 1) // pnr)
    d.yrow, d.ypx, d.rrow, d.rpx = j.Wo * j.ldy, j.ldy, j.Wo * K, K
    for jp in range(sl * j.pslab, jp1):
        n0 = jp * pnr
        nr = min(pnr, K - n0)
        for xi in range(j.planes):
            if j.bkern >= 0:    # M_xi (nt x nr) := V_xi @ U_xi's panel jp, K blocks of BG_KC
                Up = <const uint16_t*>(j.wp + xi * j.blen) + jp * j.k2p * BG_NR * 2
                # the next plane's panel (the last plane: the next panel's first plane) fetched into L2 meanwhile,
                # K block by K block, as the fp32 path below does
                Upf = NULL
                if _panel_prefetch:
                    if xi + 1 < j.planes:
                        Upf = Up + 2 * j.blen
                    elif jp + 1 < jp1:
                        Upf = <const uint16_t*>j.wp + (jp + 1) * j.k2p * BG_NR * 2
                g0 = 0
                while g0 < j.c2:
                    kp = min(<Py_ssize_t>(BG_KC // 2), j.c2 - g0)
                    bg_micro(j.bkern, Vb + xi * j.vbs + g0, j.c2, Up + g0 * BG_NR * 2, kp, <int>nt, <int>nr,
                             M + xi * j.ms, BG_NR, g0 > 0, (Upf + g0 * BG_NR * 2) if Upf != NULL else NULL,
                             kp if Upf != NULL else 0)
                    g0 += kp
                continue
            # the plane's first strip fetches the next plane's panel into L2 (the last plane: the next
            # panel's first plane): the planes' panels lie blen floats apart, a jump no hardware prefetcher follows,
            # and U past the L2 (ResNet-50's 14x14 256 -> 256: 4 MiB) comes from L3 in every block
            pfo = 0
            if _panel_prefetch and j.nruns > 0:
                if xi + 1 < j.planes:
                    pfo = j.blen
                elif jp + 1 < jp1:
                    pfo = j.runs[0].sb - (j.planes - 1) * j.blen
            i = 0
            for s in range(nstrips):     # strips of (nearly) equal height
                mr = (nt - i + (nstrips - s) - 1) // (nstrips - s)
                dconv_uk(mr, V + xi * j.vs, i * C, C, j.runs, j.nruns, j.wp + xi * j.blen, jp, pfo, 0, nr,
                         M + xi * j.ms + i * SGEMM_NR, SGEMM_NR, 1.0, 0.0, NULL, NULL, NULL, NULL)
                i += mr
                pfo = 0
        for i in range(nt):
            d.y = j.y + pix[i] * j.ldy + n0
            d.r = (j.res + pix[i] * K + n0) if j.res != NULL else NULL
            d.vh, d.vw = vh[i], vw[i]
            if m == 2:
                wino_out(M + i * pnr, j.ms, nr, &d, (j.bias + n0) if j.bias != NULL else NULL, j.act)
            else:
                wino4_out(M + i * pnr, j.ms, nr, &d, (j.bias + n0) if j.bias != NULL else NULL, j.act)


cdef int _conv_wino(const float* x, Py_ssize_t N, Py_ssize_t H, Py_ssize_t W, Py_ssize_t C, Py_ssize_t K,
                    Py_ssize_t Ho, Py_ssize_t Wo, Py_ssize_t ph, Py_ssize_t pw, const float* wp, const float* bias,
                    const float* res, float* y, Py_ssize_t ldy, const Act* act, int nth, Py_ssize_t m,
                    int bkern) noexcept nogil:
    """y := act(conv3x3(x, W) [+ bias] [+ res]) by F(m x m, 3x3) (m = 2 or 4) over NHWC x (N, H, W, C), y (N, Ho, Wo,
    K) with pixels ldy floats apart, W packed by conv_wino_pack_weight(..., m), begin pads (ph, pw); with bkern >= 0
    (a bgemm.h kernel) W packed by conv_wino_pack_weight_bf16(..., m) and the plane GEMMs in bf16. Work items (block
    of tiles, slab of weight panels) are taken dynamically by nth threads; every output element is computed by one
    thread in the same order whatever nth is. Returns -1 (nothing written) when its workspace cannot be allocated,
    else 0."""
    cdef WinoJob job
    cdef ImplicitA ia
    cdef DTap taps[64]
    cdef DRun runs[64]
    cdef Py_ssize_t pnr = BG_NR if bkern >= 0 else SGEMM_NR, wsize = 2 if bkern >= 0 else 4
    cdef Py_ssize_t i, nblocks, npanels = (K + pnr - 1) // pnr, items
    cdef bint big
    cdef float* zero
    memset(&ia, 0, sizeof(ia))
    ia.kh, ia.kw, ia.sh, ia.sw, ia.dh, ia.dw = 1, 1, 1, 1, 1, 1
    ia.H, ia.W, ia.C, ia.Cg = 1, 1, C, C
    if C > WINO_MAX_C or (m != 2 and m != 4):
        return -1
    job.nruns = _dconv_taps(&ia, C, _round_up(K, SGEMM_NR), taps) if C > 0 and bkern < 0 else 0
    for i in range(job.nruns):
        runs[i] = taps[i].run
    job.runs = runs
    job.x, job.wp, job.bias, job.res, job.y, job.act = x, wp, bias, res, y, act
    job.H, job.W, job.C, job.K, job.Ho, job.Wo, job.ph, job.pw = H, W, C, K, Ho, Wo, ph, pw
    job.m, job.al = m, m + 2
    job.planes = job.al * job.al
    job.th, job.tw = (Ho + m - 1) // m, (Wo + m - 1) // m
    job.ntiles = N * job.th * job.tw
    job.bkern, job.nr_panel = bkern, pnr
    job.blen = bg_pack_b_len(C, K) if bkern >= 0 else sgemm_pack_b_len(C, K)
    job.ldy = ldy
    job.c2, job.k2p = bg_k2(C), bg_k2p(C)
    job.T = _wino_tiles_per_block(C, K, job.planes, job.ntiles, nth, wsize)
    nblocks = (job.ntiles + job.T - 1) // job.T
    big = _wino_big_u(C, K, job.planes, wsize)
    if (_wino_even_blocks and big and nth > 1 and nblocks > 1 and nblocks % nth
            and job.ntiles >= nth * <Py_ssize_t>WINO_MIN_TILES):
        # under the weight rule the blocks are few and each reads all of U: a count the threads cannot share out
        # (5 blocks on 2 threads) leaves one thread a whole block behind; one more block each is cheaper
        nblocks = (nblocks + nth - 1) // nth * nth
    job.T = (job.ntiles + nblocks - 1) // nblocks        # blocks of (nearly) equal size
    if big and _wino_slabs_per_thread > 0 and nth > 1:
        i = max(<Py_ssize_t>1, min(npanels, (nth * _wino_slabs_per_thread + nblocks - 1) // nblocks))
        job.pslab = _wino_pslab_even(npanels, nblocks, i, nth)
    else:
        job.pslab = _panel_slab(npanels, nblocks, nth)
    job.nslabs = (npanels + job.pslab - 1) // job.pslab
    items = nblocks * job.nslabs
    nth = <int>max(1, min(<Py_ssize_t>nth, items))
    job.vs = _odd_lines(job.T * C)
    job.ms = _odd_lines(job.T * pnr)
    job.vbs = _odd_lines(job.T * job.c2) if bkern >= 0 else 0
    job.wlen = job.planes * (job.vs + job.ms + job.vbs)
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
