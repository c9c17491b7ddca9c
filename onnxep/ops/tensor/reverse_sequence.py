import numpy as np

from onnxep.errors import InvalidArgument
from onnxep.ops._base import OpKernel
from onnxep.ops.tensor._helpers import ALL_TYPES, new_output


class ReverseSequence_10(OpKernel):
    """Y := X with, for each batch entry b, its first sequence_lens[b] steps along time_axis reversed (the rest kept)
    (opsets 10, 28). One gather along the time axis."""

    domain, op_type, since = "", "ReverseSequence", 10
    type_constraints = {"T": ALL_TYPES}
    batch_axis = 1
    time_axis = 0

    def compute(self, ctx):
        x, lens = ctx.input(0), ctx.input(1)
        ba, ta = int(self.batch_axis), int(self.time_axis)
        if x.ndim < 2 or {ba, ta} != {0, 1}:
            raise InvalidArgument(f"ReverseSequence: batch_axis {ba} and time_axis {ta} must be 0 and 1 of an input "
                                  f"of rank >= 2, got shape {x.shape}")
        nb, nt = x.shape[ba], x.shape[ta]
        if lens.shape != (nb,):
            raise InvalidArgument(f"ReverseSequence: sequence_lens must have shape ({nb},), got {lens.shape}")
        if lens.size and (lens.min() < 0 or lens.max() > nt):
            raise InvalidArgument(f"ReverseSequence: sequence_lens must be in [0, {nt}], got values in "
                                  f"[{lens.min()}, {lens.max()}]")
        y = new_output(ctx, 0, x.shape, x.dtype, f"ReverseSequence node {self.name!r}")
        if not y.size:
            return
        t = np.arange(nt, dtype=np.int64)
        ln = lens.astype(np.int64).reshape(-1, 1)
        src = np.where(t < ln, ln - 1 - t, t)        # [batch, time]: the time step each output step reads
        if ba == 1:
            src = src.T
        src = src.reshape(src.shape + (1,) * (x.ndim - 2))
        np.copyto(y, np.take_along_axis(x, src, axis=ta))
