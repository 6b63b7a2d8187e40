#!/usr/bin/env python3
"""A model of pert's family (models/NAME) in pert against the PyTorch reference, on held-out text.

    family_test.py NAME PERT_LOGITS PERT [--json-out OUT]

The held-out split is the last 10% of tinystories_val.txt's stories (tools/train/train.py's split),
tokenized with the family's tokenizer, BOS before each story. Checks pert's logits against the
float64 reference on the first 4 windows of the trained length L = 128 and on one window of 8L
(past the trained length, where extrapolation results are read; the learned model reuses its
last row there), max |Δ| ≤ 1e-3, the bar for BF16-stored weights; and the statistics of the
attention weights (pert attention's) on one window of 2L against the reference's, computed from
its full weight matrices, to 1e-6 of max(1, |value|): for the rope model under every
configs/extend/ method too. Then measures the validation
perplexity at L with `pert perplexity --split-docs` (chunks of BOS + L - 1 tokens, every token
scored) and prints it; --json-out writes it for tools/results/family_report.py.
"""
import glob
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tools"))
sys.path.insert(0, os.path.join(HERE, "..", "helpers"))
from reference import reference  # noqa: E402
from train import train_data  # noqa: E402
from reference.passkey_reference import merge_patch  # noqa: E402  (RFC 7386, as pert's --config)
from logits_check import Checker, pert_attention, pert_logits  # noqa: E402


def held_out():
    import sentencepiece as spm
    cfg = train_data.load_run_config(os.path.join(ROOT, "configs", "train", "family.json"))
    _, val_stories = train_data.split(cfg)
    sp = spm.SentencePieceProcessor(model_file=os.path.join(ROOT, cfg["tokenizer"]["dir"], "tokenizer.model"))
    return val_stories, train_data.encode(sp, val_stories).tolist(), cfg["train"]["context"]


def main():
    name, logits_binary, pert = sys.argv[1], sys.argv[2], sys.argv[3]
    model = os.path.join(ROOT, "models", name)
    stories, ids, L = held_out()
    check = Checker(name, tol=1e-3)
    config, W = reference.load_model_dir(model)
    sets = []
    if reference.position_block(config)["type"] == "learned":
        config.setdefault("position", {})["beyond"] = "clamp"
        sets = ["--set", "position.beyond=clamp"]
    with tempfile.TemporaryDirectory() as tmp:
        logits = pert_logits(logits_binary, model, ids[:4 * L], tmp, window=L)
        long = pert_logits(logits_binary, model, ids[:8 * L], tmp, extra=sets)
        attention, _ = pert_attention(logits_binary, model, ids[:2 * L], tmp, extra=sets)
        # the rope model under each extend method: (file, its statistics, its logits)
        methods = [(path, *pert_attention(logits_binary, model, ids[:2 * L], tmp, extra=["--config", path]))
                   for path in (sorted(glob.glob(os.path.join(ROOT, "configs", "extend", "*.json"))) if name == "rope" else [])]
        text = os.path.join(tmp, "heldout.txt")
        with open(text, "w", encoding="utf-8") as f:
            f.write("\n\n".join(stories) + "\n")
        out = subprocess.run([pert, "perplexity", "-m", model, "-f", text, "--split-docs", "-c", str(L), "--json"],
                             check=True, capture_output=True, text=True).stdout
    result = json.loads(out)
    with reference.torch.no_grad():
        for w in range(4):
            want = reference.forward(config, W, ids[w * L:(w + 1) * L]).numpy()
            check(f"window {w} of {L} tokens vs reference", logits[w * L:(w + 1) * L], want)
        check(f"one window of {8 * L} tokens vs reference", long, reference.forward(config, W, ids[:8 * L]).numpy())
        def reference_attention(cfg):  # the reference's statistics and logits on 2L tokens
            probs = {}
            out = reference.forward(cfg, W, ids[:2 * L], observe=lambda layer, p: probs.__setitem__(layer, p)).numpy()
            per_query = reference.attention_per_query([probs[i] for i in sorted(probs)])
            return reference.attention_stats(per_query, cfg.get("max_position_embeddings", 2048)), out
        check.attention(f"attention statistics, {2 * L} tokens", attention, reference_attention(config)[0])
        for path, stats, observed in methods:
            with open(path) as f:
                want, want_logits = reference_attention(merge_patch(config, json.load(f)))
            method = os.path.basename(path)
            check.attention(f"{method}: attention statistics, {2 * L} tokens", stats, want)
            check(f"{method}: logits, {2 * L} tokens", observed, want_logits)
    if result["text_tokens"] != len(ids):
        check.failures.append(f"pert perplexity read {result['text_tokens']} tokens, sentencepiece {len(ids)}")
    print(f"{name}: validation perplexity at L = {L}: {result['ppl']:.3f} ± {result['ppl_stderr']:.3f} "
          f"({result['tokens']} tokens in {result['windows']} windows)")
    if "--json-out" in sys.argv:
        with open(sys.argv[sys.argv.index("--json-out") + 1], "w") as f:
            json.dump({"name": name, "L": L, "ppl": result["ppl"], "ppl_stderr": result["ppl_stderr"],
                       "tokens": result["tokens"], "windows": result["windows"]}, f)
    return check.exit_code()


if __name__ == "__main__":
    sys.exit(main())
