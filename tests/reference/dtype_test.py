#!/usr/bin/env python3
"""--dtype bf16 or q8, or --cache-type bf16, f16 or q8, against F32 on real checkpoints: how far
the logits move, and perplexity.

    dtype_test.py KIND PERT_LOGITS PERT      KIND: bf16 | q8 | cache-bf16 | cache-f16 | cache-q8

stories260K (stored F32, so every matrix is rounded) over BOS + 511 random token ids, as one
prefill and token by token (the decode kernels), and its held-out perplexity at its trained
length 512 both ways; with q8 and the caches also every model of pert's family (models/NAME with
a card.json) on the first quarter of its held-out stories at L = 128. Bars: max |Δ logit| ≤ 0.25 for bf16 (logits
reach ~20; BF16 keeps 8 bits; measured 0.19), ≤ 0.75 for q8 (x is rounded to 8 bits too, so
about twice BF16's error is expected on these random ids, which no story resembles; measured
0.50 prefill, 0.54 decode); a perplexity change under 1% (the issue's bar).

A narrower KV cache rounds each key and value once, when stored, and prefill reads the cache
back as decoding does (test_ops checks the kernels read exactly the rounded values; prefill and
decoding still differ by more than in F32, ~1e-2, where their last-bit differences in a key
fall on either side of a rounding boundary). Each against F32 within LOGIT_BAR, also on
models/rope at 4 L under the paths a cache is read by besides the plain one: keys rotated when
read (dynamic NTK), a far pass with its own cached keys (Self-Extend) and attention sinks
(StreamingLLM). The caches' bars are a few times what was measured. Prints the figures.
"""
import glob
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(HERE, "..", "helpers"))
from logits_check import pert_logits  # noqa: E402

MODEL = os.path.join(ROOT, "build", "models", "stories260K")
TEXT = os.path.join(ROOT, "..", "shared", "data", "text", "tinystories_val.txt")
HELDOUT = os.path.join(ROOT, "build", "data", "tinystories_heldout.txt")
# Caches, measured on stories260K's random ids: max |Δ logit| 0.25 (bf16), 0.038 (f16), 1.10 (q8:
# its head_dim 8 makes each block 8 values, so one large value sets a coarse step for the rest;
# 0.08 on the rope model, head_dim 32); perplexity +0.012%, -0.001%, +0.07%, the family's within 0.005%.
LOGIT_BAR = {"bf16": 0.25, "q8": 0.75, "cache-bf16": 0.5, "cache-f16": 0.1, "cache-q8": 2.0}
PPL_BAR = {"bf16": 0.01, "q8": 0.01, "cache-bf16": 0.001, "cache-f16": 0.0005, "cache-q8": 0.003}
ROPE = os.path.join(ROOT, "models", "rope")
# The ways a cache is read besides the plain one (pert_logits --set values).
CACHE_PATHS = {"dynamic NTK": ["position=null", 'rope_scaling={"rope_type": "dynamic", "factor": 4.0}'],
               "Self-Extend": ["extend.self_extend={}"], "StreamingLLM": ["extend.streaming={}"]}


def flags(kind, value=None):
    """pert's flags for KIND (bf16, q8, cache-bf16, ...), or F32's with value "f32"."""
    cache = kind.startswith("cache-")
    return ["--cache-type" if cache else "--dtype", value or (kind[len("cache-"):] if cache else kind)]


def perplexity(pert, model, text, ctx, flag):
    r = json.loads(subprocess.run([pert, "perplexity", "-m", model, "-f", text, "--split-docs", "-c", str(ctx),
                                   "--json"] + flag, check=True, capture_output=True, text=True).stdout)
    return r["ppl"], r["tokens"]


def compare_ppl(pert, model, text, ctx, kind, failures):
    (f32, tokens), (low, _) = (perplexity(pert, model, text, ctx, flags(kind, v)) for v in ("f32", None))
    change = low / f32 - 1
    print(f"{os.path.basename(model):12s} perplexity at {ctx} ({tokens} tokens): F32 {f32:.4f}, "
          f"{kind} {low:.4f} ({100 * change:+.3f}%)")
    if not abs(change) < PPL_BAR[kind]:
        failures.append(f"{model}: perplexity change {change}")


def compare_logits(logits_bin, model, ids, tmp, kind, failures, sets=(), label=""):
    extra = [a for s in sets for a in ("--set", s)]
    f32 = pert_logits(logits_bin, model, ids, tmp, extra=extra)
    for chunk, what in ((None, "prefill"), (1, "decode")):
        low = pert_logits(logits_bin, model, ids, tmp, chunk=chunk, extra=extra + flags(kind))
        err = float(np.max(np.abs(low - f32)))
        print(f"{kind} {label}{what:8s} {len(ids)} tokens: max |Δ logit| vs F32 = {err:.4f} "
              f"(|logit| ≤ {np.max(np.abs(f32)):.1f})")
        if not err <= LOGIT_BAR[kind]:
            failures.append(f"{label}{what}: max |Δ| {err}")


def main():
    kind, logits_bin, pert = sys.argv[1], sys.argv[2], sys.argv[3]
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
        compare_logits(logits_bin, MODEL, ids, tmp, kind, failures)
        if kind.startswith("cache-") and os.path.exists(os.path.join(ROPE, "model.safetensors")):
            with open(os.path.join(ROPE, "config.json")) as f:
                rope_ids = [1] + rng.integers(3, json.load(f)["vocab_size"], 511).tolist()  # 4 L
            for label, sets in CACHE_PATHS.items():
                compare_logits(logits_bin, ROPE, rope_ids, tmp, kind, failures, sets, f"rope {label}: ")
        compare_ppl(pert, MODEL, text, 512, kind, failures)
        if kind != "bf16":
            if not os.path.exists(HELDOUT):
                subprocess.run([sys.executable, os.path.join(ROOT, "tools", "train", "heldout.py"), HELDOUT], check=True,
                               stdout=subprocess.DEVNULL)
            family_text = os.path.join(tmp, "family.txt")  # the first quarter of the stories: ~5,000 tokens
            with open(HELDOUT, encoding="utf-8") as f:
                stories = f.read().split("\n\n")
            with open(family_text, "w", encoding="utf-8") as f:
                f.write("\n\n".join(stories[:len(stories) // 4]))
            for card in sorted(glob.glob(os.path.join(ROOT, "models", "*", "card.json"))):
                compare_ppl(pert, os.path.dirname(card), family_text, 128, kind, failures)
    for f in failures:
        print("FAILED:", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
