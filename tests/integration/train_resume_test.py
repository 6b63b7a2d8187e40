#!/usr/bin/env python3
"""tools/train/train.py's checkpoints: a run interrupted twice (the hidden --stop-after, exit 3, once at
a step with no evaluation) and resumed ends with the same weights, optimizer state and log as
the run left alone: model.safetensors byte for byte, the checkpoints' tensors exactly (CPU, one
thread). Then: a finished run asked again exits 0 at once ("trained with this run config
already"); a checkpoint of another run config (other --steps) is refused in one line; a finished
run grows from its checkpoint into a longer one whose learning rate is the same up to there
(train.decay_steps at the first run's end; past it min_lr, or a second cosine from train.tail_lr)
to the weights the longer run reaches from scratch.

    train_resume_test.py

A tiny model (2 layers of 32) on a slice of each text source (a temporary --data-dir) with the
family's tokenizer, for rope and kerple (the scheme whose tensors are clamped after each step;
its mix adds the copy rows and a curriculum phase that ends between the stops, its model attention
biases). Also: mix_phases draw each phase's batches from its own mix; passkey.depths places the
keys; also: each copy row's examples say
their numbers twice, the same; and each model in models/ is its run file's run
(configs/train/NAME.json's run hash is its card's).
Exit 77 when ../shared/data/text is missing.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
TRAIN = os.path.join(ROOT, "tools", "train", "train.py")
sys.path.insert(0, os.path.join(ROOT, "tools"))
from lib import safetensors_io  # noqa: E402
from train import train, train_data  # noqa: E402
from lib.family_names import FAMILY, HYBRID  # noqa: E402

SKIP = 77
sys.path.insert(0, os.path.join(HERE, "..", "helpers"))
from checklist import check, failures  # noqa: E402


def slice_data(cfg, out):
    """The first stories (the held-out tenth included), articles and lines of each source."""
    os.makedirs(out)
    cuts = {"tinystories": lambda t: "\n\n".join(t.split("\n\n")[:80]),
            "wikitext": lambda t: "".join(t.splitlines(keepends=True)[:120]),
            "shakespeare": lambda t: t[:20000]}
    for source, cut in cuts.items():
        with open(train_data.data_path(cfg, source), encoding="utf-8") as f:
            text = cut(f.read())
        with open(os.path.join(out, cfg["data"][source]), "w", encoding="utf-8") as f:
            f.write(text)


def run(config, data, out, ckpt, *extra):
    return subprocess.run([sys.executable, TRAIN, config, "--data-dir", data, "--out", out, "--checkpoint", ckpt,
                           "--device", "cpu", "--threads", "1", *extra], capture_output=True, text=True, timeout=300)


def log_rows(out):
    with open(os.path.join(out, "train_log.csv")) as f:
        return [line.rsplit(",", 1)[0] for line in f.read().splitlines()]  # all but the seconds


def same_state(a, b):
    import torch
    ca, cb = (train.load_checkpoint(p, "cpu") for p in (a, b))
    weights = all(torch.equal(ca["weights"][k], cb["weights"][k]) for k in ca["weights"])
    sa, sb = ca["optimizer"]["state"], cb["optimizer"]["state"]
    adam = sa.keys() == sb.keys() and all(torch.equal(sa[i][k], sb[i][k]) for i in sa for k in sa[i])
    return weights and adam and ca["rng"] == cb["rng"] and ca["passkey_rng"] == cb["passkey_rng"]


def write_config(tmp, name, cfg):
    path = os.path.join(tmp, f"{name}.json")
    with open(path, "w") as f:
        json.dump(cfg, f)
    return path


def same_model(a, b):
    with open(os.path.join(a, "model.safetensors"), "rb") as fa, open(os.path.join(b, "model.safetensors"), "rb") as fb:
        return fa.read() == fb.read()


def growing(tmp, data, cfg, finished, tail):
    """The finished 8-step run `finished` (its model directory and checkpoint) grown to 11 steps,
    at min_lr or on a second cosine from tail_lr."""
    name = f"{cfg['name']}_{'tail' if tail else 'floor'}"
    longer = write_config(tmp, name, dict(cfg, train=dict(cfg["train"], steps=11, decay_steps=8, **tail)))
    fresh, grown = os.path.join(tmp, f"{name}_fresh"), os.path.join(tmp, f"{name}_grown")
    shutil.copy(finished + ".pt", grown + ".pt")
    rf, rg = run(longer, data, fresh, fresh + ".pt"), run(longer, data, grown, grown + ".pt")
    check(f"{name}: a finished run grows into a longer one with the same learning rate up to its end",
          rf.returncode == 0 and rg.returncode == 0 and "growing a finished run at step 8" in rg.stderr,
          rf.stderr[-400:] + " | " + rg.stderr[-400:])
    if rf.returncode == 0 and rg.returncode == 0:
        check(f"{name}: the grown model equals the longer run's from scratch byte for byte", same_model(fresh, grown))
        lr = {row.split(",")[0]: row.split(",")[1] for row in log_rows(grown)}["9"]
        want = train.learning_rate(dict(cfg["train"], decay_steps=8, **tail), 11, 8)
        check(f"{name}: step 9's learning rate is {want:.6g} ({'the tail' if tail else 'min_lr'})",
              float(lr) == float(f"{want:.6g}") and (want > cfg["train"]["min_lr"]) == bool(tail), f"{lr}")


def refusal(call, *args):
    """What call(*args) exits with (train.py refuses a bad run config through sys.exit(message)),
    or "accepted"."""
    try:
        call(*args)
    except SystemExit as e:
        return str(e)
    return "accepted"


def copy_rows(base):
    """train_data.CopyRows: rows of context + 1 ids, BOS-led examples "Numbers: K... Again: K...."
    with 1-4 five-digit numbers, the repeat equal to the list (the last example may be cut)."""
    import re
    import numpy as np
    import sentencepiece as spm
    sp = spm.SentencePieceProcessor(model_file=os.path.join(ROOT, base["tokenizer"]["dir"], "tokenizer.model"))
    rows = train_data.CopyRows(sp, base)
    rng, whole, counts, bad = np.random.default_rng(5), 0, set(), []
    for _ in range(20):
        ids = rows.row(rng).tolist()
        if len(ids) != base["train"]["context"] + 1 or ids[0] != train_data.BOS:
            bad.append(f"row of {len(ids)} ids starting {ids[:1]}")
            continue
        examples = [sp.decode(ids[a + 1:b]) for a, b in train_data.examples(ids)]
        for text in examples[:-1]:  # the last one may be cut by the row's end
            m = re.fullmatch(r"Numbers: ((?:\d{5} ?)+)\. Again: ((?:\d{5} ?)+)\.", text.strip())
            if not m or m[1] != m[2]:
                bad.append(text)
                continue
            whole += 1
            counts.add(len(m[1].split()))
    check("copy rows: each whole example says its numbers twice, the same", not bad and whole >= 20, str(bad[:3]))
    check("copy rows: 1 to 4 numbers an example", counts == {1, 2, 3, 4}, str(counts))


def mix_phases(base, data):
    """mix_phases: the batches of a phase draw from its mix, then from the next; a run without
    phases draws every step from "mix"; a bad phase exits with one line naming it."""
    import numpy as np
    import sentencepiece as spm
    sp = spm.SentencePieceProcessor(model_file=os.path.join(ROOT, base["tokenizer"]["dir"], "tokenizer.model"))
    cfg = dict(base, mix={"tinystories": 1.0},
               mix_phases=[{"steps": 2, "mix": {"copy": 1.0}}, {"steps": 1, "mix": {"shakespeare": 1.0}}])
    mix = train_data.Mix(cfg, sp, data)
    rng = np.random.default_rng(3)
    said = [{sp.decode(r.tolist()).lstrip().split(":")[0] == "Numbers" for r in mix.batch(rng, rng, 4, step)}
            for step in range(5)]
    stories = set(mix.streams["tinystories"].tolist())
    check("mix_phases: steps 0-1 draw copy rows only, step 2 on none",
          said == [{True}, {True}, {False}, {False}, {False}], str(said))
    check("mix_phases: from the last phase's end the final mix (tinystories) holds",
          all(set(mix.batch(rng, rng, 2, s).ravel().tolist()) <= stories for s in (3, 100)))
    check("mix_phases: the summary lists each phase",
          "steps 0..1: copy 1.00" in mix.summary(10, 4) and "steps 2..2: shakespeare 1.00" in mix.summary(10, 4),
          mix.summary(10, 4))
    plain = train_data.Mix(dict(base, mix={"tinystories": 0.5, "copy": 0.5}), sp, data)
    check("mix_phases: none, and every step draws from the mix",
          [list(plain.p_at(s)) for s in (0, 10**6)] == [[0.5, 0.5]] * 2)
    said = refusal(train_data.mix_schedule, {"mix": {"copy": 1}, "mix_phases": [{"steps": 0, "mix": {}}]})
    check("mix_phases: a phase of 0 steps exits with one line naming it",
          said.startswith("train.py: mix_phases entry") and "\n" not in said, said)


def passkey_depths(base):
    """passkey.depths [lo, hi]: the key sentence sits where the range says (the share of the
    prompt's text before it); held-out rows keep every depth; a bad range exits in one line."""
    import numpy as np
    import sentencepiece as spm
    sp = spm.SentencePieceProcessor(model_file=os.path.join(ROOT, base["tokenizer"]["dir"], "tokenizer.model"))

    def key_at(depths, n=12):
        cfg = dict(base, passkey=dict(base["passkey"], lengths=[120, 129], depths=depths))
        pk, rng, at = train_data.Passkey(sp, cfg), np.random.default_rng(9), []
        for _ in range(n):
            ids, prompt, _ = pk.example(rng)
            text = sp.decode(ids[1:prompt])
            at.append(text.index("The pass key is") / len(text))
        return at
    early, late = key_at([0, 0.2]), key_at([0.8, 1])
    # (the key sentence and the question take ~40% of a 120-token prompt: depth 1 is ~0.6 of its text)
    check("passkey.depths: keys at depths 0-0.2 lie in the prompt's first fifth of text, 0.8-1 past 0.45",
          max(early) < 0.2 and min(late) > 0.45, f"{early} {late}")
    plain = train_data.Passkey(sp, base)
    rng_a, rng_b = np.random.default_rng(4), np.random.default_rng(4)
    same = train_data.Passkey(sp, dict(base, passkey=dict(base["passkey"], depths=[0, 1])))
    check("passkey.depths: [0, 1] draws the rows a run without it draws",
          all(np.array_equal(plain.row(rng_a)[0], same.row(rng_b)[0]) for _ in range(3)))
    said = refusal(train_data.Passkey, sp, dict(base, passkey=dict(base["passkey"], depths=[0.7, 0.2])))
    check("passkey.depths [0.7, 0.2] exits with one line naming it",
          said.startswith("train.py: passkey.depths") and "\n" not in said, said)


def fgate_init(base):
    """train.fgate_decay_time: FoX's gate biases so that head h's gate forgets by 1/e in t_h tokens,
    t log-spaced from T_min to T_max, the same in every layer; refused for another scheme or a
    malformed pair, in one line naming the key."""
    import math
    import torch
    heads = base["model"]["num_attention_heads"]
    bias = train.fgate_bias({"type": "fox"}, [2, 512], heads)
    times = [-1 / math.log(torch.sigmoid(b.double()).item()) for b in bias]
    want = [2 * 256 ** (h / (heads - 1)) for h in range(heads)]
    check("fgate_decay_time: head h forgets by 1/e in t_h tokens, log-spaced 2..512",
          all(abs(t - w) < 1e-3 * w for t, w in zip(times, want)), f"{times} against {want}")
    for position, value, says in (({"type": "rope"}, [2, 512], "is for FoX's gates"),
                                  ({"type": "fox"}, [512, 2], "0 < T_min <= T_max"),
                                  ({"type": "fox"}, [0, 5], "0 < T_min <= T_max"),
                                  ({"type": "fox"}, "long", "0 < T_min <= T_max")):
        said = refusal(train.fgate_bias, position, value, heads)
        check(f"fgate_decay_time {value!r} on {position['type']}: refused in one line",
              says in said and "\n" not in said and said.startswith("train.py: train.fgate_decay_time"), said)


def stick_reach_init(base):
    """train.stick_reach: q and k biases that start head h's scores at -ln(T_h - 1) on any input
    with zero projections, so each key takes 1/T_h of the stick left (T log-spaced 2..512, every
    layer); refused without attention biases, for another scheme, or malformed, in one line."""
    import math
    import torch
    hf = dict(base["model"], attention_bias=True, vocab_size=64, max_position_embeddings=128)
    heads, hd = hf["num_attention_heads"], hf["hidden_size"] // hf["num_attention_heads"]
    W = train.init_weights(hf, 64, {"type": "stick_breaking"}, 1, stick_reach=[2, 512])
    want = [2 * 256 ** (h / (heads - 1)) for h in range(heads)]
    for layer in (0, hf["num_hidden_layers"] - 1):
        p = f"model.layers.{layer}.self_attn."
        z = (W[p + "q_proj.bias"].double().view(heads, hd) * W[p + "k_proj.bias"].double().view(heads, hd)).sum(-1)
        reach = [1 / torch.sigmoid(s / math.sqrt(hd)).item() for s in z]
        check(f"stick_reach, layer {layer}: head h's keys take 1/T_h of the stick, T log-spaced 2..512",
              all(abs(r - w) < 1e-3 * w for r, w in zip(reach, want)), f"{reach} against {want}")
    for position, model, value, says in (({"type": "fox"}, hf, [2, 512], "is for stick-breaking"),
                                         ({"type": "stick_breaking"}, dict(hf, attention_bias=False), [2, 512],
                                          "needs model.attention_bias"),
                                         ({"type": "stick_breaking"}, hf, [1, 5], "1 < T_min <= T_max"),
                                         ({"type": "stick_breaking"}, hf, [9, 3], "1 < T_min <= T_max")):
        said = refusal(train.stick_reach_bias, position, model, value)
        check(f"stick_reach {value!r} on {position['type']}: refused in one line",
              says in said and "\n" not in said and said.startswith("train.py: train.stick_reach"), said)


def scenario(tmp, data, base, position):
    name = position["type"]
    cfg = dict(base, name=name, position=position)
    biases = name == "kerple"  # one scenario trains on every synthetic source, with attention biases
    if biases:  # and a curriculum whose phase ends at step 5, between the stops at 4 and 6
        cfg["mix"] = dict(cfg["mix"], copy=0.1)
        cfg["mix_phases"] = [{"steps": 5, "mix": {"passkey": 0.5, "copy": 0.3, "wikitext": 0.2}}]
    cfg["model"] = dict(cfg["model"], attention_bias=biases, hidden_size=32, num_hidden_layers=2,
                        num_attention_heads=2, num_key_value_heads=2, intermediate_size=64)
    cfg["train"] = dict(cfg["train"], context=64, batch_size=4, steps=8, warmup=2, eval_every=3, eval_windows=4)
    cfg["passkey"] = dict(cfg["passkey"], lengths=[58, 65], eval_windows=4)
    if "ruler" in cfg:  # the family's RULER rows, with tasks whose fixed text fits 65 tokens
        cfg["ruler"] = dict(cfg["ruler"], lengths=[58, 65], tasks=["niah_single_1", "niah_single_2", "niah_multikey_2"])
    config = write_config(tmp, name, cfg)
    a, b = os.path.join(tmp, f"{name}_a"), os.path.join(tmp, f"{name}_b")
    ra = run(config, data, a, a + ".pt")
    check(f"{name}: uninterrupted run", ra.returncode == 0, ra.stderr[-800:])
    rb = [run(config, data, b, b + ".pt", "--stop-after", "4"), run(config, data, b, b + ".pt", "--stop-after", "6"),
          run(config, data, b, b + ".pt")]
    check(f"{name}: stopped after 4 and 6 (exit 3), then finished",
          [r.returncode for r in rb] == [3, 3, 0] and "resuming at step 6" in rb[2].stderr,
          " | ".join(r.stderr[-400:] for r in rb))
    if ra.returncode or rb[2].returncode:
        return
    check(f"{name}: resumed model.safetensors equals the uninterrupted one byte for byte", same_model(a, b))
    if biases:
        tensors = safetensors_io.load(os.path.join(a, "model.safetensors"))
        trained = [f"model.layers.{i}.self_attn.{m}_proj.bias" for i in range(2) for m in "qkvo"]
        with open(os.path.join(a, "config.json")) as f:
            said = json.load(f).get("attention_bias")
        check(f"{name}: attention_bias trains q/k/v/o biases and config.json says so",
              said is True and all(t in tensors and abs(tensors[t]).max() > 0 for t in trained),
              f"config {said}, {[t for t in trained if t not in tensors]} missing")
    check(f"{name}: final checkpoints' weights, AdamW state and generators equal", same_state(a + ".pt", b + ".pt"))
    check(f"{name}: train_log.csv equal but for the seconds", log_rows(a) == log_rows(b),
          f"{log_rows(a)} vs {log_rows(b)}")
    with open(os.path.join(b, "card.json")) as f:
        card = json.load(f)
    check(f"{name}: card.json lists the three segments", [s["from_step"] for s in card["segments"]] == [0, 4, 6],
          str(card["segments"]))
    again = run(config, data, a, a + ".pt")
    check(f"{name}: a finished run asked again exits 0 at once",
          again.returncode == 0 and "already" in again.stderr, again.stderr[-400:])
    other = run(config, data, os.path.join(tmp, f"{name}_c"), a + ".pt", "--steps", "9")
    err = other.stderr.strip().splitlines()
    check(f"{name}: a checkpoint of another run config is refused in one line",
          other.returncode not in (0, 3) and err and "another run config" in err[-1] and "Traceback" not in other.stderr,
          other.stderr[-400:])
    if name == "rope":
        for tail in ({}, {"tail_lr": 2e-3}):
            growing(tmp, data, cfg, a, tail)


def family_run_files():
    """Each model of the family is what its run file trains: the run hash of
    configs/train/NAME.json (a hybrid member's: configs/train/hybrid/NAME.json; settings, data and
    tokenizer) is the one in models/NAME/card.json, so tools/train/train_family.sh makes (or resumes
    into) the committed weights and no other."""
    tok_dir = os.path.join(ROOT, "models", "tokenizer")
    names = [n for n in FAMILY + HYBRID if os.path.exists(os.path.join(ROOT, "models", n, "card.json"))]
    differ = []
    for name in names:
        with open(os.path.join(ROOT, "models", name, "card.json")) as f:
            card = json.load(f)
        cfg = train_data.load_run_config(os.path.join(ROOT, "configs", "train", *(["hybrid"] if name in HYBRID else []),
                                                 f"{name}.json"))
        _, run_hash = train.run_identity(cfg, cfg["train"]["steps"], None, tok_dir)
        if run_hash != card["config_hash"]:
            differ.append(f"{name}: run file {run_hash}, card {card['config_hash']}")
    check(f"the family's {len(names)} models are their run files' runs (run hash = card's)",
          sorted(names) == sorted(FAMILY + HYBRID) and not differ, str(differ or names))


def main():
    base = train_data.load_run_config(os.path.join(ROOT, "configs", "train", "family.json"))
    if not os.path.exists(train_data.data_path(base, "tinystories")):
        print(f"SKIP: {train_data.data_path(base, 'tinystories')} not found")
        return SKIP
    with tempfile.TemporaryDirectory() as tmp:
        data = os.path.join(tmp, "data")
        slice_data(base, data)
        copy_rows(base)
        mix_phases(base, data)
        passkey_depths(base)
        fgate_init(base)
        stick_reach_init(base)
        family_run_files()
        for position in ({"type": "rope"}, {"type": "kerple"}):
            scenario(tmp, data, base, position)
    print(f"{len(failures)} failed" if failures else "all passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
