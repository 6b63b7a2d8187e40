#!/usr/bin/env python3
"""`pert passkey` against tools/reference/passkey_reference.py on the family's models.

    passkey_test.py PERT

For rope and alibi (lengths 64 and 160: within and past the trained 128) and rope with
Self-Extend (configs/extend/self-extend.json, length 256), 5 depths x 2 trials: every prompt has
exactly the requested length with the key sentence at the sentence boundary nearest the depth
and equals the prompt rebuilt from text with SentencePiece; every greedy answer, verdict and
cell accuracy equals the float64 reference's. Then the outputs agree with each other (Markdown
table, --json-out, --csv), tools/plot/plot_passkey.py draws them, --seed decides the keys, and README.md's and docs/results/passkey.md's tables are
what pert prints for its command.
"""
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tools"))
from reference import passkey_reference  # noqa: E402

SPM = os.path.join(ROOT, "models", "tokenizer", "tokenizer.model")
DEPTHS = [0, 0.25, 0.5, 0.75, 1]
RUNS = [("rope", [], "64,160"), ("alibi", [], "64,160"),
        ("rope", ["--config", os.path.join(ROOT, "configs", "extend", "self-extend.json")], "256")]


def passkey(pert, model, extra, lengths, tmp, name):
    return passkey_reference.run_pert(
        [pert, "passkey", "-m", os.path.join(ROOT, "models", model), "--lengths", lengths, "--depths",
         ",".join(map(str, DEPTHS)), "--trials", "2", "-q"] + extra, tmp, name)


def check_outputs(name, table, result, dump, rows, failures):
    """The table, the JSON, the dump and the CSV say the same; prompts have the requested shape."""
    if {k: v for k, v in dump.items() if k != "prompts"} != result:
        failures.append(f"{name}: --dump-prompts holds another result than --json-out")
    for c in result["cells"]:
        for r in c["results"]:
            ids = next(p["ids"] for p in dump["prompts"]
                       if (p["length"], p["depth"], p["trial"]) == (c["length"], c["depth"], r["trial"]))
            F, A = r["filler_tokens"], r["filler_before_key"]
            if len(ids) != c["length"] or ids[0] != 1:
                failures.append(f"{name}: prompt of {len(ids)} tokens for length {c['length']} (BOS first: {ids[0] == 1})")
            if r["key_token"] != 1 + A or not 10000 <= r["key"] <= 99999:
                failures.append(f"{name}: key {r['key']} at token {r['key_token']}, {A} filler tokens before it")
            if abs(A - c["depth"] * F) > 8:  # the nearest boundary: within a sentence (at most 8 tokens here)
                failures.append(f"{name}: depth {c['depth']}: {A} of {F} filler tokens before the key")
    for c, row in zip(result["cells"], rows):
        if (int(row["length"]), float(row["depth"]), int(row["correct"])) != (c["length"], c["depth"], c["correct"]):
            failures.append(f"{name}: CSV row {row} is not the cell {c['length']}/{c['depth']}")
    for length in dict.fromkeys(c["length"] for c in result["cells"]):
        accs = [c["accuracy"] for c in result["cells"] if c["length"] == length]
        want = f"| {length} | " + " | ".join(f"{a:.2f}" for a in accs) + f" | {sum(accs) / len(accs):.2f} |"
        if want not in table:
            failures.append(f"{name}: the table has no row {want!r}")


def main():
    pert = sys.argv[1]
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        for i, (model, extra, lengths) in enumerate(RUNS):
            name = model + (" + " + os.path.basename(extra[-1]) if extra else "")
            table, result, dump, rows = passkey(pert, model, extra, lengths, tmp, str(i))
            check_outputs(name, table, result, dump, rows, failures)
            found, cells = passkey_reference.check(dump, SPM)
            failures += [f"{name}: {f}" for f in found]
            print(f"{name}: {len(dump['prompts'])} prompts, lengths {lengths}: {len(found)} mismatches with the "
                  f"reference; accuracy {[c['accuracy'] for c in cells]}")
        png = os.path.join(tmp, "passkey.png")  # tools/plot/plot_passkey.py draws the heat-maps
        plot = subprocess.run([sys.executable, os.path.join(ROOT, "tools", "plot", "plot_passkey.py"), os.path.join(tmp, "0.json"),
                               os.path.join(tmp, "1.json"), "--cols", "1", "--out", png], capture_output=True, text=True)
        if plot.returncode != 0 or plot.stdout.strip() != png or not os.path.getsize(png):
            failures.append(f"plot_passkey.py: exit {plot.returncode}, {plot.stderr.strip()[-200:]}")
        other = json.loads(subprocess.run([pert, "passkey", "-m", os.path.join(ROOT, "models", "rope"), "--lengths",
                                           "64", "--depths", "0", "--trials", "2", "--seed", "7", "-q", "--json"],
                                          check=True, capture_output=True, text=True).stdout)
        keys = [r["key"] for r in other["cells"][0]["results"]]
        if keys == [r["key"] for r in result["cells"][0]["results"]]:
            failures.append(f"--seed 7 drew the keys of the default seed: {keys}")
        # The README's table is what pert prints for the committed result's command.
        shown = subprocess.run([pert, "passkey", "-m", "models/rope", "--lengths", "64,128,256,512", "-q"], cwd=ROOT,
                               check=True, capture_output=True, text=True).stdout.split("\n\n", 1)[1]
        for page in ("README.md", os.path.join("docs", "results", "passkey.md")):
            text = open(os.path.join(ROOT, page), encoding="utf-8").read()
            indented = "\n".join("    " + line if line else line for line in shown.split("\n"))  # the README's code block
            if shown not in text and indented not in text:
                failures.append(f"{page}'s pass-key table is not what pert passkey prints now")
    for f in failures:
        print("FAILED:", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
