#!/usr/bin/env python3
"""`pert perplexity --json` on family models against the same numbers computed here from the
float64 PyTorch reference's logits.

    perplexity_test.py PERT [MODEL...]      # default models: rope alibi t5

The text is the first held-out stories (tools/train/train.py's split, as tools/train/heldout.py writes
them). Chunks and sliding run with --split-docs: tokenized with SentencePiece as
tools/train/train.py does, BOS + story, concatenated. The windows follow include/pert/perplexity.hpp:
chunks of BOS + n_ctx-1 text tokens, every text token scored; sliding windows of n_ctx-1 text
tokens moved by the stride, the first scoring all its tokens and the others their last
`stride`. Position q is scored from the logits at q - 1.

--mode llama is computed as llama.cpp's llama-perplexity does (tools/perplexity/perplexity.cpp,
perplexity()): the file less its one trailing newline tokenized once by SentencePiece with BOS
first (the family's tokenizer adds <s>); chunk c is the stream's tokens [c*n_ctx, (c+1)*n_ctx)
(the remainder dropped) with its first set to BOS; with first = n_ctx // 2, logits rows first
.. n_ctx-2 score the tokens after them.

Checked: text tokens, windows, tokens scored, stride, PPL (rel 1e-4), its standard error (rel
1e-3), and every position bucket's range, token count and mean NLL (1e-4).
"""
import json
import math
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tools"))
sys.path.insert(0, os.path.join(HERE, "..", "helpers"))
from reference import reference  # noqa: E402
from train import train_data  # noqa: E402
from checklist import check, close, finish  # noqa: E402

SKIP = 77  # CTest SKIP_RETURN_CODE
N_STORIES = 12
# (mode, n_ctx, stride, --chunks): at the trained length 128 (every window), and past it.
CASES = [("chunks", 128, 0, 0), ("chunks", 256, 0, 2), ("sliding", 256, 64, 4), ("llama", 128, 0, 0),
         ("llama", 256, 0, 2)]
BOS = 1
N_BUCKETS = 16


def held_out_text():
    cfg = train_data.load_run_config(os.path.join(ROOT, "configs", "train", "family.json"))
    if not os.path.exists(train_data.data_path(cfg, "tinystories")):
        print(f"SKIP: {train_data.data_path(cfg, 'tinystories')} not found")
        sys.exit(SKIP)
    import sentencepiece as spm
    _, val_stories = train_data.split(cfg)
    stories = val_stories[:N_STORIES]
    sp = spm.SentencePieceProcessor(model_file=os.path.join(ROOT, cfg["tokenizer"]["dir"], "tokenizer.model"))
    text = "\n\n".join(stories) + "\n"
    # llama-perplexity: -f drops one trailing newline; the whole text is tokenized once, BOS first
    stream = [BOS] + sp.encode(text[:-1] if text.endswith("\n") else text)
    return text, train_data.encode(sp, stories).tolist(), stream


def llama_scores(logp_of, stream, n_ctx, max_windows, bos=BOS):
    """llama-perplexity's chunks and scoring: (NLLs, their positions in the chunk, chunks)."""
    assert len(stream) >= 2 * n_ctx, f"llama-perplexity needs 2 * {n_ctx} tokens, the text has {len(stream)}"
    n_chunk = len(stream) // n_ctx
    if max_windows > 0:
        n_chunk = min(n_chunk, max_windows)
    first = n_ctx // 2
    nll, positions = [], []
    for c in range(n_chunk):
        chunk = list(stream[c * n_ctx: (c + 1) * n_ctx])
        chunk[0] = bos
        logp = logp_of(chunk)
        for i in range(first, n_ctx - 1):  # logits row i predicts chunk[i + 1]
            nll.append(-logp[i, chunk[i + 1]])
            positions.append(i + 1)
    return nll, positions, n_chunk


def expected(logp_of, ids, mode, n_ctx, stride, max_windows, bos=BOS):
    """The documented windows and scoring; logp_of(window ids) -> log-softmax [n_ctx][vocab]."""
    per = n_ctx - 1
    S = {"chunks": per, "sliding": stride, "llama": n_ctx}[mode]
    nll, positions = [], []
    w = 0
    if mode == "llama":
        nll, positions, w = llama_scores(logp_of, ids, n_ctx, max_windows, bos)
    while mode != "llama" and w * S + per <= len(ids) and (max_windows == 0 or w < max_windows):
        window = [bos] + ids[w * S: w * S + per]
        logp = logp_of(window)
        first = 1 if mode == "chunks" or w == 0 else n_ctx - S
        for q in range(first, n_ctx):
            nll.append(-logp[q - 1, window[q]])
            positions.append(q)
        w += 1
    nll, positions = np.array(nll), np.array(positions)
    mean = nll.mean()
    ppl = math.exp(mean)
    stderr = ppl * math.sqrt(((nll * nll).mean() - mean * mean) / (len(nll) - 1))
    buckets = []
    for b in range(N_BUCKETS):
        sel = positions * N_BUCKETS // n_ctx == b
        buckets.append({"first": -(-b * n_ctx // N_BUCKETS), "last": -(-(b + 1) * n_ctx // N_BUCKETS) - 1,
                        "tokens": int(sel.sum()), "nll": float(nll[sel].mean()) if sel.any() else None})
    return {"ppl": ppl, "ppl_stderr": stderr, "nll": mean, "tokens": len(nll), "windows": w, "stride": S,
            "nll_by_position": buckets}


def main():
    binary = sys.argv[1]
    models = sys.argv[2:] or ["rope", "alibi", "t5"]
    text, ids, stream = held_out_text()
    with tempfile.TemporaryDirectory() as tmp:
        text_file = os.path.join(tmp, "heldout.txt")
        with open(text_file, "w", encoding="utf-8") as f:
            f.write(text)
        for name in models:
            model_dir = os.path.join(ROOT, "models", name)
            config, W = reference.load_model_dir(model_dir)
            cache = {}

            def logp_of(window):
                key = tuple(window)
                if key not in cache:
                    with torch.no_grad():
                        cache[key] = torch.log_softmax(reference.forward(config, W, window), dim=-1).numpy()
                return cache[key]

            for mode, n_ctx, stride, chunks in CASES:
                cmd = [binary, "perplexity", "-m", model_dir, "-f", text_file, "-c", str(n_ctx), "--mode", mode,
                       "--chunks", str(chunks), "--buckets", str(N_BUCKETS), "-t", "1", "--json"]
                if mode != "llama":
                    cmd += ["--split-docs"]
                if stride:
                    cmd += ["--stride", str(stride)]
                run = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                if run.returncode != 0:
                    sys.exit(f"{' '.join(cmd)}: exit {run.returncode}\n{run.stderr}")
                got = json.loads(run.stdout)
                tokens = stream if mode == "llama" else ids
                want = expected(logp_of, tokens, mode, n_ctx, stride, chunks)
                label = f"{name} {mode} -c {n_ctx}" + (f" --stride {stride}" if stride else "")
                print(f"{label:34s} PPL {got['ppl']:.6f} ± {got['ppl_stderr']:.5f} (reference {want['ppl']:.6f} ± "
                      f"{want['ppl_stderr']:.5f}), {got['tokens']} tokens in {got['windows']} windows")
                check(f"{label}: text tokens {got['text_tokens']} != {len(tokens)}", got["text_tokens"] == len(tokens))
                check(f"{label}: mode {got['mode']}", got["mode"] == mode)
                if mode == "llama":  # llama-perplexity's running [i] figures: one a chunk, the last the PPL
                    run_ppl = got["running_ppl"]
                    check(f"{label}: {len(run_ppl)} running PPLs", len(run_ppl) == want["windows"])
                    check(f"{label}: last running PPL {run_ppl[-1]}", close(run_ppl[-1], want["ppl"], 1e-4))
                for key in ("windows", "tokens", "stride", "n_ctx"):
                    want_value = n_ctx if key == "n_ctx" else want[key]
                    check(f"{label}: {key} {got[key]} != {want_value}", got[key] == want_value)
                check(f"{label}: ppl {got['ppl']} vs {want['ppl']}", close(got["ppl"], want["ppl"], 1e-4))
                check(f"{label}: nll {got['nll']} vs {want['nll']}", close(got["nll"], want["nll"], 1e-4))
                check(f"{label}: ppl_stderr {got['ppl_stderr']} vs {want['ppl_stderr']}",
                      abs(got["ppl_stderr"] - want["ppl_stderr"]) <= 1e-3 * want["ppl_stderr"])
                gb, wb = got["nll_by_position"], want["nll_by_position"]
                check(f"{label}: {len(gb)} buckets", len(gb) == len(wb))
                check(f"{label}: bucket tokens sum to {sum(b['tokens'] for b in gb)}",
                      sum(b["tokens"] for b in gb) == got["tokens"])
                for g, e in zip(gb, wb):
                    where = f"{label}: bucket {e['first']}-{e['last']}"
                    check(f"{where}: {g}", (g["first"], g["last"], g["tokens"]) == (e["first"], e["last"], e["tokens"]))
                    check(f"{where}: nll {g['nll']} vs {e['nll']}",
                          g["nll"] is None if e["nll"] is None else close(g["nll"], e["nll"], 1e-4))

        # --mode llama as text: llama-perplexity's running "[i]ppl," on stderr and its last line on
        # stdout; and --split-docs refused with it, in one line.
        model_dir = os.path.join(ROOT, "models", models[0])
        base = [binary, "perplexity", "-m", model_dir, "-f", text_file, "-c", "128", "--mode", "llama", "-t", "1"]
        got = json.loads(subprocess.run(base + ["--json"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                        text=True, check=True).stdout)
        run = subprocess.run(base, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, check=True)
        final = f"Final estimate: PPL = {got['ppl']:.4f} +/- {got['ppl_stderr']:.5f}"
        check(f"llama text: no '{final}' in stdout", final in run.stdout.splitlines())
        running = "".join(f"[{i + 1}]{p:.4f}," for i, p in enumerate(got["running_ppl"]))
        check(f"llama text: no '{running}' in stderr", running in run.stderr)
        run = subprocess.run(base + ["--split-docs"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        check(f"llama --split-docs: exit {run.returncode}, {run.stderr!r}",
              run.returncode == 2 and run.stdout == "" and run.stderr.count("\n") == 1
              and "--split-docs" in run.stderr and "--mode llama" in run.stderr)
    return finish("perplexity_test")


if __name__ == "__main__":
    sys.exit(main())
