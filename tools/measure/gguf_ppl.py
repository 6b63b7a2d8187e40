#!/usr/bin/env python3
"""What GGML's block types cost in perplexity: each type's GGUF file (tools/convert/to_gguf.py) against
the F32 file of the same model, in pert and, with --llama-perplexity, in llama.cpp on the very
same files and text; and pert's own quantization at load (`--dtype q4_k` on the safetensors
directory) beside them.

    /usr/bin/python3 tools/measure/gguf_ppl.py [--models stories260K,rope] [--types F32,F16,Q8_0,...]
                                       [--dtypes q8_0,q6_k,...] [--pert build/pert]
                                       [--llama-perplexity PATH] [-t 2] [--json-out FILE]

Models and text:
  stories260K   build/models/stories260K (tools/setup.sh), at 512 on the first 120 stories of
                ../shared/data/text/tinystories_val.txt (as tests/reference/dtype_test.py);
  NAME          models/NAME of pert's family (GGUF holds plain RoPE only: rope), at its trained
                length 128 on the held-out stories (tools/train/heldout.py, as tests/reference/dtype_test.py).
pert's PPL is `pert perplexity -m FILE -f TEXT -c CTX --split-docs --json` (the figure
tests/reference/dtype_test.py and the README give); `pert perplexity --mode llama` scores as llama-perplexity
does (chunks of CTX, BOS first, the second half of each scored), and that column stands beside
llama-perplexity's `Final estimate` (`-m FILE -f TEXT -c CTX`).

A matrix whose rows are not whole blocks (256 values for the K types, 32 for the others) falls
back as llama-quantize does (tools/convert/to_gguf.py): the "matrices" column lists the types each file
really holds. bits/weight: the file's tensor bytes × 8 ÷ its values (every tensor, as
llama-quantize reports it); for pert's --dtype rows, the type's nominal figure.
Progress on stderr, Markdown tables on stdout, --json-out FILE: everything (tools/lib/outputs.py).
"""
import argparse
import datetime
import json
import os
import re
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tools/: import by folder (tools/README.md)
from lib import ROOT  # noqa: E402
from convert import gguf  # noqa: E402
from convert import ggml_quants  # noqa: E402
from lib.outputs import replaced  # noqa: E402

PYTHON = "/usr/bin/python3"
OUT_DIR = os.path.join(ROOT, "build", "gguf-ppl")
VAL = os.path.join(ROOT, "..", "shared", "data", "text", "tinystories_val.txt")
HELDOUT = os.path.join(ROOT, "build", "data", "tinystories_heldout.txt")
DEFAULT_TYPES = "F32,F16,BF16,Q8_0,Q6_K,Q5_K_M,Q5_1,Q5_0,Q4_K_M,Q4_1,Q4_0"
DEFAULT_DTYPES = "q8_0,q6_k,q5_k,q5_1,q5_0,q4_k,q4_1,q4_0"


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def model_and_text(name):
    """(model dir, text file, context) for a --models entry."""
    if name == "stories260K":
        text = os.path.join(OUT_DIR, "tinystories_val_120.txt")
        if not os.path.exists(text):
            with open(VAL, encoding="utf-8") as f:
                stories = f.read().split("\n\n")[:120]
            os.makedirs(OUT_DIR, exist_ok=True)
            with replaced(text) as f:
                f.write("\n\n".join(stories))
        return os.path.join(ROOT, "build", "models", "stories260K"), text, 512
    if not os.path.exists(HELDOUT):
        subprocess.run([PYTHON, os.path.join(ROOT, "tools", "train", "heldout.py"), HELDOUT], check=True)
    d = os.path.join(ROOT, "models", name)
    with open(os.path.join(d, "config.json")) as f:
        config = json.load(f)
    return d, HELDOUT, config.get("max_position_embeddings", 128)


def k_quant_rows(model_dir):
    """Whether every matrix's rows are whole 256-value blocks (the K types apply without fallback)."""
    with open(os.path.join(model_dir, "config.json")) as f:
        c = json.load(f)
    h, ffn = c["hidden_size"], c["intermediate_size"]
    hd = c.get("head_dim") or h // c["num_attention_heads"]
    return all(n % 256 == 0 for n in (h, ffn, hd * c["num_attention_heads"]))


def gguf_file(name, model_dir, type_name):
    path = os.path.join(OUT_DIR, f"{name}-{type_name.lower()}.gguf")
    if not os.path.exists(path):
        log(f"converting {model_dir} -> {path}")
        r = subprocess.run([PYTHON, os.path.join(ROOT, "tools", "convert", "to_gguf.py"), model_dir, path, "--type", type_name],
                           stdout=subprocess.DEVNULL)
        if r.returncode:  # to_gguf.py has said why on stderr, in one line
            sys.exit(f"gguf_ppl.py: {model_dir} was not converted to {type_name}")
    return path


def file_facts(path):
    """(bits per weight over every tensor, "Q4_K×20 Q6_K×7 ..." of the matrices)."""
    _, _, tensors = gguf.read_gguf(path)
    nbytes = values = 0
    counts = {}
    for t in tensors:
        n = int(np.prod(t["shape"], dtype=np.int64))
        nbytes += ggml_quants.nbytes(t["type"], n)
        values += n
        if len(t["shape"]) >= 2:
            counts[t["type"]] = counts.get(t["type"], 0) + 1
    types = " ".join(f"{k}×{v}" for k, v in sorted(counts.items(), key=lambda kv: -kv[1]))
    return 8 * nbytes / values, types


def failure(r):
    if r.returncode < 0:
        return f"crashed (signal {-r.returncode})"
    return f"exit {r.returncode}: {(r.stderr.strip().splitlines() or ['(no message)'])[-1]}"


def pert_ppl(a, model, text, ctx, extra):
    cmd = [a.pert, "perplexity", "-m", model, "-f", text, "-c", str(ctx), "-t", str(a.threads), "--json", "-q"] + extra
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        return None, failure(r)
    return json.loads(r.stdout)["ppl"], None


def llama_ppl(a, path, text, ctx):
    cmd = [a.llama_perplexity, "-m", path, "-f", text, "-c", str(ctx), "-t", str(a.threads)]
    r = subprocess.run(cmd, capture_output=True, text=True)
    m = re.search(r"Final estimate: PPL = ([0-9.]+)", r.stdout + r.stderr)
    if r.returncode != 0 or not m:
        return None, failure(r) if r.returncode else "no Final estimate in its output"
    return float(m.group(1)), None


def nominal_bpw(dtype):
    t = ggml_quants.TYPES[dtype.upper()]
    return 8 * t.block_bytes / t.block_size


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default="stories260K,rope", help="stories260K and/or family names (default %(default)s)")
    ap.add_argument("--types", default=DEFAULT_TYPES, help="tools/convert/to_gguf.py --type values; F32 first is the baseline "
                                                           "(default %(default)s)")
    ap.add_argument("--dtypes", default=DEFAULT_DTYPES, help="pert --dtype values at load on the safetensors directory "
                                                             "(default %(default)s; '' for none)")
    ap.add_argument("--pert", default=os.path.join(ROOT, "build", "pert"), help="the pert binary (default build/pert)")
    ap.add_argument("--llama-perplexity", help="llama.cpp's llama-perplexity: also run it on every GGUF file")
    ap.add_argument("-t", "--threads", type=int, default=2, help="threads of both (default %(default)s)")
    ap.add_argument("--json-out", help="JSON file for every figure")
    a = ap.parse_args()
    types = a.types.split(",")
    types = ["F32"] + [t for t in types if t != "F32"]  # the baseline first
    dtypes = [d for d in a.dtypes.split(",") if d]
    date = datetime.datetime.now().strftime("%Y-%m-%d %H:%M")
    print(f"GGUF perplexity, {date}, pert {a.pert}" + (f", llama.cpp {a.llama_perplexity}" if a.llama_perplexity else "") + "\n")
    everything = []
    for name in a.models.split(","):
        model, text, ctx = model_and_text(name)
        kq = k_quant_rows(model)
        rows = []
        stored = {"source": "safetensors", "type": "F32 (as stored, --dtype f32)", "file": model, "bits_per_weight": None,
                  "matrices": "(the source directory)"}
        stored["ppl"], stored["error"] = pert_ppl(a, model, text, ctx, ["--split-docs", "--dtype", "f32"])
        stored["ppl_llama_mode"], stored["error_llama_mode"] = pert_ppl(a, model, text, ctx, ["--mode", "llama", "--dtype", "f32"])
        log(f"{name} safetensors: pert {stored['ppl'] or stored['error']}")
        for t in types:
            path = gguf_file(name, model, t)
            bpw, mats = file_facts(path)
            row = {"source": "GGUF", "type": t, "file": path, "bits_per_weight": bpw, "matrices": mats}
            row["ppl"], row["error"] = pert_ppl(a, path, text, ctx, ["--split-docs"])
            row["ppl_llama_mode"], row["error_llama_mode"] = pert_ppl(a, path, text, ctx, ["--mode", "llama"])
            if a.llama_perplexity:
                row["llama_cpp_ppl"], row["llama_cpp_error"] = llama_ppl(a, path, text, ctx)
            log(f"{name} {t}: pert {row['ppl'] or row['error']}, llama mode {row['ppl_llama_mode'] or row['error_llama_mode']}"
                + (f", llama.cpp {row['llama_cpp_ppl'] or row['llama_cpp_error']}" if a.llama_perplexity else ""))
            rows.append(row)
        for d in dtypes:
            row = {"source": "pert --dtype", "type": d, "file": model, "bits_per_weight": nominal_bpw(d),
                   "matrices": f"{d.upper()} (pert at load)"}
            row["ppl"], row["error"] = pert_ppl(a, model, text, ctx, ["--split-docs", "--dtype", d])
            row["ppl_llama_mode"], row["error_llama_mode"] = pert_ppl(a, model, text, ctx, ["--mode", "llama", "--dtype", d])
            log(f"{name} --dtype {d}: pert {row['ppl'] or row['error']}")
            rows.append(row)
        base = rows[0]  # the F32 GGUF
        rows.insert(0, stored)
        print(f"### {name}: {os.path.relpath(text, ROOT)} at {ctx}" +
              ("" if kq else " — rows not whole 256-value blocks: the K types fall back as llama-quantize does") + "\n")
        head = "| source | type | bits/weight | matrices | pert PPL | ΔPPL | Δ% | pert --mode llama"
        head += " | llama.cpp PPL | llama.cpp Δ% |" if a.llama_perplexity else " |"
        print(head)
        print("|---|---|---:|---|---:|---:|---:|---:|" + ("---:|---:|" if a.llama_perplexity else ""))
        for row in rows:
            p, pl = row["ppl"], row["ppl_llama_mode"]
            row["delta"] = p - base["ppl"] if p and base["ppl"] else None
            row["delta_pct"] = 100 * (p / base["ppl"] - 1) if p and base["ppl"] else None
            cells = [row["source"], row["type"], "" if row["bits_per_weight"] is None else f"{row['bits_per_weight']:.2f}" + ("" if row["source"] == "GGUF" else " nominal"),
                     row["matrices"], f"{p:.4f}" if p else row["error"], f"{row['delta']:+.4f}" if p else "—",
                     f"{row['delta_pct']:+.2f}%" if p else "—", f"{pl:.4f}" if pl else row["error_llama_mode"]]
            if a.llama_perplexity:
                lp, lb = row.get("llama_cpp_ppl"), base.get("llama_cpp_ppl")
                if row["source"] == "GGUF":
                    cells += [f"{lp:.4f}" if lp else row["llama_cpp_error"],
                              f"{100 * (lp / lb - 1):+.2f}%" if lp and lb else "—"]
                else:
                    cells += ["", ""]
            print("| " + " | ".join(cells) + " |")
        print()
        everything.append({"model": name, "model_dir": model, "text": text, "ctx": ctx, "k_quant_rows": kq, "rows": rows})
    if a.json_out:
        with replaced(a.json_out) as f:
            json.dump({"date": date, "pert": a.pert, "llama_perplexity": a.llama_perplexity, "models": everything}, f, indent=2)


if __name__ == "__main__":
    main()
