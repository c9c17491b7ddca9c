"""The native layer lives in onnxep/_native/*.h, not in verbatim strings (issue 25 item 6).

Oracle: the source files themselves. Every `cdef extern from *:` block of C text inside a .pxi / .pyx stays short
(the issue's "no verbatim C block of more than about 20 lines"), and every header a .pxi / .pyx names exists and is
shipped with the package data.
"""
import ast
import re
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[1] / "onnxep"
SOURCES = sorted(PKG.glob("*.pxi")) + sorted(PKG.glob("*.pyx"))
VERBATIM = re.compile(r'cdef extern from \*( nogil)?:\n[ \t]*"""\n(.*?)\n[ \t]*"""', re.S)
HEADER = re.compile(r'cdef extern from "([^"<][^"]*)"')  # project headers, not <system.h>


def test_sources_found():
    assert len(SOURCES) >= 10, SOURCES


@pytest.mark.parametrize("src", SOURCES, ids=lambda p: p.name)
def test_no_long_verbatim_c(src):
    text = src.read_text()
    for m in VERBATIM.finditer(text):
        n = m.group(2).count("\n") + 1
        line = text[: m.start()].count("\n") + 1
        assert n <= 20, f"{src.name}:{line}: {n} lines of verbatim C; move them to onnxep/_native/*.h"


@pytest.mark.parametrize("src", SOURCES, ids=lambda p: p.name)
def test_declared_headers_exist(src):
    for name in HEADER.findall(src.read_text()):
        assert (PKG / name).is_file(), f"{src.name} declares {name}, which is not in onnxep/"


def test_headers_are_package_data():
    pyproject = (PKG.parent / "pyproject.toml").read_text()
    m = re.search(r"^onnxep = (\[.*?\])$", pyproject, re.M)
    assert m, "pyproject.toml: no package-data for onnxep"
    assert "_native/*.h" in ast.literal_eval(m.group(1))
    headers = sorted((PKG / "_native").glob("*.h"))
    assert len(headers) >= 10, headers
