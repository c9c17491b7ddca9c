"""DFT (opsets 17: axis attribute, default 1; 20: axis input, default -2) through numpy.fft.

Input [..., 1] (real) or [..., 2] (complex); axis in [-r, -2] or [0, r-2]; dft_length pads with zeros or truncates the
axis (default: its size, or 2 * (size - 1) for the inverse one-sided case). onesided 0: full complex spectrum;
onesided 1 and forward: the first floor(dft_length / 2) + 1 bins (rfft for real input); onesided 1 and inverse:
irfft, a real [..., 1] output of dft_length points. inverse divides by dft_length. float16 / bfloat16 compute in
float32, float64 in float64; the output has the input's type. The output size is checked before allocating."""
import numpy as np

from onnxep.errors import InvalidArgument
from onnxep.ops._base import OpKernel
from onnxep.ops.signal._signal import INDEX_TYPES, SIGNAL_TYPES, as_complex, scalar, write_complex
from onnxep.ops.tensor._helpers import new_output


class DFT_17(OpKernel):
    domain, op_type, since = "", "DFT", 17
    type_constraints = {"T1": SIGNAL_TYPES, "T2": INDEX_TYPES}
    axis = 1
    inverse = 0
    onesided = 0

    def _axis(self, ctx):
        return int(self.axis)

    def compute(self, ctx):
        x = ctx.input(0)
        where = f"DFT node {self.name!r}"
        r = x.ndim
        ax = self._axis(ctx)
        if not (-r <= ax <= -2 or 0 <= ax <= r - 2):
            raise InvalidArgument(f"{where}: axis must be in [{-r}, -2] or [0, {r - 2}] for an input of rank {r}, "
                                  f"got {ax}")
        ax = ax + r if ax < 0 else ax
        sig, real = as_complex(x, where)
        n_in = x.shape[ax]
        inverse, onesided = bool(self.inverse), bool(self.onesided)
        n = ctx.input(1)
        if n is not None:
            n = int(scalar(n, "dft_length", where))
        else:
            n = 2 * (n_in - 1) if inverse and onesided else n_in
        if n < 1:
            raise InvalidArgument(f"{where}: dft_length must be >= 1, got {n} (axis {ax} of shape {x.shape})")
        shape = list(x.shape)
        if inverse and onesided:                          # irfft: real output of n points
            shape[ax], shape[-1] = n, 1
            y = new_output(ctx, 0, shape, x.dtype, where)
            np.copyto(y[..., 0], np.fft.irfft(sig, n=n, axis=ax), casting="unsafe")
            return
        bins = n // 2 + 1 if onesided else n
        shape[ax], shape[-1] = bins, 2
        y = new_output(ctx, 0, shape, x.dtype, where)
        if inverse:
            f = np.fft.ifft(sig, n=n, axis=ax)
        elif onesided and real:
            f = np.fft.rfft(sig, n=n, axis=ax)
        else:
            f = np.fft.fft(sig, n=n, axis=ax)
            if onesided:
                f = f[(slice(None),) * ax + (slice(0, bins),)]
        write_complex(f, y)


class DFT_20(DFT_17):
    """axis is input 2 (default -2)."""

    since = 20

    def _axis(self, ctx):
        a = ctx.input(2)
        return -2 if a is None else int(scalar(a, "axis", f"DFT node {self.name!r}"))
