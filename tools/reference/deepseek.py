"""DeepSeek V2 / V3 in float64: multi-head latent attention (MLA) as HF transformers'
DeepseekV3Attention and DeepseekV2Attention compute it, and tiny random checkpoints with the real
tensor names and config keys (the routers and experts are moe.py's).

MLA, per token: q = q_b_proj(rmsnorm(q_a_proj(x))) (or q_proj(x) without q_lora_rank), each head
[q_nope | q_rope]; kv_a_proj_with_mqa(x) = [latent (kv_lora_rank) | k_rope (qk_rope_head_dim)],
one rope key for all heads; kv_b_proj(rmsnorm(latent)) = each head's [k_nope | v]. RoPE turns
q_rope and k_rope only: V3 with rope_interleave de-interleaves the pairs (2i, 2i + 1) first and
then turns halves, V3 without it turns halves, V2 turns (2i, 2i + 1) as complex numbers. Scores
[q_nope | q_rope]·[k_nope | k_rope] × qk_head_dim^-1/2, and in V3 × m² where the RoPE scaling
gives mscale_all_dim (m = 0.1·mscale_all_dim·ln(factor) + 1; HF's V2 class leaves it out).

    deepseek.py make-model OUT {v3,v2} [--seed N] [--yarn]
"""
import argparse
import math
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tools/
from lib import safetensors_io  # noqa: E402
from reference import moe  # noqa: E402

V2, V3 = moe.DEEPSEEK_V2, moe.DEEPSEEK_V3


def is_mla(W, p):
    return p + "self_attn.kv_a_proj_with_mqa.weight" in W


def rope_scaling(config):
    rs = config.get("rope_scaling") or config.get("rope_parameters")
    return rs if isinstance(rs, dict) else None


def softmax_scale(config):
    """DeepseekV3Attention.scaling, and V2's (transformers PR 47435, as DeepSeek's own code)."""
    scale = (config.get("qk_nope_head_dim", 128) + config.get("qk_rope_head_dim", 64)) ** -0.5
    rs = rope_scaling(config)
    if rs is not None and rs.get("mscale_all_dim"):
        factor = rs["factor"]
        m = 1.0 if factor <= 1 else 0.1 * rs["mscale_all_dim"] * math.log(factor) + 1.0
        scale *= m * m
    return scale


def rotate(config, x, cos, sin):
    """x [..., T, r] turned by angles whose cos, sin are [T, r/2] (already × the attention factor)."""
    if moe.arch_of(config) == V2:  # pairs (2i, 2i + 1) as complex numbers
        xc = torch.complex(x[..., 0::2], x[..., 1::2]) * torch.complex(cos, sin)
        return torch.stack([xc.real, xc.imag], dim=-1).reshape(x.shape)
    if config.get("rope_interleave", True):  # (2i, 2i + 1) regrouped as [evens | odds], then halves
        x = torch.cat([x[..., 0::2], x[..., 1::2]], dim=-1)
    c, s = torch.cat([cos, cos], dim=-1), torch.cat([sin, sin], dim=-1)
    half = x.shape[-1] // 2
    return x * c + torch.cat([-x[..., half:], x[..., :half]], dim=-1) * s


def mla_attention(config, W, p, h, rmsnorm, eps, mask, observe=None, layer=0):
    """The attention branch's output [..., T, d] (after o_proj) of the layer with prefix p on its
    normed input h [..., T, d]; mask [T, T] additive (0 or -inf)."""
    from reference import reference  # reference.py imports this module

    H = config["num_attention_heads"]
    nope, rope = config.get("qk_nope_head_dim", 128), config.get("qk_rope_head_dim", 64)
    vd, latent = config.get("v_head_dim", 128), config.get("kv_lora_rank", 512)
    T = h.shape[-2]

    def lin(x, name):
        return x @ W[p + f"self_attn.{name}.weight"].T

    if p + "self_attn.q_proj.weight" in W:
        q = lin(h, "q_proj")
    else:
        q = lin(rmsnorm(lin(h, "q_a_proj"), W[p + "self_attn.q_a_layernorm.weight"], eps), "q_b_proj")
    q = q.view(*q.shape[:-1], H, nope + rope).transpose(-2, -3)  # [..., H, T, nope + rope]
    q_nope, q_rope = q[..., :nope], q[..., nope:]
    kv = lin(h, "kv_a_proj_with_mqa")
    c_kv, k_rope = kv[..., :latent], kv[..., latent:].unsqueeze(-3)  # k_rope [..., 1, T, rope]
    kv = lin(rmsnorm(c_kv, W[p + "self_attn.kv_a_layernorm.weight"], eps), "kv_b_proj")
    kv = kv.view(*kv.shape[:-1], H, nope + vd).transpose(-2, -3)
    k_nope, v = kv[..., :nope], kv[..., nope:]

    pos = reference.position_block(config)
    inv_freq = reference.rope_inv_freq(pos, rope, T, config)
    factor = reference.rope_attention_factor(pos, config, T)
    angles = torch.arange(T, dtype=torch.float64)[:, None] * inv_freq[None, :]
    cos, sin = angles.cos() * factor, angles.sin() * factor
    q_rope, k_rope = rotate(config, q_rope, cos, sin), rotate(config, k_rope, cos, sin)
    k = torch.cat([k_nope, k_rope.expand(*k_nope.shape[:-1], rope)], dim=-1)
    scores = torch.cat([q_nope, q_rope], dim=-1) @ k.mT * softmax_scale(config) + mask
    probs = torch.softmax(scores, dim=-1)
    if observe:
        observe(layer, probs)
    att = (probs @ v).transpose(-2, -3).reshape(*h.shape[:-1], H * vd)
    return lin(att, "o_proj")


# ----------------------------------------------------------------------------- tiny checkpoints
# As the published configs name them (DeepSeek-V3, DeepSeek-V2-Lite), the sizes shrunk: v_head_dim
# narrower than the key (pert pads it), one dense first layer, groups of 2 experts.
TINY = {
    "v3": {"architectures": [V3], "model_type": "deepseek_v3", "n_routed_experts": 8, "num_experts_per_tok": 2,
           "n_shared_experts": 1, "n_group": 4, "topk_group": 2, "routed_scaling_factor": 2.5, "norm_topk_prob": True,
           "scoring_func": "sigmoid", "topk_method": "noaux_tc", "first_k_dense_replace": 1, "moe_layer_freq": 1,
           "q_lora_rank": 24, "kv_lora_rank": 16, "qk_nope_head_dim": 12, "qk_rope_head_dim": 8, "v_head_dim": 10,
           "rope_interleave": True, "rope_theta": 10000.0, "rms_norm_eps": 1e-6, "hidden_act": "silu",
           "attention_bias": False, "ep_size": 1, "num_nextn_predict_layers": 1},
    "v2": {"architectures": [V2], "model_type": "deepseek_v2", "n_routed_experts": 8, "num_experts_per_tok": 3,
           "n_shared_experts": 2, "n_group": 1, "topk_group": 1, "routed_scaling_factor": 1.0, "norm_topk_prob": False,
           "scoring_func": "softmax", "topk_method": "greedy", "first_k_dense_replace": 1, "moe_layer_freq": 1,
           "q_lora_rank": None, "kv_lora_rank": 16, "qk_nope_head_dim": 12, "qk_rope_head_dim": 8, "v_head_dim": 12,
           "rope_theta": 10000.0, "rms_norm_eps": 1e-6, "hidden_act": "silu", "attention_bias": False},
}
YARN = {"type": "yarn", "factor": 4.0, "beta_fast": 32, "beta_slow": 1, "mscale": 0.707, "mscale_all_dim": 0.707,
        "original_max_position_embeddings": 16}


def make_deepseek_model(out_dir, kind, seed=0, hidden=64, heads=4, layers=3, ffn=96, expert_ffn=16, vocab=96,
                        yarn=False, extra_config=None, fused=False):
    """A random-weight DeepSeek checkpoint (kind "v3" or "v2", TINY's keys plus extra_config) in
    out_dir: moe.make_moe_model's embeddings, norms, dense and routed MLPs, with MLA's tensors in
    place of q/k/v, the shared experts (mlp.shared_experts) and V3's e_score_correction_bias.
    yarn: YaRN ×4 over 16 trained positions (mscale = mscale_all_dim: V3's softmax scale × m²).
    fused: the routed experts as transformers v5 keeps them (moe.make_moe_model's)."""
    config = dict(TINY[kind], moe_intermediate_size=expert_ffn, **(extra_config or {}))
    if yarn:
        config.update(rope_scaling=dict(YARN), max_position_embeddings=64)
    moe.TINY["deepseek_" + kind] = (config, {})
    try:
        moe.make_moe_model(out_dir, "deepseek_" + kind, seed=seed, fused=fused, hidden=hidden, heads=heads, kv_heads=heads,
                           layers=layers, ffn=ffn, expert_ffn=expert_ffn, vocab=vocab,
                           trained=config.get("max_position_embeddings", 32))
    finally:
        del moe.TINY["deepseek_" + kind]
    import json
    with open(os.path.join(out_dir, "config.json")) as f:
        config = json.load(f)
    path = os.path.join(out_dir, "model.safetensors")
    t = safetensors_io.load(path)
    g = torch.Generator().manual_seed(seed + 2)

    def randn(*shape, std=1.0):
        return (torch.randn(*shape, generator=g, dtype=torch.float64) * std).numpy()

    nope, rope, vd = config["qk_nope_head_dim"], config["qk_rope_head_dim"], config["v_head_dim"]
    latent, q_rank = config["kv_lora_rank"], config.get("q_lora_rank")
    for i in range(layers):
        p = f"model.layers.{i}.self_attn."
        for n in ("q_proj", "k_proj", "v_proj"):
            del t[p + n + ".weight"]
        if q_rank:
            t[p + "q_a_proj.weight"] = randn(q_rank, hidden, std=hidden ** -0.5)
            t[p + "q_a_layernorm.weight"] = 1.0 + randn(q_rank, std=0.1)
            t[p + "q_b_proj.weight"] = randn(heads * (nope + rope), q_rank, std=q_rank ** -0.5 * 2)
        else:
            t[p + "q_proj.weight"] = randn(heads * (nope + rope), hidden, std=hidden ** -0.5 * 2)
        t[p + "kv_a_proj_with_mqa.weight"] = randn(latent + rope, hidden, std=hidden ** -0.5 * 2)
        t[p + "kv_a_layernorm.weight"] = 1.0 + randn(latent, std=0.1)
        t[p + "kv_b_proj.weight"] = randn(heads * (nope + vd), latent, std=latent ** -0.5 * 2)
        t[p + "o_proj.weight"] = randn(hidden, heads * vd, std=(heads * vd) ** -0.5)
        if not moe.sparse_layer(config, i):
            continue
        m = f"model.layers.{i}.mlp."
        sff = expert_ffn * config["n_shared_experts"]
        t[m + "shared_experts.gate_proj.weight"] = randn(sff, hidden, std=hidden ** -0.5)
        t[m + "shared_experts.up_proj.weight"] = randn(sff, hidden, std=hidden ** -0.5)
        t[m + "shared_experts.down_proj.weight"] = randn(hidden, sff, std=sff ** -0.5)
        if kind == "v3":  # large enough to change the choice
            t[m + "gate.e_score_correction_bias"] = randn(config["n_routed_experts"], std=0.3)
    safetensors_io.save(path, t, "F32")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    mk = sub.add_parser("make-model", help="a tiny random DeepSeek checkpoint")
    mk.add_argument("out")
    mk.add_argument("kind", choices=sorted(TINY))
    mk.add_argument("--seed", type=int, default=0)
    mk.add_argument("--yarn", action="store_true")
    a = ap.parse_args()
    make_deepseek_model(a.out, a.kind, seed=a.seed, yarn=a.yarn)


if __name__ == "__main__":
    main()
