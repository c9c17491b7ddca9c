# Pointwise then depthwise, band by band (com.onnxep NhwcPwDw, ops/onnxep/nhwc_pw_dw.py): an inverted-residual
# block's 1x1 expansion (MobileNetV2's 16 -> 96 at 112x112) writes a tensor several times the size of its input and
# the next conv, a depthwise one, reads it once. Where that tensor is larger than the L2 it goes to memory and back:
# inside MobileNetV2 the 112x112 16 -> 96 expansion took ~1.7x its time alone (4.8 MB written, then read by the
# depthwise conv). Here each thread takes a contiguous chunk of the depthwise conv's output rows and walks it in
# bands: the pointwise conv computes the input rows the band needs (one thread, its own rows of X) into the thread's
# buffer, which holds pwdw_band_rows' rows (half the L2), and the depthwise conv reads them from there. Rows the next
# band needs again (the kernel's overlap) move to the buffer's start instead of being computed twice; only the rows
# at a chunk's start are computed twice (by two threads).
#
# Same results as the two convs one after the other: the pointwise conv's outputs depend only on their pixel (its
# kernels' order over K does not depend on the rows a call covers, tests/kernels/test_pw_dw.py), and each depthwise
# output row is the same function of the same input rows (_dwn_row), wherever they are.
from libc.string cimport memmove


cdef enum:
    PWDW_CONV = 0         # the pointwise conv's ints are ConvNhwc.step_args' (conv_nhwc_step)
    PWDW_BCONV = 1        # ... BConvNhwc.step_args' (bconv_step, bf16)
    PWDW_MAX_PW_INTS = 32  # the pointwise step's ints, at most
    PWDW_DW_INTS = 18      # dw_nhwc_step_args' ints

#: PWDW kinds by the pointwise conv's class name (pw_dw_nhwc_step_args)
PWDW_KINDS = {"ConvNhwc": PWDW_CONV, "BConvNhwc": PWDW_BCONV}

cdef Py_ssize_t _pwdw_l2 = cache_bytes(2, 1 << 20)


def pwdw_band_rows(Py_ssize_t W, Py_ssize_t Cm, Py_ssize_t kh, Py_ssize_t sh, Py_ssize_t dh):
    """Depthwise output rows per band: as many as keep the band's pointwise rows ((band - 1) * sh + (kh - 1) * dh + 1
    rows of W x Cm floats) within half this core's L2, at least one."""
    cdef Py_ssize_t row = max(W * Cm * 4, 1), rows = max(_pwdw_l2 // 2 // row, 1)
    return max((rows - (kh - 1) * dh - 1) // sh + 1, 1)


def pwdw_intermediate_bytes_min():
    """The pointwise output (bytes) from which the fusion pays: more than this core's L2, so that the unfused
    tensor leaves it (ops/onnxep/nhwc_pw_dw.py)."""
    return _pwdw_l2


cdef struct PwDwJob:
    const Py_ssize_t* pn      # the pointwise step's ints (for the whole image; banded per call)
    const float* pf
    Py_ssize_t npn
    int kind
    const float* x
    const float* w1
    const float* b1
    const float* w2
    const float* b2
    float* y
    NhwcGeom g                # the depthwise conv over the pointwise output (N, H, W, Cm)
    Py_ssize_t Cin, band, chunks, rowlen, bufstride
    float* buf                # per thread bufstride floats
    const float** ptrs        # per thread 3 * kh * kw pointer-sized slots (_dwn_row)
    int err


cdef int _pwdw_rows(PwDwJob* j, Py_ssize_t n, Py_ssize_t r0, Py_ssize_t r1, float* out) noexcept nogil:
    """Pointwise output rows [r0, r1) of image n into out (contiguous), on this thread."""
    cdef Py_ssize_t loc[PWDW_MAX_PW_INTS]
    cdef Py_ssize_t i, rows = r1 - r0
    cdef const float* xp = j.x + (n * j.g.H + r0) * j.g.W * j.Cin
    for i in range(j.npn):
        loc[i] = j.pn[i]
    if j.kind == PWDW_CONV:     # N, P, H, Ho (ConvNhwc.step_args)
        loc[0], loc[5], loc[10], loc[22] = 1, rows * j.g.W, rows, rows
        return conv_nhwc_step(loc, j.pf, xp, j.w1, j.b1, NULL, out, 1)
    loc[0], loc[5], loc[16] = rows * j.g.W, rows, rows     # M, H, Ho (BConvNhwc.step_args)
    return bconv_step(loc, j.pf, xp, j.w1, j.b1, NULL, out, 1, 0)


cdef void _pwdw_task(void* p, Py_ssize_t t, int tid) noexcept nogil:
    cdef PwDwJob* j = <PwDwJob*>p
    cdef const NhwcGeom* g = &j.g
    cdef Py_ssize_t n = t // j.chunks, c = t % j.chunks
    cdef Py_ssize_t o0 = c * g.Ho // j.chunks, o1 = (c + 1) * g.Ho // j.chunks
    cdef Py_ssize_t b0, b1, lo, hi, have0 = 0, have1 = 0, start, r
    cdef float* buf = j.buf + <Py_ssize_t>tid * j.bufstride
    cdef const float** ptrs = j.ptrs + <Py_ssize_t>tid * 3 * g.kh * g.kw
    cdef const float* xv
    b0 = o0
    while b0 < o1:
        b1 = min(b0 + j.band, o1)
        lo = max(<Py_ssize_t>0, b0 * g.sh - g.ph)
        hi = min(g.H, (b1 - 1) * g.sh - g.ph + (g.kh - 1) * g.dh + 1)
        if hi < lo:
            hi = lo
        start = lo
        if have0 <= lo < have1:         # the rows the last band computed and this one reads again
            memmove(buf, buf + (lo - have0) * j.rowlen, (have1 - lo) * j.rowlen * sizeof(float))
            start = have1
        if hi > start and _pwdw_rows(j, n, start, hi, buf + (start - lo) * j.rowlen) != 0:
            j.err = 1
            return
        have0, have1 = lo, hi
        # the depthwise conv reads image n's rows [lo, hi) only: a view of the buffer at their place in the image
        xv = buf - (n * g.H + lo) * j.rowlen
        for r in range(b0, b1):
            _dwn_row(n * g.Ho + r, xv, j.w2, j.b2, j.y, g, ptrs)
        b0 = b1


def pw_dw_nhwc_step_args(pw, Py_ssize_t Cin, list dw_ints, list dw_floats):
    """(ints, floats) for the run loop's RL_PW_DW_NHWC step (pw_dw_nhwc_step): pw is the pointwise conv (a ConvNhwc
    or BConvNhwc of the whole image), dw_ints / dw_floats dw_nhwc_step_args' for the depthwise conv over its output.
    ints: kind, the pointwise ints' count, those ints, the depthwise ints, Cin, the band's output rows."""
    pints, pfloats = pw.step_args()
    if len(pints) > PWDW_MAX_PW_INTS or len(dw_ints) != PWDW_DW_INTS:
        raise ValueError(f"pw_dw_nhwc_step_args: {len(pints)} pointwise ints (at most {PWDW_MAX_PW_INTS}), "
                         f"{len(dw_ints)} depthwise ints ({PWDW_DW_INTS})")
    W, Cm, kh, sh, dh = dw_ints[2], dw_ints[3], dw_ints[7], dw_ints[9], dw_ints[11]
    band = pwdw_band_rows(W, Cm, kh, sh, dh)
    return ([PWDW_KINDS[type(pw).__name__], len(pints)] + list(pints) + list(dw_ints) + [Cin, band],
            list(pfloats) + list(dw_floats))


cdef int pw_dw_nhwc_step(const Py_ssize_t* n, const float* f, const float* xp, const float* w1, const float* b1,
                         const float* w2, const float* b2, float* yp, int nthreads) noexcept nogil:
    """The pointwise conv then the depthwise conv, band by band (pw_dw_nhwc_step_args' numbers): 0, or -1 when a
    buffer cannot be allocated."""
    cdef PwDwJob j
    cdef const Py_ssize_t* d
    cdef Py_ssize_t maxrows, tasks
    cdef int nth
    cdef char* raw
    j.kind, j.npn = <int>n[0], n[1]
    j.pn, j.pf = n + 2, f
    d = n + 2 + j.npn
    j.g.N, j.g.H, j.g.W, j.g.C, j.g.cout, j.g.mult, j.g.CP = d[0], d[1], d[2], d[3], d[4], d[5], d[6]
    j.g.kh, j.g.kw, j.g.sh, j.g.sw, j.g.dh, j.g.dw, j.g.ph, j.g.pw, j.g.Ho, j.g.Wo = d[7], d[8], d[9], d[10], d[11], \
        d[12], d[13], d[14], d[15], d[16]
    j.g.act.mode, j.g.act.lo, j.g.act.hi = <int>d[17], f[2], f[3]
    j.Cin, j.band = d[18], d[19]
    if j.g.N * j.g.Ho * j.g.Wo * j.g.cout == 0:
        return 0
    j.x, j.w1, j.b1, j.w2, j.b2, j.y = xp, w1, b1, w2, b2, yp
    j.rowlen = j.g.W * j.g.C
    maxrows = min(j.g.H, (j.band - 1) * j.g.sh + (j.g.kh - 1) * j.g.dh + 1)
    j.bufstride = (maxrows * j.rowlen + 15) // 16 * 16      # 64-byte aligned per thread
    nth = _nthreads(nthreads)
    # a contiguous chunk of output rows per thread and image: the chunk borders' rows are computed twice
    j.chunks = max(<Py_ssize_t>1, min(<Py_ssize_t>nth, j.g.Ho))
    tasks = j.g.N * j.chunks
    nth = <int>min(<Py_ssize_t>nth, tasks)
    raw = <char*>malloc(<size_t>nth * j.bufstride * sizeof(float) + 64)
    j.ptrs = <const float**>malloc(<size_t>nth * 3 * j.g.kh * j.g.kw * sizeof(void*))
    if raw == NULL or j.ptrs == NULL:
        free(raw)
        free(j.ptrs)
        return -1
    j.buf = <float*>(raw + (64 - (<size_t>raw) % 64) % 64)
    j.err = 0
    parallel_for(tasks, nth, _pwdw_task, &j)
    free(raw)
    free(j.ptrs)
    return -1 if j.err else 0


def pw_dw_nhwc_f32(list ints, list floats, const float[::1] x, const float[::1] w1, const float[::1] b1,
                   const float[::1] w2, const float[::1] b2, float[::1] y, int nthreads=0):
    """y := the depthwise conv of the pointwise conv of x, as pw_dw_nhwc_step_args describes them (its ints and
    floats), band by band; w1 packed for the pointwise conv's class, w2 by dw_pack_weight_nhwc; b1 / b2 may be None.
    x is (N, H, W, Cin) and y (N, Ho, Wo, Cm) C-contiguous."""
    cdef Py_ssize_t nn[2 + PWDW_MAX_PW_INTS + PWDW_DW_INTS + 2]
    cdef float ff[4]
    cdef Py_ssize_t i, npn, N, H, W, Cm, Ho, Wo
    cdef int rc
    if len(ints) < 2 or len(ints) != 2 + ints[1] + PWDW_DW_INTS + 2 or ints[1] > PWDW_MAX_PW_INTS \
            or len(floats) != 4:
        raise ValueError("pw_dw_nhwc_f32: ints / floats are not pw_dw_nhwc_step_args'")
    npn = ints[1]
    N, H, W, Cm, Ho, Wo = ints[2 + npn], ints[3 + npn], ints[4 + npn], ints[5 + npn], ints[17 + npn], ints[18 + npn]
    if x.shape[0] != N * H * W * ints[20 + npn]:
        raise ValueError(f"pw_dw_nhwc_f32: x has {x.shape[0]} elements, expected {N * H * W * ints[20 + npn]}")
    if y.shape[0] != N * Ho * Wo * Cm:
        raise ValueError(f"pw_dw_nhwc_f32: y has {y.shape[0]} elements, expected {N * Ho * Wo * Cm}")
    if (b1 is not None and b1.shape[0] != Cm) or (b2 is not None and b2.shape[0] != Cm):
        raise ValueError(f"pw_dw_nhwc_f32: a bias does not have {Cm} elements")
    for i in range(len(ints)):
        nn[i] = ints[i]
    for i in range(4):
        ff[i] = floats[i]
    with nogil:
        rc = pw_dw_nhwc_step(nn, ff, &x[0] if x.shape[0] else NULL, &w1[0], &b1[0] if b1 is not None else NULL,
                             &w2[0], &b2[0] if b2 is not None else NULL, &y[0] if y.shape[0] else NULL, nthreads)
    if rc != 0:
        raise MemoryError("pw_dw_nhwc_f32: cannot allocate the band buffers")
