"""README.md as a newcomer reads it (issue 27): its Python snippets run as written, in order, in one namespace, and it
holds exactly the two set-up commands that the project's rules ask for (the second is what .ci/run runs).

Oracle: the snippets' own printed results (the drop-in Relu prints the rectified row) and .ci/run's text.
"""
import contextlib
import io
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()


def test_readme_is_short():
    assert README.count("\n") <= 160


def test_python_snippets_run_as_written():
    blocks = re.findall(r"```python\n(.*?)```", README, re.S)
    assert len(blocks) >= 2
    ns: dict = {}
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        for code in blocks:
            exec(compile(code, "README.md", "exec"), ns)
    assert "[[0. 0. 1. 2.]]" in out.getvalue()
    assert any(p["user_api"] == "onnxep" for p in eval("threadpool_info()", ns))


def test_two_setup_commands():
    setup = README.split("## Set up on a fresh machine", 1)[1].split("\n## ", 1)[0]
    commands = re.findall(r"```bash\n(.*?)```", setup, re.S)
    assert [c.strip() for c in commands] == ['pip install ".[bench]" && onnxep bench',
                                             'pip install -e ".[test]" && python -m pytest']
    assert 'pip install -e ".[test]" && python -m pytest' in (ROOT / ".ci" / "run").read_text()
