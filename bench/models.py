"""Model builders of the benchmarks (onnx.helper, float32, opset 17, random weights from a fixed seed, checked with
onnx.checker). The transformer and MLP builders live in the package (onnxep/_models.py) so that
`python -m onnxep bench --suite models` works from an installed wheel; this module re-exports them and adds the
single-Conv models of bench_conv.py.

    python bench/models.py OUTDIR      write every model here as OUTDIR/<name>.onnx
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # this checkout's onnxep first

import onnx  # noqa: E402

from onnxep._models import bert_encoder, bert_feeds, mlp, mlp_feeds, suite  # noqa: E402,F401


def conv_models():
    """[(name, serialized model)] of bench_conv.SHAPES (one Conv node each, weights and bias as initializers)."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import bench_conv
    return [(name, bench_conv.conv_model(xs, ws, attrs)) for name, xs, ws, attrs in bench_conv.SHAPES]


if __name__ == "__main__":
    out = sys.argv[1] if len(sys.argv) > 1 else "."
    os.makedirs(out, exist_ok=True)
    for name, model, _ in suite():
        onnx.save(model, os.path.join(out, f"{name}.onnx"))
        print(os.path.join(out, f"{name}.onnx"))
    for name, data in conv_models():
        path = os.path.join(out, name.replace(" ", "_").replace(">", "").replace("-", "_") + ".onnx")
        with open(path, "wb") as f:
            f.write(data)
        print(path)
