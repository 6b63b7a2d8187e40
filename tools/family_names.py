#!/usr/bin/env python3
"""The family's eleven models (configs/train/NAME.json, but family.json), in the order every
table and plot of the family shows them: no positions, the absolute schemes, then the relative
ones from the simplest. The one list: tools import FAMILY, shell scripts read the printed names.

    family_names.py      prints the names, space-separated
"""
import argparse

FAMILY = ["none", "learned", "sinusoidal", "rope", "alibi", "xpos", "t5", "xl", "deberta", "kerple", "fire"]

if __name__ == "__main__":
    argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter).parse_args()
    print(*FAMILY)
