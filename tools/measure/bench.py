#!/usr/bin/env python3
"""pert's speed on the random-weight stories15M and stories110M shapes (docs/speed.md),
the way these noisy machines must be measured: rounds that alternate the models, each round one
`pert bench` run of -r repetitions; the table gives the median over all runs and the spread.

    /usr/bin/python3 tools/measure/bench.py [--rounds 5] [-t 2] [--dtypes F32,BF16,Q8] [--cache-types f32,bf16]
                                    [--out build/bench/bench.json]

Each precision is a checkpoint and pert's --dtype: F32 (an F32 checkpoint run in F32), BF16 (a
BF16 checkpoint, --dtype bf16), Q8 (the F32 checkpoint quantized at load, --dtype q8); each runs
under every --cache-types entry. Checkpoints are made on first use by tools/measure/bench_model.py under
build/models/bench-* (the tinyllama shape's, F32 only, by tools/measure/bench_gguf.py). --sgemm also times numpy's OpenBLAS sgemm at 2048³ at the start of every round
and gives each F32 prompt test's matrix products (projections and MLP: 2 · their parameters per
token) as GFLOP/s and as a fraction of that round's sgemm, the median of the rounds' fractions.
--roof passes `pert bench --roof`: each pp row gets its GMAC/s at the median t/s and its share of the compute
roof (the probes' peaks for the matrices' path and for attention's F32, medians of the runs'); each tg row
gets the bytes a token reads, GB/s at the median t/s,
and its share of the median of the runs' read-bandwidth probes.
--llama-bench PATH runs llama.cpp's llama-bench beside pert in every round, on GGUF files of the
same weights (tools/measure/bench_gguf.py's conversion of the shape's F32 checkpoint, seed 0 as here: F32
for F32, BF16 for BF16, Q8_0 for Q8), the same -p, -n, -r and -t. Its rows get llama.cpp's median and
pert ÷ llama.cpp. Tests at a depth (-d above 0) run llama.cpp's llama-batched-bench instead (beside
llama-bench; --llama-batched-bench names another), as llama-bench b4748 has no depth option: each of its
-r runs prefills the depth, then decodes -n tokens, with the KV cache of the row's --cache-types
entry (f16 against F16, q8 against q8_0; bench_gguf.run_llama_depth).
A --dtypes entry with an underscore (Q8_0, Q4_K_M) is a GGUF file type: pert and llama.cpp both run
tools/measure/bench_gguf.py's file of that type (pert with --dtype auto, as the file holds it).
Mixture-of-experts shapes (MOE_SHAPES: mixtral-1.3b, Mixtral's layout with 32 experts of which 4 run
a token) are GGUF files only: a random-weight checkpoint made with tools/reference/moe.py's
make_moe_model (F16, the Llama-2 32k tokenizer), written F16 by tools/convert/to_gguf.py as llama.cpp's
converter writes Mixtral (arch llama, experts stacked), and quantized to each other --dtypes entry by
llama.cpp's own llama-quantize (--llama-quantize; default: beside --llama-bench), all under
$PERT_BENCH_CACHE (default ../bench-cache beside the repository; mixtral-1.3b's take 7 GB). Their MB/token
(pert bench --roof) counts the router and the routed experts' bytes, not all 32 experts'.
--prefetch nta,t0 runs every precision under each PERT_PREFETCH hint (decoding's F32 prefetch).
--configs none,configs/layers/gemma3-5to1.json runs every precision under each pert --config (none:
the checkpoint as it is), labelled "F32 gemma3-5to1": a layout A/B'd on the same weights; the
table then gives each test's KV cache (MiB, pert bench's kv_cache_bytes at the test's end).
The table's first line names the CPU, the instructions that choose pert's kernel paths and the
paths that ran (pert bench's report).
Prints a Markdown table (date, machine, threads) and writes every sample as JSON;
--table FILE.json prints that table again from such a file, measuring nothing (the results
pages' tables are made so: tools/lib/results_tables.py).
"""
import argparse
import datetime
import json
import os
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tools/: import by folder (tools/README.md)
from lib import ROOT  # noqa: E402
from measure import bench_gguf  # cpu_name, source, gguf_file, run_llama_samples
from measure import perplexity_rate  # sgemm_gflops, matrix_flops_per_token
from lib.results_tables import add_table_flag, print_and_save, print_table  # noqa: E402  (--table FILE.json)

PYTHON = "/usr/bin/python3"
GGUF_TYPE = {"F32": "F32", "BF16": "BF16", "Q8": "Q8_0"}  # --llama-bench: each precision's GGUF


def is_gguf(dtype):
    """A --dtypes entry naming a GGUF file type (Q8_0, Q4_K_M, ...): pert and llama.cpp run that file."""
    return "_" in dtype


def checkpoint(shape, dtype):
    if shape == "tinyllama":  # 1.1B, GQA: one F32 checkpoint (numpy-drawn); BF16 is --dtype bf16 at load
        return bench_gguf.source(shape)
    path = os.path.join(ROOT, "build", "models", f"bench-{shape}-{dtype.lower()}")
    if not os.path.exists(os.path.join(path, "model.safetensors")):
        subprocess.run([PYTHON, os.path.join(ROOT, "tools", "measure", "bench_model.py"), shape, path, "--dtype", dtype],
                       check=True)
    return path


cpu_name = bench_gguf.cpu_name  # (tools/measure/bench_extend.py reads it here)

# Mixtures of experts: make_moe_model's options and extra config.json keys. mixtral-1.3b: 1.30B weights, of
# which a token reads 0.22B (attention, the router, 4 experts, the output matrix). GBs each: outside the repository.
MOE_SHAPES = {
    "mixtral-1.3b": dict(arch="mixtral", hidden=1024, layers=12, heads=16, kv_heads=4, expert_ffn=1024, vocab=32000,
                         trained=4096, extra_config={"num_local_experts": 32, "num_experts_per_tok": 4}),
}
MOE_DIR = os.environ.get("PERT_BENCH_CACHE", os.path.join(os.path.dirname(ROOT), "bench-cache"))


def moe_gguf(shape, type_name, quantize):
    """The GGUF file of a MOE_SHAPES shape in type_name, made on first use (the module's docstring):
    F16 by tools/convert/to_gguf.py, any other type by llama.cpp's llama-quantize (the path `quantize`)."""
    path = os.path.join(MOE_DIR, f"{shape}-{type_name.lower()}.gguf")
    if os.path.exists(path):
        return path
    if type_name != "F16":
        if not quantize or not os.path.isfile(quantize):
            sys.exit(f"bench.py: error: {path} is made by llama.cpp's llama-quantize: pass --llama-quantize PATH "
                     f"(or --llama-bench beside it); {quantize or 'none given'} is not a file")
        f16 = moe_gguf(shape, "F16", quantize)
        print(f"quantizing {f16} -> {path}", file=sys.stderr)
        done = subprocess.run([quantize, f16, path + ".tmp", type_name, str(os.cpu_count())], capture_output=True, text=True)
        if done.returncode != 0:  # (its log of every tensor only when it fails)
            sys.exit(f"bench.py: error: {quantize} {type_name} failed:\n{done.stdout}{done.stderr}")
        os.replace(path + ".tmp", path)
        return path
    src = os.path.join(MOE_DIR, f"{shape}-src")
    if not os.path.exists(os.path.join(src, "model.safetensors")):
        from reference import moe  # (imports torch: only when a model is made)
        print(f"making {src}", file=sys.stderr)
        options = dict(MOE_SHAPES[shape])
        moe.make_moe_model(src, options.pop("arch"), seed=0, dtype="F16", ffn=options["expert_ffn"], **options)
    tok = os.path.join(src, "tokenizer.json")
    if not os.path.exists(tok):
        subprocess.run([PYTHON, os.path.join(ROOT, "tools", "convert", "tokenizer_json.py"), "--spm", bench_gguf.SPM, tok],
                       check=True)
    print(f"converting {src} -> {path}", file=sys.stderr)
    subprocess.run([PYTHON, os.path.join(ROOT, "tools", "convert", "to_gguf.py"), src, path + ".tmp", "--type", "F16"],
                   check=True)
    os.replace(path + ".tmp", path)
    return path


def table(report):
    """The Markdown table of a report as main() writes it: the median (min–max) of every run of
    each test; where several precisions ran, against BF16's of the same shape, cache and test,
    and where several caches ran, against the f32 cache's; then each F32 prompt test's matrix
    products against sgemm, where --sgemm timed it."""
    results = report["results"]
    median = {(r["shape"], r["precision"], r["cache_type"], r["test"]): r["median"] for r in results}
    layouts = list(dict.fromkeys(r["layout"] for r in results if "layout" in r))  # --configs, in the order given
    ratios = [(name, base) for name, base, kinds in (("vs BF16", lambda r: (r["shape"], "BF16", r["cache_type"], r["test"]),
                                                      {r["precision"] for r in results} if not layouts else ()),
                                                     (f"vs {layouts[0] if layouts else ''}",
                                                      lambda r: (r["shape"], r["precision"][:-len(r["layout"])] + layouts[0],
                                                                 r["cache_type"], r["test"]), layouts),
                                                     ("vs f32 cache", lambda r: (r["shape"], r["precision"], "f32", r["test"]),
                                                      {r["cache_type"] for r in results} if any(
                                                          r["cache_type"] == "f32" for r in results) else ()))
              if len(kinds) > 1]
    cpu = report["cpu"] + (f" ({report['cpu_features']})" if "cpu_features" in report else "")
    kernels = (f", kernels {', '.join(f'{k} {v}' for k, v in report['kernels'].items())}" if "kernels" in report else "")
    kernels += f", F32 decode prefetch {report['f32_prefetch']}" if "f32_prefetch" in report else ""
    lines = [f"pert bench, {report['date']}, {cpu}, {report.get('cores', '?')} cores{kernels}, OpenBLAS core "
             f"{report['blas_core']}, -t {report['threads']}; median (min–max) of {report['rounds']} rounds × "
             f"{report['repetitions']} runs", "",
             "| shape | precision | kv cache | test | t/s |" + "".join(f" {n} |" for n, _ in ratios),
             "|---|---|---|---|---:|" + "---:|" * len(ratios)]
    # llama.cpp's rows: at a depth, the same KV cache type's; at depth 0 (llama-bench, its F16 cache) any row's
    llama = {(r["shape"], r["precision"], r.get("cache_type"), r["test"]): r for r in report.get("llama_cpp", [])}
    if llama:
        lines[0] += f"; llama.cpp: {report['llama_cpp_build']} on GGUF files of the same weights"
        lines[2] += " llama.cpp t/s | pert ÷ llama.cpp |"
        lines[3] += "---:|---:|"
    roof = report.get("roof_bytes_per_second")  # --roof: one probe a run
    if roof:
        lines[0] += (f"; memory roof (pert bench --roof's read probe, a run each) median {statistics.median(roof) / 1e9:.1f} "
                     f"GB/s ({min(roof) / 1e9:.1f}–{max(roof) / 1e9:.1f})")
        lines[2] += " MB/token | GB/s | % of roof |"
        lines[3] += "---:|---:|---:|"
    compute = any("matrix_macs_per_token" in r for r in results)  # --roof: prompt rows against the compute probes
    if compute:
        lines[0] += "; compute roof (pert bench --roof's probes of the matrices' path and F32's for attention, medians)"
        lines[2] += " GMAC/s | % of compute |"
        lines[3] += "---:|---:|"
    kv = any("kv_cache_bytes" in r for r in results)  # --configs: layouts beside each other
    if kv:
        lines[2] += " KV cache MiB |"
        lines[3] += "---:|"
    for r in results:
        cells = [f"{r['median'] / median[base(r)]:.2f}×" if base(r) in median else "" for _, base in ratios]
        if llama:
            other = llama.get((r["shape"], r["precision"], r["cache_type"], r["test"]),
                              llama.get((r["shape"], r["precision"], None, r["test"])))
            cells += ([f"{other['median']:.1f} ({other['min']:.0f}–{other['max']:.0f})", f"{r['median'] / other['median']:.2f}×"]
                      if other else ["", ""])
        if roof:
            per_token = r.get("bytes_per_token")
            cells += ([f"{per_token / 1e6:.0f}", f"{per_token * r['median'] / 1e9:.1f}",
                       f"{100 * per_token * r['median'] / statistics.median(roof):.0f}%"] if per_token else ["", "", ""])
        if compute:  # the peaks' time for a token's MACs (matrices at theirs, attention at F32's) over the time taken
            m, att = r.get("matrix_macs_per_token", 0), r.get("attention_macs_per_token", 0)
            pm, pa = r.get("compute_peaks_macs_per_second", (0, 0))
            cells += [f"{(m + att) * r['median'] / 1e9:.1f}" if m else "",
                      f"{100 * r['median'] * (m / pm + att / pa):.0f}%" if m and pm else ""]
        if kv:
            cells.append(f"{r['kv_cache_bytes'] / 2**20:.1f}" if "kv_cache_bytes" in r else "")
        lines.append(f"| {r['shape']} | {r['precision']} | {r['cache_type']} | {r['test']} | "
                     f"{r['median']:.1f} ({r['min']:.0f}–{r['max']:.0f}) |" + "".join(f" {c} |" for c in cells))
    sgemm = report.get("sgemm_gflops") or []
    for f in report.get("f32_prompt_of_sgemm", []):
        flops = report["matrix_flops_per_token"][f["shape"]]
        med = next(r["median"] for r in results if (r["shape"], r["precision"], r["cache_type"], r["test"]) ==
                   (f["shape"], "F32", f["cache_type"], f["test"])) * flops / 1e9
        v = f["per_round"]
        lines += ["", f"{f['shape']} F32 {f['test']}: matrix products {med:.0f} GFLOP/s ({flops / 1e6:.0f} MFLOP a token), "
                  f"{100 * statistics.median(v):.0f}% ({100 * min(v):.0f}–{100 * max(v):.0f}%) of sgemm "
                  f"(2048³, median {statistics.median(sgemm):.0f} GFLOP/s, {min(sgemm):.0f}–{max(sgemm):.0f})"]
    return "\n".join(lines)


def add_round_flags(ap, each):
    """--table, and --rounds, -r, -t as the benchmarks that alternate `pert bench` runs take them."""
    add_table_flag(ap)
    ap.add_argument("--rounds", type=int, default=5, help=f"rounds, each running {each} once (default %(default)s)")
    ap.add_argument("-r", "--repetitions", type=int, default=3, help="pert bench -r: repetitions per run (default %(default)s)")
    ap.add_argument("-t", "--threads", type=int, default=2, help="pert bench -t (default %(default)s)")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_round_flags(ap, "every checkpoint")
    ap.add_argument("--shapes", default="stories15M,stories110M",
                    help="comma-separated tools/measure/bench_model.py shapes, or tinyllama (TinyLlama-1.1B's GQA shape, "
                         "tools/measure/bench_gguf.py's checkpoint), or a MoE shape (mixtral-1.3b: GGUF types only) "
                         "(default %(default)s)")
    ap.add_argument("--dtypes", default="F32,BF16", help="comma-separated precisions: F32, BF16, Q8, or GGUF file types "
                                                        "(Q8_0, Q4_K_M, ...: tools/convert/to_gguf.py's file of the shape) (default %(default)s)")
    ap.add_argument("--cache-types", default="f32", help="comma-separated pert bench --cache-type values (default %(default)s)")
    ap.add_argument("-p", default="512", help="pert bench -p: prompt lengths, comma-separated; 0 skips (default %(default)s)")
    ap.add_argument("-n", default="128", help="pert bench -n: generated tokens, comma-separated; 0 skips (default %(default)s)")
    ap.add_argument("-d", default="0", help="pert bench -d: cached tokens before each test, comma-separated, e.g. 0,4096 (default %(default)s)")
    ap.add_argument("--sgemm", action="store_true", help="time sgemm every round; F32 prompt tests as a fraction of it")
    ap.add_argument("--roof", action="store_true",
                    help="pert bench --roof: each tg row's bytes a token, GB/s and %% of the memory's read probe (median of the runs')")
    ap.add_argument("--pert", default=os.path.join(ROOT, "build", "pert"), help="the pert binary (default build/pert)")
    ap.add_argument("--prefetch", help="comma-separated PERT_PREFETCH hints (nta, t0, none, stream): every precision under each, "
                                       "labelled \"F32 prefetch t0\"")
    ap.add_argument("--configs", help="comma-separated pert --config files (none: no file): every precision under each, "
                                      "labelled by the file's name")
    ap.add_argument("--llama-bench", help="llama.cpp's llama-bench binary: run it beside pert on GGUF files of the same weights")
    ap.add_argument("--llama-quantize", help="llama.cpp's llama-quantize, which makes the MoE shapes' quantized GGUF files "
                                             "(default: beside --llama-bench)")
    ap.add_argument("--llama-batched-bench", help="llama.cpp's llama-batched-bench, which runs the tests at a depth "
                                                  "(default: beside --llama-bench)")
    ap.add_argument("--llama-version", help="what to call that llama.cpp in the table (default: the commit its JSON names)")
    ap.add_argument("--out", default=os.path.join(ROOT, "build", "bench", "bench.json"), help="JSON file for every sample (default build/bench/bench.json)")
    a = ap.parse_args()
    if a.table:
        return print_table(a.table, table)
    hints = a.prefetch.split(",") if a.prefetch else [None]
    configs = [None if c == "none" else os.path.abspath(c) for c in a.configs.split(",")] if a.configs else [None]
    for c in configs:
        if c and not os.path.isfile(c):
            sys.exit(f"bench.py: error: --configs: {c}: no such file")

    def label(d, h, c):  # "F32", "F32 prefetch t0", "F32 gemma3-5to1"
        return " ".join([d] + ([f"prefetch {h}"] if h else []) +
                        ([os.path.splitext(os.path.basename(c))[0] if c else "none"] if a.configs else []))
    batched = a.llama_batched_bench or (os.path.join(os.path.dirname(a.llama_bench), "llama-batched-bench")
                                        if a.llama_bench else None)
    quantize = a.llama_quantize or (os.path.join(os.path.dirname(a.llama_bench), "llama-quantize") if a.llama_bench else None)

    def model_file(s, d):  # a MoE shape: its GGUF file of type d whatever d is
        if s in MOE_SHAPES:
            return moe_gguf(s, d, quantize)
        return bench_gguf.gguf_file(s, d) if is_gguf(d) else checkpoint(s, "BF16" if d == "BF16" else "F32")
    # (shape, label, precision, prefetch hint, cache, checkpoint, config)
    models = [(s, label(d, h, c), d, h, k, model_file(s, d), c)
              for s in a.shapes.split(",") for d in a.dtypes.split(",") for h in hints for c in configs
              for k in a.cache_types.split(",")]
    flops = {m[5]: perplexity_rate.matrix_flops_per_token(m[5], False) for m in models} if a.sgemm else {}
    samples = {}  # (shape, dtype, cache type, test) -> [t/s of every run]
    of_sgemm = {}  # (shape, cache type, test) -> [F32 prompt test's matrix GFLOP/s ÷ sgemm's, a round each]
    sgemm = []  # GFLOP/s, a round each
    roof = []  # --roof: read bytes/s, a run each
    bytes_per_token = {}  # --roof: (shape, dtype, cache type, tg test) -> bytes a token reads
    prompt_macs = {}  # --roof: (shape, dtype, cache type, pp test) -> (matrices', attention's) multiply-adds a token
    peaks = {}  # --roof: (shape, dtype, cache type) -> [(matrices' path, attention's) MAC/s peaks, a run each]
    kv_bytes = {}  # (shape, dtype, cache type, test) -> the KV cache's bytes at the test's end
    blas_core = "?"  # OpenBLAS's kernels, as pert reports them (OPENBLAS_CORETYPE picks them where set)
    machine = {}  # pert's report of the CPU and the kernel paths it ran
    llama = {}  # --llama-bench: (shape, dtype, cache type or None at depth 0, test) -> [t/s of every run]
    llama_build = "?"  # its commit and build number, as its output names them
    llama_files = ({(s, label): path if is_gguf(d) or s in MOE_SHAPES else bench_gguf.gguf_file(s, GGUF_TYPE[d])
                    for s, label, d, _, _, path, _ in models} if a.llama_bench else {})
    depth0 = any(int(d) == 0 for d in a.d.split(","))
    deep = any(int(d) > 0 for d in a.d.split(","))
    if a.llama_bench and deep and not os.path.isfile(batched):
        sys.exit(f"bench.py: error: tests at a depth run llama.cpp's llama-batched-bench: {batched} is not a file "
                 "(--llama-batched-bench PATH)")
    for r in range(a.rounds):
        if a.sgemm:
            sgemm.append(perplexity_rate.sgemm_gflops())
            print(f"round {r + 1}/{a.rounds}: sgemm {sgemm[-1]:.0f} GFLOP/s", file=sys.stderr)
        for shape, label, dtype, hint, cache, path, config in (models if r % 2 == 0 else models[::-1]):  # alternate the order too
            out = subprocess.run([a.pert, "bench", "-m", path, "-p", a.p, "-n", a.n, "-d", a.d, "-r", str(a.repetitions),
                                  "-t", str(a.threads), "--dtype", "auto" if is_gguf(dtype) or shape in MOE_SHAPES else dtype.lower(),
                                  "--cache-type", cache, "--json"] + (["--roof"] if a.roof else []) +
                                 (["--config", config] if config else []),
                                 check=True, capture_output=True, text=True,
                                 env={**os.environ, "PERT_PREFETCH": hint} if hint else None).stdout
            report = json.loads(out)
            blas_core = report.get("blas_core", blas_core)
            machine = {k: report[k] for k in ("cpu_features", "kernels", "f32_prefetch")  # --prefetch: the rows say
                       if k in report and not (a.prefetch and k == "f32_prefetch")}
            roof += [p["read_bytes_per_second"] for p in report.get("roof", [])]
            peaks.setdefault((shape, label, cache), []).extend(
                (p["compute"]["matrices"]["macs_per_second"], p["compute"]["attention"]["macs_per_second"])
                for p in report.get("roof", []) if "compute" in p)
            for res in report["results"]:
                samples.setdefault((shape, label, cache, res["test"]), []).extend(res["samples"])
                if "kv_cache_bytes" in res:
                    kv_bytes[(shape, label, cache, res["test"])] = res["kv_cache_bytes"]
                if "bytes_per_token" in res:
                    bytes_per_token[(shape, label, cache, res["test"])] = res["bytes_per_token"]
                if "matrix_macs_per_token" in res:
                    prompt_macs[(shape, label, cache, res["test"])] = (res["matrix_macs_per_token"], res["attention_macs_per_token"])
                if a.sgemm and dtype == "F32" and res["test"].startswith("pp"):
                    rate = statistics.median(res["samples"]) * flops[path] / 1e9
                    of_sgemm.setdefault((shape, cache, res["test"]), []).append(rate / sgemm[-1])
            if a.llama_bench and depth0 and cache == "f32":
                runs, llama_build = bench_gguf.run_llama_samples(a.llama_bench, llama_files[(shape, label)], a.p, a.n,
                                                                 a.repetitions, a.threads)
                for test, v in runs.items():
                    llama.setdefault((shape, label, None, test), []).extend(v)
            if a.llama_bench and deep:
                for n in a.n.split(","):
                    runs, llama_build = bench_gguf.run_llama_depth(batched, llama_files[(shape, label)], a.d, n,
                                                                   a.repetitions, a.threads, cache)
                    for test, v in runs.items():
                        llama.setdefault((shape, label, cache, test), []).extend(v)
            print(f"round {r + 1}/{a.rounds}: {shape} {label} cache {cache} done", file=sys.stderr)
    rows = [{"shape": shape, "precision": dtype, "cache_type": cache, "test": test, "median": statistics.median(v),
             "min": min(v), "max": max(v), "samples": v} for (shape, dtype, cache, test), v in samples.items()]
    for row in rows:
        if (row["shape"], row["precision"], row["cache_type"], row["test"]) in bytes_per_token:
            row["bytes_per_token"] = bytes_per_token[(row["shape"], row["precision"], row["cache_type"], row["test"])]
        if (row["shape"], row["precision"], row["cache_type"], row["test"]) in prompt_macs:
            row["matrix_macs_per_token"], row["attention_macs_per_token"] = prompt_macs[
                (row["shape"], row["precision"], row["cache_type"], row["test"])]
            runs = peaks.get((row["shape"], row["precision"], row["cache_type"]), [])
            if runs and all(m > 0 and a > 0 for m, a in runs):  # (a plain path has no probe)
                row["compute_peaks_macs_per_second"] = [statistics.median(m for m, _ in runs), statistics.median(a for _, a in runs)]
        if a.configs:
            row["layout"] = row["precision"].rsplit(" ", 1)[1]
        if a.configs and (row["shape"], row["precision"], row["cache_type"], row["test"]) in kv_bytes:
            row["kv_cache_bytes"] = kv_bytes[(row["shape"], row["precision"], row["cache_type"], row["test"])]
    if llama:
        machine["llama_cpp"] = [{"shape": shape, "precision": dtype, **({"cache_type": cache} if cache else {}), "test": test,
                                 "median": statistics.median(v), "min": min(v), "max": max(v), "samples": v}
                                for (shape, dtype, cache, test), v in llama.items()]
        machine["llama_cpp_build"] = a.llama_version or llama_build
    report = {"date": datetime.date.today().isoformat(), "cpu": cpu_name(), "cores": os.cpu_count(), **machine,
              "blas_core": blas_core, "threads": a.threads, "rounds": a.rounds, "repetitions": a.repetitions,
              "results": rows, "sgemm_gflops": sgemm, **({"roof_bytes_per_second": roof} if roof else {}),
              "matrix_flops_per_token": {shape: perplexity_rate.matrix_flops_per_token(checkpoint(shape, "F32"), False)
                                         for shape, _, _ in of_sgemm},
              "f32_prompt_of_sgemm": [{"shape": k[0], "cache_type": k[1], "test": k[2], "per_round": v}
                                      for k, v in of_sgemm.items()]}
    print_and_save(report, table, a.out)


if __name__ == "__main__":
    main()
