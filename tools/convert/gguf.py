"""GGUF (llama.cpp's model file) writer and reader, little-endian, versions 2 and 3.

Layout: "GGUF", u32 version, u64 tensor count, u64 key/value count; the key/values (a string key,
a u32 value type, the value); the tensor infos (string name, u32 dimension count, u64 dimensions
innermost first, u32 GGML type, u64 offset from the data section); zero padding to the alignment
(general.alignment, else 32); the data section, each tensor's data starting at a multiple of the
alignment. Strings are a u64 byte count and UTF-8 bytes; an array is a u32 element type, a u64
count and the elements (an array of arrays nests). Versions 2 and 3 lay a little-endian file out
alike (3 only allowed big-endian files too, which this module never writes).

Metadata is a list of (key, kind, value) with kind a scalar name ("u8" ... "f64", "bool",
"string") or ("array", element_kind), so that a value's GGUF type is always the caller's
choice, never guessed from a Python number.

As a command it lists a file:

    gguf.py FILE.gguf     # version, metadata (arrays cut short), tensors
"""
import argparse
import mmap
import os
import struct
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tools/: import by folder (tools/README.md)
from convert import ggml_quants
from lib.outputs import replaced  # whole or not at all, as pert's own outputs

MAGIC = b"GGUF"
DEFAULT_ALIGNMENT = 32

# kind: (GGUF value type, struct code); string and array have no fixed code
KINDS = {
    "u8": (0, "B"), "i8": (1, "b"), "u16": (2, "H"), "i16": (3, "h"),
    "u32": (4, "I"), "i32": (5, "i"), "f32": (6, "f"), "bool": (7, "?"),
    "string": (8, None), "array": (9, None),
    "u64": (10, "Q"), "i64": (11, "q"), "f64": (12, "d"),
}
KIND_OF = {number: kind for kind, (number, _) in KINDS.items()}


def _kind_number(kind):
    return KINDS["array" if isinstance(kind, tuple) else kind][0]


_U64 = struct.Struct("<Q").pack


def _string(s):
    raw = s.encode("utf-8")
    return _U64(len(raw)) + raw


def _value(kind, value):
    """The encoded value (without its type) of one metadata entry."""
    if isinstance(kind, tuple):
        if len(kind) != 2 or kind[0] != "array":
            raise ValueError(f"bad kind {kind!r}")
        element = kind[1]
        head = struct.pack("<IQ", _kind_number(element), len(value))
        code = None if isinstance(element, tuple) else KINDS[element][1]
        if code is not None:
            return head + struct.pack(f"<{len(value)}{code}", *value)
        if element == "string":  # the vocabulary's 10^5 tokens: no call per item
            return head + b"".join([_U64(len(raw)) + raw for raw in (v.encode("utf-8") for v in value)])
        return head + b"".join(_value(element, v) for v in value)
    if kind == "string":
        return _string(value)
    if kind not in KINDS or kind == "array":
        raise ValueError(f"unknown metadata kind {kind!r}")
    return struct.pack("<" + KINDS[kind][1], value)


def _pad(n, alignment):
    return -n % alignment


def write_gguf(path, metadata, tensors, version=3, alignment=DEFAULT_ALIGNMENT):
    """Writes a GGUF file whole (through outputs.replaced).

    metadata: [(key, kind, value)]; tensors: [(name, ggml type name, shape innermost first, raw
    bytes)]. An alignment other than 32 is recorded as general.alignment (u32) unless metadata
    already has that key, which must then agree."""
    if version not in (2, 3):
        raise ValueError(f"GGUF version {version}: only 2 and 3 are written")
    if alignment <= 0 or alignment & (alignment - 1):
        raise ValueError(f"alignment {alignment}: must be a power of two, as llama.cpp requires")
    metadata = list(metadata)
    keys = [k for k, _, _ in metadata]
    if len(set(keys)) != len(keys):
        raise ValueError("duplicate metadata keys")
    given = {k: v for k, _, v in metadata}.get("general.alignment")
    if given is None and alignment != DEFAULT_ALIGNMENT:
        metadata.append(("general.alignment", "u32", alignment))
    elif given is not None and given != alignment:
        raise ValueError(f"general.alignment {given} differs from alignment {alignment}")

    head = [MAGIC, struct.pack("<IQQ", version, len(tensors), len(metadata))]
    for key, kind, value in metadata:
        try:
            head += [_string(key), struct.pack("<I", _kind_number(kind)), _value(kind, value)]
        except (struct.error, TypeError, KeyError, AttributeError) as e:
            raise ValueError(f"metadata {key}: {value!r} is not a {kind} ({e})") from None
    blobs, offset, names = [], 0, set()
    for name, type_name, shape, raw in tensors:
        if name in names:
            raise ValueError(f"duplicate tensor {name}")
        names.add(name)
        raw = memoryview(raw).cast("B")
        n = int(np.prod(shape, dtype=np.int64))
        if shape and shape[0] % ggml_quants.TYPES[type_name].block_size:
            raise ValueError(f"{name}: row of {shape[0]} is not whole {type_name} blocks")
        if len(raw) != ggml_quants.nbytes(type_name, n):
            raise ValueError(f"{name}: {len(raw)} bytes for {n} {type_name} values")
        head += [_string(name), struct.pack(f"<I{len(shape)}Q", len(shape), *shape),
                 struct.pack("<IQ", ggml_quants.TYPES[type_name].number, offset)]
        blobs.append(raw)
        offset += len(raw) + _pad(len(raw), alignment)
    head = b"".join(head)
    with replaced(path, "wb") as f:
        f.write(head)
        f.write(b"\0" * _pad(len(head), alignment))
        for raw in blobs:
            f.write(raw)
            f.write(b"\0" * _pad(len(raw), alignment))


class _Reader:
    def __init__(self, data):
        self.data, self.at = data, 0

    def take(self, fmt):
        values = struct.unpack_from("<" + fmt, self.data, self.at)
        self.at += struct.calcsize("<" + fmt)
        return values

    def string(self):
        (n,) = self.take("Q")
        if self.at + n > len(self.data):
            raise ValueError(f"a string of {n} bytes runs past the end of the file")
        self.at += n
        return bytes(self.data[self.at - n:self.at]).decode("utf-8")

    def value(self, number):
        """(kind, value) of a value of GGUF type `number`."""
        kind = KIND_OF[number]
        if kind == "string":
            return kind, self.string()
        if kind == "array":
            element, n = self.take("IQ")
            ekind = KIND_OF[element]
            code = KINDS[ekind][1]
            if code is not None:
                return ("array", ekind), list(self.take(f"{n}{code}"))
            items = [self.value(element) for _ in range(n)]
            return ("array", items[0][0] if items else ekind), [v for _, v in items]
        return kind, self.take(KINDS[kind][1])[0]


def read_gguf(path):
    """(version, {key: (kind, value)}, [{name, type, shape, offset, bytes}]) of a GGUF file.

    offset is the tensor's offset in the data section, as stored; bytes its raw data."""
    with open(path, "rb") as f:
        if os.fstat(f.fileno()).st_size < 24:
            raise ValueError(f"{path}: not a GGUF file (too short)")
        with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
            return _read(path, data)


def _read(path, data):
    if data[:4] != MAGIC:
        raise ValueError(f"{path}: not a GGUF file")
    r = _Reader(data)
    r.at = 4
    (version,) = r.take("I")
    if version not in (2, 3):
        raise ValueError(f"{path}: GGUF version {version} (only 2 and 3 are read)")
    n_tensors, n_kv = r.take("QQ")
    metadata = {}
    for _ in range(n_kv):
        key = r.string()
        (number,) = r.take("I")
        metadata[key] = r.value(number)
    infos = []
    for _ in range(n_tensors):
        name = r.string()
        (n_dims,) = r.take("I")
        shape = list(r.take(f"{n_dims}Q"))
        number, offset = r.take("IQ")
        infos.append((name, ggml_quants.BY_NUMBER[number].name, shape, offset))
    alignment = metadata.get("general.alignment", ("u32", DEFAULT_ALIGNMENT))[1]
    base = r.at + _pad(r.at, alignment)
    tensors = []
    for name, type_name, shape, offset in infos:
        size = ggml_quants.nbytes(type_name, int(np.prod(shape, dtype=np.int64)))
        if offset % alignment or base + offset + size > len(data):
            raise ValueError(f"{path}: tensor {name} at {offset} (+{size}) is misaligned or past the end")
        tensors.append({"name": name, "type": type_name, "shape": shape, "offset": offset,
                        "bytes": bytes(data[base + offset:base + offset + size])})
    return version, metadata, tensors


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("file", metavar="FILE.gguf", help="file to list")
    a = ap.parse_args()
    try:
        version, metadata, tensors = read_gguf(a.file)
    except (OSError, ValueError, KeyError, struct.error, UnicodeDecodeError) as e:
        sys.exit(f"gguf.py: {a.file}: not a readable GGUF file ({e})")
    print(f"version {version}")
    for key, (kind, value) in metadata.items():
        if isinstance(kind, tuple):
            value = f"[{len(value)}] {value[:8]}{' ...' if len(value) > 8 else ''}"
        print(f"{key}\t{kind if isinstance(kind, str) else '[' + str(kind[1]) + ']'}\t{value}")
    for t in tensors:
        print(f"{t['name']}\t{t['type']}\t{t['shape']}\t{t['offset']}")


if __name__ == "__main__":
    main()
