"""What the Python logits tests share: running tests/pert_logits and comparing logits."""
import os
import subprocess

import numpy as np


def pert_logits(binary, model_dir, ids, workdir, chunk=None, window=None, extra=()):
    """pert's logits [len(ids)][vocab] as float64; chunk feeds the ids that many at a time,
    window restarts from an empty cache every that many ids; extra: more pert_logits flags."""
    ids_file, out = os.path.join(workdir, "ids.txt"), os.path.join(workdir, "out.bin")
    with open(ids_file, "w") as f:
        f.write(" ".join(map(str, ids)))
    cmd = [binary, model_dir, ids_file, out] + (["--chunk", str(chunk)] if chunk else []) + list(extra)
    subprocess.run(cmd + (["--window", str(window)] if window else []), check=True)
    return np.fromfile(out, dtype=np.float32).reshape(len(ids), -1).astype(np.float64)


class Checker:
    """Prints max |Δ| for each comparison and remembers those above the tolerance."""

    def __init__(self, name, tol=1e-4):
        self.name, self.tol, self.failures = name, tol, []

    def __call__(self, what, got, want):
        err = float(np.max(np.abs(got - want)))
        print(f"{self.name:28s} {what:46s} max|Δ| = {err:.2e}  (|logit| ≤ {np.max(np.abs(want)):.1f})")
        if not err <= self.tol:
            self.failures.append(what)

    def exit_code(self):
        if self.failures:
            print(f"{self.name}: FAILED: {', '.join(self.failures)}")
            return 1
        return 0
