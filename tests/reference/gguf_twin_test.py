#!/usr/bin/python3
"""GGUF twins of gpt-oss, Qwen2-VL / Qwen2.5-VL, Qwen3-VL and DeepSeek V2 / V3: tools/convert/to_gguf.py writes a tiny
random checkpoint as llama.cpp writes these architectures (gpt-oss; qwen2vl and qwen3vl, the text
model file), and pert runs the file and the directory to the same logits (max |Δ| ≤ 1e-4; measured
0), in one prefill, token by token and in chunks of 5.

  gpt_oss   experts input-first F32 (the F32 file also against the float64 reference, ≤ 1e-4) and
            as shipped in MXFP4 (*_blocks / *_scales carried as GGML MXFP4, multiplied as stored on
            both sides); the file's names, shapes and types as llama.cpp's; layer_types other than
            the alternation as attention.sliding_window_pattern; a config without layer_types and
            sliding_window as GptOssConfig's defaults. Refused, naming the key or tensor: a
            swiglu_limit other than 7 (to_gguf.py), rope.freq_base_swa unlike rope.freq_base, no
            expert_feed_forward_length, an expert bias stack of the wrong shape.
  qwen2vl   Qwen2-VL (transformers v4's layout: model.layers.*, visual.*) and Qwen2.5-VL's class;
  qwen3vl   Qwen3-VL (v5: model.language_model.*, model.visual.*, text_config): the vision tower left
            out, rope.dimension_sections [t, h, w, 0], Qwen3-VL's n_deepstack_layers. With the Python
            module (PYTHONPATH), positions per axis (a 2-D image layout, where the sections matter)
            give the same logits from both. Refused, naming the key: a fourth section not 0, three
            sections summing wrong, n_deepstack_layers past the layer count.

  deepseek  DeepSeek V3 (sigmoid groups, e_score_correction_bias, q_lora_rank; plain and YaRN) and V2-Lite
            (softmax, q_proj) as deepseek2 in llama.cpp b4748's layout (attn_kv_b whole) and its MLA split's
            (attn_k_b / attn_v_b, key_length_mla): F32 files equal the directory, Q8_0 files equal the file's
            dequantized directory run with --dtype q8_0; the V3 file against the float64 reference; a V3
            file without group keys (as b4748 writes it) routes as n_group 1. Refused, naming the key or
            tensor: no kv_lora_rank, a misshapen attn_kv_b / attn_k_b, expert_gating_func 3, V2 with YaRN,
            YaRN without yarn_log_multiplier, softmax with expert groups, and (to_gguf.py) rope_interleave false.

    gguf_twin_test.py PERT_LOGITS ARCH      ARCH: gpt_oss, qwen2vl, qwen3vl or deepseek
"""
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(here)), "tools"))
sys.path.insert(0, os.path.join(here, "..", "helpers"))  # logits_check
from convert import gguf, to_gguf, tokenizer_json  # noqa: E402
from reference import deepseek as deepseek_ref, moe, reference  # noqa: E402
from logits_check import pert_logits  # noqa: E402
from reference_test import QWEN2_VL, QWEN3_VL  # noqa: E402

RUNS = ((None, "prefill"), (1, "decode"), (5, "chunks of 5"))


class Check:
    def __init__(self):
        self.failures = []

    def __call__(self, ok, what):
        print(f"{'ok  ' if ok else 'FAIL'} {what}")
        if not ok:
            self.failures.append(what)



def with_config(src, out, **changes):
    """A model directory at `out` with src's weights and tokenizer (hard links) and its config.json
    with `changes` over src's."""
    os.makedirs(out)
    for name in ("model.safetensors", "tokenizer.json"):
        os.link(os.path.join(src, name), os.path.join(out, name))
    with open(os.path.join(src, "config.json")) as f:
        config = json.load(f)
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(dict(config, **changes), f)
    return out

def tokenizer(model_dir):
    tok, vocab = to_gguf.tiny_tokenizer()
    tokenizer_json.write(tok, os.path.join(model_dir, "tokenizer.json"))
    return vocab


def same_logits(binary, model_dir, gguf_path, ids, work, check, what):
    for chunk, how in RUNS:
        err = float(np.abs(pert_logits(binary, gguf_path, ids, work, chunk=chunk) -
                           pert_logits(binary, model_dir, ids, work, chunk=chunk)).max())
        check(err <= 1e-4, f"{what} {how}: GGUF vs directory max|Δ| = {err:.1e} (≤ 1e-4)")


def rewritten(path, out, drop=(), keys=None, tensors=None):
    """`path` rewritten as `out` without the keys in drop, with keys {key: (kind, value)} and tensors
    {name: (type, shape innermost first, raw bytes)} set."""
    version, metadata, infos = gguf.read_gguf(path)
    metadata = {k: v for k, v in metadata.items() if k not in drop}
    metadata.update(keys or {})
    ts = {t["name"]: (t["type"], t["shape"], t["bytes"]) for t in infos}
    ts.update(tensors or {})
    gguf.write_gguf(out, [(k, kind, v) for k, (kind, v) in metadata.items()],
                    [(n, *ts[n]) for n in sorted(ts)], version=version)
    return out


def refused(binary, model, message, work, check, what):
    ids = os.path.join(work, "ids.txt")
    with open(ids, "w") as f:
        f.write("3 4 5")
    r = subprocess.run([binary, model, ids, os.path.join(work, "out.bin")], capture_output=True, text=True)
    lines = [line for line in r.stderr.splitlines() if line.strip()]
    check(r.returncode != 0 and any(message in line for line in lines),
          f"{what}: refused naming it ({lines[-1] if lines else 'no message'})")


def gpt_oss(binary, work, check):
    ids = list(np.random.default_rng(5).integers(3, 96, size=24))  # past the window (4) and YaRN's L (16)
    for mx in (False, True):
        src, path = os.path.join(work, f"gpt-oss-{'mxfp4' if mx else 'f32'}"), os.path.join(work, f"gpt-oss-{mx}.gguf")
        os.makedirs(src)
        vocab = tokenizer(src)
        moe.make_gpt_oss_model(src, seed=1, mxfp4=mx, vocab=vocab)
        to_gguf.convert(src, path, "F32")
        layout = "MXFP4 as stored" if mx else "F32 input-first"
        same_logits(binary, src, path, ids, work, check, f"gpt-oss {layout}")
        _, md, infos = gguf.read_gguf(path)
        t = {i["name"]: (i["type"], i["shape"]) for i in infos}
        d, ff, E, heads = 64, 32, 4, 4
        expect = {"blk.0.attn_sinks.weight": ("F32", [heads]), "blk.1.post_attention_norm.weight": ("F32", [d]),
                  "blk.0.ffn_gate_inp.weight": ("F32", [d, E]), "blk.0.ffn_gate_inp.bias": ("F32", [E]),
                  "blk.0.ffn_gate_exps.weight": ("MXFP4" if mx else "F32", [d, ff, E]),
                  "blk.0.ffn_up_exps.weight": ("MXFP4" if mx else "F32", [d, ff, E]),
                  "blk.1.ffn_down_exps.weight": ("MXFP4" if mx else "F32", [ff, d, E]),
                  "blk.0.ffn_gate_exps.bias": ("F32", [ff, E]), "blk.1.ffn_down_exps.bias": ("F32", [d, E]),
                  "blk.0.attn_output.bias": ("F32", [d])}
        wrong = {n: t.get(n) for n, v in expect.items() if t.get(n) != v}
        check(not wrong and not any("ffn_norm" in n for n in t), f"gpt-oss {layout}: llama.cpp's tensor names, types, shapes {wrong or ''}")
        keys = {k: md[k][1] for k in md if k.startswith("gpt-oss.")}
        check(md["general.architecture"][1] == "gpt-oss" and keys.get("gpt-oss.attention.sliding_window") == 4 and
              keys.get("gpt-oss.expert_feed_forward_length") == ff and keys.get("gpt-oss.expert_count") == E and
              keys.get("gpt-oss.rope.scaling.type") == "yarn" and "gpt-oss.attention.sliding_window_pattern" not in keys,
              f"gpt-oss {layout}: llama.cpp's keys ({len(keys)})")
        if not mx:  # the file against the float64 reference
            config, W = reference.load_model_dir(src)
            with torch.no_grad():
                want = reference.forward(config, W, ids).numpy()
            err = float(np.abs(pert_logits(binary, path, ids, work) - want).max())
            check(err <= 1e-4, f"gpt-oss F32 GGUF vs the float64 reference max|Δ| = {err:.1e} (≤ 1e-4)")
            f32_src, f32_path = src, path

    # Keys that change the math: read (a window pattern), or refused with the key's name
    both = rewritten(f32_path, os.path.join(work, "both.gguf"),
                     keys={"gpt-oss.attention.sliding_window_pattern": (("array", "bool"), [True, True])})
    windowed = with_config(f32_src, os.path.join(work, "windowed"), layer_types=["sliding_attention"] * 2)
    with open(os.path.join(f32_src, "config.json")) as f:
        config = json.load(f)
    err = float(np.abs(pert_logits(binary, both, ids, work) - pert_logits(binary, windowed, ids, work)).max())
    moved = float(np.abs(pert_logits(binary, both, ids, work) - pert_logits(binary, f32_src, ids, work)).max())
    check(err <= 1e-4 and moved > 1e-3, f"gpt-oss sliding_window_pattern [true, true] = layer_types both sliding "
          f"(max|Δ| {err:.1e}; {moved:.1e} from the alternation)")
    with open(os.path.join(windowed, "config.json"), "w") as f:  # GptOssConfig's defaults: even layers windowed
        json.dump({k: v for k, v in config.items() if k != "layer_types"}, f)
    err = float(np.abs(pert_logits(binary, windowed, ids, work) - pert_logits(binary, f32_src, ids, work)).max())
    check(err == 0, f"gpt-oss without layer_types: the even layers windowed, as GptOssConfig (max|Δ| {err:.1e})")
    with open(os.path.join(windowed, "config.json"), "w") as f:
        json.dump(dict(config, swiglu_limit=5.0), f)
    try:
        to_gguf.convert(windowed, os.path.join(work, "limit.gguf"), "F32")
        check(False, "to_gguf.py refuses swiglu_limit 5")
    except ValueError as e:
        check("swiglu_limit" in str(e), f"to_gguf.py refuses swiglu_limit 5 ({e})")
    refused(binary, rewritten(f32_path, os.path.join(work, "swa.gguf"),
                              keys={"gpt-oss.rope.freq_base_swa": ("f32", 10000.0)}),
            "key 'gpt-oss.rope.freq_base_swa'", work, check, "gpt-oss rope.freq_base_swa 1e4 beside freq_base 1.5e5")
    refused(binary, rewritten(f32_path, os.path.join(work, "noffexp.gguf"), drop=("gpt-oss.expert_feed_forward_length",)),
            "gpt-oss.expert_feed_forward_length", work, check, "gpt-oss without expert_feed_forward_length")
    bias = np.zeros((4, 33), np.float32)  # [E][ff + 1]
    refused(binary, rewritten(f32_path, os.path.join(work, "bias.gguf"),
                              tensors={"blk.0.ffn_gate_exps.bias": ("F32", [33, 4], bias.tobytes())}),
            "model.layers.0.mlp.experts.0.gate_proj.bias", work, check, "gpt-oss ffn_gate_exps.bias [4][33]")


def vision_language(binary, work, check, arch):
    cases = {"qwen2vl": [("Qwen2-VL", {"qkv_bias": True, "vl": "v4"}, QWEN2_VL),
                         ("Qwen2.5-VL", {"qkv_bias": True, "vl": "v4"},
                          dict(QWEN2_VL, architectures=["Qwen2_5_VLForConditionalGeneration"], model_type="qwen2_5_vl"))],
             "qwen3vl": [("Qwen3-VL", {"qk_norm": True, "vl": "v5", "tie": True},
                          dict(QWEN3_VL, vision_config={"deepstack_visual_indexes": [0, 1]}))]}[arch]
    ids = list(np.random.default_rng(5).integers(3, 96, size=40))
    for name, options, config in cases:
        src, path = os.path.join(work, name), os.path.join(work, name + ".gguf")
        os.makedirs(src)
        vocab = tokenizer(src)
        reference.make_model(src, None, seed=3, vocab=vocab, trained=64, extra_config=config, **options)
        if options["vl"] == "v5":  # make_model writes its own vision_config: keep the deepstack indexes
            with open(os.path.join(src, "config.json")) as f:
                c = json.load(f)
            c["vision_config"]["deepstack_visual_indexes"] = [0, 1]
            with open(os.path.join(src, "config.json"), "w") as f:
                json.dump(c, f)
        to_gguf.convert(src, path, "F32")
        _, md, infos = gguf.read_gguf(path)
        check(md["general.architecture"][1] == arch and md[arch + ".rope.dimension_sections"][1] == config["rope_scaling"]["mrope_section"] + [0]
              and not any("visual" in t["name"] for t in infos) and
              (arch != "qwen3vl" or md["qwen3vl.n_deepstack_layers"][1] == 2),
              f"{name}: {arch}'s keys (sections {md[arch + '.rope.dimension_sections'][1]}), no vision tensors ({len(infos)} tensors)")
        same_logits(binary, src, path, ids, work, check, name)
        per_axis(src, path, ids, check, name)
    sections = arch + ".rope.dimension_sections"
    refused(binary, rewritten(path, os.path.join(work, "fourth.gguf"), keys={sections: (("array", "i32"), [2, 3, 2, 1])}),
            f"key '{sections}' holds 1 at 3", work, check, f"{arch} a fourth M-RoPE section of 1")
    refused(binary, rewritten(path, os.path.join(work, "sum.gguf"), keys={sections: (("array", "i32"), [2, 3, 2, 0])}),
            f"key '{sections}' is [2,3,2]", work, check, f"{arch} sections summing to 7 of 8 rotary pairs")
    refused(binary, rewritten(path, os.path.join(work, "deep.gguf"), keys={arch + ".n_deepstack_layers": ("u32", 9)}),
            f"key '{arch}.n_deepstack_layers'", work, check, f"{arch} n_deepstack_layers 9 of 2 layers")


def deepseek(binary, work, check):
    ids = list(np.random.default_rng(5).integers(3, 96, size=24))  # past YaRN's L (16)
    cases = (("V3", "v3", False), ("V3 YaRN", "v3", True), ("V2-Lite", "v2", False), ("V2-Lite YaRN", "v2", True))
    for name, kind, yarn in cases:
        src = os.path.join(work, name.replace(" ", "_"))
        os.makedirs(src)
        vocab = tokenizer(src)
        deepseek_ref.make_deepseek_model(src, kind, seed=1, vocab=vocab, yarn=yarn)
        for split in (False, True):
            layout = "MLA split" if split else "b4748"
            path = os.path.join(work, f"{name}-{layout}.gguf".replace(" ", "_"))
            to_gguf.convert(src, path, "F32", mla_split=split)
            same_logits(binary, src, path, ids, work, check, f"{name} {layout} F32")
        quantized, deq = os.path.join(work, name.replace(" ", "_") + "-q8_0.gguf"), os.path.join(work, name.replace(" ", "_") + "-deq")
        to_gguf.convert(src, quantized, "Q8_0", dequantized_dir=deq)
        err = float(np.abs(pert_logits(binary, quantized, ids, work) - pert_logits(binary, deq, ids, work, extra=["--dtype", "q8_0"])).max())
        check(err <= 1e-4, f"{name} Q8_0: GGUF vs its dequantized directory in --dtype q8_0 max|Δ| = {err:.1e} (≤ 1e-4)")
        if name == "V3":
            v3_src, v3_path = src, os.path.join(work, "V3-b4748.gguf")
            config, W = reference.load_model_dir(src)
            with torch.no_grad():
                want = reference.forward(config, W, ids).numpy()
            err = float(np.abs(pert_logits(binary, v3_path, ids, work) - want).max())
            check(err <= 1e-4, f"V3 F32 GGUF vs the float64 reference max|Δ| = {err:.1e} (≤ 1e-4)")
        if name == "V2-Lite":
            v2_path = os.path.join(work, "V2-Lite-b4748.gguf")

    # llama.cpp's names, shapes and keys (V3: d 64, 4 heads, nope 12, rope 8, v 10, latent 16, q rank 24, 8 experts of 16)
    _, md, infos = gguf.read_gguf(v3_path)
    t = {i["name"]: i["shape"] for i in infos}
    expect = {"blk.0.attn_q_a.weight": [64, 24], "blk.0.attn_q_a_norm.weight": [24], "blk.0.attn_q_b.weight": [24, 80],
              "blk.0.attn_kv_a_mqa.weight": [64, 24], "blk.0.attn_kv_a_norm.weight": [16], "blk.0.attn_kv_b.weight": [16, 88],
              "blk.0.attn_output.weight": [40, 64], "blk.0.ffn_gate.weight": [64, 96], "blk.1.ffn_gate_inp.weight": [64, 8],
              "blk.1.exp_probs_b.bias": [8], "blk.1.ffn_gate_exps.weight": [64, 16, 8], "blk.1.ffn_down_exps.weight": [16, 64, 8],
              "blk.1.ffn_gate_shexp.weight": [64, 16]}
    wrong = {n: t.get(n) for n, v in expect.items() if t.get(n) != v}
    check(not wrong, f"V3 b4748: llama.cpp's tensor names and shapes {wrong or ''}")
    keys = {k[len("deepseek2."):]: v[1] for k, v in md.items() if k.startswith("deepseek2.")}
    want_keys = {"attention.kv_lora_rank": 16, "attention.q_lora_rank": 24, "attention.key_length": 20, "attention.value_length": 10,
                 "rope.dimension_count": 8, "expert_gating_func": 2, "expert_shared_count": 1, "leading_dense_block_count": 1,
                 "expert_feed_forward_length": 16, "expert_group_count": 4, "expert_group_used_count": 2, "expert_weights_norm": True}
    wrong = {k: keys.get(k) for k, v in want_keys.items() if keys.get(k) != v}
    check(md["general.architecture"][1] == "deepseek2" and not wrong, f"V3 b4748: llama.cpp's keys {wrong or ''}")
    split_path = os.path.join(work, "V3-MLA_split.gguf")
    _, md, infos = gguf.read_gguf(split_path)
    t = {i["name"]: i["shape"] for i in infos}
    check(t.get("blk.0.attn_k_b.weight") == [12, 16, 4] and t.get("blk.0.attn_v_b.weight") == [16, 10, 4] and
          "blk.0.attn_kv_b.weight" not in t and md["deepseek2.attention.key_length_mla"][1] == 20 and
          md["deepseek2.attention.key_length"][1] == 24 and md["deepseek2.attention.head_count_kv"][1] == 1,
          f"V3 MLA split: attn_k_b {t.get('blk.0.attn_k_b.weight')}, attn_v_b {t.get('blk.0.attn_v_b.weight')}, key_length_mla")

    # b4748 writes no group keys: llama.cpp routes over all experts, as n_group 1
    ungrouped = rewritten(v3_path, os.path.join(work, "ungrouped.gguf"),
                          drop=("deepseek2.expert_group_count", "deepseek2.expert_group_used_count"))
    one_group = with_config(v3_src, os.path.join(work, "one_group"), n_group=1, topk_group=1)
    with open(os.path.join(v3_src, "config.json")) as f:
        config = json.load(f)
    got = pert_logits(binary, ungrouped, ids, work)
    err = float(np.abs(got - pert_logits(binary, one_group, ids, work)).max())
    moved = float(np.abs(got - pert_logits(binary, v3_path, ids, work)).max())
    check(err == 0, f"V3 without expert_group_count = n_group 1 (max|Δ| {err:.1e}; {moved:.1e} from 4 groups, 2 kept)")

    # Refusals naming the key or tensor
    refused(binary, rewritten(v3_path, os.path.join(work, "nolatent.gguf"), drop=("deepseek2.attention.kv_lora_rank",)),
            "deepseek2.attention.kv_lora_rank", work, check, "deepseek2 without attention.kv_lora_rank")
    kv_b = np.zeros((88, 15), np.float32)
    refused(binary, rewritten(v3_path, os.path.join(work, "kvb.gguf"), tensors={"blk.0.attn_kv_b.weight": ("F32", [15, 88], kv_b.tobytes())}),
            "model.layers.0.self_attn.kv_b_proj.weight", work, check, "deepseek2 attn_kv_b [88][15]")
    k_b = np.zeros((4, 16, 11), np.float32)
    refused(binary, rewritten(split_path, os.path.join(work, "kb.gguf"), tensors={"blk.0.attn_k_b.weight": ("F32", [11, 16, 4], k_b.tobytes())}),
            "blk.0.attn_k_b.weight", work, check, "deepseek2 attn_k_b [4][16][11]")
    refused(binary, rewritten(v3_path, os.path.join(work, "gating.gguf"), keys={"deepseek2.expert_gating_func": ("u32", 3)}),
            "deepseek2.expert_gating_func", work, check, "deepseek2 expert_gating_func 3")
    refused(binary, rewritten(os.path.join(work, "V3_YaRN-b4748.gguf"), os.path.join(work, "nolog.gguf"),
                              drop=("deepseek2.rope.scaling.yarn_log_multiplier",)),
            "deepseek2.rope.scaling.yarn_log_multiplier", work, check, "deepseek2 YaRN without yarn_log_multiplier")
    refused(binary, rewritten(v2_path, os.path.join(work, "v2groups.gguf"),
                              keys={"deepseek2.expert_group_count": ("u32", 4), "deepseek2.expert_group_used_count": ("u32", 2)}),
            "deepseek2.expert_group_count", work, check, "deepseek2 softmax gating with 4 groups, 2 kept")
    with open(os.path.join(one_group, "config.json"), "w") as f:
        json.dump(dict(config, rope_interleave=False), f)
    try:
        to_gguf.convert(one_group, os.path.join(work, "halves.gguf"), "F32")
        check(False, "to_gguf.py refuses rope_interleave false")
    except ValueError as e:
        check("rope_interleave" in str(e), f"to_gguf.py refuses rope_interleave false ({e})")


def per_axis(model_dir, gguf_path, ids, check, name):
    """With the Python module: positions per axis (4 text tokens, a 4 x 6 image at t = 4, text from 10), where
    M-RoPE's sections matter, the same from the file and the directory."""
    try:
        import pert
    except ImportError:
        print(f"skip {name} positions per axis: no Python module (PYTHONPATH)")
        return
    layout = [[i, i, i] for i in range(4)] + [[4, 4 + h, 4 + w] for h in range(4) for w in range(6)]
    layout += [[p, p, p] for p in range(10, 10 + len(ids) - len(layout))]
    got = [pert.load(m).session(n_ctx=64).eval(ids, all_logits=True, positions=layout) for m in (gguf_path, model_dir)]
    text = pert.load(model_dir).session(n_ctx=64).eval(ids, all_logits=True)
    err, moved = float(np.abs(got[0] - got[1]).max()), float(np.abs(got[1] - text).max())
    check(err <= 1e-4 and moved > 1e-2, f"{name} positions per axis: GGUF vs directory max|Δ| = {err:.1e} "
          f"(≤ 1e-4; the layout moves them {moved:.1e})")


def main():
    binary, arch = sys.argv[1], sys.argv[2]
    check = Check()
    with tempfile.TemporaryDirectory() as work:
        if arch == "gpt_oss":
            gpt_oss(binary, work, check)
        elif arch in ("qwen2vl", "qwen3vl"):
            vision_language(binary, work, check, arch)
        elif arch == "deepseek":
            deepseek(binary, work, check)
        else:
            sys.exit(f"gguf_twin_test.py: unknown ARCH {arch!r} (gpt_oss, qwen2vl, qwen3vl, deepseek)")
    if check.failures:
        print(f"gguf_vs_reference_{arch}: FAILED:", "; ".join(check.failures))
    return 1 if check.failures else 0


if __name__ == "__main__":
    sys.exit(main())
