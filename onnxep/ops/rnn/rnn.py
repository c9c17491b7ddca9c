"""RNN (opsets 1, 7, 14, 22): Ht = f(Xt*W^T + Ht-1*R^T + Wb + Rb), f = Tanh by default; forward, reverse or
bidirectional, layout 0 / 1, sequence_lens, initial_h, clip (onnx/defs/rnn). The input projection of all steps is one
matmul (ops/rnn/_rnn.Recurrent); the loop here is one [B, H] x [H, H] matmul per time step."""
import numpy as np

from onnxep.ops.rnn._rnn import Recurrent, masked


class RNN_1(Recurrent):
    domain, op_type, since = "", "RNN", 1
    gates = 1
    default_acts = ("Tanh",)

    def run(self, xw, R, rb, h, extra, d, valid):
        f = self.acts[d][0]
        S, B = xw.shape[:2]
        Hs = np.empty((S, B, R.shape[1]), xw.dtype)
        Rt = np.ascontiguousarray(R.T)
        for s in range(S):
            a = h @ Rt
            a += xw[s]
            h = masked(valid, s, f(self.clipped(a)), h)
            Hs[s] = h
        return Hs, h, None
