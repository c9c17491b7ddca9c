"""STFT (opset 17): frames of frame_length samples every frame_step samples of signal [batch, length, 1 | 2]
(real / complex; a rank-2 [batch, length] signal reads as real), each multiplied by window (default: all ones) and
transformed: output [batch, frames, bins, 2], frames = (length - frame_length) // frame_step + 1, bins =
frame_length // 2 + 1 when onesided (the default; rfft of a real signal) else frame_length.

frame_length defaults to the window's length, else to the signal's length. The frames are a strided view of the signal
(no copy before the window product); one numpy.fft call transforms them all. float16 / bfloat16 compute in float32."""
import numpy as np

from onnxep.errors import InvalidArgument
from onnxep.ops._base import OpKernel
from onnxep.ops.signal._signal import INDEX_TYPES, SIGNAL_TYPES, as_complex, compute_dtype, scalar, write_complex
from onnxep.ops.tensor._helpers import new_output


class STFT_17(OpKernel):
    domain, op_type, since = "", "STFT", 17
    type_constraints = {"T1": SIGNAL_TYPES, "T2": INDEX_TYPES}
    onesided = 1

    def compute(self, ctx):
        x, step, window, flen = ctx.input(0), ctx.input(1), ctx.input(2), ctx.input(3)
        where = f"STFT node {self.name!r}"
        if x.ndim == 2:
            x = x[..., None]
        if x.ndim != 3:
            raise InvalidArgument(f"{where}: signal must be [batch, length, 1 | 2], got shape {x.shape}")
        sig, real = as_complex(x, where)
        B, L = sig.shape
        step = int(scalar(step, "frame_step", where))
        if step < 1:
            raise InvalidArgument(f"{where}: frame_step must be >= 1, got {step}")
        if window is not None and window.ndim != 1:
            raise InvalidArgument(f"{where}: window must be 1-D, got shape {window.shape}")
        if flen is not None:
            flen = int(scalar(flen, "frame_length", where))
            if window is not None and window.shape[0] != flen:
                raise InvalidArgument(f"{where}: window has {window.shape[0]} points but frame_length is {flen}")
        else:
            flen = window.shape[0] if window is not None else L
        if not 1 <= flen <= L:
            raise InvalidArgument(f"{where}: frame_length must be in [1, {L}] (the signal's length), got {flen}")
        frames = (L - flen) // step + 1
        onesided = bool(self.onesided)
        bins = flen // 2 + 1 if onesided else flen
        y = new_output(ctx, 0, (B, frames, bins, 2), ctx.input(0).dtype, where)
        if y.size == 0:
            return
        fr = np.lib.stride_tricks.sliding_window_view(sig, flen, axis=1)[:, ::step][:, :frames]   # [B, frames, flen]
        if window is not None:
            fr = fr * window.astype(compute_dtype(x.dtype), copy=False)
        if onesided and real:
            f = np.fft.rfft(fr, axis=-1)
        else:
            f = np.fft.fft(fr, axis=-1)[..., :bins]
        write_complex(f, y)
