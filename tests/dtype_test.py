#!/usr/bin/env python3
"""--dtype bf16 or q8 against F32 on real checkpoints: how far the logits move, and perplexity.

    dtype_test.py DTYPE PERT_LOGITS PERT

stories260K (stored F32, so every matrix is rounded) over BOS + 511 random token ids, as one
prefill and token by token (the decode kernels), and its held-out perplexity at its trained
length 512 both ways; with q8 also every model of pert's family (models/NAME with a card.json)
on its held-out stories at L = 128. Bars: max |Δ logit| ≤ 0.25 for bf16 (logits reach ~20; BF16
keeps 8 bits; measured 0.19), ≤ 0.75 for q8 (x is rounded to 8 bits too, so about twice BF16's
error is expected on these random ids, which no story resembles; measured 0.50 prefill, 0.54
decode); a perplexity change under 1% everywhere (the issue's bar). Prints the measured figures.
"""
import glob
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
HELDOUT = os.path.join(ROOT, "build", "data", "tinystories_heldout.txt")
LOGIT_BAR = {"bf16": 0.25, "q8": 0.75}


def perplexity(pert, model, text, ctx, dtype):
    r = json.loads(subprocess.run([pert, "perplexity", "-m", model, "-f", text, "--split-docs", "-c", str(ctx),
                                   "--dtype", dtype, "--json"], check=True, capture_output=True, text=True).stdout)
    return r["ppl"], r["tokens"]


def compare_ppl(pert, model, text, ctx, dtype, failures):
    (f32, tokens), (low, _) = (perplexity(pert, model, text, ctx, d) for d in ("f32", dtype))
    change = low / f32 - 1
    print(f"{os.path.basename(model):12s} perplexity at {ctx} ({tokens} tokens): F32 {f32:.4f}, "
          f"{dtype} {low:.4f} ({100 * change:+.3f}%)")
    if not abs(change) < 0.01:
        failures.append(f"{model}: perplexity change {change}")


def main():
    dtype, logits_bin, pert = sys.argv[1], sys.argv[2], sys.argv[3]
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
            low = pert_logits(logits_bin, MODEL, ids, tmp, chunk=chunk, extra=["--dtype", dtype])
            err = float(np.max(np.abs(low - f32)))
            print(f"{dtype} {what:8s} 512 tokens: max |Δ logit| vs F32 = {err:.4f} (|logit| ≤ {np.max(np.abs(f32)):.1f})")
            if not err <= LOGIT_BAR[dtype]:
                failures.append(f"{what}: max |Δ| {err}")
        compare_ppl(pert, MODEL, text, 512, dtype, failures)
    if dtype == "q8":
        if not os.path.exists(HELDOUT):
            subprocess.run([sys.executable, os.path.join(ROOT, "tools", "heldout.py"), HELDOUT], check=True,
                           stdout=subprocess.DEVNULL)
        for card in sorted(glob.glob(os.path.join(ROOT, "models", "*", "card.json"))):
            compare_ppl(pert, os.path.dirname(card), HELDOUT, 128, dtype, failures)
    for f in failures:
        print("FAILED:", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
