#!/usr/bin/env python3
"""Writes a text where context past L pays: the first K stories of a held-out text, tiled N times.

    /usr/bin/python3 tools/repeated.py build/data/tinystories_heldout.txt K N OUT

One blank line between stories, as in the held-out text, so `pert perplexity/sweep --split-docs`
encodes each story on its own with BOS before it and the token stream repeats exactly, its
period the K stories' tokens (BOS included). A token one period into a window can be copied from
a period back; one that is not can only be predicted. Su's ReRoPE posts test the same way
("repeated" texts, kexue.fm/archives/9708).
"""
import sys


def main():
    if len(sys.argv) != 5:
        sys.exit(__doc__)
    src, k, n, out = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    stories = [s.strip() for s in open(src, encoding="utf-8").read().split("\n\n") if s.strip()]
    if not 1 <= k <= len(stories) or n < 1:
        sys.exit(f"repeated.py: K must be in [1, {len(stories)}] and N at least 1")
    with open(out, "w", encoding="utf-8") as f:
        f.write("\n\n".join(stories[:k] * n) + "\n")
    print(f"{out}: {k} stories x {n}", file=sys.stderr)


if __name__ == "__main__":
    main()
