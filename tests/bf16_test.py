#!/usr/bin/env python3
"""--dtype bf16 against F32 on a real checkpoint: how far the logits move, and the perplexity.

    bf16_test.py PERT_LOGITS PERT

stories260K (stored F32, so BF16 rounds every matrix) over BOS + 511 random token ids, as one
prefill and token by token (the decode path multiplies in BF16 with `vdpbf16ps`), and its
held-out perplexity at its trained length 512 both ways. Bars: max |Δ logit| ≤ 0.25 (logits
reach ~20; BF16 keeps 8 bits) and a perplexity change under 1%. Prints the measured figures.
"""
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from logits_check import pert_logits  # noqa: E402

MODEL = os.path.join(ROOT, "build", "models", "stories260K")
TEXT = os.path.join(ROOT, "..", "shared", "data", "text", "tinystories_val.txt")


def main():
    logits_bin, pert = sys.argv[1], sys.argv[2]
    if not os.path.exists(os.path.join(MODEL, "model.safetensors")) or not os.path.exists(TEXT):
        print("SKIP: build/models/stories260K or ../shared text missing (tools/setup.sh)")
        return 77
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        text = os.path.join(tmp, "text.txt")
        with open(TEXT, encoding="utf-8") as f:
            stories = f.read().split("\n\n")[:120]
        with open(text, "w", encoding="utf-8") as f:
            f.write("\n\n".join(stories))
        with open(os.path.join(MODEL, "config.json")) as f:
            vocab = json.load(f)["vocab_size"]
        rng = np.random.default_rng(0)
        ids = [1] + rng.integers(3, vocab, 511).tolist()
        f32 = pert_logits(logits_bin, MODEL, ids, tmp)
        for chunk, what in ((None, "prefill"), (1, "decode")):
            bf = pert_logits(logits_bin, MODEL, ids, tmp, chunk=chunk, extra=["--bf16"])
            err = float(np.max(np.abs(bf - f32)))
            print(f"bf16 {what:8s} 512 tokens: max |Δ logit| vs F32 = {err:.4f} (|logit| ≤ {np.max(np.abs(f32)):.1f})")
            if not err <= 0.25:
                failures.append(f"{what}: max |Δ| {err}")
        ppl = {}
        for dtype in ("f32", "bf16"):
            r = json.loads(subprocess.run([pert, "perplexity", "-m", MODEL, "-f", text, "--split-docs", "-c", "512",
                                           "--dtype", dtype, "--json"], check=True, capture_output=True,
                                          text=True).stdout)
            ppl[dtype] = r["ppl"]
        change = ppl["bf16"] / ppl["f32"] - 1
        print(f"perplexity at 512 ({r['tokens']} tokens): F32 {ppl['f32']:.4f}, BF16 {ppl['bf16']:.4f} "
              f"({100 * change:+.3f}%)")
        if not abs(change) < 0.01:
            failures.append(f"perplexity change {change}")
    for f in failures:
        print("FAILED:", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
