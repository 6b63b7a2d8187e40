#!/usr/bin/env python3
"""Plot pert sweep results and positional-scheme profiles (matplotlib, Agg), as a paper prints them.

  tools/plot/plot.py sweep SWEEP.json [SWEEP2.json ...] --out PREFIX [--title TEXT] [--labels A,B,...]
                [--window N]
      -> PREFIX_ppl.png/.svg  perplexity vs evaluation length (log-log; with more than one length)
         PREFIX_nll.png/.svg  mean NLL by position in the window, every row at one window length
      The files: `pert sweep --out` files, `pert perplexity --json-out` files (a run of one
      length) and JSON lists of pert.sweep records (json.dump(pert.sweep(...), f)), mixed at will.
  tools/plot/plot.py positions PROFILE.json[+PROFILE2.json...] ... --out PREFIX [--overlay]
                [--labels A,B,...] [--title TEXT] [--sharey all|row|none] [--cols N]
      -> PREFIX.png/.svg      attention logit vs relative distance: one panel per argument, the
                              files of an argument joined with "+" (or all, with --overlay) drawn
                              in one panel; every panel on the same y-scale (or
                              each row's, --sharey row)

  tools/plot/plot.py attention ATTENTION.json ... --out PREFIX [--queries all|in_L|past_L] [--lengths N,M]
      -> PREFIX_heatmaps, PREFIX_distance: `pert attention` per layer and head, and its mass by
                              distance within L against past L (tools/plot/plot_attention.py says more)

SWEEP.json comes from `pert sweep ... --out FILE`, PROFILE.json from
`pert positions -m MODEL --distance D --json-out FILE` (or `--json > FILE`).

Series: a sweep's (model, config) rows in the order they first appear in the files, a positions
plot's files in the order given; --labels renames them in that order (the names are printed).
Colours: one hue per family of configs (plain, linear, ntk, dynamic, yarn, llama3, self-extend,
rerope, leaky-rerope, logn, streaming, blockwise, ...: the config file's name up to its variant
suffix), shades and dash patterns of that hue for the family's members; when the rows are
different models, one hue per model. A dashed vertical line marks the trained length L.
When every row is of one model, its name goes in the title, not in every legend entry.
Log axes are labelled with plain numbers (20, 30, 40, not 2×10¹), at 1-2-5 steps or finer where
the range spans less than a few decades. The NLL-by-position plot draws each position bucket as a
step over the positions it covers, on a log axis; pert's default buckets are log-spaced, four
to an octave, and finer ones (a sweep run with e.g. `--buckets` = the window) are merged into
the same bins.
Prints the path of every file written.
"""
import argparse
import bisect
import colorsys
import json
import math
import os
import re
import sys
import textwrap

import matplotlib
matplotlib.use("Agg")
matplotlib.rcParams["svg.hashsalt"] = "pert"  # fixed SVG ids: the same data gives the same files
import matplotlib.colors as mcolors  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.ticker import FixedLocator, FuncFormatter, MaxNLocator, NullFormatter, NullLocator  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tools/: import by folder (tools/README.md)
from plot import plot_attention  # noqa: E402  (the attention subcommand)
from lib.outputs import save_figure  # noqa: E402  (whole or not at all, as pert's own outputs)

# Hues, one per family, in order of first appearance, chosen to stay apart for colour-blind
# readers: Okabe & Ito's six (their black is plain's, their yellow too light on white), then six
# of Paul Tol's "muted". Past twelve families the hues come round again with the next dash
# pattern. Grey is the trained length's line; black and its greys are the plain config's.
HUES = ["#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9",
        "#882255", "#44AA99", "#332288", "#999933", "#AA4499", "#DDCC77"]
DASHES = ["-", "--", ":", "-."]
# Config families by name prefix; the longest match wins. Anything else: the name without a
# trailing variant such as -x4, -k64, -g64.
FAMILIES = ["plain", "linear", "ntk", "dynamic", "yarn", "llama3", "longrope", "self-extend", "rerope", "leaky-rerope",
            "logn", "streaming", "blockwise", "clamp"]
TRAINED_COLOR = "0.35"


def read_json(path):
    """One JSON file's value (None when it is not JSON); exits with a one-line message when it
    cannot be read."""
    try:
        with open(path) as f:
            return json.load(f)
    except OSError as e:
        sys.exit(f"plot.py: {path}: {e.strerror}")
    except ValueError:
        return None


def load_json(path, kind, check):
    """Read one JSON file; exit with a one-line message unless check(data) holds."""
    data = read_json(path)
    if not isinstance(data, dict) or not check(data):
        sys.exit(f"plot.py: {path}: not a pert {kind} file")
    return data


def config_stem(config):
    return config if config == "plain" else os.path.splitext(os.path.basename(config))[0]


def model_name(model):
    return os.path.basename(model.rstrip("/")) or model


def config_family(stem):
    """plain, ntk, yarn, self-extend, ...: what a config varies, without the variant's setting."""
    for f in sorted(FAMILIES, key=len, reverse=True):
        if stem == f or stem.startswith(f + "-"):
            return f
    return re.sub(r"-[a-z]?\d+(\.\d+)?$", "", stem)


def shade(hue, i, n):
    """Member i of n of a family: the hue itself for one member, else dark to light."""
    if n == 1:
        return hue
    h, l, s = colorsys.rgb_to_hls(*mcolors.to_rgb(hue))
    lo, hi = max(0.22, l - 0.18), min(0.78, l + 0.22)
    return colorsys.hls_to_rgb(h, lo + (hi - lo) * i / (n - 1), s)


def family_styles(keys):
    """(colour, dash) per series from its family key: one hue per family, shades within it."""
    order = list(dict.fromkeys(keys))
    members = {k: [i for i, kk in enumerate(keys) if kk == k] for k in order}
    styles = [None] * len(keys)
    hue_of, next_hue = {}, 0
    for k in order:
        round_ = 0  # how many times the hues have come round for this family
        if k == "plain":
            hue_of[k] = "#000000"
        else:
            hue_of[k], round_ = HUES[next_hue % len(HUES)], next_hue // len(HUES)
            next_hue += 1
        idx = members[k]
        for j, i in enumerate(idx):
            color = (0.45 * j / max(1, len(idx) - 1),) * 3 if k == "plain" else shade(hue_of[k], j, len(idx))
            styles[i] = (color, DASHES[(j + round_) % len(DASHES)])
    return styles


def apply_labels(default, labels, what):
    """--labels A,B,...: one per series, in the order printed."""
    if labels is None:
        return default
    names = labels.split(",")
    if len(names) != len(default):
        sys.exit(f"plot.py: --labels has {len(names)} names for {len(default)} {what}: "
                 + ", ".join(default))
    return names


def plain_number(v, _pos=None):
    return f"{v:.10g}"


def tick_values(lo, hi):
    """Ticks for a log axis over [lo, hi]: the sparsest of 1-2-5-like sets that gives at least 5
    ticks inside, else evenly spaced round numbers (a range well under a decade)."""
    for subs in ((1,), (1, 2, 5), (1, 2, 3, 5), (1, 1.5, 2, 3, 4, 5, 7),
                 (1, 1.2, 1.4, 1.6, 1.8, 2, 2.5, 3, 3.5, 4, 4.5, 5, 6, 7, 8, 9)):
        ticks = [s * 10.0 ** e for e in range(int(math.floor(math.log10(lo))) - 1, int(math.ceil(math.log10(hi))) + 1)
                 for s in subs]
        inside = [t for t in ticks if lo <= t * (1 + 1e-9) and t <= hi * (1 + 1e-9)]
        if len(inside) >= 5:
            return inside
    return [t for t in MaxNLocator(nbins=6, steps=[1, 2, 2.5, 5, 10]).tick_values(lo, hi) if lo <= t <= hi]


def log_yaxis(ax, values):
    lo, hi = min(values), max(values)
    pad = (hi / lo) ** 0.04 if hi > lo else 1.05
    lo, hi = lo / pad, hi * pad
    ax.set_yscale("log")
    ax.set_ylim(lo, hi)
    ax.yaxis.set_major_locator(FixedLocator(tick_values(lo, hi)))
    ax.yaxis.set_major_formatter(FuncFormatter(plain_number))
    ax.yaxis.set_minor_locator(NullLocator())
    ax.yaxis.set_minor_formatter(NullFormatter())


def log2_xaxis(ax, lo, hi):
    ticks = [2 ** k for k in range(int(math.floor(math.log2(lo))), int(math.ceil(math.log2(hi))) + 1)]
    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_locator(FixedLocator(ticks))
    ax.xaxis.set_major_formatter(FuncFormatter(plain_number))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.xaxis.set_minor_formatter(NullFormatter())


def mark_trained(ax, lengths):
    for i, L in enumerate(sorted(lengths)):
        ax.axvline(L, color=TRAINED_COLOR, ls=(0, (5, 3)), lw=1.1, zorder=0.5,
                   label=f"trained length L = {L}")


def save(fig, prefix):
    """PREFIX.png and PREFIX.svg, without a date inside, so the same data gives the same files."""
    os.makedirs(os.path.dirname(os.path.abspath(prefix)), exist_ok=True)
    save_figure(fig, f"{prefix}.png", dpi=150, bbox_inches="tight", metadata={"Software": None})
    save_figure(fig, f"{prefix}.svg", bbox_inches="tight", metadata={"Date": None})
    plt.close(fig)
    print(f"plot.py: wrote {prefix}.png, {prefix}.svg")


def finish(fig, ax, prefix):
    ax.grid(True, which="major", alpha=0.35)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.02, 1), borderaxespad=0)
    save(fig, prefix)


# ---------------------------------------------------------------------------------------- sweep

def is_sweep(d):
    cells = d.get("cells")
    return bool(d.get("pert_sweep")) and isinstance(cells, list) and all(
        isinstance(c, dict) and {"model", "config", "length"} <= c.keys() and ("error" in c or "ppl" in c)
        for c in cells)


def is_run(d):
    """One `pert perplexity --json` result (Model.perplexity's dict): a cell of one length."""
    return isinstance(d, dict) and {"model_dir", "n_ctx", "ppl", "nll_by_position"} <= d.keys()


def is_record(d):
    """A pert.sweep record: a cell with its grid's keys beside the run's."""
    return isinstance(d, dict) and {"model", "config", "length"} <= d.keys() and ("error" in d or "ppl" in d)


def sweep_cells(path):
    """The cells of a file to plot: a `pert sweep --out` file, a `pert perplexity --json-out` file
    (one cell: its window's NLL by position) or a JSON list of pert.sweep records."""
    data = read_json(path)
    if isinstance(data, dict) and is_sweep(data):
        return data["cells"]
    if is_run(data):
        return [dict(data, model=data["model_dir"], config="plain", length=data["n_ctx"])]
    if isinstance(data, list) and data and all(is_record(r) for r in data):
        return [dict(r, config=r["config"] or "plain") for r in data]
    sys.exit(f"plot.py: {path}: not a `pert sweep --out` file, `pert perplexity --json-out` file or JSON list of "
             "pert.sweep records")


def load_rows(paths):
    """Cells of several files as rows (model, config, cells by length), in order of first
    appearance; a (model, config, length) seen before is skipped."""
    rows, seen = {}, set()
    for path in paths:
        for c in sweep_cells(path):
            key = (c["model"], c["config"], c["length"])
            if key in seen:
                continue
            seen.add(key)
            rows.setdefault(key[:2], []).append(c)
    return [(model, config, sorted(cells, key=lambda c: c["length"])) for (model, config), cells in rows.items()]


def describe_rows(rows, title):
    """Legend names, family keys and the title: the model's name in the title when all rows share
    it; else the model's name, with the config's where it is not plain (or not all the same)."""
    models = [model_name(m) for m, _, _ in rows]
    # The sweep's own row label (unique per config; older files lack it: the config's name).
    stems = [cells[0].get("label", config_stem(c)) for _, c, cells in rows]
    one_model = len(set(models)) == 1
    if one_model:
        names, keys = stems, [config_family(config_stem(c)) for _, c, _ in rows]
        if title is None or models[0] not in title:
            title = f"{models[0]}: {title}" if title else models[0]
    else:
        names = [m if s == "plain" or len(set(stems)) == 1 else f"{m} · {s}" for m, s in zip(models, stems)]
        keys = models
    return names, keys, title


def plot_ppl(rows, names, styles, trained, title, prefix):
    fig, ax = plt.subplots(figsize=(8, 5))
    xs_all, ys_all = [], []
    for (_, _, cells), name, (color, ls) in zip(rows, names, styles):
        ok = [c for c in cells if "error" not in c]
        if not ok:
            continue
        x = [c["length"] for c in ok]
        y = [c["ppl"] for c in ok]
        err = [c.get("ppl_stderr") or 0 for c in ok]
        ax.errorbar(x, y, yerr=err, color=color, ls=ls, marker="o", ms=3.5, capsize=2, lw=1.5, label=name)
        xs_all += x
        ys_all += [v - e for v, e in zip(y, err)] + [v + e for v, e in zip(y, err)]
    if not xs_all:
        sys.exit("plot.py: no cell without an error to plot")
    log2_xaxis(ax, min(xs_all + list(trained)), max(xs_all + list(trained)))
    log_yaxis(ax, [v for v in ys_all if v > 0])
    mark_trained(ax, trained)
    ax.set_xlabel("evaluation length (tokens)")
    ax.set_ylabel("perplexity")
    ax.set_title(f"{title}\nperplexity vs evaluation length" if title else "perplexity vs evaluation length")
    finish(fig, ax, prefix + "_ppl")


def pick_window(rows, window):
    """The window length of the NLL plot: --window, else the longest length every row has a cell
    at (an error cell counts: that row is then left out), else the longest of any row."""
    lengths = [{c["length"] for c in cells} for _, _, cells in rows]
    if window is not None:
        if not any(window in ls for ls in lengths):
            sys.exit(f"plot.py: --window {window}: no cell of that length (lengths: "
                     + ", ".join(map(str, sorted(set().union(*lengths)))) + ")")
        return window
    common = set.intersection(*lengths)
    return max(common) if common else max(set().union(*lengths))


def log_buckets(buckets, per_octave=4):
    """Equal-width buckets merged into log-spaced bins of position, per_octave to an octave, where
    they are finer than that (positions 1, 2, 3, ... stay apart; 1000-1189 becomes one bin); a
    bucket that spans a bin boundary stays as it is. Token-weighted means."""
    top = max(b["last"] for b in buckets) + 2
    edges = sorted({round(2 ** (k / per_octave)) for k in range(int(per_octave * math.log2(top)) + per_octave + 1)})
    out = []
    for b in buckets:
        key = bisect.bisect_right(edges, max(b["first"], 1)) - 1
        fits = b["last"] + 1 <= edges[key + 1]
        if out and fits and out[-1]["key"] == key:
            m = out[-1]
            m["nll"] = (m["nll"] * m["tokens"] + b["nll"] * b["tokens"]) / (m["tokens"] + b["tokens"])
            m["tokens"] += b["tokens"]
            m["last"] = b["last"]
        else:
            out.append(dict(first=b["first"], last=b["last"], nll=b["nll"], tokens=b["tokens"],
                            key=key if fits else None))
    return out


def plot_nll(rows, names, styles, trained, title, prefix, window):
    window = pick_window(rows, window)
    fig, ax = plt.subplots(figsize=(8, 5))
    drawn, left_out, edges_all, ys, coarse = 0, [], [], [], 0
    for (_, _, cells), name, (color, ls) in zip(rows, names, styles):
        cell = next((c for c in cells if c["length"] == window), None)
        if cell is None or "error" in cell or not cell.get("nll_by_position"):
            left_out.append(name)
            continue
        buckets = log_buckets([b for b in cell["nll_by_position"] if b.get("nll") is not None and b.get("tokens")])
        if not buckets:
            left_out.append(name)
            continue
        edges = [max(buckets[0]["first"], 1)] + [b["last"] + 1 for b in buckets]
        coarse = max(coarse, buckets[0]["last"] + 1)
        ax.stairs([b["nll"] for b in buckets], edges, color=color, ls=ls, lw=1.5, baseline=None, label=name)
        edges_all += edges
        ys += [b["nll"] for b in buckets]
        drawn += 1
    if not drawn:
        sys.exit(f"plot.py: no row has NLL by position at window {window}")
    log2_xaxis(ax, min(edges_all), max(edges_all + list(trained)))
    pad = 0.05 * (max(ys) - min(ys) or 1)
    ax.set_ylim(min(ys) - pad, max(ys) + pad)
    mark_trained(ax, [L for L in trained if L <= max(edges_all)])
    ax.set_xlabel("position in the window (tokens)")
    ax.set_ylabel("mean NLL (nats)")
    sub = f"mean NLL by position, windows of {window} tokens (one step per position bucket)"
    if trained and coarse > min(trained):
        sub += f"\n(first bucket: positions 0–{coarse - 1}, past L; a sweep run with --buckets log resolves it)"
    if left_out:
        sub += f"\nleft out (no result at {window}): " + ", ".join(left_out)
    ax.set_title(f"{title}\n{sub}" if title else sub)
    finish(fig, ax, prefix + "_nll")


def cmd_sweep(args):
    rows = load_rows(args.files)
    if not rows:
        sys.exit(f"plot.py: {args.files[0]}: no cells")
    names, keys, title = describe_rows(rows, args.title)
    names = apply_labels(names, args.labels, "series")
    print("plot.py: series: " + ", ".join(f"{i + 1} {n}" for i, n in enumerate(names)))
    styles = family_styles(keys)
    trained = {c["trained_length"] for _, _, cells in rows for c in cells if c.get("trained_length")}
    if len({c["length"] for _, _, cells in rows for c in cells}) > 1:
        plot_ppl(rows, names, styles, trained, title, args.out)
    else:  # one run, or runs of one length: nothing to draw against length
        print("plot.py: one evaluation length: no perplexity-vs-length plot")
    plot_nll(rows, names, styles, trained, title, args.out, args.window)


# ------------------------------------------------------------------------------------ positions

def is_profile(d):
    return isinstance(d.get("scores"), list) and d["scores"] and isinstance(d["scores"][0], list)


def profile_name(prof):
    return model_name(prof.get("model_dir", "?"))


def profile_curve(prof):
    """One curve for a profile: its heads' common line, or their mean (and whether they differ)."""
    scores = np.asarray(prof["scores"], dtype=float)
    same = len(scores) == 1 or np.allclose(scores, scores[0])
    return scores, same


def plot_panel(ax, profs, names):
    overlay = len(profs) > 1
    keys = [profile_name(p) for p in profs]
    styles = family_styles(keys if len(set(keys)) == len(keys) else list(range(len(profs))))
    for prof, name, (color, ls) in zip(profs, names, styles):
        scores, same = profile_curve(prof)
        x = np.arange(scores.shape[1])
        if overlay:
            label = name if same else f"{name} (mean of {len(scores)} heads)"
            ax.plot(x, scores.mean(axis=0), lw=1.6, color=color, ls=ls, label=label)
            continue
        if not same:
            cmap = plt.get_cmap("viridis")
            for h, s in enumerate(scores):
                ax.plot(x, s, lw=0.8, alpha=0.8, color=cmap(0.85 * h / max(1, len(scores) - 1)),
                        label=f"head {h}" if len(scores) <= 8 else None)
        label = (f"all {len(scores)} heads (identical)" if len(scores) > 1 else "score") if same \
            else f"mean of {len(scores)} heads"
        ax.plot(x, scores.mean(axis=0), lw=2.0, color="black", label=label)
    trained = sorted({p["trained_length"] for p in profs if p.get("trained_length")})
    mark_trained(ax, trained)
    if overlay:
        ax.set_title(" vs ".join(names), fontsize=10)
    else:
        desc = textwrap.fill(profs[0].get("position", profs[0].get("scheme", "?")), 48)
        ax.set_title(f"{names[0]}\n{desc}", fontsize=8)
    ax.set_xlabel("relative distance m − n")
    ax.set_ylabel("attention logit")
    ax.grid(True, alpha=0.35)
    ax.legend(fontsize=6)


def cmd_positions(args):
    if args.overlay:
        groups = [[p for a in args.files for p in a.split("+")]]
    else:
        groups = [a.split("+") for a in args.files]
    profs = [[load_json(p, "positions", is_profile) for p in g] for g in groups]
    flat = [p for g in profs for p in g]
    names = apply_labels([profile_name(p) for p in flat], args.labels, "profiles")
    print("plot.py: profiles: " + ", ".join(f"{i + 1} {n}" for i, n in enumerate(names)))
    ncols = min(args.cols or 4, len(profs))
    nrows = math.ceil(len(profs) / ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(4.2 * ncols, 3.6 * nrows), squeeze=False,
                             sharey={"all": True, "row": "row", "none": False}[args.sharey])
    k = 0
    for ax, group in zip(axes.flat, profs):
        plot_panel(ax, group, names[k:k + len(group)])
        k += len(group)
    for ax in list(axes.flat)[len(profs):]:
        ax.set_visible(False)
    for ax in axes.flat:
        ax.yaxis.set_tick_params(labelleft=True)
    head = "attention logit vs relative distance (q = k = ones)" + {
        "all": ", all panels on one y-scale", "row": ", each row of panels on one y-scale", "none": ""}[args.sharey]
    fig.suptitle(f"{args.title}\n{head}" if args.title else head)
    fig.tight_layout()
    save(fig, args.out)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="command", required=True, metavar="{sweep,positions,attention}")
    sw = sub.add_parser("sweep", help="perplexity and NLL-by-position plots from sweep or perplexity JSON files",
                        description="PREFIX_ppl and PREFIX_nll (.png, .svg) from `pert sweep --out` files, "
                                    "`pert perplexity --json-out` files or JSON lists of pert.sweep records.")
    sw.add_argument("files", nargs="+", metavar="SWEEP.json",
                    help="`pert sweep --out`, `pert perplexity --json-out` or pert.sweep records' files, read in order")
    sw.add_argument("--out", required=True, metavar="PREFIX", help="output path prefix")
    sw.add_argument("--title", help="first line of both titles (the model's name is added when all rows share it)")
    sw.add_argument("--labels", metavar="A,B,...", help="legend names of the rows, in the order printed")
    sw.add_argument("--window", type=int, metavar="N",
                    help="window length of the NLL-by-position plot (default: the longest every row has)")
    sw.set_defaults(func=cmd_sweep)
    po = sub.add_parser("positions", help="attention logit vs distance from `pert positions --json` files",
                        description="PREFIX (.png, .svg) from `pert positions --json` files: one panel per "
                                    "argument; A.json+B.json draws both in one panel.")
    po.add_argument("files", nargs="+", metavar="PROFILE.json[+PROFILE.json...]",
                    help="a panel: one file, or several joined with + to overlay them")
    po.add_argument("--out", required=True, metavar="PREFIX", help="output path prefix")
    po.add_argument("--overlay", action="store_true", help="every file in one panel")
    po.add_argument("--labels", metavar="A,B,...", help="names of the files, in the order given")
    po.add_argument("--title", help="first line of the figure's title")
    po.add_argument("--sharey", choices=["all", "row", "none"], default="all",
                    help="panels that share one y-scale (default %(default)s)")
    po.add_argument("--cols", type=int, metavar="N", help="panels per row (default: up to 4)")
    po.set_defaults(func=cmd_positions)
    plot_attention.add_parser(sub)
    args = ap.parse_args()
    if args.command == "attention":
        return plot_attention.cmd_attention(args, plt, load_json, model_name, apply_labels, save)
    args.func(args)


if __name__ == "__main__":
    main()
