#!/usr/bin/env python3
"""Writes the family's held-out text: the last 10% of ../shared/data/text/tinystories_val.txt's
stories (tools/train/train_data.py's split, never trained on), one blank line between stories.

    /usr/bin/python3 tools/train/heldout.py build/data/tinystories_heldout.txt

`pert perplexity/sweep --split-docs` reads it back as the family saw text in training: each
story encoded on its own, BOS before it.
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tools/: import by folder (tools/README.md)
from lib import ROOT  # noqa: E402
from train import train_data  # noqa: E402
from lib.outputs import replaced  # noqa: E402  (whole or not at all, as pert's own)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out", metavar="OUT", help="text file to write (its directory is created)")
    a = ap.parse_args()
    cfg = train_data.load_run_config(os.path.join(ROOT, "configs", "train", "family.json"))
    _, val_stories = train_data.split(cfg)
    os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
    with replaced(a.out, encoding="utf-8") as f:
        f.write("\n\n".join(val_stories) + "\n")
    print(f"{a.out}: {len(val_stories)} held-out stories", file=sys.stderr)


if __name__ == "__main__":
    main()
