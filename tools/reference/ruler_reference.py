#!/usr/bin/env python3
"""pert ruler's prompts rebuilt and its greedy answers recomputed, without pert.

    ruler_reference.py DUMP [--spm TOKENIZER.model] [--json-out FILE]

DUMP is what `pert ruler --dump-prompts DUMP` writes: the settings, every cell's trials with
their references and answers, and every prompt's token ids. For each prompt this script

  1. rebuilds it by tools/reference/ruler_tasks.py's rules with SentencePiece, from the dump's task,
     length, depth, trial, seed, wording and essay file alone (every draw is made again), and
     checks that the ids, the references and the needles' token indices equal pert's;
  2. decodes greedily with tools/reference/reference.py (float64, the whole sequence each step, no cache;
     prompts of one length and budget in one batch) up to the prompt's budget (its answer's
     tokens + 4), stopping after an end-of-text token, with DUMP's --config files and --set
     values applied to config.json, and checks the ids equal pert's (a step where the
     reference's two best logits are within 1e-3 is a near tie, reported, not a mismatch);
  3. scores each answer (RULER's string_match_all) and checks the scores and each cell's mean.

Prints one line per mismatch and a summary; exits 1 on any mismatch.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tools/: import by folder (tools/README.md)
from reference import ruler_tasks  # noqa: E402
from reference.passkey_reference import greedy_batch, load, run  # noqa: E402  (the model, greedy decoding, the command line)


def first_difference(a, b):
    return next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))


def check(dump, spm_path):
    """Mismatches (strings) between the dump and the reference, and the reference's cells."""
    import sentencepiece
    sp = sentencepiece.SentencePieceProcessor(model_file=spm_path)
    config, W = load(dump)
    eos = config.get("eos_token_id", 2)
    eos = set(eos if isinstance(eos, list) else [eos])
    prompts = {(p["task"], p["length"], p["depth"], p["trial"]): p["ids"] for p in dump["prompts"]}
    failures, jobs = [], []  # jobs: (cell index, trial result, rebuilt prompt)
    for ci, c in enumerate(dump["cells"]):
        if c.get("skipped"):
            continue
        depth = c["depth"] if c["depth"] is not None else dump["depths"][0]
        for r in c["results"]:
            where = f"{c['task']}, length {c['length']}, depth {c['depth']}, trial {r['trial']}"
            p = ruler_tasks.build(sp, c["task"], c["length"], depth, r["trial"], dump["seed"], dump["template"],
                                  dump["essay"] or None)
            got = prompts[(c["task"], c["length"], depth, r["trial"])]
            if got != p.ids:
                failures.append(f"{where}: prompt ids differ from the rebuilt ones from token "
                                f"{first_difference(got, p.ids)} on ({len(got)} and {len(p.ids)} tokens)")
            if ruler_tasks.exact_length(c["task"]) and len(got) != c["length"]:
                failures.append(f"{where}: pert's prompt has {len(got)} tokens")
            if r["references"] != p.references:
                failures.append(f"{where}: references {r['references']}, the reference's {p.references}")
            if r["needle_tokens"] != p.needles:
                failures.append(f"{where}: needles at {r['needle_tokens']}, the reference puts them at {p.needles}")
            jobs.append((ci, r, p))
    answers = {}
    groups = {}
    for j, (_, _, p) in enumerate(jobs):
        groups.setdefault((len(p.ids), p.budget), []).append(j)
    for (_, budget), members in groups.items():
        got, ties = greedy_batch(config, W, [jobs[j][2].ids for j in members], budget, eos)
        for j, a, t in zip(members, got, ties):
            answers[j] = (a, t)
    cells = {}
    for j, (ci, r, p) in enumerate(jobs):
        c = dump["cells"][ci]
        where = f"{c['task']}, length {c['length']}, depth {c['depth']}, trial {r['trial']}"
        ans, tie = answers[j]
        text = sp.decode(ans)
        s = ruler_tasks.score(text, p.references)
        cells.setdefault(ci, []).append({"trial": r["trial"], "answer_ids": ans, "answer": text, "score": s})
        if r["answer_ids"] != ans:
            first = first_difference(r["answer_ids"], ans)
            if tie is not None and tie <= first:
                print(f"note: {where}: answers part at token {first}, a near tie in the reference")
                cells[ci][-1]["score"] = r["score"]  # pert's answer stands for the cell's mean
                continue
            failures.append(f"{where}: pert answered {r['answer_ids']} {r['answer']!r}, the reference {ans} {text!r}")
        elif abs(r["score"] - s) > 1e-12 or r["answer"] != text:
            failures.append(f"{where}: pert scored {r['answer']!r} {r['score']}, the reference {text!r} {s}")
    out = []
    for ci, results in cells.items():
        c = dump["cells"][ci]
        mean = 100 * sum(x["score"] for x in results) / len(results)
        if abs(mean - c["score"]) > 1e-9:
            failures.append(f"{c['task']}, length {c['length']}, depth {c['depth']}: score {c['score']}, reference {mean}")
        out.append({"task": c["task"], "length": c["length"], "depth": c["depth"], "score": mean, "results": results})
    return failures, out


def main():
    return run("ruler_reference.py", __doc__, check, "pert ruler",
               lambda cells: f"mean score {sum(c['score'] for c in cells) / max(1, len(cells)):.1f}")


if __name__ == "__main__":
    sys.exit(main())
