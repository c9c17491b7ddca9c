import itertools
import re

import numpy as np

from onnxep.ops._base import OpKernel
from onnxep.ops.tensor._helpers import new_output
from onnxep.ops.text._strings import STRING, as_str

_SPACES = re.compile(" +")


class StringSplit_20(OpKernel):
    """Y := each element of X split on the delimiter attribute, at most maxsplit times, padded with "" to the longest
    split (one more dim than X); Z := the number of substrings of each element (opset 20).

    As onnxruntime (the oracle): an empty string has 0 substrings; with no (or an empty) delimiter the separator is a
    run of spaces (' ' only, not every whitespace character as Python's str.split() would) and leading/trailing spaces
    are dropped; a negative maxsplit is no limit. Splitting is one str.split per element (numpy has no faster path for
    arbitrary str); the padded output is filled with one masked numpy assignment, its size checked before it is
    allocated."""

    domain, op_type, since = "", "StringSplit", 20
    type_constraints = {"T1": STRING, "T2": STRING, "T3": ("int64",)}
    delimiter = ""
    maxsplit = -1

    def compute(self, ctx):
        what = f"StringSplit node {self.name!r}"
        x = as_str(ctx.input(0), what)
        sep = self.delimiter or None
        ms = int(self.maxsplit) if self.maxsplit is not None else -1
        if ms < 0:
            ms = -1
        if sep is not None:
            parts = [s.split(sep, ms) if s else [] for s in x.flat]
        elif ms == 0:
            parts = [[t] if (t := s.strip(" ")) else [] for s in x.flat]
        else:
            cut = _SPACES.split
            parts = [cut(t, max(ms, 0)) if (t := s.strip(" ")) else [] for s in x.flat]
        counts = np.fromiter(map(len, parts), np.int64, len(parts))
        width = int(counts.max()) if counts.size else 0
        y = new_output(ctx, 0, x.shape + (width,), object, what)
        z = new_output(ctx, 1, x.shape, np.int64, what) if ctx.has_output(1) else None
        if z is not None:
            z.reshape(-1)[:] = counts
        if not y.size:
            return
        y2 = y.reshape(-1, width)
        y2.fill("")
        flat = np.empty(int(counts.sum()), object)
        flat[:] = list(itertools.chain.from_iterable(parts))
        y2[np.arange(width) < counts[:, None]] = flat
