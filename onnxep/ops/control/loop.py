"""Loop (opsets 1-25): the body runs as a compiled subgraph (control/_body.py) while the trip count M (optional)
and the condition (optional) allow. Loop-carried values may change shape between iterations and may be sequences or
optionals; scan outputs are stacked along a new axis 0 (zero iterations: an empty output of shape (0, *the body's
declared output shape) when that shape is static, else (0,))."""
from __future__ import annotations

import numpy as np

from onnxep.errors import InvalidArgument, OnnxepError
from onnxep.graph.model import check_size
from onnxep.ops._base import OpKernel
from onnxep.ops.control._body import Body, BodyOwner, fed_owners, owned, run_context, scalar_feed, wrap_iteration


class Loop_1(BodyOwner, OpKernel):
    op_type, since = "Loop", 1

    @classmethod
    def check_types(cls, op) -> bool:
        its = op.input_types
        for i, want in ((0, "tensor(int64)"), (1, "tensor(bool)")):
            vt = its[i] if i < len(its) and op.node.inputs[i] else None
            if vt is not None and vt.type_str != want:
                return False
        return True

    def __init__(self, info):
        super().__init__(info)
        self.body = Body(info.attrs["body"], info, "body")
        body = self.body
        self.n_carried = len(body.input_names) - 2
        self.n_scan = len(body.output_names) - 1 - self.n_carried
        if self.n_carried < 0 or self.n_scan < 0 or info.scope.n_inputs != 2 + self.n_carried:
            self.release()
            raise InvalidArgument(f"Loop node {self.name!r}: the body has {len(body.input_names)} inputs and "
                                  f"{len(body.output_names)} outputs, the node {info.scope.n_inputs} inputs: a node "
                                  f"of 2 + N inputs needs a body of 2 + N inputs and 1 + N + K outputs")

    def compute(self, ctx):
        body = self.body
        names_in = body.input_names
        nc, ns = self.n_carried, self.n_scan
        m = ctx.input(0)
        cond = ctx.input(1)
        max_trip = None if m is None else int(np.asarray(m).reshape(-1)[0])
        go = True if cond is None else bool(np.asarray(cond).reshape(-1)[0])
        carried = [ctx.input(2 + k) for k in range(nc)]
        feeds = body.outer_feeds(ctx)
        owners = fed_owners(feeds.values())
        scans = [[] for _ in range(ns)]
        run_ctx = run_context(ctx)
        it_vt, cond_vt = body.input_types[0], body.input_types[1]
        it = 0
        while go and (max_trip is None or it < max_trip):
            feeds[names_in[0]] = scalar_feed(it, it_vt, np.int64)
            feeds[names_in[1]] = scalar_feed(go, cond_vt, np.bool_)
            for k in range(nc):
                feeds[names_in[2 + k]] = carried[k]
            try:
                outs = body.run(feeds, run_ctx)
            except OnnxepError as e:
                raise wrap_iteration(e, f"in {body.attr}, iteration {it}") from e
            c = np.asarray(outs[0])
            if c.size != 1:
                raise InvalidArgument(f"Loop node {self.name!r}: iteration {it}: the body's condition output must "
                                      f"have one element, got shape {c.shape}")
            go = bool(c.reshape(-1)[0])
            carried = list(outs[1:1 + nc])
            for k in range(ns):
                y = outs[1 + nc + k]
                if not isinstance(y, np.ndarray):
                    raise InvalidArgument(f"Loop node {self.name!r}: scan output {k} of iteration {it} is not a "
                                          f"tensor ({type(y).__name__})")
                if scans[k] and (y.shape != scans[k][0].shape or y.dtype != scans[k][0].dtype):
                    raise InvalidArgument(f"Loop node {self.name!r}: scan output {k} "
                                          f"({body.output_names[1 + nc + k]!r}) has shape {y.shape} {y.dtype} at "
                                          f"iteration {it}, {scans[k][0].shape} {scans[k][0].dtype} at iteration 0")
                scans[k].append(owned(y, owners))
            it += 1
        for k in range(nc):
            ctx.set_output(k, carried[k])
        for k in range(ns):
            if not ctx.has_output(nc + k):
                continue
            ys = scans[k]
            if ys:
                shape, dtype = (len(ys),) + ys[0].shape, ys[0].dtype
            else:
                vt = body.output_types[1 + nc + k]
                dims = vt.shape if vt is not None else None
                static = dims is not None and all(isinstance(d, int) for d in dims)
                shape = (0,) + tuple(dims) if static else (0,)
                dtype = (vt.dtype if vt is not None else None) or np.float32
            check_size(shape, dtype, f"Loop node {self.name!r} scan output {k}")
            out = ctx.output(nc + k, shape, dtype)
            if ys:
                np.stack(ys, axis=0, out=out)
