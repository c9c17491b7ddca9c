import math

import numpy as np

from onnxep.errors import InvalidArgument
from onnxep.ops._memo import ShapeMemo
from onnxep.ops.math._numpy import NUMERIC, NumpyKernel
from onnxep.ops.math.mat_mul import matmul_into


def einsum_shape(equation: str, shapes) -> tuple:
    """The output shape of an einsum `equation` (explicit "->" or implicit: the labels seen once, sorted, after the
    broadcast "..." dims) over inputs of `shapes`, else InvalidArgument saying what does not fit."""
    eq = equation.replace(" ", "")
    lhs, arrow, rhs = eq.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(shapes):
        raise InvalidArgument(f"Einsum: equation {equation!r} has {len(terms)} operands, the node {len(shapes)} inputs")
    sizes, ell, counts = {}, [], {}
    for term, shape in zip(terms, shapes):
        labels = term.replace("...", "")
        n_ell = len(shape) - len(labels)
        if ("..." in term and n_ell < 0) or ("..." not in term and n_ell != 0) or (labels and not labels.isalpha()):
            raise InvalidArgument(f"Einsum: term {term!r} of {equation!r} does not fit an input of shape {shape}")
        head = term.index("...") if "..." in term else len(labels)
        ell.append(shape[head:head + n_ell])
        for i, c in enumerate(labels):
            d = shape[i if i < head else i + n_ell]
            counts[c] = counts.get(c, 0) + 1
            if sizes.setdefault(c, d) != d:
                if sizes[c] == 1:
                    sizes[c] = d
                elif d != 1:
                    raise InvalidArgument(f"Einsum: label {c!r} of {equation!r} has sizes {sizes[c]} and {d}")
    try:
        ell_shape = np.broadcast_shapes(*ell)
    except ValueError:
        raise InvalidArgument(f"Einsum: the '...' dims of {equation!r} do not broadcast: {ell}") from None
    if not arrow:
        return tuple(ell_shape) + tuple(sizes[c] for c in sorted(c for c, n in counts.items() if n == 1))
    out = rhs.replace("...", "")
    if (out and not out.isalpha()) or any(c not in sizes for c in out) or len(set(out)) != len(out):
        raise InvalidArgument(f"Einsum: output term {rhs!r} of {equation!r} names an unknown or repeated label")
    head = rhs.index("...") if "..." in rhs else len(out)
    dims = [sizes[c] for c in out]
    return tuple(dims[:head]) + (tuple(ell_shape) if "..." in rhs else ()) + tuple(dims[head:])


def matmul_plan(equation: str, shapes):
    """How a two-operand einsum without '...' or a repeated label inside a term is one batched matmul, else None:
    (A's summed-alone axes, A's permutation, B's summed-alone axes, B's permutation, (nb, nl, nk, nr), the shape of
    the product before its last transpose, that transpose). Labels of A and B are batch (in both and the output),
    contracted (in both, not the output), left / right (in one and the output) or summed alone (in one only)."""
    eq = equation.replace(" ", "")
    lhs, arrow, out = eq.partition("->")
    terms = lhs.split(",")
    if len(terms) != 2 or "." in eq or any(len(set(t)) != len(t) for t in terms + [out]):
        return None
    ta, tb = terms
    if not arrow:
        out = "".join(sorted(c for c in set(ta + tb) if (ta + tb).count(c) == 1))
    size = {}
    for t, shp in ((ta, shapes[0]), (tb, shapes[1])):
        for c, d in zip(t, shp):
            if size.setdefault(c, d) != d:
                return None          # a size-1 label broadcast against another size: np.einsum handles it
    batch = [c for c in out if c in ta and c in tb]
    left = [c for c in out if c in ta and c not in tb]
    right = [c for c in out if c in tb and c not in ta]
    contract = [c for c in ta if c in tb and c not in out]
    ka = [c for c in ta if c in batch + left + contract]
    kb = [c for c in tb if c in batch + right + contract]
    sum_a = tuple(i for i, c in enumerate(ta) if c not in ka)
    sum_b = tuple(i for i, c in enumerate(tb) if c not in kb)
    perm_a = tuple(ka.index(c) for c in batch + left + contract)
    perm_b = tuple(kb.index(c) for c in batch + contract + right)
    n = [math.prod(size[c] for c in g) for g in (batch, left, contract, right)]
    prod_labels = batch + left + right
    return (sum_a, perm_a, sum_b, perm_b, tuple(n), tuple(size[c] for c in prod_labels),
            tuple(prod_labels.index(c) for c in out))


class Einsum_12(NumpyKernel):
    """Y := einsum(equation, X0, X1, ...) (opsets 12, 28). Two operands that make one batched matmul (matmul_plan:
    attention's 'bhqd,bhkd->bhqk' and the like) run as np.matmul (BLAS for floats; float16 in float32); the rest
    np.einsum, its contraction order optimised beyond two operands (intermediates no larger than an operand or the
    output). The output shape is worked out from the equation and checked before anything is allocated."""

    domain, op_type, since = "", "Einsum", 12
    type_constraints = {"T": NUMERIC}
    equation = ""

    def __init__(self, info):
        super().__init__(info)
        self._plans = ShapeMemo()

    def compute(self, ctx):
        xs = [ctx.input(i) for i in range(ctx.input_count)]
        eq = self.equation
        y = ctx.output(0, einsum_shape(eq, [x.shape for x in xs]), xs[0].dtype)
        if not y.size:
            return
        key = tuple(x.shape for x in xs)
        plan = self._plans.get(key, False)
        if plan is False:
            plan = self._plans.keep(key, matmul_plan(eq, key) if len(xs) == 2 else None)
        if plan is None:
            # beyond two operands numpy picks the contraction order; its intermediates are capped at the largest of
            # the operands and the output, whose sizes are checked already
            cap = max([y.size] + [x.size for x in xs])
            np.einsum(eq.replace(" ", ""), *xs, out=y, optimize=("greedy", cap) if len(xs) > 2 else False)
            return
        sum_a, perm_a, sum_b, perm_b, (nb, nl, nk, nr), prod_shape, perm_y = plan
        a = xs[0].sum(axis=sum_a) if sum_a else xs[0]
        b = xs[1].sum(axis=sum_b) if sum_b else xs[1]
        a3 = a.transpose(perm_a).reshape(nb, nl, nk)
        b3 = b.transpose(perm_b).reshape(nb, nk, nr)
        p = np.empty((nb, nl, nr), y.dtype)
        matmul_into(a3, b3, p)
        y[...] = p.reshape(prod_shape).transpose(perm_y)
