#!/usr/bin/env python3
"""The results pages' tables, made by the scripts that measured them from what they recorded.

A table in a page that a script makes is marked with the command that prints it:

    <!-- table: tools/bench.py --table docs/results/data/speed_bench.json -->
    pert bench, 2026-11-26, ...

    | shape | precision | ... |
    <!-- /table -->

The command is a script under tools/ and its arguments (run from the repository root with
Debian's Python); the script measured once with --out FILE.json, that file is committed, and
--table FILE.json prints the same table again from it, measuring nothing.

    /usr/bin/python3 tools/results_tables.py --check [PAGE ...]   every marked table as its command prints it
    /usr/bin/python3 tools/results_tables.py --write [PAGE ...]   each marked table rewritten from its command

PAGE: Markdown files (default: README.md, docs/*.md and docs/results/*.md). --check exits 1
naming every table that differs (with the first differing line), 0 when all are equal.
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

from outputs import replaced  # noqa: E402  (whole or not at all, as pert's own)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PYTHON = "/usr/bin/python3"
BLOCK = re.compile(r"^<!-- table: (.+?) -->\n(.*?)^<!-- /table -->\n", re.M | re.S)


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
    """The argv of a marker's command; only tools/NAME.py with plain arguments."""
    argv = shlex.split(spec)
    if not argv or not re.fullmatch(r"tools/[a-z0-9_]+\.py", argv[0]) or not os.path.isfile(os.path.join(ROOT, argv[0])):
        sys.exit(f"{page}: table marker '{spec}': must name a script under tools/ (tools/NAME.py ARGS)")
    return [PYTHON, os.path.join(ROOT, argv[0])] + argv[1:]


def made(spec, page):
    r = subprocess.run(command(spec, page), cwd=ROOT, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"{page}: table '{spec}' failed (exit {r.returncode}): {r.stderr.strip().splitlines()[-1:]}")
    return r.stdout if r.stdout.endswith("\n") else r.stdout + "\n"


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
    tables, differ = 0, []
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
        if a.write and new != text:
            with replaced(page, encoding="utf-8") as f:
                f.write(new)
            print(f"wrote {name}")
    if a.check:
        for d in differ:
            print(d)
        print(f"{tables} tables, {len(differ)} not as their commands print them")
        return 1 if differ else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
