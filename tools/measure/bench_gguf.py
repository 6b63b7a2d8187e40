#!/usr/bin/env python3
"""pert's speed on GGUF files (llama.cpp's model files) of GGML's block types, beside llama.cpp's
llama-bench on the very same files, and each type's decoding against the memory roof.

    /usr/bin/python3 tools/measure/bench_gguf.py [--shapes stories110M,tinyllama] [--types Q4_K_M,Q5_K_M,Q6_K,Q8_0,Q4_0,F16]
                                         [--rounds 3] [-r 3] [-t 2] [-p 128] [-n 16] [--pert build/pert]
                                         [--llama-bench PATH] [--json-out FILE] [--make-only]

Files, made once under build/models/bench-gguf/ and reused:
  - random-weight checkpoints (F32 safetensors) of two shapes: stories110M (tools/measure/bench_model.py's
    shape: dim 768, 12 layers, 12 heads, ffn 2048, vocab 32000, tied) and TinyLlama-1.1B's
    (dim 2048, 22 layers, 32 heads, 4 kv heads, ffn 5632, vocab 32000, untied output, made here
    with tools/reference/reference.py's recipe, in F32 to keep 1.1B weights within memory), each with the
    Llama-2 32k tokenizer (../shared) as tokenizer.json;
  - each converted by tools/convert/to_gguf.py into every --types entry (F16 only for stories110M unless
    named with --f16-all): SHAPE-TYPE.gguf.

Each round runs, per file, `pert bench -m FILE -p P -n N -r R -t T -o json` and (with
--llama-bench) `llama-bench -m FILE -p P -n N -r R -t T -o json`, alternating the two and the
order of the files from round to round; it starts with a read-bandwidth probe: a small C
program (compiled once with gcc -O3 -march=native -fopenmp) that sums a 1 GiB buffer of uint64
with T threads, the best of 5 passes. numpy's sum runs on one thread, so it cannot reach what
two cores read together; the probe reads the way a decode step does (every thread its slice,
streamed once).

Per file: bytes a decode step reads = every matrix in the GGUF's tensor table (tools/convert/gguf.py),
the output matrix included (token_embd when tied, as it is then the classifier; when untied the
embedding is one row a token and is not counted); % of roof = bytes × tg t/s ÷ probe bytes/s.
Progress on stderr; a Markdown table on stdout; --json-out FILE: every sample (tools/lib/outputs.py).
"""
import argparse
import datetime
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tools/: import by folder (tools/README.md)
from lib import ROOT  # noqa: E402
from convert import gguf  # noqa: E402
from convert import ggml_quants  # noqa: E402
from lib import safetensors_io  # noqa: E402
from lib.outputs import replaced  # noqa: E402

PYTHON = "/usr/bin/python3"
DIR = os.path.join(ROOT, "build", "models", "bench-gguf")
SPM = os.path.join(ROOT, "..", "shared", "data", "tokenizers", "llama2-32k", "tokenizer.model")
# TinyLlama-1.1B (TinyLlama/TinyLlama-1.1B-Chat-v1.0's config.json): untied, RoPE θ 10000, eps 1e-5
TINYLLAMA = dict(hidden=2048, ffn=5632, layers=22, heads=32, kv_heads=4, vocab=32000, trained=2048)
SHAPES = ("stories110M", "tinyllama")

PROBE_C = r"""
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
int main(int argc, char** argv) {
  size_t bytes = (size_t)1 << 30, n = bytes / 8;
  int threads = argc > 1 ? atoi(argv[1]) : 2, passes = argc > 2 ? atoi(argv[2]) : 5;
  omp_set_num_threads(threads);
  uint64_t* a = aligned_alloc(64, bytes);
  #pragma omp parallel for schedule(static)
  for (size_t i = 0; i < n; ++i) a[i] = i;  /* each thread touches its own slice first */
  double best = 0; uint64_t sink = 0;
  for (int p = 0; p < passes; ++p) {
    double t0 = omp_get_wtime();
    uint64_t s = 0;
    #pragma omp parallel for schedule(static) reduction(+ : s)
    for (size_t i = 0; i < n; ++i) s += a[i];
    double gbs = bytes / (omp_get_wtime() - t0) / 1e9;
    sink += s;
    if (gbs > best) best = gbs;
  }
  printf("%.3f %llu\n", best, (unsigned long long)(sink & 1));
  return 0;
}
"""


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def cpu_name():
    for line in open("/proc/cpuinfo"):
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or "?"


def tokenizer():
    path = os.path.join(DIR, "tokenizer-llama2-32k.json")
    if not os.path.exists(path):
        subprocess.run([PYTHON, os.path.join(ROOT, "tools", "convert", "tokenizer_json.py"), "--spm", SPM, path], check=True)
    return path


def make_tinyllama(out_dir, seed=0):
    """tools/reference/reference.py's make_model recipe (the same stds), drawn in F32 with numpy: 1.1B weights."""
    s = TINYLLAMA
    rng = np.random.default_rng(seed)
    h, hd, f = s["hidden"], s["hidden"] // s["heads"], s["ffn"]

    def randn(*shape, std=1.0):
        a = rng.standard_normal(shape, dtype=np.float32)
        a *= std
        return a

    t = {"model.embed_tokens.weight": randn(s["vocab"], h), "model.norm.weight": 1 + randn(h, std=0.1),
         "lm_head.weight": randn(s["vocab"], h, std=h ** -0.5)}
    for i in range(s["layers"]):
        p = f"model.layers.{i}."
        t[p + "input_layernorm.weight"] = 1 + randn(h, std=0.1)
        t[p + "post_attention_layernorm.weight"] = 1 + randn(h, std=0.1)
        t[p + "self_attn.q_proj.weight"] = randn(s["heads"] * hd, h, std=h ** -0.5 * 2)
        t[p + "self_attn.k_proj.weight"] = randn(s["kv_heads"] * hd, h, std=h ** -0.5 * 2)
        t[p + "self_attn.v_proj.weight"] = randn(s["kv_heads"] * hd, h, std=h ** -0.5)
        t[p + "self_attn.o_proj.weight"] = randn(h, s["heads"] * hd, std=(s["heads"] * hd) ** -0.5)
        t[p + "mlp.gate_proj.weight"] = randn(f, h, std=h ** -0.5)
        t[p + "mlp.up_proj.weight"] = randn(f, h, std=h ** -0.5)
        t[p + "mlp.down_proj.weight"] = randn(h, f, std=f ** -0.5)
    config = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": s["vocab"],
              "hidden_size": h, "intermediate_size": f, "num_hidden_layers": s["layers"],
              "num_attention_heads": s["heads"], "num_key_value_heads": s["kv_heads"],
              "max_position_embeddings": s["trained"], "rms_norm_eps": 1e-5, "tie_word_embeddings": False,
              "bos_token_id": 1, "eos_token_id": 2, "rope_theta": 10000.0}
    os.makedirs(out_dir, exist_ok=True)
    safetensors_io.save(os.path.join(out_dir, "model.safetensors"), t, "F32")
    with replaced(os.path.join(out_dir, "config.json")) as fh:
        json.dump(config, fh, indent=2)


def source(shape):
    """The F32 safetensors directory of a shape, with the Llama-2 tokenizer.json, made on first use."""
    path = os.path.join(DIR, f"{shape}-f32")
    if not os.path.exists(os.path.join(path, "model.safetensors")):
        log(f"making {path}")
        if shape == "tinyllama":
            make_tinyllama(path)
        else:
            subprocess.run([PYTHON, os.path.join(ROOT, "tools", "measure", "bench_model.py"), shape, path], check=True)
    if not os.path.exists(os.path.join(path, "tokenizer.json")):
        shutil.copyfile(tokenizer(), os.path.join(path, "tokenizer.json"))
    return path


def gguf_file(shape, type_name):
    path = os.path.join(DIR, f"{shape}-{type_name.lower()}.gguf")
    if not os.path.exists(path):
        src = source(shape)
        log(f"converting {src} -> {path}")
        subprocess.run([PYTHON, os.path.join(ROOT, "tools", "convert", "to_gguf.py"), src, path, "--type", type_name], check=True)
    return path


def decode_bytes(path):
    """(bytes of every matrix a decode step reads, {type: bytes}) from the GGUF's tensor table."""
    _, _, tensors = gguf.read_gguf(path)
    names = {t["name"] for t in tensors}
    total, by_type = 0, {}
    for t in tensors:
        if len(t["shape"]) < 2:
            continue  # norms: vectors
        if t["name"] == "token_embd.weight" and "output.weight" in names:
            continue  # untied: the embedding is one row a token
        n = ggml_quants.nbytes(t["type"], int(np.prod(t["shape"], dtype=np.int64)))
        total += n
        by_type[t["type"]] = by_type.get(t["type"], 0) + n
    return total, by_type


def probe_binary():
    exe = os.path.join(DIR, "read_bw")
    if not os.path.exists(exe):
        os.makedirs(DIR, exist_ok=True)
        with tempfile.TemporaryDirectory() as tmp:
            src = os.path.join(tmp, "read_bw.c")
            with open(src, "w") as f:
                f.write(PROBE_C)
            subprocess.run(["gcc", "-O3", "-march=native", "-fopenmp", "-std=c11", src, "-o", exe + ".tmp"], check=True)
        os.replace(exe + ".tmp", exe)
    return exe


def probe(threads):
    out = subprocess.run([probe_binary(), str(threads), "5"], check=True, capture_output=True, text=True).stdout
    return float(out.split()[0]) * 1e9


def run_pert(a, path):
    cmd = [a.pert, "bench", "-m", path, "-p", a.p, "-n", a.n, "-r", str(a.repetitions), "-t", str(a.threads),
           "-o", "json", "-q"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        return None, f"exit {r.returncode}: {(r.stderr.strip().splitlines() or ['(no message)'])[-1]}"
    rep = json.loads(r.stdout)
    return {res["test"]: res["samples"] for res in rep["results"]}, None


def run_llama_samples(binary, path, p, n, repetitions, threads):
    """llama-bench on one file: ({test: t/s samples}, its build as "commit (build number)"); raises
    RuntimeError with its last line of stderr when it fails."""
    cmd = [binary, "-m", path, "-p", str(p), "-n", str(n), "-r", str(repetitions), "-t", str(threads), "-o", "json"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"exit {r.returncode}: {(r.stderr.strip().splitlines() or ['(no message)'])[-1]}")
    out, build = {}, "?"
    for rec in json.loads(r.stdout):
        test = f"pp{rec['n_prompt']}" if rec["n_prompt"] else f"tg{rec['n_gen']}"
        out[test] = rec["samples_ts"]
        build = f"{rec.get('build_commit', '?')} (build {rec.get('build_number', '?')})"
    return out, build


# pert's --cache-type and llama.cpp's -ctk/-ctv for the same cache: F16 for F16, Q8 (blocks of 32
# int8 and an F16 scale) for q8_0, which holds the same numbers.
LLAMA_CACHE_TYPE = {"f32": "f32", "f16": "f16", "bf16": "bf16", "q8": "q8_0"}


def run_llama_depth(binary, path, depths, n, repetitions, threads, cache):
    """llama.cpp decoding n tokens after `depth` cached ones, for each depth > 0 of `depths`
    ("0,8192"), with pert's cache type `cache` as llama.cpp names it: llama-batched-bench (llama-bench
    b4748 has no depth option), one sequence, each repetition its own prefill of the depth; flash
    attention only where llama.cpp needs it (a quantized V cache), as it decodes faster without it
    on the CPUs measured (Zen 5, F16 cache, 8192 deep: 36.5 t/s without, 31.1 with). Returns
    ({"tgN @ dD": t/s samples}, build), pert bench's test names; raises RuntimeError as
    run_llama_samples."""
    out, build = {}, "?"
    for depth in (int(d) for d in str(depths).split(",") if int(d) > 0):
        kind = LLAMA_CACHE_TYPE[cache]
        cmd = [binary, "-m", path, "-c", str(depth + int(n)), "-b", "2048", "-ub", "512", "-npl", "1",
               "-npp", str(depth), "-ntg", ",".join([str(n)] * repetitions), "-t", str(threads),
               "-ctk", kind, "-ctv", kind, "--output-format", "jsonl"] + (["-fa"] if kind == "q8_0" else [])
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError(f"exit {r.returncode}: {(r.stderr.strip().splitlines() or ['(no message)'])[-1]}")
        recs = [json.loads(line) for line in r.stdout.splitlines() if line.startswith("{")]
        if not recs:
            raise RuntimeError(f"{binary}: no results in its output")
        out[f"tg{n} @ d{depth}"] = [rec["speed_tg"] for rec in recs]
        for line in r.stderr.splitlines():  # "build: 4748 (d07c6213) with ..."
            if line.startswith("build: "):
                number, _, rest = line[len("build: "):].partition(" (")
                build = f"{rest.partition(')')[0]} (build {number})"
    return out, build


def run_llama(a, path):
    try:
        return run_llama_samples(a.llama_bench, path, a.p, a.n, a.repetitions, a.threads)[0], None
    except RuntimeError as e:
        return None, str(e)


def stats(v):
    return {"median": statistics.median(v), "min": min(v), "max": max(v)} if v else None


def fmt(s):
    if not s:
        return "—"
    m = s["median"]
    p = 1 if m < 100 else 0
    return f"{m:.{p}f} ({s['min']:.{p}f}–{s['max']:.{p}f})"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shapes", default=",".join(SHAPES), help="comma-separated: stories110M, tinyllama (default %(default)s)")
    ap.add_argument("--types", default="Q4_K_M,Q5_K_M,Q6_K,Q8_0,Q4_0,F16",
                    help="tools/convert/to_gguf.py --type values (default %(default)s; F16 on stories110M only unless --f16-all)")
    ap.add_argument("--f16-all", action="store_true", help="F16 files for every shape")
    ap.add_argument("--rounds", type=int, default=3, help="rounds (default %(default)s)")
    ap.add_argument("-r", "--repetitions", type=int, default=3, help="-r of both benches (default %(default)s)")
    ap.add_argument("-t", "--threads", type=int, default=2, help="-t of both benches and the probe's threads (default %(default)s)")
    ap.add_argument("-p", default="128", help="prompt length (default %(default)s)")
    ap.add_argument("-n", default="16", help="generated tokens (default %(default)s)")
    ap.add_argument("--pert", default=os.path.join(ROOT, "build", "pert"), help="the pert binary (default build/pert)")
    ap.add_argument("--llama-bench", help="llama.cpp's llama-bench binary: also run it on every file")
    ap.add_argument("--json-out", help="JSON file for every sample")
    ap.add_argument("--make-only", action="store_true", help="make the files and stop")
    a = ap.parse_args()

    files = []  # (shape, type, path)
    for shape in a.shapes.split(","):
        if shape not in SHAPES:
            sys.exit(f"bench_gguf.py: --shapes: unknown shape {shape!r} (known: {', '.join(SHAPES)})")
        for t in a.types.split(","):
            if t == "F16" and shape != "stories110M" and not a.f16_all:
                continue
            files.append((shape, t, gguf_file(shape, t)))
    if a.make_only:
        return
    size = {path: decode_bytes(path) for _, _, path in files}
    tools = [("pert", run_pert)] + ([("llama.cpp", run_llama)] if a.llama_bench else [])
    samples, errors, bw = {}, {}, []  # (shape, type, tool, test) -> [t/s]; (shape, type, tool) -> message
    for r in range(a.rounds):
        bw.append(probe(a.threads))
        log(f"round {r + 1}/{a.rounds}: read bandwidth {bw[-1] / 1e9:.1f} GB/s, load {os.getloadavg()[0]:.2f}")
        order = files if r % 2 == 0 else files[::-1]
        for shape, t, path in order:
            for name, fn in (tools if r % 2 == 0 else tools[::-1]):
                if (shape, t, name) in errors:
                    continue
                res, err = fn(a, path)
                if err:
                    errors[(shape, t, name)] = err
                    log(f"round {r + 1}/{a.rounds}: {shape} {t} {name}: {err}")
                    continue
                for test, v in res.items():
                    samples.setdefault((shape, t, name, test), []).extend(v)
                log(f"round {r + 1}/{a.rounds}: {shape} {t} {name}: " +
                    ", ".join(f"{k} {statistics.median(v):.1f}" for k, v in res.items()))

    date = datetime.datetime.now().strftime("%Y-%m-%d %H:%M")
    bws = stats(bw)
    print(f"GGUF speed, {date}, {cpu_name()}, {os.cpu_count()} cores, -t {a.threads}, pp{a.p} / tg{a.n}; "
          f"median (min–max) t/s of {a.rounds} alternating rounds × {a.repetitions} runs; read bandwidth "
          f"{bws['median'] / 1e9:.1f} GB/s ({bws['min'] / 1e9:.1f}–{bws['max'] / 1e9:.1f}, {a.threads} threads, 1 GiB)\n")
    names = [n for n, _ in tools]
    head = "| shape | type | decode MB/token | test | " + " | ".join(f"{n} t/s" for n in names)
    head += " | pert ÷ llama.cpp |" if a.llama_bench else " |"
    print(head)
    print("|---|---|---:|---|" + "---:|" * len(names) + ("---:|" if a.llama_bench else ""))
    rows = []
    for shape, t, path in files:
        nbytes = size[path][0]
        tests = sorted({k[3] for k in samples if k[0] == shape and k[1] == t}, key=lambda s: (s[:2] != "pp", s))
        for test in tests or ["—"]:
            st = {n: stats(samples.get((shape, t, n, test), [])) for n in names}
            cells = [fmt(st[n]) if (shape, t, n) not in errors else "failed" for n in names]
            ratio = ""
            if a.llama_bench:
                ratio = (f"{st['pert']['median'] / st['llama.cpp']['median']:.2f}×"
                         if st["pert"] and st["llama.cpp"] else "—")
            line = f"| {shape} | {t} | {nbytes / 1e6:.0f} | {test} | " + " | ".join(cells)
            print(line + (f" | {ratio} |" if a.llama_bench else " |"))
            rows.append({"shape": shape, "type": t, "file": path, "decode_bytes": nbytes, "test": test,
                         **{n: st[n] for n in names},
                         "samples": {n: samples.get((shape, t, n, test), []) for n in names}})
    # the memory roof: decoding's weight bytes × t/s against the probe
    print(f"\nDecode against the memory roof ({bws['median'] / 1e9:.1f} GB/s read): weight bytes a token × tg t/s ÷ bandwidth\n")
    print("| shape | type | decode MB/token | bytes/weight | " + " | ".join(f"{n} % of roof" for n in names) + " |")
    print("|---|---|---:|---:|" + "---:|" * len(names))
    tg = f"tg{a.n}"
    roof = []
    for shape, t, path in files:
        nbytes, by_type = size[path]
        cells = []
        for n in names:
            s = stats(samples.get((shape, t, n, tg), []))
            cells.append(f"{100 * s['median'] * nbytes / bws['median']:.0f}%" if s else "—")
        nweights = sum(by_type[k] / ggml_quants.TYPES[k].block_bytes * ggml_quants.TYPES[k].block_size for k in by_type)
        print(f"| {shape} | {t} | {nbytes / 1e6:.0f} | {nbytes / nweights:.3f} | " + " | ".join(cells) + " |")
        roof.append({"shape": shape, "type": t, "decode_bytes": nbytes, "bytes_by_type": by_type,
                     "percent_of_roof": {n: (100 * statistics.median(samples[(shape, t, n, tg)]) * nbytes / bws["median"]
                                             if (shape, t, n, tg) in samples else None) for n in names}})
    for (shape, t, n), e in errors.items():
        print(f"\n{shape} {t}: {n} failed: {e}")
    if a.json_out:
        with replaced(a.json_out) as f:
            json.dump({"date": date, "cpu": cpu_name(), "threads": a.threads, "rounds": a.rounds,
                       "repetitions": a.repetitions, "p": a.p, "n": a.n, "pert": a.pert, "llama_bench": a.llama_bench,
                       "read_bandwidth_bytes_per_s": bw, "results": rows, "roof": roof,
                       "errors": [{"shape": k[0], "type": k[1], "tool": k[2], "error": v} for k, v in errors.items()]},
                      f, indent=2)


if __name__ == "__main__":
    main()
