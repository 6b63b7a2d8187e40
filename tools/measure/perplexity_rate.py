#!/usr/bin/env python3
"""What `pert perplexity` costs per token at a short and a long context, and how fast its matrix
products run next to this machine's F32 GEMM rate (docs/speed.md), measured in
alternation:

    /usr/bin/python3 tools/measure/perplexity_rate.py [--rounds 5] [-m models/rope] [-c 128,2048] [-t 2]

Each round times numpy's OpenBLAS sgemm at 2048³ (best of 3) and then pert's perplexity (the
Python module's, which `pert perplexity` runs too; the model loaded once) at every context, so machine swings hit both sides alike; the table gives medians over rounds. The
matrix products' rate is tokens/s × 2·(matrix parameters per token: projections, MLP and the
classifier); attention, norms and the log-softmax are the cost on top. Writes every sample as
JSON (--out).
"""
import argparse
import datetime
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tools/: import by folder (tools/README.md)
from lib import ROOT  # noqa: E402
from lib.results_tables import add_table_flag, print_and_save, print_table  # noqa: E402  (--table FILE.json)



def sgemm_gflops(n=2048, tries=3):
    import numpy as np  # here: --table needs neither numpy nor the module
    a = np.random.default_rng(0).standard_normal((n, n), dtype=np.float32)
    b = np.random.default_rng(1).standard_normal((n, n), dtype=np.float32)
    a @ b  # warm-up: threads, pages
    best = min(timed(lambda: a @ b) for _ in range(tries))
    return 2.0 * n ** 3 / best / 1e9


def timed(f):
    t0 = time.perf_counter()
    f()
    return time.perf_counter() - t0


def matrix_flops_per_token(model_dir, classifier=True):
    """2 · the matrix parameters a token multiplies: every layer's projections and MLP, and the
    classifier unless `classifier` is False (prefill computes only the last position's logits)."""
    c = json.load(open(os.path.join(model_dir, "config.json")))
    d, ff, layers, vocab = c["hidden_size"], c["intermediate_size"], c["num_hidden_layers"], c["vocab_size"]
    heads = c["num_attention_heads"]
    hd = c.get("head_dim", d // heads)
    kv = c.get("num_key_value_heads", heads) * hd
    per_layer = d * heads * hd * 2 + 2 * d * kv + 3 * d * ff  # q, o; k, v; gate, up, down
    return 2.0 * (layers * per_layer + (d * vocab if classifier else 0))


def table(report):
    """The Markdown table of a report as main() writes it."""
    gemm, flops, rows = report["sgemm_gflops"], report["matrix_flops_per_token"], report["results"]
    short = rows[0]["context"]
    lines = [f"pert perplexity, {os.path.basename(os.path.normpath(report['model']))}, {report['date']}, "
             f"-t {report['threads']}, median of {report['rounds']} alternated rounds; numpy/OpenBLAS sgemm 2048³ "
             f"{statistics.median(gemm):.0f} GFLOP/s ({min(gemm):.0f}–{max(gemm):.0f}); matrix products "
             f"{flops / 1e6:.2f} MFLOP/token", "",
             f"| context | tokens/s | cost per token vs -c {short} | matrix products GFLOP/s | of sgemm |",
             "|---:|---:|---:|---:|---:|"]
    for row in rows:
        rate, fractions = row["samples"], row["fractions"]
        lines.append(f"| {row['context']} | {row['tokens_per_second']:.0f} ({min(rate):.0f}–{max(rate):.0f}) | "
                     f"{row['cost_vs_short']:.2f}× | {row['gflops']:.1f} | {100 * row['fraction_of_sgemm']:.0f}% "
                     f"({100 * min(fractions):.0f}–{100 * max(fractions):.0f}%) |")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=5, help="rounds, each timing sgemm then every context (default %(default)s)")
    ap.add_argument("-m", "--model", default=os.path.join(ROOT, "models", "rope"), help="model directory (default models/rope)")
    ap.add_argument("-f", "--file", default=os.path.join(ROOT, "build", "data", "tinystories_heldout.txt"),
                    help="text to score (default build/data/tinystories_heldout.txt)")
    ap.add_argument("-c", "--contexts", default="128,2048", help="comma-separated contexts; the first is the baseline (default %(default)s)")
    ap.add_argument("-t", "--threads", type=int, default=2, help="threads (default %(default)s)")
    ap.add_argument("--out", default=os.path.join(ROOT, "build", "bench", "perplexity_rate.json"),
                    help="JSON file for every sample (default build/bench/perplexity_rate.json)")
    add_table_flag(ap)
    a = ap.parse_args()
    if a.table:
        return print_table(a.table, table)
    sys.path.insert(0, os.path.join(ROOT, "build", "python"))
    import pert  # before numpy: pert sets libgomp's spin count before it loads
    if not os.path.exists(a.file):
        sys.exit(f"{a.file}: missing; tools/setup.sh writes it (tools/train/heldout.py)")
    os.environ["OMP_NUM_THREADS"] = str(a.threads)  # numpy's OpenBLAS (the OpenMP build) too
    pert.set_threads(a.threads)
    model = pert.load(a.model)
    contexts = [int(c) for c in a.contexts.split(",")]
    flops = matrix_flops_per_token(a.model)
    gemm, rate = [], {c: [] for c in contexts}
    for r in range(a.rounds):
        gemm.append(sgemm_gflops())
        for c in (contexts if r % 2 == 0 else contexts[::-1]):
            rate[c].append(model.perplexity(file=a.file, split_docs=True, n_ctx=c)["tokens_per_second"])
        print(f"round {r + 1}/{a.rounds}: sgemm {gemm[-1]:.0f} GFLOP/s, " +
              ", ".join(f"-c {c} {rate[c][-1]:.0f} t/s" for c in contexts), file=sys.stderr)

    short = contexts[0]
    rows = []
    for c in contexts:
        tps = statistics.median(rate[c])
        fractions = [t * flops / 1e9 / s for t, s in zip(rate[c], gemm)]  # per round: same minutes
        rows.append({"context": c, "tokens_per_second": tps, "samples": rate[c],
                     "cost_vs_short": statistics.median(rate[short]) / tps,
                     "gflops": tps * flops / 1e9, "fraction_of_sgemm": statistics.median(fractions),
                     "fractions": fractions})
    report = {"date": datetime.date.today().isoformat(), "model": a.model, "threads": a.threads,
              "rounds": a.rounds, "matrix_flops_per_token": flops, "sgemm_gflops": gemm, "results": rows}
    print_and_save(report, table, a.out)

if __name__ == "__main__":
    main()
