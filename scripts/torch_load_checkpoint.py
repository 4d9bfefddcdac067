#!/usr/bin/python3
"""Load an nnlab checkpoint into the PyTorch twin of its model and measure test accuracy.

    /usr/bin/python3 scripts/torch_load_checkpoint.py CHECKPOINT [--data-dir DIR]

Run it with Debian's python3 (python3-torch 1.13 and python3-numpy). The file is read with
the `safetensors` package when it is installed, otherwise with the small reader below. The
twins use the parameter names of layers/zoo.cpp, so `load_state_dict(strict=True)` takes the
checkpoint's tensors as they are; the test images get the normalisation stored in the
checkpoint. Prints the accuracy with 2 decimals, as `nnlab eval` does.
"""
import argparse
import gzip
import json
import os
import struct
import sys
from collections import OrderedDict

import numpy as np
import torch
from torch import nn


def read_safetensors(path):
    """-> ({name: tensor}, metadata). Uses the safetensors package when present."""
    try:
        from safetensors.torch import load_file
        from safetensors import safe_open
        with safe_open(path, framework="pt") as f:
            meta = f.metadata() or {}
        return load_file(path), meta
    except ImportError:
        pass
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    meta = header.pop("__metadata__", {})
    dtypes = {"F32": np.float32, "F64": np.float64, "I32": np.int32, "U8": np.uint8}
    data = raw[8 + n:]
    tensors = {}
    for name, e in header.items():
        begin, end = e["data_offsets"]
        a = np.frombuffer(data[begin:end], dtype=np.dtype(dtypes[e["dtype"]]).newbyteorder("<"))
        tensors[name] = torch.from_numpy(a.reshape(e["shape"]).copy())
    return tensors, meta


def mlp(c, h, w, k):
    return nn.Sequential(OrderedDict(flatten=nn.Flatten(), fc1=nn.Linear(c * h * w, 256), relu1=nn.ReLU(),
                              fc2=nn.Linear(256, 128), relu2=nn.ReLU(), fc3=nn.Linear(128, k)))


def cnn(c, h, w, k, batchnorm=False):
    layers = [("c1", nn.Conv2d(c, 32, 3, 1, 1))]
    layers += [("bn1", nn.BatchNorm2d(32))] if batchnorm else []
    layers += [("relu1", nn.ReLU()), ("pool1", nn.MaxPool2d(2)), ("c2", nn.Conv2d(32, 64, 3, 1, 1))]
    layers += [("bn2", nn.BatchNorm2d(64))] if batchnorm else []
    layers += [("relu2", nn.ReLU()), ("pool2", nn.MaxPool2d(2)), ("flatten", nn.Flatten()),
               ("f1", nn.Linear(64 * (h // 4) * (w // 4), 128)), ("relu3", nn.ReLU())]
    layers += [("drop", nn.Dropout(0.25))] if batchnorm else []
    layers += [("f2", nn.Linear(128, k))]
    return nn.Sequential(OrderedDict(layers))


def lenet5(c, h, w, k):
    h2, w2 = (h // 2 - 4) // 2, (w // 2 - 4) // 2
    return nn.Sequential(OrderedDict(
        c1=nn.Conv2d(c, 6, 5, 1, 2), relu1=nn.ReLU(), pool1=nn.MaxPool2d(2), c2=nn.Conv2d(6, 16, 5),
        relu2=nn.ReLU(), pool2=nn.MaxPool2d(2), flatten=nn.Flatten(), f1=nn.Linear(16 * h2 * w2, 120),
        relu3=nn.ReLU(), f2=nn.Linear(120, 84), relu4=nn.ReLU(), f3=nn.Linear(84, k)))


TWINS = {"mlp": mlp, "cnn": cnn, "lenet5": lenet5, "cnn-bn": lambda *a: cnn(*a, batchnorm=True)}


def read_idx(path):
    with gzip.open(path, "rb") as f:
        raw = f.read()
    ndim = raw[3]
    dims = struct.unpack(">" + "I" * ndim, raw[4:4 + 4 * ndim])
    return np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * ndim).reshape(dims)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("checkpoint")
    ap.add_argument("--data-dir", default="/usr/share/datasets/fashion-mnist")
    args = ap.parse_args()
    tensors, meta = read_safetensors(args.checkpoint)
    if meta.get("format") != "nnlab-checkpoint":
        sys.exit("%s is not an nnlab checkpoint" % args.checkpoint)
    name, spec = meta["model"], json.loads(meta["input"])
    if name not in TWINS:
        sys.exit("no PyTorch twin for model %s here; twins: %s" % (name, ", ".join(TWINS)))
    model = TWINS[name](spec["channels"], spec["height"], spec["width"], spec["classes"])
    state = {k: v for k, v in tensors.items() if not k.startswith("optimizer.")}
    for k, v in state.items():  # nnlab keeps num_batches_tracked as int32, PyTorch as int64
        if k.endswith("num_batches_tracked"):
            state[k] = v.to(torch.int64)
    model.load_state_dict(state, strict=True)
    model.eval()

    images = read_idx(os.path.join(args.data_dir, "t10k-images-idx3-ubyte.gz"))
    labels = torch.from_numpy(read_idx(os.path.join(args.data_dir, "t10k-labels-idx1-ubyte.gz")).astype(np.int64))
    x = torch.from_numpy(images.astype(np.float32) / 255.0).reshape(-1, spec["channels"], spec["height"],
                                                                      spec["width"])
    norm = json.loads(meta["normalization"])
    if norm["mean"]:
        mean = torch.tensor(norm["mean"]).view(1, -1, 1, 1)
        std = torch.tensor(norm["std"]).view(1, -1, 1, 1)
        x = (x - mean) / std
    correct = 0
    with torch.no_grad():
        for i in range(0, len(x), 1000):
            correct += (model(x[i:i + 1000]).argmax(1) == labels[i:i + 1000]).sum().item()
    print("model %s, %d test images: PyTorch %s accuracy %.2f%% (%d/%d)"
          % (name, len(x), torch.__version__, 100.0 * correct / len(x), correct, len(x)))


if __name__ == "__main__":
    main()
