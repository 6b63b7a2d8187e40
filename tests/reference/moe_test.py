#!/usr/bin/python3
"""Mixtures of experts against the float64 reference (tools/reference/moe.py, written from HF's
modeling files): for Mixtral, Qwen2-MoE (a gated shared expert, a dense layer), Qwen3-MoE and
OLMoE (whole-width q/k norms, clip_qkv), a tiny random-weight checkpoint with the architecture's
tensor names and config keys; pert's logits within 1e-4 of the reference's at every position, in
one prefill, token by token and in chunks of 5 (each expert's tokens grouped into one product),
and its GGUF twin (tools/convert/to_gguf.py, F32: the experts stacked as llama.cpp's
ffn_*_exps) equal to the directory's run.

The *_fused cases store the same weights as transformers v5 writes its in-memory layout
(save_pretrained(save_original_format=False): mlp.experts.gate_up_proj [E, 2·ff, d], gate rows
first, mlp.experts.down_proj [E, d, ff], Mixtral's router as mlp.gate), in F32, F16 and BF16:
pert's logits equal to those of the per-expert checkpoint of the same weights, and within 1e-4
of the reference. The bad_fused cases break a fused checkpoint (both forms in a layer, half a
pair, a wrong shape, U8 bytes, Mixtral's router under both names) and want pert to refuse it in one line naming the tensor.

    moe_test.py PERT_LOGITS [CASE ...]   # CASE: a CASES name, or bad_fused
"""
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np
import torch

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(here)), "tools"))
sys.path.insert(0, os.path.join(here, "..", "helpers"))  # logits_check
from convert import to_gguf, tokenizer_json  # noqa: E402
from lib import safetensors_io  # noqa: E402
from reference import moe, reference  # noqa: E402
from logits_check import pert_logits  # noqa: E402

# name: (moe.make_moe_model's arch, config keys over TINY's[, its options: fused, dtype])
CASES = {
    "mixtral": ("mixtral", {}),
    "qwen2moe": ("qwen2moe", {"mlp_only_layers": [1]}),  # layer 1 keeps the dense MLP
    "qwen2moe_norm": ("qwen2moe", {"norm_topk_prob": True}),
    "qwen3moe": ("qwen3moe", {}),
    "qwen3moe_step": ("qwen3moe", {"decoder_sparse_step": 2, "norm_topk_prob": False}),  # layer 0 dense
    "olmoe": ("olmoe", {}),
    "olmoe_clip": ("olmoe", {"clip_qkv": 0.5}),
    "mixtral_fused": ("mixtral", {}, {"fused": True}),
    "qwen2moe_fused": ("qwen2moe", {"mlp_only_layers": [1]}, {"fused": True, "dtype": "BF16"}),
    "qwen3moe_fused": ("qwen3moe", {"decoder_sparse_step": 2}, {"fused": True, "dtype": "F16"}),
    "olmoe_fused": ("olmoe", {}, {"fused": True}),
}


def bad_fused_checkpoints(work):
    """(what, tensor its error must name, model dir) for broken v5 checkpoints made from fused
    OLMoE and Mixtral ones (layer 0's experts and router)."""
    tokenizer, vocab = to_gguf.tiny_tokenizer()
    good = {}
    for arch in ("olmoe", "mixtral"):
        good[arch] = os.path.join(work, arch)
        moe.make_moe_model(good[arch], arch, layers=2, vocab=vocab, fused=True)
        tokenizer_json.write(tokenizer, os.path.join(good[arch], "tokenizer.json"))
    t = safetensors_io.load(os.path.join(good["olmoe"], "model.safetensors"))
    m = safetensors_io.load(os.path.join(good["mixtral"], "model.safetensors"))
    p = "model.layers.0.mlp.experts."
    cases = [
        ("both forms", p + "3.up_proj.weight", "olmoe", dict(t, **{p + "3.up_proj.weight": t[p + "gate_up_proj"][3, 32:]})),
        ("half a pair", p + "down_proj", "olmoe", {k: v for k, v in t.items() if k != p + "down_proj"}),
        ("wrong shape", p + "gate_up_proj", "olmoe", dict(t, **{p + "gate_up_proj": t[p + "gate_up_proj"][:, :48]})),
        ("U8 bytes", p + "down_proj", "olmoe", dict(t, **{p + "down_proj": np.zeros(t[p + "down_proj"].shape, np.uint8)})),
        ("two routers", "model.layers.0.mlp.gate.weight", "mixtral",  # v5's name and Mixtral's own
         dict(m, **{"model.layers.0.block_sparse_moe.gate.weight": m["model.layers.0.mlp.gate.weight"]})),
    ]
    for what, tensor, arch, tensors in cases:
        bad = os.path.join(work, what.replace(" ", "_"))
        shutil.copytree(good[arch], bad)
        safetensors_io.save(os.path.join(bad, "model.safetensors"), tensors)
        yield what, tensor, bad


def run_bad_fused(binary, work, failures):
    with open(os.path.join(work, "ids.txt"), "w") as f:
        f.write("1 2 3")
    for what, tensor, bad in bad_fused_checkpoints(work):
        r = subprocess.run([binary, bad, os.path.join(work, "ids.txt"), os.path.join(work, "out.bin")],
                           capture_output=True, text=True)
        lines = r.stderr.strip().splitlines()
        ok = r.returncode != 0 and len(lines) == 1 and f"'{tensor}'" in lines[0]
        print(f"bad_fused {what:12s} {'refused' if ok else 'NOT REFUSED AS WANTED'}: {r.stderr.strip()}")
        if not ok:
            failures.append(f"bad_fused {what}")


def make_case(out, name, options):
    arch, extra = CASES[name][:2]
    tokenizer, vocab = to_gguf.tiny_tokenizer()  # (a GGUF file carries its tokenizer)
    moe.make_moe_model(out, arch, seed=len(name), layers=2, vocab=vocab, extra_config=extra, **options)
    tokenizer_json.write(tokenizer, os.path.join(out, "tokenizer.json"))


def run_case(binary, name, work, failures):
    if name == "bad_fused":
        return run_bad_fused(binary, work, failures)
    options = CASES[name][2] if len(CASES[name]) > 2 else {}
    src = os.path.join(work, "src")
    make_case(src, name, options)
    config, W = reference.load_model_dir(src)
    ids = list(np.random.default_rng(3).integers(0, config["vocab_size"], size=20))
    with torch.no_grad():
        want = reference.forward(config, W, ids).numpy()
    runs = {f"chunk {c}" if c else "prefill": pert_logits(binary, src, ids, work, chunk=c) for c in (None, 1, 5)}
    gguf_path = os.path.join(work, "model.gguf")
    to_gguf.convert(src, gguf_path, "F32")
    runs["gguf"] = pert_logits(binary, gguf_path, ids, work)
    if options.get("fused"):  # the same weights per expert: the same logits, to the bit
        per_expert = os.path.join(work, "per_expert")
        make_case(per_expert, name, dict(options, fused=False))
        err = float(np.abs(runs["prefill"] - pert_logits(binary, per_expert, ids, work)).max())
        print(f"{name:14s} fused vs per-expert ({options.get('dtype', 'F32')}) max|Δ| = {err:.2e} (= 0)")
        if err != 0:
            failures.append(f"{name} fused vs per-expert")
    for what, got in runs.items():
        err = float(np.abs(got - want).max())
        print(f"{name:14s} {what:8s} max|Δ| = {err:.2e} (≤ 1e-4)")
        if not err <= 1e-4:
            failures.append(f"{name} {what}")


def main():
    binary, names = sys.argv[1], sys.argv[2:] or list(CASES) + ["bad_fused"]
    failures = []
    for name in names:
        with tempfile.TemporaryDirectory() as work:
            run_case(binary, name, work, failures)
    if failures:
        print("moe_vs_reference: FAILED:", ", ".join(failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
