#!/usr/bin/python3
"""DeepSeek V3 and V2 (multi-head latent attention, DeepSeek's routers and shared experts) against
the float64 reference (tools/reference/deepseek.py, written from HF's modeling files): a tiny
random-weight checkpoint per case with the real tensor names and config keys; pert's logits within
1e-4 of the reference's at every position, in one prefill, token by token and in chunks of 5
(pert caches MLA's latent and rope key, kv_b_proj absorbed; the reference expands every head). The
reference's MLA itself is checked against the form an MLA cache computes (scores and values from the
latent, weights absorbed), and with PERT_CLI, `pert inspect`'s cache bytes (MLA's latent row against
plain MHA), and that a config rotating more than the rope key's dims is refused. V3's checkpoints as
published hold a multi-token-prediction layer after the last (skipped: the same logits; a tensor past
it is still unexpected); v3_fused stores the routed experts as transformers v5 does.

    deepseek_test.py PERT_LOGITS [PERT_CLI] [CASE ...]
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
from reference import deepseek, reference  # noqa: E402
from logits_check import pert_logits  # noqa: E402

# case: (kind, YaRN, config keys over deepseek.TINY's)
CASES = {
    "v3": ("v3", False, {}),  # q through q_lora_rank, interleaved rope pairs, v narrower than k
    "v3_half_rope_yarn": ("v3", True, {"rope_interleave": False}),  # halves turned; YaRN: scale × m²
    "v3_no_norm": ("v3", False, {"norm_topk_prob": False, "n_group": 2, "topk_group": 1, "v_head_dim": 20}),
    "v2_lite": ("v2", False, {}),  # q_proj, softmax greedy top-3, two shared experts
    "v2_lite_yarn": ("v2", True, {}),  # YaRN with V3's m² (HF's V2 since PR 47435, as DeepSeek's code)
    # DeepSeek-V2 / V2.5 as published: group_limited_greedy (the topk_group groups of the best
    # probabilities), routed_scaling_factor 16
    "v2_groups": ("v2", False, {"topk_method": "group_limited_greedy", "n_group": 4, "topk_group": 2,
                                "routed_scaling_factor": 16.0}),
    "v3_fused": ("v3", False, {"fused": True}),  # the routed experts as transformers v5 keeps them
}


def absorbed_attention(config, W, p, h):
    """The attention branch of layer prefix p on normed h [T, d] as an MLA cache would compute it:
    scores from the latent (q_nope·W_uk against the normed latent) plus the rope parts turned as
    complex pairs, values from the latent through W_uv: another route to deepseek.mla_attention's."""
    H, nope, rope = config["num_attention_heads"], config["qk_nope_head_dim"], config["qk_rope_head_dim"]
    vd, latent, T = config["v_head_dim"], config["kv_lora_rank"], h.shape[0]
    w = {n: W[p + f"self_attn.{n}.weight"] for n in ("kv_a_proj_with_mqa", "kv_b_proj", "o_proj")}
    q = h @ W[p + "self_attn.q_proj.weight"].T if p + "self_attn.q_proj.weight" in W else \
        reference.rmsnorm_llama(h @ W[p + "self_attn.q_a_proj.weight"].T, W[p + "self_attn.q_a_layernorm.weight"],
                                config["rms_norm_eps"]) @ W[p + "self_attn.q_b_proj.weight"].T
    q = q.view(T, H, nope + rope)
    kv = h @ w["kv_a_proj_with_mqa"].T
    c = reference.rmsnorm_llama(kv[:, :latent], W[p + "self_attn.kv_a_layernorm.weight"], config["rms_norm_eps"])
    w_b = w["kv_b_proj"].view(H, nope + vd, latent)
    w_uk, w_uv = w_b[:, :nope], w_b[:, nope:]
    pos = reference.position_block(config)
    freq = torch.arange(T, dtype=torch.float64)[:, None] * reference.rope_inv_freq(pos, rope, T, config)[None, :]
    turn = torch.polar(torch.full_like(freq, reference.rope_attention_factor(pos, config, T)), freq)  # [T, r/2]
    half = config.get("rope_interleave", True) is False and config["architectures"][0].startswith("DeepseekV3")

    def complex_pairs(x):  # pairs (2i, 2i + 1), or (i, i + r/2) for halves
        return torch.complex(x[..., :rope // 2], x[..., rope // 2:]) if half else torch.complex(x[..., 0::2], x[..., 1::2])

    q_rope = complex_pairs(q[..., nope:]) * turn[:, None, :]  # [T, H, r/2]
    k_rope = complex_pairs(kv[:, latent:]) * turn  # [T, r/2]
    rope_scores = torch.einsum("thi,si->hts", q_rope, k_rope.conj()).real
    nope_scores = torch.einsum("thn,hnl,sl->hts", q[..., :nope], w_uk, c)
    mask = torch.full((T, T), float("-inf"), dtype=torch.float64).triu(1)
    probs = torch.softmax((nope_scores + rope_scores) * deepseek.softmax_scale(config) + mask, dim=-1)
    out = torch.einsum("hts,sl,hvl->thv", probs, c, w_uv).reshape(T, H * vd)
    return out @ w["o_proj"].T


def check_reference(config, W, name, failures):
    """deepseek.mla_attention against absorbed_attention on layer 0's input."""
    x = W["model.embed_tokens.weight"][torch.arange(17) % config["vocab_size"]]
    h = reference.rmsnorm_llama(x, W["model.layers.0.input_layernorm.weight"], config["rms_norm_eps"])
    causal = torch.full((17, 17), float("-inf"), dtype=torch.float64).triu(1)
    want = deepseek.mla_attention(config, W, "model.layers.0.", h, reference.rmsnorm_llama, config["rms_norm_eps"], causal)
    err = float((absorbed_attention(config, W, "model.layers.0.", h) - want).abs().max())
    print(f"{name:18s} reference's MLA against the latent-cache form: max|Δ| = {err:.1e} (≤ 1e-12)")
    if not err <= 1e-12:
        failures.append(f"{name} reference")


def check_inspect(cli, src, config, name, failures):
    """pert inspect's cache line: MLA's latent row (kv_lora_rank + qk_rope_head_dim), what pert
    caches, against plain MHA (every head's k and v at their widths); the KV cache per 1000
    positions is the latent rows'. And a position block that would rotate the latent is refused."""
    H, qk = config["num_attention_heads"], config["qk_nope_head_dim"] + config["qk_rope_head_dim"]
    latent = (config["kv_lora_rank"] + config["qk_rope_head_dim"]) * 4
    want = {"mla_latent": latent, "plain_mha": H * (qk + config["v_head_dim"]) * 4}
    got = json.loads(subprocess.run([cli, "inspect", "--json", src], check=True, capture_output=True, text=True).stdout)
    text = subprocess.run([cli, "inspect", src], check=True, capture_output=True, text=True).stdout
    ok = (got["memory"].get("mla_cache_bytes_per_position_per_layer") == want and "MLA: pert caches the latent" in text and
          got["memory"]["kv_cache_bytes_per_1000_positions"] == latent * config["num_hidden_layers"] * 1000)
    path = os.path.join(src, "config.json")
    with open(path) as f:
        raw = f.read()
    with open(path, "w") as f:
        json.dump(dict(json.loads(raw), position={"type": "rope", "rotary_dim": config["qk_rope_head_dim"] + 2}), f)
    refused = subprocess.run([cli, "inspect", src], capture_output=True, text=True)
    with open(path, "w") as f:
        f.write(raw)
    ok = ok and refused.returncode != 0 and "rotary_dim" in refused.stderr and "latent" in refused.stderr
    print(f"{name:18s} inspect's cache bytes a position and layer {want}: {'ok' if ok else 'WRONG'}")
    if not ok:
        failures.append(f"{name} inspect")


def with_draft_layer(src, config, work):
    """The checkpoint as DeepSeek-V3 publishes it: num_nextn_predict_layers (1) multi-token-prediction
    layer after the last, model.layers.{L}.* (a decoder layer's tensors and its eh_proj, enorm, hnorm,
    shared_head), which the forward never runs; and the same with a tensor of layer L + 1, unexpected."""
    L, d = config["num_hidden_layers"], config["hidden_size"]
    t = safetensors_io.load(os.path.join(src, "model.safetensors"))
    draft = {n.replace(f"model.layers.{L - 1}.", f"model.layers.{L}."): v for n, v in t.items() if n.startswith(f"model.layers.{L - 1}.")}
    draft.update({f"model.layers.{L}.eh_proj.weight": np.zeros((d, 2 * d)), f"model.layers.{L}.enorm.weight": np.ones(d),
                  f"model.layers.{L}.hnorm.weight": np.ones(d), f"model.layers.{L}.shared_head.norm.weight": np.ones(d)})
    dirs = {}
    for what, extra in (("draft", {}), ("past_draft", {f"model.layers.{L + 1}.enorm.weight": np.ones(d)})):
        out = os.path.join(work, what)
        shutil.copytree(src, out)
        safetensors_io.save(os.path.join(out, "model.safetensors"), {**t, **draft, **extra}, "F32")
        dirs[what] = out
    return dirs


def check_draft_layer(binary, src, config, ids, want, work, name, failures):
    dirs = with_draft_layer(src, config, work)
    got = pert_logits(binary, dirs["draft"], ids, work)
    err = float(np.abs(got - want).max())
    print(f"{name:18s} with its draft layer (skipped) max|Δ| = {err:.2e} (≤ 1e-4)")
    if not err <= 1e-4:
        failures.append(f"{name} draft layer")
    r = subprocess.run([binary, dirs["past_draft"], os.path.join(work, "ids.txt"), os.path.join(work, "out.bin")],
                       capture_output=True, text=True)
    L = config["num_hidden_layers"]
    ok = r.returncode != 0 and f"unexpected tensor 'model.layers.{L + 1}.enorm.weight'" in r.stderr
    print(f"{name:18s} a tensor past the draft layer: {'refused' if ok else 'NOT REFUSED'}: {r.stderr.strip()}")
    if not ok:
        failures.append(f"{name} past draft")


def run_case(binary, name, work, failures, cli=None):
    kind, yarn, extra = CASES[name]
    src = os.path.join(work, "src")
    extra = dict(extra)
    fused = extra.pop("fused", False)
    deepseek.make_deepseek_model(src, kind, seed=len(name), yarn=yarn, extra_config=extra, fused=fused)
    config, W = reference.load_model_dir(src)
    check_reference(config, W, name, failures)
    if cli:
        check_inspect(cli, src, config, name, failures)
    ids = list(np.random.default_rng(3).integers(0, config["vocab_size"], size=24))
    with torch.no_grad():
        want = reference.forward(config, W, ids).numpy()
    # and with the values cached apart from the keys (a method that scales keys: DCA's length
    # scale, here 1 at every position, its chunks longer than the ids: the same logits)
    dca = ["--set", 'extend={"dca":{"chunk_size":64,"local_size":8,"original_max_position_embeddings":32}}']
    for chunk, extra in ((None, []), (1, []), (5, []), (None, dca), (1, dca)):
        got = pert_logits(binary, src, ids, work, chunk=chunk, extra=extra)
        err = float(np.abs(got - want).max())
        what = (f"chunk {chunk}" if chunk else "prefill") + (" values apart" if extra else "")
        print(f"{name:18s} {what:8s} max|Δ| = {err:.2e} (≤ 1e-4; logits' range {np.abs(want).max():.1f})")
        if not err <= 1e-4:
            failures.append(f"{name} {what}")
    if config.get("num_nextn_predict_layers"):
        check_draft_layer(binary, src, config, ids, want, work, name, failures)


def main():
    binary, args = sys.argv[1], sys.argv[2:]
    cli = args.pop(0) if args and args[0] not in CASES else None  # pert's CLI: inspect's cache line too
    failures = []
    for name in args or list(CASES):
        with tempfile.TemporaryDirectory() as work:
            run_case(binary, name, work, failures, cli)
    if failures:
        print("deepseek_vs_reference: FAILED:", ", ".join(failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
