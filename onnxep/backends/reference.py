"""The reference backend: nodes the cpu backend does not support run through onnx.reference.ReferenceEvaluator.

A partition becomes a small standalone model (its nodes, its constant initializers, the model's opsets and local
functions) built once at compile time; compute feeds it the partition's inputs. Known trap, handled by ownership:
onnx.reference computes opset-9 BatchNormalization with the training formula, so the cpu backend owns that op and
this device refuses it."""
from __future__ import annotations

import numpy as np
import onnx
from onnx import helper, numpy_helper

from onnxep.contracts.backend import Backend, Device, GraphPlan
from onnxep.errors import RuntimeException


class ReferenceDevice(Device):
    name = "reference"
    description = "onnx.reference.ReferenceEvaluator (fallback)"

    def supports_op(self, op) -> bool:
        if op.node.op_type == "BatchNormalization" and op.node.domain == "" and op.node.opset < 14:
            return False  # the training formula trap (see module docstring)
        if op.node.domain == "com.onnxep":
            return False  # onnxep's internal ops: onnx.reference has no implementation (it would raise at compile)
        return True

    def init_backend(self, stream, **options):
        return ReferenceBackend(self, stream)


REFERENCE_DEVICE = ReferenceDevice()


class ReferencePlan(GraphPlan):
    backend_name = "reference"

    def __init__(self, inputs, outputs, evaluator, n_nodes):
        super().__init__(inputs, outputs)
        self.evaluator = evaluator
        self.n_nodes = n_nodes

    def describe(self):
        return f"ReferencePlan({self.n_nodes} nodes)"

    def free(self):
        self.evaluator = None


class ReferenceBackend(Backend):
    def graph_plan_create(self, partition, ctx) -> ReferencePlan:
        from onnx.reference import ReferenceEvaluator

        def vi(name):
            vt = partition.value_types.get(name)
            if vt is not None and vt.proto is not None:
                v = onnx.ValueInfoProto()
                v.name = name
                v.type.CopyFrom(vt.proto)
                return v
            return helper.make_empty_tensor_value_info(name)

        graph = helper.make_graph(
            [n.proto for n in partition.nodes], "reference_partition",
            [vi(x) for x in partition.inputs], [vi(x) for x in partition.outputs],
            [numpy_helper.from_array(np.asarray(v), x) for x, v in partition.constants.items()]
        )
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid(d, v) for d, v in partition.opsets.items()],
                                  functions=partition.functions)
        model.ir_version = max(partition.ir_version, 3)
        evaluator = ReferenceEvaluator(model)
        return ReferencePlan(partition.inputs, partition.outputs, evaluator, len(partition.nodes))

    def graph_plan_compute(self, plan: ReferencePlan, values: dict, run_ctx):
        feeds = {x: values[x] for x in plan.inputs}
        try:
            results = plan.evaluator.run(list(plan.outputs), feeds)
        except Exception as e:
            raise RuntimeException(f"reference backend failed on a partition of {plan.n_nodes} node(s): "
                                   f"{type(e).__name__}: {e}") from e
        for name, r in zip(plan.outputs, results):
            if isinstance(r, np.generic):
                r = np.asarray(r)
            if isinstance(r, np.ndarray) and not r.flags.c_contiguous:
                r = np.ascontiguousarray(r)
            values[name] = r
