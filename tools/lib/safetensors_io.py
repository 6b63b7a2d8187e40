"""Minimal safetensors reader/writer on numpy (no `safetensors` package on Debian).

Format: 8-byte little-endian header length N, N bytes of JSON header, then the data; the
header is padded with spaces to a multiple of 8, as the reference writer does.

Read: F32, F16, BF16 (as float32), U8 (MXFP4's parts) and F8_E4M3, whose codes become their
values exactly as pert's src/kernels/fp8.hpp decodes them, unscaled: block-scaled FP8 checkpoints
(DeepSeek-V3/R1, Qwen3-*-FP8) then go through dequantize_fp8, which multiplies each matrix by its
<name>_scale_inv blocks under config.json's quantization_config and refuses what pert refuses.

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


def _e4m3_values():
    """The float32 value of each F8_E4M3 code (e4m3fn), as fp8.hpp: S.EEEE.MMM with bias 7, exponent
    0 the subnormals M * 2^-9 (and +-0), no infinities, only S.1111.111 NaN (a positive quiet NaN)."""
    code = np.arange(256, dtype=np.uint32)
    sign, exponent, mantissa = code >> 7, (code >> 3) & 15, code & 7
    normal = ((sign << 31) | ((exponent + 120) << 23) | (mantissa << 20)).astype(np.uint32).view(np.float32)
    subnormal = mantissa.astype(np.float32) * np.float32(2.0 ** -9)
    subnormal = np.where(sign == 1, -subnormal, subnormal)
    values = np.where(exponent == 0, subnormal, normal).astype(np.float32)
    values[(code & 0x7F) == 0x7F] = np.float32("nan")
    return values


E4M3 = _e4m3_values()
E4M3_MAX = np.float32(448.0)  # the largest finite magnitude (S.1111.110)


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


def read_dtypes(path):
    """{name: safetensors dtype} of a file's tensors, from its header alone."""
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
    return {name: info["dtype"] for name, info in header.items() if name != "__metadata__"}


def load(path):
    """Reads a safetensors file into {name: float32 ndarray} (U8 tensors: uint8; F8_E4M3: its codes'
    values, unscaled: see dequantize_fp8)."""
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
        elif info["dtype"] == "F8_E4M3":
            a = E4M3[np.frombuffer(raw, dtype=np.uint8)]
        elif info["dtype"] in _NP:
            a = np.frombuffer(raw, dtype=_NP[info["dtype"]]).astype(np.float32)
        else:
            raise ValueError(f"{path}: tensor '{name}': dtype {info['dtype']} is not read "
                             "(F32, F16, BF16, U8 and F8_E4M3 are)")
        out[name] = a.reshape(info["shape"])
    return out


def _fp8_block_size(config, where, first):
    """quantization_config's weight_block_size [rows, cols], where config.json says block-scaled FP8 as
    pert reads it (quant_method "fp8", fmt "e4m3", activation_scheme "dynamic"); ValueError otherwise."""
    q = config.get("quantization_config") if isinstance(config, dict) else None
    key = f"{where}: quantization_config"
    if q is None:
        raise ValueError(f"{where}: tensor '{first}' is F8_E4M3, but config.json has no quantization_config "
                         "(FP8 matrices are read under quant_method \"fp8\" with weight_block_size)")
    if not isinstance(q, dict):
        raise ValueError(f"{key} must be an object, got {json.dumps(q)}")
    if q.get("quant_method") != "fp8":
        raise ValueError(f"{key}.quant_method is {json.dumps(q.get('quant_method'))}, but tensor '{first}' is "
                         "F8_E4M3: FP8 matrices are read under quant_method \"fp8\" (block-scaled, weight_scale_inv)")
    if q.get("activation_scheme", "dynamic") != "dynamic":
        raise ValueError(f"{key}.activation_scheme is {json.dumps(q['activation_scheme'])}: \"dynamic\" only "
                         "(a static scheme's stored input scales are not read)")
    if q.get("fmt", "e4m3") != "e4m3":
        raise ValueError(f"{key}.fmt is {json.dumps(q['fmt'])}: \"e4m3\" (F8_E4M3) only")
    size = q.get("weight_block_size")
    if size is None:
        raise ValueError(f"{key} has no weight_block_size: per-tensor FP8 (weight_scale, no blocks) is not read")
    if (not isinstance(size, list) or len(size) != 2
            or not all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in size)):
        raise ValueError(f"{key}.weight_block_size must be 2 positive integers [rows, cols], got {json.dumps(size)}")
    return size


def dequantize_fp8(tensors, dtypes, config, where):
    """`tensors` (load's, of one checkpoint: {name: array}, with `dtypes` {name: dtype}) with each
    F8_E4M3 matrix times its <name>_scale_inv, one float32 product per value as pert (and
    transformers' and DeepSeek's weight_dequant) computes it, the scales left out. As pert's
    read_fp8_matrices and require_finite, ValueError naming the tensor or key for: a _scale_inv
    beside no FP8 tensor, FP8 without config.json's quantization_config as _fp8_block_size reads
    it, an FP8 tensor not a matrix, with NaN codes or without its scales, scales not F32/BF16/F16
    of shape [ceil(N/rows)][ceil(K/cols)], a scale not positive and finite or 448 times it not
    finite. `where` names the checkpoint."""
    suffix = "_scale_inv"
    fp8 = []
    for name in sorted(tensors):
        if dtypes[name] == "F8_E4M3":
            fp8.append(name)
        if name.endswith(suffix) and len(name) > len(suffix):
            scaled = name[:-len(suffix)]  # a scale beside a tensor that is not FP8 would be dropped silently
            if scaled not in tensors:
                raise ValueError(f"{where}: tensor '{name}' scales no tensor (none is named '{scaled}')")
            if dtypes[scaled] != "F8_E4M3":
                raise ValueError(f"{where}: tensor '{name}' scales tensor '{scaled}', which is {dtypes[scaled]}, "
                                 "not F8_E4M3")
    if not fp8:
        return tensors
    rows, cols = _fp8_block_size(config, where, fp8[0])
    scales = {name + suffix for name in fp8}
    out = {name: t for name, t in tensors.items() if name not in fp8 and name not in scales}
    for name in fp8:
        w = tensors[name]
        if w.ndim != 2:
            raise ValueError(f"{where}: tensor '{name}' is F8_E4M3 of shape {list(w.shape)}: "
                             "FP8 is read as matrices [rows, cols] only")
        if np.isnan(w).any():  # pert refuses non-finite weights; E4M3 has no infinities
            raise ValueError(f"{where}: tensor '{name}' has {int(np.isnan(w).sum())} non-finite values "
                             "(E4M3 NaN codes S.1111.111)")
        if name + suffix not in tensors:
            raise ValueError(f"{where}: tensor '{name}' is F8_E4M3 without its inverse scales: "
                             f"missing tensor '{name}{suffix}'")
        scale = tensors[name + suffix]
        N, K = w.shape
        shape = [-(-N // rows), -(-K // cols)]
        if list(scale.shape) != shape or dtypes[name + suffix] not in ("F32", "BF16", "F16"):
            raise ValueError(f"{where}: tensor '{name}{suffix}' is {dtypes[name + suffix]} {list(scale.shape)}, but "
                             f"{list(w.shape)} in blocks of {rows} x {cols} needs {shape} in F32, BF16 or F16")
        with np.errstate(over="ignore", invalid="ignore"):
            bad = ~((scale > 0) & np.isfinite(scale * E4M3_MAX))
        if bad.any():
            i, j = np.argwhere(bad)[0]
            raise ValueError(f"{where}: tensor '{name}{suffix}' [{i}][{j}] is {scale[i, j]}: an FP8 block's inverse "
                             "scale must be positive and finite, with 448 times it finite")
        per_value = np.repeat(np.repeat(scale, rows, axis=0), cols, axis=1)[:N, :K]
        out[name] = (w * per_value).astype(np.float32)  # float32 times float32: one rounding, as pert
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
