"""Epilogue fusion for NhwcConv (after the layout pass): what follows a channel-last conv moves into its GEMM epilogue.

- NhwcConv -> Add / Sum(two inputs) with a 4-D other input Z that may have the same shape (the shapes of Z, the
  conv's output and the Add's output need not be provably equal; _may_be_equal): the conv takes Z as its 4th input
  (y = conv + B + Z) and moves to the Add's place (Z may be computed after the conv in the original order);
- NhwcConv -> Relu / Clip (constant bounds) / LeakyRelu / Sigmoid / HardSigmoid / Tanh / HardSwish: the conv's
  activation (applied after the residual add, as in a ResNet block); a depthwise conv fuses Relu, Clip (MobileNetV2's
  ReLU6) and HardSwish (MobileNetV3), which its own kernel applies. A com.onnxep Silu (fuse_silu's SiLU) stays a node
  after the conv: applied in the epilogue it took 1.01-1.3x the time of the separate loop (_native/eltwise.h).

Only when the conv's output has no other reader (and is not a graph output)."""
from __future__ import annotations

from onnxep.graph.ir import Graph
from onnxep.graph.passes._edit import INTERNAL_DOMAIN, consumer_counts, producers


DW_ACTS = ("Relu", "Clip", "HardSwish")     # what the depthwise kernel's epilogue applies (DW_ACTIVATIONS)


def _fusable_conv(node, counts, x) -> bool:
    return (node is not None and node.domain == INTERNAL_DOMAIN and node.op_type == "NhwcConv"
            and not node.attrs.get("activation") and counts.get(x, 0) == 1)


def _may_be_equal(*shapes) -> bool:
    """Whether 4-D shapes may be the same at run time: no two different static sizes in one place, and no static 1
    beside another dim (an Add that broadcasts there on every run gains nothing from the fold). Symbolic dims need not
    match: onnx's shape inference gives a TorchScript export's residual operands distinct symbols (unk__54 beside
    unk__60) that are equal at run time; NhwcConv checks Z's shape against its output's once per input signature
    and takes the Add's broadcast, unfused, when they differ."""
    if any(s is None or len(s) != 4 for s in shapes):
        return False
    for dims in zip(*shapes):
        static = {d for d in dims if isinstance(d, int)}
        if len(static) > 1 or (static == {1} and len(set(dims)) > 1):
            return False
    return True


def _depthwise(node, consts) -> bool:
    w = consts.get(node.inputs[1])
    return w is not None and int(node.attrs.get("group", 1) or 1) > 1 and w.shape[1] == 1


def _activation(node, consts):
    """(name, params) of an activation node the epilogue can apply, or None."""
    a, op = node.attrs, node.op_type
    if len([o for o in node.outputs if o]) != 1:
        return None
    if op in ("Relu", "Sigmoid", "Tanh", "HardSwish"):
        return op, ()
    if op == "LeakyRelu":
        return op, (float(a.get("alpha", 0.01) if a.get("alpha") is not None else 0.01),)
    if op == "HardSigmoid":
        return op, (float(a["alpha"] if a.get("alpha") is not None else 0.2),
                    float(a["beta"] if a.get("beta") is not None else 0.5))
    if op == "Clip":
        if node.opset < 11:
            return op, (float(a.get("min", -3.4028234663852886e38)), float(a.get("max", 3.4028234663852886e38)))
        bounds = []
        for i, default in ((1, -float("inf")), (2, float("inf"))):
            x = node.inputs[i] if len(node.inputs) > i else ""
            if x and (x not in consts or consts[x].size != 1 or consts[x].dtype.kind != "f"):
                return None
            bounds.append(float(consts[x].reshape(())) if x else default)
        return op, tuple(bounds)
    return None


def fuse_nhwc_conv(graph: Graph, ctx=None) -> Graph:
    counts = consumer_counts(graph)
    consts = graph.constants
    vt = graph.value_types
    producer = producers(graph)
    out = []
    for node in graph.nodes:
        if node.domain == "" and node.op_type in ("Add", "Sum") and len(node.inputs) == 2 and all(node.inputs):
            a, b = node.inputs
            shape = vt.get(node.outputs[0]).shape if vt.get(node.outputs[0]) is not None else None
            for x, z in ((b, a), (a, b)):        # prefer the conv computed last
                conv = producer.get(x)
                if not _fusable_conv(conv, counts, x) or len(conv.inputs) > 3 \
                        or _depthwise(conv, consts) or x == z or z in consts:
                    continue
                sz, sx = vt.get(z), vt.get(x)
                if shape is None or sz is None or sx is None or not _may_be_equal(sz.shape, sx.shape, shape):
                    continue
                conv.inputs = conv.inputs + ("",) * (3 - len(conv.inputs)) + (z,)
                conv.outputs = (node.outputs[0],)
                out = [n for n in out if n is not conv]
                out.append(conv)
                producer[node.outputs[0]] = conv
                break
            else:
                out.append(node)
            continue
        act = _activation(node, consts) if node.domain == "" and node.inputs and node.inputs[0] else None
        if act is not None:
            conv = producer.get(node.inputs[0])
            if _fusable_conv(conv, counts, node.inputs[0]) \
                    and (act[0] in DW_ACTS or not _depthwise(conv, consts)):
                conv.attrs = dict(conv.attrs, activation=act[0], activation_params=list(act[1]) or None)
                conv.outputs = (node.outputs[0],)
                producer[node.outputs[0]] = conv
                continue
        out.append(node)
    graph.nodes = out
    return graph
