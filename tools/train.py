#!/usr/bin/env python3
"""Trains one model of pert's family on TinyStories: the model is tools/reference.py's (one
definition of the model in Python), in float32, for any "position" block.

    train.py configs/train/NAME.json [--out models/NAME] [--steps N] [--max-minutes M]

Data: ../shared/data/text/tinystories_val.txt split into stories at blank lines; the last 10%
of stories are held out for validation. Tokenizer: a SentencePiece BPE (byte fallback) trained
on the training stories, kept in models/tokenizer/ and shared by every run (trained on first
use). Each story starts with BOS; training windows of `context`+1 tokens are drawn at random
from the concatenated training stories. AdamW, linear warm-up then cosine decay, gradient
clipping, fixed seed. Writes OUT/model.safetensors, config.json (with the position block and
max_position_embeddings = the trained length), tokenizer.json, train_log.csv and card.json.
Progress goes to stderr.
"""
import argparse
import csv
import json
import math
import os
import shutil
import sys
import tempfile
import time

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import reference  # noqa: E402
import safetensors_io  # noqa: E402
import tokenizer_json  # noqa: E402


def load_run_config(path):
    with open(path) as f:
        run = json.load(f)
    if "base" in run:
        with open(os.path.join(os.path.dirname(path), run.pop("base"))) as f:
            base = json.load(f)
        base.update(run)
        run = base
    return run


def stories(path):
    with open(path, encoding="utf-8") as f:
        text = f.read()
    return [s.strip() for s in text.split("\n\n") if s.strip()]


def split(cfg):
    all_stories = stories(os.path.join(ROOT, cfg["data"]))
    n_val = int(round(len(all_stories) * cfg["validation_fraction"]))
    return all_stories[:-n_val], all_stories[-n_val:]


def tokenizer(cfg, train_stories):
    """models/tokenizer/tokenizer.model (+ tokenizer.json), trained once on the training split."""
    import sentencepiece as spm
    d = os.path.join(ROOT, cfg["tokenizer"]["dir"])
    model = os.path.join(d, "tokenizer.model")
    if not os.path.exists(model):
        os.makedirs(d, exist_ok=True)
        with tempfile.TemporaryDirectory() as tmp:
            corpus = os.path.join(tmp, "train.txt")
            with open(corpus, "w", encoding="utf-8") as f:
                f.write("\n".join(train_stories) + "\n")
            spm.SentencePieceTrainer.train(
                input=corpus, model_prefix=os.path.join(tmp, "tokenizer"), model_type="bpe",
                vocab_size=cfg["tokenizer"]["vocab_size"], byte_fallback=True, character_coverage=0.9999,
                split_digits=True, add_dummy_prefix=True, remove_extra_whitespaces=False,
                allow_whitespace_only_pieces=True, normalization_rule_name="identity",
                unk_id=0, bos_id=1, eos_id=2, pad_id=-1, num_threads=1, minloglevel=2)
            shutil.copy(os.path.join(tmp, "tokenizer.model"), model)
        tokenizer_json.write(tokenizer_json.from_spm(model), os.path.join(d, "tokenizer.json"))
    return spm.SentencePieceProcessor(model_file=model), d


def encode(sp, texts):
    """BOS + story, concatenated."""
    out = []
    for ids in sp.encode(texts):
        out.append(1)
        out.extend(ids)
    return np.array(out, dtype=np.int64)


def init_weights(hf, vocab, position, seed):
    """GPT-2 style: N(0, 0.02), residual projections scaled by 1/sqrt(2·layers), norms at 1."""
    g = torch.Generator().manual_seed(seed)
    d, L, H = hf["hidden_size"], hf["num_hidden_layers"], hf["num_attention_heads"]
    KV, ff = hf["num_key_value_heads"], hf["intermediate_size"]
    hd = d // H

    def normal(*shape, std=0.02):
        return torch.randn(*shape, generator=g) * std

    W = {"model.embed_tokens.weight": normal(vocab, d), "model.norm.weight": torch.ones(d)}
    for i in range(L):
        p = f"model.layers.{i}."
        W.update({p + "input_layernorm.weight": torch.ones(d), p + "post_attention_layernorm.weight": torch.ones(d),
                  p + "self_attn.q_proj.weight": normal(H * hd, d), p + "self_attn.k_proj.weight": normal(KV * hd, d),
                  p + "self_attn.v_proj.weight": normal(KV * hd, d),
                  p + "self_attn.o_proj.weight": normal(d, H * hd, std=0.02 / math.sqrt(2 * L)),
                  p + "mlp.gate_proj.weight": normal(ff, d), p + "mlp.up_proj.weight": normal(ff, d),
                  p + "mlp.down_proj.weight": normal(d, ff, std=0.02 / math.sqrt(2 * L))})
    if not hf["tie_word_embeddings"]:
        W["lm_head.weight"] = normal(vocab, d)
    for name, shape in reference.position_tensor_shapes(position, d, H, hf["max_position_embeddings"],
                                                            hf["num_hidden_layers"]).items():
        W[name] = reference.position_tensor_init(position, name, shape, g)
    return {k: v.requires_grad_() for k, v in W.items()}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("run_config", metavar="RUN_CONFIG", help="configs/train/NAME.json")
    ap.add_argument("--out", help="model directory to write (default models/NAME, NAME from the run config)")
    ap.add_argument("--steps", type=int, help="optimizer steps (default: the run config's train.steps)")
    ap.add_argument("--max-minutes", type=float, help="stop after this wall time (default: the run config's train.max_minutes)")
    a = ap.parse_args()
    cfg = load_run_config(a.run_config)
    tc = cfg["train"]
    steps = a.steps or tc["steps"]
    max_minutes = a.max_minutes or tc["max_minutes"]
    out = a.out or os.path.join(ROOT, "models", cfg["name"])
    torch.set_num_threads(tc["threads"])
    torch.manual_seed(tc["seed"])

    train_stories, val_stories = split(cfg)
    sp, tok_dir = tokenizer(cfg, train_stories)
    train_ids, val_ids = encode(sp, train_stories), encode(sp, val_stories)
    T, B = tc["context"], tc["batch_size"]
    hf = dict(cfg["model"], vocab_size=sp.get_piece_size(), max_position_embeddings=T, bos_token_id=1,
              eos_token_id=2, hidden_act="silu", architectures=["LlamaForCausalLM"], model_type="llama",
              position=cfg["position"])
    W = init_weights(hf, hf["vocab_size"], cfg["position"], tc["seed"])
    n_params = sum(v.numel() for v in W.values())
    decay = [v for v in W.values() if v.dim() == 2]
    no_decay = [v for v in W.values() if v.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": tc["weight_decay"]},
                             {"params": no_decay, "weight_decay": 0.0}], lr=tc["lr"], betas=(0.9, 0.95))
    rng = np.random.default_rng(tc["seed"])
    # Validation: the first eval_windows non-overlapping windows of the held-out stories.
    n_val = min(tc["eval_windows"], (len(val_ids) - 1) // T)
    val_x = torch.tensor(np.stack([val_ids[i * T:(i + 1) * T] for i in range(n_val)]))
    val_y = torch.tensor(np.stack([val_ids[i * T + 1:(i + 1) * T + 1] for i in range(n_val)]))

    def lr_at(step):
        if step < tc["warmup"]:
            return tc["lr"] * (step + 1) / tc["warmup"]
        progress = (step - tc["warmup"]) / max(1, steps - tc["warmup"])
        return tc["min_lr"] + 0.5 * (tc["lr"] - tc["min_lr"]) * (1 + math.cos(math.pi * min(1.0, progress)))

    def loss_of(x, y):
        logits = reference.forward(hf, W, x)
        return torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))

    def val_loss():
        with torch.no_grad():
            return float(sum(loss_of(val_x[i:i + 16], val_y[i:i + 16]) * len(val_x[i:i + 16])
                             for i in range(0, n_val, 16)) / n_val)

    os.makedirs(out, exist_ok=True)
    log = open(os.path.join(out, "train_log.csv"), "w", newline="")
    writer = csv.writer(log)
    writer.writerow(["step", "lr", "train_loss", "val_loss", "seconds"])
    start = time.time()
    print(f"train {cfg['name']}: {n_params:,} parameters, {len(train_ids):,} training / {len(val_ids):,} "
          f"validation tokens, {steps} steps of {B}x{T}", file=sys.stderr)
    step, train_loss = 0, float("nan")
    for step in range(steps):
        starts = rng.integers(0, len(train_ids) - T - 1, B)
        x = torch.tensor(np.stack([train_ids[s:s + T] for s in starts]))
        y = torch.tensor(np.stack([train_ids[s + 1:s + T + 1] for s in starts]))
        for group in opt.param_groups:
            group["lr"] = lr_at(step)
        loss = loss_of(x, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(list(W.values()), tc["grad_clip"])
        opt.step()
        reference.position_tensor_constrain(cfg["position"], W)
        train_loss = float(loss)
        elapsed = time.time() - start
        last = step + 1 == steps or elapsed > max_minutes * 60
        if (step + 1) % tc["eval_every"] == 0 or last:
            vl = val_loss()
            writer.writerow([step + 1, f"{lr_at(step):.6g}", f"{train_loss:.4f}", f"{vl:.4f}", f"{elapsed:.1f}"])
            log.flush()
            bar = "#" * int(30 * (step + 1) / steps)
            print(f"\r[{bar:<30}] step {step + 1}/{steps} train {train_loss:.3f} val {vl:.3f} {elapsed:.0f}s",
                  end="", file=sys.stderr, flush=True)
        if last:
            break
    print(file=sys.stderr)
    wall = time.time() - start
    vl = val_loss()
    tensors = {k: v.detach().numpy() for k, v in W.items()}
    safetensors_io.save(os.path.join(out, "model.safetensors"), tensors, cfg["dtype"], {"format": "pt"})
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(dict(hf, torch_dtype={"BF16": "bfloat16", "F16": "float16", "F32": "float32"}[cfg["dtype"]]),
                  f, indent=2)
    shutil.copy(os.path.join(tok_dir, "tokenizer.json"), os.path.join(out, "tokenizer.json"))
    card = {"name": cfg["name"], "position": cfg["position"], "parameters": n_params, "steps": step + 1,
            "context": T, "batch_size": B, "train_loss": train_loss, "val_loss": vl,
            "val_ppl_torch": math.exp(vl), "wall_seconds": round(wall, 1), "threads": tc["threads"],
            "command": f"/usr/bin/python3 tools/train.py {os.path.relpath(a.run_config, ROOT)}"}
    with open(os.path.join(out, "card.json"), "w") as f:
        json.dump(card, f, indent=2)
    print(json.dumps(card), file=sys.stderr)


if __name__ == "__main__":
    main()
