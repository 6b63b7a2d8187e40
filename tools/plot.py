#!/usr/bin/env python3
"""Plot pert sweep results and positional-scheme profiles (matplotlib, Agg).

Usage:
  tools/plot.py sweep SWEEP.json [SWEEP2.json ...] --out PREFIX [--title TEXT]
      -> PREFIX_ppl.png/.svg (perplexity vs evaluation length, log-log)
         PREFIX_nll.png/.svg (mean NLL by position, longest length per row)
  tools/plot.py positions PROFILE.json [PROFILE2.json ...] --out PREFIX
      -> PREFIX.png/.svg (attention logit vs relative distance, one panel per file)

SWEEP.json comes from `pert sweep ... --json`, PROFILE.json from
`pert positions -m MODEL --distance D --json FILE`.
"""
import argparse
import json
import math
import os
import sys

import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.ticker import FixedLocator, LogLocator, NullFormatter, ScalarFormatter  # noqa: E402

STYLES = ["-", "-.", ":", "--"]


def load_json(path, kind, check):
    """Read one JSON file; exit with a one-line message unless check(data) holds."""
    try:
        with open(path) as f:
            data = json.load(f)
    except OSError as e:
        sys.exit(f"plot.py: {path}: {e.strerror}")
    except ValueError:
        data = None
    if not isinstance(data, dict) or not check(data):
        sys.exit(f"plot.py: {path}: not a pert {kind} file")
    return data


def config_stem(config):
    return config if config == "plain" else os.path.splitext(os.path.basename(config))[0]


def is_sweep(d):
    cells = d.get("cells")
    return bool(d.get("pert_sweep")) and isinstance(cells, list) and all(
        isinstance(c, dict) and {"model", "config", "length"} <= c.keys() and ("error" in c or "ppl" in c)
        for c in cells)


def load_rows(paths):
    """Concatenate cells of several sweep files into rows keyed by (model, config)."""
    rows, seen = {}, set()
    for path in paths:
        data = load_json(path, "sweep", is_sweep)
        for c in data["cells"]:
            key = (c["model"], c["config"], c["length"])
            if key in seen:
                continue
            seen.add(key)
            rows.setdefault(key[:2], []).append(c)
    return [(model, config, sorted(cells, key=lambda c: c["length"])) for (model, config), cells in rows.items()]


def row_labels(rows):
    plain = all(config == "plain" for _, config, _ in rows)
    base = [os.path.basename(model.rstrip("/")) for model, _, _ in rows]
    return base if plain else [f"{b} · {config_stem(config)}" for b, (_, config, _) in zip(base, rows)]


def row_styles(n):
    cmap = plt.get_cmap("tab10" if n <= 10 else "tab20")
    return [(cmap(i % cmap.N), STYLES[i % len(STYLES)] if n > 8 else "-") for i in range(n)]


def mark_trained(ax, lengths):
    for i, L in enumerate(sorted(lengths)):
        ax.axvline(L, color=str(0.2 + 0.2 * (i % 3)), ls="--", lw=1, zorder=0, label=f"trained L = {L}")


def log2_xaxis(ax, lo, hi):
    ticks = [2 ** k for k in range(int(math.floor(math.log2(lo))), int(math.ceil(math.log2(hi))) + 1)]
    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_locator(FixedLocator(ticks))
    ax.xaxis.set_major_formatter(ScalarFormatter())
    ax.xaxis.set_minor_formatter(NullFormatter())


def plain_log_yaxis(ax, values):
    lo, hi = min(values), max(values)
    subs = (1.0, 2.0, 5.0) if hi / lo > 4 else (1.0, 1.2, 1.5, 2.0, 2.5, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0)
    ax.set_yscale("log")
    ax.yaxis.set_major_locator(LogLocator(subs=subs))
    ax.yaxis.set_major_formatter(ScalarFormatter())
    ax.yaxis.set_minor_formatter(NullFormatter())


def save(fig, prefix):
    """PREFIX.png and PREFIX.svg, without a date inside, so the same data gives the same files."""
    fig.savefig(f"{prefix}.png", dpi=150, bbox_inches="tight", metadata={"Software": None})
    fig.savefig(f"{prefix}.svg", bbox_inches="tight", metadata={"Date": None})
    plt.close(fig)


def finish(fig, ax, prefix, legend_outside):
    ax.grid(True, which="major", alpha=0.4)
    if legend_outside:
        ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.02, 1), borderaxespad=0)
    else:
        ax.legend(fontsize=8)
    save(fig, prefix)


def plot_ppl(rows, labels, styles, trained, title, prefix):
    fig, ax = plt.subplots(figsize=(8, 5))
    xs_all, ys_all = [], []
    for (_, _, cells), label, (color, ls) in zip(rows, labels, styles):
        ok = [c for c in cells if "error" not in c]
        if not ok:
            continue
        x = [c["length"] for c in ok]
        y = [c["ppl"] for c in ok]
        err = [c.get("ppl_stderr") or 0 for c in ok]
        ax.errorbar(x, y, yerr=err, color=color, ls=ls, marker="o", ms=4, capsize=2, lw=1.5, label=label)
        for c in ok:
            if c["length"] == c.get("trained_length"):
                ax.plot(c["length"], c["ppl"], "o", ms=10, mfc="white", mec=color, mew=1.5, zorder=3)
        xs_all += x
        ys_all += [v - e for v, e in zip(y, err)] + [v + e for v, e in zip(y, err)]
    if not xs_all:
        sys.exit("plot.py: no cell without an error to plot")
    log2_xaxis(ax, min(xs_all + list(trained)), max(xs_all + list(trained)))
    plain_log_yaxis(ax, [v for v in ys_all if v > 0])
    mark_trained(ax, trained)
    ax.set_xlabel("evaluation length (tokens)")
    ax.set_ylabel("perplexity")
    ax.set_title(title or "perplexity vs evaluation length (hollow marker: trained length)")
    finish(fig, ax, prefix + "_ppl", len(rows) > 8)


def plot_nll(rows, labels, styles, trained, title, prefix):
    fig, ax = plt.subplots(figsize=(8, 5))
    picked = [max((c for c in cells if "error" not in c and c.get("nll_by_position")),
                  key=lambda c: c["length"], default=None) for _, _, cells in rows]
    used = [c["length"] for c in picked if c]
    longest = max(set(used), key=lambda n: (used.count(n), n), default=0)  # the commonest length
    xs_all = []
    for cell, label, (color, ls) in zip(picked, labels, styles):
        if cell is None:
            continue
        buckets = [b for b in cell["nll_by_position"] if b.get("nll") is not None and b.get("tokens")]
        x = [(b["first"] + b["last"]) / 2 for b in buckets]
        ax.plot(x, [b["nll"] for b in buckets], color=color, ls=ls, marker="o", ms=3, lw=1.5,
                label=label if cell["length"] == longest else f"{label} (L = {cell['length']})")
        xs_all += x
    if not xs_all:
        sys.exit("plot.py: no cell with nll_by_position to plot")
    log2_xaxis(ax, max(min(xs_all), 1), max(xs_all + list(trained)))
    mark_trained(ax, trained)
    ax.set_xlabel("position in the window")
    ax.set_ylabel("mean NLL (nats)")
    sub = f"mean NLL by position in windows of L = {longest} (else a row's longest error-free L)"
    ax.set_title(f"{title}\n{sub}" if title else sub)
    finish(fig, ax, prefix + "_nll", len(rows) > 8)


def cmd_sweep(args):
    rows = load_rows(args.files)
    if not rows:
        sys.exit(f"plot.py: {args.files[0]}: no cells")
    labels, styles = row_labels(rows), row_styles(len(rows))
    trained = {c["trained_length"] for _, _, cells in rows for c in cells if c.get("trained_length")}
    plot_ppl(rows, labels, styles, trained, args.title, args.out)
    plot_nll(rows, labels, styles, trained, args.title, args.out)


def plot_profile(ax, prof):
    scores = np.asarray(prof["scores"], dtype=float)
    x = np.arange(scores.shape[1])
    if prof.get("per_head"):
        same = np.allclose(scores, scores[0])
        for h, s in enumerate([] if same else scores):
            ax.plot(x, s, lw=0.8, alpha=0.7, color=f"C{h % 10}", label=f"head {h}" if len(scores) <= 8 else None)
        label = f"all {len(scores)} heads (identical)" if same else f"mean of {len(scores)} heads"
        ax.plot(x, scores.mean(axis=0), lw=2.2, color="black", label=label)
    else:
        ax.plot(x, scores[0], lw=1.8, color="C0", label="score")
    L = prof.get("trained_length")
    if L:
        ax.axvline(L, color="0.4", ls="--", lw=1, label=f"trained L = {L}")
    name = os.path.basename(prof.get("model_dir", "?").rstrip("/"))
    ax.set_title(f"{name} · {prof.get('scheme', '?')}", fontsize=10)
    ax.set_xlabel("relative distance")
    ax.set_ylabel("attention logit")
    ax.grid(True, alpha=0.4)
    ax.legend(fontsize=6)


def cmd_positions(args):
    check = lambda d: isinstance(d.get("scores"), list) and d["scores"] and isinstance(d["scores"][0], list)
    profiles = [load_json(p, "positions", check) for p in args.files]
    ncols = min(4, len(profiles))
    nrows = math.ceil(len(profiles) / ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(4 * ncols, 3.2 * nrows), squeeze=False)
    for ax, prof in zip(axes.flat, profiles):
        plot_profile(ax, prof)
    for ax in list(axes.flat)[len(profiles):]:
        ax.set_visible(False)
    fig.suptitle("attention logit vs relative distance (q = k = ones)")
    fig.tight_layout()
    save(fig, args.out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="command", required=True)
    sw = sub.add_parser("sweep", help="perplexity and NLL-by-position plots from sweep JSON files")
    sw.add_argument("files", nargs="+", metavar="SWEEP.json")
    sw.add_argument("--out", required=True, metavar="PREFIX")
    sw.add_argument("--title")
    sw.set_defaults(func=cmd_sweep)
    po = sub.add_parser("positions", help="attention logit vs distance from `pert positions --json` files")
    po.add_argument("files", nargs="+", metavar="PROFILE.json")
    po.add_argument("--out", required=True, metavar="PREFIX")
    po.set_defaults(func=cmd_positions)
    args = ap.parse_args()
    args.func(args)


if __name__ == "__main__":
    main()
