#!/usr/bin/env python3
"""The published training-free claims beside the family's results: the tables of
docs/results/claims.md, one per claim, from the files tools/results/family_results.sh writes and the
papers' numbers in docs/results/data/published_claims.json.

    claims.py [--data docs/results/data/extrapolation] [--published FILE] TABLE [--plot FILE.png] [--out FILE]

TABLE is one of: selfextend, rerope, streaming, ntk, pi, effective, hybrid (the hybrid layouts'
perplexity and pass-key past L beside rope, none and alibi, and Cohere's RNoPE-SWA numbers), dca
(Dual Chunk Attention and Self-Extend on the models with RoPE layers, beside ChunkLlama's), kept (which method keeps
retrieval past L on which scheme: methods x schemes, each cell the pass-key and the RULER
effective lengths; --plot draws it as two heat-maps), grid (every score behind them as CSV: scheme,
method, task (passkey or a RULER task), length, score out of 100 over depths and trials, trials;
tasks that cannot be posed at a length left out), content (the schemes whose positions come
from the content beside rope, learned, none and alibi: WikiText-2 PPL past L, key-token PPL,
pass-key and RULER effective lengths, then their papers' claims). The page marks each table
with this command, and tools/lib/results_tables.py --check (CTest docs_tables) holds it to what the
command prints. Inputs (DATA = --data):
  DATA/extend_family_rope.json   `pert sweep`: the rope model under each config, held-out stories
  DATA/streaming_wikitext.json   `pert sweep`: the rope model with and without sinks, WikiText-2 test
  DATA/hybrid_wikitext.json      `pert sweep`: the hybrid members, rope, none and alibi, WikiText-2 test
  DATA/family_wikitext.json      `pert sweep`: each scheme's model, WikiText-2 test
  DATA/family_wikitext_key.json  `pert sweep --key-tokens`: the same, with key-token perplexity
  DATA/extend_stories260K.json   `pert sweep`: stories260K under each config, held-out stories
  DATA/passkey/NAME[+CONFIG].json.gz  `pert passkey`: each scheme's model plain and under CONFIG (or .json)
  DATA/ruler/NAME[+CONFIG].json.gz    `pert ruler`: the same pairs (or .json)

Losses are as ReRoPE's author reports them: the mean NLL of the last L tokens of each chunk of
N tokens (from the sweep's NLL by position), so a longer chunk gives those tokens more context
and a method that uses it shows a lower loss. The effective length (after RULER): the longest
length up to which the score stays at or above the score at L minus 10 points; a row whose score
at L is below 50 has none ("—": it does not do the task within L, so nothing past L can be read
from it). RULER's score is the mean over the tasks posed at every length that the scheme's plain
model scores at least 50 on at L (its method rows use the same tasks); pass-key's is the
accuracy x 100.
"""
import argparse
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tools/: import by folder (tools/README.md)
from lib import ROOT  # noqa: E402
from lib.family_names import FAMILY, HYBRID
from lib import result_files  # noqa: E402
from results.paper_shapes import load  # noqa: E402  (plain or .json.gz)

TABLES = ("selfextend", "rerope", "streaming", "ntk", "pi", "effective", "kept", "grid", "hybrid", "dca", "content")
BESIDE = ["rope", "none", "alibi"]  # the schemes the hybrid layouts are read against
CONTENT = ["cope", "fox", "stick_breaking"]  # positions from the content, read against rope, learned, none, alibi
MARGIN, FLOOR = 10.0, 50.0  # the effective length's threshold: score at L − MARGIN, rows below FLOOR at L have none


def passkey_name(config, scheme):
    """A pass-key file's name: SCHEME for its plain model, SCHEME+CONFIG under a method."""
    return scheme if config == "plain" else f"{scheme}+{config}"


class Results:
    """The family's result files under DATA, read on first use."""

    def __init__(self, data, published):
        self.data, self.published = data, load(published)
        self._sweeps, self._passkey, self._counts = {}, None, None

    def sweep(self, name="extend_family_rope.json"):
        """{config label: {length: cell}} of a sweep of the rope model."""
        if name not in self._sweeps:
            self._sweeps[name] = {}
            for c in load(os.path.join(self.data, name))["cells"]:
                if c.get("ppl") is not None:
                    self._sweeps[name].setdefault(c["label"], {})[c["length"]] = c
        return self._sweeps[name]

    def passkey(self, config, scheme="rope"):
        """{length: accuracy} of SCHEME's model under CONFIG (plain: SCHEME.json), or None."""
        return self.passkey_files().get(passkey_name(config, scheme), (None, None))[1]

    def passkey_reports(self):
        """{NAME: report} of every pass-key file, read once."""
        if self._passkey is None:
            d = os.path.join(self.data, "passkey")
            self._passkey = {name: load(path) for name, path in result_files(d).items()}
        return self._passkey

    def passkey_counts(self):
        """{NAME: (trained length, {length: (correct, trials)})} of every pass-key file, summed once."""
        if self._counts is None:
            self._counts = {}
            for name, report in self.passkey_reports().items():
                by_length = {}
                for c in report["cells"]:
                    correct, trials = by_length.get(c["length"], (0, 0))
                    by_length[c["length"]] = (correct + c["correct"], trials + c["trials"])
                self._counts[name] = (report["trained_length"], by_length)
        return self._counts

    def passkey_files(self):
        """{NAME: (trained length, {length: accuracy})} of every pass-key file."""
        return {name: (L, {n: k / t for n, (k, t) in by_length.items()})
                for name, (L, by_length) in self.passkey_counts().items()}

    def first_digit(self, config, scheme="rope"):
        """{length: fraction of answers whose first digit is the key's} of SCHEME's model under
        CONFIG, or None: finding the key (its first digit) apart from copying it on (the rest)."""
        report = self.passkey_reports().get(passkey_name(config, scheme))
        if report is None:
            return None
        right = {}
        for c in report["cells"]:
            for t in c["results"]:
                digit = re.search(r"\d", t["answer"])
                right.setdefault(c["length"], []).append(bool(digit) and digit.group() == str(t["key"])[0])
        return {n: sum(v) / len(v) for n, v in right.items()}

    def ruler(self):
        """[(name, result)] of every ruler file, schemes first, in name order."""
        d = os.path.join(self.data, "ruler")
        files = result_files(d)
        return [(n, load(files[n])) for n in sorted(files, key=lambda n: ("+" in n, n))]


def tail_nll(cell, L):
    """The mean NLL of the chunk's last L tokens (the buckets that start at or after N − L)."""
    start = cell["length"] - L
    buckets = [b for b in cell["nll_by_position"] if b["first"] >= start] or cell["nll_by_position"][-1:]
    tokens = sum(b["tokens"] for b in buckets)
    return sum(b["nll"] * b["tokens"] for b in buckets) / tokens


def multiples(cells, L, most=None):
    return [n for n in sorted(cells) if n % L == 0 and (most is None or n <= most * L)]


def fmt(x, digits=2):
    return "—" if x is None else f"{x:.{digits}f}"


def loss_table(r, labels, published, most=8):
    """Tail NLL per config at 1x..most x L (pert), then the published rows at their multiples."""
    sweep = r.sweep()
    L = next(iter(next(iter(sweep.values())).values()))["trained_length"]
    lengths = multiples(sweep["plain"], L, most)
    out = ["| pert: rope model, loss of the last L tokens | " + " | ".join(f"{n // L}×L" for n in lengths) + " |",
           "|---|" + "---:|" * len(lengths)]
    for label in labels:
        cells = sweep.get(label, {})
        out.append(f"| {label} | " + " | ".join(fmt(tail_nll(cells[n], L), 3) if n in cells else "—" for n in lengths) + " |")
    if published:
        xs = published["lengths_x"]
        out += ["", f"| published ({published['source'].split(':')[0]}) | " + " | ".join(f"{x}×L" for x in xs) + " |",
                "|---|" + "---:|" * len(xs)]
        for name, values in published["loss"].items():
            out.append(f"| {name} | " + " | ".join(fmt(v, 4) for v in values) + " |")
    return "\n".join(out)


def passkey_rows(r, configs, most=None):
    """The rope model's pass-key accuracy by length, a row per config that has a file."""
    return passkey_table(r, {c: passkey_name(c, "rope") for c in configs}, "pert: rope model, pass-key", most)


def passkey_table(r, rows, title, most=None):
    """Pass-key accuracy by length: {row label: pass-key file name}, the rows that have a file."""
    files = r.passkey_files()
    rows = {label: files[name][1] for label, name in rows.items() if name in files}
    lengths = sorted({n for v in rows.values() for n in v if most is None or n <= most})
    out = [f"| {title} | " + " | ".join(str(n) for n in lengths) + " |", "|---|" + "---:|" * len(lengths)]
    for label, v in rows.items():
        out.append(f"| {label} | " + " | ".join(fmt(v.get(n)) for n in lengths) + " |")
    return out


def selfextend(r):
    p = r.published["self_extend"]
    out = passkey_rows(r, ["plain", "self-extend", "self-extend-llama", "self-extend-g64", "self-extend-4x"])
    out += ["", "| published | |", "|---|---|", f"| claim | {p['claim']} |", f"| numbers | {p['numbers']} |",
            f"| W and G | {p['rule']} |", f"| elsewhere | {p['independent']} |"]
    return "\n".join(out)


def rerope(r):
    return loss_table(r, ["plain", "rerope", "rerope-logn", "leaky-rerope", "leaky-rerope-k64", "ntk-x2", "ntk-x4"],
                      r.published["rerope"])


def ppl_rows(sweep, labels, title):
    lengths = sorted(sweep["plain"])
    out = [f"| {title} | " + " | ".join(str(n) for n in lengths) + " |", "|---|" + "---:|" * len(lengths)]
    for label in labels:
        cells = sweep.get(label, {})
        out.append(f"| {label} | " + " | ".join(fmt(cells[n]["ppl"]) if n in cells else "—" for n in lengths) + " |")
    return out


def streaming(r):
    sweep, p = r.sweep(), r.published["streaming"]
    labels = ["plain", "streaming", "streaming-original", "streaming-window"]
    out = ppl_rows(sweep, labels, "pert: rope model, PPL, held-out stories")
    out += [""] + ppl_rows(r.sweep("streaming_wikitext.json"), labels, "pert: rope model, PPL, WikiText-2 test")
    out += [""] + passkey_rows(r, labels)
    out += ["", "| published: Llama-2-7B, 400K tokens, cache 4096 | " + " | ".join(f"{s} sinks" for s in p["sinks"]) + " |",
            "|---|" + "---:|" * len(p["sinks"]), "| PPL | " + " | ".join(fmt(v) for v in p["ppl"]) + " |",
            "", f"Published retrieval: {p['retrieval']}."]
    return "\n".join(out)


def ntk(r):
    return loss_table(r, ["plain", "ntk-x2", "ntk-x4", "dynamic", "dynamic-logn", "yarn-x2", "logn"],
                      r.published["ntk_yarn"])


def pi(r):
    sweep, p = r.sweep(), r.published["pi"]
    L = sweep["plain"][min(sweep["plain"])]["trained_length"]
    base = sweep["plain"][L]["ppl"]
    out = ["| pert: rope model | scale s | PPL at L (plain) | PPL at s×L | ratio |", "|---|---:|---:|---:|---:|"]
    scaled = sorted((k for k in sweep if re.fullmatch(r"linear-x\d+", k)), key=lambda k: int(k.split("x")[1]))
    for label in scaled:
        s = int(label.split("x")[1])
        cell = sweep[label].get(s * L)
        out.append(f"| {label} | {s} | {fmt(base)} | {fmt(cell and cell['ppl'])} | "
                   f"{fmt(cell and cell['ppl'] / base)} |")
    found = {c: (r.passkey(c), r.first_digit(c)) for c in ["plain"] + scaled}
    found = {c: v for c, v in found.items() if v[0] and v[1]}
    if found:
        lengths = sorted({n for acc, _ in found.values() for n in acc if n <= 2 * L})
        out += ["", "| pert: rope model, pass-key: key right / first digit right | " + " | ".join(str(n) for n in lengths) + " |",
                "|---|" + "---:|" * len(lengths)]
        for c, (acc, first) in found.items():
            out.append(f"| {c} | " + " | ".join(f"{fmt(acc.get(n))} / {fmt(first.get(n))}" for n in lengths) + " |")
    out += ["", "| published: LLaMA-7B, PG19 | scale s | PPL at L | PPL at s×L, no fine-tuning | ratio | after 1000 steps |",
            "|---|---:|---:|---:|---:|---:|"]
    for s, raw, tuned in zip(p["scale"], p["no_fine_tuning"], p["after_1000_steps"]):
        out.append(f"| PI | {s} | {fmt(p['at_L'])} | {fmt(raw)} | {fmt(raw / p['at_L'])} | {fmt(tuned)} |")
    return "\n".join(out)


def effective_length(scores, L):
    """(score at L, threshold, effective length or None) from {length: mean score}; "at L" is
    the longest length not past L (a learned table's prompts end before L)."""
    within = [n for n in scores if n <= L]
    at_L = scores[max(within)] if within else None
    if at_L is None or at_L < FLOOR:
        return at_L, None, None
    threshold, best = at_L - MARGIN, None
    for n in sorted(k for k in scores if k >= max(within)):
        if scores[n] < threshold:
            break
        best = n
    return at_L, threshold, best


def task_scores(f):
    """{task: {length: mean score over depths and trials}} of a ruler file, for the tasks posed at
    every one of its lengths."""
    scored = {}
    for c in f["cells"]:
        scored.setdefault(c["task"], {}).setdefault(c["length"], []).append(c["score"])
    return {t: {n: sum(by[n]) / len(by[n]) for n in f["lengths"]} for t, by in scored.items()
            if all(None not in by.get(n, [None]) for n in f["lengths"])}


def ruler_means(files):
    """{name: (L, {length: mean score})} of ruler files, over the tasks the scheme learns: those
    its plain model scores at least FLOOR on at L (a task no model of the scheme does within L
    says nothing about a method past L; a method is judged on the same tasks as its scheme, or on
    its own at L when the plain file is missing)."""
    scores = {name: task_scores(f) for name, f in files}
    out = {}
    for name, f in files:
        L, plain = f["trained_length"], scores.get(name.partition("+")[0], scores[name])
        learned = [t for t, by in plain.items() if (effective_length(by, L)[0] or 0) >= FLOOR and t in scores[name]]
        out[name] = (L, {n: sum(scores[name][t][n] for t in learned) / len(learned) for n in f["lengths"]}
                     if learned else {}, learned)
    return out


def effective(r):
    files = r.ruler()
    if not files:
        return "(no ruler results yet: tools/results/family_results.sh writes them)"
    lengths = sorted({c["length"] for _, f in files for c in f["cells"]})
    out = ["| model | config | tasks | " + " | ".join(str(n) for n in lengths) + " | threshold | effective length |",
           "|---|---|---|" + "---:|" * (len(lengths) + 2)]
    for name, (L, means, tasks) in ruler_means(files).items():
        at_L, threshold, best = effective_length(means, L)
        model, _, config = name.partition("+")
        out.append(f"| {model} | {config or 'plain'} | {len(tasks)} | " +
                   " | ".join(fmt(means.get(n), 1) for n in lengths) +
                   f" | {fmt(threshold, 1)} | {'—' if best is None else best} |")
    p = r.published["ruler"]
    out += ["", f"Published ({p['source']}): {p['threshold']}.", "",
            "| published model | claimed | effective |", "|---|---|---|"]
    out += [f"| {m} | {c} | {e} |" for m, c, e in p["rows"]]
    return "\n".join(out)


def kept_length(L, scores):
    """The effective length of {length: score}: None when not measured, 0 when there is none
    (below FLOOR at L, or {}: no RULER task the scheme does within L)."""
    if scores is None:
        return None
    return (effective_length(scores, L)[2] if scores else None) or 0


def kept_grid(r):
    """(schemes, methods, {(method, scheme): (pass-key's, RULER's, L)}): each an effective length
    (0: none, the pair does not retrieve at L; None: not measured) of every pair with results,
    pass-key's accuracy read as a score out of 100, and the model's trained length."""
    passkey = {name: (L, {n: 100 * a for n, a in acc.items()}) for name, (L, acc) in r.passkey_files().items()}
    ruler = {name: (L, means) for name, (L, means, _) in ruler_means(r.ruler()).items()}
    grid = {}
    for name in set(passkey) | set(ruler):
        scheme, _, method = name.partition("+")
        measured = [passkey.get(name, (None, None)), ruler.get(name, (None, None))]
        grid[(method or "plain", scheme)] = tuple(kept_length(L, scores) for L, scores in measured) + (
            next(L for L, _ in measured if L),)
    order = FAMILY + HYBRID
    schemes = sorted({s for _, s in grid}, key=lambda s: (order.index(s) if s in order else len(order), s))
    methods = sorted({m for m, _ in grid}, key=lambda m: (m != "plain", m))
    return schemes, methods, grid


def kept(r, plot=None):
    schemes, methods, grid = kept_grid(r)
    if not grid:
        return "(no pass-key or ruler results yet: tools/results/family_results.sh writes them)"

    def text(cell):
        return "/".join("·" if x is None else "—" if x == 0 else str(x) for x in cell[:2])

    out = ["| method | " + " | ".join(schemes) + " |", "|---|" + "---:|" * len(schemes)]
    for m in methods:
        out.append(f"| {m} | " + " | ".join(text(grid[(m, s)]) if (m, s) in grid else "" for s in schemes) + " |")
    if plot:
        kept_plot(schemes, methods, grid, plot)
    return "\n".join(out)


def grid(r):
    """CSV: a row per (scheme, method, task, length) of every pass-key and ruler file."""
    rows = {}  # (name, task, length) -> [score x trials summed, trials]
    for name, (_, by_length) in r.passkey_counts().items():
        for n, (correct, trials) in by_length.items():
            rows[(name, "passkey", n)] = [100 * correct, trials]
    for name, f in r.ruler():
        for c in f["cells"]:
            if c["score"] is not None:
                row = rows.setdefault((name, c["task"], c["length"]), [0.0, 0])
                row[0] += c["score"] * c["trials"]
                row[1] += c["trials"]
    out = ["scheme,method,task,length,score,trials"]
    for (name, task, n), (total, trials) in sorted(rows.items(), key=lambda kv: (kv[0][0].partition("+"), kv[0][1:])):
        scheme, _, method = name.partition("+")
        out.append(f"{scheme},{method or 'plain'},{task},{n},{total / trials:.1f},{trials}")
    return "\n".join(out)


def kept_plot(schemes, methods, grid, path):
    """Two heat-maps (pass-key, RULER) of methods x schemes, coloured by the effective length."""
    import math
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np
    from lib.outputs import save_figure
    fig, axes = plt.subplots(1, 2, figsize=(2.5 + 0.85 * len(schemes), 1.2 + 0.3 * len(methods)), squeeze=False)
    cmap = matplotlib.colormaps["viridis"].copy()
    cmap.set_bad("#eeeeee")
    for k, (ax, title) in enumerate(zip(axes[0], ("pass-key", "RULER (tasks learned within L)"))):
        z = np.full((len(methods), len(schemes)), np.nan)
        for i, m in enumerate(methods):
            for j, s in enumerate(schemes):
                cell = grid.get((m, s), (None, None, None))
                v, L = cell[k], cell[2]
                if v is not None:
                    z[i, j] = math.log2(max(v, L / 2) / L)  # none shown as below L
                    ax.text(j, i, "—" if v == 0 else str(v), ha="center", va="center", fontsize=6,
                            color="white" if z[i, j] < 2 else "black")
        im = ax.imshow(z, cmap=cmap, vmin=-1, vmax=5, aspect="auto")
        ax.set_xticks(range(len(schemes)), schemes, rotation=45, ha="right", fontsize=7)
        ax.set_yticks(range(len(methods)), methods if k == 0 else [""] * len(methods), fontsize=7)
        ax.set_title(f"{title}: effective length", fontsize=8)
    bar = fig.colorbar(im, ax=axes[0].tolist(), fraction=0.03)
    bar.set_ticks(range(-1, 6), labels=["none", "L", "2L", "4L", "8L", "16L", "32L"], fontsize=7)
    save_figure(fig, path, dpi=120, bbox_inches="tight")
    print(path, file=sys.stderr)


def plain_cells(path):
    """{model name: {length: cell}} of a sweep's plain rows, or {} where the file is not there."""
    cells = {}
    for c in (load(path)["cells"] if os.path.exists(path) else []):
        if c.get("ppl") is not None and c["label"] == "plain":
            cells.setdefault(c["model"].rstrip("/").split("/")[-1], {})[c["length"]] = c
    return cells


def hybrid(r):
    path = os.path.join(r.data, "hybrid_wikitext.json")
    if not os.path.exists(path):
        return "(no hybrid results yet: NAMES=\"...\" tools/results/family_results.sh writes them)"
    ppl = plain_cells(path)
    names = [n for n in BESIDE + HYBRID if n in ppl]
    lengths = sorted({n for v in ppl.values() for n in v})
    out = ["| pert: WikiText-2 test, PPL at L, then ÷ it | PPL at L | " +
           " | ".join(f"{n}" for n in lengths) + " |", "|---|---:|" + "---:|" * len(lengths)]
    for name in names:
        L = next(iter(ppl[name].values()))["trained_length"]
        at_L = ppl[name].get(L, {}).get("ppl")
        out.append(f"| {name} | {fmt(at_L)} | " + " | ".join(
            fmt(ppl[name][n]["ppl"] / at_L) if n in ppl[name] and at_L else "—" for n in lengths) + " |")
    out += [""] + passkey_table(r, {n: n for n in names}, "pert: pass-key")
    p = r.published["rnope_swa"]
    out += ["", "| published: RULER, 8B (Yang et al. 2025) | " + " | ".join(p["lengths"]) + " |",
            "|---|" + "---:|" * len(p["lengths"])]
    out += [f"| {name} | " + " | ".join(fmt(v, 1) for v in values) + " |" for name, values in p["rows"]]
    out += ["", f"Published: {p['claim']}; {p['note']}."]
    return "\n".join(out)


def dca(r):
    rows = [f"{m}{'' if c == 'plain' else '+' + c}" for m in ["rope"] + HYBRID for c in ("plain", "self-extend", "dca")]
    out = passkey_table(r, {n: n for n in rows}, "pert: pass-key")
    for name, title in (("extend_family_rope.json", "pert: rope model (L = 128), PPL, held-out stories"),
                        ("extend_stories260K.json", "pert: stories260K (L = 512), PPL, held-out stories")):
        sweep = r.sweep(name) if os.path.exists(os.path.join(r.data, name)) else {}
        if "plain" in sweep:
            out += [""] + ppl_rows(sweep, ["plain", "self-extend", "self-extend-g64", "dca"], title)
    p = r.published["dca"]
    out += ["", "| published: PG19 PPL (An et al. 2024, Table 1) | " + " | ".join(str(n) for n in p["lengths"]) + " |",
            "|---|" + "---:|" * len(p["lengths"])]
    out += [f"| {name} | " + " | ".join(fmt(v) if v is not None else ">10²" for v in values) + " |"
            for name, values in p["rows"]]
    out += ["", f"Published pass-key: {p['passkey']}. Defaults: {p['defaults']}."]
    return "\n".join(out)


def content(r):
    """The schemes whose positions come from the content beside rope, learned, none and alibi:
    WikiText-2 PPL at L and its ratio past L, key-token PPL (LongPPL) at L and at the longest
    length, pass-key and RULER effective lengths; then each paper's claims."""
    ppl = plain_cells(os.path.join(r.data, "family_wikitext.json"))
    key = plain_cells(os.path.join(r.data, "family_wikitext_key.json"))
    _, _, kept_cells = kept_grid(r)
    names = [n for n in CONTENT + ["rope", "learned", "none", "alibi"] if n in ppl]
    lengths = sorted({n for v in ppl.values() for n in v})
    L, longest = lengths[0], lengths[-1]
    out = ["| pert: WikiText-2 test | PPL at L | " + " | ".join(f"÷ at {n // L}L" for n in lengths[1:]) +
           f" | LongPPL at L | LongPPL at {longest // L}L | pass-key kept to | RULER kept to |",
           "|---|---:|" + "---:|" * (len(lengths) + 3)]
    for name in names:
        at_L = ppl[name].get(L, {}).get("ppl")
        ratios = [fmt(ppl[name][n]["ppl"] / at_L) if n in ppl[name] and at_L else "—" for n in lengths[1:]]
        keys = [fmt(key.get(name, {}).get(n, {}).get("key_ppl")) for n in (L, longest)]
        kept_at = kept_cells.get(("plain", name), (None, None))[:2]
        out.append(f"| {name} | {fmt(at_L)} | " + " | ".join(ratios + keys) + " | " +
                   " | ".join("·" if x is None else "—" if x == 0 else str(x) for x in kept_at) + " |")
    published = r.published["content"]
    out += ["", "| published | claim | numbers |", "|---|---|---|"]
    out += [f"| {scheme} | {c['claim']} | {c['numbers']} |" for scheme in CONTENT for c in published[scheme]["claims"]]
    out += ["", "Sources: " + "; ".join(f"{scheme}: {published[scheme]['source']}" for scheme in CONTENT) + "."]
    return "\n".join(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("table", choices=TABLES, help="the table to print")
    ap.add_argument("--plot", metavar="FILE.png", help="kept: its heat-map too (.png or .svg)")
    ap.add_argument("--out", metavar="FILE", help="the table to FILE, whole or not at all, instead of stdout")
    ap.add_argument("--data", default=os.path.join(ROOT, "docs", "results", "data", "extrapolation"), help="the family's results")
    ap.add_argument("--published", default=os.path.join(ROOT, "docs", "results", "data", "published_claims.json"))
    a = ap.parse_args()
    if a.plot and a.table != "kept":
        ap.error("--plot is for the kept table")
    r = Results(a.data, a.published)
    text = kept(r, a.plot) if a.table == "kept" else globals()[a.table](r)
    if a.out:
        from lib.outputs import replaced
        with replaced(a.out) as f:
            f.write(text + "\n")
    else:
        print(text)


if __name__ == "__main__":
    main()
