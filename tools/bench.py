#!/usr/bin/env python3
"""pert's speed on the random-weight stories15M and stories110M shapes (docs/speed.md),
the way these noisy machines must be measured: rounds that alternate the models, each round one
`pert bench` run of -r repetitions; the table gives the median over all runs and the spread.

    /usr/bin/python3 tools/bench.py [--rounds 5] [-t 2] [--dtypes F32,BF16,Q8] [--cache-types f32,bf16]
                                    [--out build/bench/bench.json]

Each precision is a checkpoint and pert's --dtype: F32 (an F32 checkpoint run in F32), BF16 (a
BF16 checkpoint, --dtype bf16), Q8 (the F32 checkpoint quantized at load, --dtype q8); each runs
under every --cache-types entry. Checkpoints are made on first use by tools/bench_model.py under
build/models/bench-*. --sgemm also times numpy's OpenBLAS sgemm at 2048³ at the start of every round
and gives each F32 prompt test's matrix products (projections and MLP: 2 · their parameters per
token) as GFLOP/s and as a fraction of that round's sgemm, the median of the rounds' fractions.
Prints a Markdown table (date, machine, threads) and writes every sample as JSON.
"""
import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys

import perplexity_rate  # sgemm_gflops, matrix_flops_per_token
from outputs import replaced  # noqa: E402  (whole or not at all, as pert's own)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PYTHON = "/usr/bin/python3"


def checkpoint(shape, dtype):
    path = os.path.join(ROOT, "build", "models", f"bench-{shape}-{dtype.lower()}")
    if not os.path.exists(os.path.join(path, "model.safetensors")):
        subprocess.run([PYTHON, os.path.join(ROOT, "tools", "bench_model.py"), shape, path, "--dtype", dtype],
                       check=True)
    return path


def cpu_name():
    for line in open("/proc/cpuinfo"):
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=5, help="rounds, each running every checkpoint once (default %(default)s)")
    ap.add_argument("-r", "--repetitions", type=int, default=3, help="pert bench -r: repetitions per run (default %(default)s)")
    ap.add_argument("-t", "--threads", type=int, default=2, help="pert bench -t (default %(default)s)")
    ap.add_argument("--shapes", default="stories15M,stories110M", help="comma-separated tools/bench_model.py shapes (default %(default)s)")
    ap.add_argument("--dtypes", default="F32,BF16", help="comma-separated precisions: F32, BF16, Q8 (default %(default)s)")
    ap.add_argument("--cache-types", default="f32", help="comma-separated pert bench --cache-type values (default %(default)s)")
    ap.add_argument("-p", default="512", help="pert bench -p: prompt lengths, comma-separated; 0 skips (default %(default)s)")
    ap.add_argument("-n", default="128", help="pert bench -n: generated tokens, comma-separated; 0 skips (default %(default)s)")
    ap.add_argument("-d", default="0", help="pert bench -d: cached tokens before each test, comma-separated, e.g. 0,4096 (default %(default)s)")
    ap.add_argument("--sgemm", action="store_true", help="time sgemm every round; F32 prompt tests as a fraction of it")
    ap.add_argument("--pert", default=os.path.join(ROOT, "build", "pert"), help="the pert binary (default build/pert)")
    ap.add_argument("--out", default=os.path.join(ROOT, "build", "bench", "bench.json"), help="JSON file for every sample (default build/bench/bench.json)")
    a = ap.parse_args()
    models = [(s, d, c, checkpoint(s, "BF16" if d == "BF16" else "F32")) for s in a.shapes.split(",")
              for d in a.dtypes.split(",") for c in a.cache_types.split(",")]
    flops = {path: perplexity_rate.matrix_flops_per_token(path, False) for _, _, _, path in models} if a.sgemm else {}
    samples = {}  # (shape, dtype, cache type, test) -> [t/s of every run]
    of_sgemm = {}  # (shape, cache type, test) -> [F32 prompt test's matrix GFLOP/s ÷ sgemm's, a round each]
    sgemm = []  # GFLOP/s, a round each
    blas_core = "?"  # OpenBLAS's kernels, as pert reports them (OPENBLAS_CORETYPE picks them where set)
    for r in range(a.rounds):
        if a.sgemm:
            sgemm.append(perplexity_rate.sgemm_gflops())
            print(f"round {r + 1}/{a.rounds}: sgemm {sgemm[-1]:.0f} GFLOP/s", file=sys.stderr)
        for shape, dtype, cache, path in (models if r % 2 == 0 else models[::-1]):  # alternate the order too
            out = subprocess.run([a.pert, "bench", "-m", path, "-p", a.p, "-n", a.n, "-d", a.d, "-r", str(a.repetitions),
                                  "-t", str(a.threads), "--dtype", dtype.lower(), "--cache-type", cache, "--json"],
                                 check=True, capture_output=True, text=True).stdout
            report = json.loads(out)
            blas_core = report.get("blas_core", blas_core)
            for res in report["results"]:
                samples.setdefault((shape, dtype, cache, res["test"]), []).extend(res["samples"])
                if a.sgemm and dtype == "F32" and res["test"].startswith("pp"):
                    rate = statistics.median(res["samples"]) * flops[path] / 1e9
                    of_sgemm.setdefault((shape, cache, res["test"]), []).append(rate / sgemm[-1])
            print(f"round {r + 1}/{a.rounds}: {shape} {dtype} cache {cache} done", file=sys.stderr)
    date = datetime.date.today().isoformat()
    print(f"pert bench, {date}, {cpu_name()}, {os.cpu_count()} cores, OpenBLAS core {blas_core}, -t {a.threads}; "
          f"median (min–max) of {a.rounds} rounds × {a.repetitions} runs\n")
    print("| shape | precision | kv cache | test | t/s |\n|---|---|---|---|---:|")
    rows = []
    for (shape, dtype, cache, test), v in samples.items():
        med = statistics.median(v)
        rows.append({"shape": shape, "precision": dtype, "cache_type": cache, "test": test, "median": med,
                     "min": min(v), "max": max(v), "samples": v})
        print(f"| {shape} | {dtype} | {cache} | {test} | {med:.1f} ({min(v):.0f}–{max(v):.0f}) |")
    for (shape, cache, test), v in of_sgemm.items():
        flops = perplexity_rate.matrix_flops_per_token(checkpoint(shape, "F32"), False)
        med = statistics.median(samples[(shape, "F32", cache, test)]) * flops / 1e9
        print(f"\n{shape} F32 {test}: matrix products {med:.0f} GFLOP/s ({flops / 1e6:.0f} MFLOP a token), "
              f"{100 * statistics.median(v):.0f}% ({100 * min(v):.0f}–{100 * max(v):.0f}%) of sgemm "
              f"(2048³, median {statistics.median(sgemm):.0f} GFLOP/s, {min(sgemm):.0f}–{max(sgemm):.0f})")
    os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
    with replaced(a.out) as f:
        json.dump({"date": date, "cpu": cpu_name(), "blas_core": blas_core, "threads": a.threads, "rounds": a.rounds,
                   "repetitions": a.repetitions, "results": rows, "sgemm_gflops": sgemm,
                   "f32_prompt_of_sgemm": [{"shape": k[0], "cache_type": k[1], "test": k[2], "per_round": v}
                                           for k, v in of_sgemm.items()]}, f, indent=2)


if __name__ == "__main__":
    main()
