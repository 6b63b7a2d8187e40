#!/usr/bin/python3
"""Mixtures of experts against the float64 reference (tools/reference/moe.py, written from HF's
modeling files): for Mixtral, Qwen2-MoE (a gated shared expert, a dense layer), Qwen3-MoE and
OLMoE (whole-width q/k norms, clip_qkv), a tiny random-weight checkpoint with the architecture's
tensor names and config keys; pert's logits within 1e-4 of the reference's at every position, in
one prefill, token by token and in chunks of 5 (each expert's tokens grouped into one product),
and its GGUF twin (tools/convert/to_gguf.py, F32: the experts stacked as llama.cpp's
ffn_*_exps) equal to the directory's run.

    moe_test.py PERT_LOGITS [ARCH ...]
"""
import os
import sys
import tempfile

import numpy as np
import torch

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(here), "tools"))
from convert import to_gguf, tokenizer_json  # noqa: E402
from reference import moe, reference  # noqa: E402
from logits_check import pert_logits  # noqa: E402

# arch: (moe.make_moe_model's arch, config keys over TINY's)
CASES = {
    "mixtral": ("mixtral", {}),
    "qwen2moe": ("qwen2moe", {"mlp_only_layers": [1]}),  # layer 1 keeps the dense MLP
    "qwen2moe_norm": ("qwen2moe", {"norm_topk_prob": True}),
    "qwen3moe": ("qwen3moe", {}),
    "qwen3moe_step": ("qwen3moe", {"decoder_sparse_step": 2, "norm_topk_prob": False}),  # layer 0 dense
    "olmoe": ("olmoe", {}),
    "olmoe_clip": ("olmoe", {"clip_qkv": 0.5}),
}


def run_case(binary, name, work, failures):
    arch, extra = CASES[name]
    src = os.path.join(work, "src")
    tokenizer, vocab = to_gguf.tiny_tokenizer()  # (a GGUF file carries its tokenizer)
    moe.make_moe_model(src, arch, seed=len(name), layers=2, vocab=vocab, extra_config=extra)
    tokenizer_json.write(tokenizer, os.path.join(src, "tokenizer.json"))
    config, W = reference.load_model_dir(src)
    ids = list(np.random.default_rng(3).integers(0, config["vocab_size"], size=20))
    with torch.no_grad():
        want = reference.forward(config, W, ids).numpy()
    runs = {f"chunk {c}" if c else "prefill": pert_logits(binary, src, ids, work, chunk=c) for c in (None, 1, 5)}
    gguf_path = os.path.join(work, "model.gguf")
    to_gguf.convert(src, gguf_path, "F32")
    runs["gguf"] = pert_logits(binary, gguf_path, ids, work)
    for what, got in runs.items():
        err = float(np.abs(got - want).max())
        print(f"{name:14s} {what:8s} max|Δ| = {err:.2e} (≤ 1e-4)")
        if not err <= 1e-4:
            failures.append(f"{name} {what}")


def main():
    binary, names = sys.argv[1], sys.argv[2:] or list(CASES)
    failures = []
    for name in names:
        with tempfile.TemporaryDirectory() as work:
            run_case(binary, name, work, failures)
    if failures:
        print("moe_vs_reference: FAILED:", ", ".join(failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
