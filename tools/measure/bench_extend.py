#!/usr/bin/env python3
"""What each "extend" method costs (docs/results/extrapolation.md, "Training-free extension past L"):
`pert bench` at a depth (default 4096 cached tokens) under each configs/extend file and under
plain RoPE, alternated round by round, each figure the median of all runs, and its cost as
plain's t/s over the method's (1.00: free; > 1: slower).

    /usr/bin/python3 tools/measure/bench_extend.py [--rounds 5] [-t 2] [--shape stories15M] [-d 4096]

The checkpoint is the random-weight shape of tools/measure/bench_model.py (as tools/measure/bench.py uses).
Prints a Markdown table and writes every sample as JSON (--out); --table FILE.json prints that
table again from such a file, measuring nothing (tools/lib/results_tables.py).
"""
import argparse
import datetime
import glob
import json
import os
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tools/: import by folder (tools/README.md)
from measure import bench  # noqa: E402  (checkpoint, cpu_name)
from lib.results_tables import print_and_save, print_table  # noqa: E402  (--table FILE.json)

ROOT = bench.ROOT


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    bench.add_round_flags(ap, "plain and every config")
    ap.add_argument("--shape", default="stories15M", help="tools/measure/bench_model.py shape, F32 (default %(default)s)")
    ap.add_argument("-p", default="512", help="pert bench -p: prompt lengths; 0 skips (default %(default)s)")
    ap.add_argument("-n", default="128", help="pert bench -n: generated tokens; 0 skips (default %(default)s)")
    ap.add_argument("-d", default="4096", help="pert bench -d: cached tokens before each test (default %(default)s)")
    ap.add_argument("--configs", default=",".join(sorted(glob.glob(os.path.join(ROOT, "configs", "extend", "*.json")))),
                    help="comma-separated config files, each timed against plain RoPE (default: every configs/extend/*.json)")
    ap.add_argument("--pert", default=os.path.join(ROOT, "build", "pert"), help="the pert binary (default build/pert)")
    ap.add_argument("--out", default=os.path.join(ROOT, "build", "bench", "bench_extend.json"),
                    help="JSON file for every sample (default build/bench/bench_extend.json)")
    a = ap.parse_args()
    if a.table:
        return print_table(a.table, table)
    model = bench.checkpoint(a.shape, "F32")
    runs = [("plain", [])] + [(os.path.basename(c)[:-5], ["--config", c]) for c in a.configs.split(",") if c]
    samples = {}  # (config, test) -> [t/s]
    for r in range(a.rounds):
        for name, flags in (runs if r % 2 == 0 else runs[::-1]):
            out = subprocess.run([a.pert, "bench", "-m", model, "-p", a.p, "-n", a.n, "-d", a.d, "-r", str(a.repetitions),
                                  "-t", str(a.threads), "--json"] + flags, check=True, capture_output=True, text=True).stdout
            for res in json.loads(out)["results"]:
                samples.setdefault((name, res["test"]), []).extend(res["samples"])
            print(f"round {r + 1}/{a.rounds}: {name} done", file=sys.stderr)
    rows = []
    for name, _ in runs:
        for t in sorted({t for _, t in samples}, key=lambda t: (not t.startswith("pp"), t)):
            v, plain = samples[(name, t)], statistics.median(samples[("plain", t)])
            rows.append({"config": name, "test": t, "median": statistics.median(v), "min": min(v), "max": max(v),
                         "cost": plain / statistics.median(v), "samples": v})
    report = {"date": datetime.date.today().isoformat(), "cpu": bench.cpu_name(), "threads": a.threads, "shape": a.shape,
              "depth": a.d, "rounds": a.rounds, "repetitions": a.repetitions, "results": rows}
    print_and_save(report, table, a.out)


def table(report):
    """The Markdown table of a report as main() writes it: each config's median t/s (min–max) and
    cost (plain's median ÷ its own) for every test, configs in the order they ran."""
    rows = report["results"]
    tests = list(dict.fromkeys(r["test"] for r in rows))
    configs = list(dict.fromkeys(r["config"] for r in rows))
    at = {(r["config"], r["test"]): r for r in rows}
    lines = [f"pert bench -m {report['shape']} (random weights, F32) -d {report['depth']}, {report['date']}, {report['cpu']}, "
             f"-t {report['threads']}; median t/s (min–max) of {report['rounds']} rounds × {report['repetitions']} runs; "
             "cost = plain's t/s ÷ the method's", "",
             "| config | " + " | ".join(f"{t} t/s | cost" for t in tests) + " |",
             "|---|" + "---:|---:|" * len(tests)]
    for name in configs:
        lines.append(f"| {name} | " + " | ".join(
            f"{at[(name, t)]['median']:.1f} ({at[(name, t)]['min']:.0f}–{at[(name, t)]['max']:.0f}) | {at[(name, t)]['cost']:.2f}"
            for t in tests) + " |")
    return "\n".join(lines)

if __name__ == "__main__":
    main()
