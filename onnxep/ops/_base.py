"""OpKernel: the base of every cpu op kernel -- the Kernel contract plus what the registry needs.

    class Relu_14(OpKernel):
        domain, op_type, since = "", "Relu", 14        # valid up to the next registered version of the op
        type_constraints = {"T": ("float32",)}         # checked by supports_op against the op schema
        def compute(self, ctx): ...

Attributes: every attribute of the node becomes an instance attribute under its ONNX name; the ones the node omits
get the schema default, or the class attribute of the same name when the schema has none.
"""
from __future__ import annotations

import numpy as np
from onnx import defs

from onnxep.contracts.kernel import Kernel
from onnxep.graph.schema_facts import schema_facts

_DTYPE_NAMES = {
    "tensor(float)": "float32", "tensor(double)": "float64", "tensor(float16)": "float16", "tensor(int64)": "int64",
    "tensor(int32)": "int32", "tensor(int8)": "int8", "tensor(uint8)": "uint8", "tensor(bool)": "bool",
    "tensor(int16)": "int16", "tensor(uint16)": "uint16", "tensor(uint32)": "uint32", "tensor(uint64)": "uint64",
    "tensor(string)": "string", "tensor(bfloat16)": "bfloat16",
}
#: the element types numpy holds only through ml_dtypes (as onnx's numpy_helper reads them): float8, float4, int4/uint4,
#: int2/uint2. Named as ir.type_string names them; static_dtype gives their ml_dtypes dtype.
EXOTIC = ("float8e4m3fn", "float8e4m3fnuz", "float8e5m2", "float8e5m2fnuz", "float8e8m0", "float4e2m1", "int4", "uint4",
          "int2", "uint2")
_DTYPE_NAMES.update({f"tensor({n})": n for n in EXOTIC})
_DTYPE_NAMES.update({"tensor(complex64)": "complex64", "tensor(complex128)": "complex128"})


class OpKernel(Kernel):
    domain: str = ""
    op_type: str = ""
    since: int = 1
    until: int | None = None  # exclusive; None: up to the next registered version (or the newest opset)
    #: type parameter of the schema (e.g. "T") -> allowed dtype names; parameters not listed are not checked.
    type_constraints: dict = {}

    def __init__(self, info):
        """`info` is the node's KernelInfo (name, attrs, input/output types, constant inputs)."""
        self.name = info.name
        self.info = info
        for k, v in self.schema_defaults(info.opset).items():
            setattr(self, k, v)
        for k, v in info.attrs.items():
            if v is not None:
                setattr(self, k, v)

    # --------------------------------------------------------------------- registry helpers
    @classmethod
    def schema(cls, opset=None):
        try:
            return defs.get_schema(cls.op_type, opset if opset is not None else cls.since, cls.domain)
        except Exception:
            return None

    @classmethod
    def facts(cls, opset=None):
        """What onnxep reads of the op's schema at `opset` (the op's since version when None): graph/schema_facts.py,
        without loading onnx's registry where its table answers; None when there is no such schema."""
        return schema_facts(cls.op_type, opset if opset is not None else cls.since, cls.domain)

    @classmethod
    def schema_defaults(cls, opset) -> dict:
        cache = cls.__dict__.get("_defaults_cache")
        if cache is None:
            cache = {}
            cls._defaults_cache = cache
        if opset not in cache:
            f = cls.facts(opset)
            cache[opset] = {} if f is None else f.defaults()
        return cache[opset]

    @classmethod
    def check_types(cls, op) -> bool:
        """Every input/output bound to a constrained type parameter has one of the allowed dtypes (known statically)."""
        if not cls.type_constraints:
            return True
        s = cls.facts(op.node.opset)
        if s is None:
            return False
        for is_output, formal, actual_names, actual_types in ((False, s.input_types, op.node.inputs, op.input_types),
                                                              (True, s.output_types, op.node.outputs,
                                                               op.output_types)):
            for i, name in enumerate(actual_names):
                if not name:
                    continue
                if not formal:
                    return False
                allowed = cls.type_constraints.get(formal[min(i, len(formal) - 1)])
                if allowed is None:
                    continue
                vt = actual_types[i] if i < len(actual_types) else None
                if vt is None and is_output:
                    continue  # unknown output type (shape inference gave up): the kernel's dtype follows its inputs
                if vt is None or vt.kind != "tensor":
                    return False
                if _DTYPE_NAMES.get(vt.type_str) not in allowed:
                    return False
        return True

    @classmethod
    def supports(cls, op) -> bool:
        """(optional) Further checks on attributes and shapes; return False to leave the node to another backend."""
        return True


def static_dtype(info, i=0):
    """The numpy dtype of input i as the graph declares it (KernelInfo), or None when unknown / not numpy-native
    (string, bfloat16): what a kernel reads at construction to pick its path for the node's type."""
    vts = info.input_types
    vt = vts[i] if i < len(vts) else None
    name = _DTYPE_NAMES.get(vt.type_str) if vt is not None else None
    if not name or name in ("string", "bfloat16"):
        return None
    return vt.dtype if name in EXOTIC else np.dtype(name)


def attr(op, name, default=None):
    """An attribute of an OpInfo's node, with a default."""
    v = op.node.attrs.get(name)
    return default if v is None else v


def f32_shape(vt, rank=None):
    """The shape of a float32 tensor ValueType (dims may be symbolic) of the given rank (any rank when None), else
    None: the type check of the com.onnxep ops, which have no onnx schema for check_types to read."""
    if vt is None or vt.kind != "tensor" or vt.type_str != "tensor(float)" or vt.shape is None:
        return None
    return tuple(vt.shape) if rank is None or len(vt.shape) == rank else None


def static_shape(vt):
    """The shape of a ValueType when every dim is known, else None."""
    if vt is None or vt.shape is None or any(not isinstance(d, int) for d in vt.shape):
        return None
    return tuple(vt.shape)


F32 = np.float32
