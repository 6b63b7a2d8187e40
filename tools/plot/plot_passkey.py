#!/usr/bin/env python3
"""Plot `pert passkey` and `pert ruler` results as the papers' heat-map (matplotlib, Agg).

    tools/plot/plot_passkey.py RESULT.json [RESULT2.json ...] --out PNG [--titles A,B,...] [--cols N]

RESULT.json comes from `pert passkey ... --json-out FILE` or `pert ruler ... --json-out FILE` (or
`--json > FILE`, or --dump-prompts). One panel per file (a ruler result: one per task, its score
/ 100 in place of the accuracy; "—" where a cell was skipped: too short, or past a position table), side by side
(--cols N: N to a row): x the prompt length in tokens, y the depth of
the key (0 at the top: the start of the filler), colour the accuracy over the cell's trials
(cividis, dark 0 to light 1, safe for colour-blind readers and in grey; the accuracy written in
each cell as a percentage, dark on light cells and light on dark ones); a dashed line marks the
trained length L where it falls inside the lengths (L is in the title). A panel's title is the
model and, where it says more than the model's name, its positional scheme (--titles replaces
them in order); the figure's title says what was run (trials per cell, greedy answers, seed).
Prints the path written.
"""
import argparse
import json
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import PercentFormatter  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tools/: import by folder (tools/README.md)
from lib.outputs import save_figure  # noqa: E402  (whole or not at all, as pert's own outputs)
from lib import open_result  # noqa: E402  (RESULT.json or RESULT.json.gz)


def load(path):
    """The panels of a result: [(result, lengths, depths, grid, title or None)]; `pert ruler`'s
    result gives one panel a task (scores / 100); a skipped cell is NaN."""
    try:
        with open_result(path) as f:
            r = json.load(f)
        cells = r["cells"]
        tasks = r.get("tasks") or [None]
        panels = []
        for task in tasks:
            mine = [c for c in cells if c.get("task") == task]
            lengths = list(dict.fromkeys(c["length"] for c in mine))
            depths = list(dict.fromkeys(c["depth"] for c in mine))
            value = {}  # a skipped cell (a length too short, or past a position table) is NaN
            for c in mine:
                v = c["accuracy"] if task is None else None if c["score"] is None else c["score"] / 100
                value[(c["length"], c["depth"])] = float("nan") if v is None else v
            grid = [[value[(n, d)] for n in lengths] for d in depths]
            panels.append((r, lengths, depths, grid, task))
    except (OSError, ValueError, KeyError, TypeError) as e:
        sys.exit(f"plot_passkey.py: {path}: not a pert passkey or pert ruler result ({type(e).__name__}: {e})")
    return panels


def panel_title(r):
    """The model's name, and its positional scheme where the name does not already say it."""
    name = os.path.basename(os.path.normpath(r.get("model_dir", "?")))
    label = r.get("position_label", "")
    return name if not label or label == name else f"{name}: {label}"


def panel(ax, r, lengths, depths, grid, title):
    cmap = matplotlib.colormaps["cividis"].copy()
    cmap.set_bad("#d9d9d9")  # a skipped cell (too short, past a position table): light grey
    im = ax.imshow(grid, cmap=cmap, vmin=0, vmax=1, aspect="auto", interpolation="nearest")
    ax.set_xticks(range(len(lengths)), [str(n) for n in lengths])
    ax.set_yticks(range(len(depths)), ["—" if d is None else f"{d:g}" for d in depths])
    ax.set_xlabel("prompt length (tokens)")
    ax.set_ylabel("depth of the key" if "tasks" not in r else "depth of the first needle")
    for y, row in enumerate(grid):
        for x, a in enumerate(row):  # percent: short enough to read at page width; — skipped
            ax.text(x, y, "—" if a != a else f"{100 * a:.0f}", ha="center", va="center", fontsize=11,
                    color="black" if a != a or a >= 0.5 else "white")
    L = r.get("trained_length")
    inside = [i for i, n in enumerate(lengths) if n <= L] if L else []
    if inside and len(inside) < len(lengths):  # between the last length within L and the first past it
        ax.axvline(inside[-1] + 0.5, color="white", linestyle="--", linewidth=1.5)  # seen on dark and light cells
        ax.axvline(inside[-1] + 0.5, color="black", linestyle=(3, (3, 3)), linewidth=1.5)
    ax.set_title(title + (f" (L = {L})" if L else ""), fontsize=11)
    return im


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("results", nargs="+", metavar="RESULT.json", help="pert passkey --json-out files")
    ap.add_argument("--out", required=True, help="PNG file to write")
    ap.add_argument("--titles", help="comma-separated panel titles, one per file, in order")
    ap.add_argument("--cols", type=int, help="panels per row (default: all in one row)")
    a = ap.parse_args()
    if a.cols is not None and a.cols < 1:
        sys.exit(f"plot_passkey.py: --cols {a.cols}: give at least 1")
    titles = a.titles.split(",") if a.titles else None
    data = [panel for p in a.results for panel in load(p)]
    cols = min(a.cols or len(data), len(data))
    rows = (len(data) + cols - 1) // cols
    width = 1.2 + 0.8 * max(len(d[1]) for d in data)
    fig, axes = plt.subplots(rows, cols, figsize=(1.5 + width * cols, 3.6 * rows), squeeze=False,
                             constrained_layout=True)
    if titles and len(titles) != len(data):
        sys.exit(f"plot_passkey.py: --titles: {len(titles)} titles for {len(data)} panels")
    for i, (r, lengths, depths, grid, task) in enumerate(data):
        title = titles[i] if titles else panel_title(r) + (f", {task}" if task else "")
        im = panel(axes[i // cols][i % cols], r, lengths, depths, grid, title)
    for ax in axes.flat[len(data):]:
        ax.set_visible(False)
    ruler = any(d[4] for d in data)
    bar = fig.colorbar(im, ax=list(axes.flat), label="score" if ruler else "accuracy", fraction=0.05)
    bar.ax.yaxis.set_major_formatter(PercentFormatter(1.0))
    trials = sorted({d[0].get("trials") for d in data if d[0].get("trials")})
    seeds = sorted({d[0].get("seed") for d in data if d[0].get("seed") is not None})
    what = ", ".join(filter(None, [f"{'/'.join(map(str, trials))} trials a cell" if trials else "",
                                    "greedy answers", f"seed {'/'.join(map(str, seeds))}" if seeds else ""]))
    fig.suptitle(f"retrieval (RULER's tasks), string_match_all in % ({what})" if ruler else
                 f"pass-key retrieval, accuracy in % ({what})", fontsize=12)
    save_figure(fig, a.out, dpi=120, bbox_inches="tight")
    print(a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
