#!/usr/bin/python3
"""GGUF models against the float64 reference: for each architecture llama.cpp's GGUF names
(llama as Llama 3 with its rope_freqs, llama as Mistral with a window, qwen2, qwen3, phi3 with
LongRoPE, gemma2 and gemma3 with their norms stored as 1 + w, cohere2, smollm3) and each tensor type, tools/convert/to_gguf.py writes a small random-weight model as
llama.cpp's converter and llama-quantize lay it out, and the same weights dequantized into an HF
directory; pert runs the GGUF file (its blocks in place), tools/reference/reference.py the directory in
float64.

pert multiplies a quantized matrix by x quantized per block of 32 values (the legacy types) or
256 (the K-quants), d = max|x| / 127 and q = round(x / d), as llama.cpp quantizes activations
(Q8_0 / Q8_K); the reference rounds the inputs of those matrices the same way, so what is
compared is the model as read (names, row order, config, scaling, tokenizer-free ids), prefill
and token-by-token decoding: measured ~1e-7 of the logit range at most positions.

An activation within float32 noise of a rounding midpoint may round the other way in pert than
in the float64 reference (pert's x differs from the reference's by ~1e-6 relative after float32
sums of hundreds of products); that moves the logits of its position, and through the cache
every later one, by up to ~6e-3 of the range, one flip being 1/127 of a block's largest value.
So every position must be within 2e-2 of the range (a wrong tensor, row order or scaling is
~1e-1 and more); the kernels themselves are checked exactly, given x rounded alike, by
blocks_test.py (1e-6).

    gguf_model_test.py PERT_LOGITS [ARCH | ARCH_TYPE ...]     e.g. llama, qwen3_Q4_K_M
"""
import os
import sys
import tempfile

import numpy as np
import torch

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(here)), "tools"))
sys.path.insert(0, os.path.join(here, "..", "helpers"))  # logits_check
from convert import gguf  # noqa: E402
from reference import reference  # noqa: E402
from convert import to_gguf  # noqa: E402
from logits_check import pert_logits  # noqa: E402

ALL_TYPES = ["F32", "F16", "BF16", "Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q4_K", "Q5_K", "Q6_K", "Q4_K_M", "Q5_K_M"]
CASES = [("llama", t) for t in ALL_TYPES]
CASES += [(arch, t) for arch in ("mistral", "qwen2", "qwen3", "phi3", "gemma2", "gemma3", "cohere2", "smollm3")
          for t in ("F16", "Q8_0", "Q4_K_M", "Q6_K")]
CASES += [(arch, t) for arch in ("mixtral", "qwen2moe", "qwen3moe", "olmoe") for t in ("F16", "Q8_0", "Q4_K_M")]
K_QUANTS = {"Q4_K", "Q5_K", "Q6_K"}
FLOATS = {"F32", "F16", "BF16"}


def rounded_inputs(types, tied):
    """reference.forward's `inputs`: x rounded as pert quantizes it for each matrix's type."""
    def inputs(name, h):
        weight = "model.embed_tokens.weight" if name == "lm_head" and tied else name + ".weight"
        kind = types[to_gguf.gguf_name(weight)]
        if kind in FLOATS:
            return h
        block = 256 if kind in K_QUANTS else 32
        x = h.to(torch.float32)
        blocks = x.reshape(*x.shape[:-1], x.shape[-1] // block, block)
        amax = blocks.abs().amax(dim=-1, keepdim=True)
        d = amax / 127.0
        # pert's scaling: 127 / max|x| for the K-quants, 1 / d for the legacy types
        inv = torch.where(amax > 0, 127.0 / amax if block == 256 else 1.0 / d, torch.zeros_like(d))
        q = torch.round(blocks * inv)  # half to even, as lrintf
        return (q * d).reshape(x.shape).to(h.dtype)
    return inputs


def run_case(binary, arch, kind, work, failures):
    src, gguf_path, deq = (os.path.join(work, n) for n in ("src", "model.gguf", "deq"))
    to_gguf.random_model(src, arch, seed=ALL_TYPES.index(kind))
    to_gguf.convert(src, gguf_path, kind, dequantized_dir=deq)
    types = {t["name"]: t["type"] for t in gguf.read_gguf(gguf_path)[2]}
    config, W = reference.load_model_dir(deq)
    ids = list(np.random.default_rng(7).integers(3, config["vocab_size"], size=24))
    with torch.no_grad():
        want = reference.forward(config, W, ids, rounded_inputs(types, config.get("tie_word_embeddings", False))).numpy()
    span = float(want.max() - want.min())
    for chunk, what in ((None, "prefill"), (1, "decode")):
        got = pert_logits(binary, gguf_path, ids, work, chunk=chunk)
        by_position = np.abs(got - want).max(axis=-1) / span  # max |Δ| / range at each position
        err, median = float(by_position.max()), float(np.median(by_position))
        print(f"{arch:8s} {kind:7s} {what:8s} max|Δ| / logit range = {err:.2e} (≤ 2e-2), median position {median:.1e}")
        if not err <= 2e-2:
            failures.append(f"{arch} {kind} {what}")


def main():
    binary, names = sys.argv[1], sys.argv[2:]
    failures = []
    for arch, kind in CASES:
        if names and arch not in names and f"{arch}_{kind}" not in names:
            continue
        with tempfile.TemporaryDirectory() as work:
            run_case(binary, arch, kind, work, failures)
    if failures:
        print("gguf_vs_reference: FAILED:", ", ".join(failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
