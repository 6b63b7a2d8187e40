#!/usr/bin/env python3
"""`pert perplexity --key-tokens` (LongPPL) against the float64 reference's choice of key tokens.

    longppl_test.py PERT

The text is perplexity_test.py's: the first held-out stories of the family's split. For each case
the reference (tools/reference/longppl_reference.py) computes, from the float64 model's logits, the
evaluator's long and short log-probabilities of every scored token, chooses the key tokens and
their perplexity under the scored model; pert must choose the same tokens (their indices in the
text), count the same candidates, and give the same LongPPL (rel 1e-4). A token whose LSD or LCL
lies within 1e-4 of its threshold may fall either way in float32: such tokens are named and left
out of the comparison (none is expected at these sizes). Then `pert sweep --key-tokens`: its
cells count the same key tokens as pert perplexity, and its table and CSV carry them; and the key
flags are refused without --key-tokens.
"""
import csv
import json
import math
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "helpers"))
sys.path.insert(0, os.path.join(ROOT, "tools"))
from perplexity_test import BOS, held_out_text  # noqa: E402  (exits 77 when the data is missing)
from reference import longppl_reference  # noqa: E402
from checklist import check, close, finish  # noqa: E402

BORDER = 1e-4
# (scored model, evaluator or None, mode, n_ctx, stride, --chunks, key_short, key_step, alpha, beta,
#  --key-config or None)
LINEAR_X2 = os.path.join(ROOT, "configs", "rope", "linear-x2.json")
CASES = [
    ("rope", None, "chunks", 128, 0, 0, 16, 4, 2.0, -2.0, None),     # the paper's thresholds, within L
    ("rope", None, "chunks", 128, 0, 4, 32, 1, 0.5, -3.0, None),     # exactly the last 32 tokens
    ("rope", None, "sliding", 256, 64, 3, 48, 16, 1.0, -2.0, None),  # past L, the last 64 of each window
    ("alibi", "rope", "chunks", 128, 0, 4, 24, 8, 1.0, -2.0, None),  # another model chooses
    ("alibi", "rope", "chunks", 256, 0, 3, 48, 16, 1.0, -2.0, LINEAR_X2),  # ... under a config of its own
    ("rope", None, "llama", 128, 0, 2, 16, 0, 1.0, -2.0, None),      # llama-perplexity's chunks, step 16 / 4
]


def main():
    binary = sys.argv[1]
    text, ids, stream = held_out_text()
    logp = {}

    def model_logp(name, config=None):
        if (name, config) not in logp:
            patch = None
            if config:
                with open(config) as f:
                    patch = json.load(f)
            logp[name, config] = longppl_reference.log_probs(os.path.join(ROOT, "models", name), patch)
        return logp[name, config]

    with tempfile.TemporaryDirectory() as tmp:
        text_file = os.path.join(tmp, "heldout.txt")
        with open(text_file, "w", encoding="utf-8") as f:
            f.write(text)
        for name, evaluator, mode, n_ctx, stride, chunks, short, step, alpha, beta, key_config in CASES:
            cmd = [binary, "perplexity", "-m", os.path.join(ROOT, "models", name), "-f", text_file, "-c", str(n_ctx),
                   "--mode", mode, "--chunks", str(chunks), "-t", "1", "--json", "--key-tokens", "--key-short", str(short),
                   "--key-alpha", str(alpha), "--key-beta", str(beta)]
            cmd += ["--key-step", str(step)] if step else []
            cmd += ["--split-docs"] if mode != "llama" else []
            cmd += ["--stride", str(stride)] if stride else []
            cmd += ["--key-model", os.path.join(ROOT, "models", evaluator)] if evaluator else []
            cmd += ["--key-config", key_config] if key_config else []
            run = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            if run.returncode != 0:
                sys.exit(f"{' '.join(cmd)}: exit {run.returncode}\n{run.stderr}")
            got = json.loads(run.stdout)
            tokens = stream if mode == "llama" else ids
            want = longppl_reference.longppl(tokens, mode, n_ctx, stride, chunks, BOS, model_logp(name),
                                             model_logp(evaluator or name, key_config), short, step, alpha, beta)
            label = f"{name} {mode} -c {n_ctx} short {short} step {want['key_step']} alpha {alpha} beta {beta}" + (
                f" chosen by {evaluator}" if evaluator else "") + (f" under {os.path.basename(key_config)}" if key_config else "")
            border = {c["index"] for c in want["choices"]
                      if abs(c["lsd"] - alpha) < BORDER or abs(c["lcl"] - beta) < BORDER}
            nearest = min(min(abs(c["lsd"] - alpha), abs(c["lcl"] - beta)) for c in want["choices"])
            print(f"{label}: {got['key_tokens']} key tokens of {got['tokens']} ({got['key_candidates']} candidates), "
                  f"LongPPL {got['key_ppl']} (reference {want['key_ppl']}), PPL {got['ppl']:.4f}"
                  + f"; nearest a threshold {nearest:.1e}" + (f", {len(border)} on one" if border else ""))
            check(f"{label}: no key token: the case tests nothing", want["key_tokens"] > 0)
            check(f"{label}: tokens {got['tokens']} != {want['tokens']}", got["tokens"] == want["tokens"])
            check(f"{label}: candidates {got['key_candidates']} != {want['key_candidates']}",
                  got["key_candidates"] == want["key_candidates"])
            check(f"{label}: key_step {got['key_step'] if 'key_step' in got else None}",
                  got.get("key_step") == want["key_step"] and got.get("key_short") == short)
            check(f"{label}: key_config {got.get('key_config')}", got.get("key_config") == ([key_config] if key_config else None))
            got_set = set(got["key_token_indices"]) - border
            want_set = set(want["key_token_indices"]) - border
            check(f"{label}: key token indices not ascending", got["key_token_indices"] == sorted(got["key_token_indices"]))
            check(f"{label}: key tokens differ: pert only {sorted(got_set - want_set)[:10]}, reference only "
                  f"{sorted(want_set - got_set)[:10]}", got_set == want_set)
            check(f"{label}: key_tokens {got['key_tokens']} != {len(got['key_token_indices'])} indices",
                  got["key_tokens"] == len(got["key_token_indices"]))
            # LongPPL over pert's own choice (the same set unless a token sits on a threshold)
            nll_of = {c["index"]: c["nll"] for c in want["choices"]}
            chosen = [nll_of[i] for i in got["key_token_indices"]]
            want_ppl = math.exp(sum(chosen) / len(chosen)) if chosen else None
            check(f"{label}: key_ppl {got['key_ppl']} vs {want_ppl}", close(got["key_ppl"], want_ppl, 1e-4))
            if not border:
                check(f"{label}: key_ppl_stderr {got['key_ppl_stderr']} vs {want['key_ppl_stderr']}",
                      abs(got["key_ppl_stderr"] - want["key_ppl_stderr"]) <= 1e-3 * want["key_ppl_stderr"])
            check(f"{label}: ppl {got['ppl']} vs {want['ppl']}", close(got["ppl"], want["ppl"], 1e-4))

        # pert sweep --key-tokens: the cells' counts as pert perplexity's, the second table, the CSV's columns
        out = os.path.join(tmp, "sweep.json")
        rope = os.path.join(ROOT, "models", "rope")
        key = ["--key-tokens", "--key-short", "16", "--key-step", "4", "--key-alpha", "1"]
        sweep = [binary, "sweep", "-m", rope, "-f", text_file, "--split-docs", "--lengths", "128,256", "--chunks", "2",
                 "-t", "1", "-q", "--out", out] + key
        run = subprocess.run(sweep, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        if run.returncode != 0:
            sys.exit(f"{' '.join(sweep)}: exit {run.returncode}\n{run.stderr}")
        check(f"sweep: no key-token table in {run.stdout!r}", "Key-token perplexity (LongPPL" in run.stdout)
        with open(out) as f:
            cells = json.load(f)["cells"]
        for cell in cells:
            single = json.loads(subprocess.run(
                [binary, "perplexity", "-m", rope, "-f", text_file, "--split-docs", "-c", str(cell["length"]),
                 "--chunks", "2", "-t", "1", "-q", "--json"] + key, stdout=subprocess.PIPE, check=True, text=True).stdout)
            check(f"sweep @{cell['length']}: key tokens {cell.get('key_tokens')} != {single['key_tokens']}",
                  cell.get("key_tokens") == single["key_tokens"] and cell["key_ppl"] == single["key_ppl"])
            check(f"sweep @{cell['length']}: the cell keeps the indices", "key_token_indices" not in cell)
        with open(os.path.splitext(out)[0] + ".csv") as f:
            rows = list(csv.DictReader(f))
        check(f"sweep CSV: {rows[0].keys() if rows else None}",
              len(rows) == 2 and all(r["key_short"] == "16" and r["key_step"] == "4" and r["key_tokens"] != ""
                                     and r["key_config"] == "" for r in rows))
        # one evaluator for two models: the second model's cells reuse the choice of the first's, and
        # every cell equals pert perplexity's own run
        shared = os.path.join(tmp, "shared.json")
        alibi, xl = (os.path.join(ROOT, "models", n) for n in ("alibi", "xl"))
        evaluated = key + ["--key-model", xl]
        run = subprocess.run([binary, "sweep", "-m", rope, "-m", alibi, "-f", text_file, "--split-docs", "--lengths",
                              "128,256", "--chunks", "3", "-t", "1", "-q", "--out", shared] + evaluated,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        if run.returncode != 0:
            sys.exit(f"sweep --key-model: exit {run.returncode}\n{run.stderr}")
        with open(shared) as f:
            cells = json.load(f)["cells"]
        check(f"sweep --key-model: {len(cells)} cells", len(cells) == 4)
        for cell in cells:
            single = json.loads(subprocess.run(
                [binary, "perplexity", "-m", cell["model"], "-f", text_file, "--split-docs", "-c", str(cell["length"]),
                 "--chunks", "3", "-t", "1", "-q", "--json"] + evaluated, stdout=subprocess.PIPE, check=True,
                text=True).stdout)
            check(f"sweep --key-model, {os.path.basename(cell['model'])} @{cell['length']}: key tokens "
                  f"{cell.get('key_tokens')} / {cell.get('key_candidates')} vs {single['key_tokens']} / "
                  f"{single['key_candidates']}, LongPPL {cell.get('key_ppl')} vs {single['key_ppl']}",
                  (cell.get("key_tokens"), cell.get("key_candidates"), cell.get("key_ppl"))
                  == (single["key_tokens"], single["key_candidates"], single["key_ppl"]) and single["key_tokens"] > 0)
        # resumed with other key settings: refused, naming the setting
        other = [("20" if a == "16" else a) for a in key]
        run = subprocess.run(sweep[:-len(key)] + other, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        check(f"sweep resumed with another --key-short: exit {run.returncode}, {run.stderr!r}",
              run.returncode != 0 and "key_short" in run.stderr)

        # the key flags without --key-tokens: a usage error naming the flag
        for flag, value in (("--key-short", "16"), ("--key-model", rope)):
            run = subprocess.run([binary, "perplexity", "-m", rope, "-f", text_file, flag, value], stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True)
            check(f"{flag} without --key-tokens: exit {run.returncode}, {run.stderr!r}",
                  run.returncode == 2 and flag in run.stderr and "--key-tokens" in run.stderr)
        # the evaluator's config without an evaluator: the scored model chooses under its own --config
        run = subprocess.run([binary, "perplexity", "-m", rope, "-f", text_file, "--key-tokens", "--key-config", LINEAR_X2],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        check(f"--key-config without --key-model: exit {run.returncode}, {run.stderr!r}",
              run.returncode == 2 and "--key-config" in run.stderr and "--key-model" in run.stderr)
    return finish("longppl_test")


if __name__ == "__main__":
    sys.exit(main())
