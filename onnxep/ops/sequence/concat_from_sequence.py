"""ConcatFromSequence-11: the sequence's tensors concatenated along `axis` (new_axis=0), or stacked on a new axis
(new_axis=1, axis in [-r - 1, r])."""
import numpy as np

from onnxep.errors import InvalidArgument
from onnxep.graph.model import check_size
from onnxep.ops.sequence._seq import SeqKernel, sequence_input


class ConcatFromSequence_11(SeqKernel):
    op_type, since = "ConcatFromSequence", 11
    new_axis = 0

    def compute(self, ctx):
        name = self.name
        seq = sequence_input(ctx, 0, name, "ConcatFromSequence")
        if not seq:
            raise InvalidArgument(f"ConcatFromSequence node {name!r}: the sequence is empty")
        first = seq[0]
        rank = first.ndim
        new = bool(int(self.new_axis))
        axis = int(self.axis)
        lo, hi = (-rank - 1, rank) if new else (-rank, rank - 1)
        if not lo <= axis <= hi:
            raise InvalidArgument(f"ConcatFromSequence node {name!r}: axis {axis} is out of range [{lo}, {hi}] for "
                                  f"tensors of rank {rank}")
        axis = axis + (rank + 1 if new else rank) if axis < 0 else axis
        for i, t in enumerate(seq):
            if t.dtype != first.dtype or t.ndim != rank:
                raise InvalidArgument(f"ConcatFromSequence node {name!r}: tensor {i} is {t.dtype} of rank {t.ndim}, "
                                      f"tensor 0 {first.dtype} of rank {rank}")
            if new and t.shape != first.shape:
                raise InvalidArgument(f"ConcatFromSequence node {name!r}: stacking needs equal shapes; tensor {i} "
                                      f"has {t.shape}, tensor 0 {first.shape}")
            if not new and t.shape[:axis] + t.shape[axis + 1:] != first.shape[:axis] + first.shape[axis + 1:]:
                raise InvalidArgument(f"ConcatFromSequence node {name!r}: tensor {i} of shape {t.shape} does not "
                                      f"match tensor 0 {first.shape} outside axis {axis}")
        if new:
            shape = first.shape[:axis] + (len(seq),) + first.shape[axis:]
        else:
            shape = first.shape[:axis] + (sum(t.shape[axis] for t in seq),) + first.shape[axis + 1:]
        check_size(shape, first.dtype, f"ConcatFromSequence node {name!r} output")
        out = ctx.output(0, shape, first.dtype)
        if new:
            np.stack(seq, axis=axis, out=out)
        else:
            np.concatenate(seq, axis=axis, out=out)
