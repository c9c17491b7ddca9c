"""NhwcConv (domain com.onnxep): Conv over channel-last activations, written by the layout pass (graph/passes/
layout_nhwc.py), never by users. X is (N, H, W, C) and Y (N, Ho, Wo, Cout); W, B and the attributes are the ONNX Conv's
(W stays (Cout, Cin/group, kh, kw)). More from the fusion passes: an optional 4th input Z (NHWC) added to the result,
and `activation` with `activation_params` (as onnxruntime's FusedConv: "" / Relu / Clip [min, max] / LeakyRelu
[alpha] / Sigmoid / HardSigmoid [alpha, beta] / Tanh, and HardSwish) applied last -- y = act(conv(x, W) + B + Z), all
in the GEMM epilogue; a depthwise conv: "" / Relu / Clip / HardSwish, in its own kernel's epilogue. The fusion pass
also folds a residual Add whose operands it cannot prove the same shape (a TorchScript export's distinct symbolic
dims): a Z of another shape than the conv's output, checked once per input signature, takes the Add's broadcast,
unfused (y = act(broadcast(conv(x, W) + B, Z))).

Dense and grouped convs run conv_nhwc_f32 (implicit im2col, no col buffer; 3x3 stride-1 ones with enough channels by
Winograd's F(4x4, 3x3) or F(2x2, 3x3), their weight packed transformed); one input channel per group (depthwise) runs
conv_depthwise_nhwc_f32 (no Z; activations DW_ACTIVATIONS).

With onnxep.compute_precision=bf16 (ops/_bf16.py) a dense or grouped conv with a constant W runs on the bf16 GEMM
instead (_k_bgemm.pxi BConvNhwc: im2col rows gathered and rounded to bf16 while packed, W packed once in bf16, the same
epilogue; a grouped conv group by group, each a GEMM on its channels); depthwise convs stay fp32. Where the bf16 GEMM
runs on vdpbf16ps (not AMX), a conv fp32 runs on Winograd takes the bf16 Winograd of the same tile instead
(ConvNhwc paths "winograd-bf16" / "winograd4-bf16": transforms in fp32, the plane GEMMs on bf16 operands;
BF16_WINOGRAD_F2_MIN_CHANNELS)."""
import numpy as np

from onnxep import _kernels
from onnxep.ops._base import F32, OpKernel, f32_shape
from onnxep.ops._bf16 import bf16_conv_path, bf16_kpair, bf16_winograd, bf16_winograd_f4, use_bf16
from onnxep.ops._packed import PackedWeightMixin
from onnxep.ops.nn.conv import ConvAttrs, conv_geometry

DOMAIN = "com.onnxep"
ACTIVATIONS = _kernels.ACTIVATIONS      # name -> (code, number of activation_params)
DW_ACTIVATIONS = _kernels.DW_ACTIVATIONS    # the same for the depthwise kernel's epilogue
# Winograd F(2x2, 3x3) from this many input and output channels: below them the transforms cost more than the 16/36 of
# the products saves (kernel alone, 1 thread: 3 -> 64 at 224x224 1.31x the direct path's time, 4 -> 16 2.35x, 8 -> 8
# 1.12x, 16 -> 16 0.88x, 16 -> 32 0.82x; 32 channels and more 0.47-0.74x)
WINOGRAD_MIN_CHANNELS = 16
# ... and while its transformed weight adds at most this many bytes: F(2x2, 3x3) (16 floats per 3x3 filter instead of
# 9) up to 512 x 512 channels (7 MiB more), F(4x4, 3x3) (36 floats) where it fits the same budget, up to 256 x 256
# channels. Kernel alone, 1 thread, F(4x4) ran in 0.63-0.80x F(2x2)'s time on the light models' 3x3 convs (55x55 16 ->
# 64 0.72, 27x27 32 -> 128 0.66, 13x13 64 -> 256 0.80, 56x56 64 -> 64 0.68, 28x28 128 -> 128 0.65; 14x14 256 -> 256
# 0.89 and 7x7 512 -> 512 1.11). The budget was 2 MiB while batch-1 fully connected layers were packed into a copy
# beside their weight: with Winograd on every 3x3 conv VGG-19 and ZFNet-512 then peaked 1-2% above onnxruntime's RSS.
# Since those layers run on the weight as stored, 8 MiB (whole models, in-process A/B against 2 MiB, medians of
# alternating rounds: VGG-19 0.78x the time at 2 threads, 0.68x at 1; ZFNet-512 0.88x / 0.82x; AlexNet 0.97x / 0.98x;
# ResNet-50, whose two 7x7 512 -> 512 convs it moves, 1.01x / 0.99x); peak RSS (bench/bench_memory.py, 2 threads)
# VGG-19 648 -> 682 MB (onnxruntime: 984), ZFNet-512 421 -> 446 (700), AlexNet 314 -> 317, ResNet-50 unchanged
WINOGRAD_MAX_EXTRA_BYTES = 8 << 20
# ... and on images of at least this many pixels (X's static H * W): on small ones the 2.25x larger transformed weight,
# read from memory on every run inside a model, costs more than the products save. SqueezeNet's two 13x13 F(4x4) convs
# (64 -> 256, 48 -> 192) on F(2x2) instead: the whole model 0.96x the time at 2 threads, 0.96x at 1 (alternating runs
# in one process), although each conv alone, its weight hot in cache, ran in 0.80x the time on F(4x4). Re-measured
# after the output transforms moved into registers (F(4x4) alone now 0.75-0.78x F(2x2)'s time): still 0.91-0.94x on
# F(2x2) at 2 threads
WINOGRAD_F4_MIN_PIXELS = 24 * 24
# ... or, on smaller images, while F(4x4)'s transformed weight takes at most this many bytes (a quarter of a 2 MiB
# L2, so it stays in cache beside the activations from run to run: SqueezeNet's 13x13 convs above, 1.3-2.4 MiB, were
# slower on F(4x4)) and the batch has at least a micro-kernel tile's rows (MR) of 4x4 tiles (fewer leave the GEMM
# rows mostly empty). Kernel alone, 1 thread, F(4x4) against F(2x2): 3x16x16 16 -> 16 0.52x the time, 3x8x8 32 ->
# 32 0.65x, 3x8x8 64 -> 64 0.70x, 3x7x7 64 -> 64 0.73x; 3x4x4 64 -> 64 (3 tiles) 1.9x
WINOGRAD_F4_SMALL_WEIGHT_BYTES = 512 << 10
# ... and F(2x2, 3x3) on such small images only with at least MR 2x2 tiles in the batch, or 4 * MR when its
# transformed weight is larger than this (a 2 MiB L2: read from memory on every run, the GEMMs over so few rows are
# bound by the 16/9 larger weight, not the products). Kernel alone, 1 thread, against the direct / packed paths'
# best: 3x2x2 128 -> 128 (3 tiles) 1.6x the time, 3x2x2 64 -> 64 1.3x, 1x4x4 256 -> 256 (4 tiles) 1.0x,
# 1x7x7 512 -> 512 (16 tiles, 16 MiB) 1.3x, 2x7x7 512 -> 512 (32 tiles) 1.3x -- those now packed; kept: 3x4x4
# 64 -> 64 (12 tiles, 256 KiB) 0.51x, 1x7x7 256 -> 256 (16 tiles, 1 MiB) 0.87x, 1x13x13 64 -> 256 0.82x,
# 1x14x14 256 -> 256 (49 tiles, 4 MiB) 0.67x, 1x14x14 512 -> 512 (16 MiB) 0.78x
WINOGRAD_F2_CACHED_WEIGHT_BYTES = 2 << 20
_WINOGRAD_PATHS = {0: "auto", 2: "winograd", 4: "winograd4"}      # _winograd's tile -> conv_nhwc_f32's path
# bf16 (onnxep.compute_precision=bf16): a dense conv runs on the bf16 GEMM only where the CPU has AMX-BF16 tiles (or a
# vdpbf16ps that pays: the rule after this one), and
# only with at least this many products per output (C * kh * kw) and, for a spatial kernel, this many input channels:
# below them gathering and rounding the im2col rows costs more than the tiles save. Kernel alone, against the fp32
# path's best (Winograd F(4x4) where it applies), idle machine, 2 threads (1 thread): 1x1 256 -> 64 at 56x56 0.33x the
# time, 128 -> 512 at 28x28 0.29x, 64 -> 256 at 56x56 0.48x; 3x3 256 -> 256 at 14x14 0.41x, 128 -> 128 at 28x28 0.79x,
# 64 -> 64 at 56x56 1.19x (0.73x); below the rule 3x3 32 -> 32 at 56x56 1.18x, 16 -> 16 at 112x112 3.2x, the 7x7
# stride-2 stem on 3 channels 2.3x. vdpbf16ps alone (no AMX) ran every one of them slower than fp32 (1.4-3x) on this CPU
# (Sapphire Rapids, whose vdpbf16ps has half the FMA's instruction rate), so convs keep fp32 there
BF16_CONV_MIN_K = 128
BF16_CONV_MIN_CHANNELS = 64
# ... or, for a spatial kernel with fewer input channels, at least these many channels in, products per output (C * kh
# * kw) and output channels (per group): each gathered tap then feeds enough outputs. Per group for grouped convs (C
# and cout of one group). One conv alone in a session (+ Relu) against the fp32 session, 1 / 2 threads, a loaded
# machine: taken -- 5x5 32 -> 96 at 27x27 0.35x / 0.31x, 24 -> 64 at 13x13 0.48x / 0.36x, 16 -> 48 at 13x13 0.60x /
# 0.46x, 48 -> 128 at 6x6 0.38x / 0.33x; 3x3 48 -> 192 at 13x13 0.55x / 0.48x, 32 -> 128 at 27x27 0.70x / 0.76x,
# 32 -> 64 at 56x56 0.87x / 0.98x; AlexNet's grouped 5x5 (2 groups of 48 -> 128) at 27x27 0.34x / 0.29x. Left fp32:
# 3x3 16 -> 64 at 55x55 (K 144) 1.08x / 1.00x, 32 -> 32 at 56x56 1.17x / 1.05x, 5x5 16 -> 32 at 27x27 1.26x / 0.99x
# (at 56x56 1.08x / 1.50x), 8 -> 32 2.3x, the 3-channel stems (7x7 -> 96 stride 2 1.5x / 1.3x, 11x11 -> 96 stride 4
# 0.95x / 1.11x)
# Since a kernel row's in-image taps are gathered as one run of X (bgemm.h bg_conv_kx_range), the stems gather ~2x
# faster: conv alone, 1 thread, process CPU time (a loaded machine), bf16 / fp32: 11x11 stride-4 3 -> 96 at 224x224
# 1.50x -> 0.69x (K 363: now taken, AlexNet's stem), 7x7 stride-2 3 -> 64 2.25x -> 1.26x (K 147: left fp32), 3 -> 96
# 0.88x, 3x3 3 -> 64 2.2x; 3x3 16 -> 64 at 55x55 1.12x -> 0.86-0.91x, 32 -> 32 at 56x56 0.82x, 5x5 16 -> 32 at
# 27x27 0.86x, 16 -> 16 at 112x112 1.9x (all four under K 256 or cout 48: left fp32 until measured at 2 threads)
BF16_CONV_WIDE_MIN_CHANNELS = 3
BF16_CONV_WIDE_MIN_K = 256
BF16_CONV_WIDE_MIN_COUT = 48
# ... or, from BF16_CONV_MIN_K products per output, at least this many output channels (per group): the per-row gather
# and rounding then feed that many columns. With odd channel counts converted run by run straight into the packed row
# (bgemm.h bg_cvt_run_bf16), same measure as above: 7x7 stride-2 3 -> 96 at 224x224 0.61-0.72x (ZFNet-512's stem),
# 7x7 3 -> 128 at 112x112 0.66x, 5x5 6 -> 96 at 56x56 0.77x, 3x3 16 -> 96 at 55x55 0.66x, 16 -> 128 at 28x28 0.63x.
# Since odd-channel rows are packed by vector moves and X rounded once (bgemm.h bg_pack_conv_rows_odd, bg_conv.xh),
# 64 outputs pay too (were 0.99-1.11x): 7x7 stride-2 3 -> 64 at 224x224 0.79-0.83x (ResNet's stem), 3 -> 80 0.77x,
# 5x5 stride-2 5 -> 64 0.80x, 3x3 16 -> 64 at 55x55 0.85x (at 112x112 0.88x), 24 -> 64 at 56x56 0.77x, 5x5 8 -> 64
# at 56x56 0.88x, 6 -> 64 at 28x28 0.98x; below, 7x7 stride-2 3 -> 48 0.85x (stays out: K under WIDE_MIN_K)
BF16_CONV_WIDER_MIN_COUT = 64
# The same rule for the vdpbf16ps path (no AMX; taken where vdpbf16ps gives clearly more products per second than the
# FMA: ops/_bf16.py bf16_conv_path), except that a conv fp32 runs on Winograd stays off the bf16 direct conv there (it
# takes the bf16 Winograd instead: BF16_WINOGRAD_F2_MIN_CHANNELS): F(2x2, 3x3) does 2.25x
# fewer multiplies than the direct conv and F(4x4, 3x3) 4x, vdpbf16ps only twice the FMA's products. Measured on Zen 5
# (vdpbf16ps at the FMA's rate, probe ratio 2.0), each conv of the light models alone in a session (+ Relu), bf16
# with every threshold at 0 against the fp32 session, 1 thread process CPU time / 2 threads wall, a loaded machine:
# Winograd F(4x4) convs ran 1.2-3.9x slower (3x3 64 -> 64 at 56x56 1.76x / 1.76x, 128 -> 256 at 56x56 1.68x / 1.54x,
# 128 -> 32 at 28x28 3.9x / 2.7x), F(2x2) ones a tie (3x3 512 -> 512 at 28x28 0.95x / 0.99x, 192 -> 192 at 14x14
# 1.03x / 1.02x, 256 -> 512 at 28x28 1.05x / 1.02x); the others the rule takes gained as with AMX: 1x1 0.3-0.9x (128
# and more channels in; with 16-32 out ~0.95x), 3x3 stride 2 or at 6x6-12x12 0.23-0.71x, 5x5 0.14-0.66x, the
# 3-channel stems 11x11 -> 96 0.75x / 0.52x and 7x7 -> 96 0.56x / 0.68x; below it as with AMX: 1x1 64 -> 64 at 56x56
# 0.92x / 1.86x, 5x5 16 -> 32 at 27x27 0.97x / 3.3x, 7x7 3 -> 64 1.08x / 0.89x, 3x3 3 -> 64 1.5-4x
_BF16_CONV_THRESHOLDS = (BF16_CONV_MIN_K, BF16_CONV_MIN_CHANNELS, BF16_CONV_WIDE_MIN_CHANNELS, BF16_CONV_WIDE_MIN_K,
                         BF16_CONV_WIDE_MIN_COUT, BF16_CONV_WIDER_MIN_COUT)
# On the vdpbf16ps path a 1x1 conv (X read in place as A, rounded to bf16 row block by row block) pays from fewer
# products per output than BF16_CONV_MIN_K: from this many input channels and this many output channels (per group).
# vdpbf16ps does two products per lane where the FMA does one, so the products halve; what is left to pay is rounding
# A's M x K elements, shared by the N outputs, and the tile's epilogue (bgemm.h bg_tile_store), shared by K / 2 steps
# instead of K. Outputs: more than one 16-lane vector, so that each broadcast of A feeds the tile's two vectors a row
# (at 16 or fewer the tile has one, and its loads bound it). Each conv alone (+ Relu) in a session, bf16 with this
# rule against bf16 with the fp32 conv, in-process, medians of 7 alternating rounds, 1 thread / 2 threads (Zen 5, after
# the register epilogue of 2e8eba0; the session's NCHW <-> NHWC transposes are in both): taken -- 96 -> 24 at 56x56
# 0.80 / 0.80, 64 -> 32 at 56x56 0.81 / 0.77, 64 -> 48 at 28x28 0.75 / 0.78, 96 -> 32 at 28x28 0.79 / 0.84, 48 -> 48
# 0.77 / 0.81, 64 -> 32 at 14x14 0.78 / 0.92, 32 -> 24 at 56x56 0.86 / 0.92, 24 -> 144 at 56x56 0.79 / 0.74, 16 -> 96
# at 112x112 0.82 / 0.77, 16 -> 64 at 55x55 0.87 / 0.83, 24 -> 112 at 56x56 0.87 / 0.72, 20 -> 40 at 56x56 0.91 / 0.84,
# 16 -> 24 at 56x56 0.91 / 0.95, 16 -> 64 at 28x28 0.95 / 0.98, 16 -> 32 at 56x56 0.96 / 1.02; groups (the rule is per
# group): 4 of 34 -> 34 at 28x28 0.83 / 0.73, 2 of 48 -> 48 0.77 / 0.64; left fp32 -- 32 -> 16 at 112x112 0.99 /
# 1.02, 48 -> 16 at 55x55 0.95 / 1.00, 64 -> 8 at 56x56 1.02 / 1.04. On AMX the rule above (BF16_CONV_MIN_K) stays,
# as measured there
BF16_POINTWISE_MIN_K = 16
BF16_POINTWISE_MIN_COUT = 17
# bf16_conv_path() -> (MIN_K, MIN_CHANNELS, WIDE_MIN_CHANNELS, WIDE_MIN_K, WIDE_MIN_COUT, WIDER_MIN_COUT, a 1x1's
# MIN_K and MIN_COUT, also over Winograd): one set of thresholds for both paths (measured alike above) but the 1x1
# convs', Winograd convs kept off the bf16 direct conv on vdpbf16ps
_BF16_CONV_RULES = {"amx": _BF16_CONV_THRESHOLDS + (BF16_CONV_MIN_K, 0, True),
                    "avx512bf16": _BF16_CONV_THRESHOLDS + (BF16_POINTWISE_MIN_K, BF16_POINTWISE_MIN_COUT, False)}


# bf16 Winograd (ops/_bf16.py bf16_winograd, the vdpbf16ps conv path): the tile fp32 takes. Rounding V and U to bf16
# (u = 2^-8) puts 2u |U||V| on each product; F(4x4)'s transforms (entries up to 5 in B^T, 8 in A^T) amplify it to
# ~6x F(2x2)'s error (3x3 64 -> 64 and 256 -> 256 alone, random data, rms error / rms output: F(2x2) 4.0e-3, F(4x4)
# 2.4-2.6e-2; 1 - cosine 8e-6 against 3e-4 per conv). At a model's output that error stays well inside issue 29's
# cosine >= 0.999 against fp32: the tensor feeding the light models' Softmax, 1 - cosine with every F(4x4) conv on
# bf16 F(4x4) / as before: VGG-19 1.4e-4 / 3.3e-5, Inception-v1 2.1e-5 / 1.5e-5, Inception-v2 1.8e-5 / 1.5e-5,
# DenseNet-121 8e-6 / 9e-6, ResNet-50 9e-6 / 9e-6, SqueezeNet 5e-6 / 6e-6; the zoo's first output (bench/zoo):
# unet 5.3e-4 / 8.7e-6 (16x16 images, 32-64 channels, every 3x3 conv on F(4x4), no pooling head to average the
# error out: the worst seen), resnet_torch 4.2e-6 / 3.1e-6. And it is the fastest of the three choices: kernel
# alone (+ Relu, 1 thread, process CPU time, a loaded machine), bf16 F(4x4) / fp32 F(4x4) (bf16 F(4x4) / bf16
# F(2x2)): 3x3 64 -> 64 at 56x56 0.78x (0.69x), 128 -> 128 at 28x28 0.81x (0.89x), 256 -> 256 at 56x56 0.72x
# (0.84x), 64 -> 192 at 56x56 0.71x (0.77x), 96 -> 128 at 28x28 0.68x (0.72x), 128 -> 32 at 28x28 0.78x (0.70x),
# 32 -> 128 at 27x27 0.73x (0.71x), 16 -> 64 at 55x55 0.96x (0.81x). With the bf16 F(4x4) off (BF16_WINOGRAD_F4,
# force_bf16_winograd_f4) the earlier rule holds: a conv fp32 runs on
# F(4x4) takes the bf16 F(2x2) only where its GEMMs outweigh its 2.25x more transform work per output by a margin: the
# transforms scale with C + K, the GEMM with C * K, so from C * K / (C + K) >= this many channels. Kernel alone,
# bf16 F(2x2) / fp32 F(4x4) time at 1 thread (process CPU) / 2 threads, a loaded machine: 256 -> 256 at 14x14
# 0.65x / 0.68x, 144 -> 288 0.66x (2 threads), 160 -> 320 at 14x14 and 7x7 0.70x / 0.68x (2 threads), 512 -> 512 at
# 7x7 0.44x / 0.38x and at 28x28 0.63x / 0.54x, 128 -> 256 at 56x56 0.92x / 0.83-0.89x; below it a tie at best, not
# worth F(2x2)-bf16's larger error (left F(4x4) fp32): 128 -> 192 at 28x28 0.97x / 0.96-1.10x, 128 -> 128 0.92-0.99x
# / 0.87-0.88x, 96 -> 128 0.98x / 0.99-1.00x, 64 -> 192 at 56x56 0.99x / 0.98-1.23x, 64 -> 64 1.03x / 0.88x and at
# 224x224 1.16x / 1.07x, 32 -> 128 at 27x27 1.08x / 0.88x, 16 -> 64 at 55x55 1.20x / 1.17x. Against fp32 F(2x2)
# the bf16 F(2x2) ran 0.52-0.89x on all of these (taken wherever fp32 runs F(2x2))
BF16_WINOGRAD_F2_MIN_CHANNELS = 80


def _plain_f32(*arrays) -> bool:
    return all(a.__class__ is np.ndarray and a.dtype == F32 and a.flags.c_contiguous for a in arrays)


def _apply_activation(y, act):
    """The epilogue's activation (ACTIVATIONS: name, then its parameters) on y in place, as the GEMM epilogue applies
    it (sgemm.h: Clip as numpy.clip, HardSwish v * min(1, max(0, v/6 + 1/2)), Sigmoid and Tanh the eltwise
    kernels)."""
    name, p = act[0], act[1:]
    if name == "Relu":
        np.maximum(y, 0, out=y)
    elif name == "Clip":
        np.clip(y, F32(p[0]), F32(p[1]), out=y)
    elif name == "LeakyRelu":
        np.multiply(y, np.where(y < 0, F32(p[0]), F32(1)), out=y)
    elif name == "Sigmoid":
        _kernels.sigmoid_f32(y.reshape(-1), y.reshape(-1), 1)
    elif name == "HardSigmoid":
        np.clip(y * F32(p[0]) + F32(p[1]), 0, 1, out=y)
    elif name == "Tanh":
        _kernels.tanh_f32(y.reshape(-1), y.reshape(-1), 1)
    elif name == "HardSwish":
        np.multiply(y, np.clip(y * F32(1 / 6) + F32(0.5), 0, 1), out=y)
    elif name:
        raise ValueError(f"unknown activation {name!r}")


def _is_f32_rank4(vt):
    return f32_shape(vt, 4) is not None


class NhwcConv_1(ConvAttrs, PackedWeightMixin, OpKernel):
    domain, op_type, since = DOMAIN, "NhwcConv", 1
    type_constraints = {}        # no onnx schema for this domain: supports() checks the types
    activation = ""
    activation_params = None
    inplace = ((0, 3),)          # Y may take Z's memory: conv_nhwc_f32 reads each residual element before writing it

    @classmethod
    def supports(cls, op):
        ins = op.node.inputs
        if not (2 <= len(ins) <= 4) or len(op.node.outputs) != 1:
            return False
        w = op.input_types[1]        # a constant W is pre-packed; any other is packed per run
        if not _is_f32_rank4(w) or not _is_f32_rank4(op.input_types[0]) \
                or not all(isinstance(d, int) for d in w.shape):
            return False
        if len(ins) > 2 and ins[2] and f32_shape(op.input_types[2]) is None:
            return False
        if len(ins) > 3 and ins[3] and not _is_f32_rank4(op.input_types[3]):
            return False
        a = op.node.attrs
        group = int(a.get("group", 1) or 1)
        act = a.get("activation") or ""
        if group < 1 or w.shape[0] % group:
            return False
        # the depthwise kernel has no residual input and its own epilogue (Relu, Clip, HardSwish)
        depthwise = cls._depthwise_shape(w.shape, group)
        acts = DW_ACTIVATIONS if depthwise else ACTIVATIONS
        if act not in acts or len(a.get("activation_params") or ()) != acts[act][1]:
            return False
        return not (depthwise and len(ins) > 3 and ins[3])

    @staticmethod
    def _depthwise_shape(wshape, group):
        return group > 1 and wshape[1] == 1

    def _winograd(self, wshape):
        """The Winograd tile m that W of this shape is packed for (and runs on): 4 (F(4x4, 3x3)) or else 2 (F(2x2,
        3x3)) for 3x3, stride and dilation 1, group 1, at least WINOGRAD_MIN_CHANNELS input and output channels,
        the larger tile that adds at most WINOGRAD_MAX_EXTRA_BYTES of packed weight over the direct path's (SIMD
        variants), F(4x4) only on images of WINOGRAD_F4_MIN_PIXELS or more, or of at least MR 4x4 tiles in the
        batch with at most WINOGRAD_F4_SMALL_WEIGHT_BYTES of F(4x4) weight, F(2x2) on smaller images only with MR
        2x2 tiles (4 * MR past WINOGRAD_F2_CACHED_WEIGHT_BYTES of F(2x2) weight); 0: not Winograd. Decided from the
        attributes, W's shape and X's static shape alone, so packing and running (and an EPContext load, whose value
        types are the saved model's) agree."""
        if wshape[0] < WINOGRAD_MIN_CHANNELS or wshape[1] < WINOGRAD_MIN_CHANNELS \
                or not _kernels.wino_applies(wshape[2:], self.strides or (1, 1), self.dilations or (1, 1),
                                             int(self.group), wshape[1]):
            return 0
        x = f32_shape(self.info.input_types[0], 4) if self.info.input_types else None
        big = x is not None and isinstance(x[1], int) and isinstance(x[2], int) \
            and (x[1] * x[2] >= WINOGRAD_F4_MIN_PIXELS
                 or (36 * 4 * wshape[0] * wshape[1] <= WINOGRAD_F4_SMALL_WEIGHT_BYTES
                     and (x[0] if isinstance(x[0], int) else 1) * (-(-x[1] // 4)) * (-(-x[2] // 4)) >= _kernels.MR))
        for m in ((4, 2) if big else (2,)):
            if ((m + 2) ** 2 - 9) * 4 * wshape[0] * wshape[1] > WINOGRAD_MAX_EXTRA_BYTES:
                continue
            if m == 2 and x is not None and isinstance(x[1], int) and isinstance(x[2], int) \
                    and x[1] * x[2] < WINOGRAD_F4_MIN_PIXELS:
                tiles = (x[0] if isinstance(x[0], int) else 1) * (-(-x[1] // 2)) * (-(-x[2] // 2))
                cached = 16 * 4 * wshape[0] * wshape[1] <= WINOGRAD_F2_CACHED_WEIGHT_BYTES
                if tiles < (1 if cached else 4) * _kernels.MR:
                    continue
            return m
        return 0

    def _bf16(self, wshape):
        """True when this conv runs on the bf16 GEMM: the session asked for bf16 and the CPU has a bf16 conv path
        that pays (ops/_bf16.py bf16_conv_path: AMX, or vdpbf16ps at the FMA's rate; its rule here), not depthwise
        (grouped convs run group by group), and W constant, so packed once (a W computed per run keeps the fp32
        path). Once packed, the constant itself may be gone (compile drops it; an EPContext load never had it): the
        packed weight answers then. The thresholds are per group (W's second dim is a group's channels)."""
        path = bf16_conv_path() if use_bf16(self) else None
        if path is None or self._depthwise_shape(wshape, int(self.group)):
            return False
        min_k, min_c, wide_c, wide_k, wide_cout, wider_cout, pw_k, pw_cout, over_winograd = _BF16_CONV_RULES[path]
        cg, k, og = wshape[1], wshape[1] * wshape[2] * wshape[3], wshape[0] // int(self.group)
        if wshape[2] * wshape[3] == 1:
            taken = k >= min_k or (k >= pw_k and og >= pw_cout)
        else:
            taken = k >= min_k and (cg >= min_c
                                    or (cg >= wide_c and (og >= wider_cout or (k >= wide_k and og >= wide_cout))))
        return taken and (over_winograd or not self._winograd(wshape)) and self._w_constant()

    def _w_constant(self):
        """W is a constant: to be packed (a constant input), packed, or described by an EPContext blob's packing info
        (set_prepacked_weight_info, before the packed buffers come)."""
        return self.packed(1) is not None or self.info.constants.get(1) is not None \
            or self.__dict__.get("_describing_packing", False)

    def set_prepacked_weight_info(self, info, input_index) -> None:
        self._describing_packing = True     # a blob's packing: W was constant when it was packed (_w_constant)
        try:
            super().set_prepacked_weight_info(info, input_index)
        finally:
            self._describing_packing = False

    def _bf16_winograd(self, wshape):
        """The tile m of the bf16 Winograd a conv runs (ConvNhwc path "winograd-bf16" for 2, "winograd4-bf16" for 4),
        else 0: the session asked for bf16, the CPU's bf16 conv path keeps Winograd convs off the bf16 direct conv
        (vdpbf16ps, not AMX: _BF16_CONV_RULES), ops/_bf16.py bf16_winograd allows it, and W is constant (or already
        packed), as for _bf16. 4 where fp32 runs F(4x4) (ops/_bf16.py bf16_winograd_f4; with it off, 2 there from
        BF16_WINOGRAD_F2_MIN_CHANNELS, else 0), 2 where fp32 runs F(2x2)."""
        path = bf16_conv_path() if use_bf16(self) else None
        if path is None or _BF16_CONV_RULES[path][-1] or not bf16_winograd():
            return 0
        m = self._winograd(wshape)
        if m == 4 and bf16_winograd_f4():
            return 4 if self._w_constant() else 0
        if m == 4 and wshape[0] * wshape[1] < BF16_WINOGRAD_F2_MIN_CHANNELS * (wshape[0] + wshape[1]):
            return 0
        return 2 if m and self._w_constant() else 0

    def _conv_path(self, wshape):
        """ConvNhwc's path for a dense conv of W's shape and its pre-packed weight (not the bf16 GEMM's BConvNhwc):
        the bf16 Winograd as _pack decided it (a rule forced on or off later does not change what was packed); else
        "auto", or "auto-bf16" in a bf16 session where the direct path's k-pair kernel may run on bf16 operands
        (ops/_bf16.py bf16_kpair; ConvNhwc takes it for the direct convs of at most 16 output channels per group; the
        weight stays packed in fp32, its bf16 pair rows are made per call)."""
        m = self.__dict__.get("_packed_bf16_winograd")
        m = self._bf16_winograd(wshape) if m is None else m
        if m:
            return _WINOGRAD_PATHS[m] + "-bf16"
        path = _WINOGRAD_PATHS[self._winograd(wshape)]
        return path + "-bf16" if path == "auto" and use_bf16(self) and bf16_kpair() else path

    def prepack_format(self, input_index):
        w = self.info.constants.get(1)
        group = int(self.group)
        if w is not None and self._bf16(w.shape):
            return f"{_kernels.BGEMM_FORMAT}:conv-nhwc-kkc" + (f":group={group}" if group > 1 else "")
        m = 0 if w is None else self._bf16_winograd(w.shape)
        if m:
            return f"{_kernels.BGEMM_FORMAT}:winograd-f{m}x3-nhwc"
        kind = "conv-nhwc"
        m = 0 if w is None else self._winograd(w.shape)
        if w is not None and self._depthwise_shape(w.shape, group):
            kind = "dw-nhwc"
        elif m:
            kind = f"winograd-f{m}x3-nhwc"
        return f"{_kernels.SGEMM_FORMAT}:{kind}:group={group}"

    def _pack_spec(self, tensor, input_index):
        if input_index != 1 or tensor.ndim != 4 or tensor.dtype != F32:
            return None
        self._wshape = tuple(int(d) for d in tensor.shape)
        return self._pack(np.ascontiguousarray(tensor))

    def _pack(self, w):
        cout, cg, kh, kw = w.shape
        group = int(self.group)
        if self._bf16(w.shape):     # per group B = W as (kh * kw * cg) x cout/group, rows in (ky, kx, c) order
            return (_kernels.bconv_pack_weight_size(cout, cg, kh, kw, group),
                    lambda out: _kernels.bconv_pack_weight(w, group, out))
        if self._depthwise_shape(w.shape, group):
            return (_kernels.dw_pack_weight_nhwc_size(cout, kh, kw),
                    lambda out: _kernels.dw_pack_weight_nhwc(w.reshape(-1), cout, kh, kw, out))
        m = self._packed_bf16_winograd = self._bf16_winograd(w.shape)
        if m:
            return (_kernels.conv_wino_pack_weight_bf16_size(cout, cg, m),
                    lambda out: _kernels.conv_wino_pack_weight_bf16(w, out, m))
        m = self._winograd(w.shape)
        if m:
            return (_kernels.conv_wino_pack_weight_size(cout, cg, m),
                    lambda out: _kernels.conv_wino_pack_weight(w, out, m))
        return (_kernels.conv_nhwc_pack_weight_size(cout, cg * kh * kw, group),
                lambda out: _kernels.conv_nhwc_pack_weight(w, group, out))

    @property
    def strided_output(self):
        """Y may be a channel slice of a Concat's output (conv_nhwc_f32's and BConvNhwc's ldy): not with a residual
        Z (its stride is Y's) nor for the depthwise kernel."""
        w = self.info.input_types[1] if len(self.info.input_types) > 1 else None
        wshape = getattr(w, "shape", None)
        return (len(self.info.input_types) < 4 or self.info.input_types[3] is None) and wshape is not None \
            and not self._depthwise_shape(wshape, int(self.group))

    def compute(self, ctx):
        values, ins = ctx.values, ctx.ins      # inputs 0, 2, 3 are never packed: read straight from the run's values
        X = values[ins[0]]
        wp = self._run_weight(ctx, 1)
        n = len(ins)
        B = values[ins[2]] if n > 2 and ins[2] else None
        Z = values[ins[3]] if n > 3 and ins[3] else None
        self._check_bias(B, self._wshape[0])
        plan = self._shape_plan
        if plan is None or plan[5] is not wp or plan[0] != X.shape:
            plan = self._shape_plan = self._plan_for(X.shape, self._wshape, int(self.group), wp)
        _, yshape, conv, geo, depthwise, _, _ = plan
        if Z is not None and Z.shape != yshape:
            self._broadcast_residual(ctx, X, B, Z, plan)
            return
        Y = ctx.output(0, yshape, F32)
        if depthwise:
            _kernels.conv_depthwise_nhwc_f32(X.reshape(-1), conv, wp, yshape[3], *geo, B, Y.reshape(-1),
                                             False, ctx.num_threads, self._act)
        elif ctx.slot is None or Y.flags.c_contiguous:
            conv.run(X.reshape(-1), B, None if Z is None else Z.reshape(-1), Y.reshape(-1), ctx.num_threads, 0)
        else:   # a channel slice of a Concat's output (ctx.slot, C-contiguous): its pixels ldy floats apart
            target, offset, ldy = ctx.slot
            y = values[target].reshape(-1)
            conv.run(X.reshape(-1), B, None if Z is None else Z.reshape(-1),
                     y[offset:offset + (yshape[0] * yshape[1] * yshape[2] - 1) * ldy + yshape[3]], ctx.num_threads,
                     ldy)

    def _run_weight(self, ctx, index):
        """W packed: the pre-packed one, or (not pre-packed: session.disable_prepacking, or W computed per run) packed
        now from the run's input `index` (NhwcPwDw hands its sub-kernels their W at inputs 1 and 3)."""
        wp = self.packed(1)
        if wp is None:
            W = ctx.input(index)
            self._wshape = tuple(W.shape)
            n, fill = self._pack(np.ascontiguousarray(W, F32))
            wp = np.empty(n, F32)
            fill(wp)
        return wp

    def _broadcast_residual(self, ctx, X, B, Z, plan):
        """A residual Z of another shape than the conv's output (the fusion pass folds an Add whose operands it cannot
        prove equal, e.g. a TorchScript export's distinct symbolic dims): Add's broadcast, then the activation --
        y = act(broadcast(conv(x, W) + B, Z)), unfused. Decided once per input signature: the compiled run loop
        keeps the C step only for the signatures where Z has the conv output's shape (c_step)."""
        yshape = plan[1]
        try:
            shape = np.broadcast_shapes(yshape, Z.shape)
        except ValueError:
            raise ValueError(f"Z has shape {Z.shape}, which does not broadcast with the conv's output {yshape}") \
                from None
        bare = self._bare_conv
        if bare is None or bare[0] is not plan:
            if isinstance(plan[2], _kernels.BConvNhwc):      # bf16 (its weight is packed for the bf16 GEMM)
                conv = _kernels.BConvNhwc(plan[0], plan[5], yshape[3], *plan[3], ("",), int(self.group))
            else:
                conv = _kernels.ConvNhwc(plan[0], plan[5], yshape[3], int(self.group), *plan[3], False, ("",),
                                         plan[6])
            bare = self._bare_conv = (plan, conv)
        t = np.empty(yshape, F32)
        bare[1].run(X.reshape(-1), B, None, t.reshape(-1), ctx.num_threads)
        Y = ctx.output(0, shape, F32)
        np.add(t, Z, out=Y)
        _apply_activation(Y, self._act)

    # (the plan, a ConvNhwc of it without activation) for _broadcast_residual
    _bare_conv = None

    def c_step(self, ins, outs, nthreads):
        """The compiled run loop's entry, for a pre-packed W and plain contiguous float32 arrays of the shapes compute
        planned for: RL_CONV_NHWC (ConvNhwc's run, residual Z in place or apart) or RL_DW_NHWC (the depthwise
        kernel): no Python left per conv."""
        if "compute" in self.__dict__ or type(self).compute is not NhwcConv_1.compute:
            return None
        wp, plan = self.packed(1), self._shape_plan
        if wp is None or plan is None or plan[5] is not wp or len(outs) != 1:
            return None
        shape, yshape, conv, geo, depthwise, _, _ = plan
        X, Y = ins[0], outs[0]
        B = ins[2] if len(ins) > 2 else None
        Z = ins[3] if len(ins) > 3 else None
        if not _plain_f32(X, Y) or X.shape != shape or Y.shape != yshape:
            return None
        if (B is not None and (not _plain_f32(B) or B.shape != (yshape[3],))) \
                or (Z is not None and (not _plain_f32(Z) or Z.shape != yshape)):
            return None
        if depthwise:
            ints, floats = _kernels.dw_nhwc_step_args(conv, yshape[3], *geo, self._act)
            return "dw_nhwc", [0, wp, None if B is None else 2, ~0], ints, floats
        ints, floats = conv.step_args()
        if isinstance(conv, _kernels.BConvNhwc):
            return "bconv_nhwc", [0, wp, None if B is None else 2, None if Z is None else 3, ~0], ints, floats
        return "conv_nhwc", [0, wp, None if B is None else 2, None if Z is None else 3, ~0], ints, floats

    # (X shape, Y shape, the _kernels.ConvNhwc (depthwise: the kernel's xshape), geometry args, depthwise, the packed
    # weight it was made with, ConvNhwc's path (None for BConvNhwc)): the last seen
    _shape_plan = None

    def _plan_for(self, shape, wshape, group, wp):
        """What compute derives from X's shape and the (packed) weight alone: checked and computed once, not per
        run."""
        if len(shape) != 4:
            raise ValueError(f"X must be 4-D (NHWC), got shape {shape}")
        N, H, W_, C = shape
        if C != wshape[1] * group:
            raise ValueError(f"X has {C} channels but W {wshape} with group={group} needs {wshape[1] * group}")
        pb, outs = conv_geometry((N, C, H, W_), wshape, self.auto_pad, self.kernel_shape, self.strides,
                                 self.dilations, self.pads)
        geo = (tuple(wshape[2:]), tuple(self.strides or (1, 1)), tuple(self.dilations or (1, 1)), tuple(pb),
               tuple(outs))
        depthwise = self._depthwise_shape(wshape, group)
        # wp is the pre-packed weight, or one _pack made for this run (session.disable_prepacking): packed by the same
        # rules either way
        p1 = self.packed(1)
        own = p1 is None or p1 is wp
        if not depthwise and self._bf16(wshape) and own:
            conv = _kernels.BConvNhwc((N, H, W_, C), wp, wshape[0], *geo, self._act, group)
            return shape, (N, outs[0], outs[1], wshape[0]), conv, geo, depthwise, wp, None
        path = self._conv_path(wshape) if own else _WINOGRAD_PATHS[self._winograd(wshape)]
        conv = (N, H, W_, C) if depthwise else _kernels.ConvNhwc((N, H, W_, C), wp, wshape[0], group, *geo,
                                                                   False, self._act, path)
        return shape, (N, outs[0], outs[1], wshape[0]), conv, geo, depthwise, wp, path

    @property
    def _act(self):
        return (self.activation or "",) + tuple(float(p) for p in (self.activation_params or ()))
