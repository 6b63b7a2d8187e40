#!/usr/bin/env python3
"""Phi-4-mini's LongRoPE (issue 67) as a user runs it: `pert generate --temp 0` against the
float64 reference's greedy decode, from a model directory and from its GGUF file.

    longrope_test.py PERT

A Phi-4-mini-shaped random model (HF phi3: fused projections, partial_rotary_factor 0.75,
LongRoPE from L0 = 16 of 64 positions; tests/reference/reference_test.py's PHI4_MINI, untied: tied random
embeddings repeat one token) with to_gguf.py's tiny tokenizer. transformers chooses LongRoPE's
short or long factors by the whole sequence's length (max position + 1) for every position of a
forward, and Phi3's prepare_inputs_for_generation drops its cache when a generation first passes
L0, so everything is re-encoded with the long factors; pert re-encodes its cache there too. The
reference's greedy decode runs each step as a full forward over every id so far, its factors
chosen by that length. Two prompts: one shorter than L0 (the generation crosses L0 step by step)
and one longer (the prefill is past L0). With `--set rope_scaling.longrope_choice=position`
(pert's causal choice) pert must give the reference's greedy decode under that choice instead;
the two choices' decodes must differ, or the model would not tell them apart.
"""
import json
import os
import subprocess
import sys
import tempfile

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tools"))
from convert import to_gguf  # noqa: E402
from convert import tokenizer_json  # noqa: E402
from reference import reference  # noqa: E402
from reference_test import PHI4_MINI  # noqa: E402

PROMPTS = ["the sea", "the tea in the pot on a hot stove is the one"]  # 5 and 31 ids: below L0 and past it
N = 24
L0 = PHI4_MINI["original_max_position_embeddings"]


def make(model_dir):
    """The Phi-4-mini-shaped model (seed 0: its two choices' greedy decodes part) with the tiny tokenizer."""
    tokenizer, vocab = to_gguf.tiny_tokenizer()
    reference.make_model(model_dir, None, seed=0, vocab=vocab, hidden=64, heads=4, kv_heads=2, layers=2, ffn=128,
                         trained=64, fused=True, extra_config=PHI4_MINI)
    tokenizer_json.write(tokenizer, os.path.join(model_dir, "tokenizer.json"))


def generate(pert, source, prompt, choice):
    out = subprocess.run([pert, "generate", "-m", source, "-p", prompt, "--temp", "0", "-n", str(N), "-c", "64",
                          "--ignore-eos", "--json", "-t", "2", "--set", f"rope_scaling.longrope_choice={choice}"],
                         capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"pert generate -m {source} failed: {out.stderr.strip()}")
    return json.loads(out.stdout)


def greedy(config, W, ids):
    """N greedy ids after `ids`, each the argmax of a full forward over every id so far."""
    ids = list(ids)
    with torch.no_grad():
        for _ in range(N):
            ids.append(int(torch.argmax(reference.forward(config, W, ids)[-1])))
    return ids[-N:]


def main():
    pert = sys.argv[1]
    failures, want = [], {}
    with tempfile.TemporaryDirectory() as tmp:
        model, gguf = os.path.join(tmp, "phi4_mini"), os.path.join(tmp, "phi4_mini.gguf")
        make(model)
        to_gguf.convert(model, gguf, "F32")
        config, W = reference.load_model_dir(model)
        for choice in ("sequence", "position"):
            chosen = dict(config, rope_scaling=dict(config["rope_scaling"], longrope_choice=choice))
            for prompt in PROMPTS:
                got = {source: generate(pert, source, prompt, choice) for source in (model, gguf)}
                ids = got[model]["prompt_tokens"]
                want[choice, prompt] = greedy(chosen, W, ids)
                for source, what in ((model, "directory"), (gguf, "GGUF file")):
                    same = got[source]["prompt_tokens"] == ids and got[source]["tokens"] == want[choice, prompt]
                    print(f"{choice:8s} {what:9s} prompt of {len(ids):2d} ids (L0 = {L0}), {N} greedy ids vs the "
                          f"float64 reference: {'equal' if same else 'DIFFER'}")
                    if not same:
                        print(f"  pert: {got[source]['tokens']}\n  want: {want[choice, prompt]}")
                        failures.append(f"{choice} {what} prompt of {len(ids)}")
                if prompt == PROMPTS[1] and len(ids) <= L0:
                    failures.append(f"the long prompt has {len(ids)} ids, not past L0 = {L0}")
    for prompt in PROMPTS:
        if want["sequence", prompt] == want["position", prompt]:
            print(f"the choices' greedy decodes of {prompt!r} are the same: this model does not tell them apart")
            failures.append(f"choices alike for {prompt!r}")
    if failures:
        print("longrope_test: FAILED:", ", ".join(failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
