"""int8 bench (issue 29): onnxruntime.quantization.quantize_dynamic of zoo encoders, onnxep vs onnxruntime side by
side (alternating rounds, medians), plus outputs vs onnxruntime's (cosine, max rel err).

    python bench/bench_int8.py bert.dynamo minilm_sentence.dynamo --threads 2 --repeat 20
    python bench/bench_int8.py --static resnet.dynamo mobilenet_v2.dynamo bert.dynamo minilm_sentence.dynamo \
        --threads 2 --repeat 20
    python bench/bench_int8.py bert_base.dynamo minilm_l6.dynamo --dir ~/.cache/onnxep/zoo-full --out /tmp/int8full
    python bench/bench_int8.py --static resnet50.dynamo mobilenet_v2_100.dynamo --dir ~/.cache/onnxep/zoo-full \
        --out /tmp/int8full

--static: quantize_static in QDQ format (QuantFormat.QDQ, per-channel weights, onnxruntime's default types), calibrated
by a CalibrationDataReader over 16 random inputs of the zoo input's shape (seeded; standard normal floats, integer
inputs such as token ids and masks uniform over the zoo input's own range). Quantized files are written once
to --out (default /tmp/onnxep_int8)."""
import argparse
import logging
import os

import numpy as np
import onnxruntime as ort

import onnxep
from onnxep._bench import _alternate

ZOO = os.path.expanduser("~/.cache/onnxep/zoo")


def quantized(name, out):
    from onnxruntime.quantization import quantize_dynamic
    os.makedirs(out, exist_ok=True)
    dst = os.path.join(out, f"{name}.int8.onnx")
    if not os.path.exists(dst):
        logging.getLogger().setLevel(logging.ERROR)
        quantize_dynamic(os.path.join(ZOO, f"{name}.onnx"), dst)
    return dst


def quantized_static(name, out, n_calib=16):
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, quantize_static
    os.makedirs(out, exist_ok=True)
    dst = os.path.join(out, f"{name}.qdq.onnx")
    if os.path.exists(dst):
        return dst
    src = os.path.join(ZOO, f"{name}.onnx")
    data = np.load(os.path.join(ZOO, f"{name}.npz"))
    names = [i.name for i in ort.InferenceSession(src, providers=["CPUExecutionProvider"]).get_inputs()]
    given = {n: data[n] if n in data else data[f"input:{n}"] for n in names}
    rng = np.random.default_rng(0)

    def sample(v):
        if v.dtype.kind == "f":
            return rng.standard_normal(v.shape).astype(v.dtype)
        if v.dtype.kind == "b":
            return v.copy()
        # token ids / masks: random integers over the zoo input's own range (ids stay inside the vocabulary)
        return rng.integers(int(v.min()), int(v.max()) + 1, v.shape).astype(v.dtype)

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.left = n_calib

        def get_next(self):
            if self.left == 0:
                return None
            self.left -= 1
            return {n: sample(v) for n, v in given.items()}

    logging.getLogger().setLevel(logging.ERROR)
    quantize_static(src, dst, Reader(), quant_format=QuantFormat.QDQ, per_channel=True)
    return dst


def feeds(name, sess):
    data = np.load(os.path.join(ZOO, f"{name}.npz"))
    names = [i.name for i in sess.get_inputs()]
    return {n: data[n] if n in data else data[f"input:{n}"] for n in names}


def _set_zoo(folder):
    global ZOO
    ZOO = os.path.expanduser(folder)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("models", nargs="+")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--repeat", type=int, default=20)
    p.add_argument("--out", default="/tmp/onnxep_int8")
    p.add_argument("--static", action="store_true", help="quantize_static, QDQ format (else quantize_dynamic)")
    p.add_argument("--dir", default=ZOO, help="the zoo folder (~/.cache/onnxep/zoo-full: the published sizes)")
    a = p.parse_args()
    _set_zoo(a.dir)
    for name in a.models:
        path = quantized_static(name, a.out) if a.static else quantized(name, a.out)
        so = ort.SessionOptions()
        so.intra_op_num_threads = a.threads
        so.inter_op_num_threads = 1
        rs = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
        eo = onnxep.SessionOptions() if hasattr(onnxep, "SessionOptions") else ort.SessionOptions()
        eo.intra_op_num_threads = a.threads
        es = onnxep.InferenceSession(path, eo)
        f = feeds(name, rs)
        want = rs.run(None, f)
        got = es.run(None, f)
        # alternating rounds after a settle (onnxep/_bench.py _alternate): a call right after the other library's
        # leaves it a core short while that library's workers still spin
        me, mr = _alternate([lambda: es.run(None, f), lambda: rs.run(None, f)], 2, a.repeat, 5, 0.1)
        cos = min(float(np.dot(g.ravel().astype(np.float64), w.ravel().astype(np.float64))
                        / (np.linalg.norm(g.astype(np.float64)) * np.linalg.norm(w.astype(np.float64)) or 1.0))
                  for g, w in zip(got, want) if g.dtype.kind == "f")
        rel = max(float(np.abs(g.astype(np.float64) - w).max() / (np.abs(w).max() or 1.0))
                  for g, w in zip(got, want) if g.dtype.kind == "f")
        print(f"{name:28s} t={a.threads} onnxep {me * 1e3:8.2f} ms  ort {mr * 1e3:8.2f} ms  ratio {me / mr:6.2f}x  "
              f"cos {cos:.6f}  max rel err {rel:.2e}", flush=True)


if __name__ == "__main__":
    main()
