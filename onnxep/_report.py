"""What `onnxep bench` shows besides its table: a progress bar while it works, and `--plot FILE.png`.

Both use optional packages (the `plot` extra: tqdm, matplotlib), so the core stays light:
- progress(items, total, desc): a tqdm bar on stderr when tqdm is installed and stderr is a terminal (a log file or a
  pipe gets the table's own lines, one per model, and no bar characters); otherwise the items unchanged.
- plot(doc, path): one horizontal bar per model from 1.0 to its time as a ratio of onnxruntime's (log scale), for
  onnxep and, when the rows have them, OpenVINO; the title names the machine, ISA, threads and versions that `--json`
  records (`doc` is that JSON document).
"""
from __future__ import annotations

import math
import sys
from typing import Iterable


def progress(items: Iterable, total: int | None = None, desc: str = "bench") -> Iterable:
    """items, wrapped in a tqdm bar on a terminal's stderr when tqdm is installed."""
    if not sys.stderr.isatty():
        return items
    try:
        from tqdm import tqdm
    except ImportError:
        return items
    return tqdm(items, total=total, desc=desc, unit="model", leave=False, file=sys.stderr)


def _geomean(xs):
    xs = [x for x in xs if x and x > 0 and math.isfinite(x)]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None


def plot(doc: dict, path: str) -> str:
    """Writes the bench rows of `doc` (the --json document) as a PNG of ratios against onnxruntime; returns path."""
    try:
        import matplotlib
    except ImportError as exc:
        raise ImportError("--plot needs matplotlib: pip install 'onnxep[plot]'") from exc
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [r for r in doc["rows"] if r.get("ratio")]
    if not rows:
        raise ValueError("--plot: no row has a ratio against onnxruntime (was onnxruntime installed?)")
    series = [("onnxep", "ratio", "#1f77b4")]
    if any(r.get("openvino_ratio") for r in rows):
        series.append(("OpenVINO", "openvino_ratio", "#ff7f0e"))
    names = [r["model"] for r in rows]
    height = 0.8 / len(series)
    fig, ax = plt.subplots(figsize=(9, 1.2 + 0.28 * len(rows) * len(series)))
    for k, (label, key, color) in enumerate(series):
        vals = [r.get(key) or float("nan") for r in rows]
        gm = _geomean(vals)
        ys = [i + (k - (len(series) - 1) / 2) * height for i in range(len(rows))]
        # each bar runs from 1.0 to the ratio: left of the line is faster than onnxruntime, right is slower
        ax.barh(ys, [v - 1.0 for v in vals], left=1.0, height=height, color=color,
                label=f"{label} / onnxruntime (geomean {gm:.2f})" if gm else label)
    ax.axvline(1.0, color="black", linewidth=0.8)
    ax.set_xscale("log")
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels(names, fontsize=7 if len(rows) > 30 else 9)
    ax.invert_yaxis()
    ax.set_xlabel("time / onnxruntime's time (median, alternating rounds; < 1 is faster)")
    threads = doc.get("threads") or doc.get("cores")
    ax.set_title(f"onnxep {doc.get('onnxep')} ({doc.get('isa')}) vs onnxruntime {doc.get('onnxruntime')}"
                 f" -- {doc.get('suite')} suite, {threads} thread(s)\n{doc.get('cpu')}, {doc.get('cores')} cores, "
                 f"python {doc.get('python')}, numpy {doc.get('numpy')}"
                 + (f", openvino {doc['openvino']}" if doc.get("openvino") else ""), fontsize=9)
    ax.grid(axis="x", which="both", alpha=0.3)
    fig_h = fig.get_size_inches()[1]
    fig.legend(loc="lower center", ncol=len(series), fontsize=8, frameon=False)
    fig.tight_layout(rect=(0, 0.35 / fig_h, 1, 1))      # room for the legend under the axis label
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
