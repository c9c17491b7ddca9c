"""onnx.backend.base.Backend over onnxep.InferenceSession (what onnx's backend test suite and other ONNX-backend
consumers call).

    from onnxep.onnx_backend import OnnxepBackend
    rep = OnnxepBackend.prepare(model, "CPU", **{"session.disable_cpu_ep_fallback": "1"})
    outputs = rep.run([x])

Options given to `prepare` / `run_model` / `run_node` pass through to the session:
- `sess_options=<onnxep.SessionOptions>`: used as given (copied first, so the caller's object is not changed);
- a keyword naming a SessionOptions attribute (e.g. `intra_op_num_threads=1`) sets it;
- a keyword containing a dot (e.g. `"session.disable_cpu_ep_fallback": "1"`) or the dict `session_config={...}` adds
  session config entries;
- `providers=`, `prepacked_weights_container=` go to InferenceSession.
Anything else raises TypeError, so a misspelt option is not silently ignored."""
from __future__ import annotations

import copy

import numpy as np
import onnx
from onnx.backend.base import Backend, BackendRep, Device, DeviceType, namedtupledict

from onnxep.session import InferenceSession, SessionOptions

_SESSION_KWARGS = ("providers", "provider_options", "prepacked_weights_container", "stream")


def _session_args(kwargs: dict):
    kwargs = dict(kwargs)
    so = kwargs.pop("sess_options", None)
    so = copy.deepcopy(so) if so is not None else SessionOptions()
    session_kwargs = {k: kwargs.pop(k) for k in _SESSION_KWARGS if k in kwargs}
    for key, value in dict(kwargs.pop("session_config", None) or {}).items():
        so.add_session_config_entry(str(key), str(value))
    for key in list(kwargs):
        value = kwargs.pop(key)
        if "." in key:
            so.add_session_config_entry(key, str(value))
        elif hasattr(so, key) and not key.startswith("_"):
            setattr(so, key, value)
        else:
            raise TypeError(f"OnnxepBackend: unknown option {key!r} (not a SessionOptions attribute, a session "
                            f"config key or one of {list(_SESSION_KWARGS)})")
    return so, session_kwargs


class OnnxepBackendRep(BackendRep):
    """A prepared model: `run(inputs)` with inputs a list (in the order of the model's non-initializer inputs), a
    dict name -> value, or a single array; returns a namedtuple-like of the outputs (indexable by position and name)."""

    def __init__(self, session: InferenceSession):
        self.session = session
        self.input_names = [i.name for i in session.get_inputs()]
        self.output_names = [o.name for o in session.get_outputs()]

    def run(self, inputs, **kwargs):
        if kwargs:
            raise TypeError(f"OnnxepBackendRep.run: unexpected keyword arguments {sorted(kwargs)}")
        if isinstance(inputs, dict):
            feeds = dict(inputs)
        else:
            if isinstance(inputs, np.ndarray):
                inputs = [inputs]
            inputs = list(inputs)
            if len(inputs) > len(self.input_names):
                raise ValueError(f"got {len(inputs)} inputs; the model has {len(self.input_names)} "
                                 f"({self.input_names})")
            feeds = dict(zip(self.input_names, inputs))
        outs = self.session.run(None, feeds)
        return namedtupledict("Outputs", self.output_names)(*outs)


class OnnxepBackend(Backend):
    """onnx.backend.base.Backend for onnxep (CPU only)."""

    @classmethod
    def is_compatible(cls, model, device: str = "CPU", **kwargs) -> bool:
        return cls.supports_device(device)

    @classmethod
    def supports_device(cls, device: str) -> bool:
        try:
            return Device(device).type == DeviceType.CPU
        except (AttributeError, ValueError):
            return False

    @classmethod
    def prepare(cls, model, device: str = "CPU", **kwargs) -> OnnxepBackendRep:
        if not cls.supports_device(device):
            raise RuntimeError(f"OnnxepBackend runs on the CPU only, not on {device!r}")
        so, session_kwargs = _session_args(kwargs)
        if isinstance(model, onnx.ModelProto):
            model = model.SerializeToString()
        return OnnxepBackendRep(InferenceSession(model, so, **session_kwargs))

    @classmethod
    def run_model(cls, model, inputs, device: str = "CPU", **kwargs):
        return cls.prepare(model, device, **kwargs).run(inputs)

    @classmethod
    def run_node(cls, node, inputs, device: str = "CPU", outputs_info=None, **kwargs):
        """Run one NodeProto on `inputs` (list in the order of node.input, skipping empty names; or a dict).
        `opset_version` (default: the installed onnx's latest) selects the node's opset; `outputs_info`
        ([(dtype, shape)] per output) declares the outputs' types, otherwise shape inference finds them."""
        opset = kwargs.pop("opset_version", None)
        present = [x for x in node.input if x]
        if isinstance(inputs, dict):
            values = [inputs[x] for x in present]
        else:
            values = [inputs] if isinstance(inputs, np.ndarray) else list(inputs)
            if len(values) != len(present):
                raise ValueError(f"run_node: node {node.op_type} has {len(present)} inputs {present}, got "
                                 f"{len(values)} values")
        ins = [_value_info(x, v) for x, v in zip(present, values)]
        outs = []
        for i, name in enumerate(x for x in node.output if x):
            if outputs_info is not None and i < len(outputs_info):
                dtype, shape = outputs_info[i]
                outs.append(onnx.helper.make_tensor_value_info(
                    name, onnx.helper.np_dtype_to_tensor_dtype(np.dtype(dtype)), shape))
            else:
                outs.append(onnx.helper.make_empty_tensor_value_info(name))
        graph = onnx.helper.make_graph([node], f"run_node_{node.op_type}", ins, outs)
        domain = node.domain if node.domain != "ai.onnx" else ""
        version = opset if opset is not None else onnx.defs.onnx_opset_version()
        if domain:
            imports = [onnx.helper.make_opsetid(domain, onnx.defs.get_schema(node.op_type, domain=domain).since_version),
                       onnx.helper.make_opsetid("", onnx.defs.onnx_opset_version())]
        else:
            imports = [onnx.helper.make_opsetid("", version)]
        model = onnx.helper.make_model(graph, opset_imports=imports)
        rep = cls.prepare(model, device, **kwargs)
        return rep.run(dict(zip(present, values)))


def _value_info(name, value):
    if isinstance(value, (list, tuple)):
        elem = onnx.helper.np_dtype_to_tensor_dtype(np.asarray(value[0]).dtype) if value else onnx.TensorProto.FLOAT
        return onnx.helper.make_tensor_sequence_value_info(name, elem, None)
    arr = np.asarray(value)
    if arr.dtype.kind in "OUS":
        return onnx.helper.make_tensor_value_info(name, onnx.TensorProto.STRING, arr.shape)
    return onnx.helper.make_tensor_value_info(name, onnx.helper.np_dtype_to_tensor_dtype(arr.dtype), arr.shape)


prepare = OnnxepBackend.prepare
run_model = OnnxepBackend.run_model
run_node = OnnxepBackend.run_node
supports_device = OnnxepBackend.supports_device
