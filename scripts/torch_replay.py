#!/usr/bin/python3
"""Replay an nnlab training run in PyTorch: same initial weights, same data order, same steps.

    /usr/bin/python3 scripts/torch_replay.py --model mlp --seed 0 --epochs 5 [--nnlab build/nnlab]

nnlab draws its weights and its shuffles from Philox streams (core/philox.h), PyTorch from its
own generator, so the two frameworks never see the same run for the same --seed. This script
removes that difference: it asks nnlab for its initial weights (a 1-step run at learning rate
0 saved as a checkpoint), recomputes nnlab's per-epoch permutation here with the same
Philox4x32-10 keying and Fisher-Yates draws (core/random.cpp), and trains the PyTorch twin of
the model (scripts/torch_reference.py) on exactly those batches. It prints how far the two
per-step losses drift apart and both test accuracies after every epoch.

If the losses agree to float32 rounding for hundreds of steps, nnlab computes the same
training run as PyTorch, and any difference in accuracy between the two frameworks' own
seeds comes from the random streams (which weights, which order), not from the framework.
Models without BatchNorm or Dropout only (their state or masks are not replayed):
mlp, cnn, lenet5.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_load_checkpoint import read_safetensors  # noqa: E402
from torch_reference import ZOO, idx_data  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHUFFLE = 2  # RandomPurpose::Shuffle in core/philox.h
MASK = np.uint64(0xFFFFFFFF)


def philox_words(count, seed, purpose, stream):
    """Draws 0..count-1 of nnlab's stream (seed, purpose, stream): counter = (i/4 low, i/4 high,
    purpose, stream), key = the seed's two 32-bit halves, word = output[i % 4]."""
    blocks = np.arange((count + 3) // 4, dtype=np.uint64)
    c0, c1 = blocks & MASK, blocks >> np.uint64(32)
    c2, c3 = np.full_like(c0, purpose), np.full_like(c0, stream)
    k0, k1 = seed & 0xFFFFFFFF, (seed >> 32) & 0xFFFFFFFF
    for _ in range(10):
        p0, p1 = np.uint64(0xD2511F53) * c0, np.uint64(0xCD9E8D57) * c2
        c0, c1, c2, c3 = (p1 >> np.uint64(32)) ^ c1 ^ np.uint64(k0), p1 & MASK, \
            (p0 >> np.uint64(32)) ^ c3 ^ np.uint64(k1), p0 & MASK
        k0, k1 = (k0 + 0x9E3779B9) & 0xFFFFFFFF, (k1 + 0xBB67AE85) & 0xFFFFFFFF
    return np.stack([c0, c1, c2, c3], axis=1).reshape(-1)[:count]


def nnlab_permutation(n, seed, epoch):
    """random_permutation(n, {seed, Shuffle, epoch}): Fisher-Yates from the top, swap i with
    j = floor(r · (i+1) / 2^64), r the 64 bits of draws 2i and 2i+1."""
    words = [int(w) for w in philox_words(2 * n, seed, SHUFFLE, epoch)]
    p = list(range(n))
    for i in range(n - 1, 0, -1):
        j = (((words[2 * i] << 32) | words[2 * i + 1]) * (i + 1)) >> 64
        p[i], p[j] = p[j], p[i]
    return torch.tensor(p)


def run_nnlab(nnlab, args, extra):
    cmd = [nnlab, "train", "--model", args.model, "--seed", str(args.seed), "--threads", str(args.threads),
           "--log-interval", "1000000"] + extra
    done = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if done.returncode != 0:
        sys.exit(f"torch_replay: {' '.join(cmd)} failed:\n{done.stderr}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", choices=("mlp", "cnn", "lenet5"), default="mlp")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--threads", type=int, default=1, help="for both frameworks")
    ap.add_argument("--nnlab", default=os.path.join(ROOT, "build", "nnlab"))
    ap.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    with tempfile.TemporaryDirectory() as tmp:
        # The initial weights: one step at learning rate 0 changes nothing (SGD and Adam alike).
        run_nnlab(a.nnlab, a, ["--epochs", "1", "--max-steps", "1", "--lr", "0",
                               "--checkpoint-dir", os.path.join(tmp, "init"), "--checkpoint-every", "1"])
        run_nnlab(a.nnlab, a, ["--epochs", str(a.epochs), "--metrics-every", "1",
                               "--metrics", os.path.join(tmp, "run.jsonl")])
        init, _ = read_safetensors(os.path.join(tmp, "init", "last.safetensors"))
        records = [json.loads(line) for line in open(os.path.join(tmp, "run.jsonl"))]
    nn_loss = {r["step"]: r["loss"] for r in records if r.get("type") == "step"}
    nn_acc = {r["epoch"]: 100 * r["test_accuracy"] for r in records if r.get("type") == "epoch"}

    build, make_opt, _ = ZOO[a.model]
    model = build()
    names = dict(model.named_parameters())
    model.load_state_dict({k: v for k, v in init.items() if k in names}, strict=True)
    opt = make_opt(model.parameters())
    (x, y), (xt, yt) = idx_data(a.data, "train"), idx_data(a.data, "test")
    n, batch, step = x.shape[0], 64, 0
    print(f"{a.model}, seed {a.seed}: PyTorch replays nnlab's run (its weights, its order)")
    for epoch in range(1, a.epochs + 1):
        order = nnlab_permutation(n, a.seed, epoch)
        xs, ys = x[order], y[order]
        worst, first_over = 0.0, None  # largest relative loss difference; first step above 1e-4
        for i in range(0, n, batch):
            opt.zero_grad(set_to_none=True)
            loss = F.cross_entropy(model(xs[i:i + batch]), ys[i:i + batch])
            loss.backward()
            opt.step()
            step += 1
            rel = abs(loss.item() - nn_loss[step]) / abs(nn_loss[step])
            worst = max(worst, rel)
            if first_over is None and rel > 1e-4:
                first_over = step
        model.eval()
        with torch.no_grad():
            correct = sum((model(xt[i:i + 1000]).argmax(1) == yt[i:i + 1000]).sum().item()
                          for i in range(0, xt.shape[0], 1000))
        model.train()
        drift = f"first step above 1e-4: {first_over}" if first_over else "all steps within 1e-4"
        print(f"  epoch {epoch}: largest relative loss difference {worst:.1e} ({drift}); "
              f"test accuracy nnlab {nn_acc[epoch]:.2f}%, PyTorch replay {100 * correct / xt.shape[0]:.2f}%",
              flush=True)


if __name__ == "__main__":
    main()
