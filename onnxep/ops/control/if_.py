"""If (opsets 1-25): the chosen branch runs as a compiled subgraph (control/_body.py). The branches may give outputs
of different shapes, sequences (lists) and optionals (None when empty)."""
from __future__ import annotations

import numpy as np

from onnxep.errors import InvalidArgument, OnnxepError, RuntimeException
from onnxep.ops._base import OpKernel
from onnxep.ops.control._body import Body, run_context, wrap_iteration


class If_1(OpKernel):
    op_type, since = "If", 1

    @classmethod
    def check_types(cls, op) -> bool:
        vt = op.input_types[0] if op.input_types else None
        return vt is None or vt.kind == "tensor" and vt.type_str == "tensor(bool)"

    def __init__(self, info):
        super().__init__(info)
        self.then_body = self.else_body = None
        try:
            self.then_body = Body(info.attrs["then_branch"], info, "then_branch")
            self.else_body = Body(info.attrs["else_branch"], info, "else_branch")
        except BaseException:
            self.release()
            raise
        for body in (self.then_body, self.else_body):
            if len(body.output_names) != len(info.output_types):
                self.release()
                raise InvalidArgument(f"If node {self.name!r}: {body.where} has {len(body.output_names)} outputs, "
                                      f"the node {len(info.output_types)}")

    def compute(self, ctx):
        cond = ctx.input(0)
        c = np.asarray(cond)
        if c.size != 1:
            raise InvalidArgument(f"If node {self.name!r}: the condition must have one element, got shape {c.shape}")
        body = self.then_body if bool(c.reshape(-1)[0]) else self.else_body
        try:
            outs = body.run(body.outer_feeds(ctx), run_context(ctx))
        except OnnxepError as e:
            raise wrap_iteration(e, f"in {body.attr}") from e
        for i, (v, vt) in enumerate(zip(outs, body.output_types)):
            if v is None and not (vt is not None and vt.kind == "optional"):
                raise RuntimeException(f"If node {self.name!r}: {body.where} output {i} "
                                       f"({body.output_names[i]!r}) is an empty optional but is not declared optional")
            ctx.set_output(i, v)

    def release(self):
        for body in (self.then_body, self.else_body):
            if body is not None:
                body.release()
