"""The reference backend: nodes the cpu backend does not support run through onnx.reference.ReferenceEvaluator.

A partition becomes a small standalone model (its nodes, its constant initializers, the model's opsets and local
functions) built once at compile time; compute feeds it the partition's inputs. Known trap, handled by ownership:
onnx.reference computes opset-9 BatchNormalization with the training formula, so the cpu backend owns that op and
this device refuses it.

onnx.reference's control-flow and optional ops are replaced by corrected ones (_Fixed below, given to the evaluator
as new_ops, so they also run inside subgraphs and function bodies): Optional wraps its value in a list (so an empty
optional reads as present and OptionalGetElement returns the list); If refuses a branch output that is an empty
optional; Loop stacks scalar scan outputs with an extra axis (np.vstack) and fails on zero iterations; Scan ignores
opset 8 (batch axis, sequence_lens, directions) and refuses scan axes and directions other than 0.
ImageDecoder decodes with Pillow, which onnxep does not require: a model with one needs Pillow installed."""
from __future__ import annotations

import functools

import numpy as np
import onnx
from onnx import helper, numpy_helper

from onnxep.contracts.backend import Backend, Device, GraphPlan
from onnxep.errors import NotImplemented, RuntimeException


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

    def __init__(self, inputs, outputs, evaluator, n_nodes, op_types=()):
        super().__init__(inputs, outputs)
        self.evaluator = evaluator
        self.n_nodes = n_nodes
        self.op_types = op_types  # per node, "domain:OpType" outside the default domain (for inspection and tests)

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
        for n in partition.nodes:
            if n.proto.op_type == "ImageDecoder" and n.proto.domain in ("", "ai.onnx"):
                try:
                    import PIL  # noqa: F401
                except ImportError:
                    raise NotImplemented(f"ImageDecoder node '{n.proto.name}' runs on the reference backend, which "
                                         f"decodes images with Pillow: pip install pillow") from None
        evaluator = ReferenceEvaluator(model, new_ops=_fixed_ops())
        op_types = tuple(n.op_type if n.domain in ("", "ai.onnx") else f"{n.domain}:{n.op_type}"
                         for n in partition.nodes)
        return ReferencePlan(partition.inputs, partition.outputs, evaluator, len(partition.nodes), op_types)

    def graph_plan_compute(self, plan: ReferencePlan, values: dict, run_ctx):
        feeds = {x: values[x] for x in plan.inputs}
        try:
            results = plan.evaluator.run(list(plan.outputs), feeds)
        except Exception as e:
            raise RuntimeException(f"reference backend failed on a partition of {plan.n_nodes} node(s): "
                                   f"{type(e).__name__}: {e}") from e
        inputs = None
        for name, r in zip(plan.outputs, results):
            if isinstance(r, np.generic):
                r = np.asarray(r)
            if isinstance(r, np.ndarray) and not r.flags.c_contiguous:
                r = np.ascontiguousarray(r)
            elif isinstance(r, list) and r:
                if inputs is None:
                    inputs = [v for v in feeds.values() if isinstance(v, np.ndarray) and v.nbytes]
                r = _detached(r, inputs)
            values[name] = r


def _detached(seq: list, inputs) -> list:
    """A sequence the evaluator returned, each tensor in it that shares memory with one of the plan's input tensors
    copied, as is each read-only one (an initializer of the evaluator's model), into a new list (the evaluator's may
    be an input's). onnx.reference keeps its input objects (SequenceConstruct / SequenceInsert put them in the list
    as they are, SplitToSequence returns views of its input), and an input tensor may live in the enclosing run's
    arena: a boundary copy, or the output of a cpu plan. The memory planner follows tensors, not the tensors inside a
    sequence, so it would give that memory to a later tensor of the run, or the next run would overwrite it while the
    caller holds the sequence. onnxep's own sequences never hold arena memory (the sequence ops copy what they put in
    one); neither do the reference backend's once they leave it."""
    out = None
    for k, v in enumerate(seq):
        if isinstance(v, list):
            w = _detached(v, inputs)
        elif isinstance(v, np.ndarray) and (not v.flags.writeable
                                            or any(np.may_share_memory(v, a) for a in inputs)):
            w = v.copy()
        else:
            continue
        if w is not v:
            if out is None:
                out = list(seq)
            out[k] = w
    return seq if out is None else out


# --------------------------------------------------------------------------- corrected onnx.reference ops
def _is_optional(type_proto) -> bool:
    return type_proto is not None and type_proto.HasField("optional_type")


def _stack(values, dtype=None):
    """Per-iteration scan outputs stacked on a new leading axis (a zero-trip loop gives an empty (0,) array)."""
    if not values:
        return np.empty((0,), dtype=dtype if dtype is not None else np.float32)
    return np.stack([np.asarray(v) for v in values], axis=0)


def _elem_dtype(type_proto):
    if type_proto is not None and type_proto.HasField("tensor_type") and type_proto.tensor_type.elem_type:
        return helper.tensor_dtype_to_np_dtype(type_proto.tensor_type.elem_type)
    return None


@functools.lru_cache(maxsize=None)
def _fixed_ops() -> list:
    """The corrected OpRun classes given to every evaluator: made at the first reference partition, so that
    importing onnxep does not import onnx.reference (about 200 modules, ~12 MB of a process that never falls back)."""

    class _Fixed:
        """OpRun classes named like the op they replace (the evaluator keys new_ops by class name)."""

        from onnx.reference.op_run import OpRun as _OpRun
        from onnx.reference.ops.op_if import If as _If
        from onnx.reference.ops.op_loop import Loop as _Loop

        class _NoneOk:
            """An empty optional is None: let it through the output check (onnx.reference allows arrays, lists,
            dicts)."""

            def _check_and_fix_outputs(self, res):
                if not isinstance(res, tuple) or not res:
                    return super()._check_and_fix_outputs(res)
                present = [i for i, r in enumerate(res) if r is not None]
                if not present:
                    return res
                fixed = super()._check_and_fix_outputs(tuple(res[i] for i in present))
                out = list(res)
                for i, r in zip(present, fixed):
                    out[i] = r
                return tuple(out)

        class Optional(_NoneOk, _OpRun):
            """Optional(x) is x; Optional() is the empty optional, None."""

            def _run(self, x=None, type=None):  # noqa: A002 - the attribute's name
                return (x,)

        class If(_NoneOk, _If):
            """If whose branch may return an empty optional (None) for an optional-typed output."""

            def _run(self, cond, context=None, else_branch=None, then_branch=None, attributes=None, bindings=None):
                if np.asarray(cond).size != 1:
                    raise ValueError(f"If node {self.onnx_node.name!r}: the condition must have one element, got shape "
                                     f"{np.shape(cond)}")
                branch = self.then_branch if bool(np.asarray(cond).reshape(-1)[0]) else self.else_branch
                outs = tuple(branch.run(None, context or {}, attributes=attributes))
                types = [o.type for o in branch.onnx_graph_.output] if branch.onnx_graph_ is not None else []
                for i, o in enumerate(outs):
                    if o is None and not (i < len(types) and _is_optional(types[i])):
                        raise RuntimeError(f"If node {self.onnx_node.name!r}: output {i} of the branch is None but not "
                                           f"an optional")
                return self._check_and_fix_outputs(outs)

        class Loop(_NoneOk, _Loop):
            """Loop: scan outputs stacked on a new axis 0 (np.stack: a scalar per iteration gives (n,), not (n, 1));
            zero iterations give empty scan outputs; loop-carried values may be empty optionals."""

            def _run(self, M, cond, *args, context=None, body=None, attributes=None, bindings=None):
                body = self.body
                names_in, names_out = body.input_names, body.output_names
                n_carried = len(names_in) - 2
                n_scan = len(names_out) - 1 - n_carried
                inputs = dict(context or {})
                carried = list(args[:n_carried]) + [None] * (n_carried - len(args))
                inputs.update(zip(names_in[2:], carried))
                scans = [[] for _ in range(n_scan)]
                it = 0
                max_trip = None if M is None else int(np.asarray(M).reshape(-1)[0])
                go = True if cond is None else bool(np.asarray(cond).reshape(-1)[0])
                while go and (max_trip is None or it < max_trip):
                    inputs[names_in[0]] = np.array(it, dtype=np.int64)
                    inputs[names_in[1]] = np.array(go)
                    outs = body.run(None, inputs, attributes=attributes)
                    go = bool(np.asarray(outs[0]).reshape(-1)[0])
                    carried = list(outs[1:1 + n_carried])
                    inputs.update(zip(names_in[2:], carried))
                    for k in range(n_scan):
                        scans[k].append(outs[1 + n_carried + k])
                    it += 1
                types = [o.type for o in body.onnx_graph_.output] if body.onnx_graph_ is not None else []
                stacked = [_stack(v, _elem_dtype(types[1 + n_carried + k]) if 1 + n_carried + k < len(types) else None)
                           for k, v in enumerate(scans)]
                return self._check_and_fix_outputs(tuple(carried + stacked))

        class Scan(_OpRun):
            """Scan, every opset: 8 (batch axis 0 on states and scan inputs, optional sequence_lens, `directions` of the
            scan inputs; outputs past a sequence's length are zero) and 9+ (scan_input_axes / _directions,
            scan_output_axes / _directions, negative axes)."""

            def need_context(self) -> bool:
                return True

            def _opset(self) -> int:
                return int(self.run_params["opsets"].get("", self.run_params["opsets"].get("ai.onnx", 21)))

            def _run(self, *args, context=None, attributes=None, bindings=None, **atts):
                if self._opset() < 9:
                    return self._run_8(*args, context=context, attributes=attributes)
                m = self.num_scan_inputs
                n = len(args) - m
                states, xs = list(args[:n]), list(args[n:])
                in_axes = [a % np.ndim(x) for a, x in zip(self._list("scan_input_axes", m, 0), xs)]
                in_dirs = self._list("scan_input_directions", m, 0)
                lengths = {np.shape(x)[a] for x, a in zip(xs, in_axes)}
                if len(lengths) != 1:
                    raise ValueError(f"Scan node {self.onnx_node.name!r}: scan inputs of different lengths along their "
                                     f"axes {sorted(lengths)}")
                states, ys = self._iterate(states, [np.moveaxis(np.asarray(x), a, 0) for x, a in zip(xs, in_axes)],
                                           in_dirs, lengths.pop(), context, attributes)
                k = len(ys)
                out_dirs = self._list("scan_output_directions", k, 0)
                out_axes = self._list("scan_output_axes", k, 0)
                outs = []
                for y, d, a in zip(ys, out_dirs, out_axes):
                    y = _stack(y[::-1] if d else y)
                    outs.append(np.moveaxis(y, 0, a % y.ndim))
                return (*states, *outs)

            def _run_8(self, seq_lens, *args, context=None, attributes=None):
                m = self.num_scan_inputs
                n = len(args) - m
                states, xs = [np.asarray(s) for s in args[:n]], [np.asarray(x) for x in args[n:]]
                batch, max_len = xs[0].shape[0], xs[0].shape[1]
                dirs = self._list("directions", m, 0)
                lens = [max_len] * batch if seq_lens is None or np.size(seq_lens) == 0 else \
                    [int(v) for v in np.asarray(seq_lens).reshape(-1)]
                if len(lens) != batch or any(not 1 <= v <= max_len for v in lens):  # onnxruntime refuses 0 too
                    raise ValueError(f"Scan node {self.onnx_node.name!r}: sequence_lens {lens} must have {batch} "
                                     f"values in [1, {max_len}]")
                if batch == 0 or max_len == 0:
                    raise ValueError(f"Scan node {self.onnx_node.name!r}: empty batch or sequences {xs[0].shape}")
                finals, scans = [], []
                for b in range(batch):
                    st, ys = self._iterate([s[b] for s in states], [x[b, :lens[b]] for x in xs], dirs, lens[b],
                                           context, attributes)
                    finals.append(st)
                    scans.append(ys)
                out_states = [np.stack([f[i] for f in finals]) for i in range(n)]
                out_scans = []
                for k in range(len(scans[0]) if scans else 0):
                    per = [_stack(s[k]) for s in scans]
                    y = np.zeros((batch, max_len) + per[0].shape[1:], dtype=per[0].dtype)
                    for b, p in enumerate(per):
                        y[b, :lens[b]] = p
                    out_scans.append(y)
                return (*out_states, *out_scans)

            def _list(self, name, count, default):
                v = getattr(self, name, None)
                v = list(v) if v is not None else []
                return v + [default] * (count - len(v))

            def _iterate(self, states, xs, dirs, length, context, attributes):
                """Run the body `length` times over xs (scan axis first); returns (final states, [per-iteration scan
                outputs] per scan output)."""
                body = self.body
                names_in, names_out = body.input_names, body.output_names
                n = len(states)
                ys = [[] for _ in names_out[n:]]
                for t in range(length):
                    feeds = dict(context or {})
                    feeds.update(zip(names_in[:n], states))
                    feeds.update((nm, x[length - 1 - t] if d else x[t]) for nm, x, d in zip(names_in[n:], xs, dirs))
                    outs = body.run(None, feeds, attributes=attributes)
                    states = list(outs[:n])
                    for k, y in enumerate(outs[n:]):
                        ys[k].append(y)
                return states, ys

    return [_Fixed.Optional, _Fixed.If, _Fixed.Loop, _Fixed.Scan]
