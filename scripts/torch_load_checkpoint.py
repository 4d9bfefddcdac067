#!/usr/bin/python3
"""Load an nnlab checkpoint into the PyTorch twin of its model and measure test accuracy.

    /usr/bin/python3 scripts/torch_load_checkpoint.py CHECKPOINT [--data-dir DIR]

Run it with Debian's python3 (python3-torch 1.13 and python3-numpy). The file is read with
the `safetensors` package when it is installed, otherwise with the small reader below. The
twin is built by scripts/torch_model.py from the model file the checkpoint carries (or, for a
checkpoint older than model files, from the zoo's file of the model it names), with nnlab's
parameter names, so `load_state_dict(strict=True)` takes the checkpoint's tensors as they are;
the test images get the normalisation stored in the checkpoint. Prints the accuracy with 2
decimals, as `nnlab eval` does. Test sets in IDX files (fashion-mnist, mnist) only.
"""
import argparse
import gzip
import json
import os
import struct
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_model import build, load_spec  # noqa: E402


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
    model_file = json.loads(meta["model_file"]) if meta.get("model_file") else load_spec(name)
    model = build(model_file, spec["channels"], spec["height"], spec["width"], spec["classes"])
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
