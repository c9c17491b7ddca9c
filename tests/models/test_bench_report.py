"""`onnxep bench --json OUT --plot PNG` (onnxep/_report.py, issue 27 item 3).

Oracles: the JSON document read back (every row, machine, ISA, versions), Pillow reading the PNG back (a real image
whose height grows with the number of models), and the progress wrapper returning its items unchanged off a terminal.
"""
import json
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from onnxep import _report
from onnxep.__main__ import main

ZOO = Path(__file__).parent / "zoo"


def test_bench_writes_json_and_plot(tmp_path):
    pytest.importorskip("matplotlib", reason="the plot extra is part of onnxep[test]")
    entry = next(e for e in json.loads((ZOO / "index.json").read_text())["models"] if e["name"] == "resnet_tiny.dynamo")
    out_json, png = tmp_path / "out.json", tmp_path / "out.png"
    assert main(["bench", str(ZOO / entry["file"]), "--threads", "1", "--repeat", "2", "--warmup", "1",
                 "--json", str(out_json), "--plot", str(png)]) == 0
    doc = json.loads(out_json.read_text())
    assert doc["suite"] == "light" and doc["isa"] and doc["onnxruntime"] and doc["cpu"] and doc["threads"] == 1
    (row,) = doc["rows"]
    assert row["ratio"] > 0 and row["onnxep_ms"] > 0 and row["ort_ms"] > 0
    with Image.open(png) as im:
        assert im.format == "PNG" and im.size[0] > 500 and im.size[1] > 100


def _doc(n, openvino):
    rng = np.random.default_rng(n)
    rows = [{"model": f"m{i}", "ratio": float(rng.uniform(0.3, 1.5)),
             **({"openvino_ratio": float(rng.uniform(0.5, 2))} if openvino else {})} for i in range(n)]
    return {"suite": "zoo", "onnxep": "0.1.0", "isa": "avx512", "onnxruntime": "1.x", "cpu": "cpu", "cores": 2,
            "threads": 2, "python": "3.11", "numpy": "2", "rows": rows, **({"openvino": "2026"} if openvino else {})}


def test_plot_grows_with_models_and_series(tmp_path):
    pytest.importorskip("matplotlib", reason="the plot extra is part of onnxep[test]")
    sizes = {}
    for n, ov in ((3, False), (30, False), (30, True)):
        path = tmp_path / f"p{n}{ov}.png"
        _report.plot(_doc(n, ov), str(path))
        with Image.open(path) as im:
            sizes[n, ov] = im.size
    assert sizes[30, False][1] > sizes[3, False][1]     # one bar per model
    assert sizes[30, True][1] > sizes[30, False][1]     # and one per library beside onnxruntime


def test_plot_without_ratios_is_a_clear_error(tmp_path):
    pytest.importorskip("matplotlib", reason="the plot extra is part of onnxep[test]")
    doc = _doc(2, False)
    for r in doc["rows"]:
        r["ratio"] = None
    with pytest.raises(ValueError, match="no row has a ratio"):
        _report.plot(doc, str(tmp_path / "x.png"))


def test_progress_off_a_terminal_is_the_items():
    items = [1, 2, 3]
    assert _report.progress(items, 3) is items          # pytest captures stderr: not a terminal
