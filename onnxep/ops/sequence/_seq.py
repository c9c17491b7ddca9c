"""Shared by the sequence and optional ops. A sequence is a Python list of arrays, an optional its value or None
when empty (the representation of the reference backend and of onnxruntime's run()). A tensor put into a sequence is
copied: the memory planner tracks tensors by name, not through lists, so a sequence must never hold an arena tensor."""
from __future__ import annotations

import numpy as np

from onnxep.errors import InvalidArgument
from onnxep.ops._base import OpKernel


def kind_ok(vt, *kinds) -> bool:
    """A value type statically one of `kinds` (or unknown)."""
    return vt is None or vt.kind in kinds or vt.kind == "unknown"


class SeqKernel(OpKernel):
    """A sequence / optional op: check_types asks that input 0, when the node has it, be statically one of
    `input0_kinds` (or unknown); None: any input (onnx's schemas say nothing check_types could read)."""

    input0_kinds = ("sequence",)

    @classmethod
    def check_types(cls, op) -> bool:
        kinds, vts = cls.input0_kinds, op.input_types
        return kinds is None or not vts or kind_ok(vts[0], *kinds)


def sequence_input(ctx, i, node, op):
    s = ctx.input(i)
    if not isinstance(s, (list, tuple)):
        raise InvalidArgument(f"{op} node {node!r}: input {i} must be a sequence (list of tensors), got "
                              f"{type(s).__name__}")
    return s


def tensor_copy(x, node, op, what="input"):
    if not isinstance(x, np.ndarray):
        if isinstance(x, np.generic):
            return np.array(x)
        raise InvalidArgument(f"{op} node {node!r}: {what} must be a tensor, got {type(x).__name__}")
    return x.copy()


def position(p, n, node, op, insert=False) -> int:
    """A position tensor (int32 / int64 scalar) checked against a sequence of n tensors: [-n, n - 1], or [-n, n] for
    an insertion; returned non-negative."""
    a = np.asarray(p)
    if a.size != 1 or a.dtype.kind not in "iu":
        raise InvalidArgument(f"{op} node {node!r}: position must be an integer scalar, got {a.dtype} {a.shape}")
    v = int(a.reshape(-1)[0])
    hi = n if insert else n - 1
    if not -n <= v <= hi:
        raise InvalidArgument(f"{op} node {node!r}: position {v} is out of range for a sequence of {n} tensors "
                              f"(expected [{-n}, {hi}])")
    return v + n if v < 0 else v
