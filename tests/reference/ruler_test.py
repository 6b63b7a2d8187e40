#!/usr/bin/env python3
"""`pert ruler` against tools/reference/ruler_reference.py on the family's models.

    ruler_test.py PERT

Every task on rope at lengths 128 and 320 (within and past the trained 128) in the short
wording and at 320 in RULER's, three tasks on rope with Self-Extend at 256 and four on alibi at
200, 1-2 depths x 1-2 trials: every prompt equals the one
tools/reference/ruler_tasks.py builds from the task, length, depth, trial and seed alone (same ids,
references and needle positions; haystack tasks exactly the length), every greedy answer and
score equals the float64 reference's, and lengths too short for a task are skipped with the
reason in the table, the JSON and the CSV. Then the outputs agree with each other (Markdown
table, --json-out, --csv), tools/plot/plot_passkey.py draws a panel a task, --seed decides the draws,
and bad input gets one line naming the flag.
"""
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tools"))
from reference import passkey_reference  # noqa: E402  (run_pert)
from reference import ruler_reference  # noqa: E402

SPM = os.path.join(ROOT, "models", "tokenizer", "tokenizer.model")
ESSAY = os.path.join(ROOT, "..", "shared", "data", "text", "wikitext-2.test.tokens.txt")
SELF_EXTEND = os.path.join(ROOT, "configs", "extend", "self-extend.json")
# (model, flags, lengths, tasks, depths, trials)
RUNS = [("rope", ["--template", "short"], "128,320", "all", "0.25,1", "1"),
        ("rope", ["--template", "ruler"], "320", "all", "0.5", "1"),
        ("rope", ["--config", SELF_EXTEND], "256", "niah_single_1,niah_multikey_2,vt", "0,1", "1"),
        ("alibi", [], "200", "niah_single_1,niah_single_2,vt,fwe", "0.5", "2")]


def ruler(pert, model, extra, lengths, tmp, name, tasks="all", depths="0.25,1", trials="2", seed="7"):
    return passkey_reference.run_pert(
        [pert, "ruler", "-m", os.path.join(ROOT, "models", model), "--tasks", tasks, "--lengths", lengths,
         "--depths", depths, "--trials", trials, "--seed", seed, "--essay", ESSAY, "-q", "-t", "1"] + extra, tmp, name)


def check_outputs(name, table, result, dump, rows, failures):
    """The table, the JSON, the dump and the CSV say the same."""
    if {k: v for k, v in dump.items() if k != "prompts"} != result:
        failures.append(f"{name}: --dump-prompts holds another result than --json-out")
    if len(rows) != len(result["cells"]):
        failures.append(f"{name}: {len(rows)} CSV rows for {len(result['cells'])} cells")
    for c, row in zip(result["cells"], rows):
        score = "" if c["score"] is None else c["score"]
        if (row["task"], int(row["length"]), row["skipped"] == "yes") != (c["task"], c["length"], "skipped" in c) or \
                (score != "" and abs(float(row["score"]) - score) > 1e-9):
            failures.append(f"{name}: CSV row {row} is not the cell {c['task']}/{c['length']}/{c['depth']}")
    for task in result["tasks"]:
        cells = [c for c in result["cells"] if c["task"] == task]
        parts = []
        for length in result["lengths"]:
            scores = [c["score"] for c in cells if c["length"] == length]
            parts.append("—" if None in scores else f"{sum(scores) / len(scores):.1f}")
            if None in scores and not any(c.get("skipped", "").startswith(f"ruler: {task} at --lengths {length}: too short")
                                          for c in cells):
                failures.append(f"{name}: {task} at {length} skipped without its reason")
        want = f"| {task} | " + " | ".join(parts) + " |"
        if want not in table:
            failures.append(f"{name}: the table has no row {want!r}")


def main():
    pert = sys.argv[1]
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        for i, (model, extra, lengths, tasks, depths, trials) in enumerate(RUNS):
            name = f"{model} {' '.join(os.path.basename(x) for x in extra)}"
            table, result, dump, rows = ruler(pert, model, extra, lengths, tmp, str(i), tasks, depths, trials)
            check_outputs(name, table, result, dump, rows, failures)
            found, cells = ruler_reference.check(dump, SPM)
            failures += [f"{name}: {f}" for f in found]
            skipped = sum("skipped" in c for c in result["cells"])
            print(f"{name}: {len(dump['prompts'])} prompts, lengths {lengths}, {skipped} cells too short: "
                  f"{len(found)} mismatches with the reference")
        png = os.path.join(tmp, "ruler.png")  # tools/plot/plot_passkey.py draws a panel a task
        plot = subprocess.run([sys.executable, os.path.join(ROOT, "tools", "plot", "plot_passkey.py"), os.path.join(tmp, "3.json"),
                               "--cols", "2", "--out", png], capture_output=True, text=True)
        if plot.returncode != 0 or plot.stdout.strip() != png or not os.path.getsize(png):
            failures.append(f"plot_passkey.py on a ruler result: exit {plot.returncode}, {plot.stderr.strip()[-200:]}")
        # --seed decides every draw; the same seed the same prompts
        a = ruler(pert, "rope", [], "200", tmp, "s1", tasks="niah_single_1,vt,kv", trials="1", seed="1")[2]
        b = ruler(pert, "rope", [], "200", tmp, "s2", tasks="niah_single_1,vt,kv", trials="1", seed="2")[2]
        c = ruler(pert, "rope", [], "200", tmp, "s3", tasks="niah_single_1,vt,kv", trials="1", seed="1")[2]
        if a["prompts"] == b["prompts"] or a["prompts"] != c["prompts"]:
            failures.append("--seed: another seed must draw other prompts, the same seed the same")
        # bad input: one line naming the flag, exit 1
        for args, want in ((["--tasks", "niah_single_9", "--lengths", "128"], "no task \"niah_single_9\""),
                           (["--tasks", "niah_multikey_2", "--lengths", "40"], "--lengths 40: too short"),
                           (["--tasks", "vt", "--lengths", "128", "--template", "long"], "--template")):
            r = subprocess.run([pert, "ruler", "-m", os.path.join(ROOT, "models", "rope"), "-q"] + args,
                               capture_output=True, text=True)
            lines = r.stderr.strip().splitlines()
            if r.returncode == 0 or len(lines) != 1 or want not in lines[0]:
                failures.append(f"pert ruler {' '.join(args)}: exit {r.returncode}, stderr {r.stderr.strip()!r} "
                                f"(wanted one line with {want!r})")
        # Without --essay, the essay tasks take the WikiText-2 articles tools/setup.sh writes, and say so.
        setup_essay = os.path.join(ROOT, "build", "data", "wikitext2_test_prefix.txt")
        r = subprocess.run([pert, "ruler", "-m", os.path.join(ROOT, "models", "rope"), "-q", "--tasks", "niah_single_2",
                            "--lengths", "128", "--trials", "1", "--depths", "0.5", "--json"], capture_output=True, text=True)
        first = (r.stderr.strip().splitlines() or [""])[0]
        if os.path.isfile(setup_essay):
            if r.returncode != 0 or first != (f"pert: note: the essay haystack is {setup_essay} (tools/setup.sh's "
                                              "WikiText-2 articles; --essay to choose)") \
                    or json.loads(r.stdout)["essay"] != setup_essay:
                failures.append(f"ruler without --essay: exit {r.returncode}, stderr {r.stderr.strip()[-300:]!r}")
        elif r.returncode == 0 or "--essay" not in r.stderr:
            failures.append(f"ruler without --essay or set-up's essay: exit {r.returncode}, {r.stderr.strip()!r}")
    for f in failures:
        print("FAILED:", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
