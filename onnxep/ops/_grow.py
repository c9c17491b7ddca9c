"""Outputs that grow in place: a decoder's key / value cache appended a row a step instead of copied whole.

An exported decoder computes each layer's present key (value) as Concat(past, new rows) along the sequence axis,
and the caller feeds it back as the next step's past: every step copies the whole cache once per layer (GPT-2 at
500 tokens of past: 24 arrays of 1.5 MB, 2.2 ms of a 14 ms step). A Concat the session marks (`Concat_4.grow_output`:
its output is a graph output whose readers all take strided inputs, `Kernel.strided_inputs`) instead writes its
result into a buffer with spare rows along the axis and returns the view of its filled part. When that view comes
back as the past of the next step, the Concat claims the buffer's next rows (under a lock, so that two runs fed one
past do not both claim them), copies only the new rows there, and returns the longer view. Anything else -- a past
that is not such a view, a buffer full, or already extended past this view's rows (two continuations of one past: the
second one copies) -- writes a new buffer. The rows a view covers are never written again, so every view handed out
keeps its values.

The views are not C-contiguous when the axis is not the outermost one (a cache [batch, heads, seq, dim] is strided
over heads); onnxep.append_in_place=0 (a session config entry) keeps the outputs C-contiguous.

Registry: each view handed out, by id, with a weak reference (the entry goes with the view), its buffer's record, and
its shape and strides (a view reshaped in place is not recognised)."""
from __future__ import annotations

import math
import threading
import weakref

import numpy as np

from onnxep.contracts.allocator import host_bytes

#: rows of spare capacity a new buffer gets, as a share of its filled rows (a new buffer every ~n / 2 steps: each
#: row is copied about twice over a decode), within [MIN_SPARE, MAX_SPARE] rows
SPARE_SHARE = 0.5
MIN_SPARE = 16
MAX_SPARE = 256
#: an appended input up to this many bytes is copied by numpy's assignment (one step's rows of a key / value cache:
#: GPT-2 3 KB, SmolLM-135M 768 bytes), a larger one by join_into (copy_rows, threads above its serial size)
SMALL_APPEND = 64 * 1024


class _Buffer:
    """A buffer's array (its full capacity along `axis`) and its filled rows."""
    __slots__ = ("array", "axis", "fill")

    def __init__(self, array, axis, fill):
        self.array, self.axis, self.fill = array, axis, fill


_VIEWS: dict = {}              # id(view) -> (weak reference to the view, _Buffer, shape, strides)
_LOCK = threading.Lock()


def _forget(key, ref):
    e = _VIEWS.get(key)
    if e is not None and e[0] is ref:
        _VIEWS.pop(key, None)


def _hand_out(buf: _Buffer, rows: int) -> np.ndarray:
    a = buf.array
    view = a[(slice(None),) * buf.axis + (slice(0, rows),)]
    key = id(view)
    _VIEWS[key] = (weakref.ref(view, lambda ref, key=key: _forget(key, ref)), buf, view.shape, view.strides)
    return view


def _record(x):
    """The _Buffer of a view this module handed out (unchanged since), else None."""
    e = _VIEWS.get(id(x))
    if e is None or e[0]() is not x or x.shape != e[2] or x.strides != e[3]:
        return None
    return e[1]


def is_view(x) -> bool:
    """Whether x is one of the views handed out (a feed that may stay strided)."""
    return _record(x) is not None


def flat(x):
    """(the 1-D buffer x's elements live in, from x's first one) for a view handed out, else None: what a native
    kernel reads through x's strides."""
    buf = _record(x)
    return None if buf is None else buf.array.reshape(-1)


def spare_rows(n: int) -> int:
    return min(max(int(n * SPARE_SHARE), MIN_SPARE), MAX_SPARE)


def concat(xs, axis: int, shape, dtype, nthreads: int, check) -> np.ndarray:
    """Concat(xs) along axis (the inputs' shapes checked by the caller, `shape` the result's): the new rows appended
    in place after xs[0]'s when xs[0] is a view whose buffer can take them, else every input copied into a new
    buffer with spare rows (`check(shape, dtype)` raises when that buffer is too large). Returns the view."""
    x0 = xs[0]
    n0 = x0.shape[axis]
    n = shape[axis]
    buf = _record(x0)
    start = 0
    if buf is not None and buf.axis == axis and buf.array.dtype == dtype and not (
            np.may_share_memory(xs[1], buf.array) if len(xs) == 2 else
            any(np.may_share_memory(x, buf.array) for x in xs[1:])):
        with _LOCK:
            if buf.fill == n0 and n <= buf.array.shape[axis]:
                buf.fill = n
                start = n0
            else:
                buf = None
    else:
        buf = None
    if buf is None:
        full = list(shape)
        full[axis] = n + spare_rows(n)
        check(full, dtype)
        nbytes = math.prod(full) * np.dtype(dtype).itemsize
        buf = _Buffer(host_bytes(nbytes).view(dtype).reshape(full), axis, n)
    if start and len(xs) == 2 and xs[1].nbytes <= SMALL_APPEND:
        # a decoding step's new rows: numpy's assignment (~1 us), where join_into's row copy costs ~10 in a run
        buf.array[(slice(None),) * axis + (slice(start, n),)] = xs[1]
    else:       # (appending: input 0's rows are in the buffer already)
        from onnxep.ops.tensor.concat import join_into
        join_into(buf.array, xs, axis, (start > 0,) + (False,) * (len(xs) - 1), nthreads)
    return _hand_out(buf, n)
