# The compiled run loop (DESIGN "The run loop"): a plan compiled for one input signature into a flat array of steps,
# walked without the GIL. A step is a C entry (RL_* below) and its prepared arguments: value slots (indices into the
# program's pointer table: slot 0 is always NULL), integer and float parameters and a thread count, all fixed when the
# program is made. The pointer table is the only thing a run patches: the slots of values whose address changes from
# run to run (feeds, outputs handed to the user, values a Python step made). Steps without a C entry stay in Python
# (onnxep/backends/cpu/runloop.py): the loop runs the C steps between them, one `run(start, stop)` per stretch.
# Nothing here touches a Python object below `Program.run`'s `with nogil`.

from cpython.buffer cimport PyBUF_SIMPLE, PyBuffer_Release, PyObject_GetBuffer
from libc.stdlib cimport calloc, malloc, free
from posix.time cimport CLOCK_MONOTONIC, clock_gettime, timespec

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
                            # n3 act kind (ACT_*, Gelu's too); sgemm_packed_ex as FusedMatMul runs it
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
    # decoder slice
    RL_RMS_NORM = 19        # s0 x, s1 scale, s2 y: rl_rms_norm_rows; n0 R, n1 C; f0 eps
    RL_ROTARY = 20          # s0 x, s1 cos, s2 sin, s3 y: rl_rotary_rows; n0 rows, n1 D, n2 cl, n3 sl, n4 interleaved,
                            # n5 ndim, n6.. shape, cos strides, sin strides (bytes, RL_MAXD each)
    RL_GATHER_ND = 21       # s0 data, s1 indices, s2 y: rl_gather_nd; n0 rows, n1 k, n2 rows per batch, n3 data rows
                            # per batch, n4 row bytes, n5 8 (int64 indices) or 4, n6.. dims, n12.. multipliers
                            # (RL_MAXD each); an index out of range stops the run as RL_GATHER's does
    RL_ARG = 22             # s0 x, s1 y: rl_arg_extreme; n0 outer, n1 n, n2 inner, n3 type, n4 max (1/0), n5 last
    RL_BINARY_INT = 23      # s0 a, s1 b, s2 y: rl_binary_int; n0 op, n1 ndim, n2.. shape, a strides, b strides
                            # (RL_MAXD each), then 8 (int64) or 4 (int32)
    RL_CUMSUM = 24          # s0 x, s1 y: rl_cumsum; n0 outer, n1 n, n2 inner, n3 type, n4 exclusive, n5 reverse
    RL_MASKED_SOFTMAX = 25  # s0 x, s1 mask, s2 mask row offsets (int64), s3 y; n0 R, n1 K, n2 mask column stride:
                            # the TfJob of softmax_mask_lastaxis_f32
    RL_GATHER_ELEMENTS = 26 # s0 x, s1 indices, s2 y: rl_gather_elements; n0 ndim, n1 axis, n2 x's axis dim, n3 item
                            # bytes, n4 8 (int64 indices) or 4, n5.. shape, x strides (RL_MAXD each); an index out of
                            # range stops the run as RL_GATHER's does
    # eltwise slice
    RL_SILU_GATE = 27       # s0 x, s1 gate, s2 y: y := x * sigmoid(f0 * x) * gate (UN_SILU_GATE); n0 count
    # conv slice: NhwcConv's two kernels (onnxep/ops/onnxep/nhwc_conv.py c_step); a workspace that cannot be
    # allocated stops the run as rl_gather's error does
    RL_CONV_NHWC = 28       # s0 x, s1 packed W, s2 bias, s3 residual (or NULL), s4 y: conv_nhwc_step; n0.. and f0 f1
                            # ConvNhwc.step_args
    RL_DW_NHWC = 29         # s0 x, s1 packed W, s2 bias (or NULL), s3 y: dw_nhwc_step; n0.. f0 f1 dw_nhwc_step_args
    RL_GROUP_NORM = 30      # s0 x, s1 gamma, s2 beta, s3 y: group_norm_c; n0 N, n1 C, n2 S, n3 G, n4 silu, n5 layout
                            # (0 NCHW, 1 NHWC, 2 NCHW -> NHWC); f0 eps
    RL_RESIZE2 = 31         # s0 x, s1 ih, s2 wh, s3 iw, s4 ww, s5 y: resize2_c; n0 planes, n1 IH, n2 IW, n3 OH, n4 OW
    RL_ATTENTION = 32       # s0 q, s1 k, s2 v, s3 y, s4 offsets (int64), s5.. masks; n: ATP_* ; f0 alpha, f1.. fills:
                            # as attention_masked_f32 runs it
    RL_GPOOL_NHWC = 33      # s0 x, s1 y: global_pool_nhwc_c; n0 N, n1 S, n2 C, n3 max (1/0)
    # conv slice: the channel-last window pools (onnxep/ops/onnxep/nhwc_pool.py c_step)
    RL_POOL_NHWC = 34       # s0 x, s1 y: _poolnhwc_f32; n0 N, n1 C, n2 mode (0 max, 1 average), n3 count_include_pad,
                            # n4.. the 21-entry pooling geometry (PoolAttrs.geom_vector)
    # threads slice: a conv writing its channel slice of a Concat's output (the plan slot), pixels n24 floats apart
    RL_CONV_NHWC_LDY = 35   # s0 x, s1 packed W, s2 bias, s3 NULL, s4 y at the slice's first channel: n0..n23 and
                            # f0 f1 as RL_CONV_NHWC, n24 ldy (the Concat output's channels)
    # vit slice: Transpose through transpose_copy's tiled kernels (onnxep/ops/tensor/transpose.py c_step)
    RL_TRANSPOSE = 36       # s0 x, s1 y: _tr_exec; n: the _tr_plan plan (TRP_* entries, then the loop dims)
    RL_DQ_MATMUL = 37       # s0 A, s1 packed B, s2 zb (int32), s3 b_scale, s4 bias (or NULL), s5 y:
                            # _qg_dq_matmul_raw; n0 M, n1 K, n2 N, n3 zb stride, n4 scale stride (0 / 1)
    RL_QUANTIZE = 38        # s0 x, s1 y: qg_quantize_tensor; n0 count, n1 signed; f0 scale, f1 zero point
    RL_DEQUANTIZE = 39      # s0 q, s1 y: qg_dequantize_tensor; n0 count, n1 signed; f0 scale, f1 zp
    RL_BGEMM = 40           # s0 A, s1 bf16-packed B, s2 bias (or NULL), s3 residual (or NULL), s4 Y;
                            # n0 M, n1 N, n2 K, n3 act kind (ACT_*); f0 alpha: bgemm_run
    RL_QDQ = 41             # s0 x, s1 y: _qg_qdq_run; n0 count, n1 signed; f0 scale, f1 zero point
    RL_BCONV_NHWC = 42      # (bf16) s0 x, s1 bf16-packed W, s2 bias (or NULL), s3 residual (or NULL), s4 y:
                            # bconv_step; n0.. f0 f1 BConvNhwc.step_args
    RL_QCONV = 43           # s0 x, s1 packed / depthwise W, s2 zb, s3 bias (or NULL), s4 mult, s5 y:
                            # _qc_run_raw; n0..n20 QCONV_PARAMS (_k_qconv.pxi); f0 y zero point, f1 qlo, f2 qhi
    RL_QLINEAR_MATMUL = 44  # s0 A, s1 packed B, s2 zb (int32), s3 mult, s4 bias (int32 or NULL), s5 y:
                            # _qg_qlinear_raw; n0 M, n1 K, n2 N, n3 a signed, n4 a zero point, n5 zb stride, n6 mult
                            # stride, n7 y signed; f0 y zero point, f1 qlo, f2 qhi
    RL_QLINEAR_ADD = 45     # s0 a, s1 b, s2 y: _qg_qadd_run; n0 count, n1 b's count (repeating), n2 a
                            # signed, n3 b signed, n4 y signed, n5 a zero point, n6 b zp, n7 y zp; f0 a scale, f1 b
                            # scale, f2 y scale
    RL_CONV_NCHW = 46       # s0 x, s1 packed W, s2 bias (or NULL), s3 y: conv_nchw_exec; n0..n21
                            # conv_nchw_step_args (N, C, D, H, W, cout, group, kernel, strides, dilations, pads, out)
    RL_BCONV_NHWC_LDY = 47  # (bf16) as RL_BCONV_NHWC, s3 NULL, s4 y at the slice's first channel; n19 ldy (the
                            # Concat output's channels)
    RL_GEMV = 48            # s0 a, s1 W as stored, s2 bias (or NULL), s3 y: gemv_run; n0 K, n1 N,
                            # n2 trans_b, n3 act kind (ACT_*), n4 rows M: FusedMatMul's one-row path, the
                            # tiny-N GEMMs (ops/_gemv.py)
    RL_ROWS = 49            # s0 x, s1 a (or NULL), s2 b (or NULL), s3 y: _rows_task over n0 channel-last
                            # rows of n1; n2 kind (RowsJob's: 1 ChannelAffine, 3 NhwcLRN), n3 relu, n4 lo, n5 hi, n6
                            # window (work per element, for NORM_PAR_WORK); f0 alpha_n, f1 beta, f2 bias
    RL_PW_DW_NHWC = 50      # s0 x, s1 pointwise W (packed), s2 its bias (or NULL), s3 depthwise W (packed), s4 its
                            # bias (or NULL), s5 y: pw_dw_nhwc_step; n0.. f0.. pw_dw_nhwc_step_args
    RL_NFNS = 51

cdef extern from "_native/rl_ops.h" nogil:
    enum: RL_MAXD
    Py_ssize_t rl_count(int nd, const Py_ssize_t* shape)
    void rl_strided_copy(char* dst, const char* src, Py_ssize_t item, int nd, const Py_ssize_t* shape,
                         const Py_ssize_t* ss, const Py_ssize_t* ds, Py_ssize_t r0, Py_ssize_t r1)
    void rl_where(char* y, const char* c, const char* a, const char* b, Py_ssize_t item, int nd,
                  const Py_ssize_t* shape, const Py_ssize_t* sc, const Py_ssize_t* sa, const Py_ssize_t* sb)
    void rl_concat(char* y, char* const* xs, int k, Py_ssize_t r0, Py_ssize_t r1, Py_ssize_t orow,
                   const Py_ssize_t* chunk)
    void rl_cast(const char* x, char* y, Py_ssize_t n, int s, int d)
    void rl_split(const char* x, char* const* ys, int k, Py_ssize_t r0, Py_ssize_t r1, Py_ssize_t xrow,
                  const Py_ssize_t* chunk)
    void rl_row_sum(const float* x, float* y, Py_ssize_t R, Py_ssize_t C, int mean)
    void rl_cube(const float* x, float* y, Py_ssize_t n)
    int rl_gather(const char* x, const char* idx, char* y, Py_ssize_t outer, Py_ssize_t n, Py_ssize_t nidx,
                  Py_ssize_t inner, int wide)
    void rl_isnan(const float* x, uint8_t* y, Py_ssize_t n)
    void rl_compare(int op, int t, uint8_t* y, const char* a, const char* b, int nd, const Py_ssize_t* shape,
                    const Py_ssize_t* sa, const Py_ssize_t* sb)
    # decoder slice
    void rl_rms_norm_rows(const float* x, const float* s, float* y, Py_ssize_t r0, Py_ssize_t r1, Py_ssize_t C,
                          float eps)
    void rl_rotary_rows(const float* x, const char* c, const char* s, float* y, int nd, const Py_ssize_t* shape,
                        const Py_ssize_t* sc, const Py_ssize_t* ss, Py_ssize_t D, int cl, int sl, int inter,
                        Py_ssize_t r0, Py_ssize_t r1)
    int rl_gather_nd(const char* data, const char* idx, char* y, Py_ssize_t n, int k, Py_ssize_t nb,
                     Py_ssize_t per, Py_ssize_t inner, int wide, const Py_ssize_t* dim, const Py_ssize_t* mult)
    void rl_arg_extreme(const char* x, int64_t* y, Py_ssize_t outer, Py_ssize_t n, Py_ssize_t inner, int t,
                        int mx, int last)
    void rl_binary_int(int op, int wide, char* y, const char* a, const char* b, int nd, const Py_ssize_t* shape,
                       const Py_ssize_t* sa, const Py_ssize_t* sb)
    int rl_gather_elements(const char* x, const char* idx, char* y, int nd, int axis, Py_ssize_t n,
                           Py_ssize_t item, const Py_ssize_t* shape, const Py_ssize_t* xs, int wide)
    void rl_cumsum(const char* x, char* y, Py_ssize_t outer, Py_ssize_t n, Py_ssize_t inner, int t, int excl,
                   int rev)


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


cdef void _rl_layernorm(const RStep* s, char** p) noexcept nogil:
    cdef TfJob job
    cdef Py_ssize_t R = s.n[0], C = s.n[1]
    if R == 0 or C == 0:
        return
    job.x, job.y, job.n, job.ps, job.pb, job.eps, job.kind = (<const float*>p[s.slot[0]], <float*>p[s.slot[3]], C,
                                                             <const float*>p[s.slot[1]], <const float*>p[s.slot[2]],
                                                             s.f[0], 1)
    job.pm, job.pi = <float*>p[s.slot[4]], <float*>p[s.slot[5]]
    job.rows = R
    parallel_for((R + LN_ROWS - 1) // LN_ROWS, 1 if R * C < NORM_PAR_WORK else _nthreads(s.nthreads), _tf_task, &job)


cdef void _rl_softmax(const RStep* s, char** p) noexcept nogil:
    cdef TfJob job
    cdef Py_ssize_t R = s.n[0], K = s.n[1]
    if R == 0 or K == 0:
        return
    job.x, job.y, job.n, job.log, job.kind = <const float*>p[s.slot[0]], <float*>p[s.slot[1]], K, <bint>s.n[2], 2
    parallel_for(R, 1 if R * K < NORM_PAR_WORK else _nthreads(s.nthreads), _tf_task, &job)


# The copy steps (RL_STRIDED, RL_CONCAT, RL_SPLIT) split their rows over the threads from COPY_PAR_BYTES (256 KiB,
# _k_threads.pxi), in items
# of about RL_COPY_ITEM bytes (an L1 data cache's worth on every target). Why: a copy that large reads mostly from
# L2 / L3 -- or from the other core's cache, when a parallel step wrote it -- and takes ~10 us on one core, several
# times a call to a spinning worker; below it the copy stays on its caller (unet's 768 KiB Split of a two-thread
# GEMM's output: 42-53 us on one thread, 84-92 us at two threads, where half its lines come from the other core).
cdef enum:
    RL_COPY_ITEM = 32768

cdef struct CopyJob:
    const RStep* s
    char** p
    Py_ssize_t rows, per


cdef void _rl_copy_rows(const RStep* s, char** p, Py_ssize_t r0, Py_ssize_t r1) noexcept nogil:
    cdef char* q[RL_SLOTS]
    cdef int i, k = <int>s.n[0]
    if s.fn == RL_STRIDED:
        rl_strided_copy(p[s.slot[1]], p[s.slot[0]] + s.n[2], s.n[0], <int>s.n[1], &s.n[3], &s.n[3 + RL_MAXD],
                        &s.n[3 + 2 * RL_MAXD], r0, r1)
    elif s.fn == RL_CONCAT:
        for i in range(k):
            q[i] = p[s.slot[i]]
        rl_concat(p[s.slot[k]], q, k, r0, r1, s.n[2], &s.n[3])
    else:
        for i in range(k):
            q[i] = p[s.slot[1 + i]]
        rl_split(p[s.slot[0]], q, k, r0, r1, s.n[2], &s.n[3])


cdef void _copy_task(void* ctx, Py_ssize_t t, int tid) noexcept nogil:
    cdef CopyJob* j = <CopyJob*>ctx
    _rl_copy_rows(j.s, j.p, t * j.per, min(t * j.per + j.per, j.rows))


cdef void _rl_copy_split(const RStep* s, char** p, Py_ssize_t rows, Py_ssize_t row_bytes) noexcept nogil:
    """A copy step's `rows` rows of row_bytes each, over the threads from COPY_PAR_BYTES."""
    cdef CopyJob job
    cdef Py_ssize_t items
    if rows <= 0:
        return
    if rows < 2 or rows * row_bytes < COPY_PAR_BYTES:
        _rl_copy_rows(s, p, 0, rows)
        return
    job.s, job.p, job.rows = s, p, rows
    job.per = max(RL_COPY_ITEM // max(row_bytes, 1), 1)
    items = (rows + job.per - 1) // job.per
    parallel_for(items, 1 if items < 2 else _nthreads(s.nthreads), _copy_task, &job)


cdef void _rl_strided(const RStep* s, char** p) noexcept nogil:
    cdef int nd = <int>s.n[1]
    _rl_copy_split(s, p, rl_count(nd - 1, &s.n[3]), s.n[3 + nd - 1] * s.n[0])


cdef void _rl_where(const RStep* s, char** p) noexcept nogil:
    rl_where(p[s.slot[3]], p[s.slot[0]], p[s.slot[1]], p[s.slot[2]], s.n[0], <int>s.n[1], &s.n[2],
             &s.n[2 + RL_MAXD], &s.n[2 + 2 * RL_MAXD], &s.n[2 + 3 * RL_MAXD])


cdef void _rl_concat(const RStep* s, char** p) noexcept nogil:
    _rl_copy_split(s, p, s.n[1], s.n[2])


cdef void _rl_split(const RStep* s, char** p) noexcept nogil:
    _rl_copy_split(s, p, s.n[1], s.n[2])


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
    cdef bint per_item = nth > 1 and T >= nth and gemm_splits(<double>2.0 * M * N * K * T, nth)
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


# ---- decoder slice: RMS normalization, rotary embeddings (row chunks on the pool), GatherND, ArgMax, int64 ----

cdef enum:
    DEC_PAR_WORK = 32768    # elements below which an RMS norm / rotary call stays on one thread
    DEC_CHUNK = 8192        # elements per parallel chunk (whole rows)


ctypedef struct DecJob:
    const float* x
    const char* c
    const char* s
    float* y
    int nd, cl, sl, inter, kind
    const Py_ssize_t* shape
    const Py_ssize_t* sc
    const Py_ssize_t* ss
    Py_ssize_t R, C, chunk
    float eps


cdef void _dec_task(void* ctx, Py_ssize_t item, int tid) noexcept nogil:
    cdef DecJob* j = <DecJob*>ctx
    cdef Py_ssize_t r0 = item * j.chunk, r1 = min(j.R, r0 + j.chunk)
    if j.kind == 0:
        rl_rms_norm_rows(j.x, <const float*>j.c, j.y, r0, r1, j.C, j.eps)
    else:
        rl_rotary_rows(j.x, j.c, j.s, j.y, j.nd, j.shape, j.sc, j.ss, j.C, j.cl, j.sl, j.inter, r0, r1)


cdef void _dec_run(DecJob* j, int nthreads) noexcept nogil:
    cdef Py_ssize_t n
    if j.R == 0 or j.C == 0:
        return
    if j.R * j.C < DEC_PAR_WORK or j.R < 2:
        j.chunk = j.R
        _dec_task(j, 0, 0)
        return
    j.chunk = max(1, DEC_CHUNK // j.C)
    n = (j.R + j.chunk - 1) // j.chunk
    parallel_for(n, _nthreads(nthreads), _dec_task, j)


cdef void _rl_rms_norm(const RStep* s, char** p) noexcept nogil:
    cdef DecJob j
    j.kind, j.x, j.c, j.y, j.R, j.C, j.eps, j.chunk = (0, <const float*>p[s.slot[0]], p[s.slot[1]],
                                                       <float*>p[s.slot[2]], s.n[0], s.n[1], s.f[0], s.n[0])
    _dec_run(&j, s.nthreads)


cdef void _rl_rotary(const RStep* s, char** p) noexcept nogil:
    cdef DecJob j
    j.kind, j.x, j.c, j.s, j.y = 1, <const float*>p[s.slot[0]], p[s.slot[1]], p[s.slot[2]], <float*>p[s.slot[3]]
    j.R, j.C, j.cl, j.sl, j.inter, j.nd = s.n[0], s.n[1], <int>s.n[2], <int>s.n[3], <int>s.n[4], <int>s.n[5]
    j.shape, j.sc, j.ss, j.chunk = &s.n[6], &s.n[6 + RL_MAXD], &s.n[6 + 2 * RL_MAXD], s.n[0]
    _dec_run(&j, s.nthreads)


cdef void _rl_gather_nd(const RStep* s, char** p) noexcept nogil:
    if rl_gather_nd(p[s.slot[0]], p[s.slot[1]], p[s.slot[2]], s.n[0], <int>s.n[1], s.n[2], s.n[3], s.n[4],
                    s.n[5] == 8, &s.n[6], &s.n[6 + RL_MAXD]) != 0:
        p[0] = <char*>1       # the error mark, as _rl_gather


cdef void _rl_arg(const RStep* s, char** p) noexcept nogil:
    rl_arg_extreme(p[s.slot[0]], <int64_t*>p[s.slot[1]], s.n[0], s.n[1], s.n[2], <int>s.n[3], <int>s.n[4],
                   <int>s.n[5])


cdef void _rl_binary_int(const RStep* s, char** p) noexcept nogil:
    rl_binary_int(<int>s.n[0], s.n[2 + 3 * RL_MAXD] == 8, p[s.slot[2]], p[s.slot[0]], p[s.slot[1]], <int>s.n[1],
                  &s.n[2], &s.n[2 + RL_MAXD], &s.n[2 + 2 * RL_MAXD])


cdef void _rl_gather_elements(const RStep* s, char** p) noexcept nogil:
    if rl_gather_elements(p[s.slot[0]], p[s.slot[1]], p[s.slot[2]], <int>s.n[0], <int>s.n[1], s.n[2], s.n[3],
                          &s.n[5], &s.n[5 + RL_MAXD], s.n[4] == 8) != 0:
        p[0] = <char*>1       # the error mark, as _rl_gather


cdef void _rl_cumsum(const RStep* s, char** p) noexcept nogil:
    rl_cumsum(p[s.slot[0]], p[s.slot[1]], s.n[0], s.n[1], s.n[2], <int>s.n[3], <int>s.n[4], <int>s.n[5])


cdef void _rl_masked_softmax(const RStep* s, char** p) noexcept nogil:
    cdef TfJob job
    cdef Py_ssize_t R = s.n[0], K = s.n[1]
    if R == 0 or K == 0:
        return
    job.x, job.y, job.n, job.log, job.kind = <const float*>p[s.slot[0]], <float*>p[s.slot[3]], K, 0, 3
    job.mask, job.mask_off, job.mask_cs = <const float*>p[s.slot[1]], <const int64_t*>p[s.slot[2]], s.n[2]
    parallel_for(R, 1 if R * K < NORM_PAR_WORK else _nthreads(s.nthreads), _tf_task, &job)


def cumsum_run(x, y, Py_ssize_t outer, Py_ssize_t n, Py_ssize_t inner, int t, bint exclusive, bint reverse):
    """rl_cumsum on C-contiguous x, y of outer * n * inner elements of type code t (RL_T_F32 / I64 / I32), as the
    RL_CUMSUM step runs it."""
    cdef Py_buffer bx, by
    cdef Py_ssize_t size = 4 if t in (0, 3) else 8
    if t not in (0, 2, 3) or outer < 0 or n < 0 or inner < 0:
        raise ValueError(f"cumsum_run: type {t}, {outer}x{n}x{inner}")
    PyObject_GetBuffer(x, &bx, PyBUF_SIMPLE)
    try:
        PyObject_GetBuffer(y, &by, PyBUF_SIMPLE)
        try:
            if bx.len != outer * n * inner * size or by.len != bx.len:
                raise ValueError(f"cumsum_run: {bx.len} / {by.len} bytes for {outer}x{n}x{inner} of {size}")
            with nogil:
                rl_cumsum(<const char*>bx.buf, <char*>by.buf, outer, n, inner, t, exclusive, reverse)
        finally:
            PyBuffer_Release(&by)
    finally:
        PyBuffer_Release(&bx)


def rms_norm_f32(const float[:, ::1] x, const float[::1] scale, float[:, ::1] y, float epsilon, int nthreads=0):
    """y[r, :] := x[r, :] / sqrt(mean(x[r, :]^2) + epsilon) * scale (rl_rms_norm_rows, as the RL_RMS_NORM step runs
    it); x, y (R, C), scale C elements; y may be x."""
    cdef DecJob j
    cdef Py_ssize_t R = x.shape[0], C = x.shape[1]
    if y.shape[0] != R or y.shape[1] != C or scale.shape[0] != C:
        raise ValueError(f"rms_norm_f32: x {R}x{C}, y {y.shape[0]}x{y.shape[1]}, scale {scale.shape[0]}")
    if R == 0 or C == 0:
        return
    j.kind, j.x, j.c, j.y, j.R, j.C, j.eps, j.chunk = 0, &x[0, 0], <const char*>&scale[0], &y[0, 0], R, C, epsilon, R
    with nogil:
        _dec_run(&j, nthreads)


def rotary_f32(const float[::1] x, cos, sin, float[::1] y, Py_ssize_t D, shape, sc, ss, int cl, int sl,
               bint interleaved, int nthreads=0):
    """y := x * cos + rot(x) * sin over rows of D (rl_rotary_rows, as the RL_ROTARY step runs it): x, y flat
    contiguous, cos / sin C-contiguous float32 buffers walked by the byte strides sc / ss over the rows' dims `shape`
    (at most RL_MAXD; their products give x's row count), last dim contiguous (cl / sl 1) or one value (0)."""
    cdef DecJob j
    cdef Py_ssize_t sh[RL_MAXD]
    cdef Py_ssize_t a[RL_MAXD]
    cdef Py_ssize_t b[RL_MAXD]
    cdef Py_ssize_t R = 1, k, nd = len(shape)
    cdef const float[::1] cv = cos
    cdef const float[::1] sv = sin
    if not 1 <= nd <= RL_MAXD or len(sc) != nd or len(ss) != nd or D <= 0 or D % 2 or cl not in (0, 1) or sl not in (0, 1):
        raise ValueError(f"rotary_f32: {nd} dims, D {D}, cl {cl}, sl {sl}")
    for k in range(nd):
        sh[k], a[k], b[k] = shape[k], sc[k], ss[k]
        R *= sh[k]
    if x.shape[0] != R * D or y.shape[0] != R * D:
        raise ValueError(f"rotary_f32: x {x.shape[0]}, y {y.shape[0]} elements for {R} rows of {D}")
    if R == 0 or cv.shape[0] == 0 or sv.shape[0] == 0:
        return
    j.kind, j.x, j.c, j.s, j.y, j.R, j.C = 1, &x[0], <const char*>&cv[0], <const char*>&sv[0], &y[0], R, D
    j.cl, j.sl, j.inter, j.nd, j.shape, j.sc, j.ss, j.chunk = cl, sl, interleaved, <int>nd, sh, a, b, R
    with nogil:
        _dec_run(&j, nthreads)


# ---- eltwise slice ----

cdef void _rl_silu_gate(const RStep* s, char** p) noexcept nogil:
    cdef UnaryJob job
    cdef Py_ssize_t n = s.n[0], nchunks
    if n == 0:
        return
    job.x, job.g, job.y, job.n, job.op, job.p0, job.p1 = (<const float*>p[s.slot[0]], <const float*>p[s.slot[1]],
                                                          <float*>p[s.slot[2]], n, UN_SILU_GATE, s.f[0], 0)
    nchunks = (n + ELTWISE_CHUNK - 1) // ELTWISE_CHUNK
    parallel_for(nchunks, 1 if nchunks < 2 else _nthreads(s.nthreads), _unary_task, &job)


# conv slice: the channel-last conv steps
cdef void _rl_conv_nhwc(const RStep* s, char** p) noexcept nogil:
    if conv_nhwc_step(s.n, s.f, <const float*>p[s.slot[0]], <const float*>p[s.slot[1]], <const float*>p[s.slot[2]],
                      <const float*>p[s.slot[3]], <float*>p[s.slot[4]], s.nthreads) != 0:
        p[0] = <char*>1


cdef void _rl_dw_nhwc(const RStep* s, char** p) noexcept nogil:
    if dw_nhwc_step(s.n, s.f, <const float*>p[s.slot[0]], <const float*>p[s.slot[1]], <const float*>p[s.slot[2]],
                    <float*>p[s.slot[3]], s.nthreads) != 0:
        p[0] = <char*>1


cdef void _rl_pool_nhwc(const RStep* s, char** p) noexcept nogil:
    cdef int64_t g[21]
    cdef int i
    for i in range(21):
        g[i] = s.n[4 + i]
    _poolnhwc_f32(<const float*>p[s.slot[0]], <float*>p[s.slot[1]], s.n[0], s.n[1], g, <int>s.n[2], <int>s.n[3],
                  s.nthreads)


cdef void _rl_group_norm(const RStep* s, char** p) noexcept nogil:
    # a failed scratch allocation marks the step bad: Python redoes it and raises MemoryError
    if group_norm_c(<const float*>p[s.slot[0]], <float*>p[s.slot[3]], s.n[0], s.n[1], s.n[2], s.n[3],
                    <const float*>p[s.slot[1]], <const float*>p[s.slot[2]], s.f[0], <int>s.n[4], <int>s.n[5],
                    _nthreads(s.nthreads), NORM_PAR_WORK) != 0:
        p[0] = <char*>p[s.slot[0]]


cdef void _rl_resize2(const RStep* s, char** p) noexcept nogil:
    # a linear Resize of the last two axes
    resize2_c(<const float*>p[s.slot[0]], <float*>p[s.slot[5]], s.n[0], s.n[1], s.n[2], s.n[3], s.n[4],
              <const int64_t*>p[s.slot[1]], <const float*>p[s.slot[2]], <const int64_t*>p[s.slot[3]],
              <const float*>p[s.slot[4]], _nthreads(s.nthreads), NORM_PAR_WORK)



cdef void _rl_gpool_nhwc(const RStep* s, char** p) noexcept nogil:
    # channel-last global average / max pool
    global_pool_nhwc_c(<const float*>p[s.slot[0]], <float*>p[s.slot[1]], s.n[0], s.n[1], s.n[2], <int>s.n[3],
                       _nthreads(s.nthreads))

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


# vit slice
cdef void _rl_transpose(const RStep* s, char** p) noexcept nogil:
    _tr_exec(s.n, <const uint8_t*>p[s.slot[0]], <uint8_t*>p[s.slot[1]])


cdef rl_fn _RL_FNS[RL_NFNS]
_RL_FNS[RL_ALIAS] = _rl_alias
_RL_FNS[RL_COPY] = _rl_copy
_RL_FNS[RL_BINARY] = _rl_binary
# threads slice: Concat elimination in the compiled run loop (onnxep/backends/cpu/runloop.py _concat_slots)
cdef void _rl_conv_nhwc_ldy(const RStep* s, char** p) noexcept nogil:
    cdef Py_ssize_t* n = <Py_ssize_t*>s.n
    cdef ImplicitA ia
    cdef Act act
    act.kind, act.a, act.b = <int>n[9], s.f[0], s.f[1]
    ia.x, ia.p0 = NULL, 0
    ia.H, ia.W, ia.C, ia.Cg, ia.kh, ia.kw, ia.sh, ia.sw = n[10], n[11], n[12], n[13], n[14], n[15], n[16], n[17]
    ia.dh, ia.dw, ia.ph, ia.pw, ia.Ho, ia.Wo = n[18], n[19], n[20], n[21], n[22], n[23]
    if n[5] == 0:
        return
    if conv_nhwc_exec(&ia, n[0], n[1], n[2], n[3], n[4], n[5], n[6], <int>n[7], n[8], &act,
                      <const float*>p[s.slot[0]], <const float*>p[s.slot[1]] if n[4] > 0 else NULL,
                      <const float*>p[s.slot[2]], NULL, <float*>p[s.slot[4]], n[24], s.nthreads) != 0:
        p[0] = <char*>1


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
_RL_FNS[RL_RMS_NORM] = _rl_rms_norm
_RL_FNS[RL_ROTARY] = _rl_rotary
_RL_FNS[RL_GATHER_ND] = _rl_gather_nd
_RL_FNS[RL_ARG] = _rl_arg
_RL_FNS[RL_BINARY_INT] = _rl_binary_int
_RL_FNS[RL_GATHER_ELEMENTS] = _rl_gather_elements
_RL_FNS[RL_CUMSUM] = _rl_cumsum
_RL_FNS[RL_MASKED_SOFTMAX] = _rl_masked_softmax

_RL_FNS[RL_SILU_GATE] = _rl_silu_gate
_RL_FNS[RL_CONV_NHWC] = _rl_conv_nhwc
_RL_FNS[RL_DW_NHWC] = _rl_dw_nhwc
_RL_FNS[RL_GROUP_NORM] = _rl_group_norm
_RL_FNS[RL_RESIZE2] = _rl_resize2
_RL_FNS[RL_ATTENTION] = _rl_attention
_RL_FNS[RL_POOL_NHWC] = _rl_pool_nhwc
_RL_FNS[RL_GPOOL_NHWC] = _rl_gpool_nhwc
_RL_FNS[RL_CONV_NHWC_LDY] = _rl_conv_nhwc_ldy
_RL_FNS[RL_TRANSPOSE] = _rl_transpose


# qdq slice
cdef void _rl_dq_matmul(const RStep* s, char** p) noexcept nogil:
    if _qg_dq_matmul_raw(<const float*>p[s.slot[0]], <const uint8_t*>p[s.slot[1]], s.n[0], s.n[1], s.n[2],
                         <const int32_t*>p[s.slot[2]], <int>s.n[3], <const float*>p[s.slot[3]], <int>s.n[4],
                         <const float*>p[s.slot[4]], <float*>p[s.slot[5]], s.nthreads) != 0:
        p[0] = <char*>1


_RL_FNS[RL_DQ_MATMUL] = _rl_dq_matmul


cdef void _rl_quantize(const RStep* s, char** p) noexcept nogil:
    qg_quantize_tensor(<const float*>p[s.slot[0]], s.n[0], s.f[0], s.f[1], <int>s.n[1], <uint8_t*>p[s.slot[1]])


cdef void _rl_dequantize(const RStep* s, char** p) noexcept nogil:
    qg_dequantize_tensor(<const uint8_t*>p[s.slot[0]], s.n[0], <int>s.n[1], s.f[0], s.f[1], <float*>p[s.slot[1]])


_RL_FNS[RL_QUANTIZE] = _rl_quantize
_RL_FNS[RL_DEQUANTIZE] = _rl_dequantize


# bf16 slice: the bf16 GEMM (onnxep.compute_precision=bf16; _k_bgemm.pxi) as RL_GEMM_PACKED runs the fp32 one
cdef void _rl_bgemm(const RStep* s, char** p) noexcept nogil:
    cdef Py_ssize_t M = s.n[0], N = s.n[1], K = s.n[2]
    cdef Act act
    cdef float* y = <float*>p[s.slot[4]]
    act.kind, act.a, act.b = <int>s.n[3], 0.0, 0.0
    if M == 0 or N == 0:
        return
    if bgemm_run(<const float*>p[s.slot[0]], K, <const float*>p[s.slot[1]], M, N, K, s.f[0],
                 <const float*>p[s.slot[2]], <const float*>p[s.slot[3]], N, y, N, &act, s.nthreads) != 0:
        p[0] = <char*>1       # the error mark (no memory for packed A): the Python step raises
        return


_RL_FNS[RL_BGEMM] = _rl_bgemm


# tiny5 slice: FusedMatMul's one row against B as stored (gemv_f32; a batch-1 fully connected layer, the lone GEMV
# head of fuse_matmul_bias.LONE_GEMV), which ran as a Python step
cdef void _rl_gemv(const RStep* s, char** p) noexcept nogil:
    cdef Act act
    cdef float* y = <float*>p[s.slot[3]]
    act.kind, act.a, act.b = <int>s.n[3], 0.0, 0.0
    gemv_run(<const float*>p[s.slot[0]], <const float*>p[s.slot[1]], s.n[4], s.n[0], s.n[1], <bint>s.n[2],
             <const float*>p[s.slot[2]], y, &act, s.nthreads)


_RL_FNS[RL_GEMV] = _rl_gemv


# tiny5 slice: the channel-last row kernels of channel_affine_f32 and lrn_nhwc_f32 (com.onnxep ChannelAffine,
# NhwcLRN), which ran as Python steps
cdef void _rl_rows(const RStep* s, char** p) noexcept nogil:
    cdef RowsJob job
    cdef Py_ssize_t R = s.n[0], C = s.n[1]
    if R * C == 0:
        return
    job.x, job.y, job.S, job.C = <const float*>p[s.slot[0]], <float*>p[s.slot[3]], C, C
    job.a, job.b, job.mean = <const float*>p[s.slot[1]], <const float*>p[s.slot[2]], NULL
    job.kind, job.relu, job.lo, job.hi = <int>s.n[2], <bint>s.n[3], s.n[4], s.n[5]
    job.alpha_n, job.beta, job.bias = s.f[0], s.f[1], s.f[2]
    parallel_for(R, 1 if R * C * s.n[6] < NORM_PAR_WORK else _nthreads(s.nthreads), _rows_task, &job)


_RL_FNS[RL_ROWS] = _rl_rows


# qdq2 slice: the fused per-tensor QuantizeLinear -> DequantizeLinear (com.onnxep QuantizeDequantize)
cdef void _rl_qdq(const RStep* s, char** p) noexcept nogil:
    _qg_qdq_run(<const float*>p[s.slot[0]], s.n[0], s.f[0], s.f[1], <int>s.n[1], <float*>p[s.slot[1]], s.nthreads)


_RL_FNS[RL_QDQ] = _rl_qdq


# bf16: a channel-last conv on the bf16 GEMM (_k_bgemm.pxi BConvNhwc)
cdef void _rl_bconv_nhwc(const RStep* s, char** p) noexcept nogil:
    if bconv_step(s.n, s.f, <const float*>p[s.slot[0]], <const float*>p[s.slot[1]], <const float*>p[s.slot[2]],
                  <const float*>p[s.slot[3]], <float*>p[s.slot[4]], s.nthreads, 0) != 0:
        p[0] = <char*>1


cdef void _rl_bconv_nhwc_ldy(const RStep* s, char** p) noexcept nogil:
    if bconv_step(s.n, s.f, <const float*>p[s.slot[0]], <const float*>p[s.slot[1]], <const float*>p[s.slot[2]],
                  NULL, <float*>p[s.slot[4]], s.nthreads, s.n[19]) != 0:
        p[0] = <char*>1


_RL_FNS[RL_BCONV_NHWC] = _rl_bconv_nhwc
_RL_FNS[RL_BCONV_NHWC_LDY] = _rl_bconv_nhwc_ldy
# qfold slice: the channel-last quantized conv (com.onnxep QLinearConvNhwc, _k_qconv.pxi)
cdef void _rl_qconv(const RStep* s, char** p) noexcept nogil:
    _qc_run_raw(<const uint8_t*>p[s.slot[0]], <const uint8_t*>p[s.slot[1]], <const int32_t*>p[s.slot[2]],
                <const int32_t*>p[s.slot[3]], <const float*>p[s.slot[4]], <uint8_t*>p[s.slot[5]], &s.n[0], s.f[0],
                s.f[1], s.f[2], s.nthreads)


_RL_FNS[RL_QCONV] = _rl_qconv


# qmm slice: QLinearMatMul with a constant packed B (ops/quant/q_linear_mat_mul.py, _k_qgemm.pxi)
cdef void _rl_qlinear_matmul(const RStep* s, char** p) noexcept nogil:
    if _qg_qlinear_raw(<const uint8_t*>p[s.slot[0]], <int>s.n[3], s.n[0], s.n[1], <const uint8_t*>p[s.slot[1]], s.n[2],
                       <int32_t>s.n[4], <const int32_t*>p[s.slot[2]], <int>s.n[5], <const float*>p[s.slot[3]],
                       <int>s.n[6], <const int32_t*>p[s.slot[4]], <uint8_t*>p[s.slot[5]], s.f[0], s.f[1], s.f[2],
                       <int>s.n[7], s.nthreads) != 0:
        p[0] = <char*>1


_RL_FNS[RL_QLINEAR_MATMUL] = _rl_qlinear_matmul


cdef void _rl_qlinear_add(const RStep* s, char** p) noexcept nogil:
    _qg_qadd_run(<const uint8_t*>p[s.slot[0]], <int>s.n[2], s.f[0], <int>s.n[5], <const uint8_t*>p[s.slot[1]],
                 <int>s.n[3], s.f[1], <int>s.n[6], s.n[1], s.n[0], s.f[2], <int>s.n[7], <int>s.n[4],
                 <uint8_t*>p[s.slot[2]], s.nthreads)


_RL_FNS[RL_QLINEAR_ADD] = _rl_qlinear_add


# zoo2t slice: the NCW / NCHW / NCDHW Conv (wav2vec2's 1-D feature convs ran as Python steps)
cdef void _rl_conv_nchw(const RStep* s, char** p) noexcept nogil:
    cdef const Py_ssize_t* n = s.n
    cdef ConvGeom g
    cdef Act act
    act.kind, act.a, act.b = ACT_NONE, 0.0, 0.0
    g.C, g.D, g.H, g.W, g.cout, g.group = n[1], n[2], n[3], n[4], n[5], n[6]
    g.kd, g.kh, g.kw, g.sd, g.sh, g.sw, g.dd, g.dh, g.dw = n[7], n[8], n[9], n[10], n[11], n[12], n[13], n[14], n[15]
    g.pd, g.ph, g.pw, g.Do, g.Ho, g.Wo = n[16], n[17], n[18], n[19], n[20], n[21]
    if conv_nchw_exec(&g, n[0], <const float*>p[s.slot[0]], <const float*>p[s.slot[1]], <const float*>p[s.slot[2]],
                      <float*>p[s.slot[3]], &act, s.nthreads) != 0:
        p[0] = <char*>1


_RL_FNS[RL_CONV_NCHW] = _rl_conv_nchw


# pwdw slice: a pointwise conv and the depthwise conv reading it, band by band (_k_pwdw.pxi)
cdef void _rl_pw_dw_nhwc(const RStep* s, char** p) noexcept nogil:
    if pw_dw_nhwc_step(s.n, s.f, <const float*>p[s.slot[0]], <const float*>p[s.slot[1]], <const float*>p[s.slot[2]],
                       <const float*>p[s.slot[3]], <const float*>p[s.slot[4]], <float*>p[s.slot[5]],
                       s.nthreads) != 0:
        p[0] = <char*>1


_RL_FNS[RL_PW_DW_NHWC] = _rl_pw_dw_nhwc

#: the entries' ids, for the kernels' c_step (onnxep/backends/cpu/runloop.py)
RUNLOOP_FNS = {"alias": RL_ALIAS, "copy": RL_COPY, "binary": RL_BINARY, "unary": RL_UNARY, "tf_unary": RL_TF_UNARY,
               "gemm_packed": RL_GEMM_PACKED, "layernorm": RL_LAYERNORM, "softmax": RL_SOFTMAX,
               "strided": RL_STRIDED, "where": RL_WHERE, "concat": RL_CONCAT, "cast": RL_CAST,
               "row_sum": RL_ROW_SUM, "cube": RL_CUBE, "isnan": RL_ISNAN, "compare": RL_COMPARE,
               "gemm_batched": RL_GEMM_BATCHED, "gather": RL_GATHER,
               "split": RL_SPLIT,
               "rms_norm": RL_RMS_NORM, "rotary": RL_ROTARY, "gather_nd": RL_GATHER_ND, "arg": RL_ARG,
               "binary_int": RL_BINARY_INT, "cumsum": RL_CUMSUM, "masked_softmax": RL_MASKED_SOFTMAX,
               "gather_elements": RL_GATHER_ELEMENTS,
               "silu_gate": RL_SILU_GATE, "conv_nhwc": RL_CONV_NHWC, "dw_nhwc": RL_DW_NHWC,
               "group_norm": RL_GROUP_NORM, "resize2": RL_RESIZE2,
               "attention": RL_ATTENTION, "gpool_nhwc": RL_GPOOL_NHWC,
               "pool_nhwc": RL_POOL_NHWC, "conv_nhwc_ldy": RL_CONV_NHWC_LDY,
               "transpose": RL_TRANSPOSE,
               "dq_matmul": RL_DQ_MATMUL, "quantize": RL_QUANTIZE, "dequantize": RL_DEQUANTIZE,
               "bgemm": RL_BGEMM,
               "qdq": RL_QDQ, "bconv_nhwc": RL_BCONV_NHWC, "bconv_nhwc_ldy": RL_BCONV_NHWC_LDY,
               "qconv": RL_QCONV,
               "qlinear_matmul": RL_QLINEAR_MATMUL, "qlinear_add": RL_QLINEAR_ADD,
               "conv_nchw": RL_CONV_NCHW, "gemv": RL_GEMV, "rows": RL_ROWS,
               "pw_dw_nhwc": RL_PW_DW_NHWC}
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
        raises its named error. Only the stretches the compiled run walks (runloop.Compiled.segments), in order, with
        the Python steps between them run and their slots patched: a step reads what earlier steps and the per-run
        patch left in the pointer table, and a slot a Python step fills points at the last run's array until then."""
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

    def run_timed(self, int start, int stop, long long[::1] ts):
        """run(start, stop), reading the monotonic clock (time.perf_counter_ns's on Linux) before the first step into
        ts[0] and after each step i into ts[i - start + 1] (a profiled run: one span per C step, no Python between)."""
        cdef int i, bad = -1
        cdef timespec t
        if not 0 <= start <= stop <= self.nsteps:
            raise ValueError(f"Program.run_timed: steps {start}..{stop} of {self.nsteps}")
        if ts.shape[0] < stop - start + 1:
            raise ValueError(f"Program.run_timed: {ts.shape[0]} time slots for {stop - start} steps")
        with nogil:
            clock_gettime(CLOCK_MONOTONIC, &t)
            ts[0] = t.tv_sec * 1000000000LL + t.tv_nsec
            for i in range(start, stop):
                _RL_FNS[self.steps[i].fn](&self.steps[i], self.ptrs)
                clock_gettime(CLOCK_MONOTONIC, &t)
                ts[i - start + 1] = t.tv_sec * 1000000000LL + t.tv_nsec
                if self.ptrs[0] != NULL:
                    self.ptrs[0] = NULL
                    bad = i
                    break
        return bad
