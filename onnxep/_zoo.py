"""The zoo of real exported models (bench/zoo/export.py writes it): reading the cache, checking onnxep's outputs
against the onnxruntime outputs stored with each model, and the `python -m onnxep bench --suite zoo` table.

The cache folder (default ~/.cache/onnxep/zoo, or $ONNXEP_ZOO) holds index.json and, per model, NAME.onnx and NAME.npz
(arrays "input:<name>" and "output:<name>"). Making it needs torch and transformers (the `zoo` extra); reading it
needs numpy and onnx only.

The bench times onnxep, onnxruntime and, when the `openvino` package is importable, OpenVINO (f32 inference
precision, latency hint) on the same feeds, in alternating rounds (onnxep._bench._alternate), and reports each one's
median and the ratios to onnxruntime's."""
from __future__ import annotations

import json
import os
import sys
import warnings
from collections import Counter
from pathlib import Path

import numpy as np

DEFAULT_DIR = Path(os.environ.get("ONNXEP_ZOO", Path.home() / ".cache" / "onnxep" / "zoo"))
DISABLE_FALLBACK = "session.disable_cpu_ep_fallback"


def rel_err(got, want) -> float:
    """max |got - want| / max |want| over the finite entries of want (max |got - want| when want is all zeros); inf
    on a shape mismatch, on non-finite entries in different places, or on unequal integer / bool tensors."""
    got, want = np.asarray(got), np.asarray(want)
    if got.shape != want.shape:
        return float("inf")
    if want.size == 0:
        return 0.0
    if want.dtype.kind not in "fc":
        return 0.0 if np.array_equal(got, want) else float("inf")
    g, w = got.astype(np.float64), want.astype(np.float64)
    if not (np.isfinite(g) == np.isfinite(w)).all():
        return float("inf")
    fin = np.isfinite(w)
    diff = float(np.max(np.abs(g[fin] - w[fin]), initial=0.0))
    scale = float(np.max(np.abs(w[fin]), initial=0.0))
    return diff / scale if scale > 0 else diff


def read_index(folder: Path) -> dict:
    """The cache's index.json; FileNotFoundError naming the folder and how to make it when there is none."""
    index = Path(folder).expanduser() / "index.json"
    if not index.exists():
        raise FileNotFoundError(f"no zoo in {index.parent}: make it with bench/zoo/export.py (the `zoo` extra: "
                                f"torch and transformers), or point --dir / $ONNXEP_ZOO at one")
    return json.loads(index.read_text())


def select(meta: dict, only=None, exporter=None) -> list:
    """The index entries named by `only` (architectures or arch.exporter names; all when empty) and `exporter`."""
    return [e for e in meta["models"]
            if (not only or e["arch"] in only or e["name"] in only) and (not exporter or e["exporter"] == exporter)]


def load_case(folder: Path, entry: dict):
    """(model path, {input: array}, {output: array}) of one index entry."""
    data = np.load(Path(folder) / entry["data"])
    feeds = {k.split(":", 1)[1]: data[k] for k in data.files if k.startswith("input:")}
    want = {k.split(":", 1)[1]: data[k] for k in data.files if k.startswith("output:")}
    return Path(folder) / entry["file"], feeds, want


def reference_ops(sess) -> Counter:
    """Op type -> number of nodes the session placed on the reference backend."""
    ops = Counter()
    for plan in sess.plans:
        if plan.backend_name == "reference":
            ops.update(plan.op_types)
    n_ref = sum(1 for b in sess.node_assignment.values() if b == "reference")
    if sum(ops.values()) != n_ref:
        ops["?"] += n_ref - sum(ops.values())
    return ops


def onnxep_session(path, threads=0, fallback=False):
    import onnxep
    from onnxep._bench import SESSION_CONFIG
    so = onnxep.SessionOptions()
    if threads:
        so.intra_op_num_threads = threads
    for k, v in SESSION_CONFIG.items():       # (python -m onnxep bench --precision)
        so.add_session_config_entry(k, v)
    if not fallback:
        so.add_session_config_entry(DISABLE_FALLBACK, "1")
    return onnxep.InferenceSession(str(path), so)


def ort_session(path, threads=0):
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.log_severity_level = 3
    if threads:
        so.intra_op_num_threads = threads
    return ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])


def openvino_runner(path, threads=0, precision="f32"):
    """A callable running the model with OpenVINO's CPU plugin (`precision`: its INFERENCE_PRECISION_HINT, f32 or
    bf16; latency hint) and returning its outputs in the model's order, or None when openvino is not installed."""
    try:
        import openvino as ov
    except ImportError:
        return None
    config = {"INFERENCE_PRECISION_HINT": precision, "PERFORMANCE_HINT": "LATENCY"}
    if threads:
        config["INFERENCE_NUM_THREADS"] = threads
    compiled = ov.Core().compile_model(str(path), "CPU", config)
    request = compiled.create_infer_request()
    n_out = len(compiled.outputs)

    def run(feeds):
        res = request.infer(feeds)
        return [np.asarray(res[compiled.output(i)]) for i in range(n_out)]
    return run


def _geomean(xs) -> float:
    return float(np.exp(np.mean(np.log(xs)))) if xs else float("nan")


def bench_zoo(folder=None, only=None, exporter=None, threads=0, warmup=3, repeat=20, round_size=5, pause=0.05,
              use_openvino=True, out=sys.stdout) -> list:
    """The `--suite zoo` table: per zoo model, onnxep (fallback off), onnxruntime and OpenVINO when installed are
    created, onnxep's outputs checked against the stored onnxruntime outputs (the index's tolerance), then all are
    timed in alternating rounds; the table shows medians and ratios to onnxruntime, and the geometric means."""
    import onnxep
    import onnxruntime as ort

    from onnxep._bench import _alternate, _isa

    folder = Path(folder or DEFAULT_DIR).expanduser()
    meta = read_index(folder)
    entries = [e for e in select(meta, only, exporter) if e["status"] == "ok"]
    try:
        import openvino as ov
        ov_version = ov.__version__.split("-")[0] if use_openvino else None
    except ImportError:
        ov_version = None
    print(f"onnxep {onnxep.__version__} (ISA {_isa()}) vs onnxruntime {ort.__version__}"
          + (f" and OpenVINO {ov_version} (f32)" if ov_version else " (OpenVINO not installed)")
          + f"; {threads or 'default'} thread(s), median of {repeat} runs after {warmup} warm-up, alternating rounds "
            f"of {round_size}; {len(entries)} zoo models from {folder} (torch {meta.get('torch')}, transformers "
          f"{meta.get('transformers')})", file=out)
    hdr = f"{'model':<32}{'onnxep ms':>11}{'ort ms':>9}{'ratio':>7}"
    if ov_version:
        hdr += f"{'ov ms':>9}{'ov/ort':>8}"
    hdr += "  check"
    print(hdr, file=out)
    print("-" * len(hdr), file=out)
    rows = []
    from onnxep._report import progress

    for e in progress(entries, len(entries), "zoo"):
        path, feeds, want = load_case(folder, e)
        row = {"model": e["name"], "arch": e["arch"], "exporter": e["exporter"], "tolerance": e.get("tolerance")}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                ours = onnxep_session(path, threads)
                theirs = ort_session(path, threads)
                got = ours.run(None, feeds)
                names = [o.name for o in ours.get_outputs()]
                err = max((rel_err(g, want[n]) if n in want else float("inf") for n, g in zip(names, got)),
                          default=0.0)
                row["rel_err"] = err
                ok = err <= e.get("tolerance", 1e-4)
                row["check"] = f"{'ok' if ok else 'MISMATCH'} (rel err {err:.1e})"
                fns = [lambda: ours.run(None, feeds), lambda: theirs.run(None, feeds)]
                ov_run = None
                if ov_version:
                    try:
                        ov_run = openvino_runner(path, threads)
                        ov_run(feeds)
                    except Exception as exc:  # noqa: BLE001 -- OpenVINO's failure blanks its column only
                        ov_run = None
                        row["openvino_error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:120]}"
                if ov_run is not None:
                    fns.append(lambda: ov_run(feeds))
                ms = [1e3 * t for t in _alternate(fns, warmup, repeat, round_size, pause)]
            except Exception as exc:  # noqa: BLE001 -- one model's failure is a row, not the end of the table
                row["check"] = f"ERROR {type(exc).__name__}: {str(exc)[:120]}"
                rows.append(row)
                print(f"{e['name']:<32}{'-':>11}{'-':>9}{'-':>7}  {row['check']}", file=out, flush=True)
                continue
        row.update(onnxep_ms=ms[0], ort_ms=ms[1], ratio=ms[0] / ms[1])
        line = f"{e['name']:<32}{ms[0]:>11.2f}{ms[1]:>9.2f}{ms[0] / ms[1]:>7.2f}"
        if ov_version:
            if len(ms) > 2:
                row.update(openvino_ms=ms[2], openvino_ratio=ms[2] / ms[1])
                line += f"{ms[2]:>9.2f}{ms[2] / ms[1]:>8.2f}"
            else:
                line += f"{'fails':>9}{'-':>8}"
        print(f"{line}  {row['check']}", file=out, flush=True)
        rows.append(row)
    ratios = [r["ratio"] for r in rows if "ratio" in r]
    if ratios:
        print(f"geometric mean, onnxep / onnxruntime: {_geomean(ratios):.2f} over {len(ratios)} models "
              f"({min(ratios):.2f} to {max(ratios):.2f}, {sum(x <= 1.0 for x in ratios)} at or under 1.0)", file=out)
    ov_ratios = [r["openvino_ratio"] for r in rows if "openvino_ratio" in r]
    if ov_ratios:
        print(f"geometric mean, OpenVINO / onnxruntime: {_geomean(ov_ratios):.2f} over {len(ov_ratios)} models",
              file=out)
    return rows


def main_check(folder, entries, repeat=0, threads=0, log=sys.stderr) -> list:
    """check_model over `entries` (skipping the ones the exporter could not make), one failure a row, not an abort."""
    results = []
    for e in entries:
        if e["status"] != "ok":
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                r = check_model(folder, e, repeat, threads)
            except Exception as exc:  # noqa: BLE001
                r = dict(name=e["name"], arch=e["arch"], exporter=e["exporter"], nodes=e.get("nodes"),
                         tolerance=e.get("tolerance", 1e-4), native=False, missing={}, rel_err=None,
                         error=f"{type(exc).__name__}: {str(exc)[:300]}")
        results.append(r)
        if log is not None:
            print(f"  {r['name']:30} {verdict(r):5} {'native' if r['native'] else 'fallback'}", file=log, flush=True)
    return results


def check_model(folder: Path, entry: dict, repeat: int = 0, threads: int = 0) -> dict:
    """One zoo model: a session with the fallback off (and, when that raises NotImplemented, one with it on, to list
    the op types that went to the reference backend), its outputs against the stored onnxruntime ones, and with
    `repeat` the median run times of onnxep and onnxruntime (alternating rounds)."""
    from onnxep._bench import _alternate
    from onnxep.errors import NotImplemented as OnnxepNotImplemented
    path, feeds, want = load_case(folder, entry)
    res = dict(name=entry["name"], arch=entry["arch"], exporter=entry["exporter"], nodes=entry.get("nodes"),
               tolerance=entry.get("tolerance", 1e-4), native=False, missing={}, rel_err=None, error="")
    sess = None
    try:
        sess = onnxep_session(path, threads)
        res["native"] = True
    except OnnxepNotImplemented as e:
        res["native_error"] = str(e)[:300]
    except Exception as e:  # noqa: BLE001 -- recorded in the table
        res["error"] = f"create (fallback off): {type(e).__name__}: {str(e)[:300]}"
        return res
    if sess is None:
        try:
            sess = onnxep_session(path, threads, fallback=True)
        except Exception as e:  # noqa: BLE001
            res["error"] = f"create (fallback on): {type(e).__name__}: {str(e)[:300]}"
            return res
        res["missing"] = dict(reference_ops(sess))
    res["reference_nodes"] = sum(1 for b in sess.node_assignment.values() if b == "reference")
    names = [o.name for o in sess.get_outputs()]
    try:
        got = sess.run(None, feeds)
    except Exception as e:  # noqa: BLE001
        res["error"] = f"run: {type(e).__name__}: {str(e)[:300]}"
        return res
    errs = [rel_err(g, want[n]) if n in want else float("inf") for n, g in zip(names, got)]
    res["rel_err"] = max(errs) if errs else 0.0
    res["worst_output"] = names[int(np.argmax(errs))] if errs else None
    if repeat:
        ref = ort_session(path, threads)
        t_ort, t_ours = _alternate([lambda: ref.run(None, feeds), lambda: sess.run(None, feeds)], 3, repeat, 5, 0.05)
        res["ort_ms"], res["onnxep_ms"] = 1e3 * t_ort, 1e3 * t_ours
    return res


def verdict(r) -> str:
    if r["error"]:
        return "ERROR"
    if r["rel_err"] is None:
        return "?"
    return "ok" if r["rel_err"] <= r["tolerance"] else "WRONG"

