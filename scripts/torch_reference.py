#!/usr/bin/env python3
"""nnlab's PyTorch reference: the zoo models' twins, trained and timed by the same rules.

It must agree with the PyTorch yardstick (torch_bench.py, kept outside the repository) in
models, optimizers, data and timing: data held as tensors scaled to [0,1]; an epoch is one
seeded permutation, one gather of the shuffled data, and all ceil(n/B) steps including the
partial last one; no evaluation inside the timed epoch; the first epoch is warm-up and the
median of the others is the figure. OPENBLAS_NUM_THREADS=1 unless set (PyTorch's oneDNN uses the
cores; this is its fastest set-up on small machines). The last line printed is one JSON object.

  /usr/bin/python3 scripts/torch_reference.py --model cnn --threads 2 --epochs 4
  /usr/bin/python3 scripts/torch_reference.py --model resnet8 --cifar ~/.local/share/nnlab/datasets/cifar10
  python3 scripts/torch_reference.py --model cnn --device cuda --mode graph   # on a GPU machine

On a GPU (--device cuda) the data set is held on the device, the permutation and gather run
there, and the device is synchronised before each clock reading. --mode picks PyTorch's way
of running the step: eager (one launch per op), graph (the whole step -- forward, backward and
optimizer -- captured once as a CUDA graph and replayed; the short last batch runs eager), or
compile (torch.compile of the model, mode max-autotune-no-cudagraphs).
"""
import argparse, gzip, json, os, struct, sys, time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


def read_idx(path):
    with (gzip.open if path.endswith(".gz") else open)(path, "rb") as f:
        raw = f.read()
    _, code, ndim = struct.unpack(">HBB", raw[:4])
    if code != 0x08:
        raise SystemExit(f"{path}: IDX type code {code:#x} is not unsigned byte")
    shape = struct.unpack(">" + "I" * ndim, raw[4:4 + 4 * ndim])
    return np.frombuffer(raw, np.uint8, offset=4 + 4 * ndim).reshape(shape)


def idx_data(folder, split):
    stem = "train" if split == "train" else "t10k"
    def path(kind):
        base = os.path.join(folder, f"{stem}-{kind}")
        return base + ".gz" if os.path.exists(base + ".gz") else base
    x = read_idx(path("images-idx3-ubyte")).astype(np.float32)[:, None] / 255.0
    y = read_idx(path("labels-idx1-ubyte")).astype(np.int64)
    return torch.from_numpy(x), torch.from_numpy(y)


def cifar_data(folder, split):
    """CIFAR-10's binary batches (what `nnlab data fetch cifar10` installs): per record one
    label byte, then 3x32x32 pixel bytes; scaled to [0,1] as nnlab's loader does."""
    names = ["test_batch.bin"] if split == "test" else [f"data_batch_{i}.bin" for i in range(1, 6)]
    raw = np.concatenate([np.fromfile(os.path.join(folder, n), np.uint8).reshape(-1, 3073) for n in names])
    x = raw[:, 1:].reshape(-1, 3, 32, 32).astype(np.float32) / 255.0
    return torch.from_numpy(x), torch.from_numpy(raw[:, 0].astype(np.int64))


def zoo_twin(name):
    """The twin of a zoo model file, built by scripts/torch_model.py (same layers and names)."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import torch_model
    return lambda: torch_model.build(torch_model.load_spec(name), 3, 32, 32, 10)


def conv(i, o, k=3, p=1, bias=True, stride=1):
    return nn.Conv2d(i, o, k, stride=stride, padding=p, bias=bias)


class Mlp(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2, self.fc3 = nn.Linear(784, 256), nn.Linear(256, 128), nn.Linear(128, 10)

    def forward(self, x):
        x = F.relu(self.fc1(torch.flatten(x, 1)))
        return self.fc3(F.relu(self.fc2(x)))


class Cnn(nn.Module):
    def __init__(self, bn=False):
        super().__init__()
        self.c1, self.c2 = conv(1, 32), conv(32, 64)
        self.bn = bn
        if bn:
            self.bn1, self.bn2, self.drop = nn.BatchNorm2d(32), nn.BatchNorm2d(64), nn.Dropout(0.25)
        self.f1, self.f2 = nn.Linear(3136, 128), nn.Linear(128, 10)

    def forward(self, x):
        x = self.c1(x)
        x = F.max_pool2d(F.relu(self.bn1(x) if self.bn else x), 2)
        x = self.c2(x)
        x = F.max_pool2d(F.relu(self.bn2(x) if self.bn else x), 2)
        x = F.relu(self.f1(torch.flatten(x, 1)))
        return self.f2(self.drop(x) if self.bn else x)


class LeNet5(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1, self.c2 = conv(1, 6, 5, 2), conv(6, 16, 5, 0)
        self.f1, self.f2, self.f3 = nn.Linear(400, 120), nn.Linear(120, 84), nn.Linear(84, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.c1(x)), 2)
        x = F.max_pool2d(F.relu(self.c2(x)), 2)
        x = F.relu(self.f1(torch.flatten(x, 1)))
        return self.f3(F.relu(self.f2(x)))


class CifarCnn(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1, self.c2, self.c3, self.c4 = conv(3, 32), conv(32, 32), conv(32, 64), conv(64, 64)
        self.f1, self.f2 = nn.Linear(4096, 512), nn.Linear(512, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.c2(F.relu(self.c1(x)))), 2)
        x = F.max_pool2d(F.relu(self.c4(F.relu(self.c3(x)))), 2)
        return self.f2(F.relu(self.f1(torch.flatten(x, 1))))


# name: (builder, optimizer factory, data kind)
ZOO = {
    "mlp": (Mlp, lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.9), "idx"),
    "cnn": (Cnn, lambda p: torch.optim.Adam(p, lr=1e-3), "idx"),
    "cnn-bn": (lambda: Cnn(bn=True), lambda p: torch.optim.Adam(p, lr=1e-3), "idx"),
    "lenet5": (LeNet5, lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.9), "idx"),
    "cifar-cnn": (CifarCnn, lambda p: torch.optim.SGD(p, lr=0.01, momentum=0.9), "cifar"),
    "resnet8": (zoo_twin("resnet8"), lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.9), "cifar"),
}


class CapturedStep:
    """A training step recorded as one CUDA graph: static input buffers, the loss it leaves."""
    def __init__(self, graph, inputs, loss):
        self.graph, self.inputs, self.loss = graph, inputs, loss

    def replay(self):
        self.graph.replay()


def capture_step(step, xb, yb):
    """PyTorch's whole-network capture: a few eager steps on a side stream (they create the
    optimizer state and warm up cuDNN/cuBLAS), then one step recorded into a graph. The
    warm-up steps train on the first batch; the timed epochs come after, so they are not timed."""
    inputs = (xb.clone(), yb.clone())
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            step(*inputs)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        loss = step(*inputs)
    return CapturedStep(graph, inputs, loss)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", choices=sorted(ZOO), default="cnn")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--epochs", type=int, default=4)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    ap.add_argument("--cifar", default="", help="CIFAR-10 binary batches for the CIFAR models (default: seeded "
                                                "random data, for timing only)")
    ap.add_argument("--pace-stdin", action="store_true",
                    help="before each epoch print 'ready for epoch N' and wait for a line on stdin, as nnlab train "
                         "--pace-stdin (scripts/bench.py --interleave alternates the two epoch by epoch)")
    ap.add_argument("--device", default="cpu", help="cpu or cuda")
    ap.add_argument("--mode", choices=("eager", "graph", "compile"), default="eager",
                    help="how the step runs (graph and compile need --device cuda)")
    ap.add_argument("--flush-denormals", action="store_true",
                    help="torch.set_flush_denormal(True), as nnlab's default --denormals flush (the yardstick keeps them)")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    if a.flush_denormals and not torch.set_flush_denormal(True):
        sys.exit("torch.set_flush_denormal: this CPU cannot flush denormals")
    torch.manual_seed(a.seed)
    build, make_opt, kind = ZOO[a.model]
    if kind == "idx":
        (x, y), (xt, yt) = idx_data(a.data, "train"), idx_data(a.data, "test")
    elif a.cifar:
        (x, y), (xt, yt) = cifar_data(a.cifar, "train"), cifar_data(a.cifar, "test")
    else:
        g = torch.Generator().manual_seed(1234)
        x, y = torch.rand(50000, 3, 32, 32, generator=g), torch.randint(0, 10, (50000,), generator=g)
        xt = yt = None
    dev = torch.device(a.device)
    # Strict float32 on the GPU, as nnlab's default (PyTorch lets cuDNN use TF32 unless told),
    # and cuDNN's algorithms chosen by measurement, as nnlab's algorithm cache does.
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.benchmark = True
    if a.mode != "eager" and dev.type != "cuda":
        sys.exit(f"--mode {a.mode} needs --device cuda")
    x, y = x.to(dev), y.to(dev)
    if xt is not None:
        xt, yt = xt.to(dev), yt.to(dev)
    model = build().to(dev)
    opt = make_opt(model.parameters())
    if a.mode == "graph" and "capturable" in opt.defaults:
        # Adam's step counter must live on the device to be updated inside a graph.
        opt = type(opt)(model.parameters(), **{**opt.defaults, "capturable": True})
    forward = torch.compile(model, mode="max-autotune-no-cudagraphs") if a.mode == "compile" else model

    def step(xb, yb):
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(forward(xb), yb)
        loss.backward()
        opt.step()
        return loss.detach()

    graph = None
    if a.mode == "graph":
        graph = capture_step(step, x[:a.batch], y[:a.batch])
    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)
    gen = torch.Generator(device=dev).manual_seed(a.seed)
    n, records = x.shape[0], []
    for epoch in range(1, a.epochs + 1):
        if a.pace_stdin:
            print(f"ready for epoch {epoch}", flush=True)
            if not sys.stdin.readline():
                sys.exit(f"--pace-stdin: standard input closed before epoch {epoch}")
        model.train()
        sync()
        start = time.perf_counter()
        order = torch.randperm(n, generator=gen, device=dev)
        xs, ys = x[order], y[order]
        total, steps = torch.zeros((), device=dev), 0
        for i in range(0, n, a.batch):
            xb, yb = xs[i:i + a.batch], ys[i:i + a.batch]
            if graph is not None and xb.shape[0] == a.batch:
                graph.inputs[0].copy_(xb)
                graph.inputs[1].copy_(yb)
                graph.replay()
                total += graph.loss
            else:
                total += step(xb, yb)
            steps += 1
        sync()
        seconds = time.perf_counter() - start
        acc = None
        if xt is not None:
            model.eval()
            with torch.no_grad():
                acc = sum((model(xt[j:j + 1000]).argmax(1) == yt[j:j + 1000]).sum().item()
                          for j in range(0, xt.shape[0], 1000)) / xt.shape[0]
        records.append({"epoch": epoch, "seconds": seconds, "images_per_s": n / seconds,
                        "train_loss": total.item() / steps, "test_acc": acc})
        print(f"epoch {epoch}: {seconds:.3f} s  loss {total.item() / steps:.4f}"
              + (f"  test acc {100 * acc:.2f}%" if acc is not None else ""), flush=True)
    timed = records[1:] or records
    print(json.dumps({"framework": "pytorch " + torch.__version__, "model": a.model, "batch": a.batch,
                      "device": a.device, "mode": a.mode,
                      "device_name": torch.cuda.get_device_name() if dev.type == "cuda" else "cpu",
                      "threads": a.threads, "params": sum(p.numel() for p in model.parameters()),
                      "epoch_seconds_median": float(np.median([r["seconds"] for r in timed])),
                      "epochs": records}))


if __name__ == "__main__":
    main()
