#!/usr/bin/python3
"""Build the PyTorch twin of an nnlab model file (docs/models.md).

    /usr/bin/python3 scripts/torch_model.py FILE.json|ZOO-NAME [--data fashion-mnist|mnist|cifar10]

prints the twin and its parameters, under the names nnlab gives them (`nnlab models
--model-file FILE` prints nnlab's list). As a module, build(spec, channels, height, width,
classes) returns the torch.nn.Sequential of a parsed model file:

  - every layer of the file becomes the torch.nn layer nnlab's layers/ implement (Linear,
    Conv2d, MaxPool2d, AvgPool2d, AdaptiveAvgPool2d(1), BatchNorm2d, Dropout, Flatten, ReLU,
    Sigmoid, Tanh), registered under the file's name for it, else its position, as
    nn.Sequential names children; "sequential" nests an nn.Sequential, "residual" is the
    Residual module below (its body's layers are its own children, its shortcut an
    nn.Sequential under "shortcut_name"), so state_dict() has nnlab's checkpoint keys;
  - in_features and in_channels are inferred from the input shape as nnlab infers them;
  - the weights get PyTorch's default initialisation, which is nnlab's rule (U(±1/√fan_in)
    for Linear and Conv2d, γ = 1 and β = 0 for BatchNorm2d) drawn from another generator: load
    an nnlab checkpoint (scripts/torch_load_checkpoint.py) for nnlab's own values.

This script only builds; it does not check a file as thoroughly as nnlab (which names the
layer and shapes of every mistake): run `nnlab models --model-file FILE` first.
"""
import argparse
import json
import os
import sys
from collections import OrderedDict

import torch
from torch import nn

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
INPUTS = {"fashion-mnist": (1, 28, 28, 10), "mnist": (1, 28, 28, 10), "cifar10": (3, 32, 32, 10),
          "synthetic-cifar10": (3, 32, 32, 10)}
ACTIVATIONS = {"relu": torch.relu, "sigmoid": torch.sigmoid, "tanh": torch.tanh}


class Residual(nn.Module):
    """y = activation(body(x) + shortcut(x)); the body's layers are children of their own,
    the shortcut (identity when absent) an nn.Sequential named `shortcut_name`."""

    def __init__(self, body, shortcut_name, shortcut, activation):
        super().__init__()
        self.body_names = [name for name, _ in body]
        for name, layer in body:
            self.add_module(name, layer)
        self.shortcut_name = shortcut_name if shortcut is not None else None
        if shortcut is not None:
            self.add_module(shortcut_name, shortcut)
        self.activation = ACTIVATIONS[activation] if activation != "none" else None

    def forward(self, x):
        h = x
        for name in self.body_names:
            h = self._modules[name](h)
        h = h + (self._modules[self.shortcut_name](x) if self.shortcut_name else x)
        return self.activation(h) if self.activation else h


def zoo_file(name):
    """The zoo's model file `name`: in the source tree, or installed beside nnlab."""
    for folder in (os.path.join(ROOT, "layers", "zoo"), os.path.join(ROOT, "share", "nnlab", "zoo"),
                   os.environ.get("NNLAB_ZOO_DIR", "")):
        path = os.path.join(folder, name + ".json")
        if folder and os.path.exists(path):
            return path
    sys.exit(f"torch_model: no zoo model file {name}.json under {ROOT}/layers/zoo (set NNLAB_ZOO_DIR)")


def load_spec(file_or_name):
    """A model file given by path, or a zoo model by name, parsed."""
    path = file_or_name if os.path.exists(file_or_name) else zoo_file(file_or_name)
    with open(path) as f:
        return json.load(f)


def out_size(size, kernel, stride, padding):
    return (size + 2 * padding - kernel) // stride + 1


def build_list(layers, shape, classes):
    """[(name, module)] for a list of layers; `shape` is one image's, updated in place."""
    out = []
    for i, layer in enumerate(layers):
        out.append((layer.get("name", str(i)), build_layer(layer, shape, classes)))
    return out


def build_layer(layer, shape, classes):
    kind = layer["type"]
    if kind == "linear":
        out = classes if layer["out_features"] == "classes" else layer["out_features"]
        module = nn.Linear(shape[0], out, bias=layer.get("bias", True))
        shape[:] = [out]
        return module
    if kind == "conv2d":
        k = layer["kernel"]
        kh, kw = (k, k) if isinstance(k, int) else k
        stride, padding = layer.get("stride", 1), layer.get("padding", 0)
        module = nn.Conv2d(shape[0], layer["out_channels"], (kh, kw), stride=stride, padding=padding,
                           bias=layer.get("bias", True))
        shape[:] = [layer["out_channels"], out_size(shape[1], kh, stride, padding),
                    out_size(shape[2], kw, stride, padding)]
        return module
    if kind in ("maxpool2d", "avgpool2d"):
        k = layer["kernel"]
        stride, padding = layer.get("stride", k), layer.get("padding", 0)
        # nnlab's average counts padded cells as zeros, as PyTorch's default count_include_pad=True
        module = (nn.MaxPool2d if kind == "maxpool2d" else nn.AvgPool2d)(k, stride=stride, padding=padding)
        shape[:] = [shape[0], out_size(shape[1], k, stride, padding), out_size(shape[2], k, stride, padding)]
        return module
    if kind == "global_avg_pool":
        shape[:] = [shape[0], 1, 1]
        return nn.AdaptiveAvgPool2d(1)
    if kind == "batchnorm2d":
        return nn.BatchNorm2d(shape[0], eps=layer.get("eps", 1e-5), momentum=layer.get("momentum", 0.1))
    if kind == "dropout":
        return nn.Dropout(layer.get("p", 0.5))
    if kind == "flatten":
        if len(shape) == 3:
            shape[:] = [shape[0] * shape[1] * shape[2]]
        return nn.Flatten()
    if kind == "relu":
        return nn.ReLU()
    if kind == "sigmoid":
        return nn.Sigmoid()
    if kind == "tanh":
        return nn.Tanh()
    if kind == "sequential":
        return nn.Sequential(OrderedDict(build_list(layer["layers"], shape, classes)))
    if kind == "residual":
        x_shape = list(shape)
        body = build_list(layer["body"], shape, classes)
        shortcut = None
        if "shortcut" in layer:
            shortcut = nn.Sequential(OrderedDict(build_list(layer["shortcut"], list(x_shape), classes)))
        return Residual(body, layer.get("shortcut_name", "shortcut"), shortcut, layer.get("activation", "none"))
    raise ValueError(f"layer type {kind!r} is not one nnlab has")


def build(spec, channels, height, width, classes):
    """The twin of a parsed model file for (channels, height, width) images and `classes`."""
    shape = [channels, height, width]
    return nn.Sequential(OrderedDict(build_list(spec["layers"], shape, classes)))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model", help="a model file, or the name of a zoo model")
    ap.add_argument("--data", choices=sorted(INPUTS), help="the data set (default: the file's recipe)")
    a = ap.parse_args()
    spec = load_spec(a.model)
    data = a.data or spec.get("recipe", {}).get("data", "fashion-mnist")
    model = build(spec, *INPUTS[data])
    print(model)
    total = 0
    for name, p in model.named_parameters():
        print(f"  {name:36s} {str(list(p.shape)):18s} {p.numel()}")
        total += p.numel()
    print(f"  {total} parameters")


if __name__ == "__main__":
    main()
