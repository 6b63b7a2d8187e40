#!/usr/bin/env python3
"""The family's models, one per scheme (configs/train/NAME.json, but family.json), in the order
every table and plot of the family shows them: no positions, the absolute schemes, the relative
ones from the simplest, then those whose positions come from the content; and its hybrid members (configs/train/hybrid/NAME.json: a scheme and a
span layer by layer, after Command R7B, Llama 4 and Gemma 3). The one list: tools import FAMILY
and HYBRID, shell scripts read the printed names.

    family_names.py              prints the schemes' models, space-separated
    family_names.py --hybrid     prints the hybrid members
    family_names.py --all        prints both, the schemes' first
"""
import argparse

FAMILY = ["none", "learned", "sinusoidal", "rope", "alibi", "xpos", "t5", "xl", "deberta", "kerple", "fire", "cope", "fox",
          "stick_breaking"]
HYBRID = ["rnope_swa", "irope", "local_global"]

if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    which = ap.add_mutually_exclusive_group()
    which.add_argument("--hybrid", action="store_true", help="the hybrid members only")
    which.add_argument("--all", action="store_true", help="the schemes' models, then the hybrid members")
    a = ap.parse_args()
    print(*(HYBRID if a.hybrid else FAMILY + HYBRID if a.all else FAMILY))
