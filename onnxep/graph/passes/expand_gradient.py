"""Gradient (ai.onnx.preview.training, opset 1) expanded into ordinary ONNX nodes: reverse-mode differentiation at
load time. Semantics, not an optimization: the pass runs at every graph_optimization_level (PASSES level 0) and
InferenceSession(disabled_optimizers=...) cannot switch it off (it has no PASS_NAMES entry).

A Gradient node Gradient(inputs; xs, zs, y) computes dY/dX for each X in xs, Y = y's value as a function of xs and zs
(the forward nodes of the same graph between them), evaluated at the node's inputs (one per name of xs, then zs). For
a non-scalar Y it is the gradient of sum(Y) (the backward pass is seeded with ones of Y's shape). The pass

  1. finds the forward nodes on a path from xs to y (nodes that read a value depending on xs and that y depends on);
     when the Gradient's inputs are not the very values named in xs / zs, the forward nodes that depend on xs or zs
     are cloned first, reading the Gradient's inputs instead (the point the gradient is evaluated at);
  2. walks them in reverse order, each through its op's rule (RULES), summing the contributions to every value read
     by more than one node (Sum), seeded with ones(Y) (a constant when Y's shape is static, else ConstantOfShape);
  3. writes each dY/dX through an Identity to the Gradient's output (ConstantOfShape zeros for an X that Y does not
     depend on), removes the Gradient node and orders the graph again.

Broadcasting: a binary op's input gradient is summed back to that input's shape: ReduceSum over the axes where the
shapes differ as far as the static shapes tell (leading axes with keepdims=0, axes where the input's dim is 1 with
keepdims=1); an axis where the input's dim is symbolic and the output's may differ is reduced at run time with
ordinary ops only (ReduceSum(keepdims=1) of that axis; Where(input dim == 1, that sum, the gradient); Slice to the
input's dim), so the expansion runs on the cpu and reference backends alike at any default-domain opset >= 11; nodes
use the form of the opset the graph imports (axes attribute or input).

Rules: Add Sub Mul Div Neg Identity Abs Reciprocal Relu Sigmoid Tanh Exp Log Sqrt Pow Sum MatMul Gemm Transpose
Reshape Flatten Squeeze Unsqueeze ReduceSum ReduceMean Softmax LogSoftmax Cast (float to float). A node whose outputs
are not floating point (Shape, Equal, ...) passes no gradient. Integer / bool inputs get none. Everything is
deterministic and seed-free.

A forward op without a rule (or an input that defeats one: unknown rank, a non-constant ReduceSum axes input, an opset
below 11) leaves the Gradient node as it is when a kernel is registered for it (onnxep.ops._registry.register); otherwise the
session cannot run it anywhere (onnx.reference and onnxruntime have no Gradient), so the pass raises NotImplemented
naming the Gradient node and the forward node and op that blocked it."""
from __future__ import annotations

import numpy as np
from onnx import TensorProto, helper

from onnxep.errors import NotImplemented as OnnxepNotImplemented
from onnxep.graph.ir import Graph, ValueType
from onnxep.graph.model import _topological
from onnxep.graph.passes._edit import Names, make_node

TRAINING_DOMAIN = "ai.onnx.preview.training"
_FLOATS = (TensorProto.FLOAT16, TensorProto.FLOAT, TensorProto.DOUBLE, TensorProto.BFLOAT16)
MIN_OPSET = 11


class NoRule(Exception):
    """A forward node the pass cannot differentiate: (node or None, why)."""

    def __init__(self, node, why: str):
        super().__init__(why)
        self.node, self.why = node, why


class _Emit:
    """Writes backward nodes (at the graph's default-domain opset) and tracks each new value's type."""

    def __init__(self, graph: Graph, names: Names, prefix: str):
        self.graph, self.names, self.prefix = graph, names, prefix
        self.opset = graph.opsets.get("", 0)
        self.nodes: list = []
        self.types: dict = {}                 # new value -> (elem_type, shape or None)
        self.inits: dict = {}
        self.shape_of: dict = {}              # value -> its Shape node's output (one per value)

    # types
    def elem(self, name):
        if name in self.types:
            return self.types[name][0]
        vt = self.graph.value_types.get(name)
        if vt is None and name in self.graph.initializers:
            vt = ValueType.of_array(np.asarray(self.graph.initializers[name]))
        return vt.elem_type if vt is not None and vt.kind == "tensor" else 0

    def shape(self, name):
        """The value's dims (int, str or None each), or None when its rank is unknown."""
        if name in self.types:
            return self.types[name][1]
        vt = self.graph.value_types.get(name)
        if vt is None and name in self.graph.initializers:
            return tuple(np.asarray(self.graph.initializers[name]).shape)
        return vt.shape if vt is not None and vt.kind == "tensor" else None

    def rank(self, name, node=None) -> int:
        s = self.shape(name)
        if s is None:
            raise NoRule(node, f"the rank of {name!r} is unknown")
        return len(s)

    def np_dtype(self, name):
        return helper.tensor_dtype_to_np_dtype(self.elem(name))

    # emission
    def op(self, op_type, inputs, attrs=None, elem=None, shape=None, n_out=1, base=None):
        outs = [self.names.new(f"{self.prefix}/{base or op_type}") for _ in range(n_out)]
        node = make_node(self.graph, self.names.new(f"{self.prefix}/{op_type}"), op_type, inputs, outs, attrs or {})
        self.nodes.append(node)
        for o in outs:
            self.types[o] = (elem if elem is not None else self.elem(inputs[0]), shape)
        return outs[0] if n_out == 1 else outs

    def const(self, value, dtype, base="const"):
        a = np.asarray(value, dtype=dtype)
        a.flags.writeable = False
        name = self.names.new(f"{self.prefix}/{base}")
        self.inits[name] = a
        self.types[name] = (helper.np_dtype_to_tensor_dtype(a.dtype), tuple(a.shape))
        return name

    def ints(self, values):
        return self.const(np.array(values, dtype=np.int64), np.int64, "axes")

    def scalar(self, v, like):
        return self.const(v, self.np_dtype(like), "c")

    def shape_node(self, x):
        """x's shape as an int64 tensor: a constant when static, else a Shape node (one per value)."""
        s = self.shape_of.get(x)
        if s is None:
            r = self.shape(x)
            if r is not None and all(isinstance(d, int) for d in r):
                s = self.ints(list(r))
            else:
                s = self.op("Shape", [x], elem=TensorProto.INT64, shape=(len(r),) if r is not None else (None,))
            self.shape_of[x] = s
        return s

    def reduce(self, op_type, x, axes, keepdims, shape=None, base=None):
        """ReduceSum / ReduceMean over `axes` (non-empty, non-negative): axes an attribute before the opset that made
        it an input (ReduceSum 13, ReduceMean 18)."""
        axes = [int(a) for a in axes]
        as_input = self.opset >= (13 if op_type == "ReduceSum" else 18)
        if as_input:
            return self.op(op_type, [x, self.ints(axes)], {"keepdims": int(keepdims)}, shape=shape, base=base)
        return self.op(op_type, [x], {"axes": axes, "keepdims": int(keepdims)}, shape=shape, base=base)

    def unsqueeze(self, x, axes, shape=None):
        if self.opset >= 13:
            return self.op("Unsqueeze", [x, self.ints(axes)], shape=shape)
        return self.op("Unsqueeze", [x], {"axes": list(axes)}, shape=shape)

    def squeeze(self, x, axes, shape=None):
        if self.opset >= 13:
            return self.op("Squeeze", [x, self.ints(axes)], shape=shape)
        return self.op("Squeeze", [x], {"axes": list(axes)}, shape=shape)

    def reshape_like(self, g, x):
        """g reshaped to x's shape (allowzero from opset 14, so a zero-sized dim of x is kept as is)."""
        attrs = {"allowzero": 1} if self.opset >= 14 else {}
        return self.op("Reshape", [g, self.shape_node(x)], attrs, shape=self.shape(x))

    def transpose_last2(self, x, node):
        r = self.rank(x, node)
        perm = list(range(r - 2)) + [r - 1, r - 2]
        s = self.shape(x)
        return self.op("Transpose", [x], {"perm": perm}, shape=tuple(s[p] for p in perm))

    def unbroadcast(self, g, x, node):
        """g (the gradient of a broadcast result) summed back to x's shape."""
        gs, xs = self.shape(g), self.shape(x)
        if gs is not None and xs is not None and tuple(gs) == tuple(xs) and all(d is not None for d in xs):
            return g
        if xs is None or gs is None:
            raise NoRule(node, f"the rank of {x if xs is None else g!r} is unknown (needed to undo broadcasting)")
        lead = len(gs) - len(xs)
        if lead < 0:
            raise NoRule(node, f"{x!r} has a higher rank than the result it was broadcast to")
        keep_axes, dyn_axes = [], []
        for i, xd in enumerate(xs):
            gd = gs[lead + i]
            if xd is not None and xd == gd:
                continue
            if xd == 1:
                keep_axes.append(lead + i)
            elif isinstance(xd, int):
                continue                       # x's dim is static and not 1: it was not broadcast along it
            else:
                dyn_axes.append((lead + i, i))
        cur_shape = list(gs)
        if keep_axes:
            for a in keep_axes:
                cur_shape[a] = 1
            g = self.reduce("ReduceSum", g, keep_axes, 1, shape=tuple(cur_shape))
        if dyn_axes:
            shp = self.shape_node(x)
            one = self.ints([1])
            for a, i in dyn_axes:
                xdim = self.op("Gather", [shp, self.ints([i])], {"axis": 0}, elem=TensorProto.INT64, shape=(1,))
                s_shape = list(cur_shape)
                s_shape[a] = 1
                summed = self.reduce("ReduceSum", g, [a], 1, shape=tuple(s_shape))
                cond = self.op("Equal", [xdim, one], elem=TensorProto.BOOL, shape=(1,))
                w = self.op("Where", [cond, summed, g], elem=self.elem(g), shape=tuple(cur_shape))
                cur_shape[a] = xs[i]
                g = self.op("Slice", [w, self.ints([0]), xdim, self.ints([a])], shape=tuple(cur_shape))
        if lead:
            g = self.reduce("ReduceSum", g, list(range(lead)), 0, shape=tuple(cur_shape[lead:]))
        return g

    def cast_like(self, v, like):
        if self.elem(v) == self.elem(like):
            return v
        return self.op("Cast", [v], {"to": self.elem(like)}, elem=self.elem(like), shape=self.shape(v))

    def mul(self, a, b, shape=None):
        return self.op("Mul", [a, b], shape=shape if shape is not None else self.shape(a))

    def div(self, a, b, shape=None):
        return self.op("Div", [a, b], shape=shape if shape is not None else self.shape(a))

    def sub(self, a, b, shape=None):
        return self.op("Sub", [a, b], shape=shape if shape is not None else self.shape(a))

    def neg(self, a):
        return self.op("Neg", [a], shape=self.shape(a))


# --- rules: (emit, node, the node's inputs as the backward reads them, outputs, output gradients, which inputs need a
#     gradient) -> {input index: gradient}. `ins` / `outs` are the names of the forward values (cloned ones when the
#     Gradient is evaluated elsewhere); `dys[k]` is None when output k gets no gradient.

def _attr(node, name, default=None):
    v = node.attrs.get(name)
    return default if v is None else v


def _add(e, node, ins, outs, dys, need):
    dy = dys[0]
    return {i: e.unbroadcast(dy, ins[i], node) for i in need}


def _sub(e, node, ins, outs, dys, need):
    dy = dys[0]
    out = {}
    if 0 in need:
        out[0] = e.unbroadcast(dy, ins[0], node)
    if 1 in need:
        out[1] = e.unbroadcast(e.neg(dy), ins[1], node)
    return out


def _mul(e, node, ins, outs, dys, need):
    dy = dys[0]
    return {i: e.unbroadcast(e.mul(dy, ins[1 - i], shape=e.shape(dy)), ins[i], node) for i in need}


def _div(e, node, ins, outs, dys, need):
    dy, (a, b), y = dys[0], ins, outs[0]
    out = {}
    if 0 in need:
        out[0] = e.unbroadcast(e.div(dy, b, shape=e.shape(dy)), a, node)
    if 1 in need:                             # d(a/b)/db = -a/b^2 = -y/b
        out[1] = e.unbroadcast(e.neg(e.mul(dy, e.div(y, b, shape=e.shape(y)))), b, node)
    return out


def _neg(e, node, ins, outs, dys, need):
    return {0: e.neg(dys[0])}


def _identity(e, node, ins, outs, dys, need):
    return {0: dys[0]}


def _abs(e, node, ins, outs, dys, need):
    x = ins[0]
    return {0: e.mul(dys[0], e.op("Sign", [x], shape=e.shape(x)))}


def _reciprocal(e, node, ins, outs, dys, need):       # d(1/x) = -y^2
    y = outs[0]
    return {0: e.neg(e.mul(dys[0], e.mul(y, y)))}


def _relu(e, node, ins, outs, dys, need):
    x, dy = ins[0], dys[0]
    pos = e.op("Greater", [x, e.scalar(0, x)], elem=TensorProto.BOOL, shape=e.shape(x))
    return {0: e.op("Where", [pos, dy, e.scalar(0, dy)], elem=e.elem(dy), shape=e.shape(dy))}


def _sigmoid(e, node, ins, outs, dys, need):          # y (1 - y)
    y = outs[0]
    return {0: e.mul(dys[0], e.mul(y, e.op("Sub", [e.scalar(1, y), y], shape=e.shape(y))))}


def _tanh(e, node, ins, outs, dys, need):             # 1 - y^2
    y = outs[0]
    return {0: e.mul(dys[0], e.op("Sub", [e.scalar(1, y), e.mul(y, y)], shape=e.shape(y)))}


def _exp(e, node, ins, outs, dys, need):
    return {0: e.mul(dys[0], outs[0])}


def _log(e, node, ins, outs, dys, need):
    return {0: e.div(dys[0], ins[0])}


def _sqrt(e, node, ins, outs, dys, need):             # 1 / (2 y)
    y = outs[0]
    return {0: e.div(e.mul(dys[0], e.scalar(0.5, y)), y)}


def _pow(e, node, ins, outs, dys, need):
    (x, p), y, dy = ins, outs[0], dys[0]
    out = {}
    if 0 in need:                             # p x^(p-1)
        pc = e.cast_like(p, x)
        pm1 = e.op("Sub", [pc, e.scalar(1, x)], shape=e.shape(pc))
        d = e.mul(pc, e.op("Pow", [x, pm1], shape=e.shape(y)), shape=e.shape(y))
        out[0] = e.unbroadcast(e.mul(dy, d, shape=e.shape(y)), x, node)
    if 1 in need:                             # y log(x)
        if e.elem(p) != e.elem(x):
            raise NoRule(node, "the exponent's type differs from the base's")
        d = e.mul(y, e.op("Log", [x], shape=e.shape(x)), shape=e.shape(y))
        out[1] = e.unbroadcast(e.mul(dy, d, shape=e.shape(y)), p, node)
    return out


def _sum(e, node, ins, outs, dys, need):
    return {i: e.unbroadcast(dys[0], ins[i], node) for i in need}


def _cast(e, node, ins, outs, dys, need):
    return {0: e.cast_like(dys[0], ins[0])}


def _matmul(e, node, ins, outs, dys, need):
    (a, b), dy = ins, dys[0]
    ra, rb = e.rank(a, node), e.rank(b, node)
    e.rank(dy, node)
    sa, sb, sy = e.shape(a), e.shape(b), e.shape(dy)
    out = {}
    if ra == 1 and rb == 1:                   # a dot product: y is a scalar
        if 0 in need:
            out[0] = e.mul(b, dy)
        if 1 in need:
            out[1] = e.mul(a, dy)
        return out
    # make both operands matrices (a vector a: (1, k), dy gains the row axis; a vector b: (k, 1), dy the column)
    a2, b2, dy2 = a, b, dy
    if ra == 1:
        a2 = e.unsqueeze(a, [0], shape=(1, sa[0]))
        dy2 = e.unsqueeze(dy2, [len(sy) - 1], shape=tuple(sy[:-1]) + (1, sy[-1]))
    if rb == 1:
        b2 = e.unsqueeze(b, [1], shape=(sb[0], 1))
        s = e.shape(dy2)
        dy2 = e.unsqueeze(dy2, [len(s)], shape=tuple(s) + (1,))
    sdy2 = e.shape(dy2)
    if 0 in need:                             # dA = dY B^T
        bt = e.transpose_last2(b2, node)
        ga = e.op("MatMul", [dy2, bt], shape=tuple(sdy2[:-1]) + (e.shape(bt)[-1],))
        ga = e.unbroadcast(ga, a2, node)
        out[0] = e.reshape_like(ga, a) if ra == 1 else ga
    if 1 in need:                             # dB = A^T dY
        at = e.transpose_last2(a2, node)
        lead = tuple(sdy2[:-2]) if len(sdy2) >= 2 else ()
        gb = e.op("MatMul", [at, dy2], shape=lead + (e.shape(at)[-2], sdy2[-1]))
        gb = e.unbroadcast(gb, b2, node)
        out[1] = e.reshape_like(gb, b) if rb == 1 else gb
    return out


def _gemm(e, node, ins, outs, dys, need):
    a, b = ins[0], ins[1]
    c = ins[2] if len(ins) > 2 and ins[2] else None
    dy = dys[0]
    alpha, beta = float(_attr(node, "alpha", 1.0)), float(_attr(node, "beta", 1.0))
    ta, tb = int(_attr(node, "transA", 0)), int(_attr(node, "transB", 0))

    def gemm(p, tp, q, tq, like):
        attrs = {"transA": tp, "transB": tq}
        if alpha != 1.0:
            attrs["alpha"] = alpha
        return e.op("Gemm", [p, q], attrs, shape=e.shape(like))

    out = {}
    if 0 in need:     # dA' = alpha dY B'^T; dA = dA' or its transpose
        out[0] = gemm(dy, 0, b, 1 - tb, a) if not ta else gemm(b, tb, dy, 1, a)
    if 1 in need:     # dB' = alpha A'^T dY
        out[1] = gemm(a, 1 - ta, dy, 0, b) if not tb else gemm(dy, 1, a, ta, b)
    if c is not None and 2 in need:
        g = dy if beta == 1.0 else e.mul(dy, e.scalar(beta, dy))
        out[2] = e.unbroadcast(g, c, node)
    return out


def _transpose(e, node, ins, outs, dys, need):
    perm = _attr(node, "perm")
    dy = dys[0]
    if perm is None:
        s = e.shape(dy)
        return {0: e.op("Transpose", [dy], shape=tuple(reversed(s)) if s is not None else None)}
    perm = [int(p) % len(perm) for p in perm]
    inv = [0] * len(perm)
    for i, p in enumerate(perm):
        inv[p] = i
    return {0: e.op("Transpose", [dy], {"perm": inv}, shape=e.shape(ins[0]))}


def _reshape_back(e, node, ins, outs, dys, need):     # Reshape, Flatten, Squeeze, Unsqueeze
    return {0: e.reshape_like(dys[0], ins[0])}


def _const_ints(e, name, node):
    a = e.graph.initializers.get(name)
    if a is None:
        raise NoRule(node, f"its axes input {name!r} is not a constant")
    return [int(v) for v in np.asarray(a).reshape(-1)]


def _reduce(e, node, ins, outs, dys, need):
    x, dy = ins[0], dys[0]
    mean = node.op_type == "ReduceMean"
    axes_in_input = node.opset >= (13 if node.op_type == "ReduceSum" else 18)
    if axes_in_input:
        axes = _const_ints(e, ins[1], node) if len(ins) > 1 and ins[1] else []
    else:
        axes = list(_attr(node, "axes", []) or [])
    keepdims = int(_attr(node, "keepdims", 1))
    if not axes and axes_in_input and int(_attr(node, "noop_with_empty_axes", 0)):
        return {0: dy}
    sx = e.shape(x)
    if axes:
        r = e.rank(x, node)
        axes = sorted({a % r for a in axes})
    g = dy
    if not keepdims and axes:
        g = e.unsqueeze(dy, axes, shape=tuple(1 if i in axes else d for i, d in enumerate(sx)))
    g = e.op("Expand", [g, e.shape_node(x)], shape=sx)
    if mean:
        if sx is not None and all(isinstance(d, int) for d in sx):
            n = int(np.prod([sx[a] for a in axes])) if axes else int(np.prod(sx))
            g = e.div(g, e.scalar(max(n, 1), g))
        else:
            nx = e.op("Cast", [e.op("Size", [x], elem=TensorProto.INT64, shape=())], {"to": e.elem(g)},
                      elem=e.elem(g), shape=())
            ny = e.op("Cast", [e.op("Size", [dy], elem=TensorProto.INT64, shape=())], {"to": e.elem(g)},
                      elem=e.elem(g), shape=())
            g = e.div(g, e.op("Div", [nx, ny], shape=()))
    return {0: g}


def _softmax_axes(e, node, x):
    r = e.rank(x, node)
    axis = int(_attr(node, "axis", -1 if node.opset >= 13 else 1)) % max(r, 1)
    return [axis] if node.opset >= 13 else list(range(axis, r))


def _softmax(e, node, ins, outs, dys, need):          # y (dy - sum(dy y))
    y, dy = outs[0], dys[0]
    axes = _softmax_axes(e, node, ins[0])
    s = e.reduce("ReduceSum", e.mul(dy, y), axes, 1)
    return {0: e.mul(y, e.sub(dy, s))}


def _log_softmax(e, node, ins, outs, dys, need):      # dy - exp(y) sum(dy)
    y, dy = outs[0], dys[0]
    axes = _softmax_axes(e, node, ins[0])
    s = e.reduce("ReduceSum", dy, axes, 1)
    return {0: e.sub(dy, e.mul(e.op("Exp", [y], shape=e.shape(y)), s, shape=e.shape(y)))}


#: op type (default domain) -> rule
RULES = {
    "Add": _add, "Sub": _sub, "Mul": _mul, "Div": _div, "Neg": _neg, "Identity": _identity, "Abs": _abs,
    "Reciprocal": _reciprocal, "Relu": _relu, "Sigmoid": _sigmoid, "Tanh": _tanh, "Exp": _exp, "Log": _log,
    "Sqrt": _sqrt, "Pow": _pow, "Sum": _sum, "Cast": _cast, "MatMul": _matmul, "Gemm": _gemm,
    "Transpose": _transpose, "Reshape": _reshape_back, "Flatten": _reshape_back, "Squeeze": _reshape_back,
    "Unsqueeze": _reshape_back, "ReduceSum": _reduce, "ReduceMean": _reduce, "Softmax": _softmax,
    "LogSoftmax": _log_softmax,
}
#: inputs of these ops that never carry a gradient (shapes, axes)
_NON_DIFF_INPUTS = {"Reshape": {1}, "Squeeze": {1}, "Unsqueeze": {1}, "ReduceSum": {1}, "ReduceMean": {1}}


# --- the pass

def _is_float(e, name) -> bool:
    return e.elem(name) in _FLOATS


def _expand_one(graph: Graph, gnode, names: Names) -> list:
    """The nodes that replace `gnode` (the graph's initializers / value types are updated). Raises NoRule."""
    xs = list(gnode.attrs.get("xs") or [])
    zs = list(gnode.attrs.get("zs") or [])
    y = gnode.attrs.get("y")
    if not xs or not y:
        raise NoRule(None, "its xs or y attribute is missing")
    if len(gnode.inputs) != len(xs) + len(zs):
        raise NoRule(None, f"it has {len(gnode.inputs)} inputs for {len(xs)} xs and {len(zs)} zs")
    e = _Emit(graph, names, gnode.name or "Gradient")
    if e.opset < MIN_OPSET:
        raise NoRule(None, f"the graph imports default-domain opset {e.opset}; the expansion needs >= {MIN_OPSET}")
    producer = {o: n for n in graph.nodes for o in n.outputs if o}
    # forward nodes y depends on, in graph order
    anc, stack = set(), [y]
    while stack:
        v = stack.pop()
        if v in anc:
            continue
        anc.add(v)
        p = producer.get(v)
        if p is not None and v not in xs and v not in zs:
            stack.extend(x for x in p.inputs if x)
    fwd = [n for n in graph.nodes if n is not gnode and any(o in anc for o in n.outputs)
           and not any(o in xs or o in zs for o in n.outputs)]
    # the values of xs / zs at the point the gradient is taken: the Gradient's inputs (clone what depends on them)
    env = {v: v for v in anc}
    subst = dict(zip(xs + zs, gnode.inputs))
    if any(k != v for k, v in subst.items()):
        env.update(subst)
        dep = set(subst)
        clones = []
        for n in fwd:
            if any(x in dep for x in n.inputs):
                outs = []
                for o in n.outputs:
                    if not o:
                        outs.append(o)
                        continue
                    new = names.new(f"{e.prefix}/{o}")
                    env[o] = new
                    dep.add(o)
                    outs.append(new)
                    e.types[new] = (e.elem(o), e.shape(o) if _same_types(e, subst) else None)
                clone = make_node(graph, names.new(f"{e.prefix}/{n.name}"), n.op_type,
                                  [env.get(x, x) if x else x for x in n.inputs], outs, n.attrs, n.domain)
                clone.opset = n.opset
                clones.append((n, clone))
            else:
                clones.append((n, n))
        e.nodes.extend(c for n, c in clones if c is not n)
    # which values depend on xs (floating point only: integer paths carry no gradient)
    need = set(xs)
    path = []
    for n in fwd:
        if any(x in need for x in n.inputs) and any(o in anc for o in n.outputs):
            float_outs = [o for o in n.outputs if o and _is_float(e, o)]
            need.update(float_outs)
            if float_outs:
                path.append(n)
    grads: dict = {}                         # forward value (original name) -> [contributions]
    if y in need:
        ys = e.shape(env[y])
        if not _is_float(e, env[y]):
            raise NoRule(None, f"y {y!r} is not a floating-point tensor")
        if ys is not None and all(isinstance(d, int) for d in ys):
            seed = e.const(np.ones(ys, dtype=e.np_dtype(env[y])), e.np_dtype(env[y]), "ones")
        else:
            seed = e.op("ConstantOfShape", [e.shape_node(env[y])], {"value": _filled(1, e.np_dtype(env[y]))},
                        elem=e.elem(env[y]), shape=ys)
        grads[y] = [seed]
    for n in reversed(path):
        dys = [_total(e, grads.pop(o, None)) if o else None for o in n.outputs]
        if all(d is None for d in dys):
            continue
        skip = _NON_DIFF_INPUTS.get(n.op_type, set())
        want = [i for i, x in enumerate(n.inputs) if x and x in need and i not in skip and _is_float(e, env.get(x, x))]
        if not want:
            continue
        rule = RULES.get(n.op_type) if n.domain == "" else None
        if rule is None or n.has_subgraph:
            raise NoRule(n, "no gradient rule for its op")
        if dys[0] is None:
            raise NoRule(n, "a gradient reaches an output other than its first")
        ins = [env.get(x, x) if x else x for x in n.inputs]
        outs = [env.get(o, o) if o else o for o in n.outputs]
        got = rule(e, n, ins, outs, dys, set(want))
        for i, g in got.items():
            grads.setdefault(n.inputs[i], []).append(g)
    for x, out in zip(xs, gnode.outputs):
        if not out:
            continue
        xv = env.get(x, x)
        g = _total(e, grads.get(x))
        if g is None:                        # y does not depend on x
            s = e.shape(xv)
            if s is not None and all(isinstance(d, int) for d in s):
                g = e.const(np.zeros(s, dtype=e.np_dtype(xv)), e.np_dtype(xv), "zeros")
            else:
                g = e.op("ConstantOfShape", [e.shape_node(xv)], {"value": _filled(0, e.np_dtype(xv))},
                         elem=e.elem(xv), shape=s)
        e.nodes.append(make_node(graph, names.new(f"{e.prefix}/{out}"), "Identity", [g], [out], {}))
        if out not in graph.value_types or graph.value_types[out].kind != "tensor":
            e.types[out] = (e.elem(xv), e.shape(xv))
    graph.initializers.update(e.inits)
    for name, (elem, shape) in e.types.items():
        if elem:
            graph.value_types[name] = ValueType.from_proto(helper.make_tensor_type_proto(elem, shape))
    return e.nodes


def _filled(v, dtype) -> np.ndarray:
    """ConstantOfShape's value attribute (decoded, as graph/model.py decodes a TENSOR attribute)."""
    a = np.array([v], dtype=dtype)
    a.flags.writeable = False
    return a


def _same_types(e, subst) -> bool:
    return all(e.shape(k) == e.shape(v) and e.elem(k) == e.elem(v) for k, v in subst.items())


def _total(e, contributions):
    if not contributions:
        return None
    if len(contributions) == 1:
        return contributions[0]
    return e.op("Sum", contributions, shape=e.shape(contributions[0]))


def _has_kernel(gnode) -> bool:
    from onnxep.ops import _registry
    return _registry.lookup(gnode.domain, gnode.op_type, gnode.opset) is not None


def expand_gradient(graph: Graph, ctx=None) -> Graph:
    """Every Gradient node of the main graph replaced by its backward nodes (see the module docstring)."""
    if not any(n.op_type == "Gradient" and n.domain == TRAINING_DOMAIN for n in graph.nodes):
        return graph
    names = Names(graph)
    kept = set()                              # Gradient nodes left to a registered kernel
    while True:
        gnode = next((n for n in graph.nodes if n.op_type == "Gradient" and n.domain == TRAINING_DOMAIN
                      and id(n) not in kept), None)
        if gnode is None:
            break
        try:
            new = _expand_one(graph, gnode, names)
        except NoRule as err:
            if _has_kernel(gnode):
                kept.add(id(gnode))
                continue
            where = (f"the forward node {err.node.name!r} (op {err.node.domain + '.' if err.node.domain else ''}"
                     f"{err.node.op_type}, opset {err.node.opset}) on the path from xs to y={gnode.attrs.get('y')!r}"
                     f" blocks it: {err.why}" if err.node is not None else err.why)
            raise OnnxepNotImplemented(
                f"node {gnode.name!r} (op {TRAINING_DOMAIN}.Gradient, opset {gnode.opset}): no backend supports it "
                f"(onnx.reference and onnxruntime have no Gradient) and onnxep cannot expand it into backward "
                f"nodes: {where} (onnxep.graph.passes.expand_gradient.RULES lists the ops it differentiates)"
            ) from None
        i = graph.nodes.index(gnode)
        graph.nodes[i:i + 1] = new
        graph.nodes = _topological(graph.nodes)
    return graph
