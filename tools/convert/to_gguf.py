#!/usr/bin/env python3
"""Converts a pert/HF model directory to GGUF as llama.cpp's convert_hf_to_gguf.py followed by
llama-quantize lays it out, so that pert's GGUF reader is tested on the files users have.

    to_gguf.py MODEL_DIR OUT.gguf [--type Q4_K_M] [--version 3] [--alignment 32]
               [--dequantized-dir DIR] [--name NAME]
    to_gguf.py --random ARCH MODEL_DIR OUT.gguf [...]   # first writes a small random ARCH model
                                                        # (llama, mistral, qwen2, qwen3, phi3, gemma2, gemma3, cohere2,
                                                        # smollm3; MoE: mixtral, qwen2moe, qwen3moe, olmoe) there

MODEL_DIR holds config.json, model.safetensors (or its index and shards), tokenizer.json and
optionally tokenizer_config.json. Block-scaled FP8 checkpoints (DeepSeek-V3/R1, Qwen3-*-FP8: F8_E4M3
matrices with <name>_scale_inv under quantization_config "fp8") are read as pert reads them, each
value code * scale_inv in float32 (tools/lib/safetensors_io.py dequantize_fp8), then typed by
--type. A pert "position" block is written when it is plain RoPE (the family's models/rope: base
and rotary_dim as rope_theta and the rope dimensions); any other scheme, RoPE layout or xPos has no
GGUF form and is refused. Architectures: LlamaForCausalLM and MistralForCausalLM ->
"llama", Qwen2ForCausalLM -> "qwen2", Qwen3ForCausalLM -> "qwen3", Phi3ForCausalLM -> "phi3",
Gemma2ForCausalLM -> "gemma2", Gemma3ForCausalLM -> "gemma3", Cohere2ForCausalLM -> "cohere2",
SmolLM3ForCausalLM -> "smollm3" (q/k permuted as llama's; its NoPE step of 4 is llama.cpp's, not written),
MixtralForCausalLM -> "llama" (with experts), Qwen2MoeForCausalLM -> "qwen2moe", Qwen3MoeForCausalLM ->
"qwen3moe", OlmoeForCausalLM -> "olmoe", GptOssForCausalLM -> "gpt-oss"; the language model of
Qwen2VLForConditionalGeneration and Qwen2_5_VLForConditionalGeneration -> "qwen2vl" and of
Qwen3VLForConditionalGeneration -> "qwen3vl" (llama.cpp's text model file: the vision tower's
tensors left out, text_config's keys read as the top level's, the mrope_section as
rope.dimension_sections padded to four with 0, Qwen3-VL's n_deepstack_layers as the count of
vision_config's deepstack_visual_indexes); DeepseekV2ForCausalLM and DeepseekV3ForCausalLM ->
"deepseek2" (deepseek2_hyperparameters: llama.cpp b4748's layout, or with --mla-split its later one)
(Gemma's norms stored as 1 + w and named post_attention_norm / ffn_norm / post_ffw_norm, its
caps and window written; Cohere's layer_norm_epsilon, logit_scale and window; what llama.cpp
hard-codes, such as Gemma's local RoPE base and both layer patterns, is not written).

What is written, as llama.cpp does:
  - the hyperparameters under {arch}.*; attention.key_length/value_length when config.json has
    head_dim; rope.scaling.* for linear / yarn (factor, original context, yarn's fields) and
    longrope; Llama 3's scaling as a `rope_freqs` tensor; Phi-3's long/short factors as
    `rope_factors_long`/`rope_factors_short` with rope.scaling.attn_factor and
    original_context_length; general.file_type and general.quantization_version = 2; the
    tokenizer from tools/convert/gguf_vocab.py.
  - tensors named as llama.cpp names them (token_embd, blk.N.attn_q, ..., output absent when
    tied), sorted by name as llama-quantize writes them; for arch "llama" only, q and k rows
    permuted as the converter's LlamaModel.permute does (HF's rotate-half order back to
    interleaved pairs); vectors (norms, biases, rope factors) F32.
  - mixture of experts: {arch}.expert_count, expert_used_count, Qwen-MoE's
    expert_feed_forward_length and expert_shared_feed_forward_length; the router as
    blk.N.ffn_gate_inp (F32 always), each layer's experts stacked [E, out, in] as
    ffn_gate_exps / ffn_up_exps / ffn_down_exps (from per-expert tensors or transformers v5's fused
    experts.gate_up_proj / down_proj), Qwen2-MoE's shared expert as ffn_{gate,up,down}_shexp and its
    gate as ffn_gate_inp_shexp; the _M mixes' rules for 8 experts and ffn_down by layer name.
Additions llama.cpp does not make: rope.dimension_count for every architecture (llama.cpp
takes the head size when it is absent) and attention.sliding_window wherever config.json's
window applies to every layer (Mistral; Qwen with use_sliding_window), so a reader computes the
model config.json describes; likewise {arch}.expert_weights_norm where norm_topk_prob differs from
what llama.cpp's graph hard-codes (llama and qwen3moe renormalise, qwen2moe and olmoe do not),
olmoe.attention.clamp_kqv for clip_qkv, and the dense MLP (ffn_gate/up/down) of the layers
Qwen-MoE's mlp_only_layers / decoder_sparse_step keep dense.

gpt-oss as llama.cpp's GptOssModel writes it: sinks as blk.N.attn_sinks, post_attention_layernorm
as post_attention_norm, the router (mlp.router, weight and bias) as ffn_gate_inp, the fused
experts split into ffn_gate_exps / ffn_up_exps (gate_up's even and odd rows) and ffn_down_exps
[E, out, in] with their biases stacked [E, out] as ffn_*_exps.bias (F32); MXFP4 experts
(*_blocks / *_scales) carried as stored, as GGML type MXFP4 (39: the E8M0 byte, then the 32 E2M1
codes, value j in byte j's low nibble and j + 16 in its high one), float ones transposed and
typed by --type; attention.sliding_window and expert_feed_forward_length; layer_types other than
llama.cpp's fixed alternation (even layers windowed) as attention.sliding_window_pattern, one bool
per layer; YaRN's keys (truncate false is what llama.cpp's gpt-oss reader assumes, and pert's).
A swiglu_limit other than 7 (llama.cpp's fixed clamp) has no GGUF form and is refused.

--type: F32, F16, BF16 (the converter's --outtype: matrices in that type); Q8_0, Q4_0, Q4_1,
Q5_0, Q5_1, Q4_K, Q5_K, Q6_K (llama-quantize --pure: every matrix in that type); Q4_K_M and
Q5_K_M (llama-quantize's mixes: output, and token_embd when tied, in Q6_K; attn_v / attn_qkv
and ffn_down in Q6_K for the first and last eighth and every third between, counted as
llama-quantize counts them, in name order: blk.10 before blk.2).
A matrix whose rows are not whole blocks falls back as llama-quantize does (Q4_K -> Q5_0,
Q5_K -> Q5_1, Q6_K -> Q8_0; the output matrix to Q8_0), and to F16 where even that does not fit
(where llama-quantize would stop).

--dequantized-dir DIR also writes an HF model directory holding exactly the weights the GGUF
holds (dequantized to F32, q/k back in HF order) with config.json and the tokenizer files
copied, so that the float64 reference (tools/reference/reference.py) computes the GGUF's model.
"""
import argparse
import json
import math
import os
import re
import shutil
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tools/: import by folder (tools/README.md)
from convert import ggml_quants  # noqa: E402
from convert import gguf  # noqa: E402
from reference import reference  # noqa: E402
from reference import moe  # noqa: E402
from lib import safetensors_io  # noqa: E402
from convert import tokenizer_json  # noqa: E402
from convert.gguf_vocab import vocab_metadata  # noqa: E402

ARCHS = {"LlamaForCausalLM": "llama", "MistralForCausalLM": "llama", "Qwen2ForCausalLM": "qwen2",
         "Qwen3ForCausalLM": "qwen3", "Phi3ForCausalLM": "phi3", "Gemma2ForCausalLM": "gemma2",
         "Gemma3ForCausalLM": "gemma3", "Cohere2ForCausalLM": "cohere2", "SmolLM3ForCausalLM": "smollm3",
         "MixtralForCausalLM": "llama", "Qwen2MoeForCausalLM": "qwen2moe", "Qwen3MoeForCausalLM": "qwen3moe",
         "OlmoeForCausalLM": "olmoe", "GptOssForCausalLM": "gpt-oss", "Qwen2VLForConditionalGeneration": "qwen2vl",
         "Qwen2_5_VLForConditionalGeneration": "qwen2vl", "Qwen3VLForConditionalGeneration": "qwen3vl",
         "DeepseekV2ForCausalLM": "deepseek2", "DeepseekV3ForCausalLM": "deepseek2"}
GEMMA = ("gemma2", "gemma3")
# llama.cpp's graphs renormalise the chosen experts' weights for these (hard-coded, no key read)
EXPERT_WEIGHTS_NORM = {"llama": True, "qwen2moe": False, "qwen3moe": True, "olmoe": False}
VISION_LANGUAGE = ("qwen2vl", "qwen3vl")  # their language model's tensors, under these prefixes; the vision tower's left out
LANGUAGE_MODEL, VISION_TOWER = "model.language_model.", ("visual.", "model.visual.")
# --type: (llama.cpp's general.file_type, the matrices' type, llama-quantize's mix or None)
TYPES = {
    "F32": (0, "F32", None), "F16": (1, "F16", None), "BF16": (32, "BF16", None),
    "Q4_0": (2, "Q4_0", None), "Q4_1": (3, "Q4_1", None), "Q8_0": (7, "Q8_0", None),
    "Q5_0": (8, "Q5_0", None), "Q5_1": (9, "Q5_1", None),
    "Q4_K": (14, "Q4_K", None), "Q5_K": (16, "Q5_K", None), "Q6_K": (18, "Q6_K", None),
    "Q4_K_M": (15, "Q4_K", "M"), "Q5_K_M": (17, "Q5_K", "M"),
}
FALLBACK = {"Q4_K": "Q5_0", "Q5_K": "Q5_1", "Q6_K": "Q8_0"}  # llama-quantize's, for rows not whole blocks
FLOATS = ("F32", "F16", "BF16")  # the converter's --outtype; a quantized --type starts from its F16 file

# HF name (after "model.layers.N.") -> GGUF name (after "blk.N.")
LAYER_NAMES = {
    "input_layernorm": "attn_norm", "post_attention_layernorm": "ffn_norm",
    "self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k", "self_attn.v_proj": "attn_v",
    "self_attn.o_proj": "attn_output", "self_attn.qkv_proj": "attn_qkv",
    "self_attn.q_norm": "attn_q_norm", "self_attn.k_norm": "attn_k_norm",
    "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up", "mlp.down_proj": "ffn_down",
    "mlp.gate_up_proj": "ffn_up",  # Phi-3: gate and up in one, as llama.cpp's phi3 reads it
    # MoE: the router (Mixtral's under block_sparse_moe, transformers v5's and Qwen's/OLMoE's under mlp),
    # Qwen2-MoE's shared expert and its gate; the experts themselves are stacked (expert_tensors)
    "block_sparse_moe.gate": "ffn_gate_inp", "mlp.gate": "ffn_gate_inp",
    "mlp.shared_expert.gate_proj": "ffn_gate_shexp", "mlp.shared_expert.up_proj": "ffn_up_shexp",
    "mlp.shared_expert.down_proj": "ffn_down_shexp", "mlp.shared_expert_gate": "ffn_gate_inp_shexp",
}
# a routed expert's matrix (HF per-expert name) -> its part; llama.cpp stacks each part [E, out, in]
EXPERT_PARTS = {"w1": "gate", "w3": "up", "w2": "down", "gate_proj": "gate", "up_proj": "up", "down_proj": "down"}
EXPERT_NAMES = {"gate": "ffn_gate_exps", "up": "ffn_up_exps", "down": "ffn_down_exps"}
# Gemma's: its post_attention_layernorm normalises the attention's output; the MLP's input norm
# is pre_feedforward_layernorm, which llama.cpp calls ffn_norm.
GEMMA_LAYER_NAMES = dict(LAYER_NAMES, post_attention_layernorm="post_attention_norm",
                         pre_feedforward_layernorm="ffn_norm", post_feedforward_layernorm="post_ffw_norm")
# gpt-oss's: the MLP's input norm is llama.cpp's ATTN_POST_NORM; the router; the sinks (no ".weight" in HF)
GPT_OSS_LAYER_NAMES = dict(LAYER_NAMES, post_attention_layernorm="post_attention_norm", **{"mlp.router": "ffn_gate_inp"})
# DeepSeek's (deepseek2): multi-head latent attention, the shared experts (one MLP), V3's router bias
DEEPSEEK_LAYER_NAMES = dict(LAYER_NAMES, **{
    "self_attn.q_a_proj": "attn_q_a", "self_attn.q_a_layernorm": "attn_q_a_norm", "self_attn.q_b_proj": "attn_q_b",
    "self_attn.kv_a_proj_with_mqa": "attn_kv_a_mqa", "self_attn.kv_a_layernorm": "attn_kv_a_norm",
    "self_attn.kv_b_proj": "attn_kv_b", "mlp.shared_experts.gate_proj": "ffn_gate_shexp",
    "mlp.shared_experts.up_proj": "ffn_up_shexp", "mlp.shared_experts.down_proj": "ffn_down_shexp"})
GLOBAL_NAMES = {"model.embed_tokens": "token_embd", "model.norm": "output_norm", "lm_head": "output"}


# ----------------------------------------------------------------------------- names and layout
def gguf_name(hf_name, arch="llama"):
    """llama.cpp's name for an HF tensor name (a routed expert's: its layer's stack); ValueError for
    one it has no place for."""
    stem, _, suffix = hf_name.rpartition(".")
    if stem in GLOBAL_NAMES:
        return f"{GLOBAL_NAMES[stem]}.{suffix}"
    expert = re.fullmatch(r"model\.layers\.(\d+)\.(?:block_sparse_moe|mlp)\.experts\.\d+\.(\w+)\.weight", hf_name)
    if expert and expert[2] in EXPERT_PARTS:
        return f"blk.{expert[1]}.{EXPERT_NAMES[EXPERT_PARTS[expert[2]]]}.weight"
    sinks = re.fullmatch(r"model\.layers\.(\d+)\.self_attn\.sinks", hf_name)
    if sinks and arch == "gpt-oss":
        return f"blk.{sinks[1]}.attn_sinks.weight"
    bias = re.fullmatch(r"model\.layers\.(\d+)\.mlp\.gate\.e_score_correction_bias", hf_name)
    if bias and arch == "deepseek2":  # (the converter renames it e_score_correction.bias: exp_probs_b.bias)
        return f"blk.{bias[1]}.exp_probs_b.bias"
    parts = stem.split(".", 3)
    names = (GEMMA_LAYER_NAMES if arch in GEMMA else GPT_OSS_LAYER_NAMES if arch == "gpt-oss" else
             DEEPSEEK_LAYER_NAMES if arch == "deepseek2" else LAYER_NAMES)
    if len(parts) == 4 and parts[:2] == ["model", "layers"] and parts[3] in names:
        return f"blk.{parts[2]}.{names[parts[3]]}.{suffix}"
    raise ValueError(f"{hf_name}: no GGUF name for this tensor")


def permute(w, heads):
    """The converter's LlamaModel.permute: per head, rows [first half, second half] (HF's
    rotate-half pairs i, i + d/2) -> interleaved pairs (2i, 2i + 1), as GGML's RoPE takes them."""
    return w.reshape(heads, 2, w.shape[0] // heads // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def unpermute(w, heads):
    """The inverse of permute()."""
    return w.reshape(heads, w.shape[0] // heads // 2, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def heads_of(hf_name, arch, config):
    """The head count to (un)permute `hf_name` by, or None when it is not permuted."""
    if arch not in ("llama", "smollm3"):  # SmolLM3's converter is a LlamaModel: it permutes too
        return None
    if hf_name.endswith(("self_attn.q_proj.weight", "self_attn.q_proj.bias")):
        return config["num_attention_heads"]
    if hf_name.endswith(("self_attn.k_proj.weight", "self_attn.k_proj.bias")):
        return config.get("num_key_value_heads", config["num_attention_heads"])
    return None


# ----------------------------------------------------------------------------- metadata
def rope_parameters(config):
    """The rope scaling block (transformers v4 rope_scaling or v5 rope_parameters), its kind lowercased."""
    rs = dict(config.get("rope_parameters") or config.get("rope_scaling") or {})
    kind = (rs.get("rope_type") or rs.get("type") or "").lower()
    return rs, kind


def head_dim(config):
    return config.get("head_dim") or config["hidden_size"] // config["num_attention_heads"]


def rope_dims(config):
    return int(head_dim(config) * config.get("partial_rotary_factor", 1.0))


def uniform_window(config):
    """The sliding window when config.json gives every layer the same one, 0 when none; ValueError
    for windows on some layers only (GGUF's llama/qwen2/qwen3 have one window for all)."""
    windows = set(reference.layer_windows(config))
    if len(windows) > 1:
        raise ValueError(f"sliding windows {sorted(windows)} differ between layers; GGUF has one per model")
    return windows.pop()


def hyperparameters(arch, config, mla_split=False):
    """[(key, kind, value)] of the model's shape and positions, as the converter writes them
    (mla_split: DeepSeek's attention keys as llama.cpp writes them since its MLA split)."""
    a = arch + "."
    default_theta = {"qwen2vl": 1e6, "qwen3vl": 5e5}.get(arch, 10000.0)  # the VL text configs' defaults
    theta = float((config.get("rope_parameters") or {}).get("rope_theta", config.get("rope_theta", default_theta)))
    md = [
        (a + "block_count", "u32", config["num_hidden_layers"]),
        (a + "context_length", "u32", config["max_position_embeddings"]),
        (a + "embedding_length", "u32", config["hidden_size"]),
        (a + "feed_forward_length", "u32", config["intermediate_size"]),
        (a + "attention.head_count", "u32", config["num_attention_heads"]),
        (a + "attention.head_count_kv", "u32", config.get("num_key_value_heads", config["num_attention_heads"])),
        (a + "rope.freq_base", "f32", theta),
        (a + "attention.layer_norm_rms_epsilon", "f32", config.get("rms_norm_eps", 1e-6)),
        (a + "rope.dimension_count", "u32", rope_dims(config)),
    ]
    if arch == "cohere2":  # LayerNorm's eps under its own key; logit_scale; the window (every 4th layer global)
        md[7] = (a + "attention.layer_norm_epsilon", "f32", config.get("layer_norm_eps", 1e-5))
        md += [(a + "logit_scale", "f32", config.get("logit_scale", 0.0625)),
               (a + "attention.sliding_window", "u32", config.get("sliding_window", 4096))]
        return md
    if arch in GEMMA:  # the window (pattern 2 or 6, not written), the caps; no query_pre_attn_scalar key
        md.append((a + "attention.sliding_window", "u32", config.get("sliding_window", 4096)))
        for key in ("attn_logit_softcapping", "final_logit_softcapping"):
            default = (50.0 if key.startswith("attn") else 30.0) if arch == "gemma2" else None
            value = config.get(key, default)
            if value is not None:
                md.append((a + key, "f32", value))
    if arch == "deepseek2":  # its own head widths, rope and YaRN keys
        return [m for m in md if m[0] not in (a + "attention.head_count_kv", a + "rope.dimension_count")] + \
            deepseek2_hyperparameters(config, mla_split)
    rs, kind = rope_parameters(config)
    if arch == "phi3":
        original = rs.get("original_max_position_embeddings",
                          config.get("original_max_position_embeddings", config["max_position_embeddings"]))
        md.append((a + "rope.scaling.original_context_length", "u32", original))
        if config.get("sliding_window"):  # (null: none, and no key)
            md.append((a + "attention.sliding_window", "u32", config["sliding_window"]))
        if rs.get("long_factor"):
            scale = config["max_position_embeddings"] / original
            if kind in ("su", "longrope"):
                attn = math.sqrt(1 + math.log(scale) / math.log(original)) if scale > 1 else 1.0
            elif kind == "yarn":
                attn = 0.1 * math.log(scale) + 1.0 if scale > 1 else 1.0
            else:
                raise ValueError(f"phi3 rope scaling {kind!r} is not supported")
            md.append((a + "rope.scaling.attn_factor", "f32", attn))
        return md
    if config.get("head_dim") is not None:
        md += [(a + "attention.key_length", "u32", config["head_dim"]),
               (a + "attention.value_length", "u32", config["head_dim"])]
    if arch == "llama":
        md.append((a + "vocab_size", "u32", config["vocab_size"]))
    factor = rs.get("factor")
    if kind == "linear" and factor is not None:
        md += [(a + "rope.scaling.type", "string", "linear"), (a + "rope.scaling.factor", "f32", factor)]
    elif kind == "yarn" and factor is not None:
        md += [(a + "rope.scaling.type", "string", "yarn"), (a + "rope.scaling.factor", "f32", factor),
               (a + "rope.scaling.original_context_length", "u32", rs["original_max_position_embeddings"])]
        for key, names in (("yarn_ext_factor", ("extrapolation_factor",)),
                           ("yarn_attn_factor", ("attention_factor", "attn_factor")),
                           ("yarn_beta_fast", ("beta_fast",)), ("yarn_beta_slow", ("beta_slow",))):
            value = next((rs[n] for n in names if rs.get(n) is not None), None)
            if value is not None:
                md.append((a + "rope.scaling." + key, "f32", value))
    elif kind in ("su", "longrope"):
        md.append((a + "rope.scaling.type", "string", "longrope"))
    elif kind not in ("", "default", "llama3", "mrope"):  # ("mrope": Qwen2-VL's name for default, sections below)
        raise ValueError(f"rope scaling {kind!r} has no GGUF form here")
    if "mrope_section" in rs:  # Qwen2/2.5/3-VL: the converter pads M-RoPE's sections to ggml's four
        sections = list(rs["mrope_section"])
        md.append((a + "rope.dimension_sections", ("array", "i32"), sections + [0] * (4 - len(sections))))
    if arch == "qwen3vl":  # the vision layers feeding DeepStack (unused by text alone); no window in Qwen3-VL's text model
        md.append((a + "n_deepstack_layers", "u32", len((config.get("vision_config") or {}).get("deepstack_visual_indexes") or [])))
        return md
    if arch == "gpt-oss":
        return md + gpt_oss_hyperparameters(config)
    window = 0 if arch in GEMMA else uniform_window(config)
    if window:
        md.append((a + "attention.sliding_window", "u32", window))
    if moe.is_moe(config):
        md += moe_hyperparameters(arch, config)
    return md


def gpt_oss_hyperparameters(config):
    """gpt-oss's window and experts as GptOssModel writes them (attention.sliding_window, expert_count,
    expert_used_count, expert_feed_forward_length); layer_types as attention.sliding_window_pattern
    (one bool per layer, true where windowed) unless they are llama.cpp's fixed alternation."""
    a, s = "gpt-oss.", moe.settings(config)
    if float(s["limit"]) != 7.0 or float(s["alpha"]) != 1.702:
        raise ValueError(f"gpt-oss: swiglu_limit {s['limit']} / alpha {s['alpha']}: llama.cpp's gpt-oss clamps at 7 with "
                         "alpha 1.702 and GGUF has no key for another")
    layers = config["num_hidden_layers"]
    types = config.get("layer_types") or ["sliding_attention" if i % 2 == 0 else "full_attention" for i in range(layers)]
    md = [(a + "attention.sliding_window", "u32", config.get("sliding_window") or 128),
          (a + "expert_count", "u32", s["experts"]), (a + "expert_used_count", "u32", s["top_k"]),
          (a + "expert_feed_forward_length", "u32", config["intermediate_size"])]
    if types != ["sliding_attention" if i % 2 == 0 else "full_attention" for i in range(layers)]:
        md.append((a + "attention.sliding_window_pattern", ("array", "bool"), [t == "sliding_attention" for t in types]))
    return md


def deepseek2_hyperparameters(config, mla_split):
    """DeepSeek V2 / V3's keys as llama.cpp b4748's DeepseekV2Model writes them: q_lora_rank (absent
    without one), kv_lora_rank, key_length (qk_nope + qk_rope) and value_length, the rope width, the
    experts (count, used, shared, feed_forward_length, weights_scale, weights_norm, gating_func 1
    softmax / 2 sigmoid), leading_dense_block_count, YaRN's type, factor, original context and
    yarn_log_multiplier = 0.1 x mscale_all_dim. mla_split: as llama.cpp writes them since its MLA split
    (head_count_kv 1, key_length kv_lora_rank + qk_rope, value_length kv_lora_rank, the heads' widths as
    key_length_mla / value_length_mla). Additions b4748 does not make: expert_group_count /
    expert_group_used_count where n_group > 1 (later llama.cpp's keys: b4748 routes without groups),
    and YaRN's beta_fast / beta_slow where they are not llama.cpp's 32 / 1. Refused: a V3 config
    without rope_interleave (llama.cpp turns interleaved pairs and the converter does not reorder the
    rows), YaRN's mscale unlike mscale_all_dim (llama.cpp assumes them equal), a scoring_func other
    than sigmoid / softmax."""
    a, c = "deepseek2.", config.get
    arch = moe.arch_of(config)
    if arch == moe.DEEPSEEK_V3 and not c("rope_interleave", True):
        raise ValueError("deepseek2: rope_interleave false: llama.cpp turns interleaved pairs and has no key for halves")
    nope, rope, v, latent = c("qk_nope_head_dim", 128), c("qk_rope_head_dim", 64), c("v_head_dim", 128), c("kv_lora_rank", 512)
    scoring = c("scoring_func", "sigmoid" if arch == moe.DEEPSEEK_V3 else "softmax")
    if c("moe_layer_freq", 1) != 1:
        raise ValueError(f"deepseek2: moe_layer_freq {c('moe_layer_freq')}: llama.cpp's experts start at leading_dense_block_count, every layer")
    if scoring not in ("softmax", "sigmoid"):
        raise ValueError(f"deepseek2: scoring_func {scoring!r} has no GGUF form (softmax, sigmoid)")
    s = moe.settings(config)
    md = [(a + "leading_dense_block_count", "u32", c("first_k_dense_replace", 3 if arch == moe.DEEPSEEK_V3 else 0)),
          (a + "vocab_size", "u32", config["vocab_size"])]
    if c("q_lora_rank", 1536) is not None:
        md.append((a + "attention.q_lora_rank", "u32", c("q_lora_rank", 1536)))
    md.append((a + "attention.kv_lora_rank", "u32", latent))
    if mla_split:
        md += [(a + "attention.head_count_kv", "u32", 1),
               (a + "attention.key_length", "u32", latent + rope), (a + "attention.value_length", "u32", latent),
               (a + "attention.key_length_mla", "u32", nope + rope), (a + "attention.value_length_mla", "u32", v)]
    else:
        md += [(a + "attention.head_count_kv", "u32", config["num_attention_heads"]),
               (a + "attention.key_length", "u32", nope + rope), (a + "attention.value_length", "u32", v)]
    md += [(a + "expert_feed_forward_length", "u32", config["moe_intermediate_size"]),
           (a + "expert_count", "u32", s["experts"]), (a + "expert_used_count", "u32", s["top_k"]),
           (a + "expert_shared_count", "u32", c("n_shared_experts") or 0),
           (a + "expert_weights_scale", "f32", s["scale"]), (a + "expert_weights_norm", "bool", s["norm"]),
           (a + "expert_gating_func", "u32", 2 if scoring == "sigmoid" else 1),
           (a + "rope.dimension_count", "u32", rope)]
    if (s["n_group"] or 1) > 1:
        md += [(a + "expert_group_count", "u32", s["n_group"]), (a + "expert_group_used_count", "u32", s["topk_group"])]
    rs, kind = rope_parameters(config)
    if kind == "yarn" and rs.get("factor") is not None:
        if rs.get("mscale", 1.0) != rs.get("mscale_all_dim", 1.0):
            raise ValueError(f"deepseek2: YaRN's mscale {rs.get('mscale')} differs from mscale_all_dim {rs.get('mscale_all_dim')}; "
                             "llama.cpp assumes them equal")
        md += [(a + "rope.scaling.type", "string", "yarn"), (a + "rope.scaling.factor", "f32", rs["factor"]),
               (a + "rope.scaling.original_context_length", "u32", rs["original_max_position_embeddings"]),
               (a + "rope.scaling.yarn_log_multiplier", "f32", 0.1 * rs.get("mscale_all_dim", 0.0))]
        for key, name, default in (("yarn_beta_fast", "beta_fast", 32.0), ("yarn_beta_slow", "beta_slow", 1.0)):
            if rs.get(name, default) != default:
                md.append((a + "rope.scaling." + key, "f32", rs[name]))
    elif kind not in ("", "default"):
        raise ValueError(f"deepseek2: rope scaling {kind!r} has no GGUF form here (yarn)")
    return md


def split_kv_b(data, config):
    """llama.cpp's layout since its MLA split: each blk.N.attn_kv_b [H·(nope + v), latent] in `data`
    replaced by attn_k_b [H, latent, nope] (each head's k rows transposed) and attn_v_b [H, v, latent]."""
    H, nope, v = config["num_attention_heads"], config.get("qk_nope_head_dim", 128), config.get("v_head_dim", 128)
    for g in [g for g in data if g.endswith(".attn_kv_b.weight")]:
        kv_b = data.pop(g)
        per_head = kv_b.reshape(H, nope + v, kv_b.shape[-1])
        data[g.replace("attn_kv_b", "attn_k_b")] = np.ascontiguousarray(per_head[:, :nope].swapaxes(1, 2))
        data[g.replace("attn_kv_b", "attn_v_b")] = np.ascontiguousarray(per_head[:, nope:])


def moe_hyperparameters(arch, config):
    """The experts' keys as the converter writes them: expert_count and expert_used_count;
    Qwen-MoE's expert (and shared expert) feed_forward_length. Two additions, only where a config
    asks what llama.cpp's graph does not do by itself: expert_weights_norm when norm_topk_prob
    differs from the renormalisation llama.cpp hard-codes for the architecture (EXPERT_WEIGHTS_NORM),
    and OLMoE's clip_qkv as attention.clamp_kqv (OLMo's key)."""
    a, s = arch + ".", moe.settings(config)
    md = [(a + "expert_count", "u32", s["experts"]), (a + "expert_used_count", "u32", s["top_k"])]
    if arch in ("qwen2moe", "qwen3moe") and config.get("moe_intermediate_size") is not None:
        md.append((a + "expert_feed_forward_length", "u32", config["moe_intermediate_size"]))
    if arch == "qwen2moe" and config.get("shared_expert_intermediate_size") is not None:
        md.append((a + "expert_shared_feed_forward_length", "u32", config["shared_expert_intermediate_size"]))
    if s["norm"] != EXPERT_WEIGHTS_NORM[arch]:
        md.append((a + "expert_weights_norm", "bool", s["norm"]))
    if arch == "olmoe" and config.get("clip_qkv") is not None:
        md.append((a + "attention.clamp_kqv", "f32", config["clip_qkv"]))
    return md


def extra_tensors(arch, config):
    """{gguf name: float32 vector} the converter adds: Llama 3's rope_freqs, Phi-3's rope factors."""
    rs, kind = rope_parameters(config)
    if arch == "llama" and kind == "llama3":
        dim = head_dim(config)
        base = float(rs.get("rope_theta", config.get("rope_theta", 10000.0)))
        freqs = 1.0 / (np.float32(base) ** (np.arange(0, dim, 2, dtype=np.float32) / np.float32(dim)))
        factor = rs.get("factor", 8.0)
        low, high = rs.get("low_freq_factor", 1.0), rs.get("high_freq_factor", 4.0)
        old = rs.get("original_max_position_embeddings", config.get("original_max_position_embeddings", 8192))
        out = []
        for f in freqs.astype(np.float32):
            wavelen = 2 * math.pi / float(f)
            if wavelen < old / high:
                out.append(1.0)
            elif wavelen > old / low:
                out.append(factor)
            else:
                smooth = (old / wavelen - low) / (high - low)
                out.append(1 / ((1 - smooth) / factor + smooth))
        return {"rope_freqs.weight": np.array(out, np.float32)}
    if arch == "phi3" and rs.get("long_factor"):
        n = rope_dims(config) // 2
        long, short = rs["long_factor"], rs.get("short_factor")
        if short is None or len(long) != n or len(short) != n:
            raise ValueError(f"phi3: long_factor and short_factor must each have {n} values")
        return {"rope_factors_long.weight": np.array(long, np.float32),
                "rope_factors_short.weight": np.array(short, np.float32)}
    return {}


# ----------------------------------------------------------------------------- tensor types
def use_more_bits(i, n):
    """llama-quantize's choice of layers given more bits in its _M mixes."""
    return i < n // 8 or i >= 7 * n // 8 or (i - n // 8) % 3 == 2


def tensor_types(tensors, type_name, n_layer, n_expert=0):
    """{gguf name: GGML type} for [(gguf name, shape innermost first)] in llama-quantize's order.
    With experts: the router (ffn_gate_inp) stays F32 (the converter writes it so and llama-quantize
    never quantizes it); the _M mixes put attn_v and attn_k of an 8-expert model in Q8_0 and (Q4_K_M)
    its attn_output in Q5_K, and take ffn_down's layer from its name."""
    _, default, mix = TYPES[type_name]
    tied = not any(name == "output.weight" for name, _ in tensors)
    n_wv = sum(1 for name, _ in tensors if "attn_v.weight" in name or "attn_qkv.weight" in name)
    i_wv = i_down = 0
    out = {}
    for name, shape in tensors:
        if len(shape) < 2 or not name.endswith("weight") or "_norm.weight" in name or "ffn_gate_inp.weight" in name:
            out[name] = "F32"
            continue
        if all(n == 1 for n in shape[1:]):  # one row (Qwen2-MoE's ffn_gate_inp_shexp [d, 1]): the converter's
            out[name] = default if default in FLOATS else "F16"  # type; llama-quantize leaves 1-D data alone
            continue
        t = default
        blocked = ggml_quants.TYPES[t].block_size > 1
        if blocked and mix:
            if name == "output.weight" or (tied and name == "token_embd.weight"):
                t = "Q8_0" if shape[0] % ggml_quants.TYPES[t].block_size else "Q6_K"
            elif "attn_v.weight" in name or "attn_qkv.weight" in name:
                t = "Q6_K" if use_more_bits(i_wv, n_wv) else t
                t = "Q8_0" if n_expert == 8 and "attn_v.weight" in name else t
                i_wv += 1
            elif "attn_k.weight" in name and n_expert == 8:
                t = "Q8_0"
            elif "attn_output.weight" in name and n_expert == 8 and mix == "M" and default == "Q4_K":
                t = "Q5_K"
            elif "ffn_down" in name:
                i_layer = int(name.split(".")[1]) if n_expert > 1 else i_down  # experts: the layer from the name
                t = "Q6_K" if use_more_bits(i_layer, n_layer) else t
                i_down += 1
        if shape[0] % ggml_quants.TYPES[t].block_size:
            t = FALLBACK.get(t, "F16")
            if shape[0] % ggml_quants.TYPES[t].block_size:
                t = "F16"
        out[name] = t
    return out


# ----------------------------------------------------------------------------- conversion
def read_config(model_dir):
    with open(os.path.join(model_dir, "config.json")) as f:
        config = json.load(f)
    hf_arch = (config.get("architectures") or [""])[0]
    if hf_arch not in ARCHS:
        raise ValueError(f"{model_dir}: architecture {hf_arch!r} is not one of {', '.join(ARCHS)}")
    if config.get("extend") is not None:
        raise ValueError(f"{model_dir}: config.json's pert-only \"extend\" block has no GGUF form")
    if config.get("position") is not None:
        config = plain_rope(config, model_dir)
    if ARCHS[hf_arch] in VISION_LANGUAGE and isinstance(config.get("text_config"), dict):
        # the language model's keys (transformers v5) read as the top level's, which win, as pert reads them
        text = {k: v for k, v in config["text_config"].items() if k not in ("model_type", "architectures")}
        config = dict(text, **{k: v for k, v in config.items() if k != "text_config" and v is not None})
    return config, ARCHS[hf_arch]


def plain_rope(config, model_dir):
    """config.json with pert's "position" block said in HF's keys, when it is the RoPE GGUF holds
    (the family's `{"type": "rope"}`: its base as rope_theta, its rotary_dim as
    partial_rotary_factor); ValueError for any other scheme or RoPE setting (docs/config.md)."""
    position = config["position"]
    others = sorted(set(position) - {"type", "base", "rotary_dim", "layout"})
    if position.get("layout", "half") != "half":
        others.append(f"layout {position['layout']!r}")
    if position.get("type") != "rope" or others:
        what = position.get("type") if position.get("type") != "rope" else "rope with " + ", ".join(others)
        raise ValueError(f"{model_dir}: config.json's \"position\" block ({what}) has no GGUF form; plain rope has")
    if config.get("rope_scaling") or config.get("rope_parameters"):
        raise ValueError(f"{model_dir}: config.json has a \"position\" block and HF's rope keys; GGUF takes one")
    config = {k: v for k, v in config.items() if k != "position"}
    config["rope_theta"] = float(position.get("base", 10000.0))
    if "rotary_dim" in position:
        config["partial_rotary_factor"] = position["rotary_dim"] / head_dim(config)
    return config


def load_weights(model_dir, config):
    """{name: array} of the checkpoint (one file, or the shards its index names), block-scaled FP8
    matrices multiplied by their scales under config's quantization_config as pert reads them."""
    single = os.path.join(model_dir, "model.safetensors")
    if os.path.exists(single):
        files = [single]
    else:
        with open(os.path.join(model_dir, "model.safetensors.index.json")) as f:
            files = [os.path.join(model_dir, shard) for shard in sorted(set(json.load(f)["weight_map"].values()))]
    out, dtypes = {}, {}
    for path in files:
        out.update(safetensors_io.load(path))
        dtypes.update(safetensors_io.read_dtypes(path))
    return safetensors_io.dequantize_fp8(out, dtypes, config, model_dir)


def language_model(weights):
    """A vision-language checkpoint's language model under the text model's names (model.language_model.X
    as model.X), the vision tower's tensors left out, as llama.cpp's text model file holds it."""
    out = {}
    for name, w in weights.items():
        if name.startswith(VISION_TOWER):
            continue
        out["model." + name[len(LANGUAGE_MODEL):] if name.startswith(LANGUAGE_MODEL) else name] = w
    if not any(name.startswith("model.layers.") for name in out):
        raise ValueError("no language model tensors (model.language_model.layers.* or model.layers.*)")
    return out


def gpt_oss_experts(weights, config):
    """gpt-oss's fused experts popped out of `weights`, as GptOssModel writes them: ({gguf name: float
    array} for float experts and the stacked biases, {gguf name: (shape innermost first, MXFP4 bytes)}
    for experts stored in MXFP4). gate_up's even rows (columns, input-first) are the gate, odd the up."""
    floats, carried = {}, {}
    for i in range(config["num_hidden_layers"]):
        p, b = f"model.layers.{i}.mlp.experts.", f"blk.{i}."
        gu_bias, dn_bias = weights.pop(p + "gate_up_proj_bias"), weights.pop(p + "down_proj_bias")
        floats[b + "ffn_gate_exps.bias"], floats[b + "ffn_up_exps.bias"] = gu_bias[:, ::2], gu_bias[:, 1::2]
        floats[b + "ffn_down_exps.bias"] = dn_bias
        if p + "gate_up_proj_blocks" in weights:
            blocks, scales = weights.pop(p + "gate_up_proj_blocks"), weights.pop(p + "gate_up_proj_scales")
            carried[b + "ffn_gate_exps.weight"] = mxfp4_tensor(blocks[:, ::2], scales[:, ::2])
            carried[b + "ffn_up_exps.weight"] = mxfp4_tensor(blocks[:, 1::2], scales[:, 1::2])
            carried[b + "ffn_down_exps.weight"] = mxfp4_tensor(weights.pop(p + "down_proj_blocks"),
                                                               weights.pop(p + "down_proj_scales"))
        else:  # input-first [E, d, 2ff] and [E, ff, d]: rows along the output, as GGUF stacks them
            gate_up = np.swapaxes(weights.pop(p + "gate_up_proj"), 1, 2)
            floats[b + "ffn_gate_exps.weight"], floats[b + "ffn_up_exps.weight"] = gate_up[:, ::2], gate_up[:, 1::2]
            floats[b + "ffn_down_exps.weight"] = np.swapaxes(weights.pop(p + "down_proj"), 1, 2)
    return {g: np.ascontiguousarray(w) for g, w in floats.items()}, carried


def mxfp4_tensor(blocks, scales):
    """(shape innermost first, GGML MXFP4 bytes) of HF's *_blocks [E, rows, K/32, 16] (byte j: value 2j in its
    low nibble, 2j + 1 in its high one) and *_scales [E, rows, K/32] (E8M0, the same byte in GGML's block)."""
    codes = np.stack([blocks & 15, blocks >> 4], axis=-1).reshape(*blocks.shape[:-1], 32)
    packed = (codes[..., :16] | (codes[..., 16:] << 4)).astype(np.uint8)
    raw = np.concatenate([scales[..., None].astype(np.uint8), packed], axis=-1)
    E, rows, nb = scales.shape
    return [nb * 32, rows, E], raw.tobytes()


def tokenizer_files(model_dir):
    """tokenizer.json and tokenizer_config.json (None when absent) of a model directory."""
    config = os.path.join(model_dir, "tokenizer_config.json")
    return os.path.join(model_dir, "tokenizer.json"), config if os.path.exists(config) else None


def expert_tensors(weights, config):
    """The routed experts popped out of `weights` and stacked per layer and part as llama.cpp's
    converter merges them: ({gguf name: [E, out, in] array}, {gguf name: where each expert came
    from}). Per-expert tensors (Mixtral's block_sparse_moe.experts.N.w1/w3/w2, Qwen's and OLMoE's
    mlp.experts.N.gate_proj/up_proj/down_proj) and transformers v5's fused ones
    (mlp.experts.gate_up_proj [E, 2·ff, d], gate rows first, and mlp.experts.down_proj [E, d, ff])
    give the same stacks."""
    parts, sources = {}, {}
    for name in sorted(weights):
        m = re.fullmatch(r"model\.layers\.\d+\.(?:block_sparse_moe|mlp)\.experts\.(\d+)\.(\w+)\.weight", name)
        if m and m[2] in EXPERT_PARTS:
            g = gguf_name(name)
            parts.setdefault(g, {})[int(m[1])] = weights.pop(name)
            sources.setdefault(g, {})[int(m[1])] = name
            continue
        m = re.fullmatch(r"model\.layers\.(\d+)\.mlp\.experts\.(gate_up_proj|down_proj)", name)
        if m:
            w = weights.pop(name)
            halves = zip(("gate", "up"), np.split(w, 2, axis=1)) if m[2] == "gate_up_proj" else [("down", w)]
            for part, stack in halves:
                g = f"blk.{m[1]}.{EXPERT_NAMES[part]}.weight"
                parts[g], sources[g] = dict(enumerate(stack)), (name, part)
    stacked = {}
    for g, experts in parts.items():
        if sorted(experts) != list(range(len(experts))):
            raise ValueError(f"{g}: experts {sorted(experts)} are not 0..{len(experts) - 1}")
        stacked[g] = np.stack([experts[e] for e in range(len(experts))])
    return stacked, sources


def unstack_experts(stacked, sources):
    """expert_tensors' inverse: {HF name: array} in the checkpoint's own layout."""
    out, fused = {}, {}
    for g, w in stacked.items():
        if isinstance(sources[g], dict):
            out.update({name: w[e] for e, name in sources[g].items()})
        else:
            name, part = sources[g]
            fused.setdefault(name, {})[part] = w
    for name, halves in fused.items():
        out[name] = np.concatenate([halves["gate"], halves["up"]], axis=1) if "gate" in halves else halves["down"]
    return out


def convert(model_dir, out_path, type_name="F16", version=3, alignment=32, dequantized_dir=None, name=None,
            mla_split=False):
    """Writes OUT.gguf for MODEL_DIR (see the module's docstring); returns {gguf name: GGML type}.
    mla_split: DeepSeek's kv_b_proj as attn_k_b / attn_v_b (llama.cpp since its MLA split)."""
    config, arch = read_config(model_dir)
    weights = load_weights(model_dir, config)
    if mla_split and (arch != "deepseek2" or dequantized_dir is not None):
        raise ValueError(f"{model_dir}: --mla-split is DeepSeek's (deepseek2) and writes no --dequantized-dir")
    if arch == "deepseek2":  # the multi-token-prediction layers (V3's model.layers.61.*): the converter skips them
        layers = config["num_hidden_layers"]
        weights = {n: w for n, w in weights.items()
                   if not (re.match(r"model\.layers\.(\d+)\.", n) and int(n.split(".")[2]) >= layers)}
    if arch in VISION_LANGUAGE:
        weights = language_model(weights)
    if config.get("tie_word_embeddings"):
        weights.pop("lm_head.weight", None)
    carried = {}  # {gguf name: (shape, raw)}: written as stored (gpt-oss's MXFP4 experts)
    if arch == "gpt-oss":
        if dequantized_dir is not None:
            raise ValueError(f"{model_dir}: gpt-oss: --dequantized-dir is not written (its experts are fused in HF's layout)")
        data, carried = gpt_oss_experts(weights, config)
        experts_of = {}
    else:
        data, experts_of = expert_tensors(weights, config)  # the experts stacked, taken out of weights
    hf_of = {}
    for hf_name, w in weights.items():
        if hf_name.endswith("rotary_emb.inv_freq"):
            continue
        g = gguf_name(hf_name, arch)
        heads = heads_of(hf_name, arch, config)
        data[g] = permute(w, heads) if heads else w
        if arch in GEMMA and hf_name.endswith("norm.weight"):  # the converter stores Gemma's gains as 1 + w
            data[g] = (w + 1).astype(w.dtype)
        hf_of[g] = hf_name
    data.update(extra_tensors(arch, config))
    if mla_split:
        split_kv_b(data, config)
    names = sorted(data)
    shapes = {g: list(reversed(data[g].shape)) for g in names}
    n_expert = moe.settings(config)["experts"] if moe.is_moe(config) else 0
    types = tensor_types([(g, shapes[g]) for g in names], type_name, config["num_hidden_layers"], n_expert)
    raw = {g: ggml_quants.quantize(types[g], data[g]) for g in names}
    for g, (shape, stored) in carried.items():
        types[g], shapes[g], raw[g] = "MXFP4", shape, stored
    names = sorted(names + list(carried))

    tok, tok_config = tokenizer_files(model_dir)
    metadata = [("general.architecture", "string", arch), ("general.type", "string", "model"),
                ("general.name", "string", name or os.path.basename(os.path.abspath(model_dir)))]
    metadata += hyperparameters(arch, config, mla_split)
    metadata += [("general.file_type", "u32", TYPES[type_name][0]), ("general.quantization_version", "u32", 2)]
    metadata += vocab_metadata(tok, tok_config)
    # gguf-py's SpecialVocab also takes special ids from config.json when the tokenizer files lack them
    have = {key for key, _, _ in metadata}
    for kind in ("bos", "eos"):
        ids = config.get(f"{kind}_token_id")
        ids = ids[0] if isinstance(ids, list) and ids else ids
        if isinstance(ids, int) and f"tokenizer.ggml.{kind}_token_id" not in have:
            metadata.append((f"tokenizer.ggml.{kind}_token_id", "u32", ids))
    gguf.write_gguf(out_path, metadata, [(g, types[g], shapes[g], raw[g]) for g in names],
                    version=version, alignment=alignment)

    if dequantized_dir is not None:
        os.makedirs(dequantized_dir, exist_ok=True)
        hf = {}
        for g, hf_name in hf_of.items():
            w = ggml_quants.dequantize(types[g], raw[g], data[g].size).reshape(data[g].shape)
            heads = heads_of(hf_name, arch, config)
            hf[hf_name] = unpermute(w, heads) if heads else w
            if arch in GEMMA and hf_name.endswith("norm.weight"):
                hf[hf_name] = hf[hf_name] - 1
        stacked = {g: ggml_quants.dequantize(types[g], raw[g], data[g].size).reshape(data[g].shape) for g in experts_of}
        hf.update(unstack_experts(stacked, experts_of))
        safetensors_io.save(os.path.join(dequantized_dir, "model.safetensors"), hf, "F32")
        for path in (os.path.join(model_dir, "config.json"), tok, tok_config):
            if path is not None:
                shutil.copyfile(path, os.path.join(dequantized_dir, os.path.basename(path)))
    return types


# ----------------------------------------------------------------------------- random models
SMALL = dict(hidden=256, heads=4, kv_heads=2, layers=2, ffn=512, trained=64)
# arch: (reference.make_model options, config.json keys) -- shaped as the published models
RANDOM = {
    # Llama 3: untied, GQA, llama3 rope scaling (the rope_freqs tensor)
    "llama": ({}, {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "rope_theta": 500000.0,
                   "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                    "high_freq_factor": 4.0, "original_max_position_embeddings": 32}}),
    # Mistral: a sliding window on every layer
    "mistral": ({}, {"architectures": ["MistralForCausalLM"], "model_type": "mistral", "rope_theta": 10000.0,
                     "sliding_window": 6}),
    # Qwen2.5: q/k/v biases, tied
    "qwen2": ({"tie": True, "qkv_bias": True},
              {"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "rope_theta": 1000000.0,
               "use_sliding_window": False, "sliding_window": 32768}),
    # Qwen3: q/k norms, head_dim apart from hidden/heads (attn_output's 192-wide rows fall back), tied
    "qwen3": ({"tie": True, "qk_norm": True, "head_dim": 48},
              {"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "head_dim": 48,
               "rope_theta": 1000000.0, "use_sliding_window": False}),
    # Phi-3 128k: fused qkv and gate/up, longrope with its factor tables
    "phi3": ({"fused": True}, {"architectures": ["Phi3ForCausalLM"], "model_type": "phi3", "rope_theta": 10000.0,
                               "original_max_position_embeddings": 32, "max_position_embeddings": 128,
                               "sliding_window": 2047,
                               "rope_scaling": {"type": "longrope",
                                                "short_factor": [1.0 + 0.01 * i for i in range(32)],
                                                "long_factor": [1.0 + 0.1 * i for i in range(32)]}}),
    # Gemma 2: GeGLU, sandwich norms (stored + 1), caps, a window on even layers, tied
    "gemma2": ({"tie": True, "gemma": True, "head_dim": 64},
               {"architectures": ["Gemma2ForCausalLM"], "model_type": "gemma2", "head_dim": 64,
                "query_pre_attn_scalar": 64, "sliding_window": 6, "attn_logit_softcapping": 50.0,
                "final_logit_softcapping": 30.0}),
    # Gemma 3: q/k norms; 6 layers, the last global (llama.cpp's pattern 6, local base 10000); linear scaling
    "gemma3": ({"tie": True, "gemma": True, "qk_norm": True, "head_dim": 64, "layers": 6},
               {"architectures": ["Gemma3ForCausalLM"], "model_type": "gemma3_text", "head_dim": 64,
                "query_pre_attn_scalar": 64, "sliding_window": 6, "rope_theta": 1000000.0,
                "rope_local_base_freq": 10000.0, "rope_scaling": {"rope_type": "linear", "factor": 4.0}}),
    # SmolLM3: llama's tensors, q/k permuted, NoPE in every 4th layer (llama.cpp's fixed step), tied
    "smollm3": ({"tie": True, "layers": 4},
                {"architectures": ["SmolLM3ForCausalLM"], "model_type": "smollm3", "rope_theta": 5000000.0,
                 "no_rope_layer_interval": 4}),
    # Command R7B: LayerNorm, parallel block, 4 layers: RoPE (interleaved) and a window on 3, the last NoPE
    "cohere2": ({"tie": True, "parallel": True, "layers": 4},
                {"architectures": ["Cohere2ForCausalLM"], "model_type": "cohere2", "logit_scale": 0.25,
                 "sliding_window": 6, "layer_norm_eps": 1e-5, "rope_theta": 50000.0}),
}


def tiny_tokenizer():
    """A Llama-2 style tokenizer.json of 306 pieces: <unk> <s> </s>, the 256 bytes, letters and a few merges."""
    P = tokenizer_json.Piece
    pieces = [P("<unk>", 0, tokenizer_json.UNKNOWN), P("<s>", 0, tokenizer_json.CONTROL),
              P("</s>", 0, tokenizer_json.CONTROL)]
    pieces += [P(f"<0x{b:02X}>", 0, tokenizer_json.BYTE) for b in range(256)]
    words = ["▁t", "he", "▁the", "in", "er", "an", "▁a", "on", "▁o", "en"]
    words += list("▁etaoinshrdlcumwfgypbvkjxqz")
    words += [f"{c}{d}" for c in "st" for d in "aeiou"]
    pieces += [P(w, -i, tokenizer_json.NORMAL) for i, w in enumerate(words)]
    return tokenizer_json.build(pieces, warn=None), len(pieces)


def random_model(out_dir, arch, seed=0, fused=False):
    """A small random-weight model of `arch` (a RANDOM or moe.TINY key) with a tiny tokenizer in
    out_dir; fused: a MoE model's experts as transformers v5 holds them (moe.make_moe_model)."""
    tokenizer, vocab = tiny_tokenizer()
    if arch in moe.TINY:  # rows of 256 (the K-quants' block) in the experts too; moe.py's kv heads
        shape = {k: v for k, v in SMALL.items() if k != "kv_heads"}
        moe.make_moe_model(out_dir, arch, seed=seed, fused=fused, vocab=vocab, expert_ffn=256, **shape)
        tokenizer_json.write(tokenizer, os.path.join(out_dir, "tokenizer.json"))
        return
    options, config = RANDOM[arch]
    shape = dict(SMALL, trained=config.get("max_position_embeddings", SMALL["trained"]))
    shape.update({k: options[k] for k in ("layers",) if k in options})
    options = {k: v for k, v in options.items() if k not in shape}
    reference.make_model(out_dir, None, seed=seed, vocab=vocab, extra_config=config, **shape, **options)
    tokenizer_json.write(tokenizer, os.path.join(out_dir, "tokenizer.json"))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model_dir", metavar="MODEL_DIR", help="HF model directory to convert")
    ap.add_argument("out", metavar="OUT.gguf", help="GGUF file to write")
    ap.add_argument("--type", default="F16", choices=list(TYPES), help="tensor types (default %(default)s)")
    ap.add_argument("--version", type=int, default=3, choices=[2, 3], help="GGUF version (default %(default)s)")
    ap.add_argument("--alignment", type=int, default=32, help="data alignment, a power of two (default %(default)s)")
    ap.add_argument("--dequantized-dir", metavar="DIR", help="also write the GGUF's weights as an F32 HF model here")
    ap.add_argument("--name", help="general.name (default: MODEL_DIR's name)")
    ap.add_argument("--mla-split", action="store_true",
                    help="DeepSeek: kv_b as attn_k_b / attn_v_b with key_length_mla (llama.cpp since its MLA split)")
    ap.add_argument("--random", metavar="ARCH", choices=sorted(RANDOM) + sorted(moe.TINY),
                    help="first write a small random model of ARCH into MODEL_DIR")
    ap.add_argument("--seed", type=int, default=0, help="--random's seed (default %(default)s)")
    a = ap.parse_args()
    try:
        if a.random:
            random_model(a.model_dir, a.random, a.seed)
        types = convert(a.model_dir, a.out, a.type, a.version, a.alignment, a.dequantized_dir, a.name, a.mla_split)
    except (OSError, ValueError, KeyError) as e:
        sys.exit(f"to_gguf.py: {e}")
    counts = {}
    for t in types.values():
        counts[t] = counts.get(t, 0) + 1
    print(f"{a.out}: {len(types)} tensors ({', '.join(f'{n} {t}' for t, n in sorted(counts.items()))})",
          file=sys.stderr)


if __name__ == "__main__":
    main()
