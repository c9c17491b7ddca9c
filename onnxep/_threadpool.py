"""onnxep's kernel thread pool as a threadpoolctl controller (threadpoolctl's API for custom libraries).

`threadpoolctl.threadpool_info()` lists it (user_api and internal_api "onnxep", the chosen kernel variant's file), and
`threadpool_limits(n)` (or `threadpool_limits(n, user_api="onnxep")`) caps every parallel loop of onnxep's kernels at
n threads, whatever the session's intra_op_num_threads: the cap lives in the kernel library
(`onnxep_set_thread_limit`, read by each parallel_for), reached through ctypes as threadpoolctl reaches OpenBLAS.
A cap at or above the machine's cores is no cap: that is how a `threadpool_limits` block, restoring the count it read
on entry, leaves the pool as it found it.
"""
from __future__ import annotations

import os

import threadpoolctl

from onnxep import _kernels


class OnnxepPoolController(threadpoolctl.LibController):
    user_api = "onnxep"
    internal_api = "onnxep"
    # the variant chosen at import (the other variants may be loaded but run nothing)
    filename_prefixes = (f"_kernels_{_kernels.ISA}.",)
    check_symbols = ("onnxep_get_thread_limit", "onnxep_set_thread_limit")

    def get_num_threads(self):
        limit = self.dynlib.onnxep_get_thread_limit()
        cap = _kernels.max_threads()
        return min(limit, cap) if limit > 0 else cap

    def set_num_threads(self, num_threads):
        n = int(num_threads)
        self.dynlib.onnxep_set_thread_limit(0 if n >= (os.cpu_count() or 1) else n)

    def get_version(self):
        from onnxep import __version__
        return __version__

    def set_additional_attributes(self):
        self.isa = _kernels.ISA


_registered = False


def register() -> None:
    """Registers the controller with threadpoolctl (once per process; onnxep's import calls it)."""
    global _registered
    if not _registered:
        threadpoolctl.register(OnnxepPoolController)
        _registered = True
