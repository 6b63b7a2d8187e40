#!/usr/bin/env python3
"""A model of pert's family (models/NAME) in pert against the PyTorch reference, on held-out text.

    family_test.py NAME PERT_LOGITS [--json OUT]

The held-out split is the last 10% of tinystories_val.txt's stories (tools/train.py's split),
tokenized with the family's tokenizer, BOS before each story. Checks pert's logits against the
float64 reference on the first 4 windows of the trained length L = 128 (max |Δ| ≤ 1e-3, the
bar for BF16-stored weights), then measures the validation perplexity at L with pert: the
split cut into non-overlapping windows of L tokens, each run from an empty cache, every token
after a window's first scored (the ALiBi paper's evaluation).
"""
import json
import math
import os
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "tools"))
sys.path.insert(0, HERE)
import reference  # noqa: E402
import train  # noqa: E402
from logits_check import Checker, pert_logits  # noqa: E402


def validation_ids():
    import sentencepiece as spm
    cfg = train.load_run_config(os.path.join(ROOT, "configs", "train", "family.json"))
    _, val_stories = train.split(cfg)
    sp = spm.SentencePieceProcessor(model_file=os.path.join(ROOT, cfg["tokenizer"]["dir"], "tokenizer.model"))
    return train.encode(sp, val_stories), cfg["train"]["context"]


def main():
    name, binary = sys.argv[1], sys.argv[2]
    model = os.path.join(ROOT, "models", name)
    ids, L = validation_ids()
    n_windows = len(ids) // L
    ids = ids[:n_windows * L].tolist()
    check = Checker(name, tol=1e-3)
    with tempfile.TemporaryDirectory() as tmp:
        logits = pert_logits(binary, model, ids, tmp, window=L)
    config, W = reference.load_model_dir(model)
    for w in range(4):
        with reference.torch.no_grad():
            want = reference.forward(config, W, ids[w * L:(w + 1) * L]).numpy()
        check(f"window {w} of {L} tokens vs reference", logits[w * L:(w + 1) * L], want)

    # Perplexity: within each window, position t predicts token t + 1.
    nll, count = 0.0, 0
    for w in range(n_windows):
        lg = logits[w * L:(w + 1) * L - 1]
        target = np.array(ids[w * L + 1:(w + 1) * L])
        m = lg.max(axis=1, keepdims=True)
        logp = lg - m - np.log(np.exp(lg - m).sum(axis=1, keepdims=True))
        nll -= float(logp[np.arange(len(target)), target].sum())
        count += len(target)
    ppl = math.exp(nll / count)
    print(f"{name}: validation perplexity at L = {L}: {ppl:.3f} ({count} tokens in {n_windows} windows)")
    if "--json" in sys.argv:
        with open(sys.argv[sys.argv.index("--json") + 1], "w") as f:
            json.dump({"name": name, "L": L, "ppl": ppl, "tokens": count, "windows": n_windows}, f)
    return check.exit_code()


if __name__ == "__main__":
    sys.exit(main())
