"""RMSNormalization (domain com.onnxep): ONNX RMSNormalization-23 for models importing an older default-domain opset,
written by graph/passes/fuse_rms_norm.py (the decomposed RMSNorm / T5LayerNorm chains exporters write). The same
kernel as ops/nn/rms_normalization.py (float32 here: the pass fuses float32 chains only)."""
from onnxep.ops._base import f32_shape
from onnxep.ops.nn.rms_normalization import RMSNormalization_23


class RMSNormalizationInternal_1(RMSNormalization_23):
    domain, op_type, since = "com.onnxep", "RMSNormalization", 1
    type_constraints = {}        # no onnx schema for this domain: supports() checks the types

    @classmethod
    def supports(cls, op):
        n = op.node
        if len(n.inputs) != 2 or len(n.outputs) != 1 or int(n.attrs.get("stash_type", 1) or 1) != 1:
            return False
        return all(f32_shape(t) is not None for t in op.input_types[:2])
