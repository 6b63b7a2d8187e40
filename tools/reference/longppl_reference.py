#!/usr/bin/env python3
"""Key-token perplexity (LongPPL) in float64: the truth `pert perplexity --key-tokens` is checked against.

LongPPL is Fang et al., ICLR 2025, "What is Wrong with Perplexity for Long-context Language
Modeling?" (github.com/PKU-ML/LongPPL, longppl/longppl.py). An evaluator scores each scored token x
twice: with its window's whole context (long) and with a short one. With
    LSD = ln p(x | long) - ln p(x | short),   LCL = ln p(x | long),
x is a key token when LSD > alpha and LCL > beta (paper: alpha 2, beta -2), and LongPPL is the
scored model's perplexity over the key tokens only.

The short contexts, as the paper's code forms them (written here from the definition in
include/pert/perplexity.hpp, not from pert's C++): in a window whose position 0 is BOS (h = 1) or
text (h = 0), the first token with more than N = short_len text tokens before it is at
q_first = h + N + 1. From there the window's tokens go in runs of S = step; a token q of the run
starting at q0 = q_first + S * ((q - q_first) // S) is read with the short context
    [BOS, if h] + window[q0 - N : q],
so with N to N + S - 1 text tokens. Tokens before q_first have short = long: LSD = 0.

The windows are those of pert perplexity (include/pert/perplexity.hpp): chunks (BOS + n_ctx - 1
text tokens, every text token scored), sliding (moved by the stride, the first window scoring all
its tokens and the others their last `stride`) and llama (the stream's n_ctx-token chunks, BOS in
place of the first, positions n_ctx // 2 + 1 .. n_ctx - 1 scored).

    longppl_reference.py MODEL_DIR IDS_FILE --ctx N [--mode chunks|sliding|llama] [--stride S]
        [--chunks W] [--bos ID] [--key-short N] [--key-step S] [--key-alpha A] [--key-beta B]
        [--key-model DIR]                        # JSON on stdout

IDS_FILE holds the text's token ids (whitespace-separated decimal integers), as the mode reads
them (llama: the stream with its BOS first).
"""
import argparse
import json
import math
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tools/: import by folder
from reference import reference  # noqa: E402
from reference.passkey_reference import merge_patch  # noqa: E402  (RFC 7386, as pert's --config)


def log_probs(model_dir, patch=None):
    """A function window ids -> float64 log-softmax [len][vocab] of the reference model, memoised;
    `patch`: a config merged over the model's (RFC 7386, as pert's --config and --key-config)."""
    config, W = reference.load_model_dir(model_dir)
    if patch:
        config = merge_patch(config, patch)
    cache = {}

    def logp_of(ids):
        key = tuple(ids)
        if key not in cache:
            with torch.no_grad():
                cache[key] = torch.log_softmax(reference.forward(config, W, list(ids)), dim=-1).numpy()
        return cache[key]

    return logp_of


def windows(tokens, mode, n_ctx, stride, max_windows, bos):
    """Yields (window ids, its first scored position, offset): window position q >= 1 holds
    tokens[offset + q]."""
    if mode == "llama":
        for c in range(len(tokens) // n_ctx):
            if max_windows and c >= max_windows:
                return
            chunk = list(tokens[c * n_ctx:(c + 1) * n_ctx])
            if bos >= 0:
                chunk[0] = bos
            yield chunk, n_ctx // 2 + 1, c * n_ctx
        return
    h = 1 if bos >= 0 else 0
    per = n_ctx - h
    step = per if mode == "chunks" else stride
    w = 0
    while w * step + per <= len(tokens) and (max_windows == 0 or w < max_windows):
        window = ([bos] if h else []) + list(tokens[w * step:w * step + per])
        first = 1 if mode == "chunks" or w == 0 else n_ctx - stride
        yield window, first, w * step - h
        w += 1


def choose(window, first, h, eval_logp, short_len, step, alpha, beta):
    """Key tokens of one window: [(q, lsd, lcl, is_key)] for each scored position q."""
    n_ctx = len(window)
    long_lp = eval_logp(window)
    q_first = h + short_len + 1
    out = []
    for q in range(first, n_ctx):
        lcl = float(long_lp[q - 1, window[q]])
        if q < q_first:
            lsd = 0.0
        else:
            q0 = q_first + step * ((q - q_first) // step)
            q1 = min(q0 + step, n_ctx)
            short = window[:h] + window[q0 - short_len:q1]  # one pass for the run; causal, so token q sees [.. q)
            j = h + short_len + (q - q0)
            lsd = lcl - float(eval_logp(short)[j - 1, short[j]])
        out.append((q, lsd, lcl, lsd > alpha and lcl > beta))
    return out


def longppl(tokens, mode, n_ctx, stride, max_windows, bos, scored_logp, eval_logp, short_len, step=0, alpha=2.0,
            beta=-2.0):
    """The key tokens and LongPPL of `tokens` as pert perplexity --key-tokens defines them."""
    step = step or max(1, short_len // 4)
    h = 1 if bos >= 0 else 0
    nll, key_nll, indices, choices, candidates = [], [], [], [], 0
    for window, first, offset in windows(tokens, mode, n_ctx, stride, max_windows, bos):
        lp = scored_logp(window)
        for q, lsd, lcl, is_key in choose(window, first, h, eval_logp, short_len, step, alpha, beta):
            v = -float(lp[q - 1, window[q]])
            nll.append(v)
            candidates += q >= h + short_len + 1
            index = offset + q
            choices.append({"index": index, "lsd": lsd, "lcl": lcl, "key": is_key, "nll": v})
            if is_key:
                key_nll.append(v)
                indices.append(index)
    key = np.array(key_nll)
    result = {"tokens": len(nll), "ppl": math.exp(float(np.mean(nll))), "key_tokens": len(key_nll),
              "key_candidates": candidates, "key_token_indices": indices, "key_short": short_len, "key_step": step,
              "key_ppl": None, "key_nll": None, "key_ppl_stderr": None, "choices": choices}
    if len(key):
        mean = float(key.mean())
        result["key_nll"] = mean
        result["key_ppl"] = math.exp(mean)
        var = float((key * key).mean()) - mean * mean
        result["key_ppl_stderr"] = result["key_ppl"] * math.sqrt(var / (len(key) - 1)) if len(key) > 1 and var > 0 else 0.0
    return result


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("model_dir")
    ap.add_argument("ids_file")
    ap.add_argument("--ctx", type=int, required=True)
    ap.add_argument("--mode", default="chunks", choices=["chunks", "sliding", "llama"])
    ap.add_argument("--stride", type=int, default=0)
    ap.add_argument("--chunks", type=int, default=0)
    ap.add_argument("--bos", type=int, default=-1)
    ap.add_argument("--key-short", type=int, default=4096)
    ap.add_argument("--key-step", type=int, default=0)
    ap.add_argument("--key-alpha", type=float, default=2.0)
    ap.add_argument("--key-beta", type=float, default=-2.0)
    ap.add_argument("--key-model", default=None)
    a = ap.parse_args()
    with open(a.ids_file) as f:
        tokens = [int(t) for t in f.read().split()]
    stride = a.stride or (a.ctx // 2 if a.mode == "sliding" else 0)
    scored = log_probs(a.model_dir)
    evaluator = log_probs(a.key_model) if a.key_model else scored
    r = longppl(tokens, a.mode, a.ctx, stride, a.chunks, a.bos, scored, evaluator, a.key_short, a.key_step,
                a.key_alpha, a.key_beta)
    del r["choices"]
    json.dump(r, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()
