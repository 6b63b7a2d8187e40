#!/usr/bin/env python3
"""Mixture-of-experts blocks for the float64 reference (tools/reference/reference.py), and tiny
random-weight MoE checkpoints with the real HF tensor names and config keys.

Written from HF transformers' modeling_<type>.py / configuration_<type>.py (mixtral, qwen2_moe,
qwen3_moe, olmoe, deepseek_v2, deepseek_v3, gpt_oss) and docs/design.md's definitions, not from
pert's C++. The architecture is config["architectures"][0]:

  MixtralForCausalLM   softmax over all experts, top-k, always renormalised
  Qwen2MoeForCausalLM  the same, renormalised iff norm_topk_prob (default false), plus the shared
                       expert times sigmoid(x·w_shared_gate); dense layers: mlp_only_layers and
                       (i + 1) % decoder_sparse_step != 0
  Qwen3MoeForCausalLM  as Qwen2-MoE without the shared expert (norm_topk_prob: the config class
                       defaults to false, the released checkpoints say true)
  OlmoeForCausalLM     softmax top-k, renormalised iff norm_topk_prob (default false); q_norm and
                       k_norm over the whole q and k projections; clip_qkv clamps q, k and v
  DeepseekV3ForCausalLM  sigmoid scores; choice by score + e_score_correction_bias within the
                       topk_group best of n_group groups (a group's score: its top two); weights the
                       chosen scores without the bias, normalised iff norm_topk_prob, times
                       routed_scaling_factor; shared experts always; layers < first_k_dense_replace dense
  DeepseekV2ForCausalLM  softmax scores, topk_method greedy or group_limited_greedy (a group's
                       score: its best), times routed_scaling_factor
  Qwen3VLMoeForConditionalGeneration  its language model: Qwen3-MoE's layers (the router always
                       renormalised), Qwen3-VL's attention (reference.py reads its VL checkpoint)
  GptOssForCausalLM    top-k of the router logits (with bias), softmax over the k chosen; experts:
                       interleaved gate/up columns with biases, gate clamped above at swiglu_limit,
                       up to ±limit, (up + 1)·gate·σ(α·gate), then down + bias

Expert weights are read from per-expert tensors (experts.N.w1/w2/w3, experts.N.gate_proj/...) or
from the fused 3-D tensors transformers v5 keeps in memory and writes with
save_original_format=False (experts.gate_up_proj [E, 2·ff, d], gate rows first; experts.down_proj
[E, d, ff]).

    moe.py make-model OUT_DIR ARCH [--seed N] [--fused] [--dtype F32]   # ARCH: mixtral, qwen2moe, ...
"""
import argparse
import json
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tools/: import by folder (tools/README.md)
from lib import safetensors_io  # noqa: E402

MIXTRAL, QWEN2_MOE, QWEN3_MOE, OLMOE = "MixtralForCausalLM", "Qwen2MoeForCausalLM", "Qwen3MoeForCausalLM", "OlmoeForCausalLM"
DEEPSEEK_V2, DEEPSEEK_V3, GPT_OSS = "DeepseekV2ForCausalLM", "DeepseekV3ForCausalLM", "GptOssForCausalLM"
QWEN3_VL_MOE = "Qwen3VLMoeForConditionalGeneration"  # its language model: Qwen3-MoE's blocks in Qwen3-VL's
MOE_ARCHS = (MIXTRAL, QWEN2_MOE, QWEN3_MOE, OLMOE, DEEPSEEK_V2, DEEPSEEK_V3, GPT_OSS, QWEN3_VL_MOE)


def arch_of(config):
    return (config.get("architectures") or [""])[0]


def is_moe(config):
    return arch_of(config) in MOE_ARCHS


# ----------------------------------------------------------------------------- the config's MoE keys
def settings(config):
    """The keys that change the MoE math, with each HF config class's default where config.json
    leaves one out: {experts, top_k, norm, ...}."""
    arch, c = arch_of(config), config.get
    if arch == MIXTRAL:
        return {"experts": c("num_local_experts", 8), "top_k": c("num_experts_per_tok", 2), "norm": True}
    if arch in (QWEN2_MOE, QWEN3_MOE):
        out = {"experts": c("num_experts", 60 if arch == QWEN2_MOE else 128),
               "top_k": c("num_experts_per_tok", 4 if arch == QWEN2_MOE else 8),
               "norm": bool(c("norm_topk_prob", False))}
        if arch == QWEN2_MOE:
            out["shared"] = True
        return out
    if arch == QWEN3_VL_MOE:  # Qwen3VLMoeTextConfig's defaults; its router renormalises whatever norm_topk_prob says
        return {"experts": c("num_experts", 60), "top_k": c("num_experts_per_tok", 4), "norm": True}
    if arch == OLMOE:
        return {"experts": c("num_experts", 64), "top_k": c("num_experts_per_tok", 8),
                "norm": bool(c("norm_topk_prob", False))}
    if arch == DEEPSEEK_V3:
        return {"experts": c("n_routed_experts", 256), "top_k": c("num_experts_per_tok", 8),
                "norm": bool(c("norm_topk_prob", True)), "n_group": c("n_group", 8), "topk_group": c("topk_group", 4),
                "scale": c("routed_scaling_factor", 2.5), "scoring": "sigmoid", "method": "noaux_tc"}
    if arch == DEEPSEEK_V2:
        return {"experts": c("n_routed_experts", 64), "top_k": c("num_experts_per_tok"),
                "norm": bool(c("norm_topk_prob", False)), "n_group": c("n_group"), "topk_group": c("topk_group"),
                "scale": c("routed_scaling_factor", 1.0), "scoring": c("scoring_func", "softmax"),
                "method": c("topk_method", "greedy")}
    if arch == GPT_OSS:
        return {"experts": c("num_local_experts", 128), "top_k": c("num_experts_per_tok", 4),
                "limit": c("swiglu_limit", 7.0), "alpha": c("swiglu_alpha", 1.702)}
    raise ValueError(f"{arch!r} is not a mixture-of-experts architecture")


def sparse_layer(config, i):
    """Whether layer i is a MoE block (else the dense MLP of intermediate_size), as the HF
    decoder layer decides."""
    arch = arch_of(config)
    if arch in (QWEN2_MOE, QWEN3_MOE, QWEN3_VL_MOE):
        return (i not in (config.get("mlp_only_layers") or [])
                and settings(config)["experts"] > 0 and (i + 1) % config.get("decoder_sparse_step", 1) == 0)
    if arch in (DEEPSEEK_V2, DEEPSEEK_V3):  # DeepSeek's own code also asks i % moe_layer_freq == 0 (1 when released)
        dense = config.get("first_k_dense_replace", 3 if arch == DEEPSEEK_V3 else 0)
        return config.get("n_routed_experts", 1) is not None and i >= dense and i % config.get("moe_layer_freq", 1) == 0
    return arch in MOE_ARCHS


# ----------------------------------------------------------------------------- routing
def topk_softmax(logits, k, renormalise):
    """Mixtral / Qwen-MoE / OLMoE: softmax over all experts, the k largest, renormalised or not."""
    weight, index = torch.topk(torch.softmax(logits, dim=-1), k, dim=-1)
    return index, weight / weight.sum(-1, keepdim=True) if renormalise else weight


def grouped_topk(scores, choice, k, n_group, topk_group, group_score):
    """DeepSeek's group-limited choice: the experts of the topk_group best groups (a group's score:
    group_score of its choice values) compete for the top k of `choice`; returns their indices."""
    T, E = choice.shape
    groups = choice.view(T, n_group, E // n_group)
    best = torch.topk(group_score(groups), topk_group, dim=-1).indices
    keep = torch.zeros(T, n_group, dtype=torch.bool).scatter_(1, best, True)
    masked = choice.masked_fill(~keep.repeat_interleave(E // n_group, dim=1), float("-inf"))
    return torch.topk(masked, k, dim=-1).indices


def route(config, logits, correction_bias=None):
    """(index [T, k], weight [T, k]) of each token's chosen experts, from its router logits [T, E]
    (x·W_rᵀ, plus gpt-oss's router bias) and DeepSeek V3's e_score_correction_bias [E]."""
    arch, s = arch_of(config), settings(config)
    k = s["top_k"]
    if arch in (MIXTRAL, QWEN2_MOE, QWEN3_MOE, OLMOE, QWEN3_VL_MOE):
        return topk_softmax(logits, k, s["norm"])
    if arch == GPT_OSS:  # top-k of the logits themselves, softmax over the k chosen
        top, index = torch.topk(logits, k, dim=-1)
        return index, torch.softmax(top, dim=-1)
    scores = torch.sigmoid(logits) if s["scoring"] == "sigmoid" else torch.softmax(logits, dim=-1)
    if s["method"] == "noaux_tc":  # V3: the bias only chooses; other groups -inf (DeepSeek's code; HF since PR 45441)
        choice = scores + (correction_bias if correction_bias is not None else 0)
        index = grouped_topk(scores, choice, k, s["n_group"], s["topk_group"],
                             lambda g: torch.topk(g, 2, dim=-1).values.sum(-1))
    elif s["method"] == "group_limited_greedy":
        index = grouped_topk(scores, scores, k, s["n_group"], s["topk_group"], lambda g: g.max(dim=-1).values)
    elif s["method"] == "greedy":
        index = torch.topk(scores, k, dim=-1).indices
    else:
        raise ValueError(f"topk_method {s['method']!r} is not known")
    weight = scores.gather(1, index)
    if s["norm"]:  # V2's HF code ignores norm_topk_prob (false in the released V2 configs)
        weight = weight / (weight.sum(-1, keepdim=True) + 1e-20)
    return index, weight * s["scale"]


# ----------------------------------------------------------------------------- expert weights
def router(config, W, p):
    """(its name without ".weight", router matrix [E, d], router bias [E] or None, DeepSeek V3's
    correction bias or None) of layer prefix p."""
    if arch_of(config) == GPT_OSS:
        return p + "mlp.router", W[p + "mlp.router.weight"], W[p + "mlp.router.bias"], None
    name = p + "block_sparse_moe.gate" if p + "block_sparse_moe.gate.weight" in W else p + "mlp.gate"
    return name, W[name + ".weight"], None, W.get(p + "mlp.gate.e_score_correction_bias")


def expert_matrices(W, p, e):
    """{name: matrix} of expert e's gate [ff, d], up [ff, d] and down [d, ff], from whichever layout
    the checkpoint has, each named as its per-expert HF tensor (without ".weight"): Mixtral's
    block_sparse_moe.experts.e.w1/w3/w2, else mlp.experts.e.gate_proj/up_proj/down_proj (also for
    transformers v5's fused experts.gate_up_proj [E, 2·ff, d], gate rows first, and down_proj [E, d, ff])."""
    fused = p + "mlp.experts.gate_up_proj"
    q = f"{p}mlp.experts.{e}."
    if fused in W:
        gate, up = W[fused][e].chunk(2, dim=0)
        return {q + "gate_proj": gate, q + "up_proj": up, q + "down_proj": W[p + "mlp.experts.down_proj"][e]}
    mixtral = f"{p}block_sparse_moe.experts.{e}."
    if mixtral + "w1.weight" in W:  # w1 gate, w3 up, w2 down
        return {mixtral + n: W[mixtral + n + ".weight"] for n in ("w1", "w3", "w2")}
    return {q + n: W[q + n + ".weight"] for n in ("gate_proj", "up_proj", "down_proj")}


def swiglu(x, matrices, mm):
    """down(silu(gate·x) ⊙ up·x) for matrices {name: gate, up, down} in that order."""
    (gate_name, gate), (up_name, up), (down_name, down) = matrices.items()
    return mm(torch.nn.functional.silu(mm(x, gate_name, gate)) * mm(x, up_name, up), down_name, down)


def dense(W, stem):
    """{name: matrix} of a dense SwiGLU MLP's gate, up and down (the shared experts)."""
    return {stem + n: W[stem + n + ".weight"] for n in ("gate_proj", "up_proj", "down_proj")}


def gpt_oss_expert(config, W, p, e, x, inputs=None):
    """gpt-oss's expert e on x [n, d]: weights stored input-first (x @ W), gate/up interleaved.
    inputs(name, h): what the expert's gate/up (named mlp.experts.e.gate_proj) and down
    (mlp.experts.e.down_proj) multiply instead of h, as moe_mlp's."""
    s = settings(config)
    mm_in = (lambda n, h: inputs(f"{p}mlp.experts.{e}.{n}", h)) if inputs else (lambda n, h: h)
    gate_up = mm_in("gate_proj", x) @ W[p + "mlp.experts.gate_up_proj"][e] + W[p + "mlp.experts.gate_up_proj_bias"][e]
    gate, up = gate_up[..., 0::2].clamp(max=s["limit"]), gate_up[..., 1::2].clamp(-s["limit"], s["limit"])
    out = (up + 1) * gate * torch.sigmoid(s["alpha"] * gate)
    return mm_in("down_proj", out) @ W[p + "mlp.experts.down_proj"][e] + W[p + "mlp.experts.down_proj_bias"][e]


def moe_mlp(config, W, p, x, inputs=None):
    """The MoE block of the layer whose tensors start with p ("model.layers.N.") on its normed
    input x [..., T, d]: Σ_chosen weight·expert(x), plus the shared experts. inputs(name, h), as
    reference.forward's: what the matrix `name` (expert_matrices' names, the router's and shared
    experts' HF names without ".weight") multiplies instead of h."""
    shape, arch = x.shape, arch_of(config)
    x = x.reshape(-1, shape[-1])

    def mm(h, name, w):
        return (inputs(name, h) if inputs else h) @ w.T

    name, w_r, b_r, correction = router(config, W, p)
    logits = mm(x, name, w_r) + (b_r if b_r is not None else 0)
    index, weight = route(config, logits, correction)
    out = torch.zeros_like(x)
    for e in torch.unique(index).tolist():
        tokens, slot = torch.where(index == e)
        xe = x[tokens]
        ye = gpt_oss_expert(config, W, p, e, xe, inputs) if arch == GPT_OSS else swiglu(xe, expert_matrices(W, p, e), mm)
        out.index_add_(0, tokens, ye * weight[tokens, slot, None])
    if arch == QWEN2_MOE:  # the shared expert, gated per token by sigmoid(x·w_sg)
        shared = swiglu(x, dense(W, p + "mlp.shared_expert."), mm)
        out = out + torch.sigmoid(mm(x, p + "mlp.shared_expert_gate", W[p + "mlp.shared_expert_gate.weight"])) * shared
    elif arch in (DEEPSEEK_V2, DEEPSEEK_V3) and p + "mlp.shared_experts.gate_proj.weight" in W:
        out = out + swiglu(x, dense(W, p + "mlp.shared_experts."), mm)
    return out.reshape(shape)


# ----------------------------------------------------------------------------- attention differences
def olmoe_qkv(config, W, p, q, k, v, norm, eps):
    """OLMoE's q and k RMS-normalised over the whole projection (heads·head_dim wide, not per
    head), then q, k and v clamped to ±clip_qkv when the config sets it (q, k, v: [..., T, width])."""
    q = norm(q, W[p + "self_attn.q_norm.weight"], eps)
    k = norm(k, W[p + "self_attn.k_norm.weight"], eps)
    clip = config.get("clip_qkv")
    if clip is not None:
        q, k, v = q.clamp(-clip, clip), k.clamp(-clip, clip), v.clamp(-clip, clip)
    return q, k, v


# ----------------------------------------------------------------------------- tiny checkpoints
# arch: config.json keys as the published checkpoints name them (Mixtral-8x7B, Qwen1.5-MoE-A2.7B,
# Qwen3-30B-A3B, OLMoE-1B-7B-0924), the expert counts shrunk; and reference.make_model's options.
TINY = {
    "mixtral": ({"architectures": [MIXTRAL], "model_type": "mixtral", "num_local_experts": 4,
                 "num_experts_per_tok": 2, "router_jitter_noise": 0.0, "rope_theta": 1000000.0,
                 "rms_norm_eps": 1e-5, "sliding_window": None, "hidden_act": "silu"}, {}),
    "qwen2moe": ({"architectures": [QWEN2_MOE], "model_type": "qwen2_moe", "num_experts": 6,
                  "num_experts_per_tok": 2, "norm_topk_prob": False, "decoder_sparse_step": 1,
                  "mlp_only_layers": [], "rope_theta": 1000000.0, "rms_norm_eps": 1e-6,
                  "use_sliding_window": False, "sliding_window": 8, "max_window_layers": 21,
                  "hidden_act": "silu"}, {"qkv_bias": True, "shared": True}),
    "qwen3moe": ({"architectures": [QWEN3_MOE], "model_type": "qwen3_moe", "num_experts": 8,
                  "num_experts_per_tok": 2, "norm_topk_prob": True, "decoder_sparse_step": 1,
                  "mlp_only_layers": [], "rope_theta": 1000000.0, "rms_norm_eps": 1e-6,
                  "use_sliding_window": False, "sliding_window": None, "attention_bias": False,
                  "head_dim": 24, "hidden_act": "silu"}, {"qk_norm": True, "head_dim": 24}),
    "olmoe": ({"architectures": [OLMOE], "model_type": "olmoe", "num_experts": 8, "num_experts_per_tok": 2,
               "norm_topk_prob": False, "clip_qkv": None, "rope_theta": 10000.0, "rms_norm_eps": 1e-5,
               "attention_bias": False, "hidden_act": "silu"}, {"full_qk_norm": True}),
}


def make_moe_model(out_dir, arch, seed=0, fused=False, dtype="F32", hidden=64, heads=4, kv_heads=None, layers=2,
                   ffn=128, expert_ffn=32, vocab=96, trained=32, extra_config=None):
    """A random-weight checkpoint of `arch` (a TINY key) in out_dir: reference.make_model's dense
    model (embeddings, attention, norms, the dense MLP of the layers that keep one) with each
    sparse layer's MLP replaced by the router, the experts (expert_ffn wide) and the shared expert,
    under the architecture's own tensor names. Router logits have a standard deviation of about 2
    over the normed input, so that different tokens choose different experts. fused writes the
    experts as transformers v5 holds them (mlp.experts.gate_up_proj [E, 2·ff, d], gate rows
    first; mlp.experts.down_proj [E, d, ff]; Mixtral's router as mlp.gate). extra_config
    overrides config.json keys (e.g. mlp_only_layers, norm_topk_prob, clip_qkv). kv_heads: 2, or
    for OLMoE as many as heads (OLMoE-1B-7B is multi-head; llama.cpp's olmoe expects it)."""
    from reference import reference  # reference.py imports this module

    keys, options = TINY[arch]
    options = dict(options)
    config = {**keys, "intermediate_size": expert_ffn if arch in ("mixtral", "olmoe") else ffn, **(extra_config or {})}
    if arch == "qwen2moe":
        config.setdefault("moe_intermediate_size", expert_ffn)
        config.setdefault("shared_expert_intermediate_size", 2 * expert_ffn)
    elif arch == "qwen3moe":
        config.setdefault("moe_intermediate_size", expert_ffn)
    kv_heads = kv_heads or (heads if arch == "olmoe" else 2)
    shared, full_qk_norm = options.pop("shared", False), options.pop("full_qk_norm", False)
    reference.make_model(out_dir, None, seed=seed, dtype="F32", hidden=hidden, heads=heads, kv_heads=kv_heads,
                         layers=layers, ffn=ffn, vocab=vocab, trained=trained, extra_config=config, **options)
    path = os.path.join(out_dir, "model.safetensors")
    t = safetensors_io.load(path)
    g = torch.Generator().manual_seed(seed + 1)

    def randn(*shape, std=1.0):
        return (torch.randn(*shape, generator=g, dtype=torch.float64) * std).numpy()

    with open(os.path.join(out_dir, "config.json")) as f:
        config = json.load(f)
    n_experts = settings(config)["experts"]
    hd = config.get("head_dim") or hidden // heads
    for i in range(layers):
        p = f"model.layers.{i}."
        if full_qk_norm:  # OLMoE: one gain per q (and k) channel, over the whole projection
            t[p + "self_attn.q_norm.weight"] = 1.0 + randn(heads * hd, std=0.1)
            t[p + "self_attn.k_norm.weight"] = 1.0 + randn(kv_heads * hd, std=0.1)
        if not sparse_layer(config, i):
            continue
        for n in ("gate", "up", "down"):
            del t[p + f"mlp.{n}_proj.weight"]
        ff = config.get("moe_intermediate_size", config["intermediate_size"])
        gate, up = randn(n_experts, ff, hidden, std=hidden ** -0.5), randn(n_experts, ff, hidden, std=hidden ** -0.5)
        down = randn(n_experts, hidden, ff, std=ff ** -0.5)
        gate_name = p + ("block_sparse_moe.gate.weight" if arch == "mixtral" and not fused else "mlp.gate.weight")
        t[gate_name] = randn(n_experts, hidden, std=2 * hidden ** -0.5)
        if fused:
            t[p + "mlp.experts.gate_up_proj"] = np.concatenate([gate, up], axis=1)
            t[p + "mlp.experts.down_proj"] = down
        else:
            names = ("w1", "w3", "w2") if arch == "mixtral" else ("gate_proj", "up_proj", "down_proj")
            stem = p + ("block_sparse_moe.experts." if arch == "mixtral" else "mlp.experts.")
            for e in range(n_experts):
                for n, w in zip(names, (gate, up, down)):
                    t[f"{stem}{e}.{n}.weight"] = w[e]
        if shared:  # Qwen2-MoE: the shared expert and its per-token gate
            sff = config["shared_expert_intermediate_size"]
            s = p + "mlp.shared_expert."
            t[s + "gate_proj.weight"] = randn(sff, hidden, std=hidden ** -0.5)
            t[s + "up_proj.weight"] = randn(sff, hidden, std=hidden ** -0.5)
            t[s + "down_proj.weight"] = randn(hidden, sff, std=sff ** -0.5)
            t[p + "mlp.shared_expert_gate.weight"] = randn(1, hidden, std=hidden ** -0.5)
    safetensors_io.save(path, t, dtype)


GPT_OSS_KEYS = {"architectures": [GPT_OSS], "model_type": "gpt_oss", "num_local_experts": 4, "num_experts_per_tok": 2,
                "swiglu_limit": 7.0, "attention_bias": True, "rms_norm_eps": 1e-5, "hidden_act": "silu",
                "sliding_window": 4, "layer_types": ["sliding_attention", "full_attention"], "rope_theta": 150000.0,
                "rope_scaling": {"rope_type": "yarn", "factor": 4.0, "beta_fast": 32.0, "beta_slow": 1.0, "truncate": False,
                                 "original_max_position_embeddings": 16}, "initial_context_length": 16,
                "max_position_embeddings": 64}
E2M1 = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.0, -0.5, -1, -1.5, -2, -3, -4, -6])


def mxfp4_random(g, rows, cols, std):
    """(values [rows][cols] float64, blocks uint8 [rows][cols/32][16], scales uint8 [rows][cols/32]):
    random MXFP4 numbers as HF stores them (low nibble the even element), about `std` in size."""
    codes = torch.randint(0, 16, (rows, cols), generator=g).numpy()
    e = 127 + np.round(np.log2(std / 2.0)) + torch.randint(-1, 2, (rows, cols // 32), generator=g).numpy()
    scales = e.astype(np.uint8)
    values = E2M1[codes] * np.repeat(2.0 ** (e - 127), 32, axis=1)
    pairs = codes.reshape(rows, cols // 2, 2)
    blocks = (pairs[..., 0] | (pairs[..., 1] << 4)).astype(np.uint8).reshape(rows, cols // 32, 16)
    return values, blocks, scales


def make_gpt_oss_model(out_dir, seed=0, mxfp4=False, hidden=64, heads=4, kv_heads=2, layers=2, expert_ffn=32, vocab=96,
                       head_dim=16):
    """A tiny gpt-oss checkpoint: q/k/v/o biases, sinks, alternating window/full layers, YaRN, the router
    with its bias and the experts fused as HF holds them: input-first F32 (gate_up_proj [E, d, 2ff], gate
    the even columns; down_proj [E, ff, d]) or, with mxfp4, as shipped (*_blocks/*_scales, rows along
    the output). Both from the same MXFP4-exact values for one seed, so either runs the same model."""
    from reference import reference  # reference.py imports this module

    reference.make_model(out_dir, None, seed=seed, hidden=hidden, heads=heads, kv_heads=kv_heads, layers=layers,
                         ffn=expert_ffn, vocab=vocab, head_dim=head_dim, qkv_bias=True, o_bias=True,
                         extra_config=dict(GPT_OSS_KEYS, intermediate_size=expert_ffn, head_dim=head_dim))
    path = os.path.join(out_dir, "model.safetensors")
    t = safetensors_io.load(path)
    g = torch.Generator().manual_seed(seed + 7)
    E, ff, d = GPT_OSS_KEYS["num_local_experts"], expert_ffn, hidden

    def randn(*shape, std=1.0):
        return (torch.randn(*shape, generator=g, dtype=torch.float64) * std).numpy()

    for i in range(layers):
        p = f"model.layers.{i}."
        for n in ("gate", "up", "down"):
            del t[p + f"mlp.{n}_proj.weight"]
        t[p + "self_attn.sinks"] = randn(heads, std=1.0)
        t[p + "mlp.router.weight"] = randn(E, d, std=2 * d ** -0.5)
        t[p + "mlp.router.bias"] = randn(E, std=0.5)
        gu_values, gu_blocks, gu_scales = mxfp4_random(g, E * 2 * ff, d, d ** -0.5)  # output rows
        dn_values, dn_blocks, dn_scales = mxfp4_random(g, E * d, ff, ff ** -0.5)
        if mxfp4:
            t[p + "mlp.experts.gate_up_proj_blocks"] = gu_blocks.reshape(E, 2 * ff, d // 32, 16)
            t[p + "mlp.experts.gate_up_proj_scales"] = gu_scales.reshape(E, 2 * ff, d // 32)
            t[p + "mlp.experts.down_proj_blocks"] = dn_blocks.reshape(E, d, ff // 32, 16)
            t[p + "mlp.experts.down_proj_scales"] = dn_scales.reshape(E, d, ff // 32)
        else:  # input-first, as the bf16 parameters
            t[p + "mlp.experts.gate_up_proj"] = gu_values.reshape(E, 2 * ff, d).transpose(0, 2, 1)
            t[p + "mlp.experts.down_proj"] = dn_values.reshape(E, d, ff).transpose(0, 2, 1)
        t[p + "mlp.experts.gate_up_proj_bias"] = randn(E, 2 * ff, std=0.3)
        t[p + "mlp.experts.down_proj_bias"] = randn(E, d, std=0.3)
    safetensors_io.save(path, t)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True, metavar="{make-model}")
    mk = sub.add_parser("make-model", help="write a tiny random-weight MoE checkpoint",
                        description="Writes OUT_DIR/model.safetensors and config.json: a tiny random-weight model of "
                                    "ARCH (2 layers, width 64, vocab 96) with the architecture's HF tensor names and "
                                    "config keys, its expert count shrunk.")
    mk.add_argument("out_dir", metavar="OUT_DIR", help="model directory to write (created if missing)")
    mk.add_argument("arch", metavar="ARCH", choices=sorted(TINY), help=f"one of {', '.join(sorted(TINY))}")
    mk.add_argument("--seed", type=int, default=0, help="weights' random seed (default %(default)s)")
    mk.add_argument("--fused", action="store_true",
                    help="write the experts fused as transformers v5 holds them (experts.gate_up_proj, experts.down_proj)")
    mk.add_argument("--dtype", default="F32", choices=["F32", "F16", "BF16"],
                    help="stored precision of the weights (default %(default)s)")
    a = ap.parse_args()
    make_moe_model(a.out_dir, a.arch, a.seed, a.fused, a.dtype)


if __name__ == "__main__":
    main()
