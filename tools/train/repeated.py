#!/usr/bin/env python3
"""Writes a text where context past L pays: the first K stories of a held-out text, tiled N times.

    /usr/bin/python3 tools/train/repeated.py build/data/tinystories_heldout.txt K N OUT

One blank line between stories, as in the held-out text, so `pert perplexity/sweep --split-docs`
encodes each story on its own with BOS before it and the token stream repeats exactly, its
period the K stories' tokens (BOS included). A token one period into a window can be copied from
a period back; one that is not can only be predicted. Su's ReRoPE posts test the same way
("repeated" texts, kexue.fm/archives/9708).
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tools/: import by folder (tools/README.md)
from lib.outputs import replaced  # whole or not at all, as pert's own outputs


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("src", metavar="TEXT", help="held-out text, stories separated by blank lines")
    ap.add_argument("k", metavar="K", type=int, help="stories to take from its start")
    ap.add_argument("n", metavar="N", type=int, help="times to repeat them")
    ap.add_argument("out", metavar="OUT", help="text file to write")
    a = ap.parse_args()
    src, k, n, out = a.src, a.k, a.n, a.out
    stories = [s.strip() for s in open(src, encoding="utf-8").read().split("\n\n") if s.strip()]
    if not 1 <= k <= len(stories) or n < 1:
        sys.exit(f"repeated.py: K must be in [1, {len(stories)}] and N at least 1")
    with replaced(out, encoding="utf-8") as f:
        f.write("\n\n".join(stories[:k] * n) + "\n")
    print(f"{out}: {k} stories x {n}", file=sys.stderr)


if __name__ == "__main__":
    main()
