"""Greedy decoding loops beside onnxruntime: what a user of a decoder exported with its key / value cache runs.

    python bench/bench_decode.py                                  # the --full zoo's decoders, 2 threads
    python bench/bench_decode.py --only gpt2_past --past 1000 --steps 64 --threads 1
    python bench/bench_decode.py --model my_decoder.onnx --rounds 5
    python bench/bench_decode.py --config onnxep.compute_precision=bf16   # onnxep in bf16, onnxruntime fp32

Each step feeds the previous step's `present.*` outputs back as `past_key_values.*` (the key / value cache grows a
row a step), the argmax token as input_ids, and an attention mask one longer: every step is a new input signature,
unlike `onnxep bench`, which repeats one step at a fixed past. A round runs `--steps` steps for each library from the
same seeded random past (onnxruntime's CPU provider and onnxep, both with intra_op_num_threads = --threads, the order
alternating between rounds, a settle before each as in bench_threads.py): the first round from `--past` tokens, each
later one from `--steps` + 1 fewer (round_pasts), so that no round repeats a length an earlier one ran (a session
runs a length it saw before from its compiled plan, which a user's new prompt does not find); a round's figure is
the median step time after `--warmup` steps, and the table prints the median over rounds and onnxep / onnxruntime.
Also: whether the two libraries picked the same tokens (the logits of random-weight models are close to flat, so a
differing token is a tie broken apart by rounding, counted, not an error).

Models: `--dir` (default ~/.cache/onnxep/zoo-full, bench/zoo/export.py --full) names ending in `_past`, or `--model`
files; inputs are found by name (input_ids or a seq2seq decoder's decoder_input_ids, attention_mask and position_ids
if present, past_key_values.N.key / value, grown from the present output of the same name; any other input, such
as a seq2seq decoder's past_key_values.N.encoder.key / value, is fed the same every step), the past's shape from the stored NPZ beside the model when there is one, else the model's input shapes with
their symbolic dims at 1 (batch) and --past. A decoder whose zoo index entry gives max_positions (Whisper: 448)
starts from at most max_positions - steps - 1 tokens of past.
"""
from __future__ import annotations

import argparse
import glob
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # this checkout's onnxep first

from bench.bench_threads import alternating as _alternating  # noqa: E402
from bench.bench_threads import geomean_line as _geomean_line  # noqa: E402
from bench.bench_threads import make as _session  # noqa: E402  (a library's session, intra-op threads set)
from onnxep._bench import decode_loop as _loop  # noqa: E402  (also bench_ab.py's decode worker's)
from onnxep._bench import decode_start as _start  # noqa: E402
from onnxep._zoo import read_index  # noqa: E402


def decoders(folder, only=None) -> list:
    """The decoders with past in `folder` (names with `_past`), those of the `only` architectures when given."""
    return sorted(p for p in glob.glob(os.path.join(folder, "*_past*.onnx"))
                  if not only or os.path.basename(p).split(".")[0] in only)


def _max_positions(path) -> int:
    """The decoder's longest sequence, from the zoo index beside it (a Whisper decoder takes 448), else unbounded."""
    folder = os.path.dirname(path)
    if os.path.exists(os.path.join(folder, "index.json")):
        for e in read_index(folder).get("models", []):
            if e.get("file") == os.path.basename(path) and e.get("max_positions"):
                return int(e["max_positions"])
    return 1 << 30


def round_pasts(past, steps, rounds, limit):
    """Each round's tokens of past at its first step: `past`, then `steps` + 1 fewer a round, so that no round runs a
    length an earlier one ran (a session that saw a length before runs it from its compiled plan: a tiny decoder's
    step 0.19 ms against 0.83 on a fresh length); upwards when the past is too short to go down (at most `limit`);
    the same past every round (said in the table) when neither fits."""
    down = [past - r * (steps + 1) for r in range(rounds)]
    if down[-1] >= 1:
        return down
    up = [past + r * (steps + 1) for r in range(rounds)]
    return up if up[-1] <= limit else [past] * rounds


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dir", default=os.path.expanduser("~/.cache/onnxep/zoo-full"))
    ap.add_argument("--only", nargs="*", help="architectures (gpt2_past, smollm_135m_past)")
    ap.add_argument("--model", nargs="*", help="ONNX decoder files instead of --dir")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--past", type=int, default=500, help="tokens of past at the first step")
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--warmup", type=int, default=4, help="steps of each round left out of its median")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--pause", type=float, default=0.15)
    ap.add_argument("--config", nargs="*", default=[], metavar="KEY=VALUE",
                    help="onnxep session config entries (e.g. onnxep.compute_precision=bf16; onnxruntime stays fp32)")
    args = ap.parse_args(argv)
    paths = args.model or decoders(args.dir, args.only)
    if not paths:
        print(f"no decoder with past inputs in {args.dir}: make them with bench/zoo/export.py --full", file=sys.stderr)
        return 1
    print(f"greedy decoding, {args.steps} steps from {args.past} tokens of past ({args.steps + 1} fewer each later round: "
          f"no length twice), {args.threads} thread(s); median step time over {args.rounds} alternating rounds (each: "
          f"median after {args.warmup} steps)"
          + (f"; onnxep config {' '.join(args.config)}" if args.config else ""))
    print(f"{'model':30s} {'onnxep ms':>10s} {'ort ms':>10s} {'ep/ort':>7s}  same tokens")
    ratios = []
    for path in paths:
        sess = {lib: _session(lib, path, args.threads) for lib in ("onnxep", "onnxruntime")}
        if args.config:
            import onnxep
            so = onnxep.SessionOptions()
            so.intra_op_num_threads = args.threads
            for entry in args.config:
                so.add_session_config_entry(*entry.split("=", 1))
            sess["onnxep"] = onnxep.InferenceSession(path, so)
        toks = {}

        limit = _max_positions(path) - args.steps - 1
        past = min(args.past, limit)
        pasts = round_pasts(past, args.steps, args.rounds, limit)

        def measure(lib, r):
            times, toks[lib, r] = _loop(sess[lib], _start(sess[lib], path, pasts[r], seed=r), args.steps)
            return statistics.median(times[args.warmup:]) * 1e3

        ep, ort = _alternating(args.rounds, args.pause, measure)
        same = [sum(a == b for a, b in zip(toks["onnxep", r], toks["onnxruntime", r])) / args.steps
                for r in range(args.rounds)]
        ratios.append(ep / ort)
        print(f"{os.path.basename(path)[:-5]:30s} {ep:10.2f} {ort:10.2f} {ep / ort:7.2f}  {min(same):.0%}"
              + (f"  (rounds from {', '.join(map(str, pasts))} tokens of past"
                 + (": each round the same lengths" if len(set(pasts)) < len(pasts) else "")
                 + f"; the decoder's {limit + args.steps + 1} positions)" if pasts[0] != args.past or
                 len(set(pasts)) < len(pasts) or pasts[-1] > pasts[0] else ""))
    print(_geomean_line(ratios, "model(s)"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
