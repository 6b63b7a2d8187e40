#!/usr/bin/python3
"""Writes the fuzzers' seed corpora into tests/fuzz/corpus/ (small, meaningful inputs).

    /usr/bin/python3 tests/fuzz/make_corpus.py
"""
import glob
import json
import os
import struct

here = os.path.dirname(os.path.abspath(__file__))
root = os.path.dirname(os.path.dirname(here))


def write(name, file, data):
    d = os.path.join(here, "corpus", name)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, file), "wb") as f:
        f.write(data.encode() if isinstance(data, str) else data)


# --- safetensors: valid files, then broken ones --------------------------------------------
def safetensors(tensors, metadata=None, data=None, pad=b""):
    """tensors: [(name, dtype, shape, begin, end)]; data defaults to zero bytes up to the end."""
    header = {n: {"dtype": dt, "shape": sh, "data_offsets": [b, e]} for n, dt, sh, b, e in tensors}
    if metadata is not None:
        header["__metadata__"] = metadata
    text = json.dumps(header).encode() + pad
    if data is None:
        data = bytes(range(256)) * 4
        data = data[: max([e for *_, e in tensors] or [0])]
    return struct.pack("<Q", len(text)) + text + data


write("safetensors", "empty_header", safetensors([]))
write("safetensors", "one_f32", safetensors([("w", "F32", [2, 3], 0, 24)], {"format": "pt"}))
write("safetensors", "three_dtypes", safetensors(
    [("a", "F32", [4], 0, 16), ("b", "F16", [2, 2], 16, 24), ("c", "BF16", [3], 24, 30)]))
write("safetensors", "scalar_and_empty", safetensors([("s", "F32", [], 0, 4), ("e", "BF16", [0, 5], 4, 4)]))
write("safetensors", "padded_header", safetensors([("w", "F16", [8], 0, 16)], pad=b"        "))
write("safetensors", "overlap", safetensors([("a", "F32", [2], 0, 8), ("b", "F32", [2], 4, 12)]))
write("safetensors", "gap", safetensors([("a", "F32", [1], 0, 4), ("b", "F32", [1], 8, 12)]))
write("safetensors", "span_mismatch", safetensors([("a", "F32", [3], 0, 8)]))
write("safetensors", "huge_shape", safetensors([("a", "F32", [4294967296, 4294967296], 0, 16)]))
write("safetensors", "unsupported_dtype", safetensors([("a", "I64", [1], 0, 8)]))
write("safetensors", "bad_metadata", safetensors([("a", "F32", [1], 0, 4)], {"n": 1}))
write("safetensors", "truncated_data", safetensors([("a", "F32", [16], 0, 64)])[:-10])
write("safetensors", "trailing_bytes", safetensors([("a", "F32", [1], 0, 4)]) + b"xx")
write("safetensors", "header_past_end", struct.pack("<Q", 1000) + b'{"a": 1}')
write("safetensors", "header_not_json", struct.pack("<Q", 6) + b"{nope}")
write("safetensors", "short", b"\x02\x00\x00")

# --- config: config.json text, NUL, then one --set per line --------------------------------
def config(text, *sets):
    return text + ("\0" + "\n".join(sets) if sets else "")


for path in sorted(glob.glob(os.path.join(root, "models", "*", "config.json"))):
    write("config", os.path.basename(os.path.dirname(path)), config(open(path).read()))
rope = json.load(open(os.path.join(root, "models", "rope", "config.json")))
for path in sorted(glob.glob(os.path.join(root, "configs", "rope", "*.json")))[:5] + \
        [os.path.join(root, "configs", "learned", "clamp.json")]:
    patch = json.load(open(path))
    merged = dict(rope)
    for k, v in patch.items():
        if v is None:
            merged.pop(k, None)
        else:
            merged[k] = v
    write("config", "rope_" + os.path.basename(path)[:-5], json.dumps(merged))
small = json.dumps(rope)
write("config", "set_alibi", config(small, "position.type=alibi", "position.max_bias=4"))
write("config", "set_t5", config(small, "position={\"type\": \"t5\", \"num_buckets\": 8, \"max_distance\": 20}"))
write("config", "set_yarn", config(small, "position.scaling={\"type\":\"yarn\",\"factor\":4}", "position.xpos={}"))
write("config", "set_longrope", config(small, "head_dim=8", "position.rotary_dim=4",
                                       "position.scaling={\"type\":\"longrope\",\"short_factor\":[1,2],"
                                       "\"long_factor\":[3,4],\"original_max_position_embeddings\":16}"))
write("config", "set_llama3_hf", config(small, "position=null",
                                        "rope_scaling={\"rope_type\":\"llama3\",\"factor\":8,\"low_freq_factor\":1,"
                                        "\"high_freq_factor\":4,\"original_max_position_embeddings\":64}"))
write("config", "set_bad", config(small, "nope=1", "position..type=x", "=", "position.type.x=1"))
# HF architectures: Qwen2's windows and biases, Qwen3's q/k norms, Phi-3's fused longrope, v5 keys.
hf = dict(rope)
del hf["position"]
write("config", "qwen2_window", json.dumps(dict(hf, architectures=["Qwen2ForCausalLM"], model_type="qwen2",
                                                use_sliding_window=True, sliding_window=16, max_window_layers=2)))
write("config", "qwen3_layer_types", json.dumps(dict(hf, architectures=["Qwen3ForCausalLM"], model_type="qwen3",
                                                     sliding_window=8, use_sliding_window=True,
                                                     layer_types=["full_attention"] * 4 + ["sliding_attention"])))
write("config", "phi3_longrope", json.dumps(dict(hf, architectures=["Phi3ForCausalLM"], model_type="phi3",
                                                 original_max_position_embeddings=64, sliding_window=2047,
                                                 partial_rotary_factor=0.5,
                                                 rope_scaling={"type": "longrope", "short_factor": [1.0] * 8,
                                                               "long_factor": [2.0] * 8, "short_mscale": 1.1,
                                                               "long_mscale": 1.2})))
write("config", "mistral_v5_yarn", json.dumps(dict(hf, architectures=["MistralForCausalLM"], model_type="mistral",
                                                   sliding_window=4096,
                                                   rope_parameters={"rope_type": "yarn", "rope_theta": 1e6,
                                                                    "factor": 4.0, "mscale": 1.0,
                                                                    "mscale_all_dim": 0.5, "truncate": False})))
# Layouts layer by layer: pert's "layers" rules, and the architectures that give layers their own schemes.
write("config", "layers_irope", json.dumps(dict(rope, layers={
    "global": {"every": 2, "position": {"type": "none"}, "temperature": {"scale": 0.1, "floor": 64}},
    "local": {"others": True, "chunk": 64}})))
write("config", "layers_set", config(small, "layers={\"a\":{\"layers\":[0,1],\"window\":8}}",
                                     "layers.b={\"others\":true,\"position\":{\"type\":\"alibi\"}}"))
write("config", "smollm3", json.dumps(dict(hf, architectures=["SmolLM3ForCausalLM"], model_type="smollm3",
                                           no_rope_layers=[1, 1, 1, 0, 1], use_sliding_window=True, sliding_window=8)))
write("config", "gemma3", json.dumps(dict(hf, architectures=["Gemma3ForCausalLM"], model_type="gemma3_text",
                                          head_dim=32, sliding_window=16, sliding_window_pattern=3,
                                          rope_local_base_freq=100.0, final_logit_softcapping=30.0)))
write("config", "cohere2", json.dumps(dict(hf, architectures=["Cohere2ForCausalLM"], model_type="cohere2",
                                           logit_scale=0.25, sliding_window=16, layer_norm_eps=1e-5)))
write("config", "not_object", "[1, 2, 3]")

# --- tokenizer.json: a tiny llama-style BPE, and variants ----------------------------------
def tokenizer(extra_vocab=(), merges=(), byte_fallback=True, normalizer=True, pre=None, **model):
    vocab = {"<unk>": 0, "<s>": 1, "</s>": 2}
    for b in range(256):
        vocab["<0x%02X>" % b] = len(vocab)
    for p in ["\u2581", "a", "b", "c", "e", "h", "l", "o", "t", "w", "r", "d", "\u2581t", "he", "\u2581the", "ll",
              "\u2581he", "\u2581hell", "\u2581hello"] + list(extra_vocab):
        vocab.setdefault(p, len(vocab))
    seq = {"type": "Sequence", "normalizers": [{"type": "Prepend", "prepend": "\u2581"},
                                               {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"}]}
    j = {"version": "1.0",
         "added_tokens": [{"id": i, "content": c, "special": True} for i, c in enumerate(["<unk>", "<s>", "</s>"])],
         "normalizer": seq if normalizer else None, "pre_tokenizer": pre,
         "model": dict({"type": "BPE", "unk_token": "<unk>", "fuse_unk": True, "byte_fallback": byte_fallback,
                        "vocab": vocab,
                        "merges": list(merges or ["\u2581 t", "h e", "\u2581t he", "l l", "\u2581 he", "\u2581he ll",
                                                  "\u2581hell o"])}, **model)}
    return json.dumps(j, ensure_ascii=False)


write("tokenizer_load", "llama_tiny.json", tokenizer())
write("tokenizer_load", "pair_merges.json", tokenizer(merges=[["\u2581", "t"], ["h", "e"]]))
write("tokenizer_load", "no_byte_fallback.json", tokenizer(byte_fallback=False, fuse_unk=False))
write("tokenizer_load", "metaspace.json", tokenizer(normalizer=False, pre={
    "type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "first", "split": True}))
write("tokenizer_load", "metaspace_seq.json", tokenizer(normalizer=False, pre={
    "type": "Sequence", "pretokenizers": [{"type": "Metaspace", "replacement": "\u2581", "add_prefix_space": False}]}))
write("tokenizer_load", "bad_merge.json", tokenizer(merges=["x y"]))
write("tokenizer_load", "bad_type.json", tokenizer(type="Unigram"))
write("tokenizer_load", "vocab_gap.json", '{"model": {"vocab": {"a": 0, "b": 2}, "merges": []}}')
write("tokenizer_load", "wrong_types.json", '{"model": {"vocab": {"a": "0"}, "merges": {}}, "normalizer": 3}')
write("tokenizer_load", "not_json.json", '{"model": {"vocab": ')


# --- tokenizer.json: HF pipelines beyond llama's (byte-level with a Split regex, normalizers, decoders)
def byte_level(pre, decoder=None, normalizer=None, post=None, added=()):
    printable = [b for b in range(256) if 33 <= b <= 126 or 0xa1 <= b <= 0xac or 0xae <= b]
    chars, extra = {}, 0
    for b in range(256):
        chars[b] = chr(b) if b in printable else chr(256 + extra)
        extra += b not in printable
    vocab = {chars[b]: b for b in range(256)}
    for p in ["\u0120t", "he", "\u0120the", "in", "\u0120a"]:
        vocab[p] = len(vocab)
    j = {"model": {"type": "BPE", "vocab": vocab, "ignore_merges": True,
                   "merges": [["\u0120", "t"], ["h", "e"], ["\u0120t", "he"], ["i", "n"], ["\u0120", "a"]]},
         "added_tokens": [dict({"id": len(vocab) + i, "content": c, "special": True}, **flags) for i, (c, flags) in enumerate(added)],
         "normalizer": normalizer, "pre_tokenizer": pre, "post_processor": post,
         "decoder": decoder or {"type": "ByteLevel"}}
    return json.dumps(j, ensure_ascii=False)


llama3_regex = ("(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*"
                "|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+")
split_then_bytes = {"type": "Sequence", "pretokenizers": [
    {"type": "Split", "pattern": {"Regex": llama3_regex}, "behavior": "Isolated", "invert": False},
    {"type": "ByteLevel", "add_prefix_space": False, "use_regex": False}]}
template = {"type": "TemplateProcessing", "single": [{"SpecialToken": {"id": "<|begin|>"}}, {"Sequence": {"id": "A"}}],
            "special_tokens": {"<|begin|>": {"id": "<|begin|>", "ids": [261]}}}
write("tokenizer_load", "byte_level_split.json", byte_level(split_then_bytes, post={"type": "Sequence", "processors": [
    {"type": "ByteLevel"}, template]}, added=[("<|begin|>", {}), ("<|end|>", {"lstrip": True, "rstrip": True})]))
write("tokenizer_load", "byte_level_gpt2.json", byte_level({"type": "ByteLevel", "add_prefix_space": True}, normalizer={
    "type": "Sequence", "normalizers": [{"type": "NFKC"}, {"type": "Lowercase"}, {"type": "Strip"}]}))
write("tokenizer_load", "split_behaviours.json", byte_level({"type": "Sequence", "pretokenizers": [
    {"type": "Digits", "individual_digits": True}, {"type": "Split", "pattern": {"String": " "}, "behavior": "MergedWithNext"},
    {"type": "Split", "pattern": {"Regex": "[aeiou]+"}, "behavior": "Contiguous", "invert": True},
    {"type": "WhitespaceSplit"}, {"type": "ByteLevel", "use_regex": False, "add_prefix_space": False}]},
    normalizer={"type": "Replace", "pattern": {"Regex": "\\s+"}, "content": " "},
    added=[("<|begin|>", {"single_word": True}), ("<|end|>", {"normalized": True})]))
write("tokenizer_load", "decoder_chain.json", tokenizer(normalizer=False, pre={
    "type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "always", "split": False}).replace(
    '"decoder"', '"unused"') [:-1] + ', "decoder": {"type": "Sequence", "decoders": [{"type": "Replace", "pattern": '
    '{"String": "\u2581"}, "content": " "}, {"type": "ByteFallback"}, {"type": "Fuse"}, {"type": "Strip", "content": " ", '
    '"start": 1, "stop": 1}]}}')
write("tokenizer_load", "bad_regex.json", byte_level({"type": "Split", "pattern": {"Regex": "(a"}, "behavior": "Isolated"}))
write("tokenizer_load", "runaway_regex.json", byte_level({"type": "Split", "pattern": {"Regex": "(a+)+$"}, "behavior": "Removed"}))
write("tokenizer_load", "unknown_pre_tokenizer.json", byte_level({"type": "BertPreTokenizer"}))
write("tokenizer_load", "unknown_normalizer.json", byte_level(None, normalizer={"type": "Precompiled"}))

# --- text: bytes to encode (and to read as ids) --------------------------------------------
for name, text in [("ascii", b"Once upon a time, there was a little girl named Lily."),
                   ("spaces", b"  leading and  double  spaces \n\t end "),
                   ("utf8", "caf\u00e9 \u65e5\u672c \U0001F600 \u2581meta".encode()),
                   ("specials_as_text", b"<s> <unk> </s> <0x41>"),
                   ("bad_continuation", b"abc\x80def"), ("overlong", b"\xc0\xaf \xe0\x80\xaf"),
                   ("surrogate", b"\xed\xa0\x80"), ("truncated_4byte", b"ok \xf0\x9f\x98"),
                   ("above_max", b"\xf4\x90\x80\x80"), ("nul", b"a\x00b"), ("empty", b"")]:
    write("tokenizer_text", name, text)

# --- sweep: sweep files as pert writes them, an older file, and broken ones ----------------
def sweep_file(cells, settings=None):
    s = {"text": "build/data/tinystories_heldout.txt", "mode": "chunks", "stride": 0, "chunks": 0, "buckets": 16,
         "split_docs": True}
    s.update(settings or {})
    return json.dumps({"pert_sweep": 1, "pert_version": "0.1.0", "settings": s, "cells": cells}, indent=1)


result = {"ppl": 20.5, "ppl_stderr": 0.3, "nll": 3.02, "tokens": 2048, "windows": 16, "seconds": 0.2,
          "tokens_per_second": 10240.0}
new_cell = dict(result, index=0, model="models/rope", config="configs/rope/ntk-x2.json", label="ntk-x2",
                config_hash="0123456789abcdef", length=256, trained_length=128, position_label="rope ntk x2",
                pert_version="0.1.0")
write("sweep", "current.json", sweep_file(
    [new_cell, dict(new_cell, index=1, length=128),
     {"index": 2, "model": "models/learned", "config": "plain", "label": "plain", "config_hash": "plain",
      "length": 256, "trained_length": 128, "error": "past the table", "position_label": "learned"}],
    {"dtype": "f32", "set": [], "allow_scheme_change": False, "text_hash": "fedcba9876543210"}))
write("sweep", "legacy.json", sweep_file([dict(result, index=0, model="models/alibi", config="plain", length=64)]))
write("sweep", "two_models_one_name.json", sweep_file(
    [dict(result, model="a/rope", config="plain", length=64), dict(result, model="b/rope", config="plain", length=64)]))
write("sweep", "missing_result.json", sweep_file([{"model": "m", "config": "plain", "length": 64}]))
write("sweep", "wrong_types.json", sweep_file([dict(result, model="m", config="plain", length=64, ppl="high",
                                                   index="x", trained_length="L")]))
write("sweep", "not_a_sweep.json", '{"pert_sweep": "1", "settings": [1, 2], "cells": {}}')

# --- gguf: small whole models (llama SPM and gpt2 vocabularies, legacy and K-quant blocks) --
import sys  # noqa: E402
import tempfile  # noqa: E402

import numpy as np  # noqa: E402

sys.path.insert(0, os.path.join(root, "tools"))
from convert import ggml_quants  # noqa: E402
from convert import gguf  # noqa: E402


def gguf_bytes(metadata, tensors, version=3):
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "m.gguf")
        gguf.write_gguf(path, metadata, tensors, version=version)
        with open(path, "rb") as f:
            return f.read()


def tiny_model(arch, d, types, vocab_kind="llama"):
    """A one-layer `arch` model of width d with an 8-piece vocabulary; types: matrix -> GGML type."""
    rng = np.random.default_rng(0)
    a = arch + "."
    meta = [("general.architecture", "string", arch), (a + "block_count", "u32", 1), (a + "context_length", "u32", 64),
            (a + "embedding_length", "u32", d), (a + "feed_forward_length", "u32", d),
            (a + "attention.head_count", "u32", 2), (a + "attention.head_count_kv", "u32", 1),
            (a + "attention.layer_norm_rms_epsilon", "f32", 1e-5), (a + "rope.freq_base", "f32", 10000.0)]
    pieces = ["<unk>", "<s>", "</s>", "▁a", "▁b", "a", "b", "▁"] if vocab_kind == "llama" else ["a", "b", "ab", "Ġ", "Ġa", "<|end|>", "c", "ca"]
    meta += [("tokenizer.ggml.model", "string", vocab_kind), ("tokenizer.ggml.tokens", ("array", "string"), pieces)]
    if vocab_kind == "llama":
        meta += [("tokenizer.ggml.scores", ("array", "f32"), [0.0, 0.0, 0.0, -1.0, -2.0, -3.0, -4.0, -5.0]),
                 ("tokenizer.ggml.token_type", ("array", "i32"), [2, 3, 3, 1, 1, 1, 1, 1])]
    else:
        meta += [("tokenizer.ggml.pre", "string", "gpt-2"), ("tokenizer.ggml.merges", ("array", "string"), ["a b", "Ġ a", "c a"]),
                 ("tokenizer.ggml.token_type", ("array", "i32"), [1, 1, 1, 1, 1, 3, 1, 1])]
    kv = d // 2
    shapes = {"token_embd.weight": (8, d), "blk.0.attn_norm.weight": (d,), "blk.0.attn_q.weight": (d, d),
              "blk.0.attn_k.weight": (kv, d), "blk.0.attn_v.weight": (kv, d), "blk.0.attn_output.weight": (d, d),
              "blk.0.ffn_norm.weight": (d,), "blk.0.ffn_gate.weight": (d, d), "blk.0.ffn_up.weight": (d, d),
              "blk.0.ffn_down.weight": (d, d), "output_norm.weight": (d,)}
    tensors = []
    for name, shape in shapes.items():
        kind = types.get(name.split(".")[-2], "F32") if len(shape) == 2 else "F32"
        w = rng.standard_normal(shape).astype(np.float32) * 0.1
        tensors.append((name, kind, list(reversed(shape)), ggml_quants.quantize(kind, w)))
    return meta, tensors


legacy = {"token_embd": "Q8_0", "attn_q": "Q4_0", "attn_k": "Q8_0", "attn_v": "F16", "attn_output": "Q5_1",
          "ffn_gate": "Q4_1", "ffn_up": "Q5_0", "ffn_down": "BF16"}
write("gguf", "llama_legacy_types", gguf_bytes(*tiny_model("llama", 32, legacy)))
write("gguf", "qwen2_gpt2_vocab_v2", gguf_bytes(*tiny_model("qwen2", 32, {"attn_q": "Q8_0"}, "gpt2"), version=2))
meta, tensors = tiny_model("llama", 256, {"attn_q": "Q4_K", "attn_k": "Q5_K", "attn_v": "Q6_K"})
write("gguf", "llama_k_quants", gguf_bytes(meta, [t for t in tensors if t[1] != "F32" or len(t[2]) == 1]))
write("gguf", "header_only", gguf_bytes([("general.architecture", "string", "llama")], []))
write("gguf", "unknown_pre", gguf_bytes([("tokenizer.ggml.model", "string", "gpt2"), ("tokenizer.ggml.pre", "string", "nope"),
                                         ("tokenizer.ggml.tokens", ("array", "string"), ["a"])], []))
# Round four: a Phi-3-named vocabulary (llama.cpp's rule: whitespace after its special tokens
# dropped) and one of many empty pieces (each named [EMPTY_i], as llama.cpp names them).
phi3 = ["<unk>", "<s>", "</s>", "▁a", "▁b", "a", "b", "▁", "<|user|>", "<|end|>", "<|endoftext|>", "<0x0A>"]
write("gguf", "phi3_special_rstrip", gguf_bytes([
    ("general.name", "string", "phi3"), ("tokenizer.ggml.model", "string", "llama"),
    ("tokenizer.ggml.tokens", ("array", "string"), phi3),
    ("tokenizer.ggml.scores", ("array", "f32"), [0.0] * 3 + [-1.0, -2.0, -3.0, -4.0, -5.0] + [0.0] * 3 + [0.0]),
    ("tokenizer.ggml.token_type", ("array", "i32"), [2, 3, 3, 1, 1, 1, 1, 1, 3, 3, 3, 6])], []))
write("gguf", "empty_pieces", gguf_bytes([("tokenizer.ggml.model", "string", "gpt2"), ("tokenizer.ggml.pre", "string", "gpt-2"),
                                          ("tokenizer.ggml.tokens", ("array", "string"), ["a", "b"] + [""] * 2000)], []))
