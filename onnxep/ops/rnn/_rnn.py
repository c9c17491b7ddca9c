"""Shared code of RNN, GRU and LSTM: attributes and activations, input checks, the input projection of every time step
in one matmul, the per-direction step order (reverse and sequence_lens), and the outputs in either layout.

Each op subclasses Recurrent and writes `run(xw, R, extra, h0, c0, valid, acts)`: the loop over the time steps of one
direction, one small matmul (or two, GRU) per step over the whole batch. float16 and bfloat16 compute in float32 (the
outputs are rounded once), float32 and float64 in their own type.

Activations and their alpha / beta follow onnxruntime: names case-insensitive; activation_alpha / activation_beta are
consumed in order by the activations that take them (Affine, LeakyRelu, ThresholdedRelu, ScaledTanh, HardSigmoid, Elu),
an exhausted list giving the default (LeakyRelu 0.01, HardSigmoid 0.2 / 0.5, Elu 1.0, else 0)."""
from __future__ import annotations

import numpy as np

from onnxep.errors import InvalidArgument
from onnxep.graph.model import check_size
from onnxep.ops._base import _DTYPE_NAMES, OpKernel

#: the element types of T (bfloat16 from opset 22, as the schema says) and of sequence_lens
FLOAT_TYPES = ("float16", "float32", "float64", "bfloat16")


def _sigmoid(x, a, b):
    # exp overflows to inf for x < -88 (float32): 1 / inf = 0, right; compute() runs the steps under errstate
    np.negative(x, out=x)
    np.exp(x, out=x)
    x += 1
    return np.reciprocal(x, out=x)


def _tanh(x, a, b):
    return np.tanh(x, out=x)


def _relu(x, a, b):
    return np.maximum(x, 0, out=x)


def _affine(x, a, b):
    x *= a
    x += b
    return x


def _leaky_relu(x, a, b):
    return np.where(x >= 0, x, x * x.dtype.type(a))


def _thresholded_relu(x, a, b):
    return np.where(x > a, x, x.dtype.type(0))


def _scaled_tanh(x, a, b):
    x *= b
    np.tanh(x, out=x)
    x *= a
    return x


def _hard_sigmoid(x, a, b):
    x *= a
    x += b
    return np.clip(x, 0, 1, out=x)


def _elu(x, a, b):
    return np.where(x >= 0, x, x.dtype.type(a) * np.expm1(np.minimum(x, 0)))


def _softsign(x, a, b):
    return x / (1 + np.abs(x))


def _softplus(x, a, b):
    return np.logaddexp(x.dtype.type(0), x, out=x)


#: lower-case name -> (function(x, alpha, beta) -> result (x may be overwritten), takes alpha, takes beta,
#: default alpha, default beta)
ACTIVATIONS = {
    "relu": (_relu, False, False, 0.0, 0.0),
    "tanh": (_tanh, False, False, 0.0, 0.0),
    "sigmoid": (_sigmoid, False, False, 0.0, 0.0),
    "affine": (_affine, True, True, 0.0, 0.0),
    "leakyrelu": (_leaky_relu, True, False, 0.01, 0.0),
    "thresholdedrelu": (_thresholded_relu, True, False, 0.0, 0.0),
    "scaledtanh": (_scaled_tanh, True, True, 0.0, 0.0),
    "hardsigmoid": (_hard_sigmoid, True, True, 0.2, 0.5),
    "elu": (_elu, True, False, 1.0, 0.0),
    "softsign": (_softsign, False, False, 0.0, 0.0),
    "softplus": (_softplus, False, False, 0.0, 0.0),
}


class Act:
    """One activation with its alpha and beta: act(x) -> f(x) (x may be overwritten)."""

    __slots__ = ("fn", "alpha", "beta", "name")

    def __init__(self, name, alpha, beta):
        self.fn, self.alpha, self.beta, self.name = ACTIVATIONS[name][0], alpha, beta, name

    def __call__(self, x):
        return self.fn(x, self.alpha, self.beta)


def _names(v):
    return [s.decode() if isinstance(s, bytes) else str(s) for s in (v or ())]


def _direction(v):
    d = v.decode() if isinstance(v, bytes) else (v or "forward")
    return "forward" if d == "foward" else d   # opset 1's schema default is spelt "foward"


def _num_directions(direction):
    return 2 if direction == "bidirectional" else 1


def _compute_dtype(dtype):
    return np.dtype(np.float64) if dtype == np.float64 else np.dtype(np.float32)


class Recurrent(OpKernel):
    """Base of RNN / GRU / LSTM kernels: subclasses set op_type, since, gates (gate blocks in W), default_acts (one
    direction's activations) and implement run()."""

    type_constraints = {"T": FLOAT_TYPES, "T1": ("int32",)}
    gates = 1
    default_acts = ("Tanh",)
    activations = None
    activation_alpha = None
    activation_beta = None
    clip = None
    direction = "forward"
    hidden_size = None
    layout = 0

    @classmethod
    def check_types(cls, op):
        """The inputs' types against the schema of the node's opset (bfloat16 from 22; sequence_lens int32); the outputs
        take X's type (shape inference leaves the opset-1 forms' outputs untyped)."""
        allowed = FLOAT_TYPES if op.node.opset >= 22 else FLOAT_TYPES[:3]
        first = None
        for i, name in enumerate(op.node.inputs):
            if not name:
                continue
            vt = op.input_types[i] if i < len(op.input_types) else None
            if vt is None or vt.kind != "tensor":
                return False
            t = _DTYPE_NAMES.get(vt.type_str)
            if i == 4:
                if t != "int32":
                    return False
            elif t not in allowed or (first is not None and t != first):
                return False
            elif first is None:
                first = t
        return first is not None

    @classmethod
    def supports(cls, op):
        a = op.node.attrs
        direction = _direction(a.get("direction"))
        if direction not in ("forward", "reverse", "bidirectional"):
            return False
        if int(a.get("layout", 0) or 0) not in (0, 1):
            return False
        acts = _names(a.get("activations"))
        if acts:
            if len(acts) != len(cls.default_acts) * _num_directions(direction):
                return False
            if any(n.lower() not in ACTIVATIONS for n in acts):
                return False
        return True

    def __init__(self, info):
        super().__init__(info)
        self.direction = _direction(self.direction)
        self.num_directions = _num_directions(self.direction)
        self.layout = int(self.layout or 0)
        names = _names(self.activations) or list(self.default_acts) * self.num_directions
        alphas = list(self.activation_alpha or ())
        betas = list(self.activation_beta or ())
        acts = []
        for n in names:
            key = n.lower()
            _, takes_a, takes_b, da, db = ACTIVATIONS[key]
            al = (alphas.pop(0) if alphas else da) if takes_a else 0.0
            be = (betas.pop(0) if betas else db) if takes_b else 0.0
            acts.append(Act(key, float(al), float(be)))
        k = len(self.default_acts)
        self.acts = [acts[d * k:(d + 1) * k] for d in range(self.num_directions)]
        self.clip_value = None if self.clip is None else float(self.clip)

    # ------------------------------------------------------------------ helpers for subclasses
    def clipped(self, x):
        """x clipped to [-clip, clip] in place when the clip attribute is set."""
        if self.clip_value is not None:
            np.clip(x, -self.clip_value, self.clip_value, out=x)
        return x

    def bad(self, msg):
        return InvalidArgument(f"{self.op_type} node {self.name!r}: {msg}")

    def fold_recurrence_bias(self, hidden):
        """A boolean mask over the gates*hidden columns: True where R's bias may be added once to the projected input
        (all of them except GRU's hidden gate when linear_before_reset)."""
        return np.ones(self.gates * hidden, bool)

    def read_extra(self, ctx, D, H, B, cdt):
        """Op-specific inputs (LSTM: initial_c and P); None by default."""
        return None

    def run(self, xw, R, rb, h0, extra, d, valid):
        """Run direction d over its steps: xw [S, B, G*H] projected input in step order (biases added), R [G*H, H],
        rb the recurrence bias not folded into xw (or None), h0 [B, H], valid [S, B] bool or None (all valid).
        Returns (Hs [S, B, H] the hidden state after each step, h_last [B, H], c_last or None)."""
        raise NotImplementedError

    # ------------------------------------------------------------------ compute
    def compute(self, ctx):
        x, W, R = ctx.input(0), ctx.input(1), ctx.input(2)
        B_in, seq, h_init = ctx.input(3), ctx.input(4), ctx.input(5)
        op = self.op_type
        G, D = self.gates, self.num_directions
        if x.ndim != 3:
            raise self.bad(f"X must be 3-D, got shape {x.shape}")
        if self.layout == 0:
            T, Bt, I = x.shape
        else:
            Bt, T, I = x.shape
        if W.ndim != 3 or R.ndim != 3:
            raise self.bad(f"W and R must be 3-D, got shapes {W.shape} and {R.shape}")
        H = R.shape[2]
        if self.hidden_size is not None and int(self.hidden_size) != H:
            raise self.bad(f"hidden_size is {self.hidden_size} but R has shape {R.shape}")
        if W.shape != (D, G * H, I):
            raise self.bad(f"W must have shape {(D, G * H, I)} (num_directions, {G}*hidden_size, input_size), "
                           f"got {W.shape}")
        if R.shape != (D, G * H, H):
            raise self.bad(f"R must have shape {(D, G * H, H)}, got {R.shape}")
        if B_in is not None and B_in.shape != (D, 2 * G * H):
            raise self.bad(f"B must have shape {(D, 2 * G * H)}, got {B_in.shape}")
        cdt = _compute_dtype(x.dtype)
        odt = x.dtype
        lens = None
        if seq is not None:
            if seq.shape != (Bt,):
                raise self.bad(f"sequence_lens must have shape ({Bt},), got {seq.shape}")
            lens = seq.astype(np.int64)
            if lens.size and (lens.min() < 0 or lens.max() > T):
                raise self.bad(f"sequence_lens must be in [0, {T}], got values in [{lens.min()}, {lens.max()}]")
            if lens.size and lens.min() == T:
                lens = None   # every sequence full: no masking
        h0 = None
        if h_init is not None:
            want = (D, Bt, H) if self.layout == 0 else (Bt, D, H)
            if h_init.shape != want:
                raise self.bad(f"initial_h must have shape {want}, got {h_init.shape}")
            h0 = h_init.astype(cdt) if self.layout == 0 else h_init.transpose(1, 0, 2).astype(cdt)
        extra = self.read_extra(ctx, D, H, Bt, cdt)

        y_shape = (T, D, Bt, H) if self.layout == 0 else (Bt, T, D, H)
        h_shape = (D, Bt, H) if self.layout == 0 else (Bt, D, H)
        what = f"{op} node {self.name!r}"
        check_size(y_shape, cdt, f"{what} output Y")
        check_size((T, Bt, D * G * H), cdt, f"{what} projected input")

        # one matmul: every time step, batch row and direction
        xs = x if self.layout == 0 else x.transpose(1, 0, 2)
        xs = xs.astype(cdt, copy=False).reshape(T * Bt, I)
        Wc = W.astype(cdt, copy=False).reshape(D * G * H, I)
        xw = (xs @ Wc.T).reshape(T, Bt, D, G * H)
        fold = self.fold_recurrence_bias(H)
        rbs = [None] * D
        if B_in is not None:
            b = B_in.astype(cdt, copy=False)
            wb, rb = b[:, :G * H], b[:, G * H:]
            bias = wb + np.where(fold, rb, 0)
            xw += bias[None, None]
            if not fold.all():
                rbs = [np.where(fold, 0, rb[d]).astype(cdt) for d in range(D)]
        Rc = R.astype(cdt, copy=False)

        Y = np.zeros((T, D, Bt, H), cdt) if ctx.has_output(0) else None
        Yh = np.empty((D, Bt, H), cdt)
        Yc = np.empty((D, Bt, H), cdt) if G == 4 else None
        bidx = np.arange(Bt)
        steps = np.arange(T)
        for d in range(D):
            reverse = self.direction == "reverse" or d == 1
            hd = h0[d] if h0 is not None else np.zeros((Bt, H), cdt)
            if lens is None:
                tidx = None
                valid = None
                xd = xw[::-1, :, d] if reverse else xw[:, :, d]
                S = T
            else:
                S = int(lens.max()) if lens.size else 0
                valid = steps[:S, None] < lens[None, :]               # [S, B]
                if reverse:
                    tidx = np.where(valid, lens[None, :] - 1 - steps[:S, None], 0)
                else:
                    tidx = np.broadcast_to(steps[:S, None], (S, Bt))
                xd = xw[tidx, bidx[None, :], d]                      # [S, B, G*H] gathered once
            with np.errstate(over="ignore"):
                Hs, hl, cl = self.run(xd, Rc[d], rbs[d], hd, extra, d, valid)
            Yh[d] = hl
            if Yc is not None:
                Yc[d] = cl
            if lens is not None:
                empty = lens == 0          # onnxruntime: a zero-length sequence's Y_h / Y_c are zeros
                Yh[d, empty] = 0
                if Yc is not None:
                    Yc[d, empty] = 0
            if Y is not None:
                if tidx is None:
                    Y[:, d] = Hs[::-1] if reverse else Hs
                else:
                    Y[tidx[valid], d, np.broadcast_to(bidx, (S, Bt))[valid]] = Hs[valid]

        if T == 0:      # no step at all: every sequence is empty, Y_h / Y_c zeros as for sequence_lens 0
            Yh[...] = 0
            if Yc is not None:
                Yc[...] = 0
        outs = [(0, Y, y_shape), (1, Yh, h_shape), (2, Yc, h_shape)]
        for i, v, shape in outs:
            if v is None or not ctx.has_output(i):
                continue
            if self.layout == 1:
                v = v.transpose(2, 0, 1, 3) if i == 0 else v.transpose(1, 0, 2)
            out = ctx.output(i, shape, odt)
            np.copyto(out, v, casting="unsafe")


def masked(valid, s, new, old):
    """new where step s is valid for the batch row, else old (the state stays at the last valid step)."""
    if valid is None:
        return new
    return np.where(valid[s][:, None], new, old)
