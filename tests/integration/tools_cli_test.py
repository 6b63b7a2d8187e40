#!/usr/bin/env python3
"""Every Python tool's command line: `tools/FOLDER/X.py --help` exits 0, prints a non-empty usage on
stdout and writes no file (each runs in an empty scratch directory); and `reference.py logits`
on an ids file with an id outside the vocabulary (and one that is not an integer) exits non-zero
with a one-line error naming the file, not a traceback; tools/train/passkey_digits.py on models/none
(every answer token right) and on a missing model (a one-line error); family_acceptance.py's
bars and two draws' table on made-up reports; paper_shapes.py's ratios and key-token table of made-up sweeps; and tools/plot/plot.py on the
committed family sweep and on two small profiles writes its files and prints their paths;
family_names.py's list is the set of the family's run files; and models/README.md holds its
template's text as family_report.py fills it from the models' train logs; each tools/ folder has a
README.md with a line per file, and tools/README.md a line per folder.

    tools_cli_test.py
"""
import glob
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
TOOLS = os.path.join(os.path.dirname(os.path.dirname(HERE)), "tools")
sys.path.insert(0, os.path.join(HERE, "..", "helpers"))
sys.path.insert(0, TOOLS)  # the tools the checks below import
from checklist import check, failures  # noqa: E402
from lib.family_names import FAMILY, HYBRID  # noqa: E402

FOLDERS = sorted(d for d in os.listdir(TOOLS) if os.path.isfile(os.path.join(TOOLS, d, "__init__.py")))


def run(args, cwd):
    return subprocess.run([sys.executable] + args, cwd=cwd, capture_output=True, text=True, timeout=120)


def main():
    tools_readme = open(os.path.join(TOOLS, "README.md")).read()
    for d in FOLDERS:
        check(f"tools/README.md names tools/{d}/", f"`{d}/`" in tools_readme)
        listed = open(os.path.join(TOOLS, d, "README.md")).read()
        unlisted = [f for f in sorted(os.listdir(os.path.join(TOOLS, d)))
                    if f.endswith((".py", ".sh")) and f != "__init__.py" and f"`{f}`" not in listed]
        check(f"tools/{d}/README.md: a line per file", not unlisted, f"not named: {unlisted}")
    files = sorted(glob.glob(os.path.join(TOOLS, "*", "*.py")))
    modules = [f for f in files if 'if __name__ == "__main__":' not in open(f).read()]
    tools = [f for f in files if f not in modules]
    check("tools/*/*.py: every file is a script but the folders' __init__.py", len(tools) > 0 and
          sorted(os.path.relpath(f, TOOLS) for f in modules) == sorted(os.path.join(d, "__init__.py") for d in FOLDERS),
          [os.path.relpath(f, TOOLS) for f in modules])
    for tool in tools:
        name = os.path.relpath(tool, TOOLS)
        with tempfile.TemporaryDirectory() as tmp:
            r = run([tool, "--help"], tmp)
            left = os.listdir(tmp)
        out = r.stdout.strip()
        check(f"{name} --help: exit 0, usage on stdout, no file written",
              r.returncode == 0 and out.startswith("usage:") and len(out.splitlines()) > 2 and not left,
              f"exit {r.returncode}, stdout {out[:200]!r}, stderr {r.stderr.strip()[-300:]!r}, files {left}")

    # tools/lib/family_names.py: the one list of the family is the set of its run files.
    run_files = glob.glob(os.path.join(os.path.dirname(TOOLS), "configs", "train", "*.json"))
    runs = {os.path.basename(f)[:-5] for f in run_files}
    check("family_names.py: FAMILY names each configs/train/NAME.json (but family.json) once",
          sorted(FAMILY) == sorted(runs - {"family"}), f"{FAMILY} against {sorted(runs)}")
    hybrid_runs = {os.path.basename(f)[:-5] for f in glob.glob(os.path.join(os.path.dirname(TOOLS), "configs", "train",
                                                                                 "hybrid", "*.json"))}
    check("family_names.py: HYBRID names each configs/train/hybrid/NAME.json once",
          sorted(HYBRID) == sorted(hybrid_runs), f"{HYBRID} against {sorted(hybrid_runs)}")
    r = run([os.path.join(TOOLS, "lib", "family_names.py")], TOOLS)
    check("family_names.py prints FAMILY, space-separated", r.stdout.split() == FAMILY, r.stdout + r.stderr)
    r = run([os.path.join(TOOLS, "lib", "family_names.py"), "--all"], TOOLS)
    check("family_names.py --all prints FAMILY then HYBRID", r.stdout.split() == FAMILY + HYBRID, r.stdout + r.stderr)

    # models/README.md is its template filled by family_report.py with what the models hold now:
    # the words the template gives, and the losses it states from each train_log.csv.
    from results import family_report
    models = os.path.join(os.path.dirname(TOOLS), "models")
    template = open(os.path.join(models, "README.template.md")).read()
    for key, value in family_report.overfit(FAMILY).items():
        template = template.replace(key, value)
    readme = open(os.path.join(models, "README.md")).read()
    stale = [line for line in template.splitlines() if "{{" not in line and line not in readme]
    check("models/README.md: its template's text, the losses as the train logs give them now "
          "(tools/results/family_report.py build rewrites it)", not stale, f"not in it: {stale[:3]}")

    reference = os.path.join(TOOLS, "reference", "reference.py")
    with tempfile.TemporaryDirectory() as tmp:
        model = os.path.join(tmp, "model")
        r = run([reference, "make-model", model, '{"type": "rope"}'], tmp)
        check("reference.py make-model", r.returncode == 0, r.stderr[-500:])
        good = os.path.join(tmp, "good.txt")
        with open(good, "w") as f:
            f.write("1 2 3\n95\n")
        out = os.path.join(tmp, "out.bin")
        r = run([reference, "logits", model, good, out], tmp)
        check("reference.py logits: in-range ids give [4][96] float64",
              r.returncode == 0 and os.path.getsize(out) == 4 * 96 * 8, r.stderr[-500:])
        for content, what in (("1 2 96\n", "id 96 (vocab 96)"), ("1 -1\n", "id -1"), ("1 two\n", "'two'")):
            bad = os.path.join(tmp, "bad_ids.txt")
            with open(bad, "w") as f:
                f.write(content)
            r = run([reference, "logits", model, bad, out], tmp)
            err = r.stderr.strip()
            check(f"reference.py logits, {what}: non-zero exit, one line naming the file",
                  r.returncode != 0 and len(err.splitlines()) == 1 and "bad_ids.txt" in err
                  and "Traceback" not in err, f"exit {r.returncode}, stderr {err[-500:]!r}")
    # tools/lib/results_tables.py: a marked table that is not what its script prints fails --check,
    # naming the page and line; --write makes it so; a marker naming anything but a tools/
    # script is a one-line error.
    tables = os.path.join(TOOLS, "lib", "results_tables.py")
    with tempfile.TemporaryDirectory() as tmp:
        samples = os.path.join(tmp, "busy.json")
        with open(samples, "w") as f:
            json.dump({"cores": 2, "n": 8, "rounds": 2, "samples": [
                {"model": "m", "machine": s, "variant": v, "tokens_per_second": [100.0 + i, 90.0 + i]}
                for s in ("idle", "busy") for i, v in enumerate(("default", "old", "passive"))]}, f)
        page = os.path.join(tmp, "page.md")
        with open(page, "w") as f:
            f.write(f"# A page\n\n<!-- table: tools/measure/bench_busy.py --table {samples} -->\n| stale |\n<!-- /table -->\nend\n")
        r = run([tables, "--check", page], tmp)
        check("results_tables.py --check: a stale table fails, naming page:line",
              r.returncode == 1 and "page.md:4:" in r.stdout and "1 tables and 0 figures, 1 not" in r.stdout, r.stdout + r.stderr)
        r = run([tables, "--write", page], tmp)
        text = open(page).read()
        check("results_tables.py --write: the script's table in place, the rest kept",
              r.returncode == 0 and "| m | idle | 95 (90–100) | 96 (91–101) | 97 (92–102) | 0.99× |" in text
              and text.startswith("# A page\n\n<!-- table:") and text.endswith("<!-- /table -->\nend\n"), text)
        r = run([tables, "--check", page], tmp)
        check("results_tables.py --check after --write: 0", r.returncode == 0 and "1 tables and 0 figures, 0 not" in r.stdout,
              r.stdout + r.stderr)
        with open(page, "w") as f:
            f.write("<!-- table: sh -c true -->\n<!-- /table -->\n")
        r = run([tables, "--check", page], tmp)
        check("results_tables.py: a marker naming no tools/ script is a one-line error",
              r.returncode != 0 and len(r.stderr.strip().splitlines()) == 1 and "tools/FOLDER/NAME.py" in r.stderr, r.stderr)

    # tools/results/claims.py: ReRoPE's loss measure and RULER's effective length, on made-up results.
    from results import claims
    cell = {"length": 256, "nll_by_position": [{"first": 0, "nll": 9.0, "tokens": 128},
                                               {"first": 128, "nll": 2.0, "tokens": 96}, {"first": 224, "nll": 3.0, "tokens": 32}]}
    check("claims.py: the loss of the last L tokens weighs the buckets from N - L on by their tokens",
          abs(claims.tail_nll(cell, 128) - 2.25) < 1e-12, claims.tail_nll(cell, 128))
    for scores, want in (({128: 90, 256: 85, 512: 70, 1024: 95}, (90, 80, 256)),  # the first drop ends it
                         ({64: 95, 112: 90, 256: 70}, (90, 80, 112)),  # a learned table: "at L" is 112
                         ({128: 40, 256: 40}, (40, None, None)),  # below 50 at L: none
                         ({256: 90}, (None, None, None))):
        check(f"claims.py: effective length of {scores}", claims.effective_length(scores, 128) == want,
              claims.effective_length(scores, 128))
    with tempfile.TemporaryDirectory() as tmp:  # finding a key (its first digit) apart from copying it
        os.makedirs(os.path.join(tmp, "passkey"))
        results = [{"key": 23472, "answer": " 2222222"}, {"key": 95550, "answer": " 95550."},
                   {"key": 40000, "answer": " the 3"}, {"key": 12345, "answer": " no"}]
        with open(os.path.join(tmp, "passkey", "rope+linear-x2.json"), "w") as f:
            json.dump({"cells": [{"length": 64, "results": results[:2]}, {"length": 128, "results": results[2:]}]}, f)
        r = claims.Results(tmp, os.path.join(os.path.dirname(TOOLS), "docs", "results", "data", "published_claims.json"))
        check("claims.py: first digit right per length; a file that is not there is None",
              r.first_digit("linear-x2") == {64: 1.0, 128: 0.0} and r.first_digit("plain") is None,
              r.first_digit("linear-x2"))
    with tempfile.TemporaryDirectory() as tmp:
        os.makedirs(os.path.join(tmp, "ruler"))
        for name, per_length in (("alibi", {128: 90, 256: 50}), ("rope+rerope", {128: 80, 256: 75})):
            cells = [{"task": t, "length": n, "depth": d, "score": s + (t == "vt") * 10}
                     for t in ("niah_single_1", "vt") for n, s in per_length.items() for d in (0, 1)]
            cells.append({"task": "kv", "length": 128, "depth": 0, "score": None, "skipped": "too short"})
            cells.append({"task": "kv", "length": 256, "depth": 0, "score": 0})
            with open(os.path.join(tmp, "ruler", name + ".json"), "w") as f:
                json.dump({"trained_length": 128, "lengths": list(per_length), "cells": cells}, f)
        r = run([os.path.join(TOOLS, "results", "claims.py"), "effective", "--data", tmp], tmp)
        rows = [line for line in r.stdout.splitlines() if line.startswith(("| alibi", "| rope"))]
        check("claims.py effective: a row a file, schemes first; skipped tasks left out of the mean",
              r.returncode == 0 and rows == ["| alibi | plain | 2 | 95.0 | 55.0 | 85.0 | 128 |",
                                             "| rope | rerope | 2 | 85.0 | 80.0 | 75.0 | 256 |"],
              f"exit {r.returncode}, {rows}, stderr {r.stderr[-300:]!r}")

    # tools/results/claims.py kept: which method keeps retrieval past L on which scheme, on made-up files.
    with tempfile.TemporaryDirectory() as tmp:
        for sub in ("passkey", "ruler"):
            os.makedirs(os.path.join(tmp, sub))
        for name, acc in (("none", {64: 1.0, 128: 1.0, 256: 0.95, 512: 0.2}), ("rope", {64: 1.0, 128: 0.9, 256: 0.0}),
                          ("rope+rerope", {64: 1.0, 128: 0.9, 256: 0.9, 512: 0.85}), ("t5", {64: 0.4, 128: 0.3})):
            with open(os.path.join(tmp, "passkey", name + ".json"), "w") as f:
                json.dump({"trained_length": 128, "cells": [{"length": n, "correct": round(10 * a), "trials": 10}
                                                            for n, a in acc.items()]}, f)
        # none learns task a within L, not task b: b is left out of its mean, and of its method's
        for name, scores in (("none", {"a": {128: 100, 256: 40}, "b": {128: 0, 256: 0}}),
                             ("none+streaming", {"a": {128: 100, 256: 95}, "b": {128: 100, 256: 100}}),
                             ("t5", {"a": {128: 20, 256: 0}})):  # learns no task: "—", not "·"
            cells = [{"task": t, "length": n, "depth": 0, "score": v, "trials": 2}
                     for t, by in scores.items() for n, v in by.items()]
            cells.append({"task": "kv", "length": 128, "depth": None, "score": None, "trials": 2})  # not posable
            with open(os.path.join(tmp, "ruler", name + ".json"), "w") as f:
                json.dump({"trained_length": 128, "lengths": [128, 256], "cells": cells}, f)
        png = os.path.join(tmp, "kept.png")
        r = run([os.path.join(TOOLS, "results", "claims.py"), "kept", "--data", tmp, "--plot", png], tmp)
        rows = [line for line in r.stdout.splitlines() if line.startswith("| ")]
        check("claims.py kept: methods x schemes, pass-key/RULER effective lengths, · for none, — below 50 at L",
              r.returncode == 0 and rows == ["| method | none | rope | t5 |", "| plain | 256/128 | 128/· | —/— |",
                                             "| rerope |  | 512/· |  |", "| streaming | ·/256 |  |  |"]
              and os.path.getsize(png) > 0, f"exit {r.returncode}, {rows}, stderr {r.stderr[-300:]!r}")
        r = run([os.path.join(TOOLS, "results", "claims.py"), "grid", "--data", tmp], tmp)
        lines = r.stdout.splitlines()
        check("claims.py grid: a CSV row per scheme, method, task and length; unposable cells left out",
              r.returncode == 0 and len(lines) == 1 + 8 + 4 + 3 + 4 + 4
              and lines[:3] == ["scheme,method,task,length,score,trials", "none,plain,a,128,100.0,2", "none,plain,a,256,40.0,2"]
              and "none,plain,passkey,512,20.0,10" in lines and "rope,rerope,passkey,512,80.0,10" in lines
              and not any(",kv," in line for line in lines), f"exit {r.returncode}, {lines}, stderr {r.stderr[-300:]!r}")
        csv = os.path.join(tmp, "grid.csv")
        r = run([os.path.join(TOOLS, "results", "claims.py"), "grid", "--data", tmp, "--out", csv], tmp)
        written = open(csv).read().splitlines() if os.path.exists(csv) else None
        check("claims.py grid --out: the same CSV in the file, nothing on stdout",
              r.returncode == 0 and r.stdout == "" and written == lines, r.stderr[-300:])
        # ... and as a marked figure: results_tables.py draws it again and compares the pixels.
        page, fig = os.path.join(tmp, "page.md"), os.path.join(tmp, "fig", "kept.png")
        with open(page, "w") as f:
            f.write(f"<!-- figure: tools/results/claims.py kept --data {tmp} --plot {fig} -->\n![grid](fig/kept.png)\n<!-- /figure -->\n")
        tables = os.path.join(TOOLS, "lib", "results_tables.py")
        r = run([tables, "--check", page], tmp)
        check("results_tables.py --check: a figure not committed fails, naming page:line",
              r.returncode == 1 and "page.md:1: " in r.stdout and "fig/kept.png is not committed" in r.stdout, r.stdout)
        os.makedirs(os.path.dirname(fig))
        r = run([tables, "--write", page], tmp)
        r2 = run([tables, "--check", page], tmp)
        check("results_tables.py --write draws the figure in place; --check then passes",
              r.returncode == 0 and os.path.exists(fig) and r2.returncode == 0 and "0 tables and 1 figures, 0 not" in r2.stdout,
              r.stderr + r2.stdout)
        with open(os.path.join(tmp, "passkey", "t5.json"), "w") as f:
            json.dump({"trained_length": 128, "cells": [{"length": n, "correct": 10, "trials": 10} for n in (64, 128, 256)]}, f)
        r = run([tables, "--check", page], tmp)
        check("results_tables.py --check: a figure its results no longer draw fails",
              r.returncode == 1 and "is not what 'tools/results/claims.py kept" in r.stdout, r.stdout)

    # tools/train/passkey_digits.py: models/none answers every held-out row (its card's passkey_acc 1.00).
    digits = os.path.join(TOOLS, "train", "passkey_digits.py")
    with tempfile.TemporaryDirectory() as tmp:
        none = os.path.join(os.path.dirname(os.path.dirname(HERE)), "models", "none")
        r = run([digits, none, "--json", "--heads", "--copy-rows"], tmp)
        d = json.loads(r.stdout) if r.returncode == 0 else {}
        check("passkey_digits.py on models/none: every answer token right, no wrong digit",
              d.get("accuracy") == 1.0 and d.get("token_accuracy") == [1.0] * 6
              and d.get("wrong_later_digits") == {"near": 0, "none": 0} and d.get("p_first_digit", 0) > 0.5,
              f"exit {r.returncode}, {r.stdout[:300]!r}, stderr {r.stderr[-300:]!r}")
        h = d.get("heads", {})
        cells = [c for k in ("previous_token", "copy") for layer in h.get(k, []) for c in layer]
        check("passkey_digits.py --heads: two weights per layer and head (5 x 4), each pair a share of one row's attention",
              [len(h.get(k, [])) for k in ("previous_token", "copy")] == [5, 5] and len(cells) == 40
              and all(len(c) == 2 and min(c) >= 0 and sum(c) <= 1.0005 for c in cells)
              and h["previous_token"][h["sharpest_previous"][0]][h["sharpest_previous"][1]][0]
              == max(c[0] for layer in h["previous_token"] for c in layer), str(h)[:300])
        c = d.get("copy_rows", {})
        check("passkey_digits.py --copy-rows: whole numbers' digits only (a multiple of 5, at least 2 repeats a row)",
              c.get("digits", 1) % 5 == 0 and c.get("digits", 0) >= 64 * 2 * 5 and 0 <= c.get("accuracy", -1) <= 1, str(c))
        r = run([digits, os.path.join(tmp, "nothing")], tmp)
        check("passkey_digits.py: a missing model is a one-line error naming it",
              r.returncode != 0 and len(r.stderr.strip().splitlines()) == 1 and "nothing" in r.stderr, r.stderr[-300:])

    # tools/train/family_acceptance.py: the bars on a made-up report.
    from train import family_acceptance as fa
    base = {"passkey": {"64": 0.0, "120": 0.0}, "ppl": {"tinystories": 20.0, "wikitext": 30.0}, "ruler": {}}
    report = {"models": {
        "a": {"passkey": {"64": 1.0, "120": 0.95}, "ppl": {"tinystories": 20.6, "wikitext": 25.0}, "baseline": base},
        "b": {"passkey": {"64": 1.0, "120": 0.94}, "ppl": {"tinystories": 20.61, "wikitext": 30.0}, "baseline": base}}}
    missed = fa.failures(report)
    check("family_acceptance.py: 0.95 and +3% pass, 0.94 and +3.05% miss, each named",
          [m for m, _ in missed] == ["b", "b"] and "0.94 at 120" in missed[0][1] and "tinystories" in missed[1][1], missed)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "r.json")
        with open(path, "w") as f:
            json.dump(report, f)
        r = run([os.path.join(TOOLS, "train", "family_acceptance.py"), "--check", path], tmp)
        check("family_acceptance.py --check: exit 1, a line per missed bar", r.returncode == 1
              and len(r.stdout.splitlines()) == 2, f"exit {r.returncode}, {r.stdout!r}")
        # The same schemes in another draw: a only, b missing there (left out of the rows).
        other = os.path.join(tmp, "o.json")
        with open(other, "w") as f:
            json.dump({"draw": "second", "models": {"a": dict(report["models"]["b"], ruler={"niah_single_1": 50.0})}}, f)
        r = run([os.path.join(TOOLS, "train", "family_acceptance.py"), "--table", path, "--what", "draws", "--beside", other], tmp)
        rows = [line for line in r.stdout.splitlines() if line.startswith("| ")]
        check("family_acceptance.py --what draws: a row per scheme in both, each cell 'this · other', means and gap",
              r.returncode == 0 and len(rows) == 4
              and rows[1] == "| a | 1.00 / 0.95 · 1.00 / 0.94 | +3.0% · +3.0% | -16.7% · +0.0% | — / — · 50 / — | met · missed |"
              and rows[3] == "| mean gap between draws (points) | | 0.0 | 16.7 | | |", r.stdout + r.stderr)

    shapes = os.path.join(TOOLS, "results", "paper_shapes.py")
    with tempfile.TemporaryDirectory() as tmp:
        def cell(model, label, length, ppl):
            return {"model": f"models/{model}", "label": label, "position_label": model, "length": length,
                    "trained_length": 128, "ppl": ppl}
        path = os.path.join(tmp, "s.json")
        with open(path, "w") as f:  # skipped cells (no ppl), as pert sweep records them: b's at 256, all of c's
            json.dump({"cells": [cell("a", "plain", 128, 20.0), cell("a", "plain", 256, 30.0),
                                 cell("b", "plain", 128, 10.0), cell("b", "plain", 256, None),
                                 cell("c", "plain", 128, None), cell("c", "plain", 256, None)]}, f)
        ratio = run([shapes, "ratios", path], tmp).stdout.splitlines()
        check("paper_shapes.py ratios: each row over its PPL at L, a row with none at L left out", ratio[:5] == [
            "| model | config | positions | 128 (1×) | 256 (2×) |", "|---|---|---|---:|---:|",
            "| a | plain | a | 1.00 | 1.50 |", "| b | plain | b | 1.00 | — |", ""], ratio)
        # keys: one evaluator (every row the same key tokens per length) gives k under each length;
        # a cell without key tokens shows its plain PPL and a dash; a sweep without them is refused
        keyed = os.path.join(tmp, "k.json")
        settings = {"key_tokens": True, "key_short": 64, "key_step": 16, "key_alpha": 0.5, "key_beta": -2.0,
                    "key_model": "models/rope", "key_config": ["configs/extend/self-extend.json"]}
        with open(keyed, "w") as f:
            json.dump({"settings": settings, "cells": [
                {**cell("a", "plain", 128, 20.0), "key_tokens": 9, "key_ppl": 4.0},
                {**cell("a", "plain", 256, 30.0), "key_tokens": 50, "key_ppl": 6.5},
                {**cell("b", "plain", 128, 10.0), "key_tokens": 9, "key_ppl": None}]}, f)
        keys = run([shapes, "keys", keyed], tmp).stdout.splitlines()
        check("paper_shapes.py keys: PPL / LongPPL, k per length, the evaluator named", keys[2:6] == [
            "| model | config | positions | 128 (k = 9) | 256 (k = 50) |", "|---|---|---|---:|---:|",
            "| a | plain | a | 20.00 / 4.00 | 30.00 / 6.50 |", "| b | plain | b | 10.00 / — | — |"]
              and "models/rope under self-extend.json" in keys[0] and "64-79 tokens" in keys[0], keys)
        r = run([shapes, "keys", path], tmp)
        check("paper_shapes.py keys on a sweep without key tokens: one line, exit 1",
              r.returncode != 0 and "without key tokens" in r.stderr and r.stderr.count("\n") == 1, r.stderr)

    plot = os.path.join(TOOLS, "plot", "plot.py")
    family = os.path.join(os.path.dirname(os.path.dirname(HERE)), "docs", "results", "data", "extrapolation", "family.json")
    with tempfile.TemporaryDirectory() as tmp:
        prefix = os.path.join(tmp, "f")
        with open(family) as f:  # one name per (model, config) row, however many the family has
            rows = {(c["model"], c["config"]) for c in json.load(f)["cells"]}
        labels = ",".join(f"row {i} (renamed)" for i in range(len(rows)))
        r = run([plot, "sweep", family, "--out", prefix, "--window", "512", "--labels", labels], tmp)
        wrote = [f"{prefix}_{k}.{e}" for k in ("ppl", "nll") for e in ("png", "svg")]
        check("plot.py sweep --window --labels: writes PREFIX_ppl/_nll .png/.svg and prints their paths",
              r.returncode == 0 and all(os.path.getsize(w) > 0 and w in r.stdout for w in wrote),
              f"exit {r.returncode}, stdout {r.stdout[-500:]!r}, stderr {r.stderr[-500:]!r}")
        r = run([plot, "sweep", family, "--out", prefix, "--labels", "a,b"], tmp)
        check("plot.py sweep --labels with too few names: one-line error",
              r.returncode != 0 and len(r.stderr.strip().splitlines()) == 1, r.stderr[-500:])
        buckets = [{"first": f, "last": 2 * f, "nll": 4.0 - f / 100, "tokens": 3} for f in (1, 3, 7, 15, 31, 63)]
        run_file, records_file = os.path.join(tmp, "run.json"), os.path.join(tmp, "records.json")
        with open(run_file, "w") as f:  # `pert perplexity --json-out`: one run
            json.dump({"model_dir": "models/rope", "n_ctx": 128, "ppl": 20.0, "ppl_stderr": 1.0, "trained_length": 128,
                       "nll_by_position": buckets}, f)
        with open(records_file, "w") as f:  # json.dump(pert.sweep(...)): a list of records, config None = plain
            json.dump([{"model": "models/alibi", "label": "plain", "config": None, "length": n, "ppl": 20.0 + n / 64,
                        "trained_length": 128, "nll_by_position": buckets} for n in (64, 128)], f)
        r = run([plot, "sweep", run_file, "--out", os.path.join(tmp, "one")], tmp)
        check("plot.py sweep RUN.json (pert perplexity --json-out): the NLL-by-position plot of one run, no PPL plot",
              r.returncode == 0 and os.path.getsize(os.path.join(tmp, "one_nll.png")) > 0
              and not os.path.exists(os.path.join(tmp, "one_ppl.png")), f"exit {r.returncode}, {r.stdout!r} {r.stderr!r}")
        r = run([plot, "sweep", records_file, run_file, "--out", os.path.join(tmp, "rec"), "--window", "128"], tmp)
        check("plot.py sweep RECORDS.json RUN.json: pert.sweep's records and a run, both plots",
              r.returncode == 0 and "1 alibi, 2 rope" in r.stdout
              and all(os.path.getsize(os.path.join(tmp, f"rec_{k}.png")) > 0 for k in ("ppl", "nll")),
              f"exit {r.returncode}, {r.stdout!r} {r.stderr!r}")
        pk = os.path.join(tmp, "pk.json")
        with open(pk, "w") as f:  # pert passkey with a length skipped (past a learned table): accuracy null
            json.dump({"model_dir": "models/learned", "position_label": "learned", "trained_length": 128, "cells": [
                {"length": n, "depth": d, "accuracy": None if n > 128 else 1.0, "correct": 0, "trials": 1, "results": [],
                 **({"skipped": "past the table"} if n > 128 else {})} for n in (64, 256) for d in (0, 1)]}, f)
        r = run([os.path.join(TOOLS, "plot", "plot_passkey.py"), pk, "--out", os.path.join(tmp, "pk.png")], tmp)
        check("plot_passkey.py: a skipped passkey length is a grey cell, not an error",
              r.returncode == 0 and os.path.getsize(os.path.join(tmp, "pk.png")) > 0, r.stderr[-500:])
        with open(os.path.join(tmp, "other.json"), "w") as f:
            json.dump({"cells": "none"}, f)
        r = run([plot, "sweep", os.path.join(tmp, "other.json"), "--out", os.path.join(tmp, "x")], tmp)
        check("plot.py sweep on another JSON: one line naming what it reads",
              r.returncode != 0 and r.stderr.strip().endswith("not a `pert sweep --out` file, `pert perplexity "
                                                               "--json-out` file or JSON list of pert.sweep records"),
              r.stderr[-500:])
        profiles = []
        for name, scale in (("rope", 1.0), ("xpos", 0.5)):
            profiles.append(os.path.join(tmp, f"{name}.json"))
            with open(profiles[-1], "w") as f:
                json.dump({"model_dir": f"models/{name}", "per_head": True, "position": f"{name} scheme",
                           "scheme": "rope", "trained_length": 8,
                           "scores": [[scale * (16 - d) for d in range(17)]] * 2}, f)
        r = run([plot, "positions", "+".join(profiles), profiles[0], "--out", os.path.join(tmp, "p")], tmp)
        check("plot.py positions A+B B: writes PREFIX.png/.svg and prints their paths",
              r.returncode == 0 and os.path.getsize(os.path.join(tmp, "p.png")) > 0 and "p.png" in r.stdout,
              f"exit {r.returncode}, stderr {r.stderr[-500:]!r}")
    plot_attention_checks()
    family_results_checks()
    print(f"{len(failures)} failed" if failures else "all passed")
    return 1 if failures else 0


def png_size(path):
    with open(path, "rb") as f:
        head = f.read(24)
    return int.from_bytes(head[16:20], "big"), int.from_bytes(head[20:24], "big")


def plot_attention_checks():
    """tools/plot/plot_attention.py run as a file draws what plot.py attention draws; the family's
    13 cells at 8L wrap into a figure a page can show; two cells of one name get two titles."""
    from plot import plot_attention
    family = os.path.join(os.path.dirname(os.path.dirname(HERE)), "docs", "results", "data", "attention", "family.json")
    with tempfile.TemporaryDirectory() as tmp:
        prefix = os.path.join(tmp, "sub", "a")
        r = run([os.path.join(TOOLS, "plot", "plot_attention.py"), family, "--lengths", "1024", "--out", prefix], tmp)
        wrote = [f"{prefix}_{k}.{e}" for k in ("heatmaps", "distance") for e in ("png", "svg")]
        check("plot_attention.py FILE --out X: writes X_heatmaps/_distance .png/.svg and prints their paths",
              r.returncode == 0 and all(os.path.exists(w) and os.path.getsize(w) > 0 and w in r.stdout for w in wrote),
              f"exit {r.returncode}, stdout {r.stdout[-500:]!r}, stderr {r.stderr[-500:]!r}")
        if r.returncode == 0:
            width, height = png_size(prefix + "_heatmaps.png")
            check("plot_attention.py: 13 cells' heat maps wrap into rows, at most 2500 pixels wide", width <= 2500
                  and height > width / 2, (width, height))
        r = run([os.path.join(TOOLS, "plot", "plot_attention.py"), family, "--out", os.path.join(tmp, "b"),
                 "--lengths", "3"], tmp)
        check("plot_attention.py with no cell at --lengths: a one-line error, no file",
              r.returncode != 0 and len(r.stderr.strip().splitlines()) == 1
              and not any(f.startswith("b") for f in os.listdir(tmp)), r.stderr[-300:])
        other = os.path.join(tmp, "other.json")
        with open(family) as f:
            d = json.load(f)
        for c in d["cells"]:
            c["position_label"] += " (layers changed)"
        with open(other, "w") as f:
            json.dump(d, f)
        def load(path, kind, ok):
            with open(path) as f:
                return json.load(f)
        names = [n for n, _ in plot_attention.load_cells([family, other], {1024}, load, os.path.basename)]
        shown = 2 * sum(c["length"] == 1024 and "error" not in c for c in d["cells"])  # each file's cells at 8L
        check("plot_attention.py: one model's cells in two files with other positions: titles told apart",
              len(names) == len(set(names)) == shown and "rope plain @1024 (rope (layers changed))" in names, names)
        with open(family) as f:
            d = json.load(f)
        with open(other, "w") as f:
            json.dump(d, f)
        names = [n for n, _ in plot_attention.load_cells([family, other], {1024}, load, os.path.basename)]
        check("plot_attention.py: one model's cells in two files, positions alike: titles told apart by the file",
              len(names) == len(set(names)) == shown and "rope plain @1024 (other.json)" in names, names)



def family_results_checks():
    """tools/results/family_results.sh -n: docs/results/hybrid.md's NAMES subset plans only those
    models' cells (their sweeps beside rope, none and alibi, plain and with key tokens, pass-key, RULER), none of rope's
    extension rows, learned's clamp rows or the other members'; every step numbered of the whole;
    a name outside the family is one line."""
    script = os.path.join(TOOLS, "results", "family_results.sh")
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ, NAMES="rnope_swa irope", METHODS="none", OUT=tmp)
        r = subprocess.run(["bash", script, "-t", "1", "-n"], capture_output=True, text=True, env=env, timeout=120)
        steps = r.stdout.splitlines()
        n = len(steps)
        check("family_results.sh -n: exit 0, steps [1/N]..[N/N], nothing run or written",
              r.returncode == 0 and n > 0 and all(s.startswith(f"[{k + 1}/{n}] ") for k, s in enumerate(steps))
              and os.listdir(tmp) == [], f"exit {r.returncode}, {r.stdout[-800:]!r} {r.stderr[-300:]!r}")
        runs = [s for s in steps if " sweep " in s or " passkey " in s or " ruler " in s]
        check("family_results.sh -n, NAMES=\"rnope_swa irope\" METHODS=none: their cells only",
              len(runs) == 7 and sum("-m models/rnope_swa -m models/irope -m models/rope -m models/none -m models/alibi "
                                     in s for s in runs) == 3
              and all("models/irope" in s or "models/rnope_swa" in s for s in runs)
              and not any(w in s for s in steps for w in ("extend_family_rope.json", "clamp", "local_global", "--config")),
              runs)
        env["NAMES"] = "rope nope"
        r = subprocess.run(["bash", script, "-n"], capture_output=True, text=True, env=env, timeout=120)
        check("family_results.sh: a name outside the family is a one-line error naming it",
              r.returncode == 2 and "'nope'" in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr)


if __name__ == "__main__":
    sys.exit(main())
