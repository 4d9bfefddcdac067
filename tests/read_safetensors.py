#!/usr/bin/env python3
"""A small safetensors reader that needs nothing but numpy (no torch, no safetensors
package): an independent check that nnlab's checkpoints follow the format.

    python3 tests/read_safetensors.py FILE

prints one line per tensor, "name dtype [d0, d1, ...] v0 v1 v2" (its first three values,
printed with 9 significant digits, enough to give a float32 back exactly), then one line per
metadata key, "meta key length". Exits 1 with a message on a malformed file.
"""
import json
import struct
import sys

import numpy as np

DTYPES = {"F32": np.float32, "F64": np.float64, "I32": np.int32, "U8": np.uint8,
          "F16": np.float16, "I64": np.int64}


def read(path):
    with open(path, "rb") as f:
        raw = f.read()
    if len(raw) < 8:
        raise ValueError("shorter than 8 bytes")
    (n,) = struct.unpack("<Q", raw[:8])
    if 8 + n > len(raw):
        raise ValueError("header length %d beyond the file" % n)
    header = json.loads(raw[8:8 + n].decode("utf-8"))
    data = raw[8 + n:]
    meta = header.pop("__metadata__", {})
    tensors = []
    for name, e in header.items():
        begin, end = e["data_offsets"]
        dtype = np.dtype(DTYPES[e["dtype"]]).newbyteorder("<")
        count = int(np.prod(e["shape"], dtype=np.int64))
        if not 0 <= begin <= end <= len(data) or end - begin != count * dtype.itemsize:
            raise ValueError("tensor %s: bad data_offsets %s" % (name, e["data_offsets"]))
        array = np.frombuffer(data[begin:end], dtype=dtype).reshape(e["shape"])
        tensors.append((begin, name, e["dtype"], array))
    tensors.sort()
    return [(name, dt, a) for _, name, dt, a in tensors], meta


def main():
    try:
        tensors, meta = read(sys.argv[1])
    except (OSError, ValueError, KeyError, json.JSONDecodeError) as e:
        print("read_safetensors: %s: %s" % (sys.argv[1], e))
        return 1
    for name, dtype, a in tensors:
        first = " ".join("%.9g" % v for v in a.reshape(-1)[:3])
        print("%s %s [%s] %s" % (name, dtype, ", ".join(str(d) for d in a.shape), first))
    for k, v in sorted(meta.items()):
        print("meta %s %d" % (k, len(v)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
