#!/usr/bin/env python3
"""pert passkey's prompts rebuilt and its greedy answers recomputed, without pert.

    passkey_reference.py DUMP [--spm TOKENIZER.model] [--json-out FILE]

DUMP is what `pert passkey --dump-prompts DUMP` writes: the settings, every trial's key, filler
start and answer, and every prompt's token ids. For each prompt this script

  1. rebuilds the prompt from the rules of `pert passkey --help` with SentencePiece, from text:
     the key sentence, whole filler sentences and the question encoded as one text; before the
     key, the last tokens of the encoded filler sentences that precede it in the cycle; the key
     after the sentence boundary nearest depth x filler tokens. It checks that the prompt has
     exactly the requested length (BOS counted), that the key sentence's tokens start where
     pert says, and that the ids equal pert's (the key and filler start are taken from DUMP);
  2. decodes greedily with tools/reference/reference.py (float64, the whole sequence each step, no cache;
     all prompts of a length in one batch) up to the dump's answer_tokens, stopping after an
     end-of-text token, with DUMP's --config files (RFC 7386 merge patches) and --set values
     applied to config.json, and checks the ids equal pert's (a step where the reference's two
     best logits are within 1e-3 is reported as a near tie, not a mismatch);
  3. judges each answer (correct iff its first run of digits starts with the key) and checks the
     verdicts and each cell's accuracy equal pert's.

Prints one line per mismatch and a summary; exits 1 on any mismatch. --json-out writes the
reference's answers and accuracies.
"""
import argparse
import csv
import json
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tools/: import by folder (tools/README.md)
from lib import ROOT  # noqa: E402
from lib.outputs import replaced  # whole or not at all, as pert's own outputs


FILLER = ["The grass is green.", "The sky is blue.", "The sun is yellow.", "Here we go.", "There and back again."]
QUESTION = "What is the pass key? The pass key is"
NEAR_TIE = 1e-3


def key_sentence(key):
    return f"The pass key is {key}. Remember it. {key} is the pass key."


def rebuild(sp, length, depth, key, offset):
    """The prompt's ids and the index of the key sentence's first token, from text."""
    def filler(start, count):  # `count` sentences of the cycle from `start` on, as one text
        return " ".join(FILLER[(start + i) % len(FILLER)] for i in range(count))

    n_filler = length - 1 - len(sp.encode(" ".join([key_sentence(key), QUESTION])))
    if n_filler < 0:
        raise ValueError(f"length {length} cannot hold the key sentence and the question")
    best = None  # (error, sentences after the key, their tokens)
    for m in range(n_filler + 1):
        after = len(sp.encode(filler(offset, m))) if m else 0
        if after > n_filler:
            break
        err = abs((n_filler - after) - depth * n_filler)
        if best is None or err < best[0]:
            best = (err, m, after)
    _, m, after = best
    before = n_filler - after
    back = 0
    while len(sp.encode(filler(offset - back, back))) < before:
        back += 1
    run = sp.encode(filler(offset - back, back))
    head = run[len(run) - before:] if before else []
    tail = sp.encode(" ".join([key_sentence(key)] + ([filler(offset, m)] if m else []) + [QUESTION]))
    return [sp.bos_id()] + head + tail, 1 + before


def correct(answer, key):
    digits = re.search(r"[0-9]+", answer)
    return bool(digits) and digits.group().startswith(str(key))


def merge_patch(target, patch):  # RFC 7386
    if not isinstance(patch, dict):
        return patch
    out = dict(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = merge_patch(out.get(k), v)
    return out


def apply_set(config, setting):  # pert's --set key.path=value: the value is JSON, else a string
    path, _, text = setting.partition("=")
    try:
        value = json.loads(text)
    except ValueError:
        value = text
    patch = value
    for key in reversed(path.split(".")):
        patch = {key: patch}
    return merge_patch(config, patch)


def load(dump):
    from reference import reference
    config, W = reference.load_model_dir(dump["model_dir"])
    for f in dump.get("config", []):
        with open(f) as fh:
            config = merge_patch(config, json.load(fh))
    for s in dump.get("set", []):
        config = apply_set(config, s)
    return config, W


def greedy_batch(config, W, prompts, n, eos):
    """Each prompt's greedy answer (all prompts of one length), stopping after an EOS token."""
    from reference import reference
    torch = reference.torch
    ids = torch.tensor(prompts, dtype=torch.long)
    answers, ties = [[] for _ in prompts], [None] * len(prompts)
    with torch.no_grad():
        for step in range(n):
            if all(a and a[-1] in eos for a in answers):
                break  # every answer has ended: the steps left would add nothing
            last = reference.forward(config, W, ids)[:, -1]
            top2 = torch.topk(last, 2, dim=-1)
            nxt = top2.indices[:, 0]
            for b, t in enumerate(nxt.tolist()):
                if answers[b] and answers[b][-1] in eos:
                    continue
                if ties[b] is None and float(top2.values[b, 0] - top2.values[b, 1]) < NEAR_TIE:
                    ties[b] = len(answers[b])
                answers[b].append(t)
            ids = torch.cat([ids, nxt[:, None]], dim=1)
    return answers, ties


def check(dump, spm_path):
    """Mismatches (strings) between the dump and the reference, and the reference's cells."""
    import sentencepiece
    sp = sentencepiece.SentencePieceProcessor(model_file=spm_path)
    config, W = load(dump)
    eos = config.get("eos_token_id", 2)
    eos = set(eos if isinstance(eos, list) else [eos])
    prompts = {(p["length"], p["depth"], p["trial"]): p["ids"] for p in dump["prompts"]}
    failures, cells = [], []
    for length in dict.fromkeys(c["length"] for c in dump["cells"]):
        row = [c for c in dump["cells"] if c["length"] == length]
        rebuilt = []
        for c in row:
            for r in c["results"]:
                where = f"length {length}, depth {c['depth']}, trial {r['trial']} (key {r['key']})"
                ids, key_at = rebuild(sp, length, c["depth"], r["key"], r["filler_offset"])
                key_ids = sp.encode(key_sentence(r["key"]))
                got = prompts[(length, c["depth"], r["trial"])]
                if len(got) != length:
                    failures.append(f"{where}: pert's prompt has {len(got)} tokens")
                if got[r["key_token"]:r["key_token"] + len(key_ids)] != key_ids:
                    failures.append(f"{where}: the key sentence is not at token {r['key_token']}")
                if key_at != r["key_token"]:
                    failures.append(f"{where}: key at token {r['key_token']}, the reference puts it at {key_at}")
                if got != ids:
                    first = next((i for i, (a, b) in enumerate(zip(got, ids)) if a != b), min(len(got), len(ids)))
                    failures.append(f"{where}: prompt ids differ from the rebuilt ones from token {first} on")
                rebuilt.append(ids)
        answers, ties = greedy_batch(config, W, rebuilt, dump["answer_tokens"], eos)
        i = 0
        for c in row:
            n_correct, results = 0, []
            for r in c["results"]:
                where = f"length {length}, depth {c['depth']}, trial {r['trial']}"
                ans, tie = answers[i], ties[i]
                i += 1
                text = sp.decode(ans)
                ok = correct(text, r["key"])
                n_correct += ok
                results.append({"trial": r["trial"], "key": r["key"], "answer_ids": ans, "answer": text, "correct": ok})
                if r["answer_ids"] != ans:
                    first = next((k for k, (a, b) in enumerate(zip(r["answer_ids"], ans)) if a != b), 0)
                    if tie is not None and tie <= first:
                        print(f"note: {where}: answers part at token {first}, a near tie in the reference")
                        continue
                    failures.append(f"{where}: pert answered {r['answer_ids']} {r['answer']!r}, "
                                    f"the reference {ans} {text!r}")
                elif r["correct"] != ok or r["answer"] != text:
                    failures.append(f"{where}: pert judged {r['answer']!r} {r['correct']}, the reference "
                                    f"{text!r} {ok}")
            accuracy = n_correct / len(c["results"])
            if abs(accuracy - c["accuracy"]) > 1e-12 or n_correct != c["correct"]:
                failures.append(f"length {length}, depth {c['depth']}: accuracy {c['accuracy']}, reference {accuracy}")
            cells.append({"length": length, "depth": c["depth"], "accuracy": accuracy, "correct": n_correct,
                          "trials": len(results), "results": results})
    return failures, cells


def run_pert(args, tmp, name):
    """Runs pert with ARGS plus --json-out, --csv and --dump-prompts into TMP/NAME.*; returns the
    table it printed, the result, the dump and the CSV's rows (the tests' one way to call it)."""
    out = {k: os.path.join(tmp, f"{name}.{k}") for k in ("json", "csv", "dump")}
    table = subprocess.run(args + ["--json-out", out["json"], "--csv", out["csv"], "--dump-prompts", out["dump"]],
                           check=True, capture_output=True, text=True).stdout
    with open(out["json"]) as f, open(out["dump"]) as g, open(out["csv"]) as h:
        return table, json.load(f), json.load(g), list(csv.DictReader(h))


def run(prog, doc, check, command, summary):
    """A reference script's command line (this one's, ruler_reference.py's): DUMP checked by
    check(dump, spm) -> (failures, cells); summary(cells) ends the last line."""
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dump", metavar="DUMP", help=f"the file `{command} --dump-prompts` wrote")
    ap.add_argument("--spm", default=os.path.join(ROOT, "models", "tokenizer", "tokenizer.model"),
                    help="the model's SentencePiece model (default: the family's, %(default)s)")
    ap.add_argument("--json-out", help="write the reference's cells (answers, verdicts, scores) here")
    a = ap.parse_args()
    try:
        with open(a.dump) as f:
            dump = json.load(f)
    except (OSError, ValueError) as e:
        sys.exit(f"{prog}: {a.dump}: {e}")
    if "prompts" not in dump:
        sys.exit(f"{prog}: {a.dump}: no prompts (write it with {command} --dump-prompts)")
    failures, cells = check(dump, a.spm)
    if a.json_out:
        with replaced(a.json_out) as f:
            json.dump({"model_dir": dump["model_dir"], "cells": cells}, f, indent=2)
    for msg in failures:
        print("FAILED:", msg)
    n = sum(len(c["results"]) for c in cells)
    print(f"{dump['model_dir']}: {n} prompts rebuilt and answered by the reference, {len(failures)} mismatches; "
          f"{summary(cells)}")
    return 1 if failures else 0


def main():
    return run("passkey_reference.py", __doc__, check, "pert passkey",
               lambda cells: f"mean accuracy {sum(c['accuracy'] for c in cells) / max(1, len(cells)):.3f}")


if __name__ == "__main__":
    sys.exit(main())
