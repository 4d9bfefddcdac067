#!/usr/bin/env python3
"""Test accuracy of a zoo model over several seeds, per epoch: the figures that
docs/benchmarks.md compares with PyTorch's (scripts/torch_reference.py --seed S prints its
test accuracy per epoch).

  python3 scripts/accuracy.py --model mlp --epochs 5 --seeds 0-4 [-- extra nnlab train options]
"""
import argparse, json, os, statistics, subprocess, sys, tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="mlp")
    ap.add_argument("--epochs", type=int, default=5)
    ap.add_argument("--seeds", default="0-4", help="A-B or a comma list")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--nnlab", default=os.path.join(ROOT, "build", "nnlab"))
    ap.add_argument("--from-metrics", default="", help="summarise existing files PREFIX<seed>.jsonl instead")
    ap.add_argument("extra", nargs="*", help="more nnlab train options (after --)")
    a = ap.parse_args()
    if "-" in a.seeds:
        lo, hi = (int(v) for v in a.seeds.split("-"))
        seeds = list(range(lo, hi + 1))
    else:
        seeds = [int(v) for v in a.seeds.split(",")]
    acc = {}  # epoch -> [accuracy per seed]
    for seed in seeds:
        if a.from_metrics:
            path = f"{a.from_metrics}{seed}.jsonl"
        else:
            path = tempfile.mktemp(suffix=".jsonl")
            cmd = [a.nnlab, "train", "--model", a.model, "--epochs", str(a.epochs), "--seed", str(seed),
                   "--threads", str(a.threads), "--metrics", path, "--log-interval", "1000000"] + a.extra
            if subprocess.run(cmd, stdout=subprocess.DEVNULL).returncode != 0:
                sys.exit(f"failed: {' '.join(cmd)}")
        for line in open(path):
            rec = json.loads(line)
            if rec.get("type") == "epoch":
                acc.setdefault(rec["epoch"], []).append(100 * rec["test_accuracy"])
    print(f"{a.model}, seeds {seeds}")
    for epoch in sorted(acc):
        v = acc[epoch]
        print(f"  after {epoch} epoch(s): mean {statistics.mean(v):.2f}%  min {min(v):.2f}%  max {max(v):.2f}%  "
              f"per seed {', '.join(f'{x:.2f}' for x in v)}")


if __name__ == "__main__":
    main()
