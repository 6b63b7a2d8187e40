"""What the Python logits tests share: running tests/pert_logits and comparing logits (and the
statistics of the attention weights)."""
import json
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


def pert_attention(binary, model_dir, ids, workdir, chunk=None, sink=1, extra=()):
    """pert's statistics of the attention weights for the ids as one window (pert_logits
    --attention-stats: pert attention's JSON for it), and the logits of that run."""
    stats = os.path.join(workdir, "attention.json")
    logits = pert_logits(binary, model_dir, ids, workdir, chunk,
                         extra=["--attention-stats", stats, "--sink", str(sink), *extra])
    with open(stats) as f:
        return json.load(f), logits


def attention_differences(got, want):
    """The largest |Δ| / max(1, |want|) over every statistic, range, layer and head of two
    attention reports (pert attention's JSON, tools/reference/reference.py attention's), and what differs
    in their shape (buckets, query counts, ranges), as (error, [problems])."""
    problems = [f"{key}: {got.get(key)} vs {want[key]}" for key in ("buckets", "queries") if got.get(key) != want[key]]
    if set(got["attention"]) != set(want["attention"]):
        problems.append(f"ranges {sorted(got['attention'])} vs {sorted(want['attention'])}")
    err = 0.0
    for r, stats in want["attention"].items():
        for name, w in stats.items():
            g = np.array(got["attention"].get(r, {}).get(name, np.nan), dtype=np.float64)
            w = np.array(w, dtype=np.float64)
            if g.shape != w.shape:
                problems.append(f"{r}.{name}: shape {g.shape} vs {w.shape}")
                continue
            err = max(err, float(np.max(np.abs(g - w) / np.maximum(1.0, np.abs(w)))))
    return err, problems


class Checker:
    """Prints max |Δ| for each comparison and remembers those above the tolerance."""

    def __init__(self, name, tol=1e-4):
        self.name, self.tol, self.failures = name, tol, []

    def __call__(self, what, got, want):
        err = float(np.max(np.abs(got - want)))
        print(f"{self.name:28s} {what:46s} max|Δ| = {err:.2e}  (|logit| ≤ {np.max(np.abs(want)):.1f})")
        if not err <= self.tol:
            self.failures.append(what)

    def attention(self, what, got, want, tol=2e-6):
        """Two attention reports (attention_differences) within tol relative. The statistics of F32
        weights inherit the F32 forward pass's error in the scores (the logits' ~1e-5), and the
        entropy multiplies a weight's error by |ln p|: layers_irope's deepest layer's in-L entropy
        is off by 5e-7 with the AVX2 F32 kernels and 1.2e-6 with AVX-512's (AMD EPYC Zen 5), whose
        logits are as close (1.0e-5 against 8.9e-6)."""
        err, problems = attention_differences(got, want)
        print(f"{self.name:28s} {what:46s} max|Δ|/max(1,|ref|) = {err:.2e}" + "".join(f"; {p}" for p in problems))
        if problems or not err <= tol:
            self.failures.append(what)

    def exactly(self, what, got, want):
        """Two arrays equal bit for bit."""
        same = got.shape == want.shape and bool(np.array_equal(got, want))
        print(f"{self.name:28s} {what:46s} {'equal' if same else 'DIFFER'}")
        if not same:
            self.failures.append(what)

    def exit_code(self):
        if self.failures:
            print(f"{self.name}: FAILED: {', '.join(self.failures)}")
            return 1
        return 0
