"""LSTM (opsets 1, 7, 14, 22), gates i, o, f, c (onnx/defs/rnn), f = Sigmoid, g = h = Tanh by default:
    it = f(Xt*Wi^T + Ht-1*Ri^T + Pi . Ct-1 + Wbi + Rbi)
    ft = f(Xt*Wf^T + Ht-1*Rf^T + Pf . Ct-1 + Wbf + Rbf)      (input_forget: ft = 1 - it)
    ct = g(Xt*Wc^T + Ht-1*Rc^T + Wbc + Rbc)
    Ct = ft . Ct-1 + it . ct
    ot = f(Xt*Wo^T + Ht-1*Ro^T + Po . Ct + Wbo + Rbo)
    Ht = ot . h(Ct)
forward / reverse / bidirectional, layout 0 / 1, sequence_lens, initial_h, initial_c, peepholes P, clip. The input
projection of all steps is one matmul; per step one [B, H] x [H, 4H] matmul."""
import numpy as np

from onnxep.ops.rnn._rnn import Recurrent, masked


class LSTM_1(Recurrent):
    domain, op_type, since = "", "LSTM", 1
    gates = 4
    default_acts = ("Sigmoid", "Tanh", "Tanh")
    input_forget = 0

    def read_extra(self, ctx, D, H, B, cdt):
        c_init, p = ctx.input(6), ctx.input(7)
        c0 = None
        if c_init is not None:
            want = (D, B, H) if self.layout == 0 else (B, D, H)
            if c_init.shape != want:
                raise self.bad(f"initial_c must have shape {want}, got {c_init.shape}")
            c0 = c_init.astype(cdt) if self.layout == 0 else c_init.transpose(1, 0, 2).astype(cdt)
        if p is not None:
            if p.shape != (D, 3 * H):
                raise self.bad(f"P must have shape {(D, 3 * H)}, got {p.shape}")
            p = p.astype(cdt)
        return c0, p

    def run(self, xw, R, rb, h, extra, d, valid):
        fa, ga, ha = self.acts[d]
        c0, P = extra
        S, B = xw.shape[:2]
        H = R.shape[1]
        Hs = np.empty((S, B, H), xw.dtype)
        c = c0[d] if c0 is not None else np.zeros((B, H), xw.dtype)
        pi = po = pf = None
        if P is not None:
            pi, po, pf = P[d, :H], P[d, H:2 * H], P[d, 2 * H:]
        Rt = np.ascontiguousarray(R.T)
        # no peepholes and no input_forget: the gates i, o, f (the first 3H columns) take f in one call
        fused = P is None and not self.input_forget
        for s in range(S):
            g = h @ Rt
            g += xw[s]
            if fused:
                iof = fa(self.clipped(g[:, :3 * H]))
                i, o, f = iof[:, :H], iof[:, H:2 * H], iof[:, 2 * H:]
                cn = f * c
            else:
                gi, go, gf = g[:, :H], g[:, H:2 * H], g[:, 2 * H:3 * H]
                if pi is not None:
                    gi += pi * c
                    gf += pf * c
                i = fa(self.clipped(gi))
                f = 1 - i if self.input_forget else fa(self.clipped(gf))
                cn = f * c
            cc = ga(self.clipped(g[:, 3 * H:]))
            cc *= i
            cn += cc
            if not fused:
                if po is not None:
                    go += po * cn
                o = fa(self.clipped(go))
            hn = ha(cn.copy())
            hn *= o
            h = masked(valid, s, hn, h)
            c = masked(valid, s, cn, c)
            Hs[s] = h
        return Hs, h, c
