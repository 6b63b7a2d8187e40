#!/usr/bin/env python3
"""pert's decoding speed on an idle machine and beside one busy process, with pert's thread
defaults against the old ones, alternated run by run.

    /usr/bin/python3 tools/measure/bench_busy.py [--rounds 5] [--models DIR,DIR] [-n 200] [--out FILE.json]

Each round, for each model, first idle and then with one CPU-bound process beside pert (a
Python busy loop, started before and stopped after), runs in turn

    default   pert bench -m DIR -p 0 -n N -r 1 --json   (decoding N tokens; pert's defaults:
              the cores not busy at start, libgomp's spin bounded)
    old       the same with -t <all cores> and GOMP_SPINCOUNT=300000 (libgomp's own default
              spin, what pert ran before)
    passive   the same with -t <all cores> and OMP_WAIT_POLICY=passive (threads sleep at once)

and reads the tokens/s of decoding from the JSON. Prints a Markdown table of medians
(min–max) and, with --out, every sample as JSON; --table FILE.json prints that table again from
such a file (tools/lib/results_tables.py). Nothing else may run meanwhile: the point is what one
known busy process does.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tools/: import by folder (tools/README.md)
from lib import ROOT  # noqa: E402
from lib.outputs import replaced  # noqa: E402  (whole or not at all, as pert's own)
from lib.results_tables import add_table_flag, print_table  # noqa: E402  (--table FILE.json)

VARIANTS = ("default", "old", "passive")


def run(pert, model, n, variant, cores):
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS", "OMP_WAIT_POLICY", "GOMP_SPINCOUNT")}
    cmd = [pert, "bench", "-m", model, "-p", "0", "-n", str(n), "-r", "1", "--json"]
    if variant == "old":
        env["GOMP_SPINCOUNT"] = "300000"
        cmd += ["-t", str(cores)]
    elif variant == "passive":
        env["OMP_WAIT_POLICY"] = "passive"
        cmd += ["-t", str(cores)]
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        sys.exit(f"bench_busy.py: {' '.join(cmd)} failed: {r.stderr.strip()}")
    return json.loads(r.stdout)["results"][0]["tokens_per_second"]


def table(report):
    """The Markdown table of a report as main() writes it: tokens/s median (min–max) of each
    variant, and the median of the default/old ratios run by run."""
    cores = report["cores"]
    samples = {(x["model"], x["machine"], x["variant"]): x["tokens_per_second"] for x in report["samples"]}
    models = list(dict.fromkeys(x["model"] for x in report["samples"]))

    def cell(xs):
        return f"{statistics.median(xs):.0f} ({min(xs):.0f}–{max(xs):.0f})"
    lines = [f"pert bench -p 0 -n {report['n']}, tokens/s, {cores} cores, median (min–max) of {report['rounds']} "
             "alternated rounds", "",
             f"| model | machine | default | old (-t {cores}, spin 300000) | passive (-t {cores}) | default / old |",
             "|---|---|---:|---:|---:|---:|"]
    for m in models:
        for state in ("idle", "busy"):
            d, o, p = (samples[(m, state, v)] for v in VARIANTS)
            ratio = statistics.median(x / y for x, y in zip(d, o))
            label = "idle" if state == "idle" else "one busy process"
            lines.append(f"| {os.path.basename(m)} | {label} | {cell(d)} | {cell(o)} | {cell(p)} | {ratio:.2f}× |")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=5, help="rounds (default %(default)s)")
    ap.add_argument("--models", default="build/models/stories260K,build/models/bench-stories15M-f32",
                    help="comma-separated model directories (default %(default)s)")
    ap.add_argument("-n", type=int, default=128, help="tokens decoded per run (default %(default)s)")
    ap.add_argument("--pert", default=os.path.join(ROOT, "build", "pert"), help="the pert binary (default build/pert)")
    ap.add_argument("--out", help="JSON file for every sample")
    add_table_flag(ap)
    a = ap.parse_args()
    if a.table:
        return print_table(a.table, table)
    cores = len(os.sched_getaffinity(0))
    models = [m for m in a.models.split(",") if m]
    for m in models:
        if not os.path.isdir(m):
            sys.exit(f"bench_busy.py: {m}: not a model directory (tools/setup.sh and tools/measure/bench_model.py make them)")
    samples = {(m, state, v): [] for m in models for state in ("idle", "busy") for v in VARIANTS}
    for r in range(a.rounds):
        for m in models:
            for state in ("idle", "busy"):
                hog = subprocess.Popen([sys.executable, "-c", "while True: pass"]) if state == "busy" else None
                try:
                    if hog:
                        time.sleep(0.5)  # let it be running before pert starts
                    for v in VARIANTS:
                        samples[(m, state, v)].append(run(a.pert, m, a.n, v, cores))
                finally:
                    if hog:
                        hog.kill()
                        hog.wait()
        print(f"round {r + 1}/{a.rounds} done", file=sys.stderr)

    report = {"date": time.strftime("%Y-%m-%d"), "cores": cores, "n": a.n, "rounds": a.rounds,
              "samples": [{"model": m, "machine": s, "variant": v, "tokens_per_second": xs}
                          for (m, s, v), xs in samples.items()]}
    print(table(report))
    if a.out:
        with replaced(a.out) as f:
            json.dump(report, f, indent=1)
        print(f"wrote {a.out}", file=sys.stderr)

if __name__ == "__main__":
    main()
