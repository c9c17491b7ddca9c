"""onnxruntime.OrtValue on the CPU: a tensor held as a numpy array (shared with the caller's array where onnxruntime
shares it), or another value a model makes (a sequence, a map). Same names, results and exception types as
onnxruntime 1.32's (the oracle of tests/api/)."""
from __future__ import annotations

import ctypes
import math
import operator

import numpy as np
from onnx import TensorProto, helper

from onnxep.graph.ir import _ELEM_NAMES, elem_numpy_dtype

#: onnxruntime's message for a value it cannot hold in an OrtValue (strings, objects, Python lists)
_ONLY_NUMERIC = "Creation of OrtValues is currently only supported from non-string numpy arrays"


def _cpu_only(device_type) -> None:
    if str(device_type).lower() != "cpu":
        raise RuntimeError(f"onnxep runs on the CPU: cannot place an OrtValue on device {device_type!r} (onnxruntime "
                           f"says: Can't allocate memory on the device using this package of OnnxRuntime)")


def element_dtype(element_type) -> np.dtype:
    """numpy dtype of an element type given as onnxruntime takes it: a numpy type, or an int (TensorProto type)."""
    if isinstance(element_type, (int, np.integer)) and not isinstance(element_type, bool):
        dt = elem_numpy_dtype(int(element_type))
        if dt is None:
            raise RuntimeError(f"element type {int(element_type)} has no numpy type onnxep can hold")
    else:
        try:
            dt = np.dtype(element_type)
        except TypeError as e:
            raise TypeError(f"element_type must be a numpy type or an onnx TensorProto type (int): {e}") from None
    if dt.hasobject or dt.kind in "US":
        raise RuntimeError(_ONLY_NUMERIC)
    return dt


def array_at(ptr: int, shape, dtype) -> np.ndarray:
    """A writable C-contiguous array over `ptr` (a raw host address the caller keeps alive)."""
    shape = tuple(operator.index(d) for d in shape)
    if any(d < 0 for d in shape):
        raise RuntimeError(f"shape {list(shape)}: a dimension is negative")
    nbytes = math.prod(shape) * dtype.itemsize
    if nbytes == 0:
        return np.empty(shape, dtype)
    if not ptr:
        raise RuntimeError("buffer_ptr is NULL")
    buf = (ctypes.c_char * nbytes).from_address(int(ptr))
    return np.frombuffer(buf, dtype=dtype).reshape(shape)


class OrtValue:
    """onnxruntime.OrtValue. A tensor's data lives in a numpy array: `ortvalue_from_numpy` shares the caller's (a
    C-contiguous array in native byte order; another is copied once, as onnxruntime copies what it cannot share),
    `ortvalue_from_shape_and_type` allocates one, and the outputs of `run_with_ort_values` and IOBinding hold the
    arrays the run wrote."""

    __slots__ = ("_value", "_numpy_obj", "_session", "__weakref__")

    def __init__(self, ortvalue, numpy_obj=None, session=None):
        if not isinstance(ortvalue, _CValue):
            raise ValueError("`Provided ortvalue` needs to be of type `onnxep.ortvalue._CValue` (use the "
                             "OrtValue.ortvalue_from_* factories)")
        self._value = ortvalue.value
        self._numpy_obj = numpy_obj
        self._session = session

    @classmethod
    def _wrap(cls, value) -> "OrtValue":
        return cls(_CValue(value))

    def _get_c_value(self):
        """What a run reads: the array (or the sequence / map)."""
        return self._value

    # -------------------------------------------------------------------------------------------- factories
    @classmethod
    def ortvalue_from_numpy(cls, numpy_obj, /, device_type="cpu", device_id=0, vendor_id=-1) -> "OrtValue":
        _cpu_only(device_type)
        if not isinstance(numpy_obj, np.ndarray) or numpy_obj.dtype.hasobject or numpy_obj.dtype.kind in "US":
            raise RuntimeError(_ONLY_NUMERIC)
        arr = numpy_obj
        if not arr.dtype.isnative:
            arr = arr.astype(arr.dtype.newbyteorder("="))     # (onnxruntime reads the bytes as native ones)
        elif not arr.flags.c_contiguous:
            arr = np.ascontiguousarray(arr)
        return cls(_CValue(arr), numpy_obj)

    @classmethod
    def ortvalue_from_numpy_with_onnx_type(cls, data, /, onnx_element_type: int) -> "OrtValue":
        dt = element_dtype(int(onnx_element_type))
        if not isinstance(data, np.ndarray) or data.dtype.itemsize != dt.itemsize:
            raise RuntimeError(f"ortvalue_from_numpy_with_onnx_type: the array's element size must be "
                               f"{dt.itemsize} bytes for element type {onnx_element_type}")
        return cls(_CValue(np.ascontiguousarray(data).view(dt)), data)

    @classmethod
    def ortvalue_from_shape_and_type(cls, shape, element_type, device_type="cpu", device_id=0, vendor_id=-1,
                                     memory_info=None) -> "OrtValue":
        _cpu_only(device_type)
        dt = element_dtype(element_type)
        shape = tuple(operator.index(d) for d in shape)
        if any(d < 0 for d in shape):
            raise RuntimeError(f"Tensor shape.Size() must be >= 0: shape {list(shape)} has a negative dimension")
        from onnxep.graph.model import check_size
        from onnxep.session import _memory_limit
        try:
            check_size(shape, dt, "OrtValue", _memory_limit())
        except Exception as e:
            raise RuntimeError(str(e.args[0] if e.args else e)) from None
        return cls(_CValue(np.empty(shape, dt)))

    @classmethod
    def from_dlpack(cls, data, /) -> "OrtValue":
        return cls.ortvalue_from_numpy(np.from_dlpack(data))

    # -------------------------------------------------------------------------------------------- accessors
    def _tensor(self) -> np.ndarray:
        v = self._value
        if not isinstance(v, np.ndarray):
            raise RuntimeError(f"the OrtValue holds a {type(v).__name__}, not a tensor")
        return v

    def data_ptr(self) -> int:
        return self._tensor().__array_interface__["data"][0]

    def device_name(self) -> str:
        return "cpu"

    def shape(self) -> list:
        return list(self._tensor().shape)

    def data_type(self) -> str:
        v = self._value
        if isinstance(v, np.ndarray):
            return f"tensor({_ELEM_NAMES.get(_elem_type(v.dtype), 'undefined')})"
        if isinstance(v, list):
            inner = v[0] if v else None
            if isinstance(inner, np.ndarray):
                return f"seq(tensor({_ELEM_NAMES.get(_elem_type(inner.dtype), 'undefined')}))"
            return "seq"
        return type(v).__name__

    def element_type(self) -> int:
        return _elem_type(self._tensor().dtype)

    def tensor_size_in_bytes(self) -> int:
        return int(self._tensor().nbytes)

    def has_value(self) -> bool:
        return self._value is not None

    def is_tensor(self) -> bool:
        return isinstance(self._value, np.ndarray)

    def is_sparse_tensor(self) -> bool:
        return False

    def is_tensor_sequence(self) -> bool:
        return isinstance(self._value, list)

    def numpy(self) -> np.ndarray:
        """A new array object over the OrtValue's data (no copy), as onnxruntime's."""
        v = self._value
        if isinstance(v, np.ndarray):
            return v.view()
        raise RuntimeError(f"numpy() is for OrtValues holding tensors; this one holds a {type(v).__name__}")

    def __array__(self, dtype=None, copy=None):
        arr = self.numpy()
        if copy is not None:
            arr = np.array(arr, dtype=dtype, copy=copy)
        elif dtype is not None:
            arr = np.asarray(arr, dtype=dtype)
        return arr

    def __dlpack__(self, *, stream=None):
        return self._tensor().__dlpack__()

    def __dlpack_device__(self):
        return self._tensor().__dlpack_device__()

    def update_inplace(self, data) -> None:
        """Copy `data` (an array or OrtValue with as many elements) into this OrtValue's memory: its address stays."""
        if isinstance(data, OrtValue):
            src = data._tensor()
        elif isinstance(data, np.ndarray):
            src = data
        else:
            raise TypeError("data must be a numpy.ndarray or an OrtValue.")
        dst = self._tensor()
        if src.size != dst.size:
            raise RuntimeError("The input size of numpy arrays does not match the size of the OrtValue.")
        # (onnxruntime copies the bytes whatever their type; an array of another type is converted, not
        # reinterpreted)
        np.copyto(dst.reshape(-1), src.reshape(-1), casting="unsafe")

    def __repr__(self):
        v = self._value
        if isinstance(v, np.ndarray):
            return f"OrtValue({self.data_type()}, shape={list(v.shape)}, cpu)"
        return f"OrtValue({self.data_type()})"


class _CValue:
    """What onnxruntime's C OrtValue is to its Python OrtValue: the value an OrtValue is made from."""

    __slots__ = ("value",)

    def __init__(self, value):
        self.value = value


def _elem_type(dt) -> int:
    try:
        return int(helper.np_dtype_to_tensor_dtype(np.dtype(dt).newbyteorder("=")))
    except Exception:
        return TensorProto.UNDEFINED
