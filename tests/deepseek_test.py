#!/usr/bin/python3
"""DeepSeek V3 and V2 (multi-head latent attention, DeepSeek's routers and shared experts) against
the float64 reference (tools/reference/deepseek.py, written from HF's modeling files): a tiny
random-weight checkpoint per case with the real tensor names and config keys; pert's logits within
1e-4 of the reference's at every position, in one prefill, token by token and in chunks of 5
(the cached keys and values are each head's expanded ones).

    deepseek_test.py PERT_LOGITS [CASE ...]
"""
import os
import sys
import tempfile

import numpy as np
import torch

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(here), "tools"))
from reference import deepseek, reference  # noqa: E402
from logits_check import pert_logits  # noqa: E402

# case: (kind, YaRN, config keys over deepseek.TINY's)
CASES = {
    "v3": ("v3", False, {}),  # q through q_lora_rank, interleaved rope pairs, v narrower than k
    "v3_half_rope_yarn": ("v3", True, {"rope_interleave": False}),  # halves turned; YaRN: scale × m²
    "v3_no_norm": ("v3", False, {"norm_topk_prob": False, "n_group": 2, "topk_group": 1, "v_head_dim": 20}),
    "v2_lite": ("v2", False, {}),  # q_proj, softmax greedy top-3, two shared experts
    "v2_lite_yarn": ("v2", True, {}),  # YaRN without V3's m² (HF's V2 class)
}


def run_case(binary, name, work, failures):
    kind, yarn, extra = CASES[name]
    src = os.path.join(work, "src")
    deepseek.make_deepseek_model(src, kind, seed=len(name), yarn=yarn, extra_config=extra)
    config, W = reference.load_model_dir(src)
    ids = list(np.random.default_rng(3).integers(0, config["vocab_size"], size=24))
    with torch.no_grad():
        want = reference.forward(config, W, ids).numpy()
    for chunk in (None, 1, 5):
        got = pert_logits(binary, src, ids, work, chunk=chunk)
        err = float(np.abs(got - want).max())
        what = f"chunk {chunk}" if chunk else "prefill"
        print(f"{name:18s} {what:8s} max|Δ| = {err:.2e} (≤ 1e-4; logits' range {np.abs(want).max():.1f})")
        if not err <= 1e-4:
            failures.append(f"{name} {what}")


def main():
    binary, names = sys.argv[1], sys.argv[2:] or list(CASES)
    failures = []
    for name in names:
        with tempfile.TemporaryDirectory() as work:
            run_case(binary, name, work, failures)
    if failures:
        print("deepseek_vs_reference: FAILED:", ", ".join(failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
