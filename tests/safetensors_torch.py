"""A small safetensors reader for the PyTorch reference tests (Debian's
/usr/bin/python3 + python3-torch): name -> tensor, and the __metadata__ map;
F32, I32, BF16 and F16 tensors. read_safetensors also takes a Hugging Face
model.safetensors.index.json and reads the shards it names, checking the
index as transformers relies on it: every shard exists beside the index and
every tensor is in exactly the shard its weight_map entry names."""
import json
import os
import struct

import torch

DTYPES = {"F32": torch.float32, "I32": torch.int32, "BF16": torch.bfloat16, "F16": torch.float16}


def read_safetensors_file(path):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + n])
    meta = header.pop("__metadata__", {})
    base = 8 + n
    out = {}
    for name, v in header.items():
        b, e = v["data_offsets"]
        t = torch.frombuffer(bytearray(data[base + b : base + e]), dtype=DTYPES[v["dtype"]])
        out[name] = t.reshape(v["shape"]).clone()
    return out, meta


def read_safetensors_index(path):
    """The tensors of every shard an index names, checked against it."""
    index = json.load(open(path))
    weight_map = index["weight_map"]
    out, meta = {}, {}
    for shard in sorted(set(weight_map.values())):
        assert os.path.basename(shard) == shard, f"{path}: shard {shard!r} is not a file beside the index"
        tensors, meta = read_safetensors_file(os.path.join(os.path.dirname(os.path.abspath(path)), shard))
        for name, t in tensors.items():
            assert weight_map.get(name) == shard, f"{path}: {name} is in {shard}, weight_map says {weight_map.get(name)}"
            assert name not in out, f"{path}: {name} is in two shards"
            out[name] = t
    missing = set(weight_map) - set(out)
    assert not missing, f"{path}: weight_map names tensors no shard holds: {sorted(missing)[:5]}"
    return out, meta


def read_safetensors(path):
    if path.endswith(".index.json"):
        return read_safetensors_index(path)
    return read_safetensors_file(path)
