#!/usr/bin/env python3
"""The results pages' tables, made by the scripts that measured them from what they recorded.

A table in a page that a script makes is marked with the command that prints it:

    <!-- table: tools/measure/bench.py --table docs/results/data/speed_bench.json -->
    pert bench, 2026-11-26, ...

    | shape | precision | ... |
    <!-- /table -->

The command is a script under tools/ and its arguments (run from the repository root with
Debian's Python); the script measured once with --out FILE.json, that file is committed, and
--table FILE.json prints the same table again from it, measuring nothing.

A figure is marked the same way with the command that draws it from committed results:

    <!-- figure: tools/plot/plot.py sweep docs/results/data/extrapolation/family.json --out docs/results/data/extrapolation/family -->
    ![PPL vs length](data/extrapolation/family_ppl.png)
    <!-- /figure -->

--check draws it again into a scratch directory (an argument that is the path of an image linked
in the block, or its start in the same directory, is an output and is moved there) and compares
each linked PNG pixel by pixel with the committed one; --write draws it in place.

    /usr/bin/python3 tools/lib/results_tables.py --check [PAGE ...]   every marked table and figure as its command makes it
    /usr/bin/python3 tools/lib/results_tables.py --write [PAGE ...]   each marked table and figure made again by its command

PAGE: Markdown files (default: README.md, docs/*.md and docs/results/*.md). --check exits 1
naming every table that differs (with the first differing line) and every figure that does, 0
when all are equal.
"""
import argparse
import difflib
import glob
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tools/: import by folder (tools/README.md)
from lib import ROOT  # noqa: E402
from lib.outputs import replaced  # noqa: E402  (whole or not at all, as pert's own)

PYTHON = "/usr/bin/python3"
BLOCK = re.compile(r"^<!-- table: (.+?) -->\n(.*?)^<!-- /table -->\n", re.M | re.S)
FIGURE = re.compile(r"^<!-- figure: (.+?) -->\n(.*?)^<!-- /figure -->\n", re.M | re.S)
IMAGE = re.compile(r"!\[[^\]]*\]\(([^)\s]+)\)")


def add_table_flag(ap):
    """A measuring script's --table FILE.json: its table again from the report its --out wrote."""
    ap.add_argument("--table", metavar="FILE.json", help="print the table of a report written by --out, and nothing else")


def print_table(path, table):
    """What a --table run does: table(report) for the report at path, printed, and nothing else."""
    with open(path, encoding="utf-8") as f:
        print(table(json.load(f)))


def print_and_save(report, table, path):
    """What a measuring run ends with: its table printed, and the report written whole to path
    (the file --table reads back)."""
    print(table(report))
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with replaced(path) as f:
        json.dump(report, f, indent=2)


def command(spec, page):
    """The argv of a marker's command; only tools/FOLDER/NAME.py with plain arguments."""
    argv = shlex.split(spec)
    if not argv or not re.fullmatch(r"tools/[a-z]+/[a-z0-9_]+\.py", argv[0]) or not os.path.isfile(os.path.join(ROOT, argv[0])):
        sys.exit(f"{page}: table marker '{spec}': must name a script under tools/ (tools/FOLDER/NAME.py ARGS)")
    return [PYTHON, os.path.join(ROOT, argv[0])] + argv[1:]


def made(spec, page):
    r = subprocess.run(command(spec, page), cwd=ROOT, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"{page}: table '{spec}' failed (exit {r.returncode}): {r.stderr.strip().splitlines()[-1:]}")
    return r.stdout if r.stdout.endswith("\n") else r.stdout + "\n"


def figure_differs(spec, body, page, write):
    """Why the block's figures are not what the command draws (None when they are); --write
    draws them in place instead."""
    images = [os.path.normpath(os.path.join(os.path.dirname(os.path.join(ROOT, page)), link)) for link in IMAGE.findall(body)]
    if not images or any(not i.endswith(".png") for i in images):
        return f"a figure block links PNG images only, and at least one (found {images or 'none'})"
    argv = command(spec, page)
    with tempfile.TemporaryDirectory() as tmp:
        def there(path):  # where an output is drawn: in place for --write, else in the scratch directory
            return path if write else os.path.join(tmp, os.path.relpath(os.path.join(ROOT, path), "/"))

        def output(a):  # the image's path, or its prefix in the same directory (plot.py's --out PREFIX)
            a = os.path.join(ROOT, a)
            return any(os.path.dirname(i) == os.path.dirname(a) and i.startswith(a) for i in images)
        moved = [there(a) if output(a) else a for a in argv[2:]]
        for a in moved:
            if a.startswith(tmp):
                os.makedirs(os.path.dirname(a), exist_ok=True)
        r = subprocess.run(argv[:2] + moved, cwd=ROOT, capture_output=True, text=True)
        if r.returncode != 0:
            return f"'{spec}' failed (exit {r.returncode}): {r.stderr.strip()[-200:]}"
        if write:
            return None
        import numpy as np
        from matplotlib.image import imread
        for i in images:
            shown = os.path.relpath(i, ROOT)
            if not os.path.exists(i):
                return f"{shown} is not committed"
            if not os.path.exists(there(i)):
                return f"'{spec}' does not draw {shown}"
            a, b = imread(i), imread(there(i))
            if a.shape != b.shape or np.abs(a - b).max() > 2 / 255:
                return f"{shown} is not what '{spec}' draws ({a.shape} vs {b.shape} pixels" + (
                    f", max difference {np.abs(a - b).max():.3f})" if a.shape == b.shape else ")")
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0], epilog=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    what = ap.add_mutually_exclusive_group(required=True)
    what.add_argument("--check", action="store_true", help="every marked table as its command prints it (exit 1 if not)")
    what.add_argument("--write", action="store_true", help="rewrite every marked table from its command")
    ap.add_argument("pages", nargs="*", help="Markdown files (default: README.md, docs/*.md, docs/results/*.md)")
    a = ap.parse_args()
    pages = a.pages or [os.path.join(ROOT, "README.md")] + sorted(glob.glob(os.path.join(ROOT, "docs", "*.md")) +
                                                                  glob.glob(os.path.join(ROOT, "docs", "results", "*.md")))
    tables, figures, differ, failed = 0, 0, [], []  # failed: --write's figures whose command failed
    for page in pages:
        with open(page, encoding="utf-8") as f:
            text = f.read()
        name = os.path.relpath(page, ROOT)

        def replace(m):
            nonlocal tables
            tables += 1
            want = made(m.group(1), name)
            if want != m.group(2):
                line = text.count("\n", 0, m.start()) + 2
                first = next(d for d in difflib.unified_diff(m.group(2).splitlines(), want.splitlines(), lineterm="", n=0)
                             if d[:1] in "+-" and d[:3] not in ("---", "+++"))
                differ.append(f"{name}:{line}: the table of '{m.group(1)}' is not what it prints; first: {first}")
            return f"<!-- table: {m.group(1)} -->\n{want}<!-- /table -->\n"
        new = BLOCK.sub(replace, text)
        for m in FIGURE.finditer(text):
            figures += 1
            why = figure_differs(m.group(1), m.group(2), name, a.write)
            if why:
                (failed if a.write else differ).append(f"{name}:{text.count(chr(10), 0, m.start()) + 1}: {why}")
        if a.write and new != text:
            with replaced(page, encoding="utf-8") as f:
                f.write(new)
            print(f"wrote {name}")
    if a.check:
        for d in differ:
            print(d)
        print(f"{tables} tables and {figures} figures, {len(differ)} not as their commands make them")
        return 1 if differ else 0
    for d in failed:
        print(d, file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
