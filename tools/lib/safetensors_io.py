"""Minimal safetensors reader/writer on numpy (no `safetensors` package on Debian).

Format: 8-byte little-endian header length N, N bytes of JSON header, then the data; the
header is padded with spaces to a multiple of 8, as the reference writer does.

A module for the other tools and tests; run as a command it lists a file's tensors:

    safetensors_io.py FILE.safetensors      # name, dtype, shape per tensor
"""
import argparse
import json
import os
import struct
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tools/: import by folder (tools/README.md)
from lib.outputs import replaced  # whole or not at all, as pert's own outputs

_NP = {"F32": np.float32, "F16": np.float16}


def _to_bf16_bits(a):
    """float32 -> bfloat16 bit patterns, round to nearest even (as torch does)."""
    bits = np.ascontiguousarray(a, dtype=np.float32).view(np.uint32)
    rounded = bits + (0x7FFF + ((bits >> 16) & 1))
    out = (rounded >> 16).astype(np.uint16)
    nan = np.isnan(a)
    out[nan] = 0x7FC0
    return out


def save(path, tensors, dtype="F32", metadata=None):
    """Writes {name: float ndarray} as `dtype` (F32, F16 or BF16); uint8 arrays as U8 (MXFP4's parts)."""
    header, blobs, offset = {}, [], 0
    for name in sorted(tensors):
        kind = "U8" if np.asarray(tensors[name]).dtype == np.uint8 else dtype
        a = np.asarray(tensors[name], dtype=np.uint8 if kind == "U8" else np.float32)
        if kind == "U8":
            raw = np.ascontiguousarray(a).tobytes()
        elif dtype == "BF16":
            raw = _to_bf16_bits(a).tobytes()
        else:
            raw = np.ascontiguousarray(a, dtype=_NP[dtype]).tobytes()
        header[name] = {"dtype": kind, "shape": list(a.shape), "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with replaced(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for raw in blobs:
            f.write(raw)


def load(path):
    """Reads a safetensors file into {name: float32 ndarray} (U8 tensors: uint8)."""
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    base = 8 + n
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        begin, end = info["data_offsets"]
        raw = data[base + begin:base + end]
        if info["dtype"] == "U8":
            a = np.frombuffer(raw, dtype=np.uint8)
        elif info["dtype"] == "BF16":
            a = (np.frombuffer(raw, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)
        else:
            a = np.frombuffer(raw, dtype=_NP[info["dtype"]]).astype(np.float32)
        out[name] = a.reshape(info["shape"])
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("file", metavar="FILE.safetensors", help="file whose header to list")
    a = ap.parse_args()
    try:
        with open(a.file, "rb") as f:
            (n,) = struct.unpack("<Q", f.read(8))
            header = json.loads(f.read(n))
    except (OSError, ValueError, struct.error) as e:
        sys.exit(f"safetensors_io.py: {a.file}: not a readable safetensors file ({e})")
    for name, info in sorted(header.items()):
        if name != "__metadata__":
            print(f"{name}\t{info['dtype']}\t{info['shape']}")


if __name__ == "__main__":
    main()
