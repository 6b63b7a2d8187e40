#!/usr/bin/python3
"""The language models of vision-language checkpoints as published, against the float64 reference
(tools/reference/reference.py, moe.py), and what pert refuses of them.

Qwen3-VL-MoE (Qwen3VLMoeForConditionalGeneration: Qwen3-VL-30B-A3B, -235B-A22B): a tiny random
checkpoint (3 layers, layer 1 dense by mlp_only_layers, 8 experts of width 32, top 2, M-RoPE
interleaved [4, 4, 4]) laid out as Qwen publishes it: the language model under
model.language_model.*, the vision tower under model.visual.*, the keys under text_config, each
sparse layer's experts fused input-first (mlp.experts.gate_up_proj [E, d, 2·ff], gate columns
first; mlp.experts.down_proj [E, ff, d]). In F32 and BF16, pert's logits within 1e-4 of the
reference's in one prefill, token by token and in chunks of 5; the same F32 weights in
transformers v5's in-memory layout ([E, 2·ff, d], [E, d, ff]) and per expert give the published
F32 checkpoint's logits bit for bit.

The bad cases break such checkpoints (and Gemma 3's, whose good cases are reference_test.py's
gemma3_vl_*) and want one line naming the file and the key or tensor: no language model tensors,
a text_config that is not an object, both of Gemma 3's namings at once, a renamed tensor twice,
norm_topk_prob false, a misshapen fused tensor.

    vision_language_test.py PERT_LOGITS [CASE ...]
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np
import torch

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(here)), "tools"))
sys.path.insert(0, os.path.join(here, "..", "helpers"))  # logits_check
from lib import safetensors_io  # noqa: E402
from reference import moe, reference  # noqa: E402
from logits_check import pert_logits  # noqa: E402

LM = "model.language_model."
SECTIONS = [4, 4, 4]  # of head_dim 24's 12 rotary pairs


def make_qwen3_vl_moe(out, layout, dtype="F32", seed=5):
    """A Qwen3-VL-MoE checkpoint in out: layout "published" (input-first fused experts), "v5"
    (transformers v5's in-memory fused layout) or "per_expert"; the same weights for each."""
    tmp = out + ".text"
    moe.make_moe_model(tmp, "qwen3moe", seed=seed, fused=layout != "per_expert", layers=3,
                       extra_config={"mlp_only_layers": [1], "rope_theta": 50000.0})
    t = safetensors_io.load(os.path.join(tmp, "model.safetensors"))
    with open(os.path.join(tmp, "config.json")) as f:
        text = json.load(f)
    shutil.rmtree(tmp)
    if layout == "published":
        for name in [n for n in t if n.endswith(("experts.gate_up_proj", "experts.down_proj"))]:
            t[name] = np.ascontiguousarray(t[name].transpose(0, 2, 1))
    t = {(LM + k[len("model."):] if k.startswith("model.") else k): v for k, v in t.items()}
    g = np.random.default_rng(seed)
    t.update({"model.visual.patch_embed.proj.weight": g.standard_normal((32, 24)),
              "model.visual.blocks.0.attn.qkv.weight": g.standard_normal((96, 32)),
              "model.visual.deepstack_merger_list.0.linear_fc1.weight": g.standard_normal((64, 32))})
    for key in ("architectures", "use_sliding_window", "sliding_window", "max_window_layers"):
        text.pop(key, None)
    text.update(model_type="qwen3_vl_moe_text", router_aux_loss_coef=0.001,
                rope_scaling={"rope_type": "default", "mrope_section": SECTIONS, "mrope_interleaved": True})
    config = {"architectures": [moe.QWEN3_VL_MOE], "model_type": "qwen3_vl_moe",
              "tie_word_embeddings": text.pop("tie_word_embeddings"), "image_token_id": 90, "video_token_id": 91,
              "vision_start_token_id": 92, "vision_end_token_id": 93, "text_config": text,
              "vision_config": {"depth": 1, "hidden_size": 32, "out_hidden_size": 64, "deepstack_visual_indexes": [0]}}
    os.makedirs(out, exist_ok=True)
    safetensors_io.save(os.path.join(out, "model.safetensors"), t, dtype)
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(config, f, indent=2)


def check(failures, what, err, tol):
    print(f"{what:52s} max|Δ| = {err:.2e} (≤ {tol:g})")
    if not err <= tol:
        failures.append(what)


def run_good(binary, work, failures):
    models = {}
    for layout, dtype in (("published", "F32"), ("published", "BF16"), ("v5", "F32"), ("per_expert", "F32")):
        models[layout, dtype] = os.path.join(work, f"{layout}_{dtype}")
        make_qwen3_vl_moe(models[layout, dtype], layout, dtype)
    ids = [int(i) for i in np.random.default_rng(3).integers(0, 96, size=24)]  # (make_moe_model's vocab)
    for dtype in ("F32", "BF16"):
        config, W = reference.load_model_dir(models["published", dtype])  # (BF16: the rounded weights)
        with torch.no_grad():
            want = reference.forward(config, W, ids).numpy()
        for chunk in (None, 1, 5):
            got = pert_logits(binary, models["published", dtype], ids, work, chunk)
            how = f"chunks of {chunk}" if chunk else "prefill"
            check(failures, f"qwen3_vl_moe published {dtype} {how} vs reference", float(np.abs(got - want).max()), 1e-4)
    published = pert_logits(binary, models["published", "F32"], ids, work)
    for layout in ("v5", "per_expert"):
        got = pert_logits(binary, models[layout, "F32"], ids, work)
        check(failures, f"qwen3_vl_moe {layout} vs published (F32, bit for bit)", float(np.abs(got - published).max()), 0.0)


def bad_checkpoints(work):
    """(what, text its one-line error must hold, model dir) for broken VL checkpoints."""
    good = os.path.join(work, "good")
    make_qwen3_vl_moe(good, "published")
    t = safetensors_io.load(os.path.join(good, "model.safetensors"))
    with open(os.path.join(good, "config.json")) as f:
        config = json.load(f)
    gemma = os.path.join(work, "gemma")
    reference.make_model(gemma, None, layers=2, gemma=True, qk_norm=True, head_dim=16, vl="gemma3_v4",
                         extra_config={"architectures": ["Gemma3ForConditionalGeneration"], "model_type": "gemma3"})
    g = safetensors_io.load(os.path.join(gemma, "model.safetensors"))
    gate_up = LM + "layers.0.mlp.experts.gate_up_proj"
    cases = [
        ("no language model", "no language model tensors (model.language_model.* or model.layers.*)", good,
         {k: v for k, v in t.items() if not k.startswith(LM)}, None),
        ("text_config not an object", "config.json: text_config must be an object", good, t, dict(config, text_config=[1])),
        ("norm_topk_prob false", "norm_topk_prob is false", good, t,
         dict(config, text_config=dict(config["text_config"], norm_topk_prob=False))),
        # (named as pert reads it, model.layers.*, as every error after the renaming)
        ("misshapen fused experts", "'model.layers.0.mlp.experts.gate_up_proj' has shape [8, 64, 40]", good, dict(t, **{gate_up: t[gate_up][:, :, :40]}), None),
        ("both Gemma 3 namings", "'language_model.model.layers.0.input_layernorm.weight' and "
         "'model.language_model.layers.0.input_layernorm.weight'", gemma,
         dict(g, **{"model.language_model.layers.0.input_layernorm.weight": g["language_model.model.layers.0.input_layernorm.weight"]}),
         None),
        ("two namings, no clash", "two namings of Gemma3ForConditionalGeneration's language model", gemma,
         dict(g, **{"model.language_model.layers.9.extra.weight": g["language_model.model.norm.weight"]}), None),
        ("lm_head twice", "'language_model.lm_head.weight' and 'lm_head.weight'", gemma,
         dict(g, **{"language_model.lm_head.weight": g["language_model.model.embed_tokens.weight"],
                    "lm_head.weight": g["language_model.model.embed_tokens.weight"]}), None),
    ]
    for what, text, base, tensors, cfg in cases:
        bad = os.path.join(work, what.replace(" ", "_"))
        shutil.copytree(base, bad)
        safetensors_io.save(os.path.join(bad, "model.safetensors"), tensors)
        if cfg is not None:
            with open(os.path.join(bad, "config.json"), "w") as f:
                json.dump(cfg, f)
        yield what, text, bad


def run_bad(binary, work, failures):
    ids = os.path.join(work, "ids.txt")
    with open(ids, "w") as f:
        f.write("1 2 3")
    for what, text, bad in bad_checkpoints(work):
        r = subprocess.run([binary, bad, ids, os.path.join(work, "out.bin")], capture_output=True, text=True)
        lines = r.stderr.strip().splitlines()
        ok = r.returncode != 0 and len(lines) == 1 and text in lines[0] and bad in lines[0]
        print(f"bad {what:28s} {'refused' if ok else 'NOT REFUSED AS WANTED'}: {r.stderr.strip()}")
        if not ok:
            failures.append(f"bad {what}")


CASES = {"qwen3_vl_moe": run_good, "bad": run_bad}


def main():
    binary, names = sys.argv[1], sys.argv[2:] or list(CASES)
    failures = []
    for name in names:
        with tempfile.TemporaryDirectory() as work:
            CASES[name](binary, work, failures)
    if failures:
        print("vision_language_vs_reference: FAILED:", ", ".join(failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
