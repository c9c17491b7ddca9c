# The compiled run loop (DESIGN "The run loop"): a plan compiled for one input signature into a flat array of steps,
# walked without the GIL. A step is a C entry (RL_* below) and its prepared arguments: value slots (indices into the
# program's pointer table: slot 0 is always NULL), integer and float parameters and a thread count, all fixed when the
# program is made. The pointer table is the only thing a run patches: the slots of values whose address changes from
# run to run (feeds, outputs handed to the user, values a Python step made). Steps without a C entry stay in Python
# (onnxep/backends/cpu/runloop.py): the loop runs the C steps between them, one `run(start, stop)` per stretch.
# Nothing here touches a Python object below `Program.run`'s `with nogil`.

from cpython.buffer cimport PyBUF_SIMPLE, PyBuffer_Release, PyObject_GetBuffer
from libc.stdlib cimport calloc, malloc, free

cdef enum:
    RL_SLOTS = 8            # value slots per step (inputs then outputs, per entry)
    RL_INTS = 56            # integer parameters per step
    RL_FLOATS = 4

    RL_ALIAS = 0            # p[s1] := p[s0] + n0 bytes (a view: Reshape, Squeeze, Unsqueeze, Flatten, Identity)
    RL_COPY = 1             # memmove(p[s1], p[s0], n0 bytes)
    RL_BINARY = 2           # binary_f32_range: n0 op, n1 ndim, n2 total, n3.. shape, sa, sb (BCAST_MAX_DIMS each)
    RL_UNARY = 3            # n0 op (-1 relu, else unary_f32_raw's), n1 count, f0 f1 parameters
    RL_TF_UNARY = 4         # gelu / erf (TF_UNARY_*): n0 op, n1 count
    RL_GEMM_PACKED = 5      # s0 A, s1 packed B, s2 bias (or NULL), s3 residual (or NULL), s4 Y; n0 M, n1 N, n2 K,
                            # n3 act kind (ACT_*), n4 gelu after (1/0); sgemm_packed_ex as FusedMatMul runs it
    RL_LAYERNORM = 6        # s0 x, s1 scale, s2 bias, s3 y, s4 mean, s5 inv_std; n0 R, n1 C; f0 eps
    RL_SOFTMAX = 7          # s0 x, s1 y; n0 R, n1 K, n2 log
    RL_STRIDED = 8          # s0 x, s1 y: rl_strided_copy; n0 itemsize, n1 ndim, n2 byte offset into x, n3.. shape,
                            # n9.. x strides, n15.. y strides (bytes, RL_MAXD each)
    RL_WHERE = 9            # s0 cond, s1 a, s2 b, s3 y: rl_where; n0 itemsize, n1 ndim, n2.. shape, then cond, a, b
                            # strides (bytes, RL_MAXD each)
    RL_CONCAT = 10          # s0 .. s[k-1] inputs, s[k] y: rl_concat; n0 k, n1 rows, n2 row bytes of y, n3.. chunks
    RL_CAST = 11            # s0 x, s1 y: rl_cast; n0 count, n1 from, n2 to (RL_T_*)
    RL_ROW_SUM = 12         # s0 x, s1 y: rl_row_sum; n0 rows, n1 row length, n2 mean (1/0)
    RL_CUBE = 13            # s0 x, s1 y: rl_cube; n0 count
    RL_ISNAN = 14           # s0 x, s1 y: rl_isnan; n0 count
    RL_COMPARE = 15         # s0 a, s1 b (NULL for Not: a again), s2 y: rl_compare; n0 op, n1 type, n2 ndim, n3.. shape,
                            # a strides, b strides (bytes, RL_MAXD each)
    RL_GEMM_BATCHED = 16    # s0 A, s1 B, s2 C, s3 a_off, s4 b_off, s5 c_off (int64); n0 items, n1 M, n2 N, n3 K,
                            # n4.. rsa, csa, rsb, csb, rsc, csc; f0 alpha: as sgemm_batched_f32 runs it
    RL_GATHER = 17          # s0 x, s1 indices, s2 y: rl_gather; n0 outer, n1 axis dim, n2 indices, n3 row bytes,
                            # n4 8 (int64 indices) or 4; an index out of range stops the run (p[0] set, see Program.run)
    RL_SPLIT = 18           # s0 x, s1 .. s[k] outputs: rl_split; n0 k, n1 rows, n2 row bytes of x, n3.. chunks
    RL_ATTENTION = 19       # s0 q, s1 k, s2 v, s3 y, s4 offsets (int64), s5.. masks; n: ATP_* ; f0 alpha, f1.. fills:
                            # as attention_masked_f32 runs it (gemm slice)
    RL_NFNS = 20

cdef extern from "rl_ops.h" nogil:
    enum: RL_MAXD
    void rl_strided_copy(char* dst, const char* src, Py_ssize_t item, int nd, const Py_ssize_t* shape,
                         const Py_ssize_t* ss, const Py_ssize_t* ds)
    void rl_where(char* y, const char* c, const char* a, const char* b, Py_ssize_t item, int nd,
                  const Py_ssize_t* shape, const Py_ssize_t* sc, const Py_ssize_t* sa, const Py_ssize_t* sb)
    void rl_concat(char* y, char* const* xs, int k, Py_ssize_t rows, Py_ssize_t orow, const Py_ssize_t* chunk)
    void rl_cast(const char* x, char* y, Py_ssize_t n, int s, int d)
    void rl_split(const char* x, char* const* ys, int k, Py_ssize_t rows, Py_ssize_t xrow, const Py_ssize_t* chunk)
    void rl_row_sum(const float* x, float* y, Py_ssize_t R, Py_ssize_t C, int mean)
    void rl_cube(const float* x, float* y, Py_ssize_t n)
    int rl_gather(const char* x, const char* idx, char* y, Py_ssize_t outer, Py_ssize_t n, Py_ssize_t nidx,
                  Py_ssize_t inner, int wide)
    void rl_isnan(const float* x, uint8_t* y, Py_ssize_t n)
    void rl_compare(int op, int t, uint8_t* y, const char* a, const char* b, int nd, const Py_ssize_t* shape,
                    const Py_ssize_t* sa, const Py_ssize_t* sb)


ctypedef struct RStep:
    int fn
    int nthreads
    int slot[RL_SLOTS]
    Py_ssize_t n[RL_INTS]
    float f[RL_FLOATS]


ctypedef void (*rl_fn)(const RStep* s, char** p) noexcept nogil


cdef void _rl_alias(const RStep* s, char** p) noexcept nogil:
    p[s.slot[1]] = p[s.slot[0]] + s.n[0]


cdef void _rl_copy(const RStep* s, char** p) noexcept nogil:
    if s.n[0] > 0 and p[s.slot[1]] != p[s.slot[0]]:
        memcpy(p[s.slot[1]], p[s.slot[0]], s.n[0])


cdef void _rl_binary(const RStep* s, char** p) noexcept nogil:
    cdef BinaryJob job
    cdef Py_ssize_t total = s.n[2], nchunks
    if total == 0:
        return
    job.op, job.ndim, job.total = <int>s.n[0], <int>s.n[1], total
    job.a, job.b, job.z = <const float*>p[s.slot[0]], <const float*>p[s.slot[1]], <float*>p[s.slot[2]]
    job.shape, job.sa, job.sb = &s.n[3], &s.n[3 + BCAST_MAX_DIMS], &s.n[3 + 2 * BCAST_MAX_DIMS]
    nchunks = (total + ELTWISE_CHUNK - 1) // ELTWISE_CHUNK
    if nchunks < 2:
        binary_f32_range(job.op, job.a, job.b, job.z, job.ndim, job.shape, job.sa, job.sb, 0, total)
    else:
        parallel_for(nchunks, _nthreads(s.nthreads), _binary_task, &job)


cdef void _rl_unary(const RStep* s, char** p) noexcept nogil:
    cdef UnaryJob job
    cdef Py_ssize_t n = s.n[1], nchunks
    if n == 0:
        return
    job.x, job.y, job.n, job.op, job.p0, job.p1 = (<const float*>p[s.slot[0]], <float*>p[s.slot[1]], n,
                                                   <int>s.n[0], s.f[0], s.f[1])
    nchunks = (n + ELTWISE_CHUNK - 1) // ELTWISE_CHUNK
    parallel_for(nchunks, 1 if nchunks < 2 else _nthreads(s.nthreads), _unary_task, &job)


cdef void _rl_tf_unary(const RStep* s, char** p) noexcept nogil:
    cdef TfJob job
    cdef Py_ssize_t n = s.n[1], nchunks
    if n == 0:
        return
    job.x, job.y, job.n, job.op, job.kind = <const float*>p[s.slot[0]], <float*>p[s.slot[1]], n, <int>s.n[0], 0
    nchunks = (n + ELTWISE_CHUNK - 1) // ELTWISE_CHUNK
    parallel_for(nchunks, 1 if nchunks < 2 else _nthreads(s.nthreads), _tf_task, &job)


cdef void _rl_gemm_packed(const RStep* s, char** p) noexcept nogil:
    cdef Py_ssize_t M = s.n[0], N = s.n[1], K = s.n[2]
    cdef Act act
    cdef float* work = NULL
    cdef int nth
    cdef float* y = <float*>p[s.slot[4]]
    cdef TfJob job
    cdef Py_ssize_t n, nchunks
    act.kind, act.a, act.b = <int>s.n[3], 0.0, 0.0
    if M == 0 or N == 0:
        return
    nth = sgemm_threads(M, N, K, s.nthreads)
    if K > 0:
        work = <float*>malloc(sgemm_work_len(nth) * sizeof(float))
        if work == NULL:        # (no way to raise here: the Python step checks the workspace fits at compile time)
            return
    sgemm_packed_ex(M, N, K, 1.0, <const float*>p[s.slot[0]] if K else NULL, K, 1, NULL,
                    <const float*>p[s.slot[1]] if K else NULL, 0.0, y, N, 1, <const float*>p[s.slot[2]], NULL,
                    <const float*>p[s.slot[3]], &act, work, nth)
    free(work)
    if s.n[4]:
        n = M * N
        job.x, job.y, job.n, job.op, job.kind = y, y, n, TF_UNARY_GELU, 0
        nchunks = (n + ELTWISE_CHUNK - 1) // ELTWISE_CHUNK
        parallel_for(nchunks, 1 if nchunks < 2 else _nthreads(s.nthreads), _tf_task, &job)


cdef void _rl_layernorm(const RStep* s, char** p) noexcept nogil:
    cdef TfJob job
    cdef Py_ssize_t R = s.n[0], C = s.n[1]
    if R == 0 or C == 0:
        return
    job.x, job.y, job.n, job.ps, job.pb, job.eps, job.kind = (<const float*>p[s.slot[0]], <float*>p[s.slot[3]], C,
                                                             <const float*>p[s.slot[1]], <const float*>p[s.slot[2]],
                                                             s.f[0], 1)
    job.pm, job.pi = <float*>p[s.slot[4]], <float*>p[s.slot[5]]
    parallel_for(R, 1 if R * C < NORM_PAR_WORK else _nthreads(s.nthreads), _tf_task, &job)


cdef void _rl_softmax(const RStep* s, char** p) noexcept nogil:
    cdef TfJob job
    cdef Py_ssize_t R = s.n[0], K = s.n[1]
    if R == 0 or K == 0:
        return
    job.x, job.y, job.n, job.log, job.kind = <const float*>p[s.slot[0]], <float*>p[s.slot[1]], K, <bint>s.n[2], 2
    parallel_for(R, 1 if R * K < NORM_PAR_WORK else _nthreads(s.nthreads), _tf_task, &job)


cdef void _rl_strided(const RStep* s, char** p) noexcept nogil:
    rl_strided_copy(p[s.slot[1]], p[s.slot[0]] + s.n[2], s.n[0], <int>s.n[1], &s.n[3], &s.n[3 + RL_MAXD],
                    &s.n[3 + 2 * RL_MAXD])


cdef void _rl_where(const RStep* s, char** p) noexcept nogil:
    rl_where(p[s.slot[3]], p[s.slot[0]], p[s.slot[1]], p[s.slot[2]], s.n[0], <int>s.n[1], &s.n[2],
             &s.n[2 + RL_MAXD], &s.n[2 + 2 * RL_MAXD], &s.n[2 + 3 * RL_MAXD])


cdef void _rl_concat(const RStep* s, char** p) noexcept nogil:
    cdef char* xs[RL_SLOTS]
    cdef int i, k = <int>s.n[0]
    for i in range(k):
        xs[i] = p[s.slot[i]]
    rl_concat(p[s.slot[k]], xs, k, s.n[1], s.n[2], &s.n[3])


cdef void _rl_split(const RStep* s, char** p) noexcept nogil:
    cdef char* ys[RL_SLOTS]
    cdef int i, k = <int>s.n[0]
    for i in range(k):
        ys[i] = p[s.slot[1 + i]]
    rl_split(p[s.slot[0]], ys, k, s.n[1], s.n[2], &s.n[3])


cdef void _rl_cast(const RStep* s, char** p) noexcept nogil:
    rl_cast(p[s.slot[0]], p[s.slot[1]], s.n[0], <int>s.n[1], <int>s.n[2])


cdef void _rl_row_sum(const RStep* s, char** p) noexcept nogil:
    rl_row_sum(<const float*>p[s.slot[0]], <float*>p[s.slot[1]], s.n[0], s.n[1], <int>s.n[2])


cdef void _rl_cube(const RStep* s, char** p) noexcept nogil:
    rl_cube(<const float*>p[s.slot[0]], <float*>p[s.slot[1]], s.n[0])


cdef void _rl_isnan(const RStep* s, char** p) noexcept nogil:
    rl_isnan(<const float*>p[s.slot[0]], <uint8_t*>p[s.slot[1]], s.n[0])


cdef void _rl_compare(const RStep* s, char** p) noexcept nogil:
    rl_compare(<int>s.n[0], <int>s.n[1], <uint8_t*>p[s.slot[2]], p[s.slot[0]], p[s.slot[1]], <int>s.n[2], &s.n[3],
               &s.n[3 + RL_MAXD], &s.n[3 + 2 * RL_MAXD])


cdef void _rl_gemm_batched(const RStep* s, char** p) noexcept nogil:
    cdef Py_ssize_t T = s.n[0], M = s.n[1], N = s.n[2], K = s.n[3], t, blen, wlen
    cdef const float* a = <const float*>p[s.slot[0]]
    cdef const float* b = <const float*>p[s.slot[1]]
    cdef float* c = <float*>p[s.slot[2]]
    cdef const int64_t* ao = <const int64_t*>p[s.slot[3]]
    cdef const int64_t* bo = <const int64_t*>p[s.slot[4]]
    cdef const int64_t* co = <const int64_t*>p[s.slot[5]]
    cdef int nth = _nthreads(s.nthreads)
    cdef bint per_item = nth > 1 and T >= nth and <double>2.0 * M * N * K * T >= SGEMM_MT_FLOPS
    cdef BatchedJob job
    cdef float* buf
    if T == 0 or M == 0 or N == 0 or K == 0:     # (c_step takes K > 0 only)
        return
    blen = sgemm_pack_b_len(K, N)
    wlen = blen + SGEMM_WORK_PER_THREAD
    if not per_item:
        nth = sgemm_threads(M, N, K, s.nthreads)
    buf = <float*>malloc((nth * wlen if per_item else blen + sgemm_work_len(nth)) * sizeof(float))
    if buf == NULL:
        return
    if per_item:
        job.M, job.N, job.K, job.alpha, job.a, job.rsa, job.csa = M, N, K, s.f[0], a, s.n[4], s.n[5]
        job.b, job.rsb, job.csb, job.c, job.rsc, job.csc = b, s.n[6], s.n[7], c, s.n[8], s.n[9]
        job.a_off, job.b_off, job.c_off, job.buf, job.wlen, job.blen = ao, bo, co, buf, wlen, blen
        parallel_for(T, nth, _sgemm_item_task, &job)
    else:
        for t in range(T):
            _sgemm_item(M, N, K, s.f[0], a + ao[t], s.n[4], s.n[5], b + bo[t], s.n[6], s.n[7], c + co[t], s.n[8],
                        s.n[9], buf, buf + blen, nth)
    free(buf)


cdef void _rl_gather(const RStep* s, char** p) noexcept nogil:
    if rl_gather(p[s.slot[0]], p[s.slot[1]], p[s.slot[2]], s.n[0], s.n[1], s.n[2], s.n[3], s.n[4] == 8) != 0:
        p[0] = <char*>1       # the error mark: Program.run stops here and reports the step


def row_sum_f32(const float[::1] x, float[::1] y, Py_ssize_t C):
    """y[r] := sum of x[r * C:(r + 1) * C] (rl_row_sum, as the run loop's RL_ROW_SUM step runs it)."""
    cdef Py_ssize_t R = y.shape[0]
    if C < 0 or x.shape[0] != R * C:
        raise ValueError(f"row_sum_f32: {x.shape[0]} elements for {R} rows of {C}")
    if R == 0:
        return
    if C == 0:
        y[:] = 0
        return
    with nogil:
        rl_row_sum(&x[0], &y[0], R, C, 0)


cdef void _rl_attention(const RStep* s, char** p) noexcept nogil:
    cdef char* ptrs[5 + ATTN_NMASK_MAX]
    cdef AttnJob job
    cdef int i
    for i in range(5 + ATTN_NMASK_MAX):
        ptrs[i] = p[s.slot[i]]
    attention_job(&job, ptrs, s.n, s.f)
    if attention_run_raw(&job, s.n[ATP_T], s.nthreads) != 0:
        p[0] = <char*>1       # the error mark (no memory for the workspace)


cdef rl_fn _RL_FNS[RL_NFNS]
_RL_FNS[RL_ALIAS] = _rl_alias
_RL_FNS[RL_COPY] = _rl_copy
_RL_FNS[RL_BINARY] = _rl_binary
_RL_FNS[RL_UNARY] = _rl_unary
_RL_FNS[RL_TF_UNARY] = _rl_tf_unary
_RL_FNS[RL_GEMM_PACKED] = _rl_gemm_packed
_RL_FNS[RL_LAYERNORM] = _rl_layernorm
_RL_FNS[RL_SOFTMAX] = _rl_softmax
_RL_FNS[RL_STRIDED] = _rl_strided
_RL_FNS[RL_WHERE] = _rl_where
_RL_FNS[RL_CONCAT] = _rl_concat
_RL_FNS[RL_CAST] = _rl_cast
_RL_FNS[RL_ROW_SUM] = _rl_row_sum
_RL_FNS[RL_CUBE] = _rl_cube
_RL_FNS[RL_ISNAN] = _rl_isnan
_RL_FNS[RL_COMPARE] = _rl_compare
_RL_FNS[RL_GEMM_BATCHED] = _rl_gemm_batched
_RL_FNS[RL_GATHER] = _rl_gather
_RL_FNS[RL_SPLIT] = _rl_split
_RL_FNS[RL_ATTENTION] = _rl_attention

#: the entries' ids, for the kernels' c_step (onnxep/backends/cpu/runloop.py)
RUNLOOP_FNS = {"alias": RL_ALIAS, "copy": RL_COPY, "binary": RL_BINARY, "unary": RL_UNARY, "tf_unary": RL_TF_UNARY,
               "gemm_packed": RL_GEMM_PACKED, "layernorm": RL_LAYERNORM, "softmax": RL_SOFTMAX,
               "strided": RL_STRIDED, "where": RL_WHERE, "concat": RL_CONCAT, "cast": RL_CAST,
               "row_sum": RL_ROW_SUM, "cube": RL_CUBE, "isnan": RL_ISNAN, "compare": RL_COMPARE,
               "gemm_batched": RL_GEMM_BATCHED, "gather": RL_GATHER,
               "split": RL_SPLIT, "attention": RL_ATTENTION}
RUNLOOP_LIMITS = {"slots": RL_SLOTS, "ints": RL_INTS, "floats": RL_FLOATS, "bcast_dims": BCAST_MAX_DIMS,
                  "copy_dims": RL_MAXD}


cdef inline char* _rl_address(object obj) except? NULL:
    cdef Py_buffer view
    cdef char* addr
    PyObject_GetBuffer(obj, &view, PyBUF_SIMPLE)
    addr = <char*>view.buf
    PyBuffer_Release(&view)
    return addr


cdef class Program:
    """A compiled plan's steps and pointer table (see the top of this file). `keep` holds the objects whose memory
    the fixed slots point into, for the program's lifetime."""

    cdef RStep* steps
    cdef char** ptrs
    cdef readonly int nsteps, nslots
    cdef public object keep

    def __cinit__(self, int nsteps, int nslots):
        if nsteps < 0 or nslots < 1:
            raise ValueError(f"Program: {nsteps} steps, {nslots} slots")
        self.steps = <RStep*>calloc(max(nsteps, 1), sizeof(RStep))
        self.ptrs = <char**>calloc(nslots, sizeof(char*))
        if self.steps == NULL or self.ptrs == NULL:
            raise MemoryError("Program: cannot allocate the step array")
        self.nsteps, self.nslots = nsteps, nslots
        self.keep = []

    def __dealloc__(self):
        free(self.steps)
        free(self.ptrs)

    def set_step(self, int i, int fn, slots, ints, floats, int nthreads):
        cdef RStep* s
        cdef int k
        if not 0 <= i < self.nsteps or not 0 <= fn < RL_NFNS:
            raise ValueError(f"Program.set_step: step {i} of {self.nsteps}, entry {fn}")
        if len(slots) > RL_SLOTS or len(ints) > RL_INTS or len(floats) > RL_FLOATS:
            raise ValueError(f"Program.set_step: {len(slots)} slots, {len(ints)} ints, {len(floats)} floats")
        s = &self.steps[i]
        memset(s, 0, sizeof(RStep))
        s.fn, s.nthreads = fn, nthreads
        for k in range(len(slots)):
            if not 0 <= slots[k] < self.nslots:
                raise ValueError(f"Program.set_step: slot {slots[k]} of {self.nslots}")
            s.slot[k] = slots[k]
        for k in range(len(ints)):
            s.n[k] = ints[k]
        for k in range(len(floats)):
            s.f[k] = floats[k]

    def set_ptr(self, int slot, obj):
        """Point `slot` at the first byte of `obj` (a C-contiguous buffer; None: NULL)."""
        if not 0 < slot < self.nslots:
            raise ValueError(f"Program.set_ptr: slot {slot} of {self.nslots} (slot 0 stays NULL)")
        self.ptrs[slot] = NULL if obj is None else _rl_address(obj)

    def set_ptrs(self, slots, objs):
        """set_ptr for each pair (the per-run patch)."""
        cdef int slot
        for slot, obj in zip(slots, objs):
            if not 0 < slot < self.nslots:
                raise ValueError(f"Program.set_ptrs: slot {slot} of {self.nslots}")
            self.ptrs[slot] = _rl_address(obj)

    def address(self, int slot):
        if not 0 <= slot < self.nslots:
            raise ValueError(f"Program.address: slot {slot} of {self.nslots}")
        return <size_t>self.ptrs[slot]

    def run(self, int start, int stop):
        """Run steps start .. stop - 1 without the GIL; -1, or the step that found bad input (an entry sets slot 0,
        which is NULL otherwise): the steps after it did not run and the caller redoes that step in Python, where it
        raises its named error."""
        cdef int i, bad = -1
        if not 0 <= start <= stop <= self.nsteps:
            raise ValueError(f"Program.run: steps {start}..{stop} of {self.nsteps}")
        with nogil:
            for i in range(start, stop):
                _RL_FNS[self.steps[i].fn](&self.steps[i], self.ptrs)
                if self.ptrs[0] != NULL:
                    self.ptrs[0] = NULL
                    bad = i
                    break
        return bad
