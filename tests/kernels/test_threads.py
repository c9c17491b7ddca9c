"""The kernels' thread pool (onnxep/_k_threads.pxi, parallel_for), through pool_selftest: item i stores i*i and the
id of the thread that ran it. Oracle: numpy (i*i), plus the pool's own contract: every item runs exactly once, on a
thread id below the requested count, whatever the count, concurrency or process (fork) it is called from."""
import importlib
import os
import threading
import time

import numpy as np
import pytest

from onnxep import _kernels
from tests._util import run_threads, wait_for

VARIANTS = {isa: importlib.import_module(f"onnxep._kernels_{isa}") for isa in _kernels.AVAILABLE}


@pytest.mark.parametrize("isa", list(VARIANTS))
@pytest.mark.parametrize("n,nth", [(0, 2), (1, 2), (3, 8), (5, 4), (7, 3), (1000, 1), (1000, 2), (1001, 3),
                                   (200000, 2), (50000, 4)])
@pytest.mark.parametrize("affine", [True, False])
def test_every_item_once(isa, n, nth, affine):
    """Both claim schemes (pool_affine: thread ranges first, or one shared counter -- also the scheme of jobs on more
    than ONNXEP_AFF_MAX threads), ranges of unequal length. (At most 4 threads: the workers a test starts stay in the
    process, and the affinity tests below expect few.)"""
    mod = VARIANTS[isa]
    before = mod.pool_affine(affine)
    try:
        for _ in range(20 if n < 100000 else 2):
            out, tids = mod.pool_selftest(n, nth)
            np.testing.assert_array_equal(out, np.arange(n, dtype=np.int64) ** 2)   # each item added once (+= i*i)
            assert n == 0 or (tids.min() >= 0 and tids.max() < nth)
    finally:
        mod.pool_affine(before)


def test_pool_affine_setting():
    """pool_affine() reads the setting, pool_affine(on) sets it and returns the one before; on by default."""
    assert _kernels.pool_affine() is True
    assert _kernels.pool_affine(False) is True
    assert _kernels.pool_affine() is False
    assert _kernels.pool_affine(True) is False
    assert _kernels.pool_affine() is True


def test_repeated_jobs_do_not_mix():
    """Many back-to-back jobs (the slot / generation hand-over): each sees only its own items."""
    for k in range(2000):
        n = 1 + (k * 7919) % 257
        out, tids = _kernels.pool_selftest(n, 2)
        assert np.array_equal(out, np.arange(n, dtype=np.int64) ** 2), k


def test_concurrent_callers():
    """Two Python threads calling at once: one gets the pool, the other runs inline; both complete correctly."""

    def work(_):
        for _ in range(300):
            out, _ = _kernels.pool_selftest(5000, 2)
            np.testing.assert_array_equal(out, np.arange(5000, dtype=np.int64) ** 2)

    run_threads(work, 3)


def _forked_child_computes(n: int, timeout: float = 20.0) -> bool:
    """Fork; the child runs pool_selftest(n, 2) and reports whether every item came out right. A child still running
    after `timeout` seconds (hung in parallel_for) is killed and counts as a failure."""
    import time
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:                               # child
        ok = False
        try:
            out, _ = _kernels.pool_selftest(n, 2)
            ok = bool(np.array_equal(out, np.arange(n, dtype=np.int64) ** 2))
        finally:
            os.write(w, b"1" if ok else b"0")
            os._exit(0)
    os.close(w)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        done, _ = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        time.sleep(0.01)
    else:
        os.kill(pid, 9)
        os.waitpid(pid, 0)
        os.close(r)
        return False
    got = os.read(r, 1)
    os.close(r)
    return got == b"1"


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork on this platform")
def test_pool_works_after_fork():
    """Workers do not survive fork(): the child starts its own and still computes every item."""
    _kernels.pool_selftest(100000, 2)          # the parent's workers exist
    assert _forked_child_computes(100000)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork on this platform")
def test_fork_while_jobs_run_elsewhere():
    """fork() while another thread keeps the pool busy: the child inherits workers' claims and locks of threads it
    does not have; it must reset them and still compute (a hang here is the failure: each child gets 20 s)."""
    stop = threading.Event()

    def busy():
        while not stop.is_set():
            _kernels.pool_selftest(20000, 2)

    t = threading.Thread(target=busy)
    t.start()
    try:
        for _ in range(5):
            assert _forked_child_computes(50000), "the forked child failed or hung in parallel_for"
    finally:
        stop.set()
        t.join()


@pytest.mark.parametrize("isa", list(VARIANTS))
def test_pool_probe_contract(isa):
    """pool_probe (bench_threads.py wake): per call (first worker start, items by workers, call ns). Oracle: the
    pool's contract -- one thread: no worker item; two: workers run at most every item, a first start is reported
    exactly when some worker ran an item, and a call lasts at least its share of the busy items."""
    probe = VARIANTS[isa].pool_probe
    for first, by_workers, ns in probe(5, 8, 20_000, 0, 1):
        assert first == -1 and by_workers == 0 and ns >= 8 * 20_000
    for first, by_workers, ns in probe(20, 8, 20_000, 10_000, 2):
        assert 0 <= by_workers <= 8 and (first >= 0) == (by_workers > 0)
        assert ns >= (8 - by_workers) * 20_000


def _the_worker(mod) -> int:
    """The kernel thread id of the pool's one worker (a 2-thread job until the worker takes an item); skips when it
    never does (a busy machine)."""
    for _ in range(10):
        tids, _, natives = mod.pool_cpus(64, 50_000, 2)
        workers = {int(w) for t, w in zip(tids, natives) if t > 0}
        if workers:
            (w,) = workers
            return w
    pytest.skip("the worker took no item (busy machine)")


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity") or len(os.sched_getaffinity(0)) < 2,
                    reason="needs Linux and two CPUs this process may use")
@pytest.mark.parametrize("isa", list(VARIANTS))
def test_worker_moves_off_the_callers_cpu(isa):
    """A worker that takes a job on its caller's CPU moves to another allowed CPU and keeps its affinity mask
    (onnxep_move_off, _native/threads.h). Set-up: the worker and the caller both put on CPU a (the worker pinned
    there, then given its whole mask back: it stays where it is); then a job of busy items. Oracle: the items' own
    sched_getcpu -- none the worker ran started on a -- and the worker's mask read back with os.sched_getaffinity."""
    cpus_of = VARIANTS[isa].pool_cpus
    allowed = os.sched_getaffinity(0)
    a = min(allowed)
    w = _the_worker(VARIANTS[isa])
    try:
        for attempt in range(5):
            # on a loaded machine the caller may finish every item before the scheduler lets the worker, runnable
            # behind it on CPU a, take one: then the set-up is made again (the move is checked where it ran)
            os.sched_setaffinity(w, {a})
            os.sched_setaffinity(0, {a})
            os.sched_setaffinity(w, allowed)
            tids, cpus, natives = cpus_of(64, 100_000, 2)
            if (tids > 0).any():
                break
        assert set(cpus[tids == 0]) == {a}
        ran = cpus[tids > 0]
        assert ran.size > 0 and a not in set(ran), (a, sorted(set(ran)))
        assert os.sched_getaffinity(w) == allowed
    finally:
        os.sched_setaffinity(0, allowed)


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity") or len(os.sched_getaffinity(0)) < 2,
                    reason="needs Linux and two CPUs this process may use")
@pytest.mark.parametrize("isa", list(VARIANTS))
def test_sleeping_worker_wakes_off_the_callers_cpu(isa):
    """A caller waking sleeping workers first takes its own CPU out of their affinity masks, and each worker puts its
    mask back as it wakes (onnxep_steer, _native/threads.h): a worker woken onto its caller's CPU would wait there
    behind the caller, which runs every item itself. Set-up: workers that sleep at once after a job
    (set_caller_spin_us(0)), the caller pinned to CPU a. Oracle: the pool's steer counter, the items' own
    sched_getcpu (none the worker ran on a) and the worker's mask read back with os.sched_getaffinity."""
    mod = VARIANTS[isa]
    allowed = os.sched_getaffinity(0)
    a = min(allowed)
    mod.set_caller_spin_us(0)
    try:
        w = _the_worker(mod)
        os.sched_setaffinity(0, {a})
        slept = mod.pool_stats()[1]
        mod.pool_cpus(2, 1000, 2)                   # a job the worker goes to sleep after
        for attempt in range(5):
            # asleep after the last job (the counter moves just before the worker waits: a moment more)
            assert wait_for(lambda: mod.pool_stats()[1] > slept), "the worker never went to sleep"
            time.sleep(0.01)
            slept, steered = mod.pool_stats()[1:]
            tids, cpus, _ = mod.pool_cpus(64, 100_000, 2)
            assert mod.pool_stats()[2] > steered, "no sleeping worker was steered off the caller's CPU"
            assert set(cpus[tids == 0]) == {a}
            ran = cpus[tids > 0]
            assert a not in set(ran), (a, sorted(set(ran)))
            assert wait_for(lambda: os.sched_getaffinity(w) == allowed), os.sched_getaffinity(w)
            if ran.size:
                break
        else:
            pytest.fail("the woken worker took no item in 5 jobs")
    finally:
        os.sched_setaffinity(0, allowed)
        mod.set_caller_spin_us(-1)


@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="needs two CPUs")
@pytest.mark.parametrize("isa", list(VARIANTS))
def test_caller_spin_zero_workers_sleep_at_once(isa):
    """set_caller_spin_us(0) (session.intra_op.allow_spinning=0): a worker that saw a job of this caller sleeps
    right after it and never spins; -1 gives back the pool's spin (ONNXEP_SPIN_US), and the worker spins again.
    Oracle: the pool's own counters (pool_stats: waits that spun, waits that slept) and numpy for the items."""
    mod = VARIANTS[isa]
    n = 20000
    want = np.arange(n, dtype=np.int64) ** 2
    mod.set_caller_spin_us(0)
    try:
        slept = mod.pool_stats()[1]
        out, _ = mod.pool_selftest(n, 2)
        np.testing.assert_array_equal(out, want)
        assert wait_for(lambda: mod.pool_stats()[1] > slept), "the worker never went to sleep after the job"
        spins, slept = mod.pool_stats()[:2]
        for _ in range(20):
            out, _ = mod.pool_selftest(n, 2)
            np.testing.assert_array_equal(out, want)
        assert wait_for(lambda: mod.pool_stats()[1] > slept)
        assert mod.pool_stats()[0] == spins, "a worker spun after jobs posted with spin 0"
    finally:
        mod.set_caller_spin_us(-1)
    out, _ = mod.pool_selftest(n, 2)
    np.testing.assert_array_equal(out, want)
    assert wait_for(lambda: mod.pool_stats()[0] > spins), "the default spin did not come back"


@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="needs two CPUs")
def test_caller_spin_is_per_thread():
    """A caller's spin setting belongs to its thread: spin 0 set on another Python thread leaves this thread's jobs
    with the pool's spin. Oracle: pool_stats (a worker spins after this thread's job)."""
    t = threading.Thread(target=lambda: (_kernels.set_caller_spin_us(0), _kernels.pool_selftest(20000, 2)))
    t.start()
    t.join()
    spins = _kernels.pool_stats()[0]
    out, _ = _kernels.pool_selftest(20000, 2)
    np.testing.assert_array_equal(out, np.arange(20000, dtype=np.int64) ** 2)
    assert wait_for(lambda: _kernels.pool_stats()[0] > spins)


@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="needs two CPUs")
@pytest.mark.parametrize("isa", list(VARIANTS))
def test_awake_wakes_sleeping_workers_to_spin(isa):
    """onnxep_pool_awake (pool_is_awake; the GEMM family's small splits ask it, _k_gemm.pxi gemm_splits): with every
    worker asleep it answers False and, for a caller whose jobs spin, wakes them without a job, so that they spin
    for the next one (and it answers True while they do); a caller with spin 0 wakes nobody. Oracle: the pool's own
    counters (pool_stats: waits that spun, waits that slept) -- no job is posted after the first."""
    mod = VARIANTS[isa]
    mod.set_caller_spin_us(0)
    try:
        slept = mod.pool_stats()[1]
        mod.pool_selftest(20000, 2)                 # a job the worker goes to sleep right after
        assert wait_for(lambda: mod.pool_stats()[1] > slept), "the worker never went to sleep after the job"
        time.sleep(0.01)
        spins = mod.pool_stats()[0]
        assert not mod.pool_is_awake(True)
        time.sleep(0.01)
        assert mod.pool_stats()[0] == spins, "a caller with spin 0 woke a worker"
    finally:
        mod.set_caller_spin_us(-1)
    time.sleep(0.002)                               # past the rate limit of wake-ups without a job
    assert not mod.pool_is_awake(True)
    assert wait_for(lambda: mod.pool_stats()[0] > spins), "the woken worker did not spin"
    assert wait_for(lambda: mod.pool_is_awake(True)), "no worker was ever seen awake"


@pytest.mark.parametrize("isa", list(VARIANTS))
def test_preempt_gap_setting(isa):
    """pool_preempt_us (the gap that makes a spinning worker sleep as descheduled): 50 us by default, set and read
    back, and jobs still run every item once with the check off. Oracle: numpy for the items."""
    mod = VARIANTS[isa]
    old = mod.pool_preempt_us(0)
    try:
        assert old == 50
        out, _ = mod.pool_selftest(20000, 2)
        np.testing.assert_array_equal(out, np.arange(20000, dtype=np.int64) ** 2)
        assert mod.pool_preempt_us() == 0
    finally:
        assert mod.pool_preempt_us(old) == 0
    assert mod.pool_preempt_us() == old
