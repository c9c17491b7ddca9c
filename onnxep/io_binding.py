"""onnxruntime.IOBinding on the CPU: inputs and outputs bound to a session ahead of its runs.

An output bound to a preallocated buffer (an OrtValue, or a raw address with its type and shape) is the destination
of the run: the kernel that makes the output writes into it (graph/executor.py BoundKernelContext, and the compiled run
loop's outputs, backends/cpu/runloop.py), so its data pointer is unchanged and the run allocates no output. Where no
kernel writes the output (it is a view of an input, a constant, or made by a kernel that publishes its own array) the
executor copies it in once. An output bound without a buffer gets the run's array; the next run writes into that array
again when the output has the same shape and type, as onnxruntime reuses it."""
from __future__ import annotations

import numpy as np

from onnxep.ortvalue import OrtValue, _ONLY_NUMERIC, _cpu_only, array_at, element_dtype


class IOBinding:
    """onnxruntime.IOBinding: made by InferenceSession.io_binding(), run by InferenceSession.run_with_iobinding()."""

    def __init__(self, session):
        self._session = session._token           # (set_providers makes the session a new one: this binding is refused)
        self._names_in = session._binding_input_names()
        self._inputs = {}                         # name -> array
        self._outputs = {}                        # name -> OrtValue (preallocated) or None (the run allocates)
        self._results = {}                        # name -> OrtValue of the last run (reused when shape and type match)
        self._numpy_obj_references = {}

    # ------------------------------------------------------------------------------------------------ inputs
    def bind_cpu_input(self, name, arr_on_cpu):
        self._check_input_name(name)
        if not isinstance(arr_on_cpu, np.ndarray):
            raise RuntimeError("Unable to create OrtValue from the given python object")
        self._numpy_obj_references[name] = arr_on_cpu
        self._inputs[name] = arr_on_cpu

    def bind_input(self, name, device_type, device_id, element_type, shape, buffer_ptr):
        _cpu_only(device_type)
        self._check_input_name(name)
        self._inputs[name] = array_at(buffer_ptr, shape, element_dtype(element_type))

    def bind_ortvalue_input(self, name, ortvalue):
        value = ortvalue._get_c_value()
        self._check_input_name(name)
        self._inputs[name] = value

    def synchronize_inputs(self):
        """(nothing to synchronize on the CPU)"""

    def clear_binding_inputs(self):
        self._inputs.clear()
        self._numpy_obj_references.clear()

    def _check_input_name(self, name):
        if name not in self._names_in:
            raise RuntimeError(f"Failed to find NodeArg with name: {name} in the def list")

    # ------------------------------------------------------------------------------------------------ outputs
    def bind_output(self, name, device_type="cpu", device_id=0, element_type=None, shape=None, buffer_ptr=None):
        if buffer_ptr is None:
            _cpu_only(device_type)
            self._outputs[name] = None
            return
        if element_type is None or shape is None:
            raise ValueError("`element_type` and `shape` are to be provided if pre-allocated memory is provided")
        _cpu_only(device_type)
        self._outputs[name] = OrtValue._wrap(array_at(buffer_ptr, shape, element_dtype(element_type)))
        self._results.pop(name, None)

    def bind_ortvalue_output(self, name, ortvalue):
        value = ortvalue._get_c_value()
        if not isinstance(value, np.ndarray):
            raise RuntimeError(_ONLY_NUMERIC)
        self._outputs[name] = ortvalue
        self._results.pop(name, None)

    def synchronize_outputs(self):
        """(nothing to synchronize on the CPU)"""

    def clear_binding_outputs(self):
        self._outputs.clear()
        self._results.clear()

    def get_outputs(self) -> list:
        """The OrtValues of the last run's outputs, in binding order (a preallocated one is the bound OrtValue)."""
        return [self._results[n] for n in self._outputs if n in self._results]

    def get_outputs_as_ortvaluevector(self) -> list:
        return self.get_outputs()

    def copy_outputs_to_cpu(self) -> list:
        out = []
        for v in self.get_outputs():
            value = v._get_c_value()
            out.append(value.copy() if isinstance(value, np.ndarray) else value)
        return out

    # ------------------------------------------------------------------------------------------------ the run
    def _bound(self) -> dict:
        """name -> (array the output is written into, strict): strict for a preallocated buffer (another shape is an
        error, as in onnxruntime), not for the last run's array of an output bound without one (another shape: a new
        array)."""
        bound = {}
        for name, ov in self._outputs.items():
            if ov is not None:
                bound[name] = (ov._get_c_value(), True)
            else:
                last = self._results.get(name)
                arr = None if last is None else last._get_c_value()
                if isinstance(arr, np.ndarray) and arr.flags.writeable and arr.flags.c_contiguous \
                        and arr.dtype != object:
                    bound[name] = (arr, False)
        return bound

    def _store(self, names, values) -> None:
        for name, v in zip(names, values):
            ov = self._outputs.get(name)
            if ov is not None and isinstance(v, np.ndarray) and v is ov._get_c_value():
                self._results[name] = ov
            else:
                last = self._results.get(name)
                if last is not None and last._get_c_value() is v:
                    continue
                self._results[name] = OrtValue._wrap(v)
