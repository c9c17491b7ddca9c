/* onnxep native code, included by onnxep/_k_threads.pxi (compiled once per ISA; see setup.py). */
#ifndef ONNXEP_NATIVE_THREADS_H
#define ONNXEP_NATIVE_THREADS_H

#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <time.h>
#ifdef __linux__
#include <sys/syscall.h>
#include <unistd.h>
#endif
typedef void (*onnxep_task)(void* ctx, Py_ssize_t item, int tid);
/* The most threads whose jobs are claimed by thread ranges (onnxep_run_affine); a job on more threads claims from one
   counter (onnxep_run_items). */
#define ONNXEP_AFF_MAX 16
typedef struct {
    onnxep_task fn;
    void* ctx;
    Py_ssize_t n;
    int want;                        /* workers allowed in (tids 1 .. want) */
    int cpu;                         /* the CPU the caller ran on when it posted the job, -1 unknown */
    Py_ssize_t next, done;           /* next item to claim, items finished (atomic) */
    int tids, refs;                  /* workers that took a tid, workers holding the slot (atomic) */
    long spin_ns;                    /* how long a worker that saw this job spins before it sleeps */
    int parts;                       /* > 0: claims by thread ranges (onnxep_run_affine), else `next` */
    struct { Py_ssize_t next, end; char pad[64 - 2 * sizeof(Py_ssize_t)]; } part[ONNXEP_AFF_MAX];
} onnxep_job;
/* The spin of the jobs this thread posts, -1: the pool's (ONNXEP_SPIN_US). A session with
   session.intra_op.allow_spinning=0 sets 0 around its runs (onnxep_pool_set_caller_spin), so the workers that took
   its jobs go to sleep at once after them, as onnxruntime's do with that entry; thread-local because the pool is the
   process's and another session on another thread may spin. */
static __thread long onnxep_caller_spin_ns = -1;
static struct {
    pthread_mutex_t busy;            /* held by the caller of the running job */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    long gen;                        /* job generation (atomic); slot = gen & 1 */
    int sleepers;                    /* workers waiting on cv (atomic) */
    int nworkers;
    long spin_ns;                    /* -1 until first use */
    long spins, sleeps;              /* waits that spun, waits that slept (atomic; tests, bench_threads.py) */
    long steers;                     /* sleeping workers a caller kept off its CPU (onnxep_steer; tests) */
    long kicks;                      /* wake-ups without a job (onnxep_pool_awake; atomic, changes under mu) */
    long last_kick;                  /* when the last one was sent, ns (atomic) */
    long quiet_until;                /* no kick before this time: a spinning worker found its CPU taken (atomic) */
    int started;                     /* workers that took an index in onnxep_ws (atomic) */
    onnxep_job slot[2];
} onnxep_pool = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0, 0, -1, 0, 0,
                 0, 0, 0, 0, 0};
/* What a caller needs to steer a sleeping worker's wake-up (onnxep_steer); the first ONNXEP_TRACKED workers. Fields
   other than tid change under onnxep_pool.mu only. */
#define ONNXEP_TRACKED 64
static struct {
    long tid;                        /* the worker's thread id, 0 until it has started */
    int asleep;                      /* waiting on the condition variable */
    int steered;                     /* a caller narrowed its mask: the worker restores `mask` when it wakes */
#ifdef __linux__
    cpu_set_t mask;
#endif
} onnxep_ws[ONNXEP_TRACKED];

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
/* The CPU this thread runs on, -1 where that cannot be read (sched_getcpu: the vDSO / rdpid, no system call). */
static inline int onnxep_cpu(void) {
#ifdef __linux__
    return sched_getcpu();
#else
    return -1;
#endif
}
#ifdef __linux__
/* The kernel's id of the calling thread (the id sched_setaffinity and /proc/self/task take). */
static inline long onnxep_gettid(void) {
    return (long)syscall(SYS_gettid);
}
/* Takes `cpu` out of thread tid's affinity mask (0: the calling thread) when the mask has it and another CPU: returns
   1 with the mask it had in *was, else 0 and the mask untouched. */
static int onnxep_mask_without(pid_t tid, int cpu, cpu_set_t* was) {
    cpu_set_t other;
    if (cpu < 0 || cpu >= CPU_SETSIZE) return 0;
    if (sched_getaffinity(tid, sizeof *was, was) != 0 || !CPU_ISSET(cpu, was)) return 0;
    other = *was;
    CPU_CLR(cpu, &other);
    return CPU_COUNT(&other) > 0 && sched_setaffinity(tid, sizeof other, &other) == 0;
}
#endif
/* A worker that takes a job on the CPU its caller runs on moves to another CPU the thread may use: the affinity mask
   without that CPU for a moment (the kernel migrates the thread before the call returns), then the mask it had, so
   nothing stays pinned. Why: Linux places a woken thread on its waker's CPU when it does not see another one idle,
   and on a KVM guest (this 2-vCPU VM; cloud machines alike) a halted vCPU is not seen idle; the load balancer then
   left the worker there for tens of ms, both threads sharing one core -- light SqueezeNet at 2 threads ran 2.4-2.6 ms
   in those stretches, 1.3-1.4 ms when the worker sat on the other CPU, measured with each thread's CPU from
   /proc/self/task/<id>/stat after each run. A worker on a CPU of its own (the usual case on bare metal) pays one
   sched_getcpu per job. */
static void onnxep_move_off(int cpu) {
#ifdef __linux__
    cpu_set_t was;
    if (sched_getcpu() == cpu && onnxep_mask_without(0, cpu, &was)) sched_setaffinity(0, sizeof was, &was);
#else
    (void)cpu;
#endif
}
/* Before waking the sleeping workers for a job, the caller takes its own CPU out of each one's affinity mask (the worker
   puts its mask back as it wakes): the wake-up then cannot place it on the caller's CPU. onnxep_move_off alone does
   not cover that case: a worker woken onto the caller's CPU waits there, runnable, behind the caller, which runs the
   job's items itself and the next job's, and so on; the worker never runs to move. Seen on this 2-vCPU KVM guest after
   every pause of the bench (its rounds of runs after 150 ms idle): the worker sat runnable on the caller's vCPU for the
   whole round (/proc/self/task/<id>/stat), so resnet.dynamo of the zoo ran at its 1-thread time, 0.13 ms, at 2
   threads (0.08 in a loop with no pause). Two system calls per sleeping worker, paid only when workers have slept. */
static void onnxep_steer(int cpu) {
#ifdef __linux__
    int i, n = ONNXEP_LOAD(&onnxep_pool.started);
    for (i = 0; i < n && i < ONNXEP_TRACKED; i++) {
        pid_t tid = (pid_t)ONNXEP_LOAD(&onnxep_ws[i].tid);
        if (tid == 0 || !onnxep_ws[i].asleep || onnxep_ws[i].steered) continue;
        if (!onnxep_mask_without(tid, cpu, &onnxep_ws[i].mask)) continue;
        onnxep_ws[i].steered = 1;
        ONNXEP_ADD(&onnxep_pool.steers, 1);
    }
#else
    (void)cpu;
#endif
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
/* A spinning worker whose loop went this long between two clock reads (64 pauses and a sched_yield: ~1-2 us when
   it has its CPU) was descheduled for another task: the machine has more runnable threads than CPUs. It then sleeps,
   and no caller wakes workers for small jobs (onnxep_pool_awake) for ONNXEP_QUIET_NS: a worker spinning on an
   oversubscribed machine takes its share of CPU time from the caller's (CFS balances runnable threads, spinning or
   not). Measured: the zoo's tiny transformers at 2 threads, each GEMM split, while three compilers ran: 1.20-1.34x
   the time of a session that split none. */
#define ONNXEP_PREEMPT_NS 50000L
#define ONNXEP_QUIET_NS 20000000L
static long onnxep_preempt_ns = ONNXEP_PREEMPT_NS;   /* 0: never (onnxep_pool_set_preempt: in-process A/B) */
/* At most one wake-up without a job per this long (each costs its caller a futex call and the steering). */
#define ONNXEP_KICK_NS 1000000L
/* Whether jobs are claimed by thread ranges (onnxep_run_affine; on by default); onnxep_pool_set_affine changes it
   (tests, in-process A/B). Results never depend on it: every item runs once, on some thread. */
static int onnxep_affine = 1;
/* Thread tid's items first: the job's n items are cut into one contiguous range per thread (parts), and tid claims
   from range tid % parts, in runs of a quarter of what that range has left; with its range done it helps the others,
   in order, from where their owners stand. Why: the same item of consecutive kernels mostly covers the same part of
   a tensor (output rows, pixel blocks), so a thread keeps reading what it wrote a step before from its own L2 rather
   than from the other core's; with one shared counter the threads took alternate runs and half of every input came
   from the other core. A thread that never shows up (descheduled, asleep) leaves its range to the others, as the
   shared counter did. */
static void onnxep_run_affine(onnxep_job* j, int tid) {
    int p0 = tid % j->parts;
    for (int q = 0; q < j->parts; q++) {
        int r = (p0 + q) % j->parts;
        Py_ssize_t end = j->part[r].end;
        for (;;) {
            Py_ssize_t i = ONNXEP_LOAD(&j->part[r].next), c, k;
            do {
                if (i >= end) break;
                c = (end - i) / 4;
                if (c < 1) c = 1;
            } while (!__atomic_compare_exchange_n(&j->part[r].next, &i, i + c, 0, __ATOMIC_SEQ_CST,
                                                  __ATOMIC_SEQ_CST));
            if (i >= end) break;
            for (k = i; k < i + c; k++) j->fn(j->ctx, k, tid);
            ONNXEP_ADD(&j->done, c);
        }
    }
}
static void onnxep_run_job(onnxep_job* j, int tid) {
    if (j->parts > 0) onnxep_run_affine(j, tid);
    else onnxep_run_items(j, tid);
}
static void* onnxep_worker(void* arg) {
    long seen = (long)(size_t)arg;   /* the generation current when this worker was started */
    long spin = onnxep_pool.spin_ns; /* the spin of the last job this worker saw */
    int me = ONNXEP_ADD(&onnxep_pool.started, 1);
#ifdef __linux__
    if (me < ONNXEP_TRACKED) ONNXEP_STORE(&onnxep_ws[me].tid, onnxep_gettid());
#endif
    for (;;) {
        long g = ONNXEP_LOAD(&onnxep_pool.gen);
        if (g == seen) {             /* wait for a new job: spin (yielding now and then), then sleep */
            if (spin > 0) {
                long t0 = onnxep_now_ns(), tp = t0, t;
                unsigned k = 0;
                ONNXEP_ADD(&onnxep_pool.spins, 1);
                while ((g = ONNXEP_LOAD(&onnxep_pool.gen)) == seen) {
                    onnxep_relax();
                    if ((++k & 63) == 0) {
                        t = onnxep_now_ns();
                        if (t - t0 > spin) break;
                        if (onnxep_preempt_ns > 0 && t - tp > onnxep_preempt_ns) {  /* descheduled: oversubscribed */
                            ONNXEP_STORE(&onnxep_pool.quiet_until, t + ONNXEP_QUIET_NS);
                            break;
                        }
                        sched_yield();
                        tp = onnxep_now_ns();
                    }
                }
            }
            if (g == seen) {
                ONNXEP_ADD(&onnxep_pool.sleeps, 1);
                int steered = 0;
#ifdef __linux__
                cpu_set_t mask;
#endif
                pthread_mutex_lock(&onnxep_pool.mu);
                ONNXEP_ADD(&onnxep_pool.sleepers, 1);
                if (me < ONNXEP_TRACKED) onnxep_ws[me].asleep = 1;
                long kicked = ONNXEP_LOAD(&onnxep_pool.kicks);
                while ((g = ONNXEP_LOAD(&onnxep_pool.gen)) == seen && ONNXEP_LOAD(&onnxep_pool.kicks) == kicked)
                    pthread_cond_wait(&onnxep_pool.cv, &onnxep_pool.mu);
                if (me < ONNXEP_TRACKED) {
                    onnxep_ws[me].asleep = 0;
                    steered = onnxep_ws[me].steered;
                    onnxep_ws[me].steered = 0;
#ifdef __linux__
                    if (steered) mask = onnxep_ws[me].mask;
#endif
                }
                ONNXEP_ADD(&onnxep_pool.sleepers, -1);
                pthread_mutex_unlock(&onnxep_pool.mu);
#ifdef __linux__
                if (steered) sched_setaffinity(0, sizeof mask, &mask);   /* the mask it had (onnxep_steer) */
#endif
                if (g == seen) {     /* woken without a job (onnxep_pool_awake): spin for the next one */
                    spin = onnxep_pool.spin_ns;
                    continue;
                }
            }
        }
        seen = g;
        onnxep_job* j = &onnxep_pool.slot[g & 1];
        ONNXEP_ADD(&j->refs, 1);
        if (ONNXEP_LOAD(&onnxep_pool.gen) == g) {     /* still job g: the slot holds it */
            spin = j->spin_ns;
            int tid = ONNXEP_ADD(&j->tids, 1) + 1;
            if (tid <= j->want) {
                onnxep_move_off(j->cpu);
                onnxep_run_job(j, tid);
            }
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
    ONNXEP_STORE(&onnxep_pool.started, 0);
    for (int i = 0; i < ONNXEP_TRACKED; i++) {
        onnxep_ws[i].tid = 0;
        onnxep_ws[i].asleep = onnxep_ws[i].steered = 0;
    }
}
/* Start workers up to `want` (under the busy lock). Returns how many there are. */
static int onnxep_pool_grow(int want) {
    if (onnxep_pool.spin_ns < 0) {   /* first use */
        const char* s = getenv("ONNXEP_SPIN_US");
        /* 2 ms by default: a loop that calls run() with a gap of its own (pre- / post-processing) finds the worker
           still spinning when the gap is under it. shufflenet at 2 threads with a gap before each run, this VM:
           1.3 ms a run while the spin outlasts the gap, 1.9-2.0 ms once the worker has slept in it (0.5, 3, 10 ms
           gaps; 200 us spin: slow from 0.5 ms on); the cost, at most 2 ms of one core per run, is a tenth of
           onnxruntime's (~30 ms of CPU per gap). session.intra_op.allow_spinning=0 turns it off. */
        onnxep_pool.spin_ns = (s && *s) ? atol(s) * 1000L : 2000000L;
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
/* fn(ctx, i, tid) for i < n, tid < nth (the caller and up to nth - 1 workers); returns when every item is done.
   affine != 0: items claimed by thread ranges first (onnxep_run_affine, when onnxep_affine allows), else from one
   counter (onnxep_run_items). */
static void onnxep_parallel_for_claims(Py_ssize_t n, int nth, onnxep_task fn, void* ctx, int affine) {
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
    j->cpu = onnxep_cpu();
    j->spin_ns = onnxep_caller_spin_ns >= 0 ? onnxep_caller_spin_ns : onnxep_pool.spin_ns;
    ONNXEP_STORE(&j->next, 0);
    j->parts = affine && onnxep_affine && j->want + 1 <= ONNXEP_AFF_MAX ? j->want + 1 : 0;
    for (int r = 0; r < j->parts; r++) {
        j->part[r].end = n * (r + 1) / j->parts;
        ONNXEP_STORE(&j->part[r].next, n * r / j->parts);
    }
    ONNXEP_STORE(&j->done, 0);
    ONNXEP_STORE(&j->tids, 0);
    ONNXEP_STORE(&onnxep_pool.gen, g);
    if (ONNXEP_LOAD(&onnxep_pool.sleepers) > 0) {
        pthread_mutex_lock(&onnxep_pool.mu);
        onnxep_steer(j->cpu);
        pthread_cond_broadcast(&onnxep_pool.cv);
        pthread_mutex_unlock(&onnxep_pool.mu);
    }
    onnxep_run_job(j, 0);
    unsigned k = 0;
    while (ONNXEP_LOAD(&j->done) < n) {       /* items a worker started: wait for them only */
        onnxep_relax();
        if ((++k & 255) == 0) sched_yield();
    }
    pthread_mutex_unlock(&onnxep_pool.busy);
}
static void onnxep_parallel_for(Py_ssize_t n, int nth, onnxep_task fn, void* ctx) {
    onnxep_parallel_for_claims(n, nth, fn, ctx, 1);
}
/* Items from one counter, in order, each to the first thread free: for jobs whose item order was chosen by
   simulating that schedule (the GEMM's (row block, slab) tiles where _tile_schedule takes it). Thread ranges would
   give thread 0 the first half of the tiles in that order, e.g. both slabs of the first row block. */
static void onnxep_parallel_for_shared(Py_ssize_t n, int nth, onnxep_task fn, void* ctx) {
    onnxep_parallel_for_claims(n, nth, fn, ctx, 0);
}

/* Whether a worker is awake (spinning or on a job), so that a job of a few microseconds split now pays: one posted
   while every worker sleeps waits for a wake-up (a futex call, the steering, the vCPU's exit from halt: ~5-10 us on
   this VM) that costs more than such a job. When all sleep, wakes them without a job to spin for the next one (at most
   once per ONNXEP_KICK_NS, not within ONNXEP_QUIET_NS after a worker found its CPU taken, not for a caller whose
   jobs do not spin) and returns 0: the caller runs this job alone. */
static int onnxep_pool_awake(void) {
    int nw = ONNXEP_LOAD(&onnxep_pool.nworkers);
    long t;
    if (nw <= 0) return 0;
    if (ONNXEP_LOAD(&onnxep_pool.sleepers) < nw) return 1;
    if (onnxep_caller_spin_ns == 0 || onnxep_pool.spin_ns == 0) return 0;
    t = onnxep_now_ns();
    if (t < ONNXEP_LOAD(&onnxep_pool.quiet_until) || t - ONNXEP_LOAD(&onnxep_pool.last_kick) < ONNXEP_KICK_NS)
        return 0;
    ONNXEP_STORE(&onnxep_pool.last_kick, t);
    pthread_mutex_lock(&onnxep_pool.mu);
    onnxep_steer(onnxep_cpu());
    ONNXEP_ADD(&onnxep_pool.kicks, 1);
    pthread_cond_broadcast(&onnxep_pool.cv);
    pthread_mutex_unlock(&onnxep_pool.mu);
    return 0;
}

/* Jobs claimed by thread ranges (on != 0) or from one counter; returns the setting before. */
static int onnxep_pool_set_affine(int on) {
    int before = onnxep_affine;
    onnxep_affine = on != 0;
    return before;
}
/* The spin of the jobs the calling thread posts from now on: ns >= 0, or -1 for the pool's (ONNXEP_SPIN_US). */
static void onnxep_pool_set_caller_spin(long ns) {
    onnxep_caller_spin_ns = ns < 0 ? -1 : ns;
}
/* Sets the gap that tells a spinning worker it was descheduled (ns; 0: never looked at); returns the previous one. */
static long onnxep_pool_set_preempt(long ns) {
    long old = onnxep_preempt_ns;
    if (ns >= 0) onnxep_preempt_ns = ns;
    return old;
}
static void onnxep_pool_stats(long* spins, long* sleeps, long* steers) {
    *spins = ONNXEP_LOAD(&onnxep_pool.spins);
    *sleeps = ONNXEP_LOAD(&onnxep_pool.sleeps);
    *steers = ONNXEP_LOAD(&onnxep_pool.steers);
}

#endif /* ONNXEP_NATIVE_THREADS_H */
