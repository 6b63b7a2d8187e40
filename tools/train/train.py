#!/usr/bin/env python3
"""Trains one model of pert's family: tools/reference/reference.py's model (one definition of the model in
Python), in float32, for any "position" block, on a mix of text and pass-key rows.

    train.py configs/train/NAME.json [--out models/NAME] [--steps N] [--device auto|cpu|cuda]
             [--threads N] [--data-dir DIR] [--restart] [--max-minutes M] [--dry-run]

Data (tools/train/train_data.py; the run config's "data", "mix" and "passkey" blocks): TinyStories
(tinystories_val.txt; its last validation_fraction of stories held out, never trained on),
WikiText-2 valid (split into articles; WikiText-2 test is never trained on), tinyshakespeare
(one document) and synthetic pass-key rows in `pert passkey`'s prompt format, the key followed by
its answer (also `pert ruler`'s tasks and short copies of numbers, where the mix names "ruler" and
"copy"; train_data.py's docstring). Each text source is one token stream, BOS before each document; each training row
draws its source with the mix's weights, then a random window of context + 1 tokens of it
("mix_phases" gives the first steps mixes of their own: a curriculum; train_data.py). The
files lie in data.dir (relative to the repository root; default ../shared/data/text) or --data-dir.

Default mix (configs/train/family.json): tinystories 0.2, wikitext 0.35, shakespeare 0.35,
passkey 0.1. The three texts are ~227k, ~572k and ~554k tokens: these weights are about their
sizes, so no source is repeated much more than another (3000 steps of 32 x 129: ~11 passes over
TinyStories, ~8 over the others; the first family already overfit TinyStories near 8 passes),
with TinyStories a little above its share as the held-out text every evaluation reads. Pass-key
rows at 0.1 (~9,600 rows at 3000 steps, ~2 examples each) teach retrieval within L while leaving
90% of the tokens to language. The run prints each source's passes before it trains.

Pass-key rows (passkey.lengths [58, 129]: prompt + answer tokens, uniform, clamped to the
shortest prompt a key and question allow and to context + 1): the key 10000..99999, its depth
uniform in [0, 1], the filler's start in the cycle uniform, drawn from a generator seeded with
[seed, 1] (held-out rows: [seed, 2]; `pert passkey` draws its keys with mt19937_64 from its own
--seed). A row starts with an example at position 0, as `pert passkey` places its prompt, and is
filled up with more examples, the last cut at context + 1 (right-aligning instead would put every
answer at the window's end, which the learned and sinusoidal models would then only know there).
The loss is the usual next-token loss over the whole row.

Validation every eval_every steps: val_loss on the first eval_windows non-overlapping windows of
the held-out stories (as the first family: comparable with its 3.012 for rope), and on
passkey.eval_windows held-out pass-key rows: passkey_loss, and passkey_acc, the share of rows
whose first answer greedy decoding reproduces exactly (the argmax at every answer position given
the true prefix; `pert passkey`'s judge, digits starting with the key, is no stricter).

Model ("model" block): a Llama of the given sizes; "attention_bias": true adds Llama's q/k/v/o
biases (started at 0, not decayed), which pert reads as LlamaForCausalLM's. Scheme tensors start
as tools/reference/reference.py's position_tensor_init says; train.fgate_decay_time [T_min, T_max]
starts FoX's gate biases instead at the decay times its authors give their data-independent
gates (head h of every layer: σ(b_h) = e^(−1/t_h), t log-spaced from T_min to T_max), so the
gates start near 1 and a key far back is not discounted to nothing before training begins.
train.stick_reach [T_min, T_max] does the like for stick-breaking, whose scores start near 0, so
every key takes half of what nearer keys left and a key d back gets 2^−(d+1): with
model.attention_bias, head h's q and k biases start as b and −b (b along the all-ones direction),
so its scores start at −c_h with σ(−c_h) = 1/T_h, each key taking 1/T_h of the stick left, which
then spans about T_h keys (T log-spaced over the heads, the same in every layer). The scheme is
unchanged; the biases are Llama's own and train as the rest.

Tokenizer: a SentencePiece BPE (byte fallback) trained on the training stories, kept in
models/tokenizer/ and shared by every run (trained on first use only). AdamW, linear warm-up then
cosine decay to min_lr at train.decay_steps (default: the last step; a run may go on past it, at
min_lr or, with train.tail_lr, on a second cosine from tail_lr to min_lr), gradient clipping,
fixed seed.

Resume: every eval_every steps, and when stopped early, CHECKPOINT (default
build/train/NAME/checkpoint.pt, NAME the out directory's name) gets the weights, AdamW's state,
the generators' states, the step, the log rows and the run's hash (the resolved run config with
its step count, the sha256 of the data files and of the tokenizer; not the device, threads, time
limit or where the data lies), written to a temporary file then renamed. A run that finds its
checkpoint continues from it to the weights an uninterrupted run reaches (identical on CPU with
the same threads); a checkpoint of another run config is refused, but for one of the same run
shorter (only the learning rate's schedule differs, and not before the checkpoint's step, as a
run with decay_steps set differs from the run that ended there): the longer run grows from it, to
the weights it would reach from scratch; --restart ignores it. A run
whose OUT/card.json has the same hash is done already and exits at once (--restart trains again;
a run that trains removes OUT/card.json first and writes it last, so only a finished run has one).
--max-minutes stops at a step's end with a checkpoint (run again to continue).

Device: --device auto takes cuda when torch.cuda.is_available(); batches, weights and optimizer
live there (reference.py's own tensors too: torch's default device is set), the saved model is
the same format. Writes OUT/model.safetensors, config.json (max_position_embeddings = the
trained length), tokenizer.json, train_log.csv and card.json (results, device, torch version,
wall time, the command). Progress goes to stderr. Exit status: 0 trained (or already), 3 stopped
early with a checkpoint, 1 on errors.
"""
import argparse
import csv
import hashlib
import inspect
import json
import math
import os
import shlex
import sys
import tempfile
import time

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tools/: import by folder (tools/README.md)
from lib import ROOT  # noqa: E402
from reference import reference  # noqa: E402
from lib import safetensors_io  # noqa: E402
from convert import tokenizer_json  # noqa: E402
from train import train_data  # noqa: E402
from train.train_data import data_path, encode, load_run_config, split  # noqa: E402
from lib.outputs import copy, replaced  # noqa: E402  (whole or not at all, as pert's own)

STOPPED = 3
LOG_COLUMNS = ["step", "lr", "train_loss", "val_loss", "passkey_loss", "passkey_acc", "seconds"]


def tokenizer(cfg, data_dir=None):
    """models/tokenizer/tokenizer.model (+ tokenizer.json), trained once on the training stories."""
    import sentencepiece as spm
    d = os.path.join(ROOT, cfg["tokenizer"]["dir"])
    model = os.path.join(d, "tokenizer.model")
    if not os.path.exists(model):
        os.makedirs(d, exist_ok=True)
        with tempfile.TemporaryDirectory() as tmp:
            corpus = os.path.join(tmp, "train.txt")
            with open(corpus, "w", encoding="utf-8") as f:
                f.write("\n".join(split(cfg, data_dir)[0]) + "\n")
            spm.SentencePieceTrainer.train(
                input=corpus, model_prefix=os.path.join(tmp, "tokenizer"), model_type="bpe",
                vocab_size=cfg["tokenizer"]["vocab_size"], byte_fallback=True, character_coverage=0.9999,
                split_digits=True, add_dummy_prefix=True, remove_extra_whitespaces=False,
                allow_whitespace_only_pieces=True, normalization_rule_name="identity",
                unk_id=0, bos_id=1, eos_id=2, pad_id=-1, num_threads=1, minloglevel=2)
            copy(os.path.join(tmp, "tokenizer.model"), model)
        tokenizer_json.write(tokenizer_json.from_spm(model), os.path.join(d, "tokenizer.json"))
    return spm.SentencePieceProcessor(model_file=model), d


def run_identity(cfg, steps, data_dir, tok_dir):
    """What makes two runs the same run, and its hash: the config (steps resolved; not its name,
    where the data lies, threads or the time limit) and the sha256 of the data files and the
    tokenizer. The name is a label: a probe and the family's run file with the same settings are
    one run."""
    c = json.loads(json.dumps(cfg))
    for k in ("comment", "name"):
        c.pop(k, None)
    c["data"].pop("dir", None)
    c["train"]["steps"] = steps
    for k in ("threads", "max_minutes"):
        c["train"].pop(k, None)
    sources = train_data.mix_sources(train_data.mix_schedule(cfg))
    used = ["tinystories"] + [s for s in sources if s not in ("tinystories",) + train_data.SYNTHETIC]
    if "ruler" in sources and cfg["ruler"].get("essay") and cfg["ruler"]["essay"] not in used:
        used.append(cfg["ruler"]["essay"])  # the essay haystack's text
    ident = {"config": c, "data_sha256": {s: train_data.file_sha256(data_path(cfg, s, data_dir)) for s in used},
             "tokenizer_sha256": train_data.file_sha256(os.path.join(tok_dir, "tokenizer.model"))}
    return ident, hashlib.sha256(json.dumps(ident, sort_keys=True).encode()).hexdigest()[:16]


SCHEDULE = ("steps", "decay_steps", "tail_lr")  # the train keys that only shape the learning rate


def learning_rate(tc, steps, step):
    """Step `step`'s learning rate in a run of `steps`: linear warm-up to lr, cosine down to min_lr
    at decay_steps (default: the last step); past it min_lr, or with tail_lr a second cosine from
    tail_lr down to min_lr at the last step (a run grown past its first end)."""
    if step < tc["warmup"]:
        return tc["lr"] * (step + 1) / tc["warmup"]
    end = tc.get("decay_steps") or steps
    if step < end or not tc.get("tail_lr"):
        progress = (step - tc["warmup"]) / max(1, end - tc["warmup"])
        return tc["min_lr"] + 0.5 * (tc["lr"] - tc["min_lr"]) * (1 + math.cos(math.pi * min(1.0, progress)))
    progress = (step - end) / max(1, steps - end)
    return tc["min_lr"] + 0.5 * (tc["tail_lr"] - tc["min_lr"]) * (1 + math.cos(math.pi * progress))


def grows(earlier, later, at_step):
    """Whether the run `later` is the run `earlier` made longer, the same up to step `at_step`:
    their identities equal but for the schedule's keys, the same learning rate at every step
    before at_step, and at_step within later's steps."""
    if earlier is None:
        return False
    trains = [r["config"]["train"] for r in (earlier, later)]
    short = [json.loads(json.dumps(r)) for r in (earlier, later)]
    for r in short:
        for k in SCHEDULE:
            r["config"]["train"].pop(k, None)
    return (short[0] == short[1] and at_step <= trains[1]["steps"]
            and all(learning_rate(trains[0], trains[0]["steps"], s) == learning_rate(trains[1], trains[1]["steps"], s)
                    for s in range(at_step)))


def fgate_bias(position, decay_time, heads):
    """FoX's gate biases [heads] for decay times log-spaced in decay_time = [T_min, T_max]
    (σ(b) = e^(−1/t): a gate that forgets by 1/e in t tokens), as the authors' fgate_bias_init;
    exits naming the key where it does not apply."""
    if (position or {}).get("type") != "fox":
        sys.exit(f"train.py: train.fgate_decay_time is for FoX's gates; the position type is "
                 f"{(position or {}).get('type', 'none')!r}")
    t = log_spaced_times("fgate_decay_time", decay_time, heads, 0)
    return (-torch.log(torch.expm1(1.0 / t))).float()


def log_spaced_times(key, times, heads, low):
    """[heads] times log-spaced over times = [T_min, T_max] (float64); exits naming key where the
    pair is malformed or T_min is not above low."""
    if (not isinstance(times, list) or len(times) != 2
            or not all(isinstance(t, (int, float)) and not isinstance(t, bool) and low < t < 1e9 for t in times)
            or times[0] > times[1]):
        sys.exit(f"train.py: train.{key} must be [T_min, T_max] with {low} < T_min <= T_max, got {times!r}")
    return torch.exp(torch.linspace(math.log(times[0]), math.log(times[1]), heads, dtype=torch.float64))


def stick_reach_bias(position, hf, reach):
    """Stick-breaking's start (train.stick_reach): q and k biases [H·hd] whose product puts head h's
    scaled scores at −c_h, σ(−c_h) = 1/T_h (c_h = ln(T_h − 1)), T log-spaced in reach; exits
    naming the key where it does not apply."""
    if (position or {}).get("type") != "stick_breaking":
        sys.exit(f"train.py: train.stick_reach is for stick-breaking attention; the position type is "
                 f"{(position or {}).get('type', 'none')!r}")
    if not hf.get("attention_bias"):
        sys.exit("train.py: train.stick_reach needs model.attention_bias: true (the q and k biases carry the start)")
    H, KV = hf["num_attention_heads"], hf["num_key_value_heads"]
    if KV != H:
        sys.exit(f"train.py: train.stick_reach needs a key head per query head, got {H} query and {KV} key heads")
    hd = hf["hidden_size"] // H
    c = torch.log(log_spaced_times("stick_reach", reach, H, 1) - 1)  # [H]
    # (b·u)·(−b·u) with u the unit all-ones vector, times the score's 1/sqrt(hd): −c
    b = torch.sqrt(c * math.sqrt(hd))[:, None] * torch.full((H, hd), hd ** -0.5, dtype=torch.float64)
    return b.reshape(-1).float(), (-b).reshape(-1).float()


def init_weights(hf, vocab, position, seed, fgate_decay_time=None, stick_reach=None):
    """GPT-2 style: N(0, 0.02), residual projections scaled by 1/sqrt(2·layers), norms at 1, attention
    biases (model.attention_bias) at 0; FoX's gate biases at fgate_decay_time's (fgate_bias),
    stick-breaking's q and k biases at stick_reach's (stick_reach_bias)."""
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
        if hf.get("attention_bias"):  # Llama's option (DeBERTa's projections have biases): zeros, as HF starts them
            W.update({p + f"self_attn.{m}_proj.bias": torch.zeros(n) for m, n in
                      (("q", H * hd), ("k", KV * hd), ("v", KV * hd), ("o", d))})
    if not hf["tie_word_embeddings"]:
        W["lm_head.weight"] = normal(vocab, d)
    for name, shape in reference.position_tensor_shapes(position, d, H, hf["max_position_embeddings"],
                                                            hf["num_hidden_layers"]).items():
        W[name] = reference.position_tensor_init(position, name, shape, g)
    if fgate_decay_time is not None:
        bias = fgate_bias(position, fgate_decay_time, H)
        for name in W:
            if name.endswith(".fgate_proj.bias"):
                W[name] = bias.clone()
    if stick_reach is not None:
        q_bias, k_bias = stick_reach_bias(position, hf, stick_reach)
        for name in W:
            if name.endswith(("self_attn.q_proj.bias", "self_attn.k_proj.bias")):
                W[name] = (q_bias if ".q_proj." in name else k_bias).clone()
    return W


def check_scheme(position):
    """reference.forward reads a position type it does not know as no positions at all: refuse
    one reference.py never names, so a scheme not yet written there is not trained as NoPE."""
    kind = (position or {}).get("type", "none")
    if kind != "none" and f'"{kind}"' not in inspect.getsource(reference):
        sys.exit(f"train.py: position type {kind!r}: tools/reference/reference.py does not implement it (yet)")


def pick_device(name):
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    if name == "cuda" and not torch.cuda.is_available():
        sys.exit("train.py: --device cuda: torch.cuda.is_available() is false")
    return torch.device(name)


def use_device(device):
    """reference.forward makes tensors of its own (masks, positions): torch's default device is
    set so that they are made there too. After init_weights, whose generator is a CPU one."""
    if device.type == "cuda":
        if hasattr(torch, "set_default_device"):
            torch.set_default_device(device)
        else:  # torch < 2.0
            torch.set_default_tensor_type(torch.cuda.FloatTensor)


def load_checkpoint(path, device):
    extra = {"weights_only": False} if "weights_only" in inspect.signature(torch.load).parameters else {}
    return torch.load(path, map_location=device, **extra)


def save_checkpoint(path, state):
    """Whole or not at all (outputs.replaced): a killed run never leaves half a checkpoint."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with replaced(path, "wb") as f:
        torch.save(state, f)


class Progress:
    """A bar on stderr: redrawn in place on a terminal, else a line every 5% and at evaluations."""

    def __init__(self, steps):
        self.steps, self.tty, self.drawn = steps, sys.stderr.isatty(), 0.0

    def show(self, step, text, force=False):
        now = time.time()
        every = max(1, self.steps // 20)
        if self.tty and not force and now - self.drawn < 0.2 and step != self.steps:
            return
        if not self.tty and not force and step % every and step != self.steps:
            return
        self.drawn = now
        bar = "#" * int(30 * step / self.steps)
        end = "" if self.tty else "\n"
        print(f"{chr(13) if self.tty else ''}[{bar:<30}] step {step}/{self.steps} {text}", end=end,
              file=sys.stderr, flush=True)

    def done(self):
        if self.tty:
            print(file=sys.stderr)


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("run_config", metavar="RUN_CONFIG", help="configs/train/NAME.json")
    ap.add_argument("--out", help="model directory to write (default models/NAME, NAME from the run config)")
    ap.add_argument("--steps", type=int, help="optimizer steps (default: the run config's train.steps)")
    ap.add_argument("--max-minutes", type=float,
                    help="stop with a checkpoint after this wall time (default: train.max_minutes; null: none)")
    ap.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto",
                    help="where to train (default auto: cuda when available)")
    ap.add_argument("--threads", type=int, help="torch CPU threads (default: train.threads)")
    ap.add_argument("--data-dir", help="directory holding the text files (default: the config's data.dir, "
                                       "../shared/data/text from the repository root)")
    ap.add_argument("--checkpoint", help="checkpoint file (default build/train/NAME/checkpoint.pt, NAME the "
                                         "out directory's name)")
    ap.add_argument("--restart", action="store_true", help="ignore a checkpoint and a finished card.json")
    ap.add_argument("--dry-run", action="store_true",
                    help="load the data (training the tokenizer if missing), print the mix and the run's hash, exit")
    ap.add_argument("--stop-after", type=int, help=argparse.SUPPRESS)  # tests: stop as if interrupted
    return ap.parse_args()


def main():
    a = parse_args()
    cfg = load_run_config(a.run_config)
    tc = cfg["train"]
    steps = a.steps or tc["steps"]
    max_minutes = a.max_minutes or tc.get("max_minutes")
    out = os.path.abspath(a.out or os.path.join(ROOT, "models", cfg["name"]))
    ckpt_path = a.checkpoint or os.path.join(ROOT, "build", "train", os.path.basename(out), "checkpoint.pt")
    threads = a.threads or tc["threads"]
    device = pick_device(a.device)
    torch.set_num_threads(threads)
    torch.manual_seed(tc["seed"])

    sp, tok_dir = tokenizer(cfg, a.data_dir)
    ident, run_hash = run_identity(cfg, steps, a.data_dir, tok_dir)
    card_path = os.path.join(out, "card.json")
    if not a.restart and not a.dry_run and os.path.exists(card_path):
        with open(card_path) as f:
            if json.load(f).get("config_hash") == run_hash:
                print(f"train {cfg['name']}: {out} is trained with this run config already (hash {run_hash}); "
                      f"--restart trains again", file=sys.stderr)
                return 0
    T, B = tc["context"], tc["batch_size"]
    mix = train_data.Mix(cfg, sp, a.data_dir)
    val_ids = encode(sp, split(cfg, a.data_dir)[1])
    pk_rows, pk_first = train_data.heldout_passkey(sp, cfg, np.random.default_rng([tc["seed"], 2]))
    print(f"train {cfg['name']}: run hash {run_hash}, {steps} steps of {B}x{T}; mix:\n{mix.summary(steps, B)}",
          file=sys.stderr)
    if a.dry_run:
        return 0
    check_scheme(cfg["position"])
    for rule in (cfg.get("layers") or {}).values():  # pert's "layers" block (docs/config.md)
        if rule and "position" in rule:
            check_scheme(rule["position"])

    hf = dict(cfg["model"], vocab_size=sp.get_piece_size(), max_position_embeddings=T, bos_token_id=1,
              eos_token_id=2, hidden_act="silu", architectures=["LlamaForCausalLM"], model_type="llama",
              position=cfg["position"], **({"layers": cfg["layers"]} if cfg.get("layers") else {}))
    W = init_weights(hf, hf["vocab_size"], cfg["position"], tc["seed"], tc.get("fgate_decay_time"),
                     tc.get("stick_reach"))  # CPU, then moved
    use_device(device)
    W = {k: v.to(device).requires_grad_() for k, v in W.items()}
    n_params = sum(v.numel() for v in W.values())
    decay = [v for v in W.values() if v.dim() == 2]
    no_decay = [v for v in W.values() if v.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": tc["weight_decay"]},
                             {"params": no_decay, "weight_decay": 0.0}], lr=tc["lr"], betas=(0.9, 0.95))
    rng = np.random.default_rng(tc["seed"])  # sources and windows
    pk_rng = np.random.default_rng([tc["seed"], 1])  # training pass-key rows
    # Validation: the first eval_windows non-overlapping windows of the held-out stories.
    n_val = min(tc["eval_windows"], (len(val_ids) - 1) // T)
    val_x = torch.from_numpy(np.stack([val_ids[i * T:(i + 1) * T] for i in range(n_val)])).to(device)
    val_y = torch.from_numpy(np.stack([val_ids[i * T + 1:(i + 1) * T + 1] for i in range(n_val)])).to(device)
    pk_rows = torch.from_numpy(pk_rows).to(device)

    def lr_at(step):
        return learning_rate(tc, steps, step)

    def loss_of(x, y):
        logits = reference.forward(hf, W, x)
        return torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))

    def evaluate():
        """(val_loss, passkey_loss, passkey_acc)."""
        with torch.no_grad():
            vl = float(sum(loss_of(val_x[i:i + 16], val_y[i:i + 16]) * len(val_x[i:i + 16])
                           for i in range(0, n_val, 16)) / n_val)
            pk_loss, hits = 0.0, 0
            for i in range(0, len(pk_rows), 16):
                rows = pk_rows[i:i + 16]
                logits = reference.forward(hf, W, rows[:, :-1])
                pk_loss += float(torch.nn.functional.cross_entropy(
                    logits.reshape(-1, logits.shape[-1]), rows[:, 1:].reshape(-1))) * len(rows)
                guess = logits.argmax(-1)
                for j, (s, n) in enumerate(pk_first[i:i + 16]):
                    hits += bool((guess[j, s - 1:s - 1 + n] == rows[j, s:s + n]).all())
        return vl, pk_loss / max(1, len(pk_rows)), hits / max(1, len(pk_rows))

    def state(step, train_loss, log_rows, segments):
        s = {"config_hash": run_hash, "run": ident, "step": step, "train_loss": train_loss, "log": log_rows,
             "segments": segments, "weights": {k: v.detach().cpu() for k, v in W.items()},
             "optimizer": opt.state_dict(), "rng": rng.bit_generator.state, "passkey_rng": pk_rng.bit_generator.state,
             "torch_rng": torch.get_rng_state()}
        if device.type == "cuda":
            s["cuda_rng"] = torch.cuda.get_rng_state_all()
        return s

    start_step, train_loss, log_rows, segments = 0, float("nan"), [], []
    if os.path.exists(ckpt_path) and not a.restart:
        ck = load_checkpoint(ckpt_path, device)
        grown = ck["config_hash"] != run_hash
        if grown and not grows(ck.get("run"), ident, ck["step"]):
            sys.exit(f"train.py: {ckpt_path} is of another run config (hash {ck['config_hash']}, this run's "
                     f"{run_hash}); --restart to start over")
        with torch.no_grad():
            for k, v in W.items():
                v.copy_(ck["weights"][k])
        opt.load_state_dict(ck["optimizer"])
        rng.bit_generator.state, pk_rng.bit_generator.state = ck["rng"], ck["passkey_rng"]
        torch.set_rng_state(ck["torch_rng"].cpu())
        if device.type == "cuda" and "cuda_rng" in ck:
            torch.cuda.set_rng_state_all([t.cpu() for t in ck["cuda_rng"]])
        start_step, train_loss, log_rows, segments = ck["step"], ck["train_loss"], ck["log"], ck["segments"]
        print(f"train {cfg['name']}: {'growing a finished run' if grown else 'resuming'} at step {start_step} "
              f"from {ckpt_path}", file=sys.stderr)
    segments.append({"command": shlex.join([sys.executable] + sys.argv), "from_step": start_step,
                     "device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
                     "threads": threads, "seconds": 0.0})
    earlier = sum(s["seconds"] for s in segments[:-1])

    os.makedirs(out, exist_ok=True)
    if os.path.exists(card_path):  # the card, written last, marks a finished run: not until this one is
        os.remove(card_path)
    def write_log():  # whole at each evaluation, as every output: a reader never sees half a row
        with replaced(os.path.join(out, "train_log.csv"), newline="") as f:
            csv.writer(f).writerows([LOG_COLUMNS] + log_rows)

    write_log()
    start = time.time()
    print(f"train {cfg['name']}: {n_params:,} parameters on {segments[-1]['device']}, {len(val_ids):,} "
          f"validation tokens", file=sys.stderr)
    progress = Progress(steps)
    step = start_step
    while step < steps:
        x = torch.from_numpy(mix.batch(rng, pk_rng, B, step)).to(device)
        for group in opt.param_groups:
            group["lr"] = lr_at(step)
        loss = loss_of(x[:, :-1], x[:, 1:])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(list(W.values()), tc["grad_clip"])
        opt.step()
        reference.position_tensor_constrain(cfg["position"], W)
        train_loss = float(loss)
        step += 1
        segments[-1]["seconds"] = round(time.time() - start, 1)
        elapsed = earlier + segments[-1]["seconds"]
        evaluated = step % tc["eval_every"] == 0 or step == steps
        if evaluated:
            vl, pk_loss, pk_acc = evaluate()
            log_rows.append([step, f"{lr_at(step - 1):.6g}", f"{train_loss:.4f}", f"{vl:.4f}", f"{pk_loss:.4f}",
                             f"{pk_acc:.4f}", f"{elapsed:.1f}"])
            write_log()
            progress.show(step, f"train {train_loss:.3f} val {vl:.3f} passkey {pk_loss:.3f} acc {pk_acc:.2f} "
                                f"{elapsed:.0f}s", force=True)
        else:
            progress.show(step, f"train {train_loss:.3f} {elapsed:.0f}s")
        stop = step < steps and ((a.stop_after and step >= a.stop_after)
                                 or (max_minutes and time.time() - start > max_minutes * 60))
        if evaluated or stop:
            save_checkpoint(ckpt_path, state(step, train_loss, log_rows, segments))
        if stop:
            progress.done()
            print(f"train {cfg['name']}: stopped at step {step} of {steps}, checkpoint {ckpt_path}; run again to "
                  f"continue", file=sys.stderr)
            return STOPPED
    progress.done()
    vl, pk_loss, pk_acc = evaluate()
    tensors = {k: v.detach().cpu().numpy() for k, v in W.items()}
    safetensors_io.save(os.path.join(out, "model.safetensors"), tensors, cfg["dtype"], {"format": "pt"})
    with replaced(os.path.join(out, "config.json")) as f:
        json.dump(dict(hf, torch_dtype={"BF16": "bfloat16", "F16": "float16", "F32": "float32"}[cfg["dtype"]]),
                  f, indent=2)
    copy(os.path.join(tok_dir, "tokenizer.json"), os.path.join(out, "tokenizer.json"))
    card = {"name": cfg["name"], "position": cfg["position"], **({"layers": cfg["layers"]} if cfg.get("layers") else {}),
            "parameters": n_params, "steps": steps,
            "context": T, "batch_size": B, "mix": mix.weights,
            **({"mix_phases": cfg["mix_phases"]} if cfg.get("mix_phases") else {}), "train_loss": train_loss, "val_loss": vl,
            "val_ppl_torch": math.exp(vl), "passkey_loss": pk_loss, "passkey_acc": pk_acc,
            "wall_seconds": round(sum(s["seconds"] for s in segments), 1), "threads": threads,
            "device": segments[-1]["device"], "torch": torch.__version__, "command": segments[-1]["command"],
            "segments": segments, "config_hash": run_hash, "run": ident}
    with replaced(card_path) as f:
        json.dump(card, f, indent=2)
    print(json.dumps({k: card[k] for k in ("name", "steps", "train_loss", "val_loss", "passkey_acc",
                                           "wall_seconds", "device")}), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
