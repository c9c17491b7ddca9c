#!/bin/bash
# The plugin tests (tests/ort_plugin) against the oldest onnxruntime the plugin supports (1.24.1, ABI 24), in a venv
# of its own beside this checkout's built package (issue 28: "tests run against the installed onnxruntime and against
# the oldest one supported"). Build the package first (README's test command); then:  bash tools/test_ort_oldest.sh
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
venv=${ORT_OLDEST_VENV:-/tmp/onnxep-ort-1.24}
py=${PYTHON:-python3}
if [ ! -x "$venv/bin/python" ]; then
    "$py" -m venv "$venv"
    "$venv/bin/pip" install -q "onnxruntime==1.24.1" "onnx==$("$py" -c 'import onnx; print(onnx.__version__)' 2>/dev/null \
        || echo 1.23.2)" numpy ml_dtypes threadpoolctl pytest hypothesis
fi
"$venv/bin/python" -c "import onnxruntime; assert onnxruntime.__version__ == '1.24.1', onnxruntime.__version__"
cd /tmp && PYTHONPATH="$here" "$venv/bin/python" -m pytest -q -p no:cacheprovider "$here/tests/ort_plugin"
