"""GRU (opsets 1, 3, 7, 14, 22), gates z, r, h (onnx/defs/rnn), f = Sigmoid, g = Tanh by default:
    zt = f(Xt*Wz^T + Ht-1*Rz^T + Wbz + Rbz),  rt = f(Xt*Wr^T + Ht-1*Rr^T + Wbr + Rbr)
    ht = g(Xt*Wh^T + (rt . Ht-1)*Rh^T + Rbh + Wbh)          linear_before_reset = 0
    ht = g(Xt*Wh^T + rt . (Ht-1*Rh^T + Rbh) + Wbh)          linear_before_reset != 0
    Ht = (1 - zt) . ht + zt . Ht-1
forward / reverse / bidirectional, layout 0 / 1, sequence_lens, initial_h, clip. The input projection of all steps
is one matmul; per step one matmul over the batch (two when linear_before_reset = 0)."""
import numpy as np

from onnxep.ops.rnn._rnn import Recurrent, masked


class GRU_1(Recurrent):
    domain, op_type, since = "", "GRU", 1
    gates = 3
    default_acts = ("Sigmoid", "Tanh")
    linear_before_reset = 0

    def fold_recurrence_bias(self, hidden):
        fold = np.ones(3 * hidden, bool)
        if self.linear_before_reset:
            fold[2 * hidden:] = False   # Rbh sits inside rt . (...)
        return fold

    def run(self, xw, R, rb, h, extra, d, valid):
        f, g = self.acts[d]
        S, B = xw.shape[:2]
        H = R.shape[1]
        Hs = np.empty((S, B, H), xw.dtype)
        lbr = bool(self.linear_before_reset)
        Rt = np.ascontiguousarray(R.T)      # [H, 3H]
        Rzr_t, Rh_t = np.ascontiguousarray(Rt[:, :2 * H]), np.ascontiguousarray(Rt[:, 2 * H:])
        rbh = rb[2 * H:] if rb is not None else None
        for s in range(S):
            x = xw[s]
            if lbr:
                a = h @ Rt
                zr = a[:, :2 * H]
                zr += x[:, :2 * H]
                hr = a[:, 2 * H:]
                if rbh is not None:
                    hr += rbh
            else:
                zr = h @ Rzr_t
                zr += x[:, :2 * H]
            z = f(self.clipped(zr[:, :H]))
            r = f(self.clipped(zr[:, H:]))
            if lbr:
                hh = r * hr
            else:
                hh = (r * h) @ Rh_t
            hh += x[:, 2 * H:]
            hh = g(self.clipped(hh))
            hn = h - hh
            hn *= z
            hn += hh                # (1 - z) . hh + z . h
            h = masked(valid, s, hn, h)
            Hs[s] = h
        return Hs, h, None
