"""BlackmanWindow (opset 17): w[n] = 0.42 - 0.5 cos(2 pi n / N) + 0.08 cos(4 pi n / N),
N = size (periodic) or size - 1 (symmetric); see ops/signal/_window.py."""
import numpy as np

from onnxep.ops.signal._window import CosineWindow


class BlackmanWindow_17(CosineWindow):
    op_type = "BlackmanWindow"
    # 0.42 as onnxruntime gets it: 0.5f - 0.08f in float32 (0.42000001669)
    coefficients = (float(np.float32(0.5) - np.float32(0.08)), 0.5, float(np.float32(0.08)))
