"""MelWeightMatrix (opset 17): the [dft_length // 2 + 1, num_mel_bins] matrix of triangular mel filters, as onnxruntime
and onnx.reference build it: num_mel_bins + 2 points spaced by (mel(upper) - mel(lower)) / (num_mel_bins + 2) from
mel(lower) (mel(f) = 2595 log10(1 + f / 700)), each mapped back to hertz and to the spectrogram bin floor((dft_length +
1) * hz / sample_rate); filter i rises from 0 at bin b_i to 1 at b_(i+1) (a single 1 when they coincide) and falls to 0
at b_(i+2). Built in float64 with one vectorized expression over bins x filters, cast to output_datatype. The output
size depends on the inputs' data: checked before allocating."""
import numpy as np

from onnxep.errors import InvalidArgument
from onnxep.graph.model import check_size
from onnxep.ops._base import OpKernel
from onnxep.ops.signal._signal import INDEX_TYPES, OUTPUT_DATATYPES, output_dtype, scalar
from onnxep.ops.tensor._helpers import new_output


class MelWeightMatrix_17(OpKernel):
    domain, op_type, since = "", "MelWeightMatrix", 17
    type_constraints = {"T1": INDEX_TYPES, "T2": ("float16", "float32", "float64", "bfloat16")}
    output_datatype = 1

    @classmethod
    def supports(cls, op):
        return int(op.node.attrs.get("output_datatype", 1)) in OUTPUT_DATATYPES

    def compute(self, ctx):
        where = f"MelWeightMatrix node {self.name!r}"
        n_mel, dft_length, rate = (int(scalar(ctx.input(i), name, where)) for i, name in
                                   enumerate(("num_mel_bins", "dft_length", "sample_rate")))
        lower, upper = (float(scalar(ctx.input(i), name, where)) for i, name in
                        ((3, "lower_edge_hertz"), (4, "upper_edge_hertz")))
        if n_mel < 0 or dft_length < 0 or rate <= 0:
            raise InvalidArgument(f"{where}: num_mel_bins and dft_length must be >= 0 and sample_rate > 0, got "
                                  f"{n_mel}, {dft_length}, {rate}")
        rows = dft_length // 2 + 1
        check_size((rows, n_mel), np.float64, where)
        lo_mel = 2595 * np.log1p(lower / 700) / np.log(10)
        hi_mel = 2595 * np.log1p(upper / 700) / np.log(10)
        pts = np.arange(n_mel + 2) * ((hi_mel - lo_mel) / (n_mel + 2)) + lo_mel
        hz = 700 * np.expm1(pts / 2595 * np.log(10))
        b = np.floor((dft_length + 1) * hz / rate).astype(np.int64)
        lo, c, hi = b[:-2], b[1:-1], b[2:]
        # the rows the filters write: [lo, c] rising (c alone when c == lo), [c, hi) falling
        up, down = c >= lo, hi > c
        touched = np.concatenate([lo[up & (c > lo)], c[up | down], (hi - 1)[down]])
        if touched.size and (touched.min() < 0 or touched.max() >= rows):
            raise InvalidArgument(f"{where}: the mel filters reach spectrogram bins [{touched.min()}, "
                                  f"{touched.max()}], outside the {rows} bins of dft_length {dft_length} "
                                  f"(lower_edge_hertz {lower}, upper_edge_hertz {upper}, sample_rate {rate})")
        y = new_output(ctx, 0, (rows, n_mel), output_dtype(self.output_datatype), where)
        if y.size == 0:
            return
        j = np.arange(rows)[:, None]
        with np.errstate(divide="ignore", invalid="ignore"):
            rise = np.where((j >= lo) & (j <= c) & (c > lo), (j - lo) / (c - lo), 0.0)
            rise = np.where((c == lo) & (j == c), 1.0, rise)
            w = np.where((j >= c) & (j < hi), (hi - j) / (hi - c), rise)
        np.copyto(y, w, casting="unsafe")
