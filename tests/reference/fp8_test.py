#!/usr/bin/python3
"""Block-scaled FP8 checkpoints as published (DeepSeek-V3/R1, Qwen3-*-FP8) against the float64
reference: tiny random checkpoints (a Llama, a Qwen3 with q/k norms, a DeepSeek V3 with MLA and
experts) written here in FP8 as those are: every projection F8_E4M3, quantized per block of
weight_block_size as transformers' and DeepSeek's quantizers do (scale = max|w| / 448, codes
rounded to nearest even, saturated at ±448), its "<name>_scale_inv" beside it (F32, or BF16),
config.json's quantization_config {"quant_method": "fp8", "fmt": "e4m3", "activation_scheme":
"dynamic", "weight_block_size": [rows, cols]}; embeddings, norms, routers and lm_head BF16, V3's
e_score_correction_bias F32. Its twin holds the same values dequantized (code · scale_inv in
float32) as F32. pert's logits on the FP8 directory: within 1e-4 of the reference run on the
twin, in one prefill and token by token, and equal bit for bit to pert's on the twin (F32, and
--dtype bf16 / q8 / q4_0, which quantize the same floats).

tools/convert/to_gguf.py on the same FP8 checkpoints (each with a tokenizer, so vocab 306):
tools/lib/safetensors_io.py decodes the 256 E4M3 codes as pert's fp8.hpp (bit for bit, -0 and NaN
included), the --type F32 file pert runs to the FP8 directory's logits bit for bit (prefill and
decode), and the converter refuses, naming the key or tensor, what pert refuses: no
quantization_config, quant_method / activation_scheme / fmt other than pert reads, no or a bad
weight_block_size, a NaN code, a missing, misshapen or zero _scale_inv, a _scale_inv beside a
BF16 tensor.

    fp8_test.py PERT_LOGITS
"""
import json
import os
import struct
import sys
import tempfile

import numpy as np
import torch

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(here)), "tools"))
sys.path.insert(0, os.path.join(here, "..", "helpers"))  # logits_check
from convert import to_gguf, tokenizer_json  # noqa: E402
from lib import safetensors_io  # noqa: E402
from reference import deepseek, reference  # noqa: E402
from logits_check import pert_logits  # noqa: E402


def e4m3_value(code):
    """The E4M3 (e4m3fn) value of a code: bias 7, subnormals at exponent 0, S.1111.111 NaN."""
    s, e, m = code >> 7, (code >> 3) & 15, code & 7
    if e == 15 and m == 7:
        return float("nan")
    v = (m / 8.0) * 2.0 ** -6 if e == 0 else (1 + m / 8.0) * 2.0 ** (e - 7)
    return -v if s else v


E4M3 = np.array([e4m3_value(c) for c in range(256)], dtype=np.float32)
POSITIVE = E4M3[:0x7F]  # codes 0x00..0x7E: 0 to 448, increasing


def to_e4m3(x):
    """float32 array -> E4M3 codes, round to nearest (ties to the even code), saturated at ±448."""
    a = np.minimum(np.abs(x).astype(np.float64), 448.0)
    hi = np.clip(np.searchsorted(POSITIVE, a), 1, len(POSITIVE) - 1)
    lo = hi - 1
    d_lo, d_hi = a - POSITIVE[lo], POSITIVE[hi] - a
    code = np.where((d_hi < d_lo) | ((d_hi == d_lo) & (hi % 2 == 0)), hi, lo).astype(np.uint8)
    return np.where(np.signbit(x) & (code != 0), code | 0x80, code).astype(np.uint8)


def bf16(x):
    """float32 rounded to bfloat16 (as stored), as float32."""
    return (safetensors_io._to_bf16_bits(np.asarray(x, dtype=np.float32)).astype(np.uint32) << 16).view(np.float32)


def quantize(w, rows, cols, scale_dtype):
    """An [N][K] matrix in FP8 blocks: (codes, scale_inv, the dequantized float32 matrix)."""
    w = np.asarray(w, dtype=np.float32)
    N, K = w.shape
    sr, sc = -(-N // rows), -(-K // cols)
    scale = np.zeros((sr, sc), dtype=np.float32)
    codes = np.zeros((N, K), dtype=np.uint8)
    for i in range(sr):
        for j in range(sc):
            block = w[i * rows:(i + 1) * rows, j * cols:(j + 1) * cols]
            s = np.float32(max(float(np.abs(block).max()), 1e-12)) / np.float32(448.0)
            if scale_dtype == "BF16":
                s = bf16(s)
            scale[i, j] = s
            codes[i * rows:(i + 1) * rows, j * cols:(j + 1) * cols] = to_e4m3(block / np.float32(s))
    per_value = np.repeat(np.repeat(scale, rows, axis=0), cols, axis=1)[:N, :K]
    return codes, scale, (E4M3[codes] * per_value).astype(np.float32)


def save(path, tensors):
    """{name: (dtype, array)} as safetensors: F32, BF16, F8_E4M3 (uint8 codes)."""
    header, blobs, offset = {}, [], 0
    for name in sorted(tensors):
        dtype, a = tensors[name]
        if dtype == "F8_E4M3":
            raw = np.ascontiguousarray(a, dtype=np.uint8).tobytes()
        elif dtype == "BF16":
            raw = safetensors_io._to_bf16_bits(np.asarray(a, dtype=np.float32)).tobytes()
        else:
            raw = np.ascontiguousarray(a, dtype=np.float32).tobytes()
        header[name] = {"dtype": dtype, "shape": list(np.shape(a)), "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def is_fp8(name, shape):
    """The matrices published FP8 checkpoints store in FP8: every projection (attention's, MLA's,
    the MLPs' and experts'), not embeddings, norms, the router or lm_head."""
    return len(shape) == 2 and name.endswith(("_proj.weight", "_proj_with_mqa.weight"))


def write_fp8_twin(src, fp8_dir, twin_dir, block, scale_dtype):
    """src (a tiny F32 checkpoint) as a published FP8 checkpoint in fp8_dir, and the values it
    holds as F32 in twin_dir. Returns how many matrices are FP8, and the FP8 directory's tensors
    {name: (dtype, array)}."""
    with open(os.path.join(src, "config.json")) as f:
        config = json.load(f)
    stored, twin = {}, {}
    for name, w in safetensors_io.load(os.path.join(src, "model.safetensors")).items():
        if is_fp8(name, w.shape):
            codes, scale, values = quantize(w, *block, scale_dtype)
            stored[name], stored[name + "_scale_inv"] = ("F8_E4M3", codes), (scale_dtype, scale)
            twin[name] = values
        elif name.endswith("e_score_correction_bias"):  # F32 in DeepSeek-V3's files
            stored[name], twin[name] = ("F32", w), w
        else:
            stored[name], twin[name] = ("BF16", w), bf16(w)
    for out, tensors, quantization in ((fp8_dir, stored, True), (twin_dir, {n: ("F32", v) for n, v in twin.items()}, False)):
        os.makedirs(out, exist_ok=True)
        save(os.path.join(out, "model.safetensors"), tensors)
        c = dict(config)
        if quantization:
            c["quantization_config"] = {"activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8",
                                        "weight_block_size": list(block)}
        with open(os.path.join(out, "config.json"), "w") as f:
            json.dump(c, f, indent=2)
    return sum(1 for n, (d, _) in stored.items() if d == "F8_E4M3"), stored


QWEN3 = {"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "rope_theta": 1000000.0, "attention_bias": False,
         "use_sliding_window": False}

# case: (maker(out_dir, **options such as vocab), FP8 weight_block_size, scale dtype)
CASES = {
    "llama_blocks_16x48": (lambda d, **kw: reference.make_model(d, None, seed=11, hidden=64, ffn=128, **kw), (16, 48), "F32"),
    "qwen3_blocks_128_bf16_scales": (lambda d, **kw: reference.make_model(d, None, seed=12, hidden=64, ffn=128, qk_norm=True,
                                                                          head_dim=24, extra_config=QWEN3, **kw),
                                     (128, 128), "BF16"),
    "deepseek_v3_blocks_128": (lambda d, **kw: deepseek.make_deepseek_model(d, "v3", seed=13, **kw), (128, 128), "F32"),
    "deepseek_v3_blocks_8x24": (lambda d, **kw: deepseek.make_deepseek_model(d, "v3", seed=14, **kw), (8, 24), "F32"),
}


def check_e4m3_decoding(failures):
    """safetensors_io's E4M3 values, bit for bit, against this file's (written from the definition)."""
    same = np.array_equal(safetensors_io.E4M3.view(np.uint32), E4M3.view(np.uint32))
    print(f"safetensors_io decodes the 256 E4M3 codes as fp8.hpp, bit for bit: {same}")
    if not same:
        failures.append("safetensors_io E4M3 decoding")


def with_config(fp8_dir, out, config=None):
    """A directory `out` with fp8_dir's tokenizer (linked) and config.json, the keys `config` set
    (a value None: the key removed); its weights are the caller's to write."""
    os.makedirs(out)
    os.link(os.path.join(fp8_dir, "tokenizer.json"), os.path.join(out, "tokenizer.json"))
    with open(os.path.join(fp8_dir, "config.json")) as f:
        c = json.load(f)
    for key, value in (config or {}).items():
        if value is None:
            c.pop(key, None)
        else:
            c[key] = value
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(c, f)
    return out


def check_gguf(binary, case, make, block, scale_dtype, work, failures):
    """The case's FP8 checkpoint (with a tokenizer) through to_gguf.py --type F32: pert's logits on the
    file are its logits on the FP8 directory, bit for bit; then the refusals (on the first case only)."""
    src, fp8, twin = (os.path.join(work, case, n) for n in ("gguf_src", "gguf_fp8", "gguf_twin"))
    os.makedirs(src)
    tokenizer, vocab = to_gguf.tiny_tokenizer()
    make(src, vocab=vocab)
    _, stored = write_fp8_twin(src, fp8, twin, block, scale_dtype)
    tokenizer_json.write(tokenizer, os.path.join(fp8, "tokenizer.json"))
    path = os.path.join(work, case, "fp8.gguf")
    types = to_gguf.convert(fp8, path, "F32")
    ids = list(np.random.default_rng(4).integers(3, vocab, size=20))
    for chunk in (None, 1):
        same = np.array_equal(pert_logits(binary, path, ids, work, chunk=chunk), pert_logits(binary, fp8, ids, work, chunk=chunk))
        what = f"{case} to_gguf.py --type F32 ({len(types)} tensors) {'decode' if chunk else 'prefill'}"
        print(f"{what:70s} = the FP8 directory bit for bit: {same}")
        if not same:
            failures.append(what)
    return fp8, stored


def check_gguf_refusals(fp8, stored, work, failures):
    """to_gguf.py refuses what pert refuses, naming the key or tensor."""
    matrix = sorted(n for n, (d, _) in stored.items() if d == "F8_E4M3")[0]
    scale = matrix + "_scale_inv"
    norm = sorted(n for n, (d, _) in stored.items() if d == "BF16" and n.endswith("norm.weight"))[0]
    with open(os.path.join(fp8, "config.json")) as f:
        q = json.load(f)["quantization_config"]
    zero = stored[scale][1].copy()
    zero[0, 0] = 0
    nan = stored[matrix][1].copy()
    nan[1, 2] = 0xFF  # S.1111.111
    cases = {
        "no quantization_config": ({"quantization_config": None}, {}, (), "has no quantization_config"),
        "quant_method bitsandbytes": ({"quantization_config": dict(q, quant_method="bitsandbytes")}, {}, (),
                                      "quantization_config.quant_method is \"bitsandbytes\""),
        "activation_scheme static": ({"quantization_config": dict(q, activation_scheme="static")}, {}, (),
                                     "quantization_config.activation_scheme is \"static\""),
        "fmt e5m2": ({"quantization_config": dict(q, fmt="e5m2")}, {}, (), "quantization_config.fmt"),
        "no weight_block_size": ({"quantization_config": {k: v for k, v in q.items() if k != "weight_block_size"}},
                                 {}, (), "has no weight_block_size"),
        "weight_block_size [0, 128]": ({"quantization_config": dict(q, weight_block_size=[0, 128])}, {}, (),
                                       "weight_block_size must be 2 positive integers"),
        "no _scale_inv": ({}, {}, (scale,), f"missing tensor '{scale}'"),
        "a NaN code": ({}, {matrix: ("F8_E4M3", nan)}, (), f"'{matrix}' has 1 non-finite values"),
        "a zero _scale_inv": ({}, {scale: (stored[scale][0], zero)}, (), f"'{scale}' [0][0] is 0.0"),
        "a misshapen _scale_inv": ({}, {scale: (stored[scale][0], stored[scale][1][:, :1])}, (), f"'{scale}' is"),
        "a _scale_inv beside BF16": ({}, {norm + "_scale_inv": ("F32", np.ones((1, 1), np.float32))}, (),
                                     "which is BF16, not F8_E4M3"),
    }
    for what, (config, tensors, drop, message) in cases.items():
        out = with_config(fp8, os.path.join(work, "refused", what.replace(" ", "_")), config)
        save(os.path.join(out, "model.safetensors"), {n: t for n, t in dict(stored, **tensors).items() if n not in drop})
        try:
            to_gguf.convert(out, os.path.join(out, "out.gguf"), "F32")
            ok, said = False, "converted"
        except ValueError as e:
            ok, said = message in str(e), str(e)
        print(f"to_gguf.py refuses {what}: {ok} ({said})")
        if not ok:
            failures.append(f"to_gguf.py {what}")


def main():
    binary = sys.argv[1]
    failures = []
    check_e4m3_decoding(failures)
    with tempfile.TemporaryDirectory() as work:
        for case, (make, block, scale_dtype) in CASES.items():
            src, fp8, twin = (os.path.join(work, case, n) for n in ("src", "fp8", "twin"))
            make(src)
            n, _ = write_fp8_twin(src, fp8, twin, block, scale_dtype)
            config, W = reference.load_model_dir(twin)
            ids = list(np.random.default_rng(3).integers(0, config["vocab_size"], size=20))
            with torch.no_grad():
                want = reference.forward(config, W, ids).numpy()
            for chunk in (None, 1):
                err = float(np.abs(pert_logits(binary, fp8, ids, work, chunk=chunk) - want).max())
                what = f"{case} ({n} FP8 matrices) {'decode' if chunk else 'prefill'}"
                print(f"{what:62s} max|Δ| = {err:.2e} (≤ 1e-4)")
                if not err <= 1e-4:
                    failures.append(what)
            for dtype in ("f32", "bf16", "q8", "q4_0"):
                got = pert_logits(binary, fp8, ids, work, extra=("--dtype", dtype))
                same = np.array_equal(got, pert_logits(binary, twin, ids, work, extra=("--dtype", dtype)))
                print(f"{case:36s} --dtype {dtype:5s} FP8 = its F32 twin bit for bit: {same}")
                if not same:
                    failures.append(f"{case} --dtype {dtype}")
            fp8_dir, stored = check_gguf(binary, case, make, block, scale_dtype, work, failures)
            if case == "llama_blocks_16x48":
                check_gguf_refusals(fp8_dir, stored, work, failures)
    if failures:
        print("fp8_vs_reference: FAILED:", ", ".join(failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
