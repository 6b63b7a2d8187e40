#!/usr/bin/env python3
"""Encoding speed of pert's tokenizer against HF's own JS tokenizers, per real tokenizer.json.

    tools/measure/tokenizer_throughput.py [--pert build/pert] [--input FILE] [--runs 3] [--whole]
                                  [--only NAME,...] [--out FILE.json]

Both sides are timed the same way, as whole commands (process start to exit, the median of
--runs, the two commands alternated run by run so that drift hits both):
    pert tokenize -m DIR -f FILE --lines --json                  (ids to /dev/null)
    node tests/helpers/hf_tokenizers/encode.mjs --dir DIR --input FILE   (ids to /dev/null)
each on FILE and on an empty file: each line encoded on its own (split on "\n"), or with
--whole the file as one text (no --lines on pert's side, --whole on the reference's; slow for
tokenizers with no pre-tokenizer, such as Llama 2's, whose whole file is then one word for BPE). The empty file's time is start-up plus loading
tokenizer.json; the difference is the encoding of FILE, and MB/s = FILE's bytes (10^6) over it.
Wall-clock and CPU (user + sys of the child) seconds are both kept; the table shows MB/s from
both (CPU: less disturbed by other load on the machine; node's own threads count in it).
FILE defaults to the three shared corpora (../shared/data/text: tinystories_val.txt,
wikitext-2.test.tokens.txt, tinyshakespeare.txt) concatenated, encoded as one text.
The tokenizers are those of tests/reference/hf_tokenizer_test.py (npm ci --prefix tests/helpers/hf_tokenizers).
Writes a Markdown table to stdout and, with --out, everything as JSON.
"""
import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tools/: import by folder (tools/README.md)
from lib import ROOT  # noqa: E402
sys.path.insert(0, os.path.join(ROOT, "tests", "reference"))
import hf_tokenizer_test as hft  # noqa: E402
from lib.outputs import replaced  # noqa: E402  (whole or not at all, as pert's own)


def timed(cmd):
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    r = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: exit {r.returncode}: {r.stderr.decode(errors='replace').strip()}")
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pert", default=os.path.join(ROOT, "build", "pert"), help="the pert binary (default build/pert)")
    ap.add_argument("--input", help="text to encode (default: the three shared corpora concatenated)")
    ap.add_argument("--runs", type=int, default=3, help="timed runs per command, the median kept (default %(default)s)")
    ap.add_argument("--whole", action="store_true", help="encode the file as one text, not line by line")
    ap.add_argument("--only", help="comma-separated tokenizer names")
    ap.add_argument("--out", help="JSON file for every figure")
    args = ap.parse_args()
    names = args.only.split(",") if args.only else list(hft.TOKENIZERS)

    with tempfile.TemporaryDirectory() as tmp:
        if args.input:
            big = args.input
        else:
            big = os.path.join(tmp, "corpora.txt")
            with open(big, "wb") as out:
                for c in hft.CORPORA:
                    with open(os.path.join(hft.TEXT, c), "rb") as f:
                        out.write(f.read())
        empty = os.path.join(tmp, "empty.txt")
        open(empty, "w").close()
        size = os.path.getsize(big)
        print(f"input: {os.path.basename(big)}, {size / 1e6:.2f} MB, {'one text' if args.whole else 'line by line'}; whole commands, median of {args.runs} runs; "
              f"MB/s = bytes / (time on the input - time on an empty file)", file=sys.stderr)

        results = []
        for n in names:
            tok_dir = os.path.join(hft.PACKAGES, hft.TOKENIZERS[n][0], "models")
            sides = {
                "pert": lambda f: [args.pert, "tokenize", "-m", tok_dir, "-f", f, "--json"] +
                                  ([] if args.whole else ["--lines"]),
                "hf_js": lambda f: ["node", hft.ENCODE, "--dir", tok_dir, "--input", f, "--out", "/dev/null"] +
                                   (["--whole"] if args.whole else []),
            }
            times = {(s, which): [] for s in sides for which in ("input", "empty")}
            try:
                for _ in range(args.runs):
                    for which, f in (("input", big), ("empty", empty)):
                        for s, cmd in sides.items():
                            times[(s, which)].append(timed(cmd(f)))
            except RuntimeError as e:
                print(f"{n}: {e}", file=sys.stderr)
                results.append({"tokenizer": n, "error": str(e)})
                continue
            row = {"tokenizer": n, "bytes": size, "runs": args.runs}
            for s in sides:
                for which in ("input", "empty"):
                    for k, what in ((0, "wall"), (1, "cpu")):
                        row[f"{s}_{which}_{what}_s"] = statistics.median(t[k] for t in times[(s, which)])
                for what in ("wall", "cpu"):
                    net = row[f"{s}_input_{what}_s"] - row[f"{s}_empty_{what}_s"]
                    row[f"{s}_encode_{what}_s"] = net
                    row[f"{s}_MBps_{what}"] = size / 1e6 / net if net > 0 else None
            results.append(row)
            print(f"{n}: pert {row['pert_MBps_wall']:.2f} MB/s, HF JS {row['hf_js_MBps_wall']:.2f} MB/s",
                  file=sys.stderr)

    fmt = lambda v: f"{v:.2f}" if isinstance(v, float) else "-"  # noqa: E731
    print("| tokenizer | pert MB/s | HF JS MB/s | pert / HF | pert MB/s (CPU s) | HF JS MB/s (CPU s) "
          "| pert load s | HF JS load s |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for r in results:
        if "error" in r:
            print(f"| {r['tokenizer']} | error: {r['error'][:80]} | | | | | | |")
            continue
        p, j = r["pert_MBps_wall"], r["hf_js_MBps_wall"]
        print(f"| {r['tokenizer']} | {fmt(p)} | {fmt(j)} | {fmt(p / j) if p and j else '-'} | "
              f"{fmt(r['pert_MBps_cpu'])} | {fmt(r['hf_js_MBps_cpu'])} | "
              f"{fmt(r['pert_empty_wall_s'])} | {fmt(r['hf_js_empty_wall_s'])} |")
    if args.out:
        with replaced(args.out) as f:
            json.dump({"input_bytes": size, "whole": args.whole, "method": "whole commands, median of runs; MB/s over (input - empty)",
                       "results": results}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
