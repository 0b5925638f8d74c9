"""A small safetensors reader for the PyTorch reference tests (Debian's
/usr/bin/python3 + python3-torch): name -> tensor, and the __metadata__ map."""
import json
import struct

import torch


def read_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + n])
    meta = header.pop("__metadata__", {})
    base = 8 + n
    dtypes = {"F32": torch.float32, "I32": torch.int32}
    out = {}
    for name, v in header.items():
        b, e = v["data_offsets"]
        t = torch.frombuffer(bytearray(data[base + b : base + e]), dtype=dtypes[v["dtype"]])
        out[name] = t.reshape(v["shape"]).clone()
    return out, meta
