#!/usr/bin/env python3
"""Issue 33's bars for a retrained family, measured with pert against the family it replaces:
each model must retrieve within L (pass-key accuracy >= 0.95 at L/2 and at the longest prompt
whose answer still ends within L, 5 depths x 10 trials, seed 7919) while its perplexity at L on
held-out TinyStories and on the WikiText-2 test prefix stays within 3% of the baseline's (the
same scheme's model in --baseline-dir, or for members without one, such as the hybrid layouts,
the model --baseline names: rope). Also RULER's tasks at L (those whose fixed text fits in
L: 3 depths x 10 trials; a learned table of L positions at 112, where the longest answer still
ends within it), which say what a model of this size learns from its share of them.

    family_acceptance.py MODEL_DIR [...] --out FILE.json [--baseline-dir models | --baseline models/rope] [-t THREADS]
    family_acceptance.py --table FILE.json [--what bars|ruler]
    family_acceptance.py --table FILE.json --what draws --beside OTHER.json [...]
    family_acceptance.py --check FILE.json        exit 1 naming each model below a bar

--what draws sets the same schemes trained with other draws (seeds, devices) beside FILE's: a
report's "draw" key names it in the table.

A measuring run adds its models to FILE.json (the others kept), so models are measured as their
training ends. The texts are made first if missing (tools/train/heldout.py, tools/train/wikitext_prefix.py).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tools/: import by folder (tools/README.md)
from lib import ROOT  # noqa: E402
from lib.results_tables import add_table_flag, print_and_save, print_table

PY = "/usr/bin/python3"
PERT = os.path.join(ROOT, "build", "pert")
TEXTS = {"tinystories": ("build/data/tinystories_heldout.txt", "heldout.py", ["--split-docs"]),
         "wikitext": ("build/data/wikitext2_test_prefix.txt", "wikitext_prefix.py", [])}
ESSAY = os.path.join(os.path.dirname(ROOT), "shared", "data", "text", "wikitext-2.test.tokens.txt")
SEED, L = 7919, 128
PASSKEY_LENGTHS = (L // 2, L - 8)  # 120: the longest prompt whose 8 answer tokens end within L
BAR_ACCURACY, BAR_PPL = 0.95, 0.03
LEARNED_RULER_LENGTH = L - 16  # 112: RULER's longest answer (16 tokens) ends within L; family_results.sh reads both


def pert(args, threads):
    """pert's JSON report of one command (its --json-out, read back)."""
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "r.json")
        r = subprocess.run([PERT] + args + ["-t", str(threads), "--json-out", out], cwd=ROOT,
                           capture_output=True, text=True)
        if r.returncode != 0:
            sys.exit(f"family_acceptance.py: pert {' '.join(args[:3])}: {(r.stderr.strip().splitlines() or ['?'])[-1]}")
        with open(out) as f:
            return json.load(f)


def trained_steps(model):
    """The optimizer steps of the model's training (its card.json), None without a card."""
    card = os.path.join(ROOT, model, "card.json")
    if not os.path.exists(card):
        return None
    with open(card) as f:
        return json.load(f)["steps"]


def measure(model, threads):
    """Pass-key accuracy at PASSKEY_LENGTHS, perplexity at L on TEXTS, RULER's tasks at L."""
    pk = pert(["passkey", "-m", model, "--lengths", ",".join(map(str, PASSKEY_LENGTHS)), "--trials", "10",
               "--seed", str(SEED)], threads)
    passkey = {str(n): sum(c["correct"] for c in pk["cells"] if c["length"] == n)
               / sum(len(c["results"]) for c in pk["cells"] if c["length"] == n) for n in PASSKEY_LENGTHS}
    ppl = {name: pert(["perplexity", "-m", model, "-f", path, "-c", str(L)] + flags, threads)["ppl"]
           for name, (path, _, flags) in TEXTS.items()}
    n = ruler_length(model)
    return {"steps": trained_steps(model), "passkey": passkey, "ppl": ppl, "ruler": ruler_at(model, n, threads),
            "ruler_length": n}


def ruler_length(model):
    """L, or for a learned table that cannot go past its rows (no "beyond": "clamp") the longest
    prompt whose longest answer still ends within it (as tools/results/family_results.sh measures it)."""
    with open(os.path.join(ROOT, model, "config.json")) as f:
        pos = json.load(f).get("position", {})
    return LEARNED_RULER_LENGTH if pos.get("type") == "learned" and pos.get("beyond") != "clamp" else L


def ruler_at(model, n, threads):
    """Each task's score at length n (mean over depths), None where it does not fit (its fixed
    text, or its prompt and answer in the model's positions)."""
    r = pert(["ruler", "-m", model, "--tasks", "all", "--lengths", str(n), "--depths", "0,0.5,1", "--trials", "10",
              "--seed", str(SEED), "--essay", ESSAY, "-q"], threads)
    tasks = {}
    for c in r["cells"]:
        tasks.setdefault(c["task"], []).append(c.get("score"))
    return {t: None if None in s else round(sum(s) / len(s), 1) for t, s in tasks.items()}


def failures(report):
    """(model, what) for every bar a model misses."""
    out = []
    for name, m in sorted(report["models"].items()):
        for n, acc in m["passkey"].items():
            if acc < BAR_ACCURACY:
                out.append((name, f"pass-key {acc:.2f} at {n} < {BAR_ACCURACY}"))
        for text, ppl in m["ppl"].items():
            base = m["baseline"]["ppl"][text]
            if ppl > base * (1 + BAR_PPL):
                out.append((name, f"{text} PPL {ppl:.2f} > {base:.2f} + {BAR_PPL:.0%}"))
    return out


def rise(m, text):
    """A model's perplexity on text over its baseline's, in percent."""
    return 100 * (m["ppl"][text] / m["baseline"]["ppl"][text] - 1)


def score(m, task):
    s = m.get("ruler", {}).get(task)
    return "—" if s is None else f"{s:.0f}"


def table(report, what="bars"):
    models = sorted(report["models"].items())
    if what == "ruler":
        tasks = [t for t in report["ruler_tasks"] if any(m["ruler"].get(t) is not None for _, m in models)]
        lines = [f"| model (baseline) | {' | '.join(tasks)} |", "|---|" + "---:|" * len(tasks)]
        for name, m in models:
            at = f" (at {m['ruler_length']})" if m.get("ruler_length", L) != L else ""
            lines.append(f"| {name}{at} | " + " | ".join(f"{score(m, t)} ({score(m['baseline'], t)})" for t in tasks) + " |")
        left = [t for t in report["ruler_tasks"] if t not in tasks]
        return "\n".join(lines) + (f"\n\nNot posable at L = {L} (their fixed text is longer): {', '.join(left)}."
                                   if left else "")
    a, b = PASSKEY_LENGTHS
    lines = [f"| model | steps (baseline) | pass-key at {a} / {b} (baseline) | TinyStories PPL at L (baseline) | "
             f"WikiText-2 PPL at L (baseline) | bars |", "|---|---:|---|---:|---:|---|"]
    missed = {}
    for name, what_missed in failures(report):
        missed.setdefault(name, []).append(what_missed)
    for name, m in models:
        p, bp = m["passkey"], m["baseline"]["passkey"]
        cells = [f"{m.get('steps') or '?'} ({m['baseline'].get('steps') or '?'})",
                 f"{p[str(a)]:.2f} / {p[str(b)]:.2f} ({bp[str(a)]:.2f} / {bp[str(b)]:.2f})"]
        for text in TEXTS:
            v, base = m["ppl"][text], m["baseline"]["ppl"][text]
            cells.append(f"{v:.2f} ({base:.2f}, {rise(m, text):+.1f}%)")
        cells.append("met" if name not in missed else "missed: " + "; ".join(missed[name]))
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def draws(report, others):
    """The same schemes trained twice (other draws: seeds, devices): a row per scheme with each
    report's pass-key, perplexity rise over its baseline, RULER needles and bars as "A · B", then
    the mean rise of each draw and the mean gap between them."""
    labels = [r.get("draw", "this") for r in [report] + others]
    a, b = PASSKEY_LENGTHS
    lines = [f"Draws, as \"{' · '.join(labels)}\":", "",
             f"| model | pass-key at {a} / {b} | TinyStories PPL at L vs baseline | WikiText-2 PPL at L vs baseline | "
             f"niah_single_1 / 2 at L | bars |", "|---|---|---:|---:|---|---|"]
    missed = [{n for n, _ in failures(r)} for r in [report] + others]
    rises = {text: [[] for _ in labels] for text in TEXTS}
    for name, m in sorted(report["models"].items()):
        ms = [m] + [r["models"].get(name) for r in others]
        if any(x is None for x in ms):
            continue

        def each(cell):
            return " · ".join(cell(x, i) for i, x in enumerate(ms))

        cells = [each(lambda x, i: f"{x['passkey'][str(a)]:.2f} / {x['passkey'][str(b)]:.2f}")]
        for text in TEXTS:
            for i, x in enumerate(ms):
                rises[text][i].append(rise(x, text))
            cells.append(each(lambda x, i: f"{rises[text][i][-1]:+.1f}%"))
        cells.append(each(lambda x, i: f"{score(x, 'niah_single_1')} / {score(x, 'niah_single_2')}"))
        cells.append(each(lambda x, i: "missed" if name in missed[i] else "met"))
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    mean = [" · ".join(f"{sum(r) / len(r):+.1f}%" for r in rises[text]) for text in TEXTS]
    gap = [f"{sum(abs(x - y) for x, y in zip(rises[text][0], r)) / len(r):.1f}" for text in TEXTS
           for r in rises[text][1:]]
    lines.append(f"| mean | | {mean[0]} | {mean[1]} | | |")
    lines.append(f"| mean gap between draws (points) | | {gap[0]} | {gap[1]} | | |")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("models", nargs="*", metavar="MODEL_DIR")
    ap.add_argument("--out", metavar="FILE.json", help="the report to add the models to")
    ap.add_argument("--baseline-dir", default="models", help="where each scheme's baseline model is (default %(default)s)")
    ap.add_argument("--baseline", metavar="MODEL_DIR",
                    help="one baseline for every model (the hybrid layouts: models/rope) instead of --baseline-dir/NAME")
    ap.add_argument("-t", "--threads", type=int, default=1)
    add_table_flag(ap)
    ap.add_argument("--what", choices=("bars", "ruler", "draws"), default="bars", help="which table --table prints")
    ap.add_argument("--beside", metavar="FILE.json", action="append", default=[],
                    help="--what draws: reports of the same schemes' other draws (each report's \"draw\" names it)")
    ap.add_argument("--check", metavar="FILE.json", help="exit 1 naming each model below a bar")
    a = ap.parse_args()
    if a.table:
        if a.what == "draws":
            if not a.beside:
                ap.error("--what draws needs --beside OTHER.json (the other draws' reports)")
            others = []
            for path in a.beside:
                with open(path) as f:
                    others.append(json.load(f))
            return print_table(a.table, lambda r: draws(r, others))
        return print_table(a.table, lambda r: table(r, a.what))
    if a.check:
        with open(a.check) as f:
            missed = failures(json.load(f))
        for name, what in missed:
            print(f"{name}: {what}")
        return 1 if missed else 0
    if not a.models or not a.out:
        ap.error("give MODEL_DIR ... and --out FILE.json (or --table / --check FILE.json)")
    for path, tool, _ in TEXTS.values():
        if not os.path.exists(os.path.join(ROOT, path)):
            subprocess.run([PY, os.path.join(ROOT, "tools", "train", tool), os.path.join(ROOT, path)], check=True)
    report = {"models": {}}
    if os.path.exists(a.out):
        with open(a.out) as f:
            report = json.load(f)
    report.update(trained_length=L, seed=SEED, passkey_lengths=list(PASSKEY_LENGTHS),
                  bars={"passkey_accuracy": BAR_ACCURACY, "ppl_rise": BAR_PPL})
    for model in a.models:
        name = os.path.basename(os.path.normpath(model))
        base = a.baseline or os.path.join(a.baseline_dir, name)
        print(f"family_acceptance.py: {name} (baseline {base})", file=sys.stderr)
        m = report["models"][name] = dict(model=model, **measure(model, a.threads),
                                          baseline=dict(model=base, **measure(base, a.threads)))
        report["ruler_tasks"] = list(m["ruler"])
    print_and_save(report, table, a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
