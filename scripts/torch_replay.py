#!/usr/bin/python3
"""Replay an nnlab training run in PyTorch: same initial weights, same data order, same steps.

    /usr/bin/python3 scripts/torch_replay.py --model mlp --seed 0 --epochs 5 [--nnlab build/nnlab]
    /usr/bin/python3 scripts/torch_replay.py --model-file docs/examples/small-resnet.json --steps 20 --tolerance 1e-5

nnlab draws its weights and its shuffles from Philox streams (core/philox.h), PyTorch from its
own generator, so the two frameworks never see the same run for the same --seed. This script
removes that difference: it asks nnlab for its initial weights (a 1-step run at learning rate
0 saved as a checkpoint), recomputes nnlab's per-epoch permutation here with the same
Philox4x32-10 keying and Fisher-Yates draws (core/random.cpp), draws nnlab's Dropout masks the
same way (layers/dropout.h), and trains the PyTorch twin of the model file
(scripts/torch_model.py) with the file's recipe on exactly those batches. It prints how far the
two per-step losses drift apart and, after every whole epoch, both test accuracies.

If the losses agree to float32 rounding for hundreds of steps, nnlab computes the same
training run as PyTorch, and any difference in accuracy between the two frameworks' own
seeds comes from the random streams (which weights, which order), not from the framework.
Any model file whose recipe has no learning-rate schedule; data sets in IDX files
(fashion-mnist, mnist).
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
from torch_model import build, load_spec  # noqa: E402
from torch_reference import idx_data  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHUFFLE, DROPOUT = 2, 3  # RandomPurpose::Shuffle and ::Dropout in core/philox.h
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


class NnlabDropout(torch.nn.Module):
    """nnlab's Dropout (layers/dropout.h): element i of the step's mask is kept iff draw i of the
    Philox stream (seed, Dropout, layer_id·2²⁴ + step) is ≥ ⌊p·2³²⌋, and scaled by 1/(1 − p)."""

    def __init__(self, p, seed, layer_id):
        super().__init__()
        self.p, self.seed, self.layer_id, self.step = p, seed, layer_id, 0

    def forward(self, x):
        if not self.training or self.p == 0:
            return x
        stream = (self.layer_id << 24) | (self.step & 0xFFFFFF)
        self.step += 1
        draws = philox_words(x.numel(), self.seed, DROPOUT, stream)
        keep = torch.from_numpy(draws >= np.uint64(int(np.floor(self.p * 4294967296.0)))).view(x.shape)
        scale = torch.tensor(1.0 / (1.0 - self.p), dtype=x.dtype)
        return torch.where(keep, x * scale, torch.zeros((), dtype=x.dtype))


def use_nnlab_dropout(model, seed):
    """Swaps every nn.Dropout for NnlabDropout, numbered in nnlab's order (depth first)."""
    layer_id = 0
    for parent in list(model.modules()):
        for name, child in list(parent.named_children()):
            if isinstance(child, torch.nn.Dropout):
                setattr(parent, name, NnlabDropout(child.p, seed, layer_id))
                layer_id += 1


def make_optimizer(recipe, params):
    """The recipe's optimizer with nnlab's defaults (optim/make_optimizer.h)."""
    name, lr = recipe.get("optimizer", "sgd"), recipe.get("lr", 0.01)
    if name == "sgd":
        return torch.optim.SGD(params, lr=lr, momentum=recipe.get("momentum", 0.0))
    if name == "adam":
        return torch.optim.Adam(params, lr=lr)
    return torch.optim.AdamW(params, lr=lr, weight_decay=0.01)


def run_nnlab(nnlab, args, extra):
    model = ["--model-file", args.model_file] if args.model_file else ["--model", args.model]
    cmd = [nnlab, "train"] + model + ["--seed", str(args.seed), "--threads", str(args.threads),
                                      "--log-interval", "1000000"] + extra
    done = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if done.returncode != 0:
        sys.exit(f"torch_replay: {' '.join(cmd)} failed:\n{done.stderr}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="mlp", help="a zoo model")
    ap.add_argument("--model-file", help="your own model file (instead of --model)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--steps", type=int, default=0, help="replay only the first N steps (0 = all epochs)")
    ap.add_argument("--tolerance", type=float, default=0,
                    help="exit 1 when a step's relative loss difference exceeds this (0 = only report)")
    ap.add_argument("--print-steps", action="store_true", help="print both losses of every step")
    ap.add_argument("--threads", type=int, default=1, help="for both frameworks")
    ap.add_argument("--nnlab", default=os.path.join(ROOT, "build", "nnlab"))
    ap.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    spec = load_spec(a.model_file or a.model)
    recipe = spec.get("recipe", {})
    if recipe.get("schedule", "none") != "none":
        sys.exit(f"torch_replay: the recipe's schedule {recipe['schedule']!r} is not replayed; use one without")
    limit = ["--max-steps", str(a.steps)] if a.steps else []
    with tempfile.TemporaryDirectory() as tmp:
        # The initial weights: one step at learning rate 0 changes no parameter (SGD and Adam alike).
        run_nnlab(a.nnlab, a, ["--epochs", "1", "--max-steps", "1", "--lr", "0",
                               "--checkpoint-dir", os.path.join(tmp, "init"), "--checkpoint-every", "1"])
        run_nnlab(a.nnlab, a, ["--epochs", str(a.epochs), "--metrics-every", "1",
                               "--metrics", os.path.join(tmp, "run.jsonl")] + limit)
        init, meta = read_safetensors(os.path.join(tmp, "init", "last.safetensors"))
        records = [json.loads(line) for line in open(os.path.join(tmp, "run.jsonl"))]
    nn_loss = {r["step"]: r["loss"] for r in records if r.get("type") == "step"}
    nn_acc = {r["epoch"]: 100 * r["test_accuracy"] for r in records if r.get("type") == "epoch"}

    shape = json.loads(meta["input"])
    model = build(spec, shape["channels"], shape["height"], shape["width"], shape["classes"])
    use_nnlab_dropout(model, a.seed)
    # Parameters only: the BatchNorm statistics start fresh in both (the lr-0 step moved nnlab's).
    names = dict(model.named_parameters())
    missing = model.load_state_dict({k: v for k, v in init.items() if k in names}, strict=False).missing_keys
    if any(k in names for k in missing):
        sys.exit(f"torch_replay: the checkpoint lacks parameters {missing}")
    opt = make_optimizer(recipe, model.parameters())
    (x, y), (xt, yt) = idx_data(a.data, "train"), idx_data(a.data, "test")
    n, batch, step = x.shape[0], recipe.get("batch", 64), 0
    print(f"{spec.get('name', a.model)}, seed {a.seed}: PyTorch replays nnlab's run (its weights, its order)")
    worst_all = 0.0
    for epoch in range(1, a.epochs + 1):
        order = nnlab_permutation(n, a.seed, epoch)
        xs, ys = x[order], y[order]
        worst, first_over = 0.0, None  # largest relative loss difference; first step above 1e-4
        for i in range(0, n, batch):
            if a.steps and step >= a.steps:
                break
            opt.zero_grad(set_to_none=True)
            loss = F.cross_entropy(model(xs[i:i + batch]), ys[i:i + batch])
            loss.backward()
            opt.step()
            step += 1
            rel = abs(loss.item() - nn_loss[step]) / abs(nn_loss[step])
            if a.print_steps:
                print(f"  step {step}: loss nnlab {nn_loss[step]:.9g}, PyTorch {loss.item():.9g}, relative {rel:.1e}")
            worst = max(worst, rel)
            if first_over is None and rel > 1e-4:
                first_over = step
        worst_all = max(worst_all, worst)
        drift = f"first step above 1e-4: {first_over}" if first_over else "all steps within 1e-4"
        partial = a.steps and step >= a.steps and step < epoch * ((n + batch - 1) // batch)
        model.eval()
        with torch.no_grad():
            correct = sum((model(xt[i:i + 1000]).argmax(1) == yt[i:i + 1000]).sum().item()
                          for i in range(0, xt.shape[0], 1000))
        model.train()
        print(f"  {f'steps 1-{step}' if partial else f'epoch {epoch}'}: largest relative loss difference "
              f"{worst:.1e} ({drift}); test accuracy nnlab {nn_acc[epoch]:.2f}%, PyTorch replay "
              f"{100 * correct / xt.shape[0]:.2f}%", flush=True)
        if partial:
            break
    if a.tolerance and worst_all > a.tolerance:
        sys.exit(f"torch_replay: a step's loss differs by {worst_all:.1e} (relative), more than --tolerance "
                 f"{a.tolerance:g}")


if __name__ == "__main__":
    main()
