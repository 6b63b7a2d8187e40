#!/usr/bin/env python3
"""docs/results/attention.md's tables, from `pert attention --out FILE` results (tools/results/attention_results.sh
measures them), measuring nothing:

    attention_tables.py family FAMILY.json            per model: entropy, sink mass, mean distance and
                                                      largest weight at L, and past L at 2L and 8L
    attention_tables.py methods EXTEND.json           the same for one model under each config (extend methods)
    attention_tables.py layers FILE.json MODEL        one model's entropy and sink mass layer by layer, at each length
    attention_tables.py published FAMILY.json EXTEND.json   the published observations beside the family's figures

Every figure is a mean over heads (and over layers unless a table is by layer) of the per-head
means `pert attention` reports; L is each model's trained length. The uniform reference, ln-n,
is the entropy of weights spread evenly over every key a query sees, averaged over the same
queries: mean of ln(m + 1) over positions m of the range.
"""
import argparse
import json
import math
import os
import sys

STATS = ("entropy", "sink_mass", "mean_distance", "max_weight")


def load(path):
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError) as e:
        sys.exit(f"attention_tables.py: {path}: {e}")
    if not isinstance(data, dict) or data.get("settings", {}).get("measure") != "attention":
        sys.exit(f"attention_tables.py: {path}: not a pert attention file")
    return data


def name(cell):
    return os.path.basename(os.path.normpath(cell["model"]))


def rows(data):
    """{(model, label): {length: cell}} in the file's order, and each row's trained length."""
    out, trained = {}, {}
    for c in data["cells"]:
        key = (name(c), c["label"])
        out.setdefault(key, {})[c["length"]] = c
        if "trained_length" in c:
            trained[key] = c["trained_length"]
    return out, trained


def mean(values):
    flat = [v for row in values for v in (row if isinstance(row, list) else [row]) if v is not None]
    return sum(flat) / len(flat) if flat else float("nan")


def stat(cell, queries, key):
    """The mean over every layer and head, or None where the cell or its range is missing."""
    if cell is None or "error" in cell or queries not in cell["attention"]:
        return None
    return mean(cell["attention"][queries][key])


def uniform_entropy(first, last):
    """Mean of ln(m + 1) over positions first..last: the entropy of even weights over every earlier key."""
    return sum(math.log(m + 1) for m in range(first, last + 1)) / (last - first + 1)


def fmt(v, digits=2):
    return "—" if v is None or v != v else f"{v:.{digits}f}"


def at_lengths(cells, L):
    """The cells at L (all queries), 2L and 8L (past L), as the tables read them."""
    return [(cells.get(L), "all"), (cells.get(2 * L), "past_L"), (cells.get(8 * L), "past_L")]


def summary_table(data, first_column):
    table, trained = rows(data)
    head = (f"| {first_column} | entropy L | 2L | 8L | uniform 8L | sink mass L | 2L | 8L | mean distance L | 2L | 8L "
            "| largest weight L | 8L |\n|---|" + "---:|" * 13)
    out = [head]
    errors = []
    for key, cells in table.items():
        L = trained.get(key)
        if not L:
            continue
        at = at_lengths(cells, L)
        ent = [stat(c, q, "entropy") for c, q in at]
        sink = [stat(c, q, "sink_mass") for c, q in at]
        dist = [stat(c, q, "mean_distance") for c, q in at]
        top = [stat(c, q, "max_weight") for c, q in at]
        label = key[0] if first_column == "model" else key[1]
        out.append(f"| {label} | " + " | ".join(fmt(v) for v in ent) + f" | {uniform_entropy(L, 8 * L - 1):.2f} | "
                   + " | ".join(fmt(v, 3) for v in sink) + " | " + " | ".join(fmt(v, 1) for v in dist) + " | "
                   + f"{fmt(top[0], 3)} | {fmt(top[2], 3)} |")
        for c, _ in at:
            if c is not None and "error" in c:
                errors.append(f"— {label} @{c['length']}: {c['error']}")
    return "\n".join(out + ([""] + errors if errors else []))


def layers_table(data, model):
    table, trained = rows(data)
    keys = [k for k in table if k[0] == model]
    if not keys:
        sys.exit(f"attention_tables.py: no cells of model {model}")
    key = keys[0]
    cells, L = table[key], trained[key]
    lengths = sorted(n for n, c in cells.items() if "error" not in c)
    cols = [(n, q) for n in lengths for q in (("all",) if n <= L else ("in_L", "past_L"))]
    names = [f"{n} {'' if q == 'all' else q.replace('_', ' ')}".strip() for n, q in cols]
    out = []
    for key_stat, title, digits in (("entropy", "entropy", 2), ("sink_mass", "sink mass", 3)):
        out.append(f"| {title} by layer | " + " | ".join(names) + " |\n|---|" + "---:|" * len(cols))
        n_layers = len(cells[lengths[0]]["attention"]["all"][key_stat])
        for layer in range(n_layers):
            out.append(f"| layer {layer} | " + " | ".join(
                fmt(mean(cells[n]["attention"][q][key_stat][layer]), digits) for n, q in cols) + " |")
        out.append("")
    return "\n".join(out).rstrip()


def bucket_mass(cell, queries, first, last):
    """Mass over the buckets whose distances lie in [first, last], mean over layers and heads."""
    if cell is None or "error" in cell or queries not in cell["attention"]:
        return None
    mass = cell["attention"][queries]["mass"]
    picks = [k for k, (a, b) in enumerate(cell["buckets"]) if a >= first and b <= last]
    return mean([[sum(head[k] for k in picks) for head in layer] for layer in mass])


def published_table(family, extend):
    fam, trained = rows(family)
    ext, ext_trained = rows(extend)

    def cell(table, model, label, length):
        return table.get((model, label), {}).get(length)

    out = ["| observation (source) | published | the family (pert attention, WikiText-2) |", "|---|---|---|"]
    # 1. StreamingLLM: the first token's weight past the bottom two layers
    rope = cell(fam, "rope", "plain", 128)
    per_layer = [mean(layer) for layer in rope["attention"]["all"]["sink_mass"]] if rope else []
    out.append("| the first token takes much of the weight in every layer but the bottom two (StreamingLLM, App. F Fig. 12: "
               "Llama-2-7B, query at 4096 = L) | more than half, layers 2–31 | rope at L, by layer: "
               + ", ".join(f"{v:.2f}" for v in per_layer) + " |")
    # 2. Gu et al.: share of heads whose first-token mass passes 0.3 at T = 64
    shares = []
    for (model, label), cells in fam.items():
        c = cells.get(64)
        if c is None or "error" in c:
            continue
        heads = [v for layer in c["attention"]["all"]["sink_mass"] for v in layer]
        shares.append(f"{model} {100 * sum(v > 0.3 for v in heads) / len(heads):.0f}%")
    out.append("| share of heads with mean first-token weight > 0.3 at 64 tokens (Gu et al. 2025, Table 1) | "
               "LLaMA2-7B 92.47%, Mistral-7B 97.49%, GPT2-XL 77.00% | " + ", ".join(shares) + " |")
    # 3. log-n / SSMax: entropy toward ln n and the largest weight ~ 1/n past L; log-n holds it
    L = ext_trained.get(("rope", "plain"), 128)
    parts = []
    for label in ("plain", "logn"):
        ent = [stat(cell(ext, "rope", label, n), "all" if n == L else "past_L", "entropy") for n in (L, 2 * L, 8 * L)]
        top = [stat(cell(ext, "rope", label, n), "all" if n == L else "past_L", "max_weight") for n in (L, 8 * L)]
        parts.append(f"rope {label}: entropy {' → '.join(fmt(v) for v in ent)}, largest weight "
                     f"{' → '.join(fmt(v, 3) for v in top)}")
    out.append("| with plain softmax, entropy rises toward ln n and the largest weight falls as n grows; scaling the "
               "logits by log n holds entropy (Su 2021; Chiang & Cholak 2022; Nakanishi 2025, Fig. 1) | uniform over n "
               f"keys: ln n; Fig. 1's input: largest weight 0.127 at 1K, 0.035 at 4K | at L, 2L, 8L (past L): "
               + "; ".join(parts) + f"; uniform: {uniform_entropy(0, L - 1):.2f}, {uniform_entropy(L, 2 * L - 1):.2f}, "
               f"{uniform_entropy(L, 8 * L - 1):.2f} |")
    # 4. Kazemnejad et al.: NoPE and T5 near and far, ALiBi near, RoPE spread
    parts = []
    for model in ("none", "t5", "alibi", "rope"):
        c = cell(fam, model, "plain", 128)
        if c is None:
            continue
        near, far = bucket_mass(c, "all", 0, 3), bucket_mass(c, "all", 32, 127)
        parts.append(f"{model} {fmt(near)} / {fmt(far)}")
    out.append("| NoPE's and T5's attention reaches near and far, ALiBi's stays near, RoPE's spreads evenly (Kazemnejad "
               "et al. 2023, §6.1 Fig. 7; small models, synthetic tasks) | bimodal / short-range / uniform | mass at "
               "distance 0–3 / 32–127, at L: " + ", ".join(parts) + " |")
    # 5. Entropy-ABF: the bottom two layers near uniform, their entropy rising with n; deeper layers flat
    rope64, rope128 = cell(fam, "rope", "plain", 64), cell(fam, "rope", "plain", 128)
    if rope64 and rope128:
        rise = [mean(b) - mean(a) for a, b in zip(rope64["attention"]["all"]["entropy"], rope128["attention"]["all"]["entropy"])]
        out.append("| within L, only the bottom two layers' entropy rises with the context; deeper layers hold it "
                   "(Zhang et al. 2024, §3.1 Fig. 1: LLaMA-2-7B-Chat, 1K to 2K) | qualitative | rope, entropy at 128 "
                   f"minus at 64 by layer: {', '.join(f'{v:+.2f}' for v in rise)} (uniform: "
                   f"{uniform_entropy(0, 127) - uniform_entropy(0, 63):+.2f}) |")
    return "\n".join(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="what", required=True)
    for what, nargs in (("family", 1), ("methods", 1), ("published", 2)):
        sub.add_parser(what).add_argument("files", nargs=nargs)
    lay = sub.add_parser("layers")
    lay.add_argument("files", nargs=1)
    lay.add_argument("model")
    a = ap.parse_args()
    data = [load(p) for p in a.files]
    if a.what == "family":
        print(summary_table(data[0], "model"))
    elif a.what == "methods":
        print(summary_table(data[0], "config"))
    elif a.what == "layers":
        print(layers_table(data[0], a.model))
    else:
        print(published_table(*data))


if __name__ == "__main__":
    main()
