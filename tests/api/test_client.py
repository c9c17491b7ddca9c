"""Issue 26: one onnxruntime client script (tests/api/client.py) runs unchanged on onnxruntime and on onnxep, with the
same results and the same exception types for every call. Oracle: onnxruntime 1.32 (installed) running the script."""
import logging

import pytest

import onnxep
from tests.api import client

ort = pytest.importorskip("onnxruntime")


@pytest.fixture
def restore_logging():
    level = logging.getLogger("onnxep").level
    yield
    logging.getLogger("onnxep").setLevel(level)
    ort.set_default_logger_severity(2)


def test_the_client_script_gets_the_same_records_from_both(tmp_path, restore_logging):
    (tmp_path / "ort").mkdir()
    (tmp_path / "ep").mkdir()
    want = client.main(ort, str(tmp_path / "ort"))
    got = client.main(onnxep, str(tmp_path / "ep"))
    assert [r[0] for r in got] == [r[0] for r in want]
    diff = [(w, g) for w, g in zip(want, got) if w != g]
    assert not diff, "\n".join(f"ort {w}\nep  {g}" for w, g in diff)
    # the script exercises both outcomes, and the runtime's own error types (Fail, InvalidArgument) besides builtins
    kinds = {r[2] for r in got if r[1] == "raise"}
    assert {"RuntimeError", "ValueError", "TypeError", "AttributeError", "Fail (runtime's)",
            "InvalidArgument (runtime's)"} <= kinds
    assert sum(r[1] == "ok" for r in got) > 40


@pytest.mark.parametrize("rt", [ort, onnxep], ids=["onnxruntime", "onnxep"])
def test_the_client_script_runs_on_each(rt, tmp_path, restore_logging):
    records = client.main(rt, str(tmp_path))
    by_label = {r[0]: r for r in records}
    assert by_label["preallocated Y in place"][2] == [True, True, True]
    assert by_label["preallocated Z in place"][2] == [True, True]
    assert by_label["run_async callback"][2][0] is True and by_label["run_async callback"][2][-1] is False
    assert by_label["after terminate"][1] == "ok"
