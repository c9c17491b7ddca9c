"""HammingWindow (opset 17): w[n] = 25/46 - 21/46 cos(2 pi n / N),
N = size (periodic) or size - 1 (symmetric); see ops/signal/_window.py."""
import numpy as np

from onnxep.ops.signal._window import CosineWindow


class HammingWindow_17(CosineWindow):
    op_type = "HammingWindow"
    coefficients = (float(np.float32(25 / 46)), float(np.float32(21 / 46)))
