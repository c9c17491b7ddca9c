"""Shared helpers of the data-movement ops (Reshape, Concat, Gather, ...)."""
from __future__ import annotations

#: Element types the data-movement ops handle (numpy-native numeric and bool; no string, bfloat16 or float8).
DATA_TYPES = ("float32", "float64", "float16", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32",
              "uint64", "bool")


def norm_axis(axis: int, rank: int, what: str) -> int:
    """axis in [-rank, rank-1] -> [0, rank-1], else ValueError."""
    axis = int(axis)
    if not -rank <= axis < rank:
        raise ValueError(f"{what}: axis {axis} is out of range for rank {rank}")
    return axis + rank if axis < 0 else axis


def norm_axes(axes, rank: int, what: str) -> list:
    """Normalised, duplicate-free axes, else ValueError."""
    out = [norm_axis(a, rank, what) for a in axes]
    if len(set(out)) != len(out):
        raise ValueError(f"{what}: repeated axis in {list(axes)}")
    return out


def const_input(op, i):
    """The constant value of input i of an OpInfo, or None."""
    return op.constants.get(i)
