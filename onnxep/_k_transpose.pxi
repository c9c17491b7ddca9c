# Transpose: y := x.transpose(perm) as a raw permute-copy of 1-, 2-, 4- or 8-byte elements (every numeric dtype and
# bool; strings/objects stay on numpy).
#
# The wrapper reduces the problem first: dims of size 1 are dropped, and output dims that stay adjacent and in order in
# the input are merged (NCHW -> NHWC with N = 1 becomes a plain 2-D transpose (C, HW) -> (HW, C)). Then one of the
# inner kernels runs over an index space of "loop dims" (size, input byte stride, output byte stride):
#   COPY  the innermost output dim is also innermost in the input: contiguous runs, memcpy'd in pieces of at most
#         TR_COPY_CHUNK bytes (the last loop dim walks the pieces of one run); short runs (ROWS, at most
#         TR_ROWS_MAX_RUN bytes, as in (0,2,1,3) on attention heads) are copied a whole row of runs per item;
#   TILE  otherwise: a 2-D transpose between output dim q (contiguous in the input) and the last output dim
#         (contiguous in the output), cut into TR_TILE_BYTES-wide square tiles (the last two loop dims walk tile
#         columns, then tile rows). In the avx2 and avx512 variants a tile is done by register transposes (4-byte
#         elements 8x8 AVX2, or 16x16 AVX-512 in the avx512 variant; 8-byte 4x4 AVX2; 2-byte 8x8 and 1-byte 16x16
#         SSE2), in the generic variant by a portable loop; ragged tile edges always take the portable loop.
# Loop dims are the other output dims in output order, then the piece / tile dims. The flat item range is split into
# one contiguous chunk per thread (one OpenMP region per call); every output byte is written by exactly one copy, so
# the result does not depend on the thread count or the variant.

cdef extern from "_native/transpose.h":
    void onnxep_tr_tile(int esz, const uint8_t* src, Py_ssize_t lda, uint8_t* dst, Py_ssize_t ldb, Py_ssize_t na,
                        Py_ssize_t nb) noexcept nogil


cdef enum:
    TR_MAX_DIMS = 32            # input rank the wrapper accepts (the op falls back to numpy beyond)
    TR_COPY_CHUNK = 65536       # bytes per memcpy piece: long runs are split so both threads get work
    TR_TILE_BYTES = 128         # tile edge in bytes (32 float32): a tile's rows are two cache lines on either side
    TR_SERIAL_BYTES = 262144    # below this many bytes a call stays on one thread (the fork/join costs more)
    TR_ROWS_MAX_RUN = 4096      # runs up to this many bytes are copied a row of runs per item (TR_ROWS)
    TR_COPY = 0
    TR_TILE = 1
    TR_ROWS = 2


cdef inline void _copy_runs(const uint8_t* x, Py_ssize_t sx, uint8_t* y, Py_ssize_t sy, Py_ssize_t nruns,
                            Py_ssize_t nbytes) noexcept nogil:
    """y[i*sy : i*sy + nbytes] := x[i*sx : ...] for i < nruns; the common short run sizes get a constant-size copy
    (inlined moves instead of a libc call per run)."""
    cdef Py_ssize_t i
    if nbytes == 4:
        for i in range(nruns):
            memcpy(y + i * sy, x + i * sx, 4)
    elif nbytes == 8:
        for i in range(nruns):
            memcpy(y + i * sy, x + i * sx, 8)
    elif nbytes == 16:
        for i in range(nruns):
            memcpy(y + i * sy, x + i * sx, 16)
    elif nbytes == 32:
        for i in range(nruns):
            memcpy(y + i * sy, x + i * sx, 32)
    elif nbytes == 64:
        for i in range(nruns):
            memcpy(y + i * sy, x + i * sx, 64)
    else:
        for i in range(nruns):
            memcpy(y + i * sy, x + i * sx, nbytes)


cdef void transpose_range(const uint8_t* x, uint8_t* y, int kind, int esz, int m, const Py_ssize_t* size,
                          const Py_ssize_t* ss, const Py_ssize_t* ds, Py_ssize_t run, Py_ssize_t chunk,
                          Py_ssize_t lda, Py_ssize_t ldb, Py_ssize_t A, Py_ssize_t B, Py_ssize_t TA,
                          Py_ssize_t TB, Py_ssize_t start, Py_ssize_t stop) noexcept nogil:
    """Items start..stop of the loop-dim index space (m dims, byte strides ss / ds; see the file header).
    COPY: the last dim walks pieces of `chunk` elements of a `run`-element run.
    ROWS: every item copies A runs of `run` elements, lda / ldb bytes apart in x / y.
    TILE: the last two dims walk TA x TB tiles (columns along B, then rows along A) of the A x B transpose (input row
    stride lda, output row stride ldb)."""
    cdef Py_ssize_t idx[TR_MAX_DIMS + 2]
    cdef Py_ssize_t r = start, offx = 0, offy = 0, pos = start, na, nb
    cdef int d, last = m - 1
    for d in range(last, -1, -1):
        idx[d] = r % size[d]
        r = r // size[d]
        offx += idx[d] * ss[d]
        offy += idx[d] * ds[d]
    while pos < stop:
        if kind == TR_COPY:
            na = min(chunk, run - idx[last] * chunk)
            memcpy(y + offy, x + offx, na * esz)
        elif kind == TR_ROWS:
            _copy_runs(x + offx, lda, y + offy, ldb, A, run * esz)
        else:
            na = min(TA, A - idx[last] * TA)
            nb = min(TB, B - idx[last - 1] * TB)
            onnxep_tr_tile(esz, x + offx, lda, y + offy, ldb, na, nb)
        pos += 1
        idx[last] += 1
        offx += ss[last]
        offy += ds[last]
        d = last
        while d > 0 and idx[d] == size[d]:
            offx -= idx[d] * ss[d]
            offy -= idx[d] * ds[d]
            idx[d] = 0
            d -= 1
            idx[d] += 1
            offx += ss[d]
            offy += ds[d]


cdef struct TrJob:
    const uint8_t* x
    uint8_t* y
    int kind, esz, m
    const Py_ssize_t* size
    const Py_ssize_t* ss
    const Py_ssize_t* ds
    Py_ssize_t run, chunk, lda, ldb, A, B, TA, TB, nitems, nchunks


cdef void _transpose_task(void* p, Py_ssize_t c, int tid) noexcept nogil:
    cdef TrJob* j = <TrJob*>p
    transpose_range(j.x, j.y, j.kind, j.esz, j.m, j.size, j.ss, j.ds, j.run, j.chunk, j.lda, j.ldb, j.A, j.B, j.TA,
                    j.TB, c * j.nitems // j.nchunks, (c + 1) * j.nitems // j.nchunks)


cdef enum:
    TR_SHUFFLE = 3              # (pixels, G, Cg) -> (pixels, Cg, G) of 4-byte elements: channel_shuffle_4b's loop
    # a transpose plan (_tr_plan): TRP_* fixed entries, then the m loop dims' sizes, input and output byte strides
    TRP_KIND = 0
    TRP_ESZ = 1
    TRP_M = 2
    TRP_RUN = 3                 # SHUFFLE: pixels
    TRP_CHUNK = 4
    TRP_LDA = 5
    TRP_LDB = 6
    TRP_A = 7                   # SHUFFLE: G
    TRP_B = 8                   # SHUFFLE: Cg
    TRP_TA = 9
    TRP_TB = 10
    TRP_NITEMS = 11
    TRP_NT = 12
    TRP_DIMS = 13
    TRP_MAX = TRP_DIMS + 3 * (TR_MAX_DIMS + 2)


cdef int _tr_plan(int nd, const Py_ssize_t* ish, const int* pm, Py_ssize_t esz, int nthreads, bint aligned,
                  Py_ssize_t* pl) noexcept nogil:
    """The plan of y := x.transpose(pm) for a C-contiguous x of shape ish (nd dims, none negative, total > 0) with
    esz-byte elements, into pl (TRP_MAX entries at most); returns how many entries it used. nthreads: the pool's
    thread count for the call (0: the default); aligned: x and y are 4-byte aligned (the SHUFFLE loop needs it)."""
    cdef int newidx[TR_MAX_DIMS]
    cdef int op[TR_MAX_DIMS]
    cdef int cont[TR_MAX_DIMS]
    cdef int gid[TR_MAX_DIMS]
    cdef Py_ssize_t gsize[TR_MAX_DIMS]
    cdef Py_ssize_t istr[TR_MAX_DIMS]
    cdef int P[TR_MAX_DIMS]
    cdef Py_ssize_t n[TR_MAX_DIMS]
    cdef Py_ssize_t sin[TR_MAX_DIMS]
    cdef Py_ssize_t sout[TR_MAX_DIMS]
    cdef Py_ssize_t* size = pl + TRP_DIMS
    cdef Py_ssize_t ss[TR_MAX_DIMS + 2]
    cdef Py_ssize_t ds[TR_MAX_DIMS + 2]
    cdef int d, k, r = 0, R = 0, m = 0, q = 0, kind, nt
    cdef Py_ssize_t total = 1, run = 0, chunk = 1, lda = 0, ldb = 0, A = 0, B = 0, TA = 1, TB = 1
    cdef Py_ssize_t nitems = 1, acc
    for d in range(nd):
        total *= ish[d]
    # drop size-1 dims; op[k]: the kept input dim at kept output position k
    for d in range(nd):
        newidx[d] = -1
        if ish[d] != 1:
            newidx[d] = r
            gsize[r] = ish[d]
            r += 1
    r = 0
    for k in range(nd):
        if newidx[pm[k]] >= 0:
            op[r] = newidx[pm[k]]
            r += 1
    # merge input dim d into d-1 when output position of d directly follows that of d-1
    for d in range(r):
        cont[d] = 0
    for k in range(1, r):
        if op[k] == op[k - 1] + 1:
            cont[op[k]] = 1
    for d in range(r):
        if d == 0 or not cont[d]:
            gsize[R] = gsize[d]
            R += 1
        else:
            gsize[R - 1] *= gsize[d]
        gid[d] = R - 1
    k = 0
    for d in range(r):
        if d == 0 or op[d] != op[d - 1] + 1:
            P[k] = gid[op[d]]
            k += 1
    acc = 1
    for d in range(R - 1, -1, -1):
        istr[d] = acc
        acc *= gsize[d]
    acc = 1
    for k in range(R - 1, -1, -1):
        n[k] = gsize[P[k]]
        sin[k] = istr[P[k]]
        sout[k] = acc
        acc *= n[k]

    nt = 1 if total * esz < TR_SERIAL_BYTES else _nthreads(nthreads)
    pl[TRP_ESZ], pl[TRP_NT] = esz, nt
    if (esz == 4 and R >= 2 and (n[R - 1] == 2 or n[R - 1] == 3 or n[R - 1] == 4 or n[R - 1] == 8)
            and ((R == 2 and P[0] == 1) or (R == 3 and P[0] == 0 and P[1] == 2)) and aligned):
        # (pixels, G, Cg) -> (pixels, Cg, G) of 4-byte elements with 2, 3, 4 or 8 groups -- an NCHW -> NHWC
        # transpose of a few channels (a network's input), a channel shuffle -- is channel_shuffle_4b's loop, with
        # G a constant (the tiles below move 3 floats per pixel row by row: 1x3x224x224 46 us against 17, 1 thread)
        pl[TRP_KIND], pl[TRP_M] = TR_SHUFFLE, 0
        pl[TRP_RUN], pl[TRP_A], pl[TRP_B] = n[0] if R == 3 else 1, n[R - 1], n[R - 2]
        return TRP_DIMS
    acc = 1
    for k in range(R - 2):
        acc *= n[k]
    if R >= 3 and P[R - 1] == R - 1 and n[R - 1] * esz <= TR_ROWS_MAX_RUN and acc >= 4 * nt:
        # short runs: an item is a whole row of n[R-2] runs (one call per run and no odometer step between them)
        kind = TR_ROWS
        run = n[R - 1]
        A = n[R - 2]
        lda = sin[R - 2] * esz
        ldb = sout[R - 2] * esz
        for k in range(R - 2):
            size[m] = n[k]
            ss[m] = sin[k] * esz
            ds[m] = sout[k] * esz
            m += 1
    elif R == 0 or P[R - 1] == R - 1:
        kind = TR_COPY
        run = 1 if R == 0 else n[R - 1]
        chunk = max(1, TR_COPY_CHUNK // esz)
        for k in range(R - 1):
            size[m] = n[k]
            ss[m] = sin[k] * esz
            ds[m] = sout[k] * esz
            m += 1
        size[m] = (run + chunk - 1) // chunk
        ss[m] = chunk * esz
        ds[m] = chunk * esz
        m += 1
    else:
        kind = TR_TILE
        for k in range(R):
            if P[k] == R - 1:
                q = k
        A = n[q]
        B = n[R - 1]
        lda = sin[R - 1]
        ldb = sout[q]
        # square T x T tiles (T = TR_TILE_BYTES / itemsize), but a side shorter than T (3 channels) gets the whole
        # dim and the other side grows to keep about T * T elements per tile
        TA = TB = TR_TILE_BYTES // esz
        if A < TA:
            TA = A
            TB = max(TB, TB * TB // A)
        elif B < TB:
            TB = B
            TA = max(TA, TA * TA // B)
        for k in range(R - 1):
            if k != q:
                size[m] = n[k]
                ss[m] = sin[k] * esz
                ds[m] = sout[k] * esz
                m += 1
        # tile columns (along B, the output's contiguous dim) outer, tile rows inner: a thread reads T whole input
        # rows of A elements at a time (one contiguous block when A is small, as in NHWC -> NCHW)
        size[m] = (B + TB - 1) // TB
        ss[m] = TB * lda * esz
        ds[m] = TB * esz
        size[m + 1] = (A + TA - 1) // TA
        ss[m + 1] = TA * esz
        ds[m + 1] = TA * ldb * esz
        m += 2
    for d in range(m):
        nitems *= size[d]
        pl[TRP_DIMS + m + d] = ss[d]
        pl[TRP_DIMS + 2 * m + d] = ds[d]
    pl[TRP_KIND], pl[TRP_M], pl[TRP_RUN], pl[TRP_CHUNK] = kind, m, run, chunk
    pl[TRP_LDA], pl[TRP_LDB], pl[TRP_A], pl[TRP_B], pl[TRP_TA], pl[TRP_TB] = lda, ldb, A, B, TA, TB
    pl[TRP_NITEMS] = nitems
    return TRP_DIMS + 3 * m


cdef void _tr_exec(const Py_ssize_t* pl, const uint8_t* x, uint8_t* y) noexcept nogil:
    """Run a _tr_plan plan: y := x transposed (x and y as planned, not overlapping)."""
    cdef int m = <int>pl[TRP_M], nt = <int>pl[TRP_NT]
    cdef TrJob job
    if pl[TRP_KIND] == TR_SHUFFLE:
        _shuffle_4b(<const float*>x, <float*>y, pl[TRP_RUN], pl[TRP_A], pl[TRP_B], nt)
        return
    if nt > pl[TRP_NITEMS]:
        nt = <int>pl[TRP_NITEMS]
    job.x, job.y, job.kind, job.esz, job.m = x, y, <int>pl[TRP_KIND], <int>pl[TRP_ESZ], m
    job.size, job.ss, job.ds = pl + TRP_DIMS, pl + TRP_DIMS + m, pl + TRP_DIMS + 2 * m
    job.run, job.chunk, job.lda, job.ldb = pl[TRP_RUN], pl[TRP_CHUNK], pl[TRP_LDA], pl[TRP_LDB]
    job.A, job.B, job.TA, job.TB = pl[TRP_A], pl[TRP_B], pl[TRP_TA], pl[TRP_TB]
    job.nitems = pl[TRP_NITEMS]
    job.nchunks = 1 if nt <= 1 else min(job.nitems, <Py_ssize_t>nt * 4)   # a few chunks per thread, taken dynamically
    parallel_for(job.nchunks, nt, _transpose_task, &job)


cdef int _tr_args(shape, perm, int itemsize, Py_ssize_t* ish, int* pm) except -1:
    """Checks transpose_copy's / transpose_plan's shape and perm into ish / pm; returns the rank."""
    cdef int nd = len(shape), d, k
    cdef int seen[TR_MAX_DIMS]
    if itemsize not in (1, 2, 4, 8):
        raise ValueError(f"transpose_copy: itemsize must be 1, 2, 4 or 8 bytes, got {itemsize}")
    if nd > TR_MAX_DIMS or len(perm) != nd:
        raise ValueError(f"transpose_copy: need a perm of the same length as shape (at most {TR_MAX_DIMS} dims), "
                         f"got shape {tuple(shape)} and perm {tuple(perm)}")
    for d in range(nd):
        ish[d] = shape[d]
        if ish[d] < 0:
            raise ValueError(f"transpose_copy: negative dim in shape {tuple(shape)}")
        seen[d] = 0
    for k in range(nd):
        pm[k] = perm[k]
        if pm[k] < 0 or pm[k] >= nd or seen[pm[k]]:
            raise ValueError(f"transpose_copy: perm {tuple(perm)} is not a permutation of {nd} dims")
        seen[pm[k]] = 1
    return nd


def transpose_copy(const uint8_t[::1] x, shape, perm, int itemsize, uint8_t[::1] y, int nthreads=0):
    """y := x.transpose(perm) on raw bytes: x holds a C-contiguous array of `shape` with `itemsize`-byte elements
    (1, 2, 4 or 8), y receives the C-contiguous result (shape [shape[p] for p in perm]). y must not overlap x."""
    cdef Py_ssize_t ish[TR_MAX_DIMS]
    cdef int pm[TR_MAX_DIMS]
    cdef Py_ssize_t pl[TRP_MAX]
    cdef int nd = _tr_args(shape, perm, itemsize, ish, pm), d
    cdef Py_ssize_t total = 1
    for d in range(nd):
        total *= ish[d]
    if x.shape[0] != total * itemsize or y.shape[0] != total * itemsize:
        raise ValueError(f"transpose_copy: shape {tuple(shape)} of {itemsize}-byte elements needs "
                         f"{total * itemsize} bytes, x has {x.shape[0]} and y has {y.shape[0]}")
    if total == 0:
        return
    cdef bint aligned = (<size_t>&x[0]) % 4 == 0 and (<size_t>&y[0]) % 4 == 0
    with nogil:
        _tr_plan(nd, ish, pm, itemsize, nthreads, aligned, pl)
        _tr_exec(pl, &x[0], &y[0])


def transpose_plan(shape, perm, int itemsize, int nthreads, Py_ssize_t max_len):
    """transpose_copy's plan for 4-byte-aligned, non-empty x and y (the run loop's RL_TRANSPOSE step): a list of
    ints for _tr_exec, or None when it needs more than max_len entries."""
    cdef Py_ssize_t ish[TR_MAX_DIMS]
    cdef int pm[TR_MAX_DIMS]
    cdef Py_ssize_t pl[TRP_MAX]
    cdef int nd = _tr_args(shape, perm, itemsize, ish, pm), d, k
    for d in range(nd):
        if ish[d] == 0:
            return None
    k = _tr_plan(nd, ish, pm, itemsize, nthreads, True, pl)
    return None if k > max_len else [pl[d] for d in range(k)]


def copy_rows(const uint8_t[::1] x, Py_ssize_t rows, Py_ssize_t nbytes, uint8_t[::1] y, Py_ssize_t y_stride,
              Py_ssize_t y_offset, int nthreads=0):
    """y[y_offset + i*y_stride : ... + nbytes] := x[i*nbytes : (i+1)*nbytes] for i < rows (Concat: one input's
    slabs into the joined output). Rows are split over threads above TR_SERIAL_BYTES bytes in all."""
    cdef Py_ssize_t t, nblk, per, r0, r1
    cdef int nth
    if rows < 0 or nbytes < 0 or y_stride < nbytes or y_offset < 0:
        raise ValueError(f"copy_rows: bad geometry rows={rows}, nbytes={nbytes}, y_stride={y_stride}, "
                         f"y_offset={y_offset}")
    if x.shape[0] != rows * nbytes:
        raise ValueError(f"copy_rows: x has {x.shape[0]} bytes, expected {rows * nbytes}")
    if rows == 0 or nbytes == 0:
        return
    if y.shape[0] < y_offset + (rows - 1) * y_stride + nbytes:
        raise ValueError(f"copy_rows: y has {y.shape[0]} bytes, the rows need {y_offset + (rows - 1) * y_stride + nbytes}")
    nth = 1 if rows * nbytes < TR_SERIAL_BYTES else _nthreads(nthreads)
    if nth <= 1 or rows < 2:
        with nogil:
            _copy_runs(&x[0], nbytes, &y[y_offset], y_stride, rows, nbytes)
        return
    nblk = min(rows, <Py_ssize_t>nth * 4)
    per = (rows + nblk - 1) // nblk
    nblk = (rows + per - 1) // per
    cdef CopyRowsJob job
    job.x, job.y, job.rows, job.nbytes, job.y_stride, job.per = &x[0], &y[y_offset], rows, nbytes, y_stride, per
    with nogil:
        parallel_for(nblk, nth, _copy_rows_task, &job)


cdef struct CopyRowsJob:
    const uint8_t* x
    uint8_t* y
    Py_ssize_t rows, nbytes, y_stride, per


cdef void _copy_rows_task(void* p, Py_ssize_t t, int tid) noexcept nogil:
    cdef CopyRowsJob* j = <CopyRowsJob*>p
    cdef Py_ssize_t r0 = t * j.per, r1 = min(j.rows, r0 + j.per)
    _copy_runs(j.x + r0 * j.nbytes, j.nbytes, j.y + r0 * j.y_stride, j.y_stride, r1 - r0, j.nbytes)


cdef extern from "_native/channel_shuffle.h":
    void shuffle_rows "onnxep_shuffle_rows"(const float* x, float* y, Py_ssize_t p0, Py_ssize_t p1, Py_ssize_t c0,
                                            Py_ssize_t c1, Py_ssize_t G, Py_ssize_t Cg) noexcept nogil


cdef struct ShuffleJob:
    const float* x
    float* y
    Py_ssize_t P, G, Cg, per, cper, nc     # pixels per item, or (one pixel) channels per item and items per pixel


cdef void _shuffle_task(void* p, Py_ssize_t t, int tid) noexcept nogil:
    cdef ShuffleJob* j = <ShuffleJob*>p
    cdef Py_ssize_t px, c0
    if j.nc == 1:
        shuffle_rows(j.x, j.y, t * j.per, min(j.P, (t + 1) * j.per), 0, j.Cg, j.G, j.Cg)
    else:
        px = t // j.nc
        c0 = (t - px * j.nc) * j.cper
        shuffle_rows(j.x, j.y, px, px + 1, c0, min(j.Cg, c0 + j.cper), j.G, j.Cg)


def channel_shuffle_4b(const float[::1] x, Py_ssize_t P, Py_ssize_t G, Py_ssize_t Cg, float[::1] y, int nthreads=0):
    """y[p, c*G + g] := x[p, g*Cg + c] for P pixels of G*Cg 4-byte elements (any 4-byte dtype, viewed as float32: the
    bits are moved, never computed on). The same as transpose_copy of (P, G, Cg) with perm (0, 2, 1), with the group
    count a constant of the inner loop for G in (2, 3, 4, 8). Pixels are split over threads above TR_SERIAL_BYTES."""
    if P < 0 or G < 1 or Cg < 0:
        raise ValueError(f"channel_shuffle_4b: bad geometry P={P}, G={G}, Cg={Cg}")
    if x.shape[0] != P * G * Cg or y.shape[0] != P * G * Cg:
        raise ValueError(f"channel_shuffle_4b: P={P}, G={G}, Cg={Cg} needs {P * G * Cg} elements, x has "
                         f"{x.shape[0]} and y {y.shape[0]}")
    if P * G * Cg == 0:
        return
    if &y[0] < &x[0] + P * G * Cg and &x[0] < &y[0] + P * G * Cg:
        raise ValueError("channel_shuffle_4b: y overlaps x")
    with nogil:
        _shuffle_4b(&x[0], &y[0], P, G, Cg, 1 if P * G * Cg * 4 < TR_SERIAL_BYTES else _nthreads(nthreads))


cdef void _shuffle_4b(const float* x, float* y, Py_ssize_t P, Py_ssize_t G, Py_ssize_t Cg, int nth) noexcept nogil:
    """channel_shuffle_4b's work (P*G*Cg > 0) on nth threads: runs of pixels, or, with fewer pixels than threads (an
    NCHW -> NHWC transpose of a few images: P = N, G = C, Cg = H*W), each pixel's channels in 4 runs per thread."""
    cdef Py_ssize_t nblk, per
    cdef ShuffleJob job
    job.x, job.y, job.P, job.G, job.Cg = x, y, P, G, Cg
    job.nc, job.cper = 1, Cg
    if nth > 1 and P < nth:
        job.cper = (Cg + 4 * nth - 1) // (4 * nth)
        job.nc = (Cg + job.cper - 1) // job.cper
        job.per = 1
        nblk = P * job.nc
    else:
        nblk = min(P, <Py_ssize_t>nth * 4) if nth > 1 else 1
        per = (P + nblk - 1) // nblk
        nblk = (P + per - 1) // per
        job.per = per
    parallel_for(nblk, nth, _shuffle_task, &job)
