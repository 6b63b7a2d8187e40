#!/usr/bin/env python3
"""The family's results as the papers report them: Markdown tables from `pert sweep` and `pert
passkey` files.

    paper_shapes.py ratios SWEEP.json          # PPL ÷ PPL(L) per row, beside the ALiBi paper's Table 2
    paper_shapes.py passkey PASSKEY.json ...   # accuracy by prompt length (mean over depths), a row per file
    paper_shapes.py keys SWEEP.json            # PPL and key-token PPL (LongPPL) per row and length

ratios: each row of the sweep (model × config) as its perplexity at every length divided by its
perplexity at the trained length L, then the ALiBi paper's Table 2 (Press et al. 2022,
WikiText-103, 247M parameters, L = 512; docs/design.md) as the same ratios at its lengths
(L, 2L, 5L, 11L, 30L) for the four schemes it shares with the family. A row with no cell at L is
left out (its ratios mean nothing). passkey: a row per file (its model, config label and
scheme), a column per prompt length, each the accuracy over that length's depths and trials.
keys: a sweep run with --key-tokens, each cell as "PPL / LongPPL" (LongPPL: the perplexity over the
key tokens alone, Fang et al. 2025), under each length the key tokens chosen there (one count
where one evaluator chose them for every row, as --key-model does; else each row's in brackets),
and a line saying who chose them and how.
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tools/: import by folder (tools/README.md)
from lib import open_result  # noqa: E402  (NAME.json or NAME.json.gz)

# ALiBi paper, Table 2 (WikiText-103 valid, trained at L = 512): PPL at L, 2L, 5L, 11L, 30L.
ALIBI_TABLE2 = {
    "sinusoidal": [20.05, 43.54, 132.41, 240.44, 406.01],
    "rotary": [20.07, 21.37, 31.58, 43.14, 79.25],
    "T5 bias": [19.65, 18.79, 20.41, 29.54, None],  # OOM at 30L in the paper
    "ALiBi": [19.73, 18.73, 18.41, 18.36, 18.31],
}
TABLE2_MULTIPLES = [1, 2, 5, 11, 30]


def load(path):
    """A result file's JSON (plain or .json.gz), or a one-line error naming the file (and the tool that read it)."""
    try:
        with open_result(path) as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        sys.exit(f"{os.path.basename(sys.argv[0])}: {path}: {e}")


def ratios(path):
    sweep = load(path)
    rows = {}  # (model, label) -> {length: ppl}
    trained = {}
    for c in sweep.get("cells", []):
        if c.get("ppl") is None:
            continue
        key = (c["model"], c["label"], c.get("position_label", ""))
        rows.setdefault(key, {})[c["length"]] = c["ppl"]
        trained[key] = c["trained_length"]
    lengths = sorted({n for r in rows.values() for n in r})
    L = min(trained.values(), default=1)  # the family's L (a row trained longer still divides by its own)
    out = ["| model | config | positions | " + " | ".join(f"{n} ({n / L:g}×)" for n in lengths) + " |",
           "|---|---|---|" + "---:|" * len(lengths)]
    for (model, label, position), cells in rows.items():
        at_L = cells.get(trained[(model, label, position)])
        if at_L is None:
            continue
        out.append(f"| {model.rstrip('/').split('/')[-1]} | {label} | {position} | " +
                   " | ".join(f"{cells[n] / at_L:.2f}" if n in cells else "—" for n in lengths) + " |")
    out += ["", "| ALiBi paper, Table 2 | " + " | ".join(f"{m}L" for m in TABLE2_MULTIPLES) + " |",
            "|---|" + "---:|" * len(TABLE2_MULTIPLES)]
    for scheme, ppl in ALIBI_TABLE2.items():
        out.append(f"| {scheme} | " + " | ".join("OOM" if p is None else f"{p / ppl[0]:.2f}" for p in ppl) + " |")
    return "\n".join(out)


def passkey(paths):
    results = [load(p) for p in paths]
    lengths = sorted({c["length"] for r in results for c in r["cells"]})
    out = ["| model | config | positions | " + " | ".join(str(n) for n in lengths) + " |",
           "|---|---|---|" + "---:|" * len(lengths)]
    for r in results:
        by_length = {}
        for c in r["cells"]:
            correct, trials = by_length.get(c["length"], (0, 0))
            by_length[c["length"]] = (correct + c["correct"], trials + len(c["results"]))
        config = ",".join([os.path.basename(c).removesuffix(".json") for c in r.get("config") or []] +
                          list(r.get("set") or [])) or "plain"
        model = r["model_dir"].rstrip("/").split("/")[-1]
        out.append(f"| {model} | {config} | {r['position_label']} | " +
                   " | ".join(f"{by_length[n][0] / by_length[n][1]:.2f}" if n in by_length else "—" for n in lengths) + " |")
    return "\n".join(out)


def keys(path):
    sweep = load(path)
    s = sweep.get("settings", {})
    if not s.get("key_tokens"):
        sys.exit(f"paper_shapes.py: {path}: a sweep without key tokens (run it with --key-tokens)")
    rows, counts = {}, {}  # (model, label, positions) -> {length: cell}; length -> {key token counts}
    for c in sweep.get("cells", []):
        if c.get("ppl") is None:
            continue
        rows.setdefault((c["model"], c["label"], c.get("position_label", "")), {})[c["length"]] = c
        counts.setdefault(c["length"], set()).add(c.get("key_tokens"))
    lengths = sorted(counts)
    shared = all(len(k) == 1 for k in counts.values())  # one evaluator: the same key tokens in every row

    def head(n):
        return f"{n} (k = {next(iter(counts[n]))})" if shared else str(n)

    def cell(c):
        if c is None:
            return "—"
        key = "—" if c.get("key_ppl") is None else f"{c['key_ppl']:.2f}"
        return f"{c['ppl']:.2f} / {key}" + ("" if shared else f" [{c.get('key_tokens')}]")

    evaluator = s.get("key_model") or "each row's own model"
    if s.get("key_config"):
        evaluator += " under " + ", ".join(os.path.basename(c) for c in s["key_config"])
    out = [f"PPL / key-token PPL (LongPPL); k: the key tokens, chosen by {evaluator}: log-probability gain over a "
           f"short context of {s['key_short']}-{s['key_short'] + s['key_step'] - 1} tokens above {s['key_alpha']:g}, "
           f"log-probability above {s['key_beta']:g}", "",
           "| model | config | positions | " + " | ".join(head(n) for n in lengths) + " |",
           "|---|---|---|" + "---:|" * len(lengths)]
    for (model, label, position), cells in rows.items():
        out.append(f"| {model.rstrip('/').split('/')[-1]} | {label} | {position} | " +
                   " | ".join(cell(cells.get(n)) for n in lengths) + " |")
    return "\n".join(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True, metavar="{ratios,passkey,keys}")
    r = sub.add_parser("ratios", help="PPL ÷ PPL(L) per sweep row, beside the ALiBi paper's Table 2")
    r.add_argument("sweep", metavar="SWEEP.json", help="a `pert sweep --out` file")
    p = sub.add_parser("passkey", help="pass-key accuracy by length, a row per file")
    p.add_argument("files", metavar="PASSKEY.json", nargs="+", help="`pert passkey --json-out` files")
    k = sub.add_parser("keys", help="PPL and key-token PPL (LongPPL) per sweep row and length")
    k.add_argument("sweep", metavar="SWEEP.json", help="a `pert sweep --key-tokens --out` file")
    a = ap.parse_args()
    print(ratios(a.sweep) if a.cmd == "ratios" else keys(a.sweep) if a.cmd == "keys" else passkey(a.files))


if __name__ == "__main__":
    main()
