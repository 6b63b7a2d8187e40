#!/usr/bin/env python3
"""Writes the start of WikiText-2 test, whole articles, for the family's long-document sweep.

    /usr/bin/python3 tools/train/wikitext_prefix.py OUT [--bytes N]

The first articles of ../shared/data/text/wikitext-2.test.tokens.txt (never trained on: the
family trains on WikiText-2 *valid*) up to the first article boundary (a " = Title = " line)
at or past N bytes (default 300,000, about 150k tokens of the family's tokenizer: a sweep of
eleven models at six lengths then takes minutes on two cores, not an hour). The text is copied
as it is, so `pert sweep` (chunks mode, no --split-docs) reads it as one long text, as the ALiBi
paper reads WikiText-103.
"""
import argparse
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tools/: import by folder (tools/README.md)
from lib import ROOT  # noqa: E402
from lib.outputs import replaced  # noqa: E402  (whole or not at all, never through a planted link)
SOURCE = os.path.join(ROOT, "..", "shared", "data", "text", "wikitext-2.test.tokens.txt")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out", metavar="OUT", help="text file to write (its directory is created)")
    ap.add_argument("--bytes", type=int, default=300_000, help="cut at the first article boundary past this (default %(default)s)")
    a = ap.parse_args()
    try:
        lines = open(SOURCE, encoding="utf-8").read().splitlines(keepends=True)
    except OSError as e:
        sys.exit(f"wikitext_prefix.py: {SOURCE}: {e.strerror}")
    heading = re.compile(r"^ = [^=].* = \n$")  # top-level titles only (" = = Section = = " are not)
    out, size, articles = [], 0, 0
    for line in lines:
        if heading.match(line):
            if size >= a.bytes:
                break
            articles += 1
        out.append(line)
        size += len(line.encode("utf-8"))
    os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
    with replaced(a.out, encoding="utf-8") as f:
        f.writelines(out)
    print(f"{a.out}: {articles} articles, {size:,} bytes of WikiText-2 test", file=sys.stderr)


if __name__ == "__main__":
    main()
