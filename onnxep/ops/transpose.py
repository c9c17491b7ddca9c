import numpy as np

from onnxep import _kernels
from onnxep.ops._base import OpKernel
from onnxep.ops._data import DATA_TYPES

_NATIVE_ITEMSIZES = (1, 2, 4, 8)
_SHUFFLE_GROUPS = (2, 3, 4, 8)     # channel_shuffle_4b's constant group counts
_NATIVE_MAX_DIMS = 32   # transpose_copy's TR_MAX_DIMS


class Transpose_1(OpKernel):
    """Y := X with its dims permuted by perm (default: reversed) (opsets 1, 13, 21). Copied into a new tensor."""

    domain, op_type, since = "", "Transpose", 1
    type_constraints = {"T": DATA_TYPES}
    perm = None

    _last = None   # (input shape, perm, output shape) of the last input shape seen

    def compute(self, ctx):
        x = ctx.input(0)
        last = self._last
        if last is None or last[0] != x.shape:
            perm = list(range(x.ndim))[::-1] if self.perm is None else [int(p) for p in self.perm]
            if sorted(perm) != list(range(x.ndim)):
                raise ValueError(f"Transpose: perm {perm} is not a permutation of the {x.ndim} dims of input shape "
                                 f"{x.shape}")
            # NCHW -> NHWC of an image with a few channels (a network's input): ChannelShuffle's kernel, whose
            # inner loop has the channel count as a constant (the general kernel moves 3 floats per pixel row by
            # row: 1x3x224x224 36 us against 18, 1 thread) and splits the pixels over threads
            to_nhwc = perm == [0, 2, 3, 1] and x.shape[1] in _SHUFFLE_GROUPS
            last = self._last = (x.shape, perm, tuple(x.shape[p] for p in perm), to_nhwc)
        _, perm, yshape, to_nhwc = last
        y = ctx.output(0, yshape, x.dtype)
        if (x.dtype.hasobject or x.itemsize not in _NATIVE_ITEMSIZES or x.ndim > _NATIVE_MAX_DIMS
                or not x.flags.c_contiguous or not y.flags.c_contiguous):
            np.copyto(y, x.transpose(perm))   # strings / objects, and strided views: numpy
            return
        if to_nhwc and x.itemsize == 4:
            _kernels.channel_shuffle_4b(x.reshape(-1).view(np.float32), x.shape[0], x.shape[1],
                                        x.shape[2] * x.shape[3], y.reshape(-1).view(np.float32), ctx.num_threads)
            return
        _kernels.transpose_copy(x.reshape(-1).view(np.uint8), x.shape, perm, x.itemsize,
                                y.reshape(-1).view(np.uint8), ctx.num_threads)
