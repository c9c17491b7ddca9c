"""Shared code of the quantization family: the quantized types and their ranges, scale / zero-point layouts (per
tensor, per axis, blocked), round-half-to-even saturating quantization, and the exact integer products of the
*Integer / QLinear* ops.

Exact integer products: the integer ops multiply (x - x_zero_point) by (w - w_zero_point), both in [-255, 255] for
8-bit types, so each product is below 2**16 and a sum of K products below K * 2**16: float64 (53-bit mantissa) holds
every partial sum exactly while K < 2**37, far beyond any real reduction length. The products therefore run as
float64 BLAS GEMMs (np.matmul, one call per batch / group) and the sums are then taken modulo 2**32 (float64 ->
int64 -> int32), which is exactly the int32 accumulation (with wraparound) the spec and onnxruntime use. When the
call's own bound K * max|x - x_zp| * max|w - w_zp| (+ max|bias|) is below 2**24, every partial sum is an integer
float32 holds exactly, whatever BLAS's summation order, and the GEMM runs in float32 instead (twice as fast).

Requantization (QLinearMatMul, QLinearConv) follows onnxruntime's MLAS: the int32 accumulator converted to float32,
times the float32 multiplier x_scale * w_scale / y_scale, rounded half to even, plus the output zero point,
saturated to the output type."""
from __future__ import annotations

import ml_dtypes
import numpy as np
from onnx import helper

from onnxep import _kernels
from onnxep.errors import InvalidArgument
from onnxep.graph.model import check_size
from onnxep.ops import _dtypes
from onnxep.ops.nn import conv as nn_conv

F32, F64 = np.dtype(np.float32), np.dtype(np.float64)

#: integer quantized types -> (min, max)
INT_RANGES = {np.dtype(t): (int(ml_dtypes.iinfo(t).min), int(ml_dtypes.iinfo(t).max)) for t in (
    np.int8, np.uint8, np.int16, np.uint16, ml_dtypes.int4, ml_dtypes.uint4, ml_dtypes.int2, ml_dtypes.uint2)}
#: float8 quantized types (saturate applies to these)
FLOAT8 = tuple(np.dtype(t) for t in (ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e4m3fnuz, ml_dtypes.float8_e5m2,
                                     ml_dtypes.float8_e5m2fnuz))
FLOAT4 = np.dtype(ml_dtypes.float4_e2m1fn)
BF16 = np.dtype(ml_dtypes.bfloat16)
E8M0 = np.dtype(ml_dtypes.float8_e8m0fnu)

#: onnx type names (as check_types reads them) of the quantized types onnxep computes
INT8S = ("int8", "uint8")
INT16S = ("int16", "uint16")
INT4S = ("int4", "uint4")
INT2S = ("int2", "uint2")
F8_NAMES = ("float8e4m3fn", "float8e4m3fnuz", "float8e5m2", "float8e5m2fnuz")
SCALE_FLOATS = ("float32", "float16", "bfloat16")


def np_dtype(tensor_type: int):
    """numpy / ml_dtypes dtype of an onnx TensorProto element type number, or None."""
    try:
        return np.dtype(helper.tensor_dtype_to_np_dtype(int(tensor_type)))
    except Exception:
        return None


def bad(kernel, msg):
    """InvalidArgument naming the node and op."""
    return InvalidArgument(f"{kernel.op_type} node {kernel.name!r}: {msg}")


def norm_axis(kernel, axis, rank):
    if not -rank <= axis < rank:
        raise bad(kernel, f"axis {axis} is out of range for an input of rank {rank}")
    return axis % rank


def check_pair(kernel, scale, zp, what):
    """A scale and its zero point must have the same shape (a scalar and a one-element 1-D tensor count as one)."""
    if zp is not None and zp.shape != scale.shape and not (scale.size == zp.size == 1 and scale.ndim <= 1
                                                           and zp.ndim <= 1):
        raise bad(kernel, f"{what}_scale {scale.shape} and {what}_zero_point {zp.shape} must have the same shape")


def expand_param(kernel, p, xshape, axis, block_size, what):
    """Scale or zero point `p` as an array that broadcasts against an input of shape `xshape`: a scalar (or one
    element) per tensor; a 1-D tensor of length xshape[axis] per axis; a tensor of x's rank with dim `axis` equal to
    ceil(xshape[axis] / block_size) and the other dims equal to x's for blocked quantization (each value repeated
    block_size times along axis, the last block possibly shorter). Raises InvalidArgument on any other shape."""
    if p.ndim == 0 or p.size == 1 and p.ndim <= max(1, len(xshape)):
        return p.reshape(())
    rank = len(xshape)
    if rank == 0:
        raise bad(kernel, f"{what} has shape {p.shape}, expected a scalar for a scalar input")
    ax = norm_axis(kernel, axis, rank)
    d = xshape[ax]
    if not block_size:
        if p.ndim != 1 or p.shape[0] != d:
            raise bad(kernel, f"{what} has shape {p.shape}: per-axis quantization along axis {ax} of an input of "
                              f"shape {tuple(xshape)} needs a 1-D tensor of length {d} (or block_size for blocked "
                              f"quantization)")
        return p.reshape((1,) * ax + (d,) + (1,) * (rank - ax - 1))
    if block_size < 0:
        raise bad(kernel, f"block_size must be positive, got {block_size}")
    want = tuple(xshape[:ax]) + (-(-d // block_size),) + tuple(xshape[ax + 1:])
    if p.shape != want:
        raise bad(kernel, f"{what} has shape {p.shape}: blocked quantization of an input of shape {tuple(xshape)} "
                          f"along axis {ax} with block_size {block_size} needs shape {want}")
    check_size(xshape, p.dtype, f"{kernel.op_type} node {kernel.name!r}: expanded {what}")
    out = np.repeat(p, block_size, axis=ax)
    return out if out.shape[ax] == d else out[(slice(None),) * ax + (slice(0, d),)]


def compute_dtype(scale_dtype, precision=0):
    """The dtype QuantizeLinear divides in: the `precision` attribute's type when set, else the scale's; int32 and
    float8e8m0 (no numpy arithmetic of their own) divide in float64 / float32."""
    dt = np_dtype(precision) if precision else np.dtype(scale_dtype)
    if dt is None or dt.kind in "iu":
        return F64
    if dt == E8M0:
        return F32
    return dt


def divide(x, scale, dt):
    """x / scale in dtype dt (bfloat16: float32 division rounded once to bfloat16), as float32 or float64 values."""
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):    # a zero scale gives inf / NaN, as IEEE
        if dt == BF16:
            q = np.divide(x.astype(F32, copy=False), scale.astype(F32, copy=False))
            return q.astype(BF16).astype(F32)
        q = np.divide(x.astype(dt, copy=False), scale.astype(dt, copy=False))
    return q if dt in (F32, F64) else q.astype(F32)


def quantize_into(y, q, zp, saturate=True):
    """y := q (x / scale, float32 or float64, already in the division's precision) quantized to y's dtype: integer
    types round half to even, add the zero point (float, as q) and saturate to the type's range (NaN gives the
    type's minimum, as onnxruntime); float8 types add a non-zero zero point and cast (round to nearest even),
    `saturate` clamping to the largest finite value (NaN stays NaN; without it, out-of-range values become NaN, or Inf
    for e5m2); float4e2m1 adds the zero point and casts, saturating (it has no infinity). The exotic conversions are
    onnxep.ops._dtypes' (ONNX Cast semantics)."""
    dt = y.dtype
    if not isinstance(q, np.ndarray):   # numpy divides 0-d arrays into a scalar: make it an array for out=
        q = np.array(q)
    with np.errstate(invalid="ignore", over="ignore"):
        if dt in INT_RANGES:
            lo, hi = INT_RANGES[dt]
            r = np.rint(q, out=q)          # q is a fresh array (divide's result)
            if zp is not None:
                np.add(r, zp, out=r)       # exact below 2**24; beyond, the sign is right and the clamp saturates
            np.fmax(r, lo, out=r)          # fmax / fmin: NaN gives the type's minimum, as onnxruntime
            np.fmin(r, hi, out=r)
            if dt.kind in "iu":            # int8 / uint8 / int16 / uint16
                np.copyto(y, r, casting="unsafe")
            else:                          # int4 / uint4 / int2 / uint2
                y[...] = _dtypes.round_saturate_int(r, dt)
            return
        if zp is not None and np.any(_dtypes.to_float32(zp) != 0):
            q = q + _dtypes.to_float32(zp)
        if dt in FLOAT8:
            y[...] = _dtypes.saturate_float8(q, dt) if saturate else _dtypes.to_exotic(q, dt, saturate=False)
            return
        if dt == FLOAT4:
            y[...] = _dtypes.to_exotic(q, dt)
            return
    raise TypeError(f"no quantization to {dt}")


def requantize(acc, multiplier, zp, dt):
    """onnxruntime MLAS's requantization: float32(acc) * multiplier (float32) rounded half to even, plus the zero
    point, saturated to dt's range; returns an array of dt."""
    lo, hi = INT_RANGES[dt]
    r = acc.astype(F32)
    np.multiply(r, multiplier, out=r)
    np.rint(r, out=r)
    z = np.float32(0) if zp is None else zp.astype(F32)
    np.add(r, z, out=r)
    np.clip(r, lo, hi, out=r)
    return r.astype(dt)


def wrap_int32(acc):
    """Exact integer sums held in float64 (or float32, below 2**24) -> int32, modulo 2**32 (int32 accumulation with
    wraparound)."""
    if acc.dtype == F32:
        return acc.astype(np.int32)
    return acc.astype(np.int64).astype(np.int32)


def centred(v, zp, dtype=F64):
    """v - zp as dtype (zp None: v)."""
    out = v.astype(dtype)
    if zp is not None:
        out -= zp.astype(dtype)
    return out


def _max_centred(v, zp):
    """max |v - zp| (integer arrays, zp broadcasting against v), from the extremes alone."""
    if v.size == 0:
        return 0
    lo, hi = int(v.min()), int(v.max())
    if zp is None:
        return max(abs(lo), abs(hi))
    zl, zh = int(zp.min()), int(zp.max())
    return max(abs(hi - zl), abs(zh - lo))


def centred_pair(a, za, b, zb, k, bias=None):
    """(a - za, b - zb) as float32 when a product of length k (plus the bias) is exact in float32 -- every partial sum
    is an integer below 2**24 whatever the summation order, bounded by k * max|a - za| * max|b - zb| + max|bias| --
    else as float64 (exact while that bound is below 2**53, i.e. for any k < 2**37 with 8-bit operands)."""
    bound = k * _max_centred(a, za) * _max_centred(b, zb)
    if bias is not None and bias.size:
        bound += int(np.abs(bias.astype(np.int64)).max())
    dt = F32 if bound < (1 << 24) else F64
    return centred(a, za, dt), centred(b, zb, dt)


def row_param(kernel, p, a, what):
    """A per-tensor or per-row (of the matrix operand `a`: shape (M,) or (..., M, 1)) scale / zero point, shaped to
    broadcast against a; None stays None."""
    if p is None or p.size == 1:
        return None if p is None else p.reshape(())
    if a.ndim >= 2 and (p.ndim == 1 and p.shape[0] == a.shape[-2]):
        return p.reshape(-1, 1)
    if a.ndim >= 2 and p.ndim == a.ndim and p.shape[-2:] == (a.shape[-2], 1) and _broadcasts(p.shape, a.shape):
        return p
    raise bad(kernel, f"{what} has shape {p.shape}: expected one element or one per row of an operand of shape "
                      f"{a.shape} ({(a.shape[-2],) if a.ndim >= 2 else ()} or ..., M, 1)")


def col_param(kernel, p, b, what):
    """A per-tensor or per-column (of the matrix operand `b`: shape (N,) or (..., 1, N)) scale / zero point, shaped
    to broadcast against b; None stays None."""
    if p is None or p.size == 1:
        return None if p is None else p.reshape(())
    if b.ndim >= 2 and p.ndim == 1 and p.shape[0] == b.shape[-1]:
        return p
    if b.ndim >= 2 and p.ndim == b.ndim and p.shape[-2:] == (1, b.shape[-1]) and _broadcasts(p.shape, b.shape):
        return p
    raise bad(kernel, f"{what} has shape {p.shape}: expected one element or one per column of an operand of shape "
                      f"{b.shape}")


def _broadcasts(small, big):
    return all(s in (1, g) for s, g in zip(small, big))


def int_matmul(a, b):
    """Exact (a @ b) of integer-valued float operands (see centred_pair) as int32, modulo 2**32 (numpy.matmul
    semantics)."""
    if a.shape[-1] == 0:
        return np.zeros(np.matmul(a, b).shape, np.int32)
    return wrap_int32(np.matmul(a, b))


class PreparedParams:
    """Mixin of QuantizeLinear / DequantizeLinear: the kernel's `_prepare(x, scale, zp)` (the checked, broadcast
    parameters) is kept for the next call while scale and zero point are the same read-only arrays (constants) and
    x has the same shape. compute tests `_key` inline (a hit costs no call) and calls `prepare_and_keep` on a miss."""

    _key = None        # (scale, zero point, x shape) of the last prepared call, when scale and zero point are constants
    _prepared = None

    def prepare_and_keep(self, x, scale, zp):
        p = self._prepared = self._prepare(x, scale, zp)
        self._key = (scale, zp, x.shape) if not scale.flags.writeable and (
            zp is None or not zp.flags.writeable) else None
        return p


class ConvAttrs(nn_conv.ConvAttrs):
    """The conv attributes of ConvInteger / QLinearConv (Conv's defaults and checks; schema defaults fill them per
    node)."""

    @classmethod
    def supports(cls, op):
        return cls.attrs_supported(op)

    def conv_shape(self, xshape, wshape):
        """(begin pads, output spatial dims, output shape) of the node's conv of X `xshape` by W `wshape`, or
        InvalidArgument."""
        group = int(self.group)
        if len(xshape) < 3 or len(wshape) != len(xshape):
            raise bad(self, f"X {tuple(xshape)} and W {tuple(wshape)} must have the same rank, at least 3")
        if xshape[1] != wshape[1] * group or wshape[0] % group:
            raise bad(self, f"X has {xshape[1]} channels and W has shape {tuple(wshape)}: with group={group} W "
                            f"needs {xshape[1]} / group input channels and a multiple of group output channels")
        try:
            pb, outs = nn_conv.conv_geometry(xshape, wshape, self.auto_pad, self.kernel_shape, self.strides,
                                     self.dilations, self.pads)
        except ValueError as e:
            raise bad(self, str(e)) from None
        return pb, outs, (xshape[0], wshape[0]) + tuple(outs)

    def int_conv(self, x, w, bias, pb, outs):
        """The exact conv of integer-valued float X and W (centred_pair) plus an integer bias, in their float type."""
        from onnxep.ops.nn import _numpy_paths
        nsp = x.ndim - 2
        res = np.empty((x.shape[0], w.shape[0]) + tuple(outs), x.dtype)
        if res.size:
            _numpy_paths.conv(x, w, bias, int(self.group), pb, outs, tuple(self.strides or (1,) * nsp),
                              tuple(self.dilations or (1,) * nsp), res)
        return res


def channel_param(kernel, p, m, trailing, what):
    """A per-tensor or per-output-channel (1-D of length m) conv parameter, shaped (m,) + (1,) * trailing to
    broadcast against W (trailing = W's rank - 1) or the output (W's rank - 2); None stays None."""
    if p is None or p.size == 1:
        return None if p is None else p.reshape(())
    if p.ndim == 1 and p.shape[0] == m:
        return p.reshape((m,) + (1,) * trailing)
    raise bad(kernel, f"{what} has shape {p.shape}: expected one element or one per output channel ({m},)")


_BYTES = (np.dtype(np.int8), np.dtype(np.uint8))


def per_tensor_8bit(scale, zp, qtype):
    """(scale, zero point) as Python floats when a Quantize / DequantizeLinear is per tensor on 8-bit integers with a
    float32 scale (the native kernels of _k_qgemm.pxi: qg_quantize_tensor / qg_dequantize_tensor), else None."""
    if qtype not in _BYTES or scale is None or scale.dtype != F32 or scale.size != 1:
        return None
    if zp is not None and (zp.dtype != qtype or zp.size != 1):
        return None
    return float(scale.reshape(())), 0.0 if zp is None else float(zp.reshape(()))


def qgemm_pack_spec(kernel, tensor):
    """PackedWeightMixin._pack_spec of an 8-bit 2-D B for the int8 GEMM (qgemm.h, QGEMM_FORMAT): (float32 words to
    hold it, a function packing it into them), and (K, N) / B's dtype remembered on the kernel as _b_kn / _b_dtype
    (a packed B's constant may be dropped); None when B is not a 2-D 8-bit matrix or the GEMM is not compiled in."""
    if tensor.ndim != 2 or tensor.dtype not in _BYTES or not hasattr(_kernels, "qgemm_pack_b"):
        return None
    K, N = (int(d) for d in tensor.shape)
    kernel._b_kn, kernel._b_dtype = (K, N), tensor.dtype
    nbytes = _kernels.qgemm_pack_b_size(K, N)
    b = np.ascontiguousarray(tensor).view(np.uint8)
    signed = tensor.dtype == np.int8
    return (nbytes + 3) // 4, lambda out: _kernels.qgemm_pack_b(b, signed, out.view(np.uint8)[:nbytes])


def native_8bit(kernel, f, q, scale, zp, fn):
    """(scale, zero point) for the per-tensor native kernel `fn` of _kernels (quantize_tensor_f32 /
    dequantize_tensor_f32) of a Quantize / DequantizeLinear whose float32 side is `f` and 8-bit side `q`, else None:
    both contiguous, no block_size nor precision attribute, the kernel compiled in."""
    if f.dtype != F32 or int(getattr(kernel, "precision", 0) or 0) or int(kernel.block_size or 0) \
            or not f.flags.c_contiguous or not q.flags.c_contiguous or not hasattr(_kernels, fn):
        return None
    return per_tensor_8bit(scale, zp, q.dtype)


def c_step_8bit(kernel, base, kind, ins, outs, q_side):
    """The compiled run loop's entry (RL_QUANTIZE / RL_DEQUANTIZE, `kind` "quantize" / "dequantize") of a
    Quantize / DequantizeLinear `kernel` whose compute is `base`'s own: the per-tensor 8-bit path of compute, or None.
    q_side: 0 when the 8-bit tensor is the input (DequantizeLinear), 1 when it is the output (QuantizeLinear)."""
    x, y = ins[0], outs[0]
    if type(kernel).compute is not base.compute or x.__class__ is not np.ndarray \
            or x.shape != y.shape or y.size == 0 or np.may_share_memory(x, y):
        return None
    p = kernel._native(x, ins[1], ins[2] if len(ins) > 2 else None, y)
    if p is None:
        return None
    q = y if q_side else x
    return kind, [0, ~0], [y.size, 1 if q.dtype == np.int8 else 0], [p[0], p[1]]

