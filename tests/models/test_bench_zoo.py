"""`python -m onnxep bench --suite zoo` (onnxep/_zoo.py) on the committed zoo fixtures (tests/models/zoo, which have
the zoo cache's layout: index.json, NAME.onnx, NAME.npz). Oracle: the onnxruntime outputs stored with each fixture
(the bench's own check), and onnxruntime run side by side for the timing columns."""
import io
import json
import shutil

import numpy as np
import pytest

from onnxep import _zoo
from onnxep.__main__ import main
from tests.models.test_zoo_fixtures import ZOO

pytest.importorskip("onnxruntime")


def test_bench_zoo_rows_are_checked_and_timed():
    out = io.StringIO()
    rows = _zoo.bench_zoo(ZOO, only=["bert_1layer", "resnet_tiny"], threads=1, warmup=1, repeat=2, round_size=1,
                          pause=0.0, use_openvino=False, out=out)
    assert [r["model"] for r in rows] == ["bert_1layer.dynamo", "bert_1layer.torchscript", "resnet_tiny.dynamo"]
    for r in rows:
        assert r["check"].startswith("ok"), r
        assert r["rel_err"] <= r["tolerance"] and np.isfinite(r["ratio"]) and r["ratio"] > 0
    text = out.getvalue()
    assert "geometric mean, onnxep / onnxruntime" in text and "resnet_tiny.dynamo" in text


def test_bench_zoo_reports_a_wrong_stored_output(tmp_path):
    """A stored onnxruntime output changed by 1% must read MISMATCH, and the command's exit status must say so."""
    entry = next(e for e in json.loads((ZOO / "index.json").read_text())["models"] if e["name"] == "resnet_tiny.dynamo")
    shutil.copy(ZOO / entry["file"], tmp_path / entry["file"])
    data = dict(np.load(ZOO / entry["data"]))
    key = next(k for k in data if k.startswith("output:"))
    data[key] = data[key] * np.float32(1.01)
    np.savez(tmp_path / entry["data"], **data)
    (tmp_path / "index.json").write_text(json.dumps({"models": [entry]}))
    rows = _zoo.bench_zoo(tmp_path, threads=1, warmup=1, repeat=1, round_size=1, pause=0.0, use_openvino=False,
                          out=io.StringIO())
    assert rows[0]["check"].startswith("MISMATCH")
    out_json = tmp_path / "rows.json"
    assert main(["bench", "--suite", "zoo", "--dir", str(tmp_path), "--threads", "1", "--repeat", "1", "--warmup",
                 "1", "--json", str(out_json)]) == 1
    doc = json.loads(out_json.read_text())
    assert doc["suite"] == "zoo" and doc["rows"][0]["model"] == "resnet_tiny.dynamo" and doc["isa"]


def test_bench_zoo_without_a_cache_says_how_to_make_one(tmp_path, capsys):
    assert main(["bench", "--suite", "zoo", "--dir", str(tmp_path)]) == 2
    assert "bench/zoo/export.py" in capsys.readouterr().err
