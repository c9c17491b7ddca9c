"""Col2Im (opset 18): rearrange the column blocks (N, C * prod(block_shape), L) into an image (N, C, *image_shape),
adding overlaps -- col2im as in ConvTranspose, a loop over the block's taps adding strided slices. Numeric types
(bool / string have no sum)."""
import itertools
import math

import numpy as np

from onnxep.graph.model import check_size
from onnxep.ops._base import OpKernel
from onnxep.ops._data import DATA_TYPES
from onnxep.ops.nn._helpers import bad, ints

_OP = "Col2Im"
_NUMERIC = tuple(t for t in DATA_TYPES if t != "bool")


class Col2Im_18(OpKernel):
    domain, op_type, since = "", "Col2Im", 18
    type_constraints = {"T": _NUMERIC}
    dilations = None
    pads = None
    strides = None

    def compute(self, ctx):
        x, image, block = ctx.input(0), ctx.input(1), ctx.input(2)
        img = tuple(int(v) for v in image.reshape(-1))
        blk = tuple(int(v) for v in block.reshape(-1))
        nsp = len(img)
        if len(blk) != nsp or nsp == 0:
            raise bad(_OP, f"image_shape {list(img)} and block_shape {list(blk)} need one length >= 1")
        if x.ndim != 3:
            raise bad(_OP, f"input must be (N, C * prod(block_shape), L), got shape {x.shape}")
        d = ints(self.dilations, nsp, 1)
        s = ints(self.strides, nsp, 1)
        p = ints(self.pads, 2 * nsp, 0)
        if min(img) < 0 or min(blk) < 1 or min(s) < 1 or min(d) < 1 or min(p) < 0:
            raise bad(_OP, f"invalid image_shape {list(img)} / block_shape {list(blk)} / strides / dilations / pads")
        K = math.prod(blk)
        N, CK, L = x.shape
        if CK % K:
            raise bad(_OP, f"input dim 1 ({CK}) is not a multiple of prod(block_shape) = {K}")
        C = CK // K
        nb = tuple((img[i] + p[i] + p[nsp + i] - ((blk[i] - 1) * d[i] + 1)) // s[i] + 1 for i in range(nsp))
        if min(nb) < 0 or math.prod(nb) != L:
            raise bad(_OP, f"input has {L} blocks, image_shape {list(img)} with these block_shape / pads / strides / "
                           f"dilations gives {list(nb)} = {math.prod(max(b, 0) for b in nb)}")
        y = ctx.output(0, (N, C) + img, x.dtype)
        if y.size == 0:
            return
        padded = tuple(img[i] + p[i] + p[nsp + i] for i in range(nsp))
        check_size((N, C) + padded, x.dtype, f"{_OP} padded image")
        buf = np.zeros((N, C) + padded, x.dtype)
        cols = x.reshape((N, C) + blk + nb)
        lead = (slice(None), slice(None))
        for tap in itertools.product(*(range(b) for b in blk)):
            buf[lead + tuple(slice(t * dd, t * dd + (n - 1) * st + 1, st) for t, dd, n, st in zip(tap, d, nb, s))] \
                += cols[lead + tap]
        y[...] = buf[lead + tuple(slice(p[i], p[i] + img[i]) for i in range(nsp))]
