#!/usr/bin/env python3
"""Where a model's pass-key answers go wrong, token by token (issue 33's diagnosis of the schemes
that do not retrieve within L). On the run config's held-out pass-key rows (the rows train.py
scores as passkey_acc), teacher-forced:

- the accuracy of each answer token: the space piece, then digit 1 (finding the key: it needs the
  needle's "is" found from the question's "is") and digits 2..5 (copying it on: each needs the
  digit after the one just written);
- p(digit 1), the mean probability of the true first digit (1/10 is a model that guesses);
- each wrong later digit: is it a key digit 1 or 2 positions off (a copy that lands near the
  right place, a position blur) or none (not a copy)? By chance about a third would be.

    passkey_digits.py MODEL [MODEL ...] [--run-config configs/train/family.json] [--heads]
                      [--copy-rows] [--json]

--copy-rows adds the copy without the search: on 64 held-out copy rows (train_data.py's "Numbers:
48213 90127. Again: 48213 90127."), the share of the repeat's digits predicted right, each
given the true prefix (by chance about 1/10; a model never trained on the format need not copy).

MODEL: a model directory, or a train.py checkpoint (.pt) of RUN_CONFIG's run (its position block
read from there).
"""
import argparse
import json
import os
import sys
from collections import Counter

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tools/: import by folder (tools/README.md)
from lib import ROOT  # noqa: E402
from reference import reference  # noqa: E402
from train import train  # noqa: E402
from train import train_data  # noqa: E402


def load(model, cfg, vocab):
    """(config, weights) of a model directory or a checkpoint of cfg's run."""
    if os.path.isdir(model):
        return reference.load_model_dir(model)
    if "position" not in cfg:
        sys.exit(f"passkey_digits.py: {model}: a checkpoint needs --run-config naming its run (a position block)")
    ck = train.load_checkpoint(model, torch.device("cpu"))
    hf = dict(cfg["model"], vocab_size=vocab, max_position_embeddings=cfg["train"]["context"],
              position=cfg["position"])
    return hf, {k: v.to(reference.DT) for k, v in ck["weights"].items()}


def diagnose(hf, W, rows, first):
    """The measures above, from the held-out rows [n, T + 1] and each answer's (start, length)."""
    with torch.no_grad():
        logits = reference.forward(hf, W, rows[:, :-1])
    guess = logits.argmax(-1)
    width = max(n for _, n in first)
    hits, p_first, whole, wrong = np.zeros(width), [], 0, Counter()
    for j, (s, n) in enumerate(first):
        want, got = rows[j, s:s + n].tolist(), guess[j, s - 1:s - 1 + n].tolist()
        hits[:n] += [a == b for a, b in zip(want, got)]
        whole += want == got
        p_first.append(float(logits[j, s].softmax(-1)[rows[j, s + 1]]))  # after the space piece
        key = want[1:]
        for i in range(1, len(key)):
            if got[i + 1] != key[i]:
                near = any(0 <= i + o < len(key) and key[i + o] == got[i + 1] for o in (-2, -1, 1, 2))
                wrong["near" if near else "none"] += 1
    return {"rows": len(first), "accuracy": whole / len(first),
            "token_accuracy": [round(h / len(first), 3) for h in hits],
            "p_first_digit": round(float(np.mean(p_first)), 3),
            "wrong_later_digits": {"near": wrong["near"], "none": wrong["none"]}}


def key_start(row, s, n):
    """Where the needle's key (the answer's digits, row[s + 1:s + n]) starts in the row before
    the answer; None if it is not there."""
    key = row[s + 1:s + n]
    return next((t for t in range(s - len(key), -1, -1) if row[t:t + len(key)] == key), None)


def heads(hf, W, rows, first):
    """Per layer and head [L, H]: the previous-token weights at 1 and 2 places back and the copy
    weights on the key digit and on its neighbours (means over the digits of every row)."""
    probs = {}
    with torch.no_grad():
        reference.forward(hf, W, rows[:, :-1], observe=lambda layer, p: probs.__setitem__(layer, p))
    L, H = len(probs), probs[0].shape[1]
    prev, copy, count = np.zeros((L, H, 2)), np.zeros((L, H, 2)), 0
    for j, (s, n) in enumerate(first):
        k = key_start(rows[j].tolist(), s, n)
        if k is None:
            continue
        for i in range(1, n - 1):  # key digit i at k + i; answer digit i is written at s + i
            for layer in range(L):
                p = probs[layer][j]
                prev[layer, :, 0] += p[:, k + i, k + i - 1].numpy()
                prev[layer, :, 1] += p[:, k + i, k + i - 2].numpy()
                copy[layer, :, 0] += p[:, s + i, k + i].numpy()
                copy[layer, :, 1] += (p[:, s + i, k + i - 1] + p[:, s + i, k + i + 1]).numpy()
            count += 1
    prev, copy = prev / count, copy / count
    cell = lambda a: [[[round(float(x), 3) for x in a[l, h]] for h in range(H)] for l in range(L)]
    best = lambda a: [int(x) for x in np.unravel_index(np.argmax(a[..., 0]), a.shape[:2])]
    return {"previous_token": cell(prev), "copy": cell(copy), "sharpest_previous": best(prev),
            "strongest_copy": best(copy)}


def copy_rows(hf, W, sp, cfg):
    """Teacher-forced accuracy on the digits of held-out copy rows' repeats (the tokens after each
    example's last ':' that decode to a digit), and how many there were."""
    rows = train_data.CopyRows(sp, cfg)
    rng = np.random.default_rng([cfg["train"]["seed"], 3])
    ids = np.stack([rows.row(rng) for _ in range(64)])
    with torch.no_grad():
        guess = reference.forward(hf, W, torch.from_numpy(ids[:, :-1])).argmax(-1).numpy()
    colon = sp.encode("Again:")[-1]
    digit = {t for t in range(sp.get_piece_size()) if sp.decode([t]) in tuple("0123456789")}
    hits = total = 0
    for j, row in enumerate(ids.tolist()):
        for a, b in train_data.examples(row):
            colons = [i for i in range(a, b) if row[i] == colon]
            if len(colons) < 2:  # the repeat was cut off by the row's end
                continue
            for i in range(colons[-1] + 1, b):
                if row[i] in digit:
                    total += 1
                    hits += int(guess[j, i - 1] == row[i])
    return {"accuracy": round(hits / total, 3), "digits": total}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("models", nargs="+", metavar="MODEL")
    ap.add_argument("--run-config", default=os.path.join(ROOT, "configs", "train", "family.json"),
                    help="the run config whose held-out rows are read (default %(default)s)")
    ap.add_argument("--heads", action="store_true",
                    help="also the previous-token and copy heads' weights, per layer and head")
    ap.add_argument("--copy-rows", action="store_true",
                    help="also the digits of held-out copy rows' repeats predicted right")
    ap.add_argument("--json", action="store_true", help="one JSON object per model")
    a = ap.parse_args()
    torch.set_num_threads(1)
    cfg = train_data.load_run_config(a.run_config)
    sp, _ = train.tokenizer(cfg)
    rows, first = train_data.heldout_passkey(sp, cfg, np.random.default_rng([cfg["train"]["seed"], 2]))
    rows = torch.from_numpy(rows)
    for model in a.models:
        if not os.path.exists(model):
            sys.exit(f"passkey_digits.py: {model}: no such model directory or checkpoint")
        hf, W = load(model, cfg, sp.get_piece_size())
        d = dict(model=model, **diagnose(hf, W, rows, first))
        if a.heads:
            d["heads"] = heads(hf, W, rows, first)
        if a.copy_rows:
            d["copy_rows"] = copy_rows(hf, W, sp, cfg)
        if a.json:
            print(json.dumps(d))
        else:
            w = d["wrong_later_digits"]
            print(f"{model}: {d['rows']} rows, whole answers {d['accuracy']:.2f}; per token (space, digits 1-5) "
                  f"{' '.join(f'{x:.2f}' for x in d['token_accuracy'])}; p(digit 1) {d['p_first_digit']:.3f}; "
                  f"wrong later digits: {w['near']} a key digit 1-2 off, {w['none']} not")
            if a.heads:
                h = d["heads"]
                (pl, ph), (cl, ch) = h["sharpest_previous"], h["strongest_copy"]
                p1, p2 = h["previous_token"][pl][ph]
                c0, c1 = h["copy"][cl][ch]
                print(f"  sharpest previous-token head: layer {pl} head {ph}, weight {p1:.2f} 1 back, "
                      f"{p2:.2f} 2 back; strongest copy head: layer {cl} head {ch}, weight {c0:.2f} "
                      f"on the key digit, {c1:.2f} on its neighbours")
            if a.copy_rows:
                c = d["copy_rows"]
                print(f"  copy rows: {c['accuracy']:.2f} of {c['digits']} repeated digits right")


if __name__ == "__main__":
    main()
