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

cdef extern from *:
    """
    #include <pthread.h>
    #include <sched.h>
    #include <stdlib.h>
    #include <time.h>
    typedef void (*onnxep_task)(void* ctx, Py_ssize_t item, int tid);
    typedef struct {
        onnxep_task fn;
        void* ctx;
        Py_ssize_t n;
        int want;                        /* workers allowed in (tids 1 .. want) */
        Py_ssize_t next, done;           /* next item to claim, items finished (atomic) */
        int tids, refs;                  /* workers that took a tid, workers holding the slot (atomic) */
    } onnxep_job;
    static struct {
        pthread_mutex_t busy;            /* held by the caller of the running job */
        pthread_mutex_t mu;
        pthread_cond_t cv;
        long gen;                        /* job generation (atomic); slot = gen & 1 */
        int sleepers;                    /* workers waiting on cv (atomic) */
        int nworkers;
        long spin_ns;                    /* -1 until first use */
        onnxep_job slot[2];
    } onnxep_pool = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0, 0, -1};

    #define ONNXEP_LOAD(p) __atomic_load_n(p, __ATOMIC_SEQ_CST)
    #define ONNXEP_STORE(p, v) __atomic_store_n(p, v, __ATOMIC_SEQ_CST)
    #define ONNXEP_ADD(p, v) __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST)
    static inline void onnxep_relax(void) {
    #if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
    #endif
    }
    static inline long onnxep_now_ns(void) {
        struct timespec t;
        clock_gettime(CLOCK_MONOTONIC, &t);
        return (long)t.tv_sec * 1000000000L + t.tv_nsec;
    }
    /* Items are claimed in runs of (items left) / (4 * threads), at least one: a claim moves the counter's cache line
       between the cores, and per-item claims of ~1 us items (a depthwise conv's planes) cost up to a third of a
       2-thread call on this VM; the runs shrink towards the end, so the threads still finish together. */
    static void onnxep_run_items(onnxep_job* j, int tid) {
        Py_ssize_t div = 4 * (Py_ssize_t)(j->want + 1);
        for (;;) {
            Py_ssize_t i = ONNXEP_LOAD(&j->next), c, k;
            do {
                if (i >= j->n) return;
                c = (j->n - i) / div;
                if (c < 1) c = 1;
            } while (!__atomic_compare_exchange_n(&j->next, &i, i + c, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST));
            for (k = i; k < i + c; k++) j->fn(j->ctx, k, tid);
            ONNXEP_ADD(&j->done, c);
        }
    }
    static void* onnxep_worker(void* arg) {
        long seen = (long)(size_t)arg;   /* the generation current when this worker was started */
        for (;;) {
            long g = ONNXEP_LOAD(&onnxep_pool.gen);
            if (g == seen) {             /* wait for a new job: spin (yielding now and then), then sleep */
                long t0 = onnxep_now_ns();
                unsigned k = 0;
                while ((g = ONNXEP_LOAD(&onnxep_pool.gen)) == seen) {
                    onnxep_relax();
                    if ((++k & 63) == 0) {
                        if (onnxep_now_ns() - t0 > onnxep_pool.spin_ns) break;
                        sched_yield();
                    }
                }
                if (g == seen) {
                    pthread_mutex_lock(&onnxep_pool.mu);
                    ONNXEP_ADD(&onnxep_pool.sleepers, 1);
                    while ((g = ONNXEP_LOAD(&onnxep_pool.gen)) == seen)
                        pthread_cond_wait(&onnxep_pool.cv, &onnxep_pool.mu);
                    ONNXEP_ADD(&onnxep_pool.sleepers, -1);
                    pthread_mutex_unlock(&onnxep_pool.mu);
                }
            }
            seen = g;
            onnxep_job* j = &onnxep_pool.slot[g & 1];
            ONNXEP_ADD(&j->refs, 1);
            if (ONNXEP_LOAD(&onnxep_pool.gen) == g) {     /* still job g: the slot holds it */
                int tid = ONNXEP_ADD(&j->tids, 1) + 1;
                if (tid <= j->want) onnxep_run_items(j, tid);
            }
            ONNXEP_ADD(&j->refs, -1);
        }
        return NULL;
    }
    /* In a forked child (pthread_atfork): the parent's workers are gone, with any lock, claim or wait they held. */
    static void onnxep_pool_child(void) {
        pthread_mutex_init(&onnxep_pool.busy, NULL);
        pthread_mutex_init(&onnxep_pool.mu, NULL);
        pthread_cond_init(&onnxep_pool.cv, NULL);
        ONNXEP_STORE(&onnxep_pool.sleepers, 0);
        ONNXEP_STORE(&onnxep_pool.slot[0].refs, 0);
        ONNXEP_STORE(&onnxep_pool.slot[1].refs, 0);
        onnxep_pool.nworkers = 0;
    }
    /* Start workers up to `want` (under the busy lock). Returns how many there are. */
    static int onnxep_pool_grow(int want) {
        if (onnxep_pool.spin_ns < 0) {   /* first use */
            const char* s = getenv("ONNXEP_SPIN_US");
            onnxep_pool.spin_ns = (s && *s) ? atol(s) * 1000L : 200000L;
            pthread_atfork(NULL, NULL, onnxep_pool_child);
        }
        while (onnxep_pool.nworkers < want) {
            pthread_t t;
            pthread_attr_t a;
            pthread_attr_init(&a);
            pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
            pthread_attr_setstacksize(&a, 1 << 20);
            int rc = pthread_create(&t, &a, onnxep_worker, (void*)(size_t)ONNXEP_LOAD(&onnxep_pool.gen));
            pthread_attr_destroy(&a);
            if (rc != 0) break;
            onnxep_pool.nworkers++;
        }
        return onnxep_pool.nworkers;
    }
    /* fn(ctx, i, tid) for i < n, tid < nth; returns when every item is done. */
    static void onnxep_parallel_for(Py_ssize_t n, int nth, onnxep_task fn, void* ctx) {
        Py_ssize_t i;
        int lim = onnxep_get_thread_limit();       /* threadpoolctl's cap (_kernels_impl.pxi) */
        if (n <= 0) return;
        if (lim > 0 && nth > lim) nth = lim;
        if (nth > n) nth = (int)n;
        if (nth <= 1 || pthread_mutex_trylock(&onnxep_pool.busy) != 0) {
            for (i = 0; i < n; i++) fn(ctx, i, 0);
            return;
        }
        int have = onnxep_pool_grow(nth - 1);
        if (have < 1) {
            pthread_mutex_unlock(&onnxep_pool.busy);
            for (i = 0; i < n; i++) fn(ctx, i, 0);
            return;
        }
        long g = ONNXEP_LOAD(&onnxep_pool.gen) + 1;
        onnxep_job* j = &onnxep_pool.slot[g & 1];
        while (ONNXEP_LOAD(&j->refs) != 0) onnxep_relax();   /* a late worker of job g-2 still looking */
        j->fn = fn;
        j->ctx = ctx;
        j->n = n;
        j->want = nth - 1 < have ? nth - 1 : have;
        ONNXEP_STORE(&j->next, 0);
        ONNXEP_STORE(&j->done, 0);
        ONNXEP_STORE(&j->tids, 0);
        ONNXEP_STORE(&onnxep_pool.gen, g);
        if (ONNXEP_LOAD(&onnxep_pool.sleepers) > 0) {
            pthread_mutex_lock(&onnxep_pool.mu);
            pthread_cond_broadcast(&onnxep_pool.cv);
            pthread_mutex_unlock(&onnxep_pool.mu);
        }
        onnxep_run_items(j, 0);
        unsigned k = 0;
        while (ONNXEP_LOAD(&j->done) < n) {       /* items a worker started: wait for them only */
            onnxep_relax();
            if ((++k & 255) == 0) sched_yield();
        }
        pthread_mutex_unlock(&onnxep_pool.busy);
    }
    """
    ctypedef void (*task_fn "onnxep_task")(void* ctx, Py_ssize_t item, int tid) noexcept nogil
    void parallel_for "onnxep_parallel_for"(Py_ssize_t n, int nth, task_fn fn, void* ctx) noexcept nogil


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
