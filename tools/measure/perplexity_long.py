#!/usr/bin/env python3
"""Perplexity at long contexts, pert against llama-perplexity on the very same GGUF file and text
(docs/speed.md, "Long contexts"): the random-weight stories110M shape converted by
tools/convert/to_gguf.py (tools/measure/bench_gguf.py makes it on first use), WikiText-2's test set, one window
(`--chunks 1`) scored as llama-perplexity scores it (pert's `--mode llama`: the window's second half).

    /usr/bin/python3 tools/measure/perplexity_long.py [--rounds 3] [-c 16384,32768] [-t 2] [--type F32] \
        [--programs pert,llama.cpp,"llama.cpp -fa"] [--llama-perplexity /work/llamacpp/build/bin/llama-perplexity]
        [--out FILE.json] [--append]

Each round runs, per context, pert, llama-perplexity and llama-perplexity with flash attention
(-fa), in an order that alternates from round to round; each is one whole process timed from
outside (its model load and tokenizing included: a second or two beside minutes). The table gives
the median seconds a window (min–max), the cost per token of the window (ms), pert's time as a
fraction of each llama.cpp variant's, and the mean NLL (ln PPL) each printed: the same scoring
on the same tokens, so they agree up to float summation (random weights give a PPL near e^231,
so its logarithm is what reads). --table FILE.json prints that table again from such
a file, measuring nothing (tools/lib/results_tables.py); --append adds a run's rows to those --out
already holds (a longer context with fewer programs, say).
"""
import argparse
import datetime
import json
import math
import os
import re
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tools/: import by folder (tools/README.md)
from lib import ROOT  # noqa: E402
from measure import bench_gguf  # noqa: E402  (gguf_file, cpu_name, log)
from lib.results_tables import add_table_flag, print_and_save, print_table  # noqa: E402  (--table FILE.json)

TEXT = os.path.join(ROOT, "..", "shared", "data", "text", "wikitext-2.test.tokens.txt")
PROGRAMS = ("pert", "llama.cpp", "llama.cpp -fa")


def command(a, program, path, ctx):
    if program == "pert":
        return [a.pert, "perplexity", "-m", path, "-f", TEXT, "-c", str(ctx), "--mode", "llama", "--chunks", "1",
                "-t", str(a.threads), "-q", "--json"]
    return ([a.llama_perplexity, "-m", path, "-f", TEXT, "-c", str(ctx), "-b", str(min(ctx, 2048)), "--chunks", "1",
             "-t", str(a.threads)] + (["-fa"] if program.endswith("-fa") else []))


def ppl_of(program, out, err):
    if program == "pert":
        return json.loads(out)["ppl"]
    m = re.search(r"Final estimate: PPL = ([0-9.]+)", out + err)
    return float(m.group(1)) if m else None


def table(report):
    """Seconds a window (median, min–max), ms a token of the window, pert ÷ each llama.cpp variant, PPL."""
    lines = [f"perplexity of one window, --mode llama / llama-perplexity --chunks 1, {report['model']}, {report['date']}, "
             f"{report['cpu']}, -t {report['threads']}; median (min–max) of {report['rounds']} rounds, whole processes", "",
             "| context | program | seconds | ms a token | pert ÷ it | NLL (ln PPL) |", "|---:|---|---:|---:|---:|---:|"]
    for ctx in report["contexts"]:
        rows = {r["program"]: r for r in report["results"] if r["context"] == ctx}
        pert = statistics.median(rows["pert"]["seconds"])
        for program in PROGRAMS:
            r = rows.get(program)
            if not r:
                continue
            s = r["seconds"]
            ratio = f"{pert / statistics.median(s):.2f}" if program != "pert" else ""
            ppl = f"{math.log(r['ppl']):.4f}" if r.get("ppl") else "—"
            lines.append(f"| {ctx} | {program} | {statistics.median(s):.1f} ({min(s):.1f}–{max(s):.1f}) | "
                         f"{1000 * statistics.median(s) / ctx:.2f} | {ratio} | {ppl} |")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_table_flag(ap)
    ap.add_argument("--rounds", type=int, default=3, help="rounds, each running every program at every context (default %(default)s)")
    ap.add_argument("-c", "--contexts", default="16384,32768", help="comma-separated contexts (default %(default)s)")
    ap.add_argument("-t", "--threads", type=int, default=2, help="threads of both (default %(default)s)")
    ap.add_argument("--programs", default=",".join(PROGRAMS),
                    help="comma-separated, of %(default)s (llama.cpp's flash attention takes longest on CPU)")
    ap.add_argument("--type", default="F32", help="tools/convert/to_gguf.py --type of the file (default %(default)s)")
    ap.add_argument("--pert", default=os.path.join(ROOT, "build", "pert"), help="the pert binary (default build/pert)")
    ap.add_argument("--llama-perplexity", default="/work/llamacpp/build/bin/llama-perplexity",
                    help="llama.cpp's llama-perplexity (default %(default)s)")
    ap.add_argument("--append", action="store_true", help="keep what --out holds for other contexts or programs")
    ap.add_argument("--out", default=os.path.join(ROOT, "build", "bench", "perplexity_long.json"),
                    help="JSON file for every sample (default build/bench/perplexity_long.json)")
    a = ap.parse_args()
    if a.table:
        return print_table(a.table, table)
    path = bench_gguf.gguf_file("stories110M", a.type)
    contexts = [int(c) for c in a.contexts.split(",")]
    seconds, ppl = {}, {}
    for r in range(a.rounds):
        for ctx in contexts:
            programs = [p for p in PROGRAMS if p in a.programs.split(",")]
            order = programs if r % 2 == 0 else programs[::-1]
            for program in order:
                t0 = time.monotonic()
                run = subprocess.run(command(a, program, path, ctx), capture_output=True, text=True)
                took = time.monotonic() - t0
                if run.returncode != 0:
                    sys.exit(f"{program} -c {ctx}: exit {run.returncode}: {(run.stderr.strip().splitlines() or ['?'])[-1]}")
                seconds.setdefault((ctx, program), []).append(took)
                ppl[(ctx, program)] = ppl_of(program, run.stdout, run.stderr)
                bench_gguf.log(f"round {r + 1}/{a.rounds}: -c {ctx} {program} {took:.1f} s, PPL {ppl[(ctx, program)]}")
    report = {"date": datetime.date.today().isoformat(), "cpu": bench_gguf.cpu_name(), "threads": a.threads,
              "rounds": a.rounds, "model": f"stories110M shape {a.type} GGUF (random weights)", "contexts": contexts,
              "text": "wikitext-2.test.tokens.txt",
              "results": [{"context": ctx, "program": p, "seconds": v, "ppl": ppl[(ctx, p)]} for (ctx, p), v in seconds.items()]}
    if a.append and os.path.exists(a.out):  # another run's contexts or programs kept beside these
        with open(a.out, encoding="utf-8") as f:
            old = json.load(f)
        ran = {(r["context"], r["program"]) for r in report["results"]}
        report["results"] = [r for r in old["results"] if (r["context"], r["program"]) not in ran] + report["results"]
        report["contexts"] = sorted(set(old["contexts"]) | set(contexts))
    print_and_save(report, table, a.out)


if __name__ == "__main__":
    main()
