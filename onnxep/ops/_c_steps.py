"""Helpers of the kernels' `c_step` (the compiled run loop's entries, onnxep/backends/cpu/runloop.py and
onnxep/_k_runloop.pxi): byte strides of numpy views collapsed to at most `MAXD` dims, dtype codes of RL_CAST.
A c_step returns None whenever a case is not one these entries compute exactly as the kernel's compute does."""
from __future__ import annotations

import numpy as np

from onnxep import _kernels

MAXD = _kernels.RUNLOOP_LIMITS["copy_dims"]
SLOTS = _kernels.RUNLOOP_LIMITS["slots"]

#: numpy dtype -> _native/rl_ops.h RL_T_* code
CAST_CODES = {np.dtype(np.float32): 0, np.dtype(np.float16): 1, np.dtype(np.int64): 2, np.dtype(np.int32): 3,
              np.dtype(np.bool_): 4, np.dtype(np.float64): 5}
#: (from, to) pairs rl_cast converts as numpy's astype does (integer -> float16 left out: numpy rounds twice)
CAST_PAIRS = frozenset((a, b) for a in range(6) for b in range(6) if a != b and not (a in (2, 3) and b == 1))


def plain(*arrays) -> bool:
    """Every value a C-contiguous numpy array of a fixed-size dtype (what a run loop slot can point at)."""
    return all(a.__class__ is np.ndarray and not a.dtype.hasobject and a.flags.c_contiguous for a in arrays)


def apart(y, *xs) -> bool:
    """y shares no memory with any of xs, or is one of them exactly (same address, dtype and shape: an elementwise
    loop reading element i before writing it is safe in place; anything else, e.g. a bool result written over its
    int64 operand by the arena's in-place reuse, is not)."""
    for x in xs:
        if np.may_share_memory(x, y) and not (x.dtype == y.dtype and x.shape == y.shape
                                             and x.__array_interface__["data"][0] == y.__array_interface__["data"][0]):
            return False
    return True


def collapse(shape, *strides):
    """(ndim, shape, strides...) without size-1 dims and with neighbouring dims merged where every stride list
    allows, at least one dim, each list padded to MAXD; None when more than MAXD dims remain."""
    dims = [(n, [s[k] for s in strides]) for k, n in enumerate(shape) if n != 1]
    if any(n == 0 for n, _ in dims):
        dims = [(0, [0] * len(strides))]
    out = []
    for n, st in dims:
        if out and all(p == s * n for p, s in zip(out[-1][1], st)):
            out[-1] = (out[-1][0] * n, st)
        else:
            out.append((n, st))
    if not out:
        out = [(1, [0] * len(strides))]
    if len(out) > MAXD:
        return None
    pad = [0] * (MAXD - len(out))
    return (len(out), [n for n, _ in out] + pad, *([st[j] for _, st in out] + pad for j in range(len(strides))))


def strided(x, view, y):
    """The RL_STRIDED step copying `view` (a numpy view of x) into y, or None."""
    if (not plain(x, y) or view.shape != y.shape or view.dtype != y.dtype or y.dtype != x.dtype
            or np.may_share_memory(x, y)):
        return None
    c = collapse(y.shape, view.strides, y.strides)
    if c is None:
        return None
    nd, shape, ss, ds = c
    off = view.__array_interface__["data"][0] - x.__array_interface__["data"][0]
    if view.size and not 0 <= off < x.nbytes:
        return None
    return "strided", [0, ~0], [y.itemsize, nd, off, *shape, *ss, *ds], []


def broadcast_strides(a, shape):
    """a's byte strides broadcast to shape (0 on the broadcast dims)."""
    return np.broadcast_to(a, shape).strides


def where(c, a, b, y):
    """The RL_WHERE step y := c ? a : b, or None."""
    if not plain(c, a, b, y) or c.dtype != np.bool_ or not a.dtype == b.dtype == y.dtype or not apart(y, c, a, b):
        return None
    s = collapse(y.shape, broadcast_strides(c, y.shape), broadcast_strides(a, y.shape),
                 broadcast_strides(b, y.shape), y.strides)
    if s is None:
        return None
    nd, shape, sc, sa, sb, _ = s
    return "where", [0, 1, 2, ~0], [y.itemsize, nd, *shape, *sc, *sa, *sb], []


def cast(x, y):
    """The RL_CAST step y := x converted, or None."""
    if not plain(x, y) or x.shape != y.shape or np.may_share_memory(x, y):
        return None
    a, b = CAST_CODES.get(x.dtype), CAST_CODES.get(y.dtype)
    if (a, b) not in CAST_PAIRS:
        return None
    return "cast", [0, ~0], [y.size, a, b], []


#: ufunc -> rl_compare's RL_EQ ... (logic ops: bool inputs only)
COMPARE_OPS = {np.equal: 0, np.less: 1, np.greater: 2, np.less_equal: 7, np.greater_equal: 8}
LOGIC_OPS = {np.logical_and: 3, np.logical_or: 4, np.logical_xor: 5, np.logical_not: 6}
COMPARE_TYPES = {np.dtype(np.float32): 0, np.dtype(np.int64): 2, np.dtype(np.int32): 3, np.dtype(np.bool_): 4}


def compare(ufunc, a, b, y):
    """The RL_COMPARE step y := ufunc(a, b) into bool, or None."""
    if not plain(a, b, y) or y.dtype != np.bool_ or a.dtype != b.dtype or not apart(y, a, b):
        return None
    t = COMPARE_TYPES.get(a.dtype)
    op = LOGIC_OPS.get(ufunc) if a.dtype == np.bool_ else COMPARE_OPS.get(ufunc)
    if op is None and a.dtype == np.bool_:
        op = COMPARE_OPS.get(ufunc)
    if t is None or op is None:
        return None
    s = collapse(y.shape, broadcast_strides(a, y.shape), broadcast_strides(b, y.shape), y.strides)
    if s is None:
        return None
    nd, shape, sa, sb, _ = s
    return "compare", [0, 1, ~0], [op, t, nd, *shape, *sa, *sb], []
