#!/usr/bin/env python3
"""A guard on decoding speed: decoding a model too large for the caches must read its weights at
no less than FLOOR of what this machine reads, both measured in the same `pert bench --roof` run.

    roof_guard.py PERT [--floor 0.6] [--tries 3]

The model is the stories110M shape's random checkpoint (tools/measure/bench_model.py; 440 MB of F32
matrices a token, 220 MB in BF16, against caches of tens of MB), made under build/models on first
use. Each precision (F32, BF16 via --dtype bf16) runs `pert bench --roof -p 0 -n 32 -r 3` on every
core: the read probe (each thread streams its slice of 1 GiB) and the decode share one process
and one minute, so a slower machine, or one a neighbour slows, moves both and the ratio holds.
Why a floor of 0.6: on 2-core AMD EPYC (Zen 3) machines decoding reads 80-100% of the probe
(docs/speed.md); on a Zen 4, whose probe reads 28-56 GB/s from run to run, F32 read 49-59% with
its rows side by side (PERT_PREFETCH=t0) and 75-80% with `stream`, AMD's default since; the prefetch hint that halved an Intel Xeon's F32 decode left it at 34-46%
(issue 53). A precision passes on the first of --tries runs at or over the floor, so one run on a
busy moment does not fail it; a kernel that reads at 0.3-0.45 fails all three.
Prints each run's figures and the kernels that ran (pert's report). Exit 1 below the floor.
"""
import argparse
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
PYTHON = "/usr/bin/python3"
MODEL = os.path.join(ROOT, "build", "models", "bench-stories110M-f32")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("pert", help="the pert binary")
    ap.add_argument("--floor", type=float, default=0.6, help="least share of the read probe (default %(default)s)")
    ap.add_argument("--tries", type=int, default=3, help="runs per precision before it fails (default %(default)s)")
    a = ap.parse_args()
    if not os.path.exists(os.path.join(MODEL, "model.safetensors")):
        subprocess.run([PYTHON, os.path.join(ROOT, "tools", "measure", "bench_model.py"), "stories110M", MODEL], check=True)
    threads = len(os.sched_getaffinity(0))
    failed = []
    for dtype in ("f32", "bf16"):
        shares = []
        for _ in range(a.tries):
            out = subprocess.run([a.pert, "bench", "-m", MODEL, "--dtype", dtype, "-p", "0", "-n", "32", "-r", "3",
                                  "-t", str(threads), "--roof", "--json", "-q"], check=True, capture_output=True,
                                 text=True).stdout
            report = json.loads(out)
            row = report["results"][0]
            share = row["percent_of_roof"] / 100
            shares.append(share)
            print(f"{dtype}: tg32 {row['tokens_per_second']:.1f} t/s, {row['bytes_per_token'] / 1e6:.0f} MB a token, "
                  f"{row['read_bytes_per_second'] / 1e9:.1f} GB/s of the probe's "
                  f"{row['roof_bytes_per_second'] / 1e9:.1f}: {100 * share:.0f}% "
                  f"({report['cpu']}, {report['cpu_features']}; kernels {report['kernels']}, "
                  f"prefetch {report['f32_prefetch']}, -t {threads})")
            if share >= a.floor:
                break
        else:
            failed.append(f"{dtype} read {', '.join(f'{100 * s:.0f}%' for s in shares)} of the probe")
    if failed:
        sys.exit(f"roof_guard: decoding below {100 * a.floor:.0f}% of the read probe: {'; '.join(failed)}")
    print(f"roof_guard: every precision at or over {100 * a.floor:.0f}% of the read probe")


if __name__ == "__main__":
    main()
