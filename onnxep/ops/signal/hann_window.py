"""HannWindow (opset 17): w[n] = 0.5 - 0.5 cos(2 pi n / N),
N = size (periodic) or size - 1 (symmetric); see ops/signal/_window.py."""
from onnxep.ops.signal._window import CosineWindow


class HannWindow_17(CosineWindow):
    op_type = "HannWindow"
    coefficients = (0.5, 0.5)
