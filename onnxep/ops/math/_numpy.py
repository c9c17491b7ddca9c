"""The any-dtype path of the elementwise ops: numpy ufuncs on whole arrays with out= (multidirectional broadcasting is
numpy's), and the per-node dtype dispatch that lets an op with a tuned native float32 kernel keep it.

    class Add_7(Binary):          # _broadcast.Binary = BinaryF32 + NativeOrNumpy: float32 native, the rest numpy
        ufunc = staticmethod(np.add)

An op without a native kernel subclasses NumpyBinary / NumpyUnary (the tables in binary_table.py, unary_table.py,
activations.py) or NumpyKernel. bfloat16 nodes of either kind run the op's float32 code on a Float32Context (inputs
widened, outputs rounded once), bound per node at construction like the numpy path."""
from __future__ import annotations

import types

import numpy as np

from onnxep.errors import InvalidArgument
from onnxep.graph.model import check_size
from onnxep.ops._base import OpKernel, static_dtype

try:  # onnx >= 1.17 reads bfloat16 tensors as ml_dtypes arrays; without it the sessions never see one
    from ml_dtypes import bfloat16 as _BF16
    _BF16 = np.dtype(_BF16)
except ImportError:  # pragma: no cover
    _BF16 = None

#: bfloat16 nodes compute in float32 (inputs widened, each output rounded once): see Float32Context.
FLOATS = ("float16", "float32", "float64", "bfloat16")
SIGNED = ("int8", "int16", "int32", "int64")
UNSIGNED = ("uint8", "uint16", "uint32", "uint64")
INTS = SIGNED + UNSIGNED
NUMERIC = FLOATS + INTS
ALL = NUMERIC + ("bool",)

_F32 = np.dtype(np.float32)


def broadcast_shape(op_type, *shapes):
    """numpy's multidirectional broadcast of the shapes, else InvalidArgument naming them."""
    if len(shapes) == 2 and shapes[0] == shapes[1]:   # the common case, without numpy's 2 us
        return tuple(shapes[0])
    try:
        return np.broadcast_shapes(*shapes)
    except ValueError:
        raise InvalidArgument(f"{op_type}: input shapes {', '.join(str(tuple(s)) for s in shapes)} cannot be "
                              f"broadcast together") from None


def _reads_bfloat16(info):
    return any(vt is not None and vt.type_str == "tensor(bfloat16)" for vt in info.input_types)


class Float32Context:
    """A KernelContext over `ctx` whose bfloat16 inputs read as float32, and whose float32 outputs are temporaries
    rounded to bfloat16 into ctx's outputs by finish() when their index is in `to_bf16` (the node's bfloat16
    outputs): how a bfloat16 node runs the op's float32 code (onnxruntime computes bfloat16 in float32 too). Other
    outputs (bool, int64, a float32 Pow of a float32 base) pass through unchanged."""

    __slots__ = ("ctx", "values", "ins", "outs", "num_threads", "node", "packed", "slot", "made", "to_bf16")

    def __init__(self, ctx, to_bf16):
        self.ctx, self.ins, self.outs, self.num_threads, self.node = ctx, ctx.ins, ctx.outs, ctx.num_threads, ctx.node
        self.packed, self.slot, self.made, self.to_bf16 = (), None, {}, to_bf16
        self.values = {}
        for i, name in enumerate(ctx.ins):
            x = ctx.input(i) if name else None
            if x is not None:
                self.values[name] = x.astype(np.float32) if x.dtype == _BF16 else x

    input_count = property(lambda self: len(self.ins))
    output_count = property(lambda self: len(self.outs))

    def input(self, i):
        return self.values[self.ins[i]] if i < len(self.ins) and self.ins[i] else None

    def has_input(self, i):
        return i < len(self.ins) and bool(self.ins[i])

    def has_output(self, i):
        return i < len(self.outs) and bool(self.outs[i])

    def output(self, i, shape, dtype=np.float32):
        shape = tuple(shape)
        check_size(shape, dtype, f"{self.node}: output {i}")
        arr = self.made[i] = np.empty(shape, dtype)
        return arr

    def set_output(self, i, value):
        self.made[i] = value

    def finish(self):
        for i, arr in self.made.items():
            if isinstance(arr, np.ndarray) and arr.dtype == np.float32 and i in self.to_bf16:
                self.ctx.output(i, arr.shape, _BF16)[...] = arr
            elif isinstance(arr, np.ndarray):
                self.ctx.output(i, arr.shape, arr.dtype)[...] = arr
            else:
                self.ctx.set_output(i, arr)


def _compute_bfloat16(kernel, ctx):
    c = Float32Context(ctx, kernel._bf16_outputs)
    type(kernel).compute(kernel, c)
    c.finish()


def bind_bfloat16(kernel, info):
    """A node reading bfloat16 gets as compute (a bound method: the run loop reads compute.__self__) the class's
    own compute run on a Float32Context. True if so."""
    if _BF16 is None or not _reads_bfloat16(info):
        return False
    # the outputs typed bfloat16 (or untyped: they follow input 0, which is bfloat16 in every op here but Pow)
    kernel._bf16_outputs = frozenset(i for i, vt in enumerate(info.output_types)
                                     if vt is None or vt.type_str in ("tensor(bfloat16)", "unknown"))
    kernel.compute = types.MethodType(_compute_bfloat16, kernel)
    return True


class NumpyKernel(OpKernel):
    """OpKernel whose compute is written for float32 and the numpy dtypes; bfloat16 nodes run it in float32."""

    def __init__(self, info):
        super().__init__(info)
        bind_bfloat16(self, info)


class NativeOrNumpy:
    """Mixin of an op class whose `compute` is a tuned native float32 kernel: a node of any other dtype gets
    `compute_numpy` bound as its compute once, at construction, so the float32 path pays no per-call dtype test.
    When the graph does not say the dtype, the call tests it. bfloat16: the native float32 compute on a
    Float32Context. The binding happens in __init__ (the mixin comes before the kernel base in the bases)."""

    def __init__(self, info):
        super().__init__(info)
        self.bind_compute(info)

    def bind_compute(self, info):
        if bind_bfloat16(self, info):
            return
        dt = static_dtype(info)
        if dt is None:
            self.compute = self._compute_by_dtype
        elif dt != _F32:
            self.compute = self.compute_numpy

    def _compute_by_dtype(self, ctx):
        x = ctx.input(0)
        if x is not None and x.dtype == _F32:
            type(self).compute(self, ctx)
        else:
            self.compute_numpy(ctx)

    def compute_numpy(self, ctx):
        raise NotImplementedError


class NumpyBinary(NumpyKernel):
    """Z := f(A, B) elementwise with broadcasting. `ufunc(a, b, out=z)`; `out_dtype` None: the inputs' dtype.
    In place is safe for one ufunc call (numpy copies when out overlaps an input in a way that matters); a subclass
    whose `apply` writes Z before it has read all of A and B sets inplace = ()."""

    type_constraints = {"T": NUMERIC}
    inplace = ((0, 0), (0, 1))
    ufunc = None
    out_dtype = None

    def compute(self, ctx):
        a, b = ctx.input(0), ctx.input(1)
        z = ctx.output(0, broadcast_shape(self.op_type, a.shape, b.shape),
                       a.dtype if self.out_dtype is None else self.out_dtype)
        if not z.size:
            return
        if a.dtype.kind in "fV":       # floats: no overflow / invalid warnings (onnxruntime gives none either)
            with np.errstate(all="ignore"):
                self.apply(a, b, z)
        else:
            self.apply(a, b, z)

    def apply(self, a, b, z):
        self.ufunc(a, b, out=z)

    def c_step(self, ins, outs, nthreads):
        """The compiled run loop's entry for the comparisons and logic ops of float32 / int64 / int32 / bool inputs
        of one dtype (rl_compare over the broadcast), the plain compute / apply only."""
        from onnxep.ops import _c_steps
        if type(self).compute is not NumpyBinary.compute or type(self).apply is not NumpyBinary.apply:
            return None
        return _c_steps.compare(self.ufunc, ins[0], ins[1], outs[0])


class NumpyUnary(NumpyKernel):
    """Y := f(X) elementwise. `ufunc(x, out=y)`; `out_dtype` None: X's dtype. In place as NumpyBinary."""

    type_constraints = {"T": NUMERIC}
    inplace = ((0, 0),)
    ufunc = None
    out_dtype = None

    def compute(self, ctx):
        x = ctx.input(0)
        y = ctx.output(0, x.shape, x.dtype if self.out_dtype is None else self.out_dtype)
        if not y.size:
            return
        if x.dtype.kind in "fV":
            with np.errstate(all="ignore"):
                self.apply(x, y)
        else:
            self.apply(x, y)

    def apply(self, x, y):
        self.ufunc(x, out=y)

    def c_step(self, ins, outs, nthreads):
        """The compiled run loop's entry for IsNaN float32 (rl_isnan) and Not (rl_compare), the plain compute only."""
        from onnxep.ops import _c_steps
        if type(self).compute is not NumpyUnary.compute or type(self).apply is not NumpyUnary.apply:
            return None
        x, y = ins[0], outs[0]
        if not _c_steps.plain(x, y) or x.shape != y.shape or y.dtype != np.bool_ or not _c_steps.apart(y, x):
            return None
        if self.ufunc is np.isnan and x.dtype == np.float32:
            return "isnan", [0, ~0], [y.size], []
        if self.ufunc is np.logical_not and x.dtype == np.bool_:
            spec = _c_steps.compare(np.logical_not, x, x, y)
            return None if spec is None else (spec[0], [0, 0, ~0], spec[2], spec[3])
        return None


def fold(op_type, xs, ctx, apply, dtype=None):
    """Y := X0 op X1 op ... (Sum/Max/Min/Mean) folded left to right into the output with `apply(a, b, y)`."""
    if not xs or any(x is None for x in xs):
        raise InvalidArgument(f"{op_type} needs at least one input and no omitted ones")
    y = ctx.output(0, broadcast_shape(op_type, *(x.shape for x in xs)), xs[0].dtype if dtype is None else dtype)
    if y.size == 0:
        return y
    if len(xs) == 1:
        np.copyto(y, xs[0])
        return y
    with np.errstate(all="ignore"):
        apply(xs[0], xs[1], y)
        for x in xs[2:]:
            apply(y, x, y)
    return y


def make_classes(namespace, base, table, doc):
    """One class per table row (op, since, dtypes, then the fields of `row_fields`), named <op>_<since>, defined in
    the module whose globals are `namespace` (the registry takes the classes a module defines). `doc(row)` -> the
    class docstring."""
    for row in table:
        op, since, dtypes, fields = row[0], row[1], row[2], row[3]
        name = f"{op}_{since}"
        namespace[name] = type(name, (base,), {"__module__": namespace["__name__"], "__qualname__": name,
                                               "__doc__": doc(row), "domain": "", "op_type": op, "since": since,
                                               "type_constraints": {"T": dtypes}, **fields})
