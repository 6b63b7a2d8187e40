#!/usr/bin/env python3
"""The extrapolation results page's tables are what pert prints, and pert still prints them;
the README's quick-start tables are those results.

    readme_extrapolation_test.py PERT

For each sweep file under docs/results/data/extrapolation/ that docs/results/extrapolation.md shows: the
Markdown table that `pert sweep --merge FILE` prints must appear verbatim there; then a few cells
are run again from scratch with the page's flags (its text remade by tools/train/heldout.py or
tools/train/wikitext_prefix.py) and must give the same perplexity as the file (to 1e-6 relative: same
code, same threads' order of sums). Every row of a sweep table in README.md's quick start must
equal those files' cells (model, config label, length), to the two decimals it shows.
"""
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TEXTS = {"heldout": "heldout.py", "wikitext": "wikitext_prefix.py"}  # text -> tools/train/ script that makes it
# One or two cheap cells a file (a WikiText cell reads 148,000 tokens): the cells share their code.
SWEEPS = {  # file -> (text, cells re-run: (model, config, length))
    "family_wikitext.json": ("wikitext", [("models/kerple", "plain", 256)]),
    "family.json": ("heldout", [("models/alibi", "plain", 256), ("models/sinusoidal", "plain", 512)]),
    "stories260K.json": ("heldout", [("build/models/stories260K", "configs/rope/ntk-x2.json", 512)]),
    "extend_stories260K.json": ("heldout", [("build/models/stories260K", "configs/extend/self-extend-llama.json", 512)]),
    "extend_family_rope.json": ("heldout", [("models/rope", "configs/extend/streaming.json", 256)]),
}


def quick_start_failures():
    """README.md's quick-start sweep tables against the committed sweeps' cells."""
    cells = {}
    for name in SWEEPS:
        for c in json.load(open(os.path.join(ROOT, "docs", "results", "data", "extrapolation", name)))["cells"]:
            if "ppl" in c:
                cells[(os.path.basename(c["model"]), c["label"], c["length"])] = c["ppl"]
    failures, rows = [], 0
    lengths = None
    for line in open(os.path.join(ROOT, "README.md"), encoding="utf-8"):
        line = line.strip()
        if not line.startswith("|"):
            lengths = None
            continue
        fields = [f.strip() for f in line.strip("|").split("|")]
        if fields[:3] == ["model", "config", "positions"]:
            lengths = [int(f.split()[0]) for f in fields[3:]]
        elif lengths and not fields[0].startswith("---"):
            for length, shown in zip(lengths, fields[3:]):
                want = cells.get((fields[0], fields[1], length))
                rows += 1
                if want is None or f"{want:.2f}" != shown:
                    failures.append(f"README.md: {fields[0]} {fields[1]} @{length} shows {shown}, "
                                    f"the committed sweeps {want}")
    if rows == 0:
        failures.append("README.md: no quick-start sweep table found")
    print(f"README.md quick start: {rows} values checked against docs/results/data/extrapolation/")
    return failures


def main():
    pert = os.path.abspath(sys.argv[1])
    readme = open(os.path.join(ROOT, "docs", "results", "extrapolation.md"), encoding="utf-8").read()
    failures = quick_start_failures()
    with tempfile.TemporaryDirectory() as tmp:
        texts = {}
        for kind, script in TEXTS.items():
            texts[kind] = os.path.join(tmp, kind + ".txt")
            subprocess.run(["/usr/bin/python3", os.path.join(ROOT, "tools", "train", script), texts[kind]], check=True)
        for name, (kind, cells) in SWEEPS.items():
            path = os.path.join(ROOT, "docs", "results", "data", "extrapolation", name)
            sweep = json.load(open(path))
            merged = os.path.join(tmp, "merged-" + name)  # a fresh file each: --merge adds to --out's cells
            table = subprocess.run([pert, "sweep", "--merge", path, "--out", merged], check=True,
                                   capture_output=True, text=True, cwd=ROOT).stdout
            if table not in readme:
                failures.append(f"{name}: docs/results/extrapolation.md lacks the table `pert sweep --merge` prints:\n{table}")
            settings = sweep["settings"]
            for i, (model, config, length) in enumerate(cells):
                if not os.path.isdir(os.path.join(ROOT, model)):
                    print(f"{model}: missing (tools/setup.sh makes it); skipped")
                    continue
                want = next(c for c in sweep["cells"]
                            if (c["model"], c["config"], c["length"]) == (model, config, length))
                out = os.path.join(tmp, f"cell-{os.path.splitext(name)[0]}-{i}.json")  # a fresh file each: sweep resumes
                cmd = [pert, "sweep", "-m", model, "--config", config, "--lengths", str(length), "-f", texts[kind],
                       "--mode", settings["mode"], "--buckets", str(settings["buckets"]), "--out", out]
                cmd += ["--split-docs"] if settings["split_docs"] else []
                subprocess.run(cmd, check=True, capture_output=True, cwd=ROOT)
                got = json.load(open(out))["cells"][0]
                ok = abs(got["ppl"] - want["ppl"]) <= 1e-6 * want["ppl"] and got["tokens"] == want["tokens"]
                print(f"{name}: {model} {config} @{length}: PPL {got['ppl']:.4f} now, {want['ppl']:.4f} in the file"
                      f" ({got['tokens']} tokens) {'ok' if ok else 'DIFFERENT'}")
                if not ok:
                    failures.append(f"{name}: {model} {config} @{length} gives {got['ppl']}, the file {want['ppl']}")
    for f in failures:
        print("FAILED:", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
