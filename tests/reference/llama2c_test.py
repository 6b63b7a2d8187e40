#!/usr/bin/env python3
"""Real llama2.c checkpoints from ../shared, converted by tools/convert/convert_llama2c.py, against the
PyTorch reference on the first 1024 tokens of tinystories_val.txt (past the trained length).

    llama2c_test.py MODEL PERT_LOGITS      # MODEL: stories260K or aidreams260K

Checks (max |Δ| ≤ 1e-4): pert's prefill and its decode in chunks of 100 against the float64
reference, for the `half` layout (q/k rows permuted) and the `interleaved` one (weights as
llama2.c stores them), and the two layouts against each other in pert and in the reference.
"""
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tools"))
sys.path.insert(0, os.path.join(HERE, "..", "helpers"))
from convert import llama2c_tokenizer  # noqa: E402
from reference import reference  # noqa: E402
from logits_check import Checker, pert_logits  # noqa: E402

SHARED = os.path.join(HERE, "..", "..", "..", "shared", "data")
N = 1024


def first_tokens(tokenizer, n):
    pieces, scores = llama2c_tokenizer.read_tokenizer_bin(tokenizer)
    ids = [1]
    with open(os.path.join(SHARED, "text", "tinystories_val.txt"), encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if line:
                ids += llama2c_tokenizer.encode(line, pieces, scores, bos=False)
            if len(ids) >= n:
                return ids[:n]
    raise SystemExit("text too short")


def main():
    name, binary = sys.argv[1], sys.argv[2]
    ckpt = os.path.join(SHARED, "models", name, name + ".bin")
    tok = os.path.join(SHARED, "models", name, "tok512.bin")
    ids = first_tokens(tok, N)
    check = Checker(name)
    with tempfile.TemporaryDirectory() as tmp:
        def run_pert(model, chunk=None):
            return pert_logits(binary, os.path.join(tmp, model), ids, tmp, chunk)

        refs = {}
        for layout in ("half", "interleaved"):
            subprocess.run([sys.executable, os.path.join(HERE, "..", "..", "tools", "convert", "convert_llama2c.py"), ckpt, tok,
                            os.path.join(tmp, layout), "--layout", layout], check=True)
            refs[layout] = reference.logits_for(os.path.join(tmp, layout), ids)
        check("reference: half vs interleaved layout", refs["half"], refs["interleaved"])
        prefill = {}
        for layout in ("half", "interleaved"):
            prefill[layout] = run_pert(layout)
            check(f"{layout}: prefill of {N} vs reference", prefill[layout], refs[layout])
            check(f"{layout}: chunks of 100 vs reference", run_pert(layout, 100), refs[layout])
        check("pert: half vs interleaved layout", prefill["half"], prefill["interleaved"])
    return check.exit_code()


if __name__ == "__main__":
    sys.exit(main())
