"""Mutation check: plant a known bug in a copy of the tree and see which tests catch it.

    python tools/mutations.py                    # every mutation against this tree's tests
    python tools/mutations.py --tests-from REV   # the same mutations against the tests as they were at REV
    python tools/mutations.py layout_hw_swap     # only the named mutations

Each mutation is one text replacement in one file (asserted to match exactly once) of a temporary copy of the tracked
files plus the built extension modules; the named test files then run there (PYTHONPATH puts the copy first, and the
run checks that onnxep is imported from it). A mutation is caught when at least one test fails. Mutations of compiled
kernels are simulated by a wrapper in a conftest.py of the copy (rebuilding four ISA variants per mutation costs
minutes), and say so."""
from __future__ import annotations

import argparse
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# name -> (what the bug is, file, old text, new text, test files to run)
MUTATIONS = {
    "layout_hw_swap": (
        "H and W swapped in the NCHW -> NHWC transpose that starts the channel-last region",
        "onnxep/graph/passes/layout_nhwc.py", "TO_NHWC, TO_NCHW = [0, 2, 3, 1], [0, 3, 1, 2]",
        "TO_NHWC, TO_NCHW = [0, 3, 2, 1], [0, 3, 1, 2]",
        ["tests/models/test_light_models.py", "tests/contracts/test_epcontext.py::test_light_models_reload_bit_identical"]),
    "channel_shuffle_order": (
        "ChannelShuffle reads the channels in the inverse order (groups and channels per group swapped)",
        "onnxep/ops/onnxep/channel_shuffle.py", "(np.ascontiguousarray(x).reshape(-1).view(np.float32), P, G, Cg,",
        "(np.ascontiguousarray(x).reshape(-1).view(np.float32), P, Cg, G,",
        ["tests/models/test_light_models.py"]),
    "conv_unclaimed": (
        "the cpu backend stops claiming Conv (every conv goes to the reference fallback)",
        "onnxep/ops/nn/conv.py", "    def supports(cls, op):\n        a = op.node.attrs\n",
        "    def supports(cls, op):\n        return False\n",
        ["tests/ops/test_light_zoo_ops.py"]),
    "bn_fold_epsilon": (
        "BatchNormalization folding uses epsilon 1e-3 whatever the node says (every ISA variant alike)",
        "onnxep/graph/passes/fuse_conv_affine.py",
        'eps = float(bn.attrs.get("epsilon") if bn.attrs.get("epsilon") is not None else 1e-5)', "eps = 1e-3",
        ["tests/reliability/test_isa_forced.py"]),
    "threads_differ_in_later_variants": (
        "simulated kernel bug: every variant but the first gives a different last bit at many threads (wrapper in "
        "a conftest.py of the copy)",
        "tests/kernels/conftest.py", None,
        "import numpy as np\n"
        "from onnxep import _kernels\n"
        "import importlib\n"
        "for _isa in _kernels.AVAILABLE[1:]:\n"
        "    _mod = importlib.import_module(f'onnxep._kernels_{_isa}')\n"
        "    for _fn, _out in (('sgemm_batched_f32', 2), ('attention_f32', 4)):\n"
        "        def _wrap(*a, _real=getattr(_mod, _fn), _out=_out):\n"
        "            r = _real(*a)\n"
        "            if a[-1] != 1 and a[_out] is not None and len(a[_out]):\n"
        "                v = np.asarray(a[_out]).view(np.uint32)\n"
        "                v[0] ^= 1\n"
        "            return r\n"
        "        setattr(_mod, _fn, _wrap)\n",
        ["tests/kernels/test_transformer.py"]),
}


def _copy_tree(dst: str, tests_from: str | None):
    files = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    files += [os.path.relpath(p, ROOT) for p in glob.glob(os.path.join(ROOT, "onnxep", "*.so"))]
    for f in files:
        if not os.path.isfile(os.path.join(ROOT, f)):
            continue
        os.makedirs(os.path.join(dst, os.path.dirname(f)), exist_ok=True)
        shutil.copy2(os.path.join(ROOT, f), os.path.join(dst, f))
    if tests_from:
        shutil.rmtree(os.path.join(dst, "tests"))
        listed = subprocess.run(["git", "ls-tree", "-r", "--name-only", tests_from, "tests"], cwd=ROOT,
                                capture_output=True, text=True, check=True).stdout.split()
        for f in listed:
            data = subprocess.run(["git", "show", f"{tests_from}:{f}"], cwd=ROOT, capture_output=True,
                                  check=True).stdout
            os.makedirs(os.path.join(dst, os.path.dirname(f)), exist_ok=True)
            with open(os.path.join(dst, f), "wb") as fh:
                fh.write(data)


def run(name: str, tests_from: str | None) -> dict:
    what, path, old, new, tests = MUTATIONS[name]
    with tempfile.TemporaryDirectory(prefix=f"onnxep-mut-{name}-") as tmp:
        _copy_tree(tmp, tests_from)
        target = os.path.join(tmp, path)
        if old is None:
            with open(target, "w") as f:
                f.write(new)
        else:
            with open(target) as f:
                text = f.read()
            if text.count(old) != 1:
                raise SystemExit(f"{name}: the text to mutate occurs {text.count(old)} times in {path}")
            with open(target, "w") as f:
                f.write(text.replace(old, new))
        env = {**os.environ, "PYTHONPATH": tmp, "PYTHONDONTWRITEBYTECODE": "1"}
        where = subprocess.run([sys.executable, "-c", "import onnxep; print(onnxep.__file__)"], cwd=tmp, env=env,
                               capture_output=True, text=True).stdout.strip()
        if not where.startswith(tmp):
            raise SystemExit(f"onnxep imported from {where!r}, not the mutated copy")
        existing = [t for t in tests if os.path.exists(os.path.join(tmp, t.split("::")[0]))]
        proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--tb=no", "-rf",
                               *existing], cwd=tmp, env=env, capture_output=True, text=True)
        failed = sorted(set(re.findall(r"^FAILED (\S+)", proc.stdout, re.M)))
        summary = (proc.stdout.strip().splitlines() or [""])[-1]
        return {"name": name, "what": what, "failed": failed, "summary": summary, "rc": proc.returncode}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("names", nargs="*", help=f"mutations to run (default all: {', '.join(MUTATIONS)})")
    ap.add_argument("--tests-from", help="run the tests as they were at this git revision")
    args = ap.parse_args(argv)
    missed = 0
    for name in args.names or list(MUTATIONS):
        r = run(name, args.tests_from)
        caught = r["rc"] != 0 and bool(r["failed"])
        missed += not caught
        print(f"{name}: {'CAUGHT' if caught else 'MISSED'} -- {r['what']}\n  {r['summary']}", flush=True)
        for t in r["failed"]:
            print(f"    {t}")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
