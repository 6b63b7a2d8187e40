#!/usr/bin/env python3
"""PyTorch reference for pert: the same llama-style decoder for every positional scheme.

Written from the formulas of docs/design.md and their sources (HF transformers'
modeling_llama.py / modeling_rope_utils.py / T5Attention, Meta's llama, torchscale's xPos,
the ALiBi paper's repository, the annotated Transformer), not from pert's C++. It computes in
float64 so that it is the truth pert's float32 is measured against, and it runs the whole
sequence at once with no cache.

Dynamic NTK (and LongRoPE with "longrope_choice": "position") is defined causally, as pert
defines it: position m is encoded as part of a sequence of m + 1 tokens, with its query and
every key it reads rotated for that length. So the logits at m never depend on later tokens, and
a KV-cached decode can equal a fresh prefill. LongRoPE by default chooses its short or long
factors as transformers does, by the whole forward's length (max position + 1, here the number
of ids) for every position. (For dynamic NTK HF instead uses the whole input's length for every
position of an uncached forward, and whatever length each token saw when it was cached.)

config.json's "extend" block (Self-Extend, ReRoPE, StreamingLLM's sinks, blockwise attention,
log-n) is read by reference_extend.py: which keys each query sees, where far pairs are encoded,
and a factor per query row.

    reference.py make-model OUT_DIR POSITION_JSON [--seed N] [--dtype F32] [--extend JSON]
    reference.py logits MODEL_DIR IDS_FILE OUT_FILE     # float64 [T][vocab]
    reference.py attention MODEL_DIR IDS_FILE OUT_JSON [--sink N]   # the weights' statistics

IDS_FILE holds token ids as whitespace-separated decimal integers; OUT_FILE is raw float64.
"""
import argparse
import json
import math
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tools/: import by folder (tools/README.md)
from reference import reference_extend  # noqa: E402
from reference import moe  # noqa: E402  (the MoE blocks and OLMoE's q/k norms)
from reference import deepseek  # noqa: E402  (DeepSeek's latent attention)
from lib import safetensors_io  # noqa: E402
from lib.outputs import replaced  # noqa: E402  (whole or not at all, as pert's own)

DT = torch.float64


# ----------------------------------------------------------------------------- model files
def load_model_dir(model_dir):
    with open(os.path.join(model_dir, "config.json")) as f:
        config = json.load(f)
    single = os.path.join(model_dir, "model.safetensors")
    if os.path.exists(single):
        tensors = safetensors_io.load(single)
    else:
        with open(os.path.join(model_dir, "model.safetensors.index.json")) as f:
            index = json.load(f)
        tensors = {}
        for shard in sorted(set(index["weight_map"].values())):
            tensors.update(safetensors_io.load(os.path.join(model_dir, shard)))
    config, tensors = language_model(config, tensors)
    return config, {k: torch.tensor(v, dtype=DT) for k, v in tensors.items()}


VL = ("Qwen2VLForConditionalGeneration", "Qwen2_5_VLForConditionalGeneration", "Qwen3VLForConditionalGeneration",
      moe.QWEN3_VL_MOE, "Gemma3ForConditionalGeneration")
# Qwen's vision tower (v4, v5); Gemma 3's SigLIP tower and projector (v4 as published, v5)
VISION_PREFIXES = ("visual.", "model.visual.", "vision_tower.", "multi_modal_projector.", "model.vision_tower.",
                   "model.multi_modal_projector.")
# The language model's names: v5's model.language_model.*, Gemma 3's v4 language_model.model.* and
# language_model.lm_head.* (Gemma3ForConditionalGeneration's _checkpoint_conversion_mapping)
LANGUAGE_MODEL_PREFIXES = {"model.language_model.": "model.", "language_model.model.": "model.",
                           "language_model.lm_head.": "lm_head."}
# Gemma3TextConfig's defaults (configuration_gemma3.py): the published Gemma 3 VL text_configs omit most
GEMMA3_TEXT_DEFAULTS = {"vocab_size": 262208, "hidden_size": 2304, "intermediate_size": 9216, "num_hidden_layers": 26,
                        "num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 256,
                        "hidden_activation": "gelu_pytorch_tanh", "max_position_embeddings": 131072,
                        "rms_norm_eps": 1e-6, "tie_word_embeddings": True, "query_pre_attn_scalar": 256,
                        "sliding_window": 4096, "sliding_window_pattern": 6, "bos_token_id": 2, "eos_token_id": 1}


def language_model(config, tensors):
    """A vision-language checkpoint's language model (HF Qwen2/2.5/3-VL, Qwen3-VL-MoE, Gemma 3):
    text_config's keys at the top level (those already there win: v4 writes them there), the
    tensors under model.language_model. (transformers v5) or language_model.model. (Gemma 3 v4)
    named model., the vision tower's dropped. Gemma 3's language model is Gemma3ForCausalLM with
    Gemma3TextConfig's defaults; Qwen3-VL-MoE's input-first experts transposed as transformers v5
    loads them."""
    arch = (config.get("architectures") or [""])[0]
    if arch not in VL:
        return config, tensors
    text = config.get("text_config") or {}
    config = {k: v for k, v in config.items() if k != "text_config"}
    for key, value in text.items():
        if key not in ("model_type", "architectures") and config.get(key) is None:
            config[key] = value
    if arch == "Gemma3ForConditionalGeneration":  # (Gemma3ForCausalLM's rope_theta 1e6 and local base 1e4 below)
        config = dict(GEMMA3_TEXT_DEFAULTS, **config)
        config["architectures"] = ["Gemma3ForCausalLM"]
    out = {}
    for name, value in tensors.items():
        if name.startswith(VISION_PREFIXES):
            continue
        stored = next((p for p in LANGUAGE_MODEL_PREFIXES if name.startswith(p)), None)
        out[LANGUAGE_MODEL_PREFIXES[stored] + name[len(stored):] if stored else name] = value
    if arch == moe.QWEN3_VL_MOE:  # published [E, d, 2ff] / [E, ff, d]: v5's Transpose(1, 2) at load
        d = config["hidden_size"]
        for name in [n for n in out if n.endswith(("mlp.experts.gate_up_proj", "mlp.experts.down_proj"))]:
            w = out[name]
            input_first = w.shape[1] == d if name.endswith("gate_up_proj") else w.shape[2] == d
            if input_first:
                out[name] = np.ascontiguousarray(w.transpose(0, 2, 1))
    return config, out


def position_block(config):
    """pert's "position" block, or the HF rope keys it stands for."""
    if config.get("position") is not None:  # an HF rope_scaling beside RoPE's block is its scaling
        pos = dict(config["position"])
        scaling = position_block({"rope_scaling": config.get("rope_scaling")}).get("scaling")
        return dict(pos, scaling=scaling) if scaling else pos
    if config.get("rope_parameters") is not None:  # transformers v5: one object for the v4 keys
        rp = dict(config["rope_parameters"])
        if "rope_type" not in rp and "full_attention" in rp:  # one per layer type: the model's is the full layers'
            rp = dict(rp["full_attention"])
        config = dict(config, rope_scaling=rp)
        for key in ("rope_theta", "partial_rotary_factor"):
            if key in rp:
                config[key] = rp.pop(key)
    arch = (config.get("architectures") or [""])[0]
    default_theta = {"Gemma3ForCausalLM": 1e6, "Qwen2VLForConditionalGeneration": 1e6,  # the HF configs' defaults
                     "Qwen2_5_VLForConditionalGeneration": 1e6, "Qwen3VLForConditionalGeneration": 5e5,
                     moe.QWEN3_VL_MOE: 5e6}.get(arch, 10000.0)
    pos = {"type": "rope", "base": config.get("rope_theta") or default_theta}
    if arch in ("Qwen3VLForConditionalGeneration", moe.QWEN3_VL_MOE):  # modeling_qwen3_vl: interleaved whatever the key says
        pos.update(mrope_section=[24, 20, 20], mrope_interleaved=True)
    if arch == "Cohere2ForCausalLM":  # modeling_cohere2: rotate_half pairs (2j, 2j + 1)
        pos["layout"] = "interleaved"
    if config.get("partial_rotary_factor") is not None:
        head_dim = config.get("head_dim") or config["hidden_size"] // config["num_attention_heads"]
        pos["rotary_dim"] = int(head_dim * config["partial_rotary_factor"])
    rs = config.get("rope_scaling")
    if rs:
        rs = dict(rs)
        kind = rs.pop("rope_type", None) or rs.pop("type")
        rs.pop("type", None)
        for key in ("mrope_section", "mrope_interleaved"):  # M-RoPE (Qwen2/2.5/3-VL): beside the frequencies
            if rs.get(key) is not None:
                pos[key] = rs.pop(key)
            rs.pop(key, None)
        kind = {"su": "longrope", "mrope": "default"}.get(kind, kind)
        if kind != "default":
            pos["scaling"] = dict(rs, type=kind)
    return pos


# ----------------------------------------------------------------------------- rope family
def rope_inv_freq(pos, rot_dim, seq_len, config):
    """HF modeling_rope_utils: inverse frequencies for one forward over seq_len tokens."""
    base = pos.get("base", 10000.0)
    sc = pos.get("scaling") or {"type": "none"}
    kind = sc["type"]
    L = sc.get("original_max_position_embeddings") or config.get("original_max_position_embeddings") \
        or config.get("max_position_embeddings", 2048)
    exponents = torch.arange(0, rot_dim, 2, dtype=DT) / rot_dim
    if kind == "none":
        return 1.0 / base ** exponents
    factor = sc.get("factor")
    if kind == "linear":
        return 1.0 / base ** exponents / factor
    if kind == "ntk":
        return 1.0 / (base * factor ** (rot_dim / (rot_dim - 2))) ** exponents
    if kind == "dynamic":  # _compute_dynamic_ntk_parameters
        if seq_len > L:
            base = base * ((factor * seq_len / L) - (factor - 1)) ** (rot_dim / (rot_dim - 2))
        return 1.0 / base ** exponents
    if kind == "yarn":  # _compute_yarn_parameters
        beta_fast, beta_slow = sc.get("beta_fast", 32), sc.get("beta_slow", 1)

        def correction_dim(num_rotations):
            return (rot_dim * math.log(L / (num_rotations * 2 * math.pi))) / (2 * math.log(base))

        truncate = sc.get("truncate", True)  # HF: floor/ceil unless truncate is false (gpt-oss)
        low = max(math.floor(correction_dim(beta_fast)) if truncate else correction_dim(beta_fast), 0)
        high = min(math.ceil(correction_dim(beta_slow)) if truncate else correction_dim(beta_slow), rot_dim - 1)
        if low == high:
            high += 0.001
        ramp = torch.clamp((torch.arange(rot_dim // 2, dtype=DT) - low) / (high - low), 0, 1)
        extrapolation_factor = 1 - ramp
        pos_freqs = base ** exponents
        return (1.0 / (factor * pos_freqs)) * (1 - extrapolation_factor) + (1.0 / pos_freqs) * extrapolation_factor
    if kind == "llama3":  # _compute_llama3_parameters
        low_ff, high_ff = sc.get("low_freq_factor", 1.0), sc.get("high_freq_factor", 4.0)
        inv_freq = 1.0 / base ** exponents
        low_wavelen, high_wavelen = L / low_ff, L / high_ff
        wavelen = 2 * math.pi / inv_freq
        out = torch.where(wavelen > low_wavelen, inv_freq / factor, inv_freq)
        smooth = (L / wavelen - low_ff) / (high_ff - low_ff)
        smoothed = (1 - smooth) * out / factor + smooth * out
        medium = ~(wavelen < high_wavelen) & ~(wavelen > low_wavelen)
        return torch.where(medium, smoothed, out)
    if kind == "longrope":  # _compute_longrope_parameters
        ext = sc["long_factor"] if seq_len > L else sc["short_factor"]
        return 1.0 / (torch.tensor(ext, dtype=DT) * base ** exponents)
    raise ValueError(f"unknown rope scaling {kind}")


def rope_length(pos, m, T):
    """The sequence length whose frequencies position m of a forward over T positions takes: T
    for LongRoPE by the whole sequence ("longrope_choice": "sequence", the default: transformers'
    max(position_ids) + 1), else m + 1 (position m as part of a sequence of m + 1 tokens)."""
    sc = pos.get("scaling") or {}
    if sc.get("type") == "longrope" and sc.get("longrope_choice", "sequence") == "sequence":
        return T
    return m + 1


def rope_attention_factor(pos, config, seq_len):
    sc = pos.get("scaling") or {"type": "none"}
    factor = sc.get("factor")
    L = sc.get("original_max_position_embeddings") or config.get("original_max_position_embeddings") \
        or config.get("max_position_embeddings", 2048)
    if sc["type"] == "yarn":  # _compute_yarn_parameters: get_mscale, DeepSeek's mscale ratio
        def get_mscale(scale, mscale=1.0):
            return 1.0 if scale <= 1 else 0.1 * mscale * math.log(scale) + 1.0
        if sc.get("attention_factor") is not None:
            return sc["attention_factor"]
        if sc.get("mscale") and sc.get("mscale_all_dim"):
            return get_mscale(factor, sc["mscale"]) / get_mscale(factor, sc["mscale_all_dim"])
        return get_mscale(factor)
    if sc["type"] == "longrope":
        if sc.get("short_mscale") is not None:  # PhiMoE: one factor up to L, another past it
            return sc["long_mscale"] if seq_len > L else sc["short_mscale"]
        if factor is None:
            factor = config["max_position_embeddings"] / L
        default = 1.0 if factor <= 1 else math.sqrt(1 + math.log(factor) / math.log(L))
        return sc.get("attention_factor", default)
    return 1.0


def rotate_half(x):
    """HF llama: pairs (i, i + r/2)."""
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


def apply_rope(x, angles, mscale, layout, xpos_scale):
    """x: [H, T, r] rotary part; angles: [T, r/2]. Returns the rotated x."""
    if layout == "half":  # HF: x*cos + rotate_half(x)*sin with cos/sin repeated over both halves
        cos = torch.cat([angles.cos(), angles.cos()], dim=-1) * mscale
        sin = torch.cat([angles.sin(), angles.sin()], dim=-1) * mscale
        out = x * cos + rotate_half(x) * sin
        if xpos_scale is not None:
            out = out * torch.cat([xpos_scale, xpos_scale], dim=-1)
        return out
    # Meta llama / llama2.c: pairs (2i, 2i+1) as complex numbers times e^{i·angle}
    xc = torch.view_as_complex(x.reshape(*x.shape[:-1], -1, 2).contiguous())
    rot = torch.polar(torch.full_like(angles, mscale), angles)
    if xpos_scale is not None:
        rot = rot * xpos_scale
    return torch.view_as_real(xc * rot).reshape(x.shape)


def xpos_scale(pos, rot_dim, positions, T):
    """torchscale XPOS: zeta_i^(position/scale_base) [len(positions), r/2], positions centred on
    the sequence of T (only m - n matters); queries are multiplied by it, keys divided."""
    xp = pos["xpos"]
    gamma, scale_base = xp.get("gamma", 0.4), xp.get("scale_base", 512)
    zeta = (torch.arange(0, rot_dim, 2, dtype=DT) + gamma * rot_dim) / ((1 + gamma) * rot_dim)
    return zeta[None, :] ** ((positions.to(DT)[:, None] + (-T // 2)) / scale_base)


# ----------------------------------------------------------------------------- bias schemes
def alibi_slopes(n, max_bias=8.0):
    """The ALiBi paper's get_slopes, with max_bias in place of its fixed 8."""
    def power_of_2(n):
        start = 2 ** (-max_bias / n)
        return [start * start ** i for i in range(n)]
    if math.log2(n).is_integer():
        return power_of_2(n)
    closest = 2 ** math.floor(math.log2(n))
    return power_of_2(closest) + alibi_slopes(2 * closest, max_bias)[0::2][: n - closest]


def t5_relative_position_bucket(relative_position, num_buckets, max_distance):
    """HF T5Attention._relative_position_bucket with bidirectional=False (float32 log, as HF)."""
    relative_buckets = 0
    relative_position = -torch.min(relative_position, torch.zeros_like(relative_position))
    max_exact = num_buckets // 2
    is_small = relative_position < max_exact
    val_if_large = max_exact + (
        torch.log(relative_position.float() / max_exact) / math.log(max_distance / max_exact)
        * (num_buckets - max_exact)).to(torch.long)
    val_if_large = torch.min(val_if_large, torch.full_like(val_if_large, num_buckets - 1))
    relative_buckets += torch.where(is_small, relative_position, val_if_large)
    return relative_buckets


def sinusoidal_table(T, d, base):
    """The annotated Transformer's PositionalEncoding: sin on even dims, cos on odd."""
    pe = torch.zeros(T, d, dtype=DT)
    position = torch.arange(0, T, dtype=DT).unsqueeze(1)
    div_term = torch.exp(torch.arange(0, d, 2, dtype=DT) * -(math.log(base) / d))
    pe[:, 0::2] = torch.sin(position * div_term)
    pe[:, 1::2] = torch.cos(position * div_term)
    return pe


# ----------------------------------------------------------------------------- architectures
def layer_windows(config):
    """Sliding window per layer (0: none), as HF's Mistral / Qwen2 / Phi-3 configs define it."""
    n = config["num_hidden_layers"]
    arch = (config.get("architectures") or [""])[0]
    window = config.get("sliding_window") or 0
    if arch in ("", "LlamaForCausalLM"):
        return [0] * n
    if arch in ("Qwen3VLForConditionalGeneration", moe.QWEN3_VL_MOE):  # Qwen3VLTextConfig, Qwen3VLMoeTextConfig: no window
        return [0] * n
    if arch in ("Qwen2ForCausalLM", "Qwen3ForCausalLM", "Qwen2VLForConditionalGeneration",
                "Qwen2_5_VLForConditionalGeneration"):  # off unless use_sliding_window; then layers >= max_window_layers
        if not config.get("use_sliding_window", False):
            window = 0
        first = config.get("max_window_layers", n)
        out = [window if i >= first else 0 for i in range(n)]
    elif arch in GEMMA + ("Cohere2ForCausalLM",):  # sliding unless (i + 1) % pattern == 0 (Gemma 2: pattern 2)
        window = config.get("sliding_window", 4096)
        pattern = config.get("sliding_window_pattern", {"Gemma3ForCausalLM": 6, "Cohere2ForCausalLM": 4}.get(arch, 2)) \
            if arch != "Gemma2ForCausalLM" else 2
        out = [window if (i + 1) % pattern else 0 for i in range(n)]
    elif arch in (moe.QWEN2_MOE, moe.QWEN3_MOE):  # windows only with use_sliding_window
        if not config.get("use_sliding_window", False):
            window = 0
        qwen2 = arch == moe.QWEN2_MOE  # transformers v5's Qwen2-MoE: odd layers below max_window_layers
        out = [window if not qwen2 or ((i + 1) % 2 and i < config.get("max_window_layers", 28)) else 0 for i in range(n)]
    elif arch == "SmolLM3ForCausalLM":  # configuration_smollm3: sliding only where there is no RoPE
        if not config.get("use_sliding_window", False):
            window = 0
        out = [0 if rope else window for rope in smollm3_rope_layers(config)]
    else:  # Mistral, Phi-3: every layer
        out = [window] * n
    if config.get("layer_types"):
        out = [window if t == "sliding_attention" else 0 for t in config["layer_types"]]
    return out


GEMMA = ("Gemma2ForCausalLM", "Gemma3ForCausalLM")


def smollm3_rope_layers(config):
    """SmolLM3's no_rope_layers: 1 where a layer applies RoPE, 0 where it has none; by default
    [int((i + 1) % no_rope_layer_interval != 0) for i in range(layers)] (configuration_smollm3)."""
    given = config.get("no_rope_layers")
    if given:
        return [bool(r) for r in given]
    interval = config.get("no_rope_layer_interval", 4)
    return [(i + 1) % interval != 0 for i in range(config["num_hidden_layers"])]


def layer_layout(config, pos):
    """Each layer's attention: {"position", "window", "chunk", "temperature"} from the
    architecture's windows and pert's "layers" block (rules that select layers by "layers",
    "every"/"from" or "others", and set a position block, window, chunk or temperature)."""
    n = config["num_hidden_layers"]
    out = [{"position": pos, "window": w, "chunk": 0, "temperature": None} for w in layer_windows(config)]
    if (config.get("architectures") or [""])[0] == "Gemma3ForCausalLM":  # local layers: their own base, unscaled
        local = {"type": "rope", "base": config.get("rope_local_base_freq", 10000.0)}
        for lay in out:
            if lay["window"]:
                lay["position"] = local
    rp = config.get("rope_parameters") or {}
    if "rope_type" not in rp and "sliding_attention" in rp:  # transformers v5: a block per layer type
        local = {"rope_theta": config.get("rope_local_base_freq") or 10000.0}  # Gemma 3's default for the local layers
        sliding = position_block({"rope_parameters": dict(local, **rp["sliding_attention"]),
                                  "architectures": config.get("architectures")})
        for lay in out:
            if lay["window"] and lay["position"].get("type") == "rope":
                lay["position"] = sliding
    if (config.get("architectures") or [""])[0] == "Cohere2ForCausalLM":  # RoPE only where the window is
        for lay in out:
            if not lay["window"]:
                lay["position"] = {"type": "none"}
    if (config.get("architectures") or [""])[0] == "SmolLM3ForCausalLM":  # NoPE layers: no rotation at all
        for lay, rope in zip(out, smollm3_rope_layers(config)):
            if not rope:
                lay["position"] = {"type": "none"}
    rules = {name: r for name, r in (config.get("layers") or {}).items() if r is not None}
    chosen = {}
    for name, r in rules.items():
        if "layers" in r:
            chosen[name] = list(r["layers"])
        elif "every" in r:
            chosen[name] = list(range(r.get("from", r["every"] - 1), n, r["every"]))
    taken = {i for ls in chosen.values() for i in ls}
    for name, r in rules.items():
        for i in chosen.get(name, [i for i in range(n) if i not in taken]):  # "others": the rest
            out[i].update({k: r[k] for k in ("position", "window", "chunk", "temperature") if k in r})
    return out


# ----------------------------------------------------------------------------- the model
def position_tensor_shapes(position, hidden, heads, trained, layers, head_dim=None):
    """The tensors a scheme adds to the model, {name: shape} (the learned table, T5's bias table,
    KERPLE's r1 and r2 per layer, XL's and DeBERTa's projections of relative positions)."""
    kind = (position or {}).get("type")
    hd = head_dim or hidden // heads
    if kind == "xl":
        out = {"model.xl.r_w_bias": (heads, hd), "model.xl.r_r_bias": (heads, hd)}
        out.update({f"model.layers.{i}.self_attn.xl.r_net.weight": (heads * hd, hidden) for i in range(layers)})
        return out
    if kind == "deberta":
        out = {"model.rel_embeddings.weight": (2 * position.get("max_relative_positions", trained), hidden)}
        for i in range(layers):
            p = f"model.layers.{i}.self_attn."
            out.update({p + "pos_key_proj.weight": (heads * hd, hidden), p + "pos_query_proj.weight": (heads * hd, hidden),
                        p + "pos_query_proj.bias": (heads * hd,)})
        return out
    if kind == "learned":
        return {"model.embed_positions.weight": (position.get("max_positions", trained), hidden)}
    if kind == "t5":
        return {"model.relative_attention_bias.weight": (position.get("num_buckets", 32), heads)}
    if kind == "kerple":
        return {f"model.layers.{i}.self_attn.kerple_{r}": (heads,) for i in range(layers) for r in ("r1", "r2")}
    if kind == "fox":  # FoX's forget gate per layer: one logit per head from the layer's normed input
        return {f"model.layers.{i}.self_attn.fgate_proj.{part}": shape for i in range(layers)
                for part, shape in (("weight", (heads, hidden)), ("bias", (heads,)))}
    if kind == "cope":  # CoPE's learned positions e[0..npos_max - 1] per layer, shared by the heads
        return {f"model.layers.{i}.self_attn.cope_pos_emb": (position.get("npos_max", trained + 1), hd)
                for i in range(layers)}
    if kind == "fire":
        w = position.get("width", 32)
        return {f"model.layers.{i}.self_attn.fire.{name}": shape for i in range(layers)
                for name, shape in (("c", (1,)), ("threshold", (1,)), ("mlp.0.weight", (w, 1)), ("mlp.0.bias", (w,)),
                                    ("mlp.2.weight", (heads, w)), ("mlp.2.bias", (heads,)))}
    return {}


def position_tensor_init(position, name, shape, generator):
    """A scheme tensor's initial value for training: KERPLE's r1 ~ 2·U[0, 1) and r2 ~ U[0, 1)
    as in the paper's code; FIRE's c, L and MLP as a public implementation starts them; FoX's
    gate bias 0 (its weight N(0, 0.02²), as the authors' code starts every Linear); CoPE's
    positions 0 (the authors' pos_emb starts at zeros); the others N(0, 0.02²)."""
    if ".kerple_r" in name:
        return torch.rand(*shape, generator=generator) * (2.0 if name.endswith("r1") else 1.0)
    if name.endswith((".fgate_proj.bias", ".cope_pos_emb")):  # FoX: as the authors' _init_weights starts a
        return torch.zeros(shape)                              # Linear's bias; CoPE: as its authors' pos_emb
    if name.endswith(".fire.c"):  # FIRE: c = 0.1 and L = 512 at the start (mcleish7/arithmetic's FIRE)
        return torch.full(shape, 0.1)
    if name.endswith(".fire.threshold"):
        return torch.full(shape, 512.0)
    if ".fire.mlp." in name:  # torch.nn.Linear's default: U(-1/sqrt(fan_in), 1/sqrt(fan_in))
        fan_in = 1 if ".mlp.0." in name else position.get("width", 32)
        return (torch.rand(*shape, generator=generator) * 2 - 1) / math.sqrt(fan_in)
    return torch.randn(*shape, generator=generator) * 0.02


def position_tensor_constrain(position, W):
    """After each optimizer step: KERPLE's r1, r2 clamped to at least eps in place, as the
    paper's code does (a clamp inside the forward would stop their gradient below eps)."""
    if (position or {}).get("type") == "kerple":
        with torch.no_grad():
            for name, t in W.items():
                if ".kerple_r" in name:
                    t.clamp_(min=position.get("eps", 0.01))


def fire_bias(pos, W, layer, dist, query):
    """FIRE (Li et al. 2023): f(ψ(m - n) / (ψ(max(m, L)) + eps)) [head, m, n], ψ(x) = log(|c|·x + 1),
    L = |threshold|, f = Linear(1, width) -> ReLU -> Linear(width, heads), all of this layer;
    `query` [m, n] is the query position the pair is encoded at (m, or an extend method's far one)."""
    p = f"model.layers.{layer}.self_attn.fire."
    c, threshold = W[p + "c"].abs(), W[p + "threshold"].abs()
    dt = c.dtype
    norm = torch.log1p(c * torch.maximum(query.to(dt), threshold)) + pos.get("eps", 1e-6)
    u = torch.log1p(c * dist.to(dt)) / norm  # [m, n]
    hidden = torch.relu(u[..., None] * W[p + "mlp.0.weight"][:, 0] + W[p + "mlp.0.bias"])  # [m, n, width]
    return (hidden @ W[p + "mlp.2.weight"].T + W[p + "mlp.2.bias"]).permute(2, 0, 1)


def xl_sinusoids(dist, d):
    """Transformer-XL's PositionalEmbedding at distances `dist` [...]: [..., d], the sines of
    dist·10000^(-2i/d) then their cosines."""
    inv_freq = 1.0 / 10000 ** (torch.arange(0, d, 2, dtype=DT) / d)
    angles = dist.to(DT)[..., None] * inv_freq
    return torch.cat([angles.sin(), angles.cos()], dim=-1)


def gather_by_distance(table_scores, index):
    """table_scores [..., H, T, U] (a score per row and table entry), index [T, T] into U:
    out[..., h, m, n] = table_scores[..., h, m, index[m, n]]."""
    return torch.gather(table_scores, -1, index.expand(*table_scores.shape[:-2], *index.shape))


def relative_terms(pos, W, layer, q, k, dist, hd, trained):
    """Terms of the score that read q and k as well as the distance [..., H, m, n], before the
    score scale (q: [..., H, T, hd], k likewise, dist [T, T] with m - n >= 0 where unmasked).
    xl (Dai et al. 2019, eq. (8) without its content term): u·k_n + (q_m + v)·W_R R_{m-n}, R
    the sinusoids of the model width, u = r_w_bias, v = r_r_bias [head, hd] shared by the layers,
    W_R = r_net of this layer.
    deberta (He et al. 2021, as microsoft/DeBERTa and HF's DisentangledSelfAttention compute it):
    q_m·K_r[i] + k_n·Q_r[i], i = clamp(m - n + k, 0, 2k - 1), K_r = P·W_kr^T, Q_r = P·W_qr^T + b_qr,
    P the relative embeddings [2k, width] shared by the layers, k = max_relative_positions (the
    trained length unless given)."""
    H = q.shape[-3]
    p = f"model.layers.{layer}.self_attn."
    if pos["type"] == "xl":
        values, index = torch.unique(dist.clamp(min=0), return_inverse=True)  # distances met, and where
        r = xl_sinusoids(values, W[p + "xl.r_net.weight"].shape[1]).to(q.dtype) @ W[p + "xl.r_net.weight"].T
        r = r.view(len(values), H, hd).transpose(0, 1)  # [H, U, hd]
        u, v = W["model.xl.r_w_bias"][:, None, :], W["model.xl.r_r_bias"][:, None, :]  # [H, 1, hd]
        content = (k * u).sum(-1)[..., None, :]  # u·k_n [..., H, 1, T]
        return content + gather_by_distance((q + v) @ r.mT, index)
    span = pos.get("max_relative_positions", trained)
    P = W["model.rel_embeddings.weight"]
    index = (dist.round().long() + span).clamp(0, 2 * span - 1)
    kr = (P @ W[p + "pos_key_proj.weight"].T).view(-1, H, hd).transpose(0, 1)  # [H, 2k, hd]
    qr = (P @ W[p + "pos_query_proj.weight"].T + W[p + "pos_query_proj.bias"]).view(-1, H, hd).transpose(0, 1)
    c2p = gather_by_distance(q @ kr.mT, index)
    p2c = gather_by_distance(k @ qr.mT, index.T).transpose(-1, -2)  # [n, m] gathered, then [m, n]
    return c2p + p2c


def kerple_bias(pos, W, layer, dist):
    """KERPLE-log (Chi et al. 2022): -r1·log(1 + r2·(m - n)) [head, m, n], r1 and r2 of this
    layer clamped to at least eps as the paper's code clamps them before each use."""
    eps = pos.get("eps", 0.01)
    r1, r2 = (W[f"model.layers.{layer}.self_attn.kerple_{r}"].clamp(min=eps)[:, None, None] for r in ("r1", "r2"))
    return -r1 * torch.log1p(r2 * dist[None].to(r1.dtype))


def fox_decay(W, layer, h):
    """FoX (Lin et al. 2025): the bias c_m - c_n [..., H, m, n] of layer `layer`, c_m the sum over
    l <= m of ln sigmoid(w_h . h_l + b_h), h [..., T, d] the layer's normed input (as it is: a
    runtime keeps the gate in F32, whatever it rounds the matrices' inputs to)."""
    p = f"model.layers.{layer}.self_attn.fgate_proj."
    log_f = torch.nn.functional.logsigmoid(h @ W[p + "weight"].T + W[p + "bias"])  # [..., T, H]
    c = torch.cumsum(log_f, dim=-2).transpose(-1, -2)  # [..., H, T]
    return c[..., :, None] - c[..., None, :]


def cope_bias(pos, W, layer, scores, q, trained):
    """CoPE (Golovneva et al. 2024): the term q_m . e(p_mn) [..., H, m, n] of layer `layer`, before the
    score's scale. scores [..., H, m, n]: q.k scaled and masked (-inf where m does not see n), whose
    sigmoids are the gates; p_mn = the sum of the gates of keys n..m (counted from the query back),
    capped at npos_max - 1; e(p) = (1 - w) e[floor p] + w e[ceil p], w = p - floor p, e the layer's
    cope_pos_emb rows. q [..., H, T, hd] as the scores read it (log-n's factor on it). The
    interpolation weight carries the gradient to the gates (floor and ceil do not)."""
    npos = pos.get("npos_max", trained + 1)
    gates = torch.sigmoid(scores)  # 0 where masked
    p = torch.flip(torch.cumsum(torch.flip(gates, [-1]), -1), [-1]).clamp(max=npos - 1)  # sums over keys n..T-1
    at_integer = q @ W[f"model.layers.{layer}.self_attn.cope_pos_emb"].T  # [..., H, T, npos]: q_m . e[t]
    below = p.detach().floor()
    w = p - below
    lo = at_integer.gather(-1, below.long())
    hi = at_integer.gather(-1, p.detach().ceil().long())
    return lo + w * (hi - lo)


def stick_breaking(scores):
    """Stick-breaking attention's weights (Tan et al. 2025) from scores [..., m, n] (scaled, -inf where
    masked): key n < m gets sigmoid(z_mn) times prod over n < k < m of (1 - sigmoid(z_mk)), the query's
    own key m the rest, prod over k < m of (1 - sigmoid(z_mk)) (the authors' attend_current=False,
    the remainder on the query's own value). Each row sums to 1."""
    T = scores.shape[-1]
    earlier = torch.ones(T, T, dtype=torch.bool).tril(-1)  # [m, n]: n < m
    log_beta = torch.nn.functional.logsigmoid(scores)
    log_rest = torch.where(earlier, torch.nn.functional.logsigmoid(-scores), torch.zeros((), dtype=scores.dtype))
    # between[m, n] = sum over k of log_rest[m, k]·[k > n]: the sticks of the keys nearer than n
    between = log_rest @ earlier.to(scores.dtype)
    w = torch.where(earlier, torch.exp(log_beta + between), torch.zeros((), dtype=scores.dtype))
    return w + torch.diag_embed(torch.exp(log_rest.sum(-1)))


def rmsnorm_llama(x, w, eps):
    return x / torch.sqrt((x * x).mean(-1, keepdim=True) + eps) * w


def mrope_axes(pos, rot):
    """M-RoPE: the axis (0 t, 1 h, 2 w) whose position turns each rotary pair, as HF builds its
    frequencies: Qwen2-VL's apply_multimodal_rotary_pos_emb takes mrope_section[a] pairs per axis in
    turn; Qwen3-VL's apply_interleaved_mrope starts from t everywhere and gives h the pairs
    1, 4, ... below 3·section[1] and w the pairs 2, 5, ... below 3·section[2]."""
    section = pos["mrope_section"]
    assert sum(section) == rot // 2
    if not pos.get("mrope_interleaved"):
        return torch.tensor([a for a, count in enumerate(section) for _ in range(count)])
    axes = torch.zeros(rot // 2, dtype=torch.long)
    for a in (1, 2):
        axes[a:3 * section[a]:3] = a
    return axes


def forward(config, W, ids, inputs=None, observe=None, axis_positions=None):
    """Logits [..., T, vocab] for token ids [..., T] (a list, or a [B, T] tensor), causal, in the
    weights' dtype (float64 from load_model_dir; float32 when train.py trains through it).
    inputs(name, h): what the matrix `name` (HF's name without ".weight"; "lm_head" for the
    output, tied or not) multiplies instead of h, e.g. h rounded as a runtime quantizes it.
    observe(layer, probs): called with each layer's attention weights [..., H, T, T].
    axis_positions [T][3]: M-RoPE's positions (t, h, w) of each token (default: its index on every
    axis); masks and windows stay by index."""
    d = config["hidden_size"]
    H = config["num_attention_heads"]
    KV = config.get("num_key_value_heads") or H
    hd = config.get("head_dim") or d // H
    eps = config.get("rms_norm_eps", 1e-6)
    pos = position_block(config)
    kind = pos["type"]
    ids_t = torch.as_tensor(ids, dtype=torch.long)
    T = ids_t.shape[-1]
    dt = W["model.embed_tokens.weight"].dtype
    positions = torch.arange(T)
    rope_at = positions if axis_positions is None else torch.as_tensor(axis_positions, dtype=torch.long)  # RoPE's
    # The "extend" block: which keys row m sees, where far pairs are encoded, log-n's row factor.
    plan = reference_extend.Plan(reference_extend.parse(config, pos) or {}, T)

    gemma = (config.get("architectures") or [""])[0] in GEMMA
    cohere = (config.get("architectures") or [""])[0] == "Cohere2ForCausalLM"
    olmoe = (config.get("architectures") or [""])[0] == moe.OLMOE
    if gemma:  # Gemma's RMSNorm: the gain is 1 + w (modeling_gemma2 Gemma2RMSNorm)
        def rmsnorm(x, w, eps):
            return x / torch.sqrt((x * x).mean(-1, keepdim=True) + eps) * (1 + w)
    elif cohere:  # CohereLayerNorm: weight only, eps layer_norm_eps
        eps = config.get("layer_norm_eps", 1e-5)

        def rmsnorm(x, w, eps):
            c = x - x.mean(-1, keepdim=True)
            return c / torch.sqrt((c * c).mean(-1, keepdim=True) + eps) * w
        hd = d // H  # HF: head_dim = hidden_size // num_attention_heads, whatever the config says
    else:
        rmsnorm = rmsnorm_llama
    x = W["model.embed_tokens.weight"][ids_t]  # [..., T, d]
    if gemma:  # the normalizer is a tensor of the activations' dtype
        x = x * torch.tensor(d ** 0.5, dtype=dt)
    if kind == "learned":
        table = W["model.embed_positions.weight"]
        rows = pos.get("max_positions", config.get("max_position_embeddings", 2048))
        if T > rows and pos.get("beyond", "error") != "clamp":
            raise ValueError("past the learned table")
        x = x + table[torch.clamp(positions, max=rows - 1)]
    elif kind == "sinusoidal":
        x = x * pos.get("embed_scale", 1.0) + sinusoidal_table(T, d, pos.get("base", 10000.0)).to(dt)

    dist = plan.distance()  # m - n, or where a far pair is encoded

    def scheme(lp):
        """What one layer's position block lp does: its kind, its bias [H, T, T] (alibi, t5) and
        for rope, the query rows grouped by the frequencies and factor their length gives, and
        encode(x, at, inv_freq, mscale, side)."""
        out = {"kind": lp["type"], "bias": torch.zeros(H, T, T, dtype=dt), "pos": lp}  # [head, query m, key n]
        if lp["type"] == "alibi":
            slopes = torch.tensor(alibi_slopes(H, lp.get("max_bias", 8.0)), dtype=DT)
            out["bias"] = (-slopes[:, None, None] * dist[None].to(DT)).to(dt)
        elif lp["type"] == "t5":
            buckets = t5_relative_position_bucket(-dist.round().long(), lp.get("num_buckets", 32),
                                                  lp.get("max_distance", 128))
            out["bias"] = W["model.relative_attention_bias.weight"][buckets].permute(2, 0, 1)
        if lp["type"] != "rope":
            return out
        rot = lp.get("rotary_dim", hd)
        layout = lp.get("layout", "half")
        # [(rows (a slice), inverse frequencies [r/2], attention factor)]
        groups = []
        for m in range(T):
            length = rope_length(lp, m, T)
            inv_freq, mscale = rope_inv_freq(lp, rot, length, config), rope_attention_factor(lp, config, length)
            if groups and torch.equal(groups[-1][1], inv_freq) and groups[-1][2] == mscale:
                groups[-1][0] = slice(groups[-1][0].start, m + 1)
            else:
                groups.append([slice(m, m + 1), inv_freq, mscale])

        axes = mrope_axes(lp, rot) if lp.get("mrope_section") else None

        def encode(x, at, inv_freq, mscale, side):
            """x [..., len(at), hd] with its rotary dims rotated as at positions `at` (fractional ones
            too), times the attention factor (and xPos's scale: side "q" multiplies, "k" divides).
            M-RoPE: `at` [len][3], pair i turned by its axis's position."""
            if at.dim() == 2:
                at = at.to(DT)[:, axes] if axes is not None else at[:, 0].to(DT)[:, None]
                angles = (at * inv_freq[None, :]).to(dt)
            else:
                angles = (at.to(DT)[:, None] * inv_freq[None, :]).to(dt)
            scale = None
            if lp.get("xpos") is not None:
                up = xpos_scale(lp, rot, at, T)
                scale = (up if side == "q" else 1.0 / up).to(dt)
            return torch.cat([apply_rope(x[..., :rot], angles, mscale, layout, scale), x[..., rot:]], dim=-1)
        out.update(groups=groups, encode=encode)
        return out

    def heads(t, n):  # [..., T, n·hd] -> [..., n, T, hd]
        return t.view(*t.shape[:-1], n, hd).transpose(-2, -3)

    layout = layer_layout(config, pos)
    schemes = {}  # one per distinct position block
    for lay in layout:
        key = json.dumps(lay["position"], sort_keys=True)
        if key not in schemes:
            schemes[key] = scheme(lay["position"])
    trained = config.get("original_max_position_embeddings") or config.get("max_position_embeddings", 2048)

    def linear(h, name):  # h @ W.T (+ the bias when the checkpoint has one)
        out = (inputs(name, h) if inputs else h) @ W[name + ".weight"].T
        return out + W[name + ".bias"] if name + ".bias" in W else out

    for i in range(config["num_hidden_layers"]):
        p = f"model.layers.{i}."
        h = rmsnorm(x, W[p + "input_layernorm.weight"], eps)
        if deepseek.is_mla(W, p):  # DeepSeek V2/V3: multi-head latent attention (deepseek.py)
            causal = torch.zeros(T, T, dtype=dt).masked_fill(~plan.mask(layout[i]["window"], layout[i]["chunk"]),
                                                             float("-inf"))
            out = deepseek.mla_attention(config, W, p, h, rmsnorm, eps, causal, observe, i)
        else:
            if p + "self_attn.qkv_proj.weight" in W:  # Phi-3: one matrix, rows q | k | v
                q, k, v = linear(h, p + "self_attn.qkv_proj").split([H * hd, KV * hd, KV * hd], dim=-1)
            else:
                q, k, v = (linear(h, p + f"self_attn.{n}_proj") for n in "qkv")
            if olmoe:  # q and k normalised over the whole projection, then clip_qkv
                q, k, v = moe.olmoe_qkv(config, W, p, q, k, v, rmsnorm, eps)
            q, k, v = heads(q, H), heads(k, KV), heads(v, KV)  # [..., H or KV, T, hd]
            if p + "self_attn.q_norm.weight" in W and not olmoe:  # Qwen3: each head's q and k RMS-normalised before RoPE
                q = rmsnorm(q, W[p + "self_attn.q_norm.weight"], eps)
                k = rmsnorm(k, W[p + "self_attn.k_norm.weight"], eps)
            k = k.repeat_interleave(H // KV, dim=-3)  # GQA: head h reads kv head h // (H/KV)
            v = v.repeat_interleave(H // KV, dim=-3)
            sch = schemes[json.dumps(layout[i]["position"], sort_keys=True)]
            lkind, lpos, bias = sch["kind"], sch["pos"], sch["bias"]
            if lkind == "rope":
                encode = sch["encode"]
                parts = []
                for rows, inv_freq, ms in sch["groups"]:
                    qg = q[..., rows, :]
                    s = encode(qg, rope_at[rows], inv_freq, ms, "q") @ encode(k, rope_at, inv_freq, ms, "k").mT
                    if plan.near is not None:  # far pairs: the same frequencies and factor, other positions
                        far = encode(qg, plan.q_far[rows], inv_freq, ms, "q") @ encode(k, plan.k_far, inv_freq, ms, "k").mT
                        s = torch.where(plan.near[rows], s, far)
                    if plan.farther is not None:  # DCA's older chunks: the query at its second far position
                        far2 = encode(qg, plan.q_farther[rows], inv_freq, ms, "q") @ encode(k, plan.k_far, inv_freq, ms, "k").mT
                        s = torch.where(plan.farther[rows], far2, s)
                    parts.append(s)
                scores = torch.cat(parts, dim=-2)
            else:
                scores = q @ k.transpose(-1, -2)
            scale = 1 / math.sqrt(hd * (3 if lkind == "deberta" else 1))  # DeBERTa: three terms, 1/sqrt(3d)
            if gemma:  # query_pre_attn_scalar^-1/2 instead of head_dim^-1/2
                scale = config.get("query_pre_attn_scalar", 256) ** -0.5
            scores = scores * scale
            # log-n and iRoPE's temperature (Llama 4: 1 + s·ln(1 + ⌊(m + 1)/floor⌋)) scale row m's query,
            # so its q·k, not its bias; DCA's length scale key n's too
            row = plan.row_scale
            if layout[i]["temperature"]:
                t = layout[i]["temperature"]
                tau = 1 + t["scale"] * torch.log1p(torch.floor((positions.to(DT) + 1) / t["floor"]))
                row = tau if row is None else row * tau
            if row is not None:
                scores = scores * row[:, None].to(dt)
            if plan.col_scale is not None:
                scores = scores * plan.col_scale[None, :].to(dt)
            cap = config.get("attn_logit_softcapping", 50.0 if config["architectures"][0] == "Gemma2ForCausalLM" else None) \
                if gemma else None
            if cap:  # Gemma 2: after the scale, before the mask
                scores = torch.tanh(scores / cap) * cap
            if lkind in ("xl", "deberta"):  # the query's side of these terms scaled too
                qs = q if row is None else q * row[:, None].to(dt)
                scores = scores + relative_terms(lpos, W, i, qs, k, dist, hd, trained) * scale
            mask = torch.zeros(T, T, dtype=dt).masked_fill(~plan.mask(layout[i]["window"], layout[i]["chunk"]),
                                                           float("-inf"))
            if lkind == "kerple":
                bias = kerple_bias(lpos, W, i, dist.clamp(min=0))  # (the mask hides n > m)
            elif lkind == "fire":
                query = positions[:, None].expand(T, T)
                if plan.near is not None:  # far pairs are encoded at the far query position
                    query = torch.where(plan.near, query, plan.q_far[:, None].expand(T, T).floor().long())
                bias = fire_bias(lpos, W, i, dist.clamp(min=0), query)
            elif lkind == "fox":
                bias = fox_decay(W, i, h)
            elif lkind == "cope":  # gates from the scores as masked; the position term scaled as q.k
                qs = q if row is None else q * row[:, None].to(dt)
                bias = cope_bias(lpos, W, i, scores + mask, qs, trained) * scale
            scores = scores + bias + mask
            if lkind == "stick_breaking":
                probs = stick_breaking(scores)
            else:
                probs = softmax_with_sink_logits(scores, W.get(p + "self_attn.sinks"))  # [..., H, query m, key n]
            if observe:
                observe(i, probs)
            att = probs @ v  # [..., H, T, hd]
            out = linear(att.transpose(-2, -3).reshape(*x.shape[:-1], H * hd), p + "self_attn.o_proj")
        if gemma:  # the branch's output normalised, then the MLP's own input norm
            x = x + rmsnorm(out, W[p + "post_attention_layernorm.weight"], eps)
            h = rmsnorm(x, W[p + "pre_feedforward_layernorm.weight"], eps)
        elif cohere:  # parallel: x + attn(h) + mlp(h), one norm
            x = x + out
        else:
            x = x + out
            h = rmsnorm(x, W[p + "post_attention_layernorm.weight"], eps)
        if moe.is_moe(config) and moe.sparse_layer(config, i):  # the router and experts (moe.py)
            x = x + moe.moe_mlp(config, W, p, h, inputs)
            continue
        if p + "mlp.gate_up_proj.weight" in W:  # Phi-3: gate rows first, then up
            gate, up = linear(h, p + "mlp.gate_up_proj").chunk(2, dim=-1)
        else:
            gate, up = linear(h, p + "mlp.gate_proj"), linear(h, p + "mlp.up_proj")
        if gemma:  # GeGLU with gelu_pytorch_tanh, and the output normalised
            mlp = linear(torch.nn.functional.gelu(gate, approximate="tanh") * up, p + "mlp.down_proj")
            x = x + rmsnorm(mlp, W[p + "post_feedforward_layernorm.weight"], eps)
        else:
            x = x + linear(torch.nn.functional.silu(gate) * up, p + "mlp.down_proj")
    x = rmsnorm(x, W["model.norm.weight"], eps)
    head = W["model.embed_tokens.weight"] if config.get("tie_word_embeddings", gemma or cohere) else W["lm_head.weight"]
    logits = (inputs("lm_head", x) if inputs else x) @ head.T
    if cohere:
        logits = logits * config.get("logit_scale", 0.0625)
    final_cap = config.get("final_logit_softcapping", 30.0 if config["architectures"][0] == "Gemma2ForCausalLM" else None) \
        if gemma else None
    return torch.tanh(logits / final_cap) * final_cap if final_cap else logits


def softmax_with_sink_logits(scores, sink_logits):
    """Each row's softmax over its keys, scores [..., H, T, T]; with learned sink logits [H]
    (gpt-oss's self_attn.sinks, whatever the architecture) each head's logit joins every row as one
    more column after the scale, soft-cap, mask and bias, as HF's eager attention does, and that
    column is dropped after the softmax (which subtracts the max over the keys and the sink): the
    weights sum to less than 1."""
    if sink_logits is None:
        return torch.softmax(scores, dim=-1)
    column = sink_logits.to(scores.dtype).reshape(-1, 1, 1).expand(*scores.shape[:-1], 1)
    return torch.softmax(torch.cat([scores, column], dim=-1), dim=-1)[..., :-1]


# ----------------------------------------------------------------------------- attention statistics
def distance_bucket(d):
    """0 for distance 0, else 1 + floor(log2 d): 1, 2-3, 4-7, ... (pert attention's buckets)."""
    return 0 if d == 0 else int(d).bit_length()


def attention_per_query(probs, sink=1, sink_logits=False):
    """Each query's statistics from the full weight matrices, probs[layer] [H, T, T] (query m,
    key n), in float64: {"entropy", "sink_mass", "mean_distance", "max_weight": [layer, H, T],
    "mass": [layer, H, T, bucket]}; with `sink_logits` (the model has learned sink logits) also
    "sink_logit_mass": 1 - the row's weights, the share no key gets (entropy stays over the keys)."""
    T = probs[0].shape[-1]
    m = torch.arange(T)[:, None]
    dist = (m - torch.arange(T)[None, :]).clamp(min=0).to(DT)          # [T, T] m - n (0 above the diagonal)
    bucket = torch.tensor([[distance_bucket(max(i - j, 0)) for j in range(T)] for i in range(T)])
    one_hot = torch.nn.functional.one_hot(bucket, distance_bucket(T - 1) + 1).to(DT)  # [T, T, buckets]
    statistics = [("entropy", lambda p: -torch.special.xlogy(p, p).sum(-1)),
                  ("sink_mass", lambda p: p[..., :sink].sum(-1)),
                  ("mean_distance", lambda p: (p * dist).sum(-1)),
                  ("max_weight", lambda p: p.max(-1).values),
                  ("mass", lambda p: torch.einsum("hmn,mnb->hmb", p, one_hot))]
    if sink_logits:
        statistics.append(("sink_logit_mass", lambda p: 1 - p.sum(-1)))
    stats = {}
    for name, f in statistics:
        stats[name] = torch.stack([f(p.to(DT)) for p in probs])
    return stats


def attention_stats(per_query, trained):
    """What `pert attention` reports from attention_per_query's: per query range ("all"; "in_L":
    m < trained and "past_L": m >= trained when some query is past it) each statistic's mean over
    the range's queries as [layer][head] lists (mass: [layer][head][bucket])."""
    T, buckets = per_query["mass"].shape[2:]
    ranges = {"all": torch.ones(T, dtype=torch.bool), "in_L": torch.arange(T) < trained,
              "past_L": torch.arange(T) >= trained}
    out = {"buckets": [[0, 0]] + [[1 << (k - 1), min((1 << k) - 1, T - 1)] for k in range(1, buckets)],
           "queries": {r: int(rows.sum()) for r, rows in ranges.items()}, "attention": {}}
    for r, rows in ranges.items():
        if r == "all" or ranges["past_L"].any():
            out["attention"][r] = {name: torch.as_tensor(v)[:, :, rows].mean(2).tolist() for name, v in per_query.items()}
    return out


# ----------------------------------------------------------------------------- random models
def make_model(out_dir, position, seed=0, dtype="F32", hidden=64, heads=4, kv_heads=2, layers=2, ffn=128,
               vocab=96, trained=32, tie=False, head_dim=None, extra_config=None, qkv_bias=False, o_bias=False,
               mlp_bias=False, fused=False, qk_norm=False, extend=None, gemma=False, parallel=False, vl=None):
    """A random-weight checkpoint (safetensors + config.json) whose activations stay O(1).
    qkv_bias / o_bias / mlp_bias add bias tensors; fused writes Phi-3's qkv_proj and gate_up_proj;
    extend is config.json's "extend" block; gemma writes Gemma's four norms per layer, gains stored
    as w around 0 (applied as 1 + w); parallel leaves out post_attention_layernorm (Cohere).
    vl lays it out as a vision-language checkpoint with a few random vision tensors: "v4" (Qwen2-VL
    as published: model.layers.*, visual.*) or "v5" (transformers v5, Qwen3-VL: the language model
    under model.language_model., model.visual.*, its config keys under text_config); "gemma3_v4"
    (Gemma 3 as published: language_model.model.*, language_model.lm_head.*, vision_tower.*,
    multi_modal_projector.*) or "gemma3_v5" (model.language_model.*, lm_head.*, model.vision_tower.*,
    model.multi_modal_projector.*), the language model's keys under text_config."""
    g = torch.Generator().manual_seed(seed)
    hd = head_dim or hidden // heads

    def randn(*shape, std=1.0):
        return (torch.randn(*shape, generator=g, dtype=torch.float64) * std).numpy()

    gain = 0.0 if gemma else 1.0  # Gemma stores an RMSNorm's gain as w, applied as 1 + w
    t = {"model.embed_tokens.weight": randn(vocab, hidden), "model.norm.weight": gain + randn(hidden, std=0.1)}
    for i in range(layers):
        p = f"model.layers.{i}."
        t[p + "input_layernorm.weight"] = gain + randn(hidden, std=0.1)
        t[p + "post_attention_layernorm.weight"] = gain + randn(hidden, std=0.1)
        if parallel:  # Cohere: one norm per layer
            del t[p + "post_attention_layernorm.weight"]
        if gemma:
            t[p + "pre_feedforward_layernorm.weight"] = randn(hidden, std=0.1)
            t[p + "post_feedforward_layernorm.weight"] = randn(hidden, std=0.1)
        t[p + "self_attn.q_proj.weight"] = randn(heads * hd, hidden, std=hidden ** -0.5 * 2)
        t[p + "self_attn.k_proj.weight"] = randn(kv_heads * hd, hidden, std=hidden ** -0.5 * 2)
        t[p + "self_attn.v_proj.weight"] = randn(kv_heads * hd, hidden, std=hidden ** -0.5)
        t[p + "self_attn.o_proj.weight"] = randn(hidden, heads * hd, std=(heads * hd) ** -0.5)
        t[p + "mlp.gate_proj.weight"] = randn(ffn, hidden, std=hidden ** -0.5)
        t[p + "mlp.up_proj.weight"] = randn(ffn, hidden, std=hidden ** -0.5)
        t[p + "mlp.down_proj.weight"] = randn(hidden, ffn, std=ffn ** -0.5)
        if qkv_bias:
            t[p + "self_attn.q_proj.bias"] = randn(heads * hd, std=0.5)
            t[p + "self_attn.k_proj.bias"] = randn(kv_heads * hd, std=0.5)
            t[p + "self_attn.v_proj.bias"] = randn(kv_heads * hd, std=0.5)
        if o_bias:
            t[p + "self_attn.o_proj.bias"] = randn(hidden, std=0.5)
        if qk_norm:
            t[p + "self_attn.q_norm.weight"] = gain + randn(hd, std=0.2)
            t[p + "self_attn.k_norm.weight"] = gain + randn(hd, std=0.2)
        if mlp_bias:
            for n, size in (("gate", ffn), ("up", ffn), ("down", hidden)):
                t[p + f"mlp.{n}_proj.bias"] = randn(size, std=0.5)
        if fused:
            t[p + "self_attn.qkv_proj.weight"] = np.concatenate([t.pop(p + f"self_attn.{n}_proj.weight") for n in "qkv"])
            t[p + "mlp.gate_up_proj.weight"] = np.concatenate([t.pop(p + f"mlp.{n}_proj.weight") for n in ("gate", "up")])
    if not tie:
        t["lm_head.weight"] = randn(vocab, hidden, std=hidden ** -0.5)
    for name, shape in position_tensor_shapes(position, hidden, heads, trained, layers, head_dim).items():
        t[name] = randn(*shape)
        if name.endswith(".fire.threshold"):  # FIRE's L inside the T positions: both sides of max(m, L)
            t[name] = np.full(shape, 40.0)
        if name.endswith(("r_net.weight", "pos_key_proj.weight", "pos_query_proj.weight")):  # as q_proj
            t[name] = randn(*shape, std=hidden ** -0.5 * 2)
        if name.endswith(".fgate_proj.weight"):  # FoX: gate logits ~ 2 + N(0, 1), forget gates mostly 0.7-0.95
            t[name] = randn(*shape, std=hidden ** -0.5)
        if name.endswith(".fgate_proj.bias"):
            t[name] = 2.0 + randn(*shape)
        if name.endswith(".cope_pos_emb"):  # CoPE: position terms of O(1) beside scores of a few units
            t[name] = randn(*shape, std=0.5)
    config = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": vocab,
              "hidden_size": hidden, "intermediate_size": ffn, "num_hidden_layers": layers,
              "num_attention_heads": heads, "num_key_value_heads": kv_heads, "max_position_embeddings": trained,
              "rms_norm_eps": 1e-5, "tie_word_embeddings": tie, "bos_token_id": 1, "eos_token_id": 2}
    if head_dim:
        config["head_dim"] = head_dim
    if position is not None:
        config["position"] = position
    if extend is not None:
        config["extend"] = extend
    config.update(extra_config or {})
    if vl in ("gemma3_v4", "gemma3_v5"):  # Gemma 3's SigLIP tower and projector; v4's language_model.model.*
        v5 = vl == "gemma3_v5"
        tower, projector = ("model." if v5 else "") + "vision_tower.", ("model." if v5 else "") + "multi_modal_projector."
        lm = {} if tie else {"lm_head.weight" if v5 else "language_model.lm_head.weight": t.pop("lm_head.weight")}
        t = {("model.language_model." if v5 else "language_model.model.") + k[len("model."):]: v for k, v in t.items()}
        t.update(lm)
        t.update({tower + "vision_model.embeddings.patch_embedding.weight": randn(32, 3, 2, 2),
                  tower + "vision_model.post_layernorm.weight": randn(32),
                  projector + "mm_input_projection_weight": randn(32, hidden), projector + "mm_soft_emb_norm.weight": randn(32)})
        top = ("architectures", "model_type", "position", "extend", "eos_token_id")
        config = dict({k: v for k, v in config.items() if k in top}, boi_token_index=90, eoi_token_index=91,
                      image_token_index=92, mm_tokens_per_image=4, initializer_range=0.02,
                      text_config=dict({k: v for k, v in config.items() if k not in top and v is not None},
                                       model_type="gemma3_text"))  # (None: left out, as the published are sparse)
        config["vision_config"] = {"hidden_size": 32, "image_size": 4, "patch_size": 2, "model_type": "siglip_vision_model"}
    elif vl:  # the vision tower's tensors (skipped by pert), and v5's names and text_config
        vision = "visual." if vl == "v4" else "model.visual."
        t.update({vision + "patch_embed.proj.weight": randn(32, 24), vision + "blocks.0.attn.qkv.weight": randn(96, 32),
                  vision + "merger.mlp.0.weight": randn(hidden, 32)})
        if vl == "v5":
            t = {("model.language_model." + k[len("model."):] if k.startswith("model.") and not k.startswith(vision)
                  else k): v for k, v in t.items()}
            top = ("architectures", "model_type", "tie_word_embeddings", "position", "extend")
            config = dict({k: v for k, v in config.items() if k in top},
                          text_config={k: v for k, v in config.items() if k not in top})
        config["vision_config"] = {"depth": 1, "hidden_size": 32, "out_hidden_size": hidden}
    os.makedirs(out_dir, exist_ok=True)
    safetensors_io.save(os.path.join(out_dir, "model.safetensors"), t, dtype)
    with replaced(os.path.join(out_dir, "config.json")) as f:
        json.dump(config, f, indent=2)


def logits_for(model_dir, ids):
    config, W = load_model_dir(model_dir)
    with torch.no_grad():
        return forward(config, W, ids).numpy()


def greedy(model_dir, ids, n):
    """Greedy decoding: n tokens after `ids`, each the argmax of a full forward (no cache)."""
    config, W = load_model_dir(model_dir)
    ids = list(ids)
    out = []
    with torch.no_grad():
        for _ in range(n):
            out.append(int(torch.argmax(forward(config, W, ids)[-1])))
            ids.append(out[-1])
    return out


def read_ids(path, vocab):
    """The token ids of IDS_FILE (whitespace-separated decimal integers), each checked against the
    vocabulary; a bad file exits with one line naming it."""
    try:
        words = open(path).read().split()
    except OSError as e:
        sys.exit(f"reference.py: {path}: {e.strerror}")
    ids = []
    for i, w in enumerate(words):
        try:
            t = int(w)
        except ValueError:
            sys.exit(f"reference.py: {path}: token {i} is {w!r}, not an integer id")
        if not 0 <= t < vocab:
            sys.exit(f"reference.py: {path}: token {i} is id {t}, outside the model's vocabulary [0, {vocab})")
        ids.append(t)
    if not ids:
        sys.exit(f"reference.py: {path}: no token ids")
    return ids


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True, metavar="{make-model,logits,attention}")
    mk = sub.add_parser("make-model", help="write a random-weight checkpoint for a positional scheme",
                        description="Writes OUT_DIR/model.safetensors and config.json: a small random-weight "
                                    "llama-style model (vocab 96, 2 layers, trained length 32) whose activations "
                                    "stay O(1), with the given position block.")
    mk.add_argument("out_dir", metavar="OUT_DIR", help="model directory to write (created if missing)")
    mk.add_argument("position", metavar="POSITION_JSON", help='JSON position block, e.g. \'{"type": "alibi"}\'')
    mk.add_argument("--seed", type=int, default=0, help="weights' random seed (default %(default)s)")
    mk.add_argument("--dtype", default="F32", choices=["F32", "F16", "BF16"],
                    help="stored precision of the weights (default %(default)s)")
    mk.add_argument("--extend", type=json.loads, help='JSON "extend" block, e.g. \'{"logn": {}}\'')
    lg = sub.add_parser("logits", help="float64 logits of a token sequence",
                        description="Runs MODEL_DIR on the token ids of IDS_FILE as one causal sequence (no "
                                    "cache) in float64 and writes the logits to OUT_FILE as raw little-endian "
                                    "float64, row-major [T][vocab] (T = number of ids).")
    lg.add_argument("model_dir", metavar="MODEL_DIR", help="model directory (config.json + safetensors)")
    lg.add_argument("ids_file", metavar="IDS_FILE",
                    help="text file of token ids: decimal integers in [0, vocab_size) separated by whitespace "
                         "(spaces or newlines)")
    lg.add_argument("out_file", metavar="OUT_FILE", help="binary output: T x vocab float64 values")
    at = sub.add_parser("attention", help="the statistics of every query's attention weights",
                        description="Runs MODEL_DIR on the token ids of IDS_FILE as one causal sequence in float64 "
                                    "and writes, as JSON, what `pert attention` reports for it: per query range, "
                                    "each layer's and head's mean entropy, sink mass, mean distance, largest "
                                    "weight and mass by distance bucket.")
    at.add_argument("model_dir", metavar="MODEL_DIR", help="model directory (config.json + safetensors)")
    at.add_argument("ids_file", metavar="IDS_FILE", help="text file of token ids, as for logits")
    at.add_argument("out_file", metavar="OUT_JSON", help="JSON output")
    at.add_argument("--sink", type=int, default=1, help="the sink mass's first positions (default %(default)s)")
    a = ap.parse_args()
    if a.cmd == "make-model":
        make_model(a.out_dir, json.loads(a.position), a.seed, a.dtype, extend=a.extend)
    else:
        config, W = load_model_dir(a.model_dir)
        ids = read_ids(a.ids_file, W["model.embed_tokens.weight"].shape[0])
        probs = {}
        with torch.no_grad():
            logits = forward(config, W, ids, observe=lambda layer, p: probs.__setitem__(layer, p))
        if a.cmd == "logits":
            logits.numpy().astype(np.float64).tofile(a.out_file)
        else:
            sink_logits = any(name.endswith(".self_attn.sinks") for name in W)
            per_query = attention_per_query([probs[i] for i in sorted(probs)], a.sink, sink_logits)
            stats = attention_stats(per_query, config.get("max_position_embeddings", 2048))
            with replaced(a.out_file) as f:
                json.dump(stats, f)


if __name__ == "__main__":
    main()
