"""SequenceMap-17: the body (a compiled subgraph, ops/control/_body.py) runs once per position of the input
sequence; each sequence input gives the body its tensor at that position, each tensor input is given whole; each body
output becomes a sequence of the per-position outputs."""
from onnxep.errors import InvalidArgument, OnnxepError
from onnxep.ops.control._body import Body, BodyOwner, fed_owners, owned, run_context, wrap_iteration
from onnxep.ops.sequence._seq import SeqKernel


class SequenceMap_17(BodyOwner, SeqKernel):
    op_type, since = "SequenceMap", 17

    def __init__(self, info):
        super().__init__(info)
        self.body = Body(info.attrs["body"], info, "body")
        self.n_in = info.scope.n_inputs
        if len(self.body.input_names) != self.n_in:
            self.release()
            raise InvalidArgument(f"SequenceMap node {self.name!r}: the body has {len(self.body.input_names)} "
                                  f"inputs, the node {self.n_in}")

    def compute(self, ctx):
        body = self.body
        name = self.name
        ins = [ctx.input(i) for i in range(self.n_in)]
        if not isinstance(ins[0], list):
            raise InvalidArgument(f"SequenceMap node {name!r}: input 0 must be a sequence, got {type(ins[0]).__name__}")
        n = len(ins[0])
        for i, v in enumerate(ins):
            if isinstance(v, list) and len(v) != n:
                raise InvalidArgument(f"SequenceMap node {name!r}: sequence input {i} has {len(v)} tensors, input 0 "
                                      f"{n}")
        feeds = body.outer_feeds(ctx)
        owners = fed_owners(list(feeds.values()) + [v for v in ins if not isinstance(v, list)])
        run_ctx = run_context(ctx)
        outs = [[] for _ in body.output_names]
        for t in range(n):
            for x, v in zip(body.input_names, ins):
                feeds[x] = v[t] if isinstance(v, list) else v
            try:
                ys = body.run(feeds, run_ctx)
            except OnnxepError as e:
                raise wrap_iteration(e, f"in {body.attr}, position {t}") from e
            for q, y in enumerate(ys):
                outs[q].append(owned(y, owners))
        for q, seq in enumerate(outs):
            ctx.set_output(q, seq)
