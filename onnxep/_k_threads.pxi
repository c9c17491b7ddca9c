# The kernels' thread pool: parallel_for(n, nth, fn, ctx) runs fn(ctx, i, tid) for i < n on the caller (tid 0) and up
# to nth - 1 persistent workers (tid 1 ..), items claimed from a shared counter in shrinking runs (guided).
#
# Why not OpenMP's parallel regions: a region ends in a barrier that waits for every thread of the team, so one
# descheduled thread (a busy machine, a vCPU the hypervisor took away) stalls the call until it runs again, and
# libgomp's default wait spins hard for ~300k iterations, so on an oversubscribed machine the waiting threads burn the
# time slices the late one needs (measured: a 3x3 conv at 2 threads 18 ms instead of 1.3 ms while another process
# kept one core busy). Here the caller claims items too and waits only for the items some thread actually started:
# a worker that has not woken up by then simply finds nothing left, so a busy machine degrades to the caller's own
# speed instead of stalling (onnxruntime's pool works the same way). Idle workers spin briefly (yielding the CPU
# every few iterations) and then sleep on a condition variable.
#
# Jobs live in two slots used alternately; a worker takes a reference on the slot of the generation it saw and backs
# off if the generation moved on, so a late worker never touches a later job's data, and the caller reuses a slot only
# once no worker holds it. One job at a time: a call made while the pool is busy (another Python thread, or from inside
# a task) runs inline on its caller. The thread count comes from the caller (_nthreads: omp_get_max_threads() read per
# call, so threadpoolctl's limits apply, capped by intra_op_num_threads). After fork() the child resets the pool
# (pthread_atfork) and starts its own workers: threads do not survive fork, nor do the locks and claims they held.
# Workers are detached and live until the process exits.

cdef extern from "_native/threads.h":
    ctypedef void (*task_fn "onnxep_task")(void* ctx, Py_ssize_t item, int tid) noexcept nogil
    void parallel_for "onnxep_parallel_for"(Py_ssize_t n, int nth, task_fn fn, void* ctx) noexcept nogil
    void parallel_for_shared "onnxep_parallel_for_shared"(Py_ssize_t n, int nth, task_fn fn, void* ctx) noexcept nogil
    void _pool_set_caller_spin "onnxep_pool_set_caller_spin"(long ns) noexcept nogil
    void _pool_stats "onnxep_pool_stats"(long* spins, long* sleeps, long* steers) noexcept nogil
    int pool_awake "onnxep_pool_awake"() noexcept nogil
    long _pool_set_preempt "onnxep_pool_set_preempt"(long ns) noexcept nogil
    long _pool_quiet_until "onnxep_pool.quiet_until"
    int _pool_set_affine "onnxep_pool_set_affine"(int on) noexcept nogil
    int _pool_affine_flag "onnxep_affine"
    int ONNXEP_AFF_MAX


def pool_affine(on=None):
    """Whether this variant's pool hands each thread its own contiguous range of a job's items first (threads.h
    onnxep_run_affine; on by default) rather than runs from one shared counter; `on` sets it. Returns the setting
    before the call (tests, in-process A/B). Results do not depend on it."""
    cdef int before = _pool_set_affine(1)
    _pool_set_affine(before if on is None else (1 if on else 0))
    return bool(before)


def set_caller_spin_us(long us):
    """How long the pool's workers spin, after a job this thread posts, before they sleep: us >= 0 microseconds
    (0: they sleep at once -- session.intra_op.allow_spinning=0), or -1 for the pool's default (ONNXEP_SPIN_US).
    Per calling thread; the CPU backend sets it before each run."""
    _pool_set_caller_spin(us * 1000 if us >= 0 else -1)


def pool_is_awake(bint clear_quiet=False):
    """onnxep_pool_awake (threads.h): whether a worker is awake; if none is, wakes them to spin (rate-limited) and
    returns False. clear_quiet: forget a worker's earlier finding that its CPU was taken first (tests)."""
    global _pool_quiet_until
    cdef int r
    with nogil:
        if clear_quiet:
            _pool_quiet_until = 0
        r = pool_awake()
    return bool(r)


def pool_preempt_us(long us=-1):
    """The gap (us) between two clock reads of a spinning worker's loop that makes it sleep as descheduled, and
    stops wake-ups without a job for a while (threads.h ONNXEP_PREEMPT_NS; 0: never); us < 0 leaves it. Returns the
    previous value. For in-process A/B measurements and tests."""
    return _pool_set_preempt(us * 1000 if us >= 0 else -1) // 1000


def pool_stats():
    """(spins, sleeps, steers): how many times a worker of this variant's pool, waiting for a job, spun, how many
    times it went to sleep on the condition variable, and how many times a caller took its own CPU out of a sleeping
    worker's mask before waking it (threads.h onnxep_steer). For tests of the pool and bench/bench_threads.py."""
    cdef long spins, sleeps, steers
    _pool_stats(&spins, &sleeps, &steers)
    return spins, sleeps, steers


# Break-even sizes: below them a kernel call stays on one thread (SGEMM_MT_FLOPS: 2*M*N*K of a GEMM, a batched GEMM's
# items, an attention call's products -- measured with the convs' one below, this until then; POOL_PAR_WORK: a pooling
# call's output elements x taps; COPY_PAR_BYTES: the bytes a copy step of the run loop moves, _k_runloop.pxi
# _rl_copy_split). Variables, so bench/bench_threads.py `breakeven` can sweep them (_set_par_thresholds).
# PLUGIN_MT_FLOPS: the plugin EP's kernels, split on onnxruntime's pool, whose hand-off par_calibrate does not measure.
cdef double SGEMM_MT_FLOPS = 2000000
cdef double PLUGIN_MT_FLOPS = 2000000
# A GEMM call between SGEMM_MT_FLOPS and GEMM_WAKE_FLOPS splits only while a worker is awake (gemm_splits): a
# sleeping worker's wake-up (~5-10 us here, onnxep_pool_awake) is 2 Mflop of one thread's work at ~200 flop/ns.
cdef double GEMM_WAKE_FLOPS = 2000000
cdef bint _mt_set = 0                   # SGEMM_MT_FLOPS set by hand (_set_par_thresholds): no wake rule either
cdef double POOL_PAR_WORK = 32768
cdef double COPY_PAR_BYTES = 262144


# The break-even of a conv's parallel call (direct / packed / winograd / depthwise, fp32, int8 and bf16) and of a
# GEMM's (SGEMM_MT_FLOPS: the same figure), derived on the machine: two threads pay once one thread's time T exceeds
# T / 2 + c, c what a 2-thread call costs beyond a perfect split (posting the job, the spinning worker's start, the
# join), so the break-even is 2c of one thread's work, in flops 2c * (flops per ns of one thread).
# par_calibrate measures both, once per process, at the first conv that may use several threads: c as the lower
# quartile of the excess of 2-item parallel calls whose worker ran an item (a spinning worker, as between a run's
# steps; the quartile, not the median, so that a probe on a busy machine still reads the pool's own cost), the rate on
# a small SGEMM in L1 (the micro-kernel's speed, not a peak figure). Measured here (Zen 5 VM, 2026-11-27): c 0.24-0.8
# us (the more, the busier the other vCPU), rates 185-204 / 103 / 41 flop/ns (avx512 / avx2 / generic), so 0.1-0.33
# Mflop for AVX-512 against GEMM's 2 Mflop: the 0.3-1.2 Mflop convs of the zoo's 64x64 convnets split (kernel alone,
# batch 1, 1 -> 2 threads: 16x16 8 -> 8 3x3 5.0 -> 3.3 us, 16x16 16 -> 16 7.5 -> 4.6; bench/NOTES.md). Elsewhere both
# terms follow the machine: a slower hand-off (another OS, a second socket) raises c, a narrower ISA lowers the rate.
# GEMMs took a fixed 2 Mflop before: the zoo's tiny transformers (33-token batches, hidden 64-128) then ran no step on
# two threads; with the measured ~0.1 Mflop their 1 Mflop projections and 12-head attention calls split
# (bench/NOTES.md, scale5). Until measured (or when the probe's worker never ran: a pool busy with another call, no
# second CPU free for 10 ms; two tries per process, so a saturated machine pays at most 20 ms once), the defaults
# below hold.
cdef double PAR_CALL_NS = 1000          # c: a 2-thread call's cost beyond a perfect split, ns
cdef double PAR_FLOP_NS = 100           # one thread's flops per ns on a small SGEMM
cdef double CONV_MT_FLOPS = 200000      # = 2 * PAR_CALL_NS * PAR_FLOP_NS once measured
cdef int _par_tries = 0                 # calibration attempts (at most PAR_TRIES); PAR_TRIES + 1: done or set
cdef enum:
    PAR_TRIES = 2


def _set_par_thresholds(double mt_flops=-1, double pool_work=-1, double conv_flops=-1, double copy_bytes=-1):
    """Sets the break-even sizes (a negative value leaves one as it is; an mt_flops or conv_flops set is kept, neither
    measured over); returns the previous (mt_flops, pool_work, conv_flops, copy_bytes). For bench/bench_threads.py and
    tests (0: every call that can split does)."""
    global SGEMM_MT_FLOPS, POOL_PAR_WORK, CONV_MT_FLOPS, COPY_PAR_BYTES, _par_tries, _mt_set
    old = (SGEMM_MT_FLOPS, POOL_PAR_WORK, CONV_MT_FLOPS, COPY_PAR_BYTES)
    if mt_flops >= 0:
        SGEMM_MT_FLOPS = mt_flops
        _par_tries = PAR_TRIES + 1
        _mt_set = 1
    if pool_work >= 0:
        POOL_PAR_WORK = pool_work
    if conv_flops >= 0:
        CONV_MT_FLOPS = conv_flops
        _par_tries = PAR_TRIES + 1
    if copy_bytes >= 0:
        COPY_PAR_BYTES = copy_bytes
    return old


cdef struct _TestCtx:
    int64_t* out
    int* tids


cdef void _test_item(void* p, Py_ssize_t i, int tid) noexcept nogil:
    cdef _TestCtx* c = <_TestCtx*>p
    c.out[i] += i * i
    c.tids[i] = tid


def pool_selftest(Py_ssize_t n, int nth):
    """(out, tids): out[i] = i*i computed through parallel_for with nth threads, tids[i] the thread that ran item i
    (tests: every item exactly once, tids < nth)."""
    import numpy as np
    out = np.zeros(n, np.int64)
    tids = np.full(n, -1, np.int32)
    cdef int64_t[::1] o = out
    cdef int[::1] t = tids
    cdef _TestCtx c
    if n > 0:
        c.out = &o[0]
        c.tids = &t[0]
        with nogil:
            parallel_for(n, nth, _test_item, &c)
    return out, tids



cdef extern from *:
    """
    typedef struct { long item_ns, t0, first; Py_ssize_t by_workers; } onnxep_probe;
    static void onnxep_probe_spin(long ns) {
        long t0 = onnxep_now_ns();
        while (onnxep_now_ns() - t0 < ns) onnxep_relax();
    }
    /* an item busy for item_ns; a worker's (tid > 0) notes when it started (the earliest, atomic) */
    static void onnxep_probe_item(void* p, Py_ssize_t i, int tid) {
        onnxep_probe* c = (onnxep_probe*)p;
        if (tid > 0) {
            long t = onnxep_now_ns() - c->t0, cur = ONNXEP_LOAD(&c->first);
            while ((cur < 0 || t < cur) && !__atomic_compare_exchange_n(&c->first, &cur, t, 0, __ATOMIC_SEQ_CST,
                                                                         __ATOMIC_SEQ_CST)) {}
            ONNXEP_ADD(&c->by_workers, 1);
        }
        onnxep_probe_spin(c->item_ns);
    }
    """
    ctypedef struct _Probe "onnxep_probe":
        long item_ns, t0, first
        Py_ssize_t by_workers
    void _probe_spin "onnxep_probe_spin"(long ns) noexcept nogil
    void _probe_item "onnxep_probe_item"(void* p, Py_ssize_t i, int tid) noexcept nogil
    long _now_ns "onnxep_now_ns"() noexcept nogil


def pool_probe(int calls, Py_ssize_t n, long item_ns, long gap_ns, int nth):
    """Wake-up timings of the pool (bench/bench_threads.py `wake`): `calls` parallel_for calls of n items busy for
    item_ns each, the caller busy for gap_ns before each call (a run's serial work between parallel steps). Per
    call: (ns from the call's start to the first item a worker started, -1 when no worker took one; items the
    workers ran; the call's ns)."""
    cdef _Probe c
    cdef int k
    cdef long t1
    out = []
    c.item_ns = item_ns
    for k in range(calls):
        with nogil:
            _probe_spin(gap_ns)
            c.first, c.by_workers = -1, 0
            c.t0 = _now_ns()
            parallel_for(n, nth, _probe_item, &c)
            t1 = _now_ns()
        out.append((c.first, c.by_workers, t1 - c.t0))
    return out


cdef extern from *:
    """
    typedef struct { long item_ns; int* tids; int* cpus; long* natives; } onnxep_cpu_probe;
    /* an item busy for item_ns, noting the pool's tid, the CPU it started on and the kernel's id of its thread */
    static void onnxep_cpu_probe_item(void* p, Py_ssize_t i, int tid) {
        onnxep_cpu_probe* c = (onnxep_cpu_probe*)p;
        c->tids[i] = tid;
        c->cpus[i] = onnxep_cpu();
    #ifdef __linux__
        c->natives[i] = onnxep_gettid();
    #else
        c->natives[i] = -1;
    #endif
        onnxep_probe_spin(c->item_ns);
    }
    """
    ctypedef struct _CpuProbe "onnxep_cpu_probe":
        long item_ns
        int* tids
        int* cpus
        long* natives
    void _cpu_probe_item "onnxep_cpu_probe_item"(void* p, Py_ssize_t i, int tid) noexcept nogil


def pool_cpus(Py_ssize_t n, long item_ns, int nth):
    """(tids, cpus, native ids): one parallel_for of n items busy item_ns each on nth threads; per item the pool's
    thread id, the CPU it started on (-1 where unknown) and its thread's kernel id (threading.get_native_id; -1
    off Linux). For tests of where the workers run (onnxep_move_off in _native/threads.h)."""
    import numpy as np
    if n < 1:
        raise ValueError(f"pool_cpus: n must be >= 1, got {n}")
    tids = np.full(n, -1, np.int32)
    cpus = np.full(n, -1, np.int32)
    natives = np.full(n, -1, np.int64)
    cdef int[::1] t = tids
    cdef int[::1] c = cpus
    cdef int64_t[::1] v = natives
    cdef _CpuProbe p
    p.item_ns, p.tids, p.cpus, p.natives = item_ns, &t[0], &c[0], <long*>&v[0]
    with nogil:
        parallel_for(n, nth, _cpu_probe_item, &p)
    return tids, cpus, natives
