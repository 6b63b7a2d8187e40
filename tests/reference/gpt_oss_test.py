#!/usr/bin/python3
"""gpt-oss against the float64 reference (tools/reference: moe.py's routing and clamped SwiGLU,
reference.py's sink logits, windows and YaRN): a tiny checkpoint with q/k/v/o biases, a learned
sink logit per head, a window and a full layer, YaRN (truncate false) and four experts stored as
HF stores them, input-first F32 and as shipped in MXFP4 (*_blocks/*_scales) from the same
values. pert's logits on the F32 layout and on the MXFP4 one widened at load (--dtype f32) within
1e-4 of the reference at every position, in one prefill, token by token and in chunks of 5; the
same checkpoint in BF16 (as gpt-oss-20b-BF16 ships) against the reference on its rounded values; the
MXFP4 experts multiplied as stored (x rounded to int8 per block, as llama.cpp does) within 2e-2
of the logit range of the reference given x rounded alike.

    gpt_oss_test.py PERT_LOGITS
"""
import os
import shutil
import sys
import tempfile

import numpy as np
import torch

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(here)), "tools"))
sys.path.insert(0, os.path.join(here, "..", "helpers"))  # logits_check
from lib import safetensors_io  # noqa: E402
from reference import moe, reference  # noqa: E402
from logits_check import pert_logits  # noqa: E402


def round_expert_inputs(name, h):
    """reference.forward's `inputs`: an MXFP4 expert's x as pert quantizes it (blocks of 32, d = max|x| / 127,
    q = round(x / d), half to even), other matrices' x as it is."""
    if ".mlp.experts." not in name:
        return h
    x = h.to(torch.float32)
    blocks = x.reshape(*x.shape[:-1], x.shape[-1] // 32, 32)
    d = blocks.abs().amax(dim=-1, keepdim=True) / 127.0
    inv = torch.where(d > 0, 1.0 / d, torch.zeros_like(d))
    return (torch.round(blocks * inv) * d).reshape(x.shape).to(h.dtype)


def main():
    binary = sys.argv[1]
    failures = []
    with tempfile.TemporaryDirectory() as work:
        floats, blocks = os.path.join(work, "f32"), os.path.join(work, "mxfp4")
        moe.make_gpt_oss_model(floats, seed=1)
        moe.make_gpt_oss_model(blocks, seed=1, mxfp4=True)
        config, W = reference.load_model_dir(floats)
        ids = list(np.random.default_rng(5).integers(0, config["vocab_size"], size=24))  # past the window and L
        with torch.no_grad():
            want = reference.forward(config, W, ids).numpy()
        span = float(want.max() - want.min())
        runs = {f"f32 {f'chunk {c}' if c else 'prefill'}": (floats, c, ()) for c in (None, 1, 5)}
        runs["mxfp4 --dtype f32"] = (blocks, None, ("--dtype", "f32"))
        runs["mxfp4 chunk 1 --dtype f32"] = (blocks, 1, ("--dtype", "f32"))
        for what, (model, chunk, extra) in runs.items():
            err = float(np.abs(pert_logits(binary, model, ids, work, chunk=chunk, extra=extra) - want).max())
            print(f"{what:26s} max|Δ| = {err:.2e} (≤ 1e-4)")
            if not err <= 1e-4:
                failures.append(what)
        with torch.no_grad():  # the experts' inputs rounded to int8 per 32 values, as pert multiplies MXFP4
            rounded = reference.forward(config, W, ids, round_expert_inputs).numpy()
        # the float experts in BF16 (as gpt-oss-20b-BF16 ships them), copied as stored, not widened per element
        halves = os.path.join(work, "bf16")
        shutil.copytree(floats, halves)
        tensors = os.path.join(halves, "model.safetensors")
        safetensors_io.save(tensors, safetensors_io.load(tensors), "BF16")
        config16, W16 = reference.load_model_dir(halves)
        with torch.no_grad():
            want16 = reference.forward(config16, W16, ids).numpy()
        for chunk in (None, 1):
            err = float(np.abs(pert_logits(binary, halves, ids, work, chunk=chunk) - want16).max())
            print(f"bf16 {'decode' if chunk else 'prefill':21s} max|Δ| = {err:.2e} (≤ 1e-4)")
            if not err <= 1e-4:
                failures.append(f"bf16 {chunk}")
        for chunk in (None, 1):
            err = float(np.abs(pert_logits(binary, blocks, ids, work, chunk=chunk) - rounded).max()) / span
            print(f"mxfp4 as stored {'decode' if chunk else 'prefill':9s} max|Δ| / range = {err:.2e} (≤ 2e-2)")
            if not err <= 2e-2:
                failures.append(f"mxfp4 as stored {chunk}")
    if failures:
        print("gpt_oss_vs_reference: FAILED:", ", ".join(failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
