"""The kernels' side of onnxep.compute_precision=bf16 (issue 29): whether a kernel takes the bf16 GEMM
(_k_bgemm.pxi, onnxep/_native/bgemm.h) and the packing spec of its constant B in the bf16 layout.

bf16 is used only where the session asked for it AND the CPU has AVX512_BF16 (vdpbf16ps); elsewhere the kernels keep
their fp32 packing and GEMM (a fallback, not an error)."""
from __future__ import annotations

import numpy as np

from onnxep import _kernels


def use_bf16(kernel) -> bool:
    """True when the kernel's session asked for bf16 compute and this CPU has vdpbf16ps."""
    info = getattr(kernel, "info", None)
    return getattr(info, "precision", "fp32") == "bf16" and bool(getattr(_kernels, "bgemm_hw", lambda: False)())


#: the bf16 conv path without AMX (vdpbf16ps) is taken where vdpbf16ps gives at least this many times the fp32 FMA's
#: products per second (_kernels.bgemm_dp_ratio, timed once per process): ~2.0 on Zen 4 / Zen 5 (vdpbf16ps issues at
#: the FMA's rate), ~1.0 on Sapphire Rapids (half of it: the bf16 convs ran 1.4-3x slower than fp32 there); 1.5
#: halves the gap, so a noisy probe on either kind of CPU stays on its side
DP_CONV_MIN_RATIO = 1.5
_conv_force = None


def force_bf16_convs(on):
    """Tests: True sends the convs the rule admits to bf16 on any AVX512_BF16 CPU (the AMX path where the CPU has
    AMX, the vdpbf16ps one elsewhere), False keeps every conv fp32, None: the rule of bf16_conv_path."""
    global _conv_force
    _conv_force = None if on is None else bool(on)


def bf16_conv_path():
    """Which bf16 conv path a bf16 session's dense convs may take on this CPU: "amx" (AMX-BF16 tiles), "avx512bf16"
    (vdpbf16ps, where it gives clearly more products per second than the FMA: DP_CONV_MIN_RATIO) or None (fp32)."""
    if _conv_force is False or not _kernels.bgemm_hw():
        return None
    if _kernels.bgemm_have("amx"):
        return "amx"
    return "avx512bf16" if _vdpbf16_pays() else None


def _vdpbf16_pays() -> bool:
    """vdpbf16ps gives clearly more products per second than the FMA (DP_CONV_MIN_RATIO), or the convs are forced to
    bf16 (force_bf16_convs)."""
    return bool(_conv_force) or _kernels.bgemm_dp_ratio() >= DP_CONV_MIN_RATIO


class _Toggle:
    """A rule's switch for tests and in-process A/B: forced on / off, or None (the rule decides)."""

    def __init__(self):
        self.forced = None

    def force(self, on):
        self.forced = None if on is None else bool(on)

    def get(self, default: bool) -> bool:
        return default if self.forced is None else self.forced


_kpair = _Toggle()


def force_bf16_kpair(on):
    """Tests and in-process A/B: True / False turns the bf16 k-pair direct conv on / off, None: back to the rule
    (bf16_kpair)."""
    _kpair.force(on)


def bf16_kpair() -> bool:
    """Whether a bf16 session's direct convs of at most 16 output channels per group (the k-pair kernel's:
    _k_conv_nhwc.pxi _dconv_kpb_applies) run on bf16 operands (onnxep_dconv_kpb: one vdpbf16ps does the FMAs of two k
    over 16 channels, or of four k over 8): where the CPU has vdpbf16ps at clearly more products per second than the
    FMA (DP_CONV_MIN_RATIO), AMX or not (the kernel uses no tiles). Those convs stay off the bf16 GEMM (too few output
    channels: ops/onnxep/nhwc_conv.py)."""
    if _kpair.forced is not None:
        return _kpair.forced and bool(_kernels.bgemm_hw())
    return _conv_force is not False and bool(_kernels.bgemm_hw()) and _vdpbf16_pays()


#: on the vdpbf16ps conv path, a conv that fp32 runs on Winograd runs the bf16 Winograd (transforms in fp32, the
#: plane GEMMs on bf16 operands: _k_winograd.pxi) instead of staying fp32 (the bf16 direct conv lost to fp32 Winograd
#: there: ops/onnxep/nhwc_conv.py); on AMX the bf16 direct conv takes those convs
BF16_WINOGRAD = True
_wino = _Toggle()


def force_bf16_winograd(on):
    """Tests and in-process A/B: True / False turns the bf16 Winograd on / off (BF16_WINOGRAD), None: back to the
    rule."""
    _wino.force(on)


def bf16_winograd() -> bool:
    """Whether a bf16 session's Winograd convs run on bf16 operands where the conv path is "avx512bf16"."""
    return _wino.get(BF16_WINOGRAD)


#: ... and a conv fp32 runs on F(4x4, 3x3) runs the bf16 F(4x4) (not the bf16 F(2x2) nor fp32 F(4x4): the rule and
#: its error in ops/onnxep/nhwc_conv.py BF16_WINOGRAD_F2_MIN_CHANNELS)
BF16_WINOGRAD_F4 = True
_wino_f4 = _Toggle()


def force_bf16_winograd_f4(on):
    """Tests and in-process A/B: True / False turns the bf16 F(4x4) on / off (BF16_WINOGRAD_F4), None: back to the
    rule."""
    _wino_f4.force(on)


def bf16_winograd_f4() -> bool:
    """Whether a bf16 session's convs that fp32 runs on F(4x4) run the bf16 F(4x4) (where bf16_winograd holds)."""
    return _wino_f4.get(BF16_WINOGRAD_F4)


def bf16_conv_packings() -> str:
    """What decides a bf16 session's conv packings in this process, as an EPContext blob records it: the bf16 conv
    path ("amx", "avx512bf16" or "fp32"), "+winograd" when its Winograd convs take bf16 operands, "+winograd4" when
    those fp32 runs on F(4x4) take the bf16 F(4x4)."""
    path = bf16_conv_path()
    if path != "avx512bf16" or not bf16_winograd():
        return path or "fp32"
    return path + ("+winograd4" if bf16_winograd_f4() else "+winograd")


def bf16_format(trans_b) -> str:
    """The packed-weight cache's format key of a bf16 packing (distinct from every fp32 one)."""
    return f"{_kernels.BGEMM_FORMAT}:trans_b={int(bool(trans_b))}"


def bf16_pack_spec(tensor, trans_b):
    """((K, N), nfloats, fill) packing a float32 2-D weight (K x N; N x K when trans_b) to bf16 panels."""
    kn = (int(tensor.shape[1]), int(tensor.shape[0])) if trans_b else (int(tensor.shape[0]), int(tensor.shape[1]))
    b = np.ascontiguousarray(tensor, dtype=np.float32)
    return kn, _kernels.bgemm_pack_b_size(*kn), lambda out: _kernels.bgemm_pack_b(b, bool(trans_b), out)


#: FusedAttention's two products on bf16 operands (_native/attention.h onnxep_atb_rows, vdpbf16ps, fp32 softmax and
#: accumulation) where vdpbf16ps gives clearly more products per second than the FMA (DP_CONV_MIN_RATIO, as for the
#: convs: both products run on the bf16 GEMM's vdpbf16ps micro-kernel, never on AMX tiles) and a head has at least
#: ATTN_MIN_KEYS keys. Products and softmax both grow with queries x keys, so the keys decide: a head of 16 keys is
#: one half-filled 32-key panel whose Q.K^T is a few vdpbf16ps per row, and the per-row softmax, the rounding of Q and
#: of the probabilities and the per-head packing of K and V take what the products save (kernel alone, 1 thread,
#: head dims 8-128: 0.86-1.05 of fp32 at 16 keys, 0.56-0.96 at 32, 0.46-0.94 from 64; bench/NOTES.md)
ATTN_MIN_KEYS = 32
_attn = _Toggle()


def force_bf16_attention(on):
    """Tests and in-process A/B: True / False turns the bf16 attention on / off (where the CPU has vdpbf16ps), None:
    back to the rule (bf16_attention)."""
    _attn.force(on)


def attention_key():
    """What bf16_attention's answer depends on besides the shapes (the kernels' per-shape caches key on it)."""
    return ("attention", _attn.forced)


def bf16_attention(M, N, K, D) -> bool:
    """Whether a bf16 session's fused attention of M queries, N keys, head dims K (Q.K^T) and D (V) runs on bf16
    operands: only where the CPU has vdpbf16ps, and (unless forced) where it pays (ATTN_MIN_KEYS, DP_CONV_MIN_RATIO),
    and not for the few query rows (_kernels.ATTN_DIRECT_ROWS: a decoding step's one) the fp32 path multiplies with
    K and V as stored: the bf16 path packs each head's K and V first, which costs more than its products save there
    (Whisper-base's cross-attention, 1 query x 1500 keys x 64: 330 us against 95 in fp32)."""
    if not _kernels.bgemm_hw():
        return False
    return _attn.get(M > _kernels.ATTN_DIRECT_ROWS and N >= ATTN_MIN_KEYS
                     and _kernels.bgemm_dp_ratio() >= DP_CONV_MIN_RATIO)
