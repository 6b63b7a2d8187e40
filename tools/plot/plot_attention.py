"""`tools/plot/plot.py attention`: plots of `pert attention --out FILE` results (matplotlib, Agg).

  tools/plot/plot.py attention ATTENTION.json [ATTENTION2.json ...] --out PREFIX [--queries RANGE]
                [--lengths N,M] [--labels A,B,...] [--title TEXT]
      -> PREFIX_heatmaps.png/.svg  one row per statistic (entropy, sink mass, mean distance,
                                   largest weight), one column per cell (model, config, length):
                                   layer × head, every statistic on one colour scale so cells
                                   compare; past 7 cells the columns wrap into blocks of rows, as even as they go
         PREFIX_distance.png/.svg  mass by distance bucket (0, 1, 2–3, 4–7, ...), one panel per
                                   cell: queries within the trained length L against those past it
                                   (all queries where none is past L); thick lines every head's
                                   mean, thin ones each layer's mean over its heads (past L
                                   dashed, so a layer whose ranges agree shows both)

--queries picks the heat maps' query range: all (default), in_L or past_L (cells without it are
left out); --lengths keeps the cells of those lengths. Columns follow the files' cells in order;
two cells of one name (model, config label, length) are told apart by their positions, else
by their file; --labels renames them in that order (the names are printed).

Also runs as `tools/plot/plot_attention.py ATTENTION.json ... --out PREFIX`, as plot.py attention.
"""
import os
import sys

import numpy as np

STATISTICS = [("entropy", "entropy (nats)"), ("sink_mass", "sink mass"), ("mean_distance", "mean distance"),
              ("max_weight", "largest weight")]
RANGE_STYLE = {"in_L": ("#0072B2", "within L"), "past_L": ("#D55E00", "past L"), "all": ("0.2", "all queries")}
LAYER_DASH = {"in_L": "-", "past_L": (0, (3, 2)), "all": "-"}  # thin lines: past L dashed, over within L's
MAX_COLS = 7  # heat-map columns before they wrap: a figure a page can show


def add_parser(sub):
    at = sub.add_parser("attention", help="heat maps and distance profiles from `pert attention --out` files",
                        description="Heat maps (layer × head, per statistic, cells side by side) and the mass by "
                                    "distance (within L against past L) of `pert attention --out FILE` results.")
    at.add_argument("files", nargs="+", metavar="ATTENTION.json", help="pert attention --out files")
    at.add_argument("--out", required=True, metavar="PREFIX", help="output prefix (PREFIX_heatmaps.png, ...)")
    at.add_argument("--queries", default="all", choices=["all", "in_L", "past_L"],
                    help="the heat maps' query range (default: all)")
    at.add_argument("--lengths", help="keep the cells of these lengths, e.g. 256,1024")
    at.add_argument("--labels", help="comma-separated column names, in the cells' order")
    at.add_argument("--title", help="figure title")
    at.set_defaults(func=cmd_attention)


def light(color):
    """The colour halfway to white: opaque, so lines that overlap keep their own colours (no grey blend)."""
    from matplotlib.colors import to_rgb
    return tuple(0.5 + 0.5 * v for v in to_rgb(color))


def is_attention(d):
    return (isinstance(d.get("cells"), list) and isinstance(d.get("settings"), dict)
            and d["settings"].get("measure") == "attention")


def load_cells(paths, lengths, load_json, model_name):
    """(name, cell) of every cell with a result in the files, in order; error cells named and skipped.
    Names that would repeat (one model and label in two files, or under two --set layouts) get
    the cell's positions, else its file, so no two panels share a title."""
    cells = []
    for path in paths:
        for c in load_json(path, "attention", is_attention)["cells"]:
            name = f"{model_name(c['model'])} {c.get('label', '?')} @{c['length']}"
            if lengths and c["length"] not in lengths:
                continue
            if "error" in c:
                print(f"plot.py: {path}: {name} left out: {c['error']}", file=sys.stderr)
                continue
            cells.append((name, c, path))
    if not cells:
        sys.exit("plot.py: no cell with a result" + (" at those --lengths" if lengths else ""))
    named = []
    for name, c, path in cells:
        twins = [(o, p) for n, o, p in cells if n == name]
        if len(twins) > 1:
            positions = {o.get("position_label", "") for o, _ in twins}
            name += f" ({c.get('position_label', '?')})" if len(positions) == len(twins) else f" ({os.path.basename(path)})"
        named.append((name, c))
    return named


def heatmaps(plt, cells, names, queries, title, prefix, save):
    shown = [(n, c) for n, c in zip(names, cells) if queries in c["attention"]]
    if not shown:
        sys.exit(f"plot.py: no cell has queries {queries} (in_L and past_L exist where the length passes L)")
    blocks = -(-len(shown) // MAX_COLS)  # blocks of the statistics' rows, as even as they go
    cols = -(-len(shown) // blocks)
    rows = len(STATISTICS) * blocks
    fig, axes = plt.subplots(rows, cols, figsize=(0.6 + 2.2 * cols, 0.4 + 1.9 * rows), squeeze=False,
                             constrained_layout=True)
    for r, (key, label) in enumerate(STATISTICS):
        values = [np.array(c["attention"][queries][key], dtype=float) for _, c in shown]
        lo = min(np.nanmin(v) for v in values)
        hi = max(np.nanmax(v) for v in values)
        for i, ((name, c), v) in enumerate(zip(shown, values)):
            row, col = (i // cols) * len(STATISTICS) + r, i % cols
            ax = axes[row][col]
            image = ax.imshow(v, aspect="auto", cmap="viridis", vmin=lo, vmax=hi if hi > lo else lo + 1e-9,
                              interpolation="nearest")
            ax.set_xticks(range(v.shape[1]))
            ax.set_yticks(range(v.shape[0]))
            ax.tick_params(labelsize=7)
            if r == 0:
                ax.set_title(name, fontsize=8)
            if r == len(STATISTICS) - 1:
                ax.set_xlabel("head", fontsize=8)
            if col == 0:
                ax.set_ylabel(f"{label}\nlayer", fontsize=8)
        for b in range(blocks):  # a colour bar per statistic's row, each on the statistic's one scale
            row = b * len(STATISTICS) + r
            fig.colorbar(image, ax=list(axes[row]), shrink=0.9, pad=0.01).ax.tick_params(labelsize=7)
            for col in range(len(shown) - b * cols, cols):
                axes[row][col].set_visible(False)
    fig.suptitle(title or f"Attention per layer and head ({RANGE_STYLE[queries][1]})", fontsize=10)
    return save(fig, prefix + "_heatmaps")


def distance_profiles(plt, cells, names, title, prefix, save):
    cols = min(len(cells), 4)
    rows = (len(cells) + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(0.6 + 3.2 * cols, 0.6 + 2.6 * rows), squeeze=False,
                             sharey=True, constrained_layout=True)
    for i, (name, c) in enumerate(zip(names, cells)):
        ax = axes[i // cols][i % cols]
        buckets = c["buckets"]
        x = np.arange(len(buckets))
        for r in ("in_L", "past_L") if "past_L" in c["attention"] else ("all",):
            color, label = RANGE_STYLE[r]
            mass = np.array(c["attention"][r]["mass"], dtype=float)  # [layer][head][bucket]
            for layer in mass.mean(axis=1):
                ax.plot(x, layer, color=light(color), lw=0.8, ls=LAYER_DASH[r])
            ax.plot(x, mass.mean(axis=(0, 1)), color=color, lw=2, label=f"{label} ({c['queries'][r]} queries)")
        ax.set_xticks(x)
        ax.set_xticklabels([str(a) if a == b else f"{a}–{b}" for a, b in buckets], rotation=60, fontsize=7)
        ax.set_title(name, fontsize=8)
        ax.set_xlabel("distance m − n", fontsize=8)
        if i % cols == 0:
            ax.set_ylabel("attention mass", fontsize=8)
        ax.tick_params(axis="y", labelsize=7)
        ax.legend(fontsize=7, frameon=False)
    for j in range(len(cells), rows * cols):
        axes[j // cols][j % cols].set_visible(False)
    # The thin lines' styles, once, in the first panel's legend.
    from matplotlib.lines import Line2D
    ranges = ("in_L", "past_L") if "past_L" in cells[0]["attention"] else ("all",)
    ax = axes[0][0]
    ax.legend(handles=ax.get_legend_handles_labels()[0] + [
        Line2D([], [], color=light(RANGE_STYLE[r][0]), lw=0.8, ls=LAYER_DASH[r],
               label=f"a layer's mean over its heads ({RANGE_STYLE[r][1]})") for r in ranges], fontsize=7, frameon=False)
    fig.suptitle(title or "Attention mass by distance", fontsize=10)
    return save(fig, prefix + "_distance")


def cmd_attention(args, plt, load_json, model_name, apply_labels, save):
    lengths = {int(n) for n in args.lengths.split(",")} if args.lengths else set()
    found = load_cells(args.files, lengths, load_json, model_name)
    names = apply_labels([n for n, _ in found], args.labels, "cells")
    cells = [c for _, c in found]
    heatmaps(plt, cells, names, args.queries, args.title, args.out, save)
    distance_profiles(plt, cells, names, args.title, args.out, save)


if __name__ == "__main__":  # as plot.py attention (run as a file, this folder is first on the path: put tools/ first)
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    sys.modules.pop("plot", None)
    from plot import plot as plot_py
    sys.argv[1:1] = ["attention"]
    plot_py.main()
