import numpy as np

from onnxep.errors import InvalidArgument
from onnxep.ops.math._numpy import NUMERIC, NumpyKernel


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


class Einsum_12(NumpyKernel):
    """Y := einsum(equation, X0, X1, ...) (opsets 12, 28; np.einsum, contraction order optimised when there are more
    than two operands). The output shape is worked out from the equation and checked before anything is allocated."""

    domain, op_type, since = "", "Einsum", 12
    type_constraints = {"T": NUMERIC}
    equation = ""

    def compute(self, ctx):
        xs = [ctx.input(i) for i in range(ctx.input_count)]
        eq = self.equation.decode() if isinstance(self.equation, bytes) else self.equation
        y = ctx.output(0, einsum_shape(eq, [x.shape for x in xs]), xs[0].dtype)
        if y.size:
            np.einsum(eq.replace(" ", ""), *xs, out=y, optimize=len(xs) > 2)
