# Elementwise kernels.

cdef void relu_f32_raw(const float* x, float* y, Py_ssize_t n) noexcept nogil:
    """y := max(x, 0)"""
    cdef Py_ssize_t i
    cdef float v
    for i in range(n):
        v = x[i]
        y[i] = v if v > 0 else 0.0


cdef enum:
    ELTWISE_CHUNK = 16384   # elements per parallel chunk; below two chunks an elementwise call stays on one thread


def relu_f32(const float[::1] x, float[::1] y, int nthreads=0):
    """y := max(x, 0), elementwise over flat contiguous arrays (y may alias x)."""
    cdef Py_ssize_t n = x.shape[0], c, nchunks
    if y.shape[0] != n:
        raise ValueError(f"relu_f32: x has {n} elements, y has {y.shape[0]}")
    if n == 0:
        return
    nchunks = (n + ELTWISE_CHUNK - 1) // ELTWISE_CHUNK
    cdef UnaryJob job
    job.x, job.y, job.n, job.op, job.p0, job.p1, job.g = &x[0], &y[0], n, -1, 0, 0, NULL
    with nogil:
        parallel_for(nchunks, 1 if nchunks < 2 else _nthreads(nthreads), _unary_task, &job)


cdef struct UnaryJob:
    const float* x
    float* y
    Py_ssize_t n
    int op              # -1: relu_f32_raw, else unary_f32_raw's op
    float p0, p1
    const float* g      # UN_SILU_GATE's gate (read by that op only: other callers may leave it unset)


cdef void _unary_task(void* p, Py_ssize_t c, int tid) noexcept nogil:
    cdef UnaryJob* j = <UnaryJob*>p
    cdef Py_ssize_t o = c * ELTWISE_CHUNK, m = min(<Py_ssize_t>ELTWISE_CHUNK, j.n - c * ELTWISE_CHUNK)
    if j.op < 0:
        relu_f32_raw(j.x + o, j.y + o, m)
    elif j.op == UN_SILU_GATE:
        onnxep_silu_gate_loop(j.x + o, j.g + o, j.y + o, m, j.p0)
    else:
        unary_f32_raw(j.op, j.x + o, j.y + o, m, j.p0, j.p1)


# ---------------------------------------------------------------------------------------------------------------
# Unary float32 kernels: y := f(x) over flat contiguous arrays, chunked like relu_f32 (y may alias x).

cdef extern from "_native/eltwise.h":
    void onnxep_exp_loop(const float* x, float* y, Py_ssize_t n) nogil
    void onnxep_sigmoid_loop(const float* x, float* y, Py_ssize_t n) nogil
    void onnxep_tanh_loop(const float* x, float* y, Py_ssize_t n) nogil
    void onnxep_silu_loop(const float* x, float* y, Py_ssize_t n, float alpha) nogil
    void onnxep_silu_gate_loop(const float* x, const float* g, float* y, Py_ssize_t n, float alpha) nogil
    void onnxep_gelu_tanh_loop(const float* x, float* y, Py_ssize_t n) nogil
    void onnxep_hard_sigmoid_loop(const float* x, float* y, Py_ssize_t n, float alpha, float beta, int swish) nogil

cdef enum:
    UN_LEAKY_RELU = 0
    UN_SIGMOID = 1
    UN_TANH = 2
    UN_CLIP = 3
    UN_EXP = 4
    UN_SQRT = 5
    UN_NEG = 6
    UN_ABS = 7
    UN_SILU = 8             # p0 alpha
    UN_HARD_SIGMOID = 9     # p0 alpha, p1 beta
    UN_HARD_SWISH = 10
    UN_GELU_TANH = 11
    UN_SILU_GATE = 12       # p0 alpha; UnaryJob.g the gate (not through unary_f32_raw)


cdef void unary_f32_raw(int op, const float* x, float* y, Py_ssize_t n, float p0, float p1) noexcept nogil:
    """y := f_op(x; p0, p1); one loop per op so each vectorises on its own."""
    cdef Py_ssize_t i
    cdef float v
    if op == UN_LEAKY_RELU:
        for i in range(n):
            v = x[i]
            y[i] = v if v >= 0 else v * p0
    elif op == UN_SIGMOID:
        onnxep_sigmoid_loop(x, y, n)
    elif op == UN_TANH:
        onnxep_tanh_loop(x, y, n)
    elif op == UN_CLIP:
        # min(max(x, lo), hi) as numpy.clip: NaN stays NaN, lo > hi gives hi
        for i in range(n):
            v = x[i]
            if v < p0:
                v = p0
            if v > p1:
                v = p1
            y[i] = v
    elif op == UN_EXP:
        onnxep_exp_loop(x, y, n)
    elif op == UN_SQRT:
        for i in range(n):
            y[i] = sqrtf(x[i])
    elif op == UN_NEG:
        for i in range(n):
            y[i] = -x[i]
    elif op == UN_ABS:
        for i in range(n):
            y[i] = fabsf(x[i])
    elif op == UN_SILU:
        onnxep_silu_loop(x, y, n, p0)
    elif op == UN_HARD_SIGMOID:
        onnxep_hard_sigmoid_loop(x, y, n, p0, p1, 0)
    elif op == UN_HARD_SWISH:
        onnxep_hard_sigmoid_loop(x, y, n, 1.0 / 6.0, 0.5, 1)
    elif op == UN_GELU_TANH:
        onnxep_gelu_tanh_loop(x, y, n)


cdef _unary_run(str name, int op, const float[::1] x, float[::1] y, float p0, float p1, int nthreads):
    cdef Py_ssize_t n = x.shape[0], c, nchunks
    if y.shape[0] != n:
        raise ValueError(f"{name}: x has {n} elements, y has {y.shape[0]}")
    if n == 0:
        return
    nchunks = (n + ELTWISE_CHUNK - 1) // ELTWISE_CHUNK
    cdef UnaryJob job
    job.x, job.y, job.n, job.op, job.p0, job.p1, job.g = &x[0], &y[0], n, op, p0, p1, NULL
    with nogil:
        parallel_for(nchunks, 1 if nchunks < 2 else _nthreads(nthreads), _unary_task, &job)


def leaky_relu_f32(const float[::1] x, float[::1] y, float alpha, int nthreads=0):
    """y := x if x >= 0 else alpha * x"""
    _unary_run("leaky_relu_f32", UN_LEAKY_RELU, x, y, alpha, 0, nthreads)


def sigmoid_f32(const float[::1] x, float[::1] y, int nthreads=0):
    """y := 1 / (1 + exp(-x))"""
    _unary_run("sigmoid_f32", UN_SIGMOID, x, y, 0, 0, nthreads)


def tanh_f32(const float[::1] x, float[::1] y, int nthreads=0):
    """y := tanh(x)"""
    _unary_run("tanh_f32", UN_TANH, x, y, 0, 0, nthreads)


def clip_f32(const float[::1] x, float[::1] y, float lo, float hi, int nthreads=0):
    """y := min(max(x, lo), hi)"""
    _unary_run("clip_f32", UN_CLIP, x, y, lo, hi, nthreads)


def exp_f32(const float[::1] x, float[::1] y, int nthreads=0):
    """y := exp(x)"""
    _unary_run("exp_f32", UN_EXP, x, y, 0, 0, nthreads)


def sqrt_f32(const float[::1] x, float[::1] y, int nthreads=0):
    """y := sqrt(x)"""
    _unary_run("sqrt_f32", UN_SQRT, x, y, 0, 0, nthreads)


def neg_f32(const float[::1] x, float[::1] y, int nthreads=0):
    """y := -x"""
    _unary_run("neg_f32", UN_NEG, x, y, 0, 0, nthreads)


def abs_f32(const float[::1] x, float[::1] y, int nthreads=0):
    """y := |x|"""
    _unary_run("abs_f32", UN_ABS, x, y, 0, 0, nthreads)


def silu_f32(const float[::1] x, float[::1] y, float alpha=1.0, int nthreads=0):
    """y := x * sigmoid(alpha * x) (SiLU / Swish, QuickGelu with alpha 1.702)"""
    _unary_run("silu_f32", UN_SILU, x, y, alpha, 0, nthreads)


def silu_gate_f32(const float[::1] x, const float[::1] g, float[::1] y, float alpha=1.0, int nthreads=0):
    """y := x * sigmoid(alpha * x) * g (a gated MLP's act(gate_proj) * up_proj); y may alias x or g."""
    cdef Py_ssize_t n = x.shape[0], nchunks
    if y.shape[0] != n or g.shape[0] != n:
        raise ValueError(f"silu_gate_f32: x has {n} elements, g {g.shape[0]}, y {y.shape[0]}")
    if n == 0:
        return
    nchunks = (n + ELTWISE_CHUNK - 1) // ELTWISE_CHUNK
    cdef UnaryJob job
    job.x, job.y, job.n, job.op, job.p0, job.p1, job.g = &x[0], &y[0], n, UN_SILU_GATE, alpha, 0, &g[0]
    with nogil:
        parallel_for(nchunks, 1 if nchunks < 2 else _nthreads(nthreads), _unary_task, &job)


def hard_sigmoid_f32(const float[::1] x, float[::1] y, float alpha, float beta, int nthreads=0):
    """y := max(0, min(1, alpha * x + beta))"""
    _unary_run("hard_sigmoid_f32", UN_HARD_SIGMOID, x, y, alpha, beta, nthreads)


def hard_swish_f32(const float[::1] x, float[::1] y, int nthreads=0):
    """y := x * max(0, min(1, x / 6 + 1 / 2))"""
    _unary_run("hard_swish_f32", UN_HARD_SWISH, x, y, 0, 0, nthreads)


def gelu_tanh_f32(const float[::1] x, float[::1] y, int nthreads=0):
    """y := 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) (Gelu approximate "tanh", FastGelu)"""
    _unary_run("gelu_tanh_f32", UN_GELU_TANH, x, y, 0, 0, nthreads)


# ---------------------------------------------------------------------------------------------------------------
# Binary float32 kernels with broadcasting: z[i] := a[ia] op b[ib] over the output's index space.
#
# The caller (onnxep.ops.math._broadcast) collapses the broadcast into `ndim` dims of the output, each with an element
# stride per operand (0 where it broadcasts); adjacent dims with the same pattern are merged, so the innermost dim has
# stride 1 or 0 in each operand and is as long as possible: same shape -> one dim; scalar -> one dim with stride 0;
# per-channel NCHW + [C,1,1] -> dims (C, HW) with b strides (1, 0); trailing [M,N] + [N] -> (M, N), b strides (0, 1).
# The output index range is split into ELTWISE_CHUNK pieces for the threads; each piece walks an odometer over the
# outer dims and runs one vectorisable row loop per innermost segment.

cdef enum:
    BIN_ADD = 0
    BIN_SUB = 1
    BIN_MUL = 2
    BIN_DIV = 3
    BIN_MAX = 4
    BIN_MIN = 5
    BCAST_MAX_DIMS = 16     # collapsed dims; the op falls back to numpy ufuncs beyond (never seen in practice)


cdef inline float _bin_scalar(int op, float x, float y) noexcept nogil:
    if op == BIN_ADD:
        return x + y
    elif op == BIN_SUB:
        return x - y
    elif op == BIN_MUL:
        return x * y
    elif op == BIN_DIV:
        return x / y
    elif op == BIN_MAX:   # numpy.maximum: NaN in either operand gives NaN
        return x if (x >= y or x != x) else y
    else:
        return x if (x <= y or x != x) else y


cdef void _bin_row_vv(int op, const float* a, const float* b, float* z, Py_ssize_t n) noexcept nogil:
    cdef Py_ssize_t i
    cdef float x, y
    if op == BIN_ADD:
        for i in range(n):
            z[i] = a[i] + b[i]
    elif op == BIN_SUB:
        for i in range(n):
            z[i] = a[i] - b[i]
    elif op == BIN_MUL:
        for i in range(n):
            z[i] = a[i] * b[i]
    elif op == BIN_DIV:
        for i in range(n):
            z[i] = a[i] / b[i]
    elif op == BIN_MAX:
        for i in range(n):
            x = a[i]
            y = b[i]
            z[i] = x if (x >= y or x != x) else y
    else:
        for i in range(n):
            x = a[i]
            y = b[i]
            z[i] = x if (x <= y or x != x) else y


cdef void _bin_row_vs(int op, const float* a, float y, float* z, Py_ssize_t n) noexcept nogil:
    """z := a op y (y a scalar)"""
    cdef Py_ssize_t i
    cdef float x
    if op == BIN_ADD:
        for i in range(n):
            z[i] = a[i] + y
    elif op == BIN_SUB:
        for i in range(n):
            z[i] = a[i] - y
    elif op == BIN_MUL:
        for i in range(n):
            z[i] = a[i] * y
    elif op == BIN_DIV:
        for i in range(n):
            z[i] = a[i] / y
    elif op == BIN_MAX:
        for i in range(n):
            x = a[i]
            z[i] = x if (x >= y or x != x) else y
    else:
        for i in range(n):
            x = a[i]
            z[i] = x if (x <= y or x != x) else y


cdef void _bin_row_sv(int op, float x, const float* b, float* z, Py_ssize_t n) noexcept nogil:
    """z := x op b (x a scalar)"""
    cdef Py_ssize_t i
    cdef float y
    if op == BIN_ADD:
        for i in range(n):
            z[i] = x + b[i]
    elif op == BIN_SUB:
        for i in range(n):
            z[i] = x - b[i]
    elif op == BIN_MUL:
        for i in range(n):
            z[i] = x * b[i]
    elif op == BIN_DIV:
        for i in range(n):
            z[i] = x / b[i]
    elif op == BIN_MAX:
        for i in range(n):
            y = b[i]
            z[i] = x if (x >= y or x != x) else y
    else:
        for i in range(n):
            y = b[i]
            z[i] = x if (x <= y or x != x) else y


cdef inline void _bin_row(int op, const float* a, Py_ssize_t sa, const float* b, Py_ssize_t sb, float* z,
                          Py_ssize_t n) noexcept nogil:
    cdef Py_ssize_t i
    cdef float v
    if sa != 0 and sb != 0:
        _bin_row_vv(op, a, b, z, n)
    elif sa != 0:
        _bin_row_vs(op, a, b[0], z, n)
    elif sb != 0:
        _bin_row_sv(op, a[0], b, z, n)
    else:
        v = _bin_scalar(op, a[0], b[0])
        for i in range(n):
            z[i] = v


cdef void _bin_rows_vv(int op, const float* a, Py_ssize_t ra, const float* b, Py_ssize_t rb, float* z,
                      Py_ssize_t rows, Py_ssize_t n) noexcept nogil:
    """z[r, :] := a[r * ra :][:n] op b[r * rb :][:n] for r < rows (z rows contiguous): short rows (channel-last data
    times a per-image channel vector, (N, H*W, C) x (N, 1, C)) with the op chosen once, not per row."""
    cdef Py_ssize_t r, i, k, m
    cdef float x, y
    cdef float tile[256]
    if rb == 0 and ra == n and n <= 64 and rows > 2:
        # one b row against contiguous a rows: b tiled k times, then long vv rows of k * n (vectorised, no per-row
        # prologue / tail)
        k = 256 // n
        for r in range(k):
            for i in range(n):
                tile[r * n + i] = b[i]
        r = 0
        while r < rows:
            m = min(k, rows - r)
            _bin_row_vv(op, a + r * n, tile, z + r * n, m * n)
            r += m
        return
    if op == BIN_ADD:
        for r in range(rows):
            for i in range(n):
                z[r * n + i] = a[r * ra + i] + b[r * rb + i]
    elif op == BIN_SUB:
        for r in range(rows):
            for i in range(n):
                z[r * n + i] = a[r * ra + i] - b[r * rb + i]
    elif op == BIN_MUL:
        for r in range(rows):
            for i in range(n):
                z[r * n + i] = a[r * ra + i] * b[r * rb + i]
    elif op == BIN_DIV:
        for r in range(rows):
            for i in range(n):
                z[r * n + i] = a[r * ra + i] / b[r * rb + i]
    else:
        for r in range(rows):
            _bin_row_vv(op, a + r * ra, b + r * rb, z + r * n, n)


cdef void binary_f32_range(int op, const float* a, const float* b, float* z, int ndim, const Py_ssize_t* shape,
                           const Py_ssize_t* sa, const Py_ssize_t* sb, Py_ssize_t start,
                           Py_ssize_t stop) noexcept nogil:
    """z[start:stop] := a op b, flat output indices start..stop of the collapsed broadcast (ndim <= BCAST_MAX_DIMS)."""
    cdef Py_ssize_t idx[BCAST_MAX_DIMS]
    cdef Py_ssize_t r = start, offa = 0, offb = 0, pos = start, n, rows
    cdef int d, last = ndim - 1
    for d in range(last, -1, -1):
        idx[d] = r % shape[d]
        r = r // shape[d]
        offa += idx[d] * sa[d]
        offb += idx[d] * sb[d]
    while pos < stop:
        if last > 0 and idx[last] == 0 and sa[last] == 1 and sb[last] == 1 and shape[last] < 256:
            # whole short rows of both operands: one 2-D loop over the rows left in dim last - 1
            rows = min(shape[last - 1] - idx[last - 1], (stop - pos) // shape[last])
            if rows >= 2:
                _bin_rows_vv(op, a + offa, sa[last - 1], b + offb, sb[last - 1], z + pos, rows, shape[last])
                pos += rows * shape[last]
                idx[last - 1] += rows
                offa += rows * sa[last - 1]
                offb += rows * sb[last - 1]
                d = last - 1
                while d > 0 and idx[d] == shape[d]:
                    offa -= idx[d] * sa[d]
                    offb -= idx[d] * sb[d]
                    idx[d] = 0
                    d -= 1
                    idx[d] += 1
                    offa += sa[d]
                    offb += sb[d]
                continue
        n = shape[last] - idx[last]
        if n > stop - pos:
            n = stop - pos
        _bin_row(op, a + offa, sa[last], b + offb, sb[last], z + pos, n)
        pos += n
        idx[last] += n
        offa += n * sa[last]
        offb += n * sb[last]
        d = last
        while d > 0 and idx[d] == shape[d]:
            offa -= idx[d] * sa[d]
            offb -= idx[d] * sb[d]
            idx[d] = 0
            d -= 1
            idx[d] += 1
            offa += sa[d]
            offb += sb[d]


cdef _binary_run(str name, int op, const float[::1] a, const float[::1] b, float[::1] z, shape, a_strides,
                 b_strides, int nthreads):
    cdef Py_ssize_t c_shape[BCAST_MAX_DIMS]
    cdef Py_ssize_t c_sa[BCAST_MAX_DIMS]
    cdef Py_ssize_t c_sb[BCAST_MAX_DIMS]
    cdef int ndim = len(shape), d
    cdef Py_ssize_t total = 1, max_a = 0, max_b = 0, c, nchunks
    if ndim < 1 or ndim > BCAST_MAX_DIMS or len(a_strides) != ndim or len(b_strides) != ndim:
        raise ValueError(f"{name}: need 1..{BCAST_MAX_DIMS} collapsed dims with one stride per dim per operand, "
                         f"got shape {tuple(shape)}, strides {tuple(a_strides)} and {tuple(b_strides)}")
    for d in range(ndim):
        c_shape[d] = shape[d]
        c_sa[d] = a_strides[d]
        c_sb[d] = b_strides[d]
        if c_shape[d] < 0 or c_sa[d] < 0 or c_sb[d] < 0:
            raise ValueError(f"{name}: negative dim or stride in shape {tuple(shape)}, strides {tuple(a_strides)}, "
                             f"{tuple(b_strides)}")
        total *= c_shape[d]
        max_a += (c_shape[d] - 1) * c_sa[d]
        max_b += (c_shape[d] - 1) * c_sb[d]
    if c_sa[ndim - 1] > 1 or c_sb[ndim - 1] > 1:
        raise ValueError(f"{name}: innermost strides must be 0 or 1, got {c_sa[ndim - 1]} and {c_sb[ndim - 1]}")
    if z.shape[0] != total:
        raise ValueError(f"{name}: output has {z.shape[0]} elements, the broadcast shape {tuple(shape)} needs {total}")
    if total == 0:
        return
    if max_a >= a.shape[0] or max_b >= b.shape[0]:
        raise ValueError(f"{name}: operands of {a.shape[0]} and {b.shape[0]} elements are too small for shape "
                         f"{tuple(shape)} with strides {tuple(a_strides)} and {tuple(b_strides)}")
    nchunks = (total + ELTWISE_CHUNK - 1) // ELTWISE_CHUNK
    cdef BinaryJob job
    job.op, job.a, job.b, job.z, job.ndim, job.shape, job.sa, job.sb, job.total = (
        op, &a[0], &b[0], &z[0], ndim, c_shape, c_sa, c_sb, total)
    with nogil:
        parallel_for(nchunks, 1 if nchunks < 2 else _nthreads(nthreads), _binary_task, &job)


cdef struct BinaryJob:
    int op, ndim
    const float* a
    const float* b
    float* z
    const Py_ssize_t* shape
    const Py_ssize_t* sa
    const Py_ssize_t* sb
    Py_ssize_t total


cdef void _binary_task(void* p, Py_ssize_t c, int tid) noexcept nogil:
    cdef BinaryJob* j = <BinaryJob*>p
    binary_f32_range(j.op, j.a, j.b, j.z, j.ndim, j.shape, j.sa, j.sb, c * ELTWISE_CHUNK,
                     min(j.total, (c + 1) * ELTWISE_CHUNK))


def add_f32(const float[::1] a, const float[::1] b, float[::1] z, shape, a_strides, b_strides, int nthreads=0):
    """z := a + b over a collapsed broadcast (see above); z may alias a or b when it has the same layout."""
    _binary_run("add_f32", BIN_ADD, a, b, z, shape, a_strides, b_strides, nthreads)


def sub_f32(const float[::1] a, const float[::1] b, float[::1] z, shape, a_strides, b_strides, int nthreads=0):
    """z := a - b over a collapsed broadcast."""
    _binary_run("sub_f32", BIN_SUB, a, b, z, shape, a_strides, b_strides, nthreads)


def mul_f32(const float[::1] a, const float[::1] b, float[::1] z, shape, a_strides, b_strides, int nthreads=0):
    """z := a * b over a collapsed broadcast."""
    _binary_run("mul_f32", BIN_MUL, a, b, z, shape, a_strides, b_strides, nthreads)


def div_f32(const float[::1] a, const float[::1] b, float[::1] z, shape, a_strides, b_strides, int nthreads=0):
    """z := a / b (IEEE: x/0 is +-inf or NaN) over a collapsed broadcast."""
    _binary_run("div_f32", BIN_DIV, a, b, z, shape, a_strides, b_strides, nthreads)


def max_f32(const float[::1] a, const float[::1] b, float[::1] z, shape, a_strides, b_strides, int nthreads=0):
    """z := maximum(a, b) (NaN propagates, as numpy.maximum) over a collapsed broadcast."""
    _binary_run("max_f32", BIN_MAX, a, b, z, shape, a_strides, b_strides, nthreads)


def min_f32(const float[::1] a, const float[::1] b, float[::1] z, shape, a_strides, b_strides, int nthreads=0):
    """z := minimum(a, b) (NaN propagates, as numpy.minimum) over a collapsed broadcast."""
    _binary_run("min_f32", BIN_MIN, a, b, z, shape, a_strides, b_strides, nthreads)
