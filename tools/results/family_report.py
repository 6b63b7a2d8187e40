#!/usr/bin/env python3
"""Writes models/README.md: a card per family model, from models/NAME/card.json (tools/train/train.py)
and the validation perplexity pert measures (tests/reference/family_test.py), plus a sample story each.

    family_report.py BUILD_DIR      # e.g. build (needs build/pert, build/tests/pert_logits and the
                                    # Python module, build/python/pert)
"""
import argparse
import csv
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tools/: import by folder (tools/README.md)
from lib import ROOT  # noqa: E402
from lib.family_names import FAMILY
from lib.outputs import replaced  # whole or not at all, as pert's own outputs



def overfit(names, listed=3):
    """How far each model's held-out loss ends above its lowest evaluation (its train_log.csv), as
    the template's {{OVERFIT}} (the largest) and {{OVERFIT_LIST}} (the largest few by name, with a
    bound on the others)."""
    gaps = {}
    for name in names:
        with open(os.path.join(ROOT, "models", name, "train_log.csv")) as f:
            val = [float(r["val_loss"]) for r in csv.DictReader(f) if r["val_loss"]]
        gaps[name] = val[-1] - min(val)
    worst = sorted(gaps, key=gaps.get, reverse=True)
    named = ", ".join(f"{n} {gaps[n]:.3f}" for n in worst[:listed])
    return {"{{OVERFIT}}": f"{gaps[worst[0]]:.3f}",
            "{{OVERFIT_LIST}}": f"{named}, the others {gaps[worst[listed]]:.3f} or less"}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("build", metavar="BUILD_DIR", help="CMake build directory holding pert and tests/pert_logits")
    build = os.path.abspath(ap.parse_args().build)
    for need in (os.path.join(build, "pert"), os.path.join(build, "tests", "pert_logits"),
                 os.path.join(build, "python", "pert")):
        if not os.access(need, os.X_OK):
            sys.exit(f"family_report.py: {need}: missing (build it: cmake --build {build})")
    sys.path.insert(0, os.path.join(build, "python"))
    import pert
    rows, samples, names = [], [], []
    for name in FAMILY:
        model = os.path.join(ROOT, "models", name)
        if not os.path.exists(os.path.join(model, "card.json")):
            continue
        card = json.load(open(os.path.join(model, "card.json")))
        names.append(name)
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "ppl.json")
            subprocess.run([sys.executable, os.path.join(ROOT, "tests", "reference", "family_test.py"), name,
                            os.path.join(build, "tests", "pert_logits"), os.path.join(build, "pert"), "--json-out", out],
                           check=True,
                           stdout=subprocess.DEVNULL)
            ppl = json.load(open(out))
        story = "".join(pert.load(model).generate("Once upon a time", n_predict=80, seed=1))
        rows.append(f"| `{name}` | `{json.dumps(card['position'])}` | {card['parameters']:,} | {card['steps']} | "
                    f"{card['train_loss']:.3f} | {card['val_loss']:.3f} | {card['passkey_acc']:.2f} | **{ppl['ppl']:.2f}** | "
                    f"{card['wall_seconds'] / 60:.1f} min | `{card['command']}` |")
        samples.append(f"**{name}**: Once upon a time{story}".replace("\n", " "))
    text = open(os.path.join(ROOT, "models", "README.template.md")).read()
    fields = {"{{TABLE}}": "\n".join(rows), "{{SAMPLES}}": "\n\n".join(samples), **overfit(names)}
    for key, value in fields.items():
        text = text.replace(key, value)
    with replaced(os.path.join(ROOT, "models", "README.md")) as f:
        f.write(text)
    print("\n".join(rows))


if __name__ == "__main__":
    main()
