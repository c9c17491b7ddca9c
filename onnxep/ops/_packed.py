"""PackedWeightMixin: the pre-packing half of the Kernel contract for kernels whose weight becomes a packed GEMM B.

The subclass decides what to pack (`_pack_spec`) and reads the packed array back with `self._packed.get(index)`.
Sharing mode (cache given): the buffer is handed to the cache, which owns it from then on, and the shared copy comes
back through set_shared_prepacked_weight. Non-sharing mode (cache None): the kernel keeps the buffer and frees it in
release().

EPContext (graph/epcontext.py): prepacked_weight_info is the original weight's shape and dtype and the packed length;
on load, set_prepacked_weight_info runs `_pack_spec` on a zero-filled stand-in of that shape (calloc'd, never
touched) so the kernel records its shapes exactly as when it packed, and refuses a length that does not match. So
`_pack_spec` must decide from shapes, dtypes and attributes only: the weight's values are read by `fill` alone."""
from __future__ import annotations

import numpy as np

from onnxep import _kernels
from onnxep.ops._bf16 import bf16_format, bf16_pack_spec, use_bf16
from onnxep.ops._gemv import GEMV_NK_FORMAT, gemv_nk_pack_spec


_DTYPE_NAMES: dict = {}


def _dtype_name(dtype) -> str:
    """np.dtype(dtype).name, looked up once per dtype (numpy works the name out in Python, ~3 us, and every packed
    weight of every session records it)."""
    name = _DTYPE_NAMES.get(dtype)
    if name is None:
        name = _DTYPE_NAMES[dtype] = np.dtype(dtype).name
    return name


class PackedWeightMixin:
    def _pack_spec(self, tensor: np.ndarray, input_index: int):
        """(nfloats, fill(out_array)) to pack `tensor`, or None to leave it unpacked. Record shapes here."""
        return None

    def prepack_weight(self, tensor, input_index, allocator, cache) -> bool:
        spec = self._pack_spec(np.asarray(tensor), input_index)
        if spec is None:
            return False
        nfloats, fill = spec
        buf = allocator.alloc_buffer(max(int(nfloats), 1) * 4)
        arr = buf.view(np.float32, (int(nfloats),))
        try:
            fill(arr)
        except BaseException:
            buf.free_buffer()
            raise
        # input -> (packed length, original shape, original dtype): one dict for both (every kernel keeps it)
        self.__dict__.setdefault("_packed_meta", {})[input_index] = (int(nfloats), tuple(int(d) for d in tensor.shape),
                                                                     _dtype_name(tensor.dtype))
        if cache is not None:
            # Ownership of `buf` moves to the cache here: this kernel must not free it. The data to use arrives via
            # set_shared_prepacked_weight (possibly another kernel's identical packing).
            cache.store_weight_data([buf])
        else:
            self.__dict__.setdefault("_owned", []).append(buf)
            self.__dict__.setdefault("_packed", {})[input_index] = arr
        return True

    def set_shared_prepacked_weight(self, buffers, input_index) -> None:
        n = self._packed_meta[input_index][0]
        if buffers[0].get_size() < n * 4:   # (a blob's claim; what prepack_weight stored always fits)
            raise ValueError(f"input {input_index}: the packed buffer holds {buffers[0].get_size()} bytes, the "
                             f"packing needs {n * 4}")
        self.__dict__.setdefault("_packed", {})[input_index] = buffers[0].view(np.float32, (n,))

    def prepacked_weight_info(self, input_index):
        meta = self.__dict__.get("_packed_meta", {}).get(input_index)
        if meta is None or meta[1] is None:
            return None
        return {"shape": list(meta[1]), "dtype": meta[2], "nfloats": meta[0]}

    def set_prepacked_weight_info(self, info, input_index) -> None:
        shape, dtype, nfloats = tuple(int(d) for d in info["shape"]), np.dtype(str(info["dtype"])), int(info["nfloats"])
        # a packing holds every weight (plus padding): a weight larger than its packing is a lie, refused before
        # the stand-in is allocated
        # (a bf16 packing, onnxep.compute_precision=bf16, holds two weights per float slot: ops/_bf16.py)
        per_slot = 2 if getattr(getattr(self, "info", None), "precision", "fp32") == "bf16" else 1
        if (any(d < 0 for d in shape) or dtype.kind not in "fiub"
                or int(np.prod(shape, dtype=object)) > nfloats * per_slot):
            raise ValueError(f"input {input_index}: invalid weight shape {shape} / dtype {dtype} for {nfloats} "
                             f"packed floats")
        spec = self._pack_spec(np.zeros(shape, dtype), input_index)   # shapes only: fill is never called
        if spec is None or int(spec[0]) != nfloats:
            raise ValueError(f"input {input_index}: a {dtype} weight of shape {shape} packs to "
                             f"{None if spec is None else int(spec[0])} floats for this kernel, the blob holds "
                             f"{nfloats}")
        self.__dict__.setdefault("_packed_meta", {})[input_index] = (nfloats, None, None)

    def packed(self, input_index):
        """The packed weight of `input_index`, or None when that input was not packed."""
        return self.__dict__.get("_packed", {}).get(input_index)

    def release(self) -> None:
        self.__dict__.pop("_packed", None)
        for b in self.__dict__.pop("_owned", ()):
            b.free_buffer()


def gemm_b_pack_spec(kernel, tensor, trans_b):
    """(nfloats, fill) packing the constant float32 2-D B (K x N; N x K when trans_b) of a Gemm, MatMul or FusedMatMul
    kernel, and the kernel's record of the choice: kernel._b_kn = (K, N), and kernel._nk (the tiny-N dot form,
    ops/_gemv.py) or kernel._bf16 (the bf16 GEMM, onnxep.compute_precision=bf16: ops/_bf16.py) set where that form is
    taken; else the SGEMM's panels."""
    spec = gemv_nk_pack_spec(tensor, trans_b)
    if spec is not None:
        kernel._nk = True
    elif use_bf16(kernel):
        spec = bf16_pack_spec(tensor, trans_b)
        kernel._bf16 = True
    else:
        kn = (int(tensor.shape[1]), int(tensor.shape[0])) if trans_b else (int(tensor.shape[0]), int(tensor.shape[1]))
        b = np.ascontiguousarray(tensor)
        spec = kn, _kernels.sgemm_pack_b_size(*kn), lambda out: _kernels.sgemm_pack_b(b, bool(trans_b), out)
    kernel._b_kn, n, fill = spec
    return n, fill


def gemm_b_format(kernel, trans_b) -> str:
    """The packed-weight cache's format key of gemm_b_pack_spec's packing: Gemm, MatMul and FusedMatMul share a
    packed B wherever their layouts agree (MatMul's is Gemm's with transB=0)."""
    if kernel.__dict__.get("_nk"):
        return GEMV_NK_FORMAT
    if use_bf16(kernel):
        return bf16_format(trans_b)
    return f"{_kernels.SGEMM_FORMAT}:trans_b={int(bool(trans_b))}"
