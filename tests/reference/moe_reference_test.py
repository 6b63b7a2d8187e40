"""tools/reference/moe.py (the float64 MoE blocks, routed from HF transformers' definitions) and
the MoE side of tools/convert/to_gguf.py:

  - every router (Mixtral's, Qwen-MoE's and OLMoE's softmax top-k with and without
    renormalisation, DeepSeek V3's grouped sigmoid choice with its correction bias, DeepSeek V2's
    greedy and group-limited ones, gpt-oss's softmax over the chosen logits) against a plain
    per-token loop written here: the same experts, the same weights;
  - each tiny checkpoint's MoE block against that loop over its own per-expert tensors (with
    Qwen2-MoE's gated shared expert, DeepSeek's shared experts, gpt-oss's clamped SwiGLU with
    interleaved gate/up and biases); the fused (transformers v5) layout giving the same logits;
    different tokens choosing different experts in every layer; Qwen-MoE's dense layers
    (mlp_only_layers); OLMoE's full-width q/k norms and clip_qkv; Qwen-MoE's windows off unless
    use_sliding_window;
  - transformers' own model on the tiny checkpoints when /usr/bin/python3 can import it (skipped
    otherwise);
  - to_gguf.py on each architecture: llama.cpp's keys and names, the stacked expert tensors equal
    to the per-expert ones (and to the fused ones), the router in F32, the _M mixes' 8-expert rules,
    and --dequantized-dir giving back the checkpoint's own tensor names.

    /usr/bin/python3 -m pytest -q tests/reference/moe_reference_test.py
"""
import json
import math
import os
import shutil
import sys

import numpy as np
import pytest
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tools"))
from convert import ggml_quants  # noqa: E402
from convert import gguf  # noqa: E402
from convert import to_gguf  # noqa: E402
from lib import safetensors_io  # noqa: E402
from reference import moe  # noqa: E402
from reference import reference  # noqa: E402

IDS = [(7 * i + 3) % 96 for i in range(32)]
ARCHS = sorted(moe.TINY)


# ----------------------------------------------------------------------------- a per-token loop
def softmax(values):
    top = max(values)
    e = [math.exp(v - top) for v in values]
    return [v / sum(e) for v in e]


def largest(values, k, among=None):
    """The indices of the k largest values (among the given indices)."""
    return sorted(among if among is not None else range(len(values)), key=lambda i: -values[i])[:k]


def loop_route(config, row, bias=None):
    """{expert: weight} for one token's router logits, each router spelled out again."""
    arch, s = moe.arch_of(config), moe.settings(config)
    k = s["top_k"]
    if arch == moe.GPT_OSS:
        chosen = largest(row, k)
        return dict(zip(chosen, softmax([row[e] for e in chosen])))
    if arch in (moe.DEEPSEEK_V2, moe.DEEPSEEK_V3):
        scores = [1 / (1 + math.exp(-v)) for v in row] if s["scoring"] == "sigmoid" else softmax(row)
        choice = [v + (bias[e] if bias is not None else 0) for e, v in enumerate(scores)]
        size = len(row) // (s["n_group"] or 1)
        if s["method"] == "greedy":
            chosen = largest(choice, k)
        else:
            def group_score(g):
                members = sorted(choice[g * size:(g + 1) * size], reverse=True)
                return sum(members[:2]) if s["method"] == "noaux_tc" else members[0]
            groups = largest([group_score(g) for g in range(s["n_group"])], s["topk_group"])
            chosen = largest(choice, k, [e for e in range(len(row)) if e // size in groups])
        weights = [scores[e] for e in chosen]
        if s["norm"]:
            weights = [w / (sum(weights) + 1e-20) for w in weights]
        return {e: w * s["scale"] for e, w in zip(chosen, weights)}
    p = softmax(row)
    chosen = largest(p, k)
    total = sum(p[e] for e in chosen) if s["norm"] else 1.0
    return {e: p[e] / total for e in chosen}


def np64(t):
    return np.asarray(t, dtype=np.float64)


def loop_moe(config, W, p, x):
    """The MoE block of layer prefix p on x [T, d], token by token, from the per-expert tensors."""
    arch, s = moe.arch_of(config), moe.settings(config)
    W = {k: np64(v) for k, v in W.items() if k.startswith(p)}
    silu = lambda v: v / (1 + np.exp(-v))  # noqa: E731
    out = []
    for xt in np64(x):
        if arch == moe.GPT_OSS:
            logits = W[p + "mlp.router.weight"] @ xt + W[p + "mlp.router.bias"]
        else:
            logits = W[p + ("block_sparse_moe.gate.weight" if arch == moe.MIXTRAL else "mlp.gate.weight")] @ xt
        y = np.zeros_like(xt)
        for e, w in loop_route(config, list(logits), W.get(p + "mlp.gate.e_score_correction_bias")).items():
            if arch == moe.GPT_OSS:
                gu = xt @ W[p + "mlp.experts.gate_up_proj"][e] + W[p + "mlp.experts.gate_up_proj_bias"][e]
                gate = np.array([min(gu[2 * j], s["limit"]) for j in range(len(gu) // 2)])
                up = np.array([max(min(gu[2 * j + 1], s["limit"]), -s["limit"]) for j in range(len(gu) // 2)])
                h = (up + 1) * gate / (1 + np.exp(-s["alpha"] * gate))
                y += w * (h @ W[p + "mlp.experts.down_proj"][e] + W[p + "mlp.experts.down_proj_bias"][e])
                continue
            if arch == moe.MIXTRAL:
                q = f"{p}block_sparse_moe.experts.{e}."
                g, u, d = W[q + "w1.weight"], W[q + "w3.weight"], W[q + "w2.weight"]
            else:
                q = f"{p}mlp.experts.{e}."
                g, u, d = W[q + "gate_proj.weight"], W[q + "up_proj.weight"], W[q + "down_proj.weight"]
            y += w * (d @ (silu(g @ xt) * (u @ xt)))
        for shared in ("mlp.shared_expert.", "mlp.shared_experts."):
            if p + shared + "gate_proj.weight" in W:
                q = p + shared
                f = W[q + "down_proj.weight"] @ (silu(W[q + "gate_proj.weight"] @ xt) * (W[q + "up_proj.weight"] @ xt))
                if p + "mlp.shared_expert_gate.weight" in W:
                    f = f / (1 + np.exp(-(W[p + "mlp.shared_expert_gate.weight"] @ xt)[0]))
                y += f
        out.append(y)
    return np.array(out)


# ----------------------------------------------------------------------------- routers
ROUTERS = {
    "mixtral": {"architectures": [moe.MIXTRAL], "num_local_experts": 8, "num_experts_per_tok": 2},
    "qwen2moe": {"architectures": [moe.QWEN2_MOE], "num_experts": 12, "num_experts_per_tok": 4},
    "qwen3moe": {"architectures": [moe.QWEN3_MOE], "num_experts": 12, "num_experts_per_tok": 3, "norm_topk_prob": True},
    "olmoe": {"architectures": [moe.OLMOE], "num_experts": 16, "num_experts_per_tok": 4},
    "deepseek_v3": {"architectures": [moe.DEEPSEEK_V3], "n_routed_experts": 16, "num_experts_per_tok": 4,
                    "n_group": 4, "topk_group": 2, "routed_scaling_factor": 2.5, "norm_topk_prob": True},
    "deepseek_v3_raw": {"architectures": [moe.DEEPSEEK_V3], "n_routed_experts": 16, "num_experts_per_tok": 3,
                        "n_group": 8, "topk_group": 3, "routed_scaling_factor": 1.5, "norm_topk_prob": False},
    "deepseek_v2": {"architectures": [moe.DEEPSEEK_V2], "n_routed_experts": 16, "num_experts_per_tok": 3,
                    "routed_scaling_factor": 16.0},
    "deepseek_v2_groups": {"architectures": [moe.DEEPSEEK_V2], "n_routed_experts": 16, "num_experts_per_tok": 3,
                           "topk_method": "group_limited_greedy", "n_group": 4, "topk_group": 2,
                           "routed_scaling_factor": 1.0},
    "gpt_oss": {"architectures": [moe.GPT_OSS], "num_local_experts": 8, "num_experts_per_tok": 4},
}


@pytest.mark.parametrize("name", sorted(ROUTERS))
def test_router_against_a_per_token_loop(name):
    config = ROUTERS[name]
    E = moe.settings(config)["experts"]
    g = torch.Generator().manual_seed(5)
    logits = torch.randn(64, E, generator=g, dtype=torch.float64) * 2
    bias = torch.randn(E, generator=g, dtype=torch.float64) * 0.5 if name.startswith("deepseek_v3") else None
    index, weight = moe.route(config, logits, bias)
    for t in range(logits.shape[0]):
        want = loop_route(config, logits[t].tolist(), bias.tolist() if bias is not None else None)
        got = dict(zip(index[t].tolist(), weight[t].tolist()))
        assert sorted(got) == sorted(want), (t, got, want)
        assert all(abs(got[e] - want[e]) < 1e-12 for e in want), (t, got, want)


def test_deepseek_v3_bias_only_chooses():
    """The correction bias moves an expert into the choice, but its weight is the bare score."""
    config = dict(ROUTERS["deepseek_v3"], norm_topk_prob=False, routed_scaling_factor=1.0)
    logits = torch.zeros(1, 16, dtype=torch.float64)
    bias = torch.zeros(16, dtype=torch.float64)
    bias[13] = 5.0
    index, weight = moe.route(config, logits, bias)
    assert 13 in index[0].tolist()
    assert torch.allclose(weight, torch.full_like(weight, 0.5))  # sigmoid(0), the bias left out


def random_layer(config, d=16, ff=8, seed=3):
    """Random tensors of one MoE layer (prefix model.layers.0.) with config's names."""
    g = torch.Generator().manual_seed(seed)
    arch, E = moe.arch_of(config), moe.settings(config)["experts"]
    p = "model.layers.0."
    W = {}

    def r(*shape, std=0.5):
        return torch.randn(*shape, generator=g, dtype=torch.float64) * std

    if arch == moe.GPT_OSS:
        W.update({p + "mlp.router.weight": r(E, d), p + "mlp.router.bias": r(E),
                  p + "mlp.experts.gate_up_proj": r(E, d, 2 * ff, std=1.5), p + "mlp.experts.gate_up_proj_bias": r(E, 2 * ff),
                  p + "mlp.experts.down_proj": r(E, ff, d), p + "mlp.experts.down_proj_bias": r(E, d)})
        return W
    W[p + "mlp.gate.weight"] = r(E, d)
    if arch == moe.DEEPSEEK_V3:
        W[p + "mlp.gate.e_score_correction_bias"] = r(E, std=0.1)
    for e in range(E):
        for n, shape in (("gate_proj", (ff, d)), ("up_proj", (ff, d)), ("down_proj", (d, ff))):
            W[f"{p}mlp.experts.{e}.{n}.weight"] = r(*shape)
    for n, shape in (("gate_proj", (2 * ff, d)), ("up_proj", (2 * ff, d)), ("down_proj", (d, 2 * ff))):
        W[f"{p}mlp.shared_experts.{n}.weight"] = r(*shape)
    return W


@pytest.mark.parametrize("name", ["deepseek_v3", "deepseek_v2_groups", "gpt_oss"])
def test_moe_block_of_the_later_architectures(name):
    """DeepSeek's shared experts and gpt-oss's experts (clamps reached: gate_up's std is ~3)."""
    config = ROUTERS[name]
    W = random_layer(config)
    x = torch.randn(24, 16, generator=torch.Generator().manual_seed(9), dtype=torch.float64)
    got = moe.moe_mlp(config, W, "model.layers.0.", x)
    assert np.allclose(got.numpy(), loop_moe(config, W, "model.layers.0.", x), atol=1e-10)


def test_sparse_layers():
    qwen = {"architectures": [moe.QWEN2_MOE], "num_experts": 4, "decoder_sparse_step": 2, "mlp_only_layers": [3]}
    assert [moe.sparse_layer(qwen, i) for i in range(6)] == [False, True, False, False, False, True]
    v3 = {"architectures": [moe.DEEPSEEK_V3]}  # first_k_dense_replace defaults to 3
    assert [moe.sparse_layer(v3, i) for i in range(5)] == [False, False, False, True, True]
    assert moe.sparse_layer({"architectures": [moe.OLMOE]}, 0) and not moe.sparse_layer({"architectures": ["LlamaForCausalLM"]}, 0)


# ----------------------------------------------------------------------------- tiny checkpoints
@pytest.fixture(scope="module")
def models(tmp_path_factory):
    """{(arch, fused): model dir} of every tiny checkpoint, seed 1, and a Qwen2-MoE with a dense layer."""
    root = tmp_path_factory.mktemp("moe")
    out = {}
    for arch in ARCHS:
        for fused in (False, True):
            out[arch, fused] = str(root / f"{arch}_{int(fused)}")
            moe.make_moe_model(out[arch, fused], arch, seed=1, fused=fused)
    out["qwen2moe_dense", False] = str(root / "qwen2moe_dense")
    moe.make_moe_model(out["qwen2moe_dense", False], "qwen2moe", seed=2, layers=3, extra_config={"mlp_only_layers": [1]})
    return out


def routed(model_dir, monkeypatch):
    """(logits, [index [T, k] of each MoE layer]) of the forward over IDS."""
    seen = []
    route = moe.route

    def spy(config, logits, bias=None):
        index, weight = route(config, logits, bias)
        seen.append(index)
        return index, weight
    monkeypatch.setattr(moe, "route", spy)
    return reference.logits_for(model_dir, IDS), seen


@pytest.mark.parametrize("arch", ARCHS)
def test_checkpoint_names_and_config(arch, models):
    config, W = reference.load_model_dir(models[arch, False])
    keys = {"mixtral": ("num_local_experts", "num_experts_per_tok"),
            "qwen2moe": ("num_experts", "num_experts_per_tok", "moe_intermediate_size", "shared_expert_intermediate_size",
                         "norm_topk_prob", "decoder_sparse_step", "mlp_only_layers"),
            "qwen3moe": ("num_experts", "num_experts_per_tok", "moe_intermediate_size", "norm_topk_prob",
                         "decoder_sparse_step", "mlp_only_layers"),
            "olmoe": ("num_experts", "num_experts_per_tok", "norm_topk_prob", "clip_qkv")}[arch]
    assert all(k in config for k in keys), [k for k in keys if k not in config]
    assert config["norm_topk_prob" if arch != "mixtral" else "num_local_experts"] == \
        {"mixtral": 4, "qwen2moe": False, "qwen3moe": True, "olmoe": False}[arch]
    E, p = moe.settings(config)["experts"], "model.layers.1."
    stem = p + ("block_sparse_moe.experts" if arch == "mixtral" else "mlp.experts")
    assert all(f"{stem}.{e}.{n}.weight" in W for e in range(E)
               for n in (("w1", "w2", "w3") if arch == "mixtral" else ("gate_proj", "up_proj", "down_proj")))
    assert not any(".mlp.gate_proj" in n for n in W)  # every layer sparse
    if arch == "qwen2moe":
        assert W[p + "mlp.shared_expert_gate.weight"].shape == (1, 64)
        assert W[p + "mlp.shared_expert.gate_proj.weight"].shape == (config["shared_expert_intermediate_size"], 64)
    if arch == "olmoe":  # the whole projection's width
        assert W[p + "self_attn.q_norm.weight"].shape == (64,) and W[p + "self_attn.k_norm.weight"].shape == (64,)
    if arch == "qwen3moe":  # per head
        assert W[p + "self_attn.q_norm.weight"].shape == (24,)
    _, fused = reference.load_model_dir(models[arch, True])
    assert fused[p + "mlp.experts.gate_up_proj"].shape == (E, 2 * 32, 64) and fused[p + "mlp.gate.weight"].shape == (E, 64)
    assert fused[p + "mlp.experts.down_proj"].shape == (E, 64, 32)


@pytest.mark.parametrize("arch", ARCHS)
def test_moe_block_against_the_loop(arch, models):
    config, W = reference.load_model_dir(models[arch, False])
    x = torch.randn(20, 64, generator=torch.Generator().manual_seed(4), dtype=torch.float64)
    for i in range(config["num_hidden_layers"]):
        p = f"model.layers.{i}."
        assert np.allclose(moe.moe_mlp(config, W, p, x).numpy(), loop_moe(config, W, p, x), atol=1e-10)


@pytest.mark.parametrize("arch", ARCHS)
def test_routing_is_not_degenerate_and_fused_agrees(arch, models, monkeypatch):
    logits, seen = routed(models[arch, False], monkeypatch)
    config, _ = reference.load_model_dir(models[arch, False])
    E = moe.settings(config)["experts"]
    assert len(seen) == config["num_hidden_layers"]
    for index in seen:
        rows = [tuple(sorted(r)) for r in index.tolist()]
        assert len(set(rows)) >= 4 and len({e for r in rows for e in r}) == E, rows
    assert np.isfinite(logits).all() and 0.3 < logits.std() < 3
    assert np.allclose(reference.logits_for(models[arch, True], IDS), logits, rtol=0, atol=1e-12)


def test_qwen2moe_dense_layer(models, monkeypatch):
    config, W = reference.load_model_dir(models["qwen2moe_dense", False])
    assert "model.layers.1.mlp.gate_proj.weight" in W and "model.layers.1.mlp.gate.weight" not in W
    assert W["model.layers.1.mlp.gate_proj.weight"].shape == (config["intermediate_size"], 64)
    _, seen = routed(models["qwen2moe_dense", False], monkeypatch)
    assert len(seen) == 2  # layers 0 and 2


def test_olmoe_norms_and_clip(models, tmp_path):
    config, W = reference.load_model_dir(models["olmoe", False])
    g = torch.Generator().manual_seed(6)
    q, k, v = (torch.randn(5, 64, generator=g, dtype=torch.float64) * 3 for _ in range(3))
    p = "model.layers.0."
    qn, kn, vn = moe.olmoe_qkv(config, W, p, q, k, v, reference.rmsnorm_llama, 1e-5)
    want = q / torch.sqrt((q * q).mean(-1, keepdim=True) + 1e-5) * W[p + "self_attn.q_norm.weight"]
    assert torch.allclose(qn, want) and torch.equal(vn, v)
    clipped = moe.olmoe_qkv(dict(config, clip_qkv=0.5), W, p, q, k, v, reference.rmsnorm_llama, 1e-5)
    assert all(torch.equal(c, x.clamp(-0.5, 0.5)) for c, x in zip(clipped, (qn, kn, v)))
    # clip_qkv and a grouped-query OLMoE (k_norm kv_heads·head_dim wide) run through the forward
    moe.make_moe_model(str(tmp_path / "gqa"), "olmoe", seed=1, kv_heads=2, extra_config={"clip_qkv": 0.5})
    _, Wg = reference.load_model_dir(str(tmp_path / "gqa"))
    assert Wg[p + "self_attn.k_norm.weight"].shape == (32,)  # 2 kv heads of 16
    assert np.isfinite(reference.logits_for(str(tmp_path / "gqa"), IDS)).all()


def test_qwen_moe_windows():
    off = {"architectures": [moe.QWEN2_MOE], "num_hidden_layers": 4, "sliding_window": 8, "use_sliding_window": False}
    assert reference.layer_windows(off) == [0, 0, 0, 0]
    on = dict(off, use_sliding_window=True, max_window_layers=3)
    assert reference.layer_windows(on) == [8, 0, 8, 0]  # transformers v5: odd layers below max_window_layers
    q3 = dict(on, architectures=[moe.QWEN3_MOE])
    assert reference.layer_windows(q3) == [8, 8, 8, 8] and reference.layer_windows(dict(q3, use_sliding_window=False)) == [0] * 4


def test_against_transformers(models):
    """transformers' own forward on each tiny checkpoint, when this interpreter has it. Its RMSNorm
    and router softmax run in float32 whatever the model's dtype, hence 1e-4 of the logit range (a
    wrong router, norm width or expert layout is of the order of the range)."""
    transformers = pytest.importorskip("transformers", reason="transformers is not installed for this interpreter")
    for arch, fused in sorted(models):
        if fused and int(transformers.__version__.split(".")[0]) < 5:  # v4 reads per-expert tensors only
            continue
        try:
            hf = transformers.AutoModelForCausalLM.from_pretrained(models[arch, fused], dtype=torch.float64,
                                                                   attn_implementation="eager")
        except TypeError:  # transformers before 4.56: torch_dtype
            hf = transformers.AutoModelForCausalLM.from_pretrained(models[arch, fused], torch_dtype=torch.float64,
                                                                   attn_implementation="eager")
        with torch.no_grad():
            want = hf(torch.tensor([IDS])).logits[0].to(torch.float64).numpy()
        got = reference.logits_for(models[arch, fused], IDS)
        assert np.abs(got - want).max() < 1e-4 * np.abs(want).max(), (arch, fused)


# ----------------------------------------------------------------------------- GGUF
@pytest.fixture(scope="module")
def gguf_models(tmp_path_factory):
    """{(arch, fused): directory} of to_gguf's random MoE models (width 256, tokenizer included)."""
    root = tmp_path_factory.mktemp("moe_gguf")
    out = {}
    for arch in ARCHS:
        out[arch, False] = str(root / arch)
        to_gguf.random_model(out[arch, False], arch, seed=4)
        out[arch, True] = str(root / (arch + "_fused"))
        to_gguf.random_model(out[arch, True], arch, seed=4, fused=True)
    return out


EXPECTED_KEYS = {
    "mixtral": {"general.architecture": "llama", "llama.expert_count": 4, "llama.expert_used_count": 2},
    "qwen2moe": {"general.architecture": "qwen2moe", "qwen2moe.expert_count": 6, "qwen2moe.expert_used_count": 2,
                 "qwen2moe.expert_feed_forward_length": 256, "qwen2moe.expert_shared_feed_forward_length": 512},
    "qwen3moe": {"general.architecture": "qwen3moe", "qwen3moe.expert_count": 8, "qwen3moe.expert_used_count": 2,
                 "qwen3moe.expert_feed_forward_length": 256},
    "olmoe": {"general.architecture": "olmoe", "olmoe.expert_count": 8, "olmoe.expert_used_count": 2},
}


def read(path):
    _, md, tensors = gguf.read_gguf(path)
    return {k: v for k, (_, v) in md.items()}, {t["name"]: t for t in tensors}


def values(t):
    return ggml_quants.dequantize(t["type"], t["bytes"], int(np.prod(t["shape"]))).reshape(list(reversed(t["shape"])))


@pytest.mark.parametrize("arch", ARCHS)
def test_gguf_layout(arch, gguf_models, tmp_path):
    src = gguf_models[arch, False]
    out = str(tmp_path / "m.gguf")
    to_gguf.convert(src, out, "F32", dequantized_dir=str(tmp_path / "hf"))
    md, tensors = read(out)
    back, (_, W) = safetensors_io.load(str(tmp_path / "hf" / "model.safetensors")), reference.load_model_dir(src)
    assert sorted(back) == sorted(W) and all(np.array_equal(back[n], W[n].numpy()) for n in W)  # q/k unpermuted too
    assert all(md.get(k) == v for k, v in EXPECTED_KEYS[arch].items()), {k: md.get(k) for k in EXPECTED_KEYS[arch]}
    assert not any(k.endswith(("expert_weights_norm", "clamp_kqv")) for k in md)  # as released: llama.cpp's defaults
    config, W = reference.load_model_dir(src)
    E, ff = moe.settings(config)["experts"], config.get("moe_intermediate_size", config["intermediate_size"])
    for i in range(2):
        p, b = f"model.layers.{i}.", f"blk.{i}."
        assert tensors[b + "ffn_gate_exps.weight"]["shape"] == [256, ff, E]
        assert tensors[b + "ffn_up_exps.weight"]["shape"] == [256, ff, E]
        assert tensors[b + "ffn_down_exps.weight"]["shape"] == [ff, 256, E]
        for part, names in (("gate", ("w1", "gate_proj")), ("up", ("w3", "up_proj")), ("down", ("w2", "down_proj"))):
            stem = p + ("block_sparse_moe.experts" if arch == "mixtral" else "mlp.experts")
            name = names[0] if arch == "mixtral" else names[1]
            want = np.stack([W[f"{stem}.{e}.{name}.weight"].numpy() for e in range(E)])
            assert np.array_equal(values(tensors[f"{b}ffn_{part}_exps.weight"]), want.astype(np.float32))
        router = p + ("block_sparse_moe.gate.weight" if arch == "mixtral" else "mlp.gate.weight")
        assert tensors[b + "ffn_gate_inp.weight"]["shape"] == [256, E]
        assert np.array_equal(values(tensors[b + "ffn_gate_inp.weight"]), W[router].numpy().astype(np.float32))
        if arch == "qwen2moe":
            assert tensors[b + "ffn_gate_inp_shexp.weight"]["shape"] == [256, 1]
            assert tensors[b + "ffn_gate_shexp.weight"]["shape"] == [256, 512]
            assert tensors[b + "ffn_down_shexp.weight"]["shape"] == [512, 256]
        if arch == "olmoe":
            assert tensors[b + "attn_q_norm.weight"]["shape"] == [256] and tensors[b + "attn_k_norm.weight"]["shape"] == [256]
    assert not any(".ffn_gate.weight" in n or "experts" in n for n in tensors)
    # the fused (transformers v5) checkpoint gives the same tensors
    fused = str(tmp_path / "f.gguf")
    to_gguf.convert(gguf_models[arch, True], fused, "F32", name=os.path.basename(src))
    _, ftensors = read(fused)
    assert sorted(ftensors) == sorted(tensors)
    assert all(ftensors[n]["bytes"] == tensors[n]["bytes"] for n in tensors)


@pytest.mark.parametrize("arch", ARCHS)
def test_gguf_types_and_dequantized_dir(arch, gguf_models, tmp_path):
    for fused in (False, True):
        deq = str(tmp_path / f"deq{int(fused)}")
        types = to_gguf.convert(gguf_models[arch, fused], str(tmp_path / "q.gguf"), "Q4_K_M", dequantized_dir=deq)
        config, W = reference.load_model_dir(gguf_models[arch, fused])
        back = safetensors_io.load(os.path.join(deq, "model.safetensors"))
        assert sorted(back) == sorted(W)  # the checkpoint's own names and layout
        assert all(back[n].shape == tuple(W[n].shape) for n in W)
        assert all(t == "F32" for n, t in types.items() if "ffn_gate_inp.weight" in n)
        if moe.settings(config)["experts"] == 8:  # llama-quantize's 8-expert rules
            assert types["blk.0.attn_k.weight"] == "Q8_0" and types["blk.0.attn_v.weight"] == "Q8_0"
            # Q5_K; qwen3moe's 96-wide rows (4 heads of 24) fall back as llama-quantize does
            assert types["blk.0.attn_output.weight"] == ("Q5_1" if arch == "qwen3moe" else "Q5_K")
        assert types["blk.1.ffn_down_exps.weight"] == "Q6_K" and types["blk.0.ffn_down_exps.weight"] == "Q4_K"
        if arch == "qwen2moe":
            assert types["blk.0.ffn_gate_inp_shexp.weight"] == "F16"  # one row: llama-quantize leaves it
        assert np.isfinite(reference.logits_for(deq, IDS[:8])).all()


def test_inputs_hook_names_gguf_tensors(gguf_models, tmp_path):
    """reference.forward's inputs(name, h) reaches every matrix of the MoE blocks under a name that
    to_gguf.gguf_name maps to a tensor of the file (so a quantized file's activations can be rounded
    per matrix as gguf_model_test.py rounds them); the identity hook changes nothing."""
    for arch in ARCHS:
        for fused in (False, True):
            config, W = reference.load_model_dir(gguf_models[arch, fused])
            out = str(tmp_path / f"{arch}{int(fused)}.gguf")
            to_gguf.convert(gguf_models[arch, fused], out, "F32")
            tensors = read(out)[1]
            names = set()

            def inputs(name, h):
                names.add(name)
                return h
            with torch.no_grad():
                got = reference.forward(config, W, IDS[:6], inputs=inputs)
                assert torch.equal(got, reference.forward(config, W, IDS[:6]))
            gguf_names = {to_gguf.gguf_name(n + ".weight") for n in names if n != "lm_head"}
            assert gguf_names <= set(tensors), sorted(gguf_names - set(tensors))
            assert {n for n in tensors if "exps" in n or "gate_inp" in n} <= gguf_names


def test_gguf_additions(gguf_models, tmp_path):
    """Keys llama.cpp's own files lack, written only where the config asks what its graph does not do."""
    src = gguf_models["qwen3moe", False]
    with open(os.path.join(src, "config.json")) as f:
        config = json.load(f)
    d = tmp_path / "q3"
    d.mkdir()
    for name in ("model.safetensors", "tokenizer.json"):
        os.symlink(os.path.join(src, name), d / name)
    with open(d / "config.json", "w") as f:
        json.dump(dict(config, norm_topk_prob=False), f)
    to_gguf.convert(str(d), str(tmp_path / "q3.gguf"), "F32")
    assert read(str(tmp_path / "q3.gguf"))[0]["qwen3moe.expert_weights_norm"] is False
    assert ("olmoe.attention.clamp_kqv", "f32", 8.0) in to_gguf.moe_hyperparameters(
        "olmoe", {"architectures": [moe.OLMOE], "clip_qkv": 8.0})


def test_gguf_independent_reader(gguf_models, tmp_path):
    """HF's @huggingface/gguf (as tests/reference/gguf_writer_test.py runs it) reads the MoE files alike:
    keys, the 3-D expert tensors' shapes, types, offsets and bytes."""
    sys.path.insert(0, HERE)
    import gguf_writer_test as writer_test
    if not os.path.isdir(writer_test.PACKAGE) or shutil.which("node") is None:
        pytest.skip("@huggingface/gguf or node missing (npm ci --prefix tests/helpers/hf_tokenizers)")
    paths = []
    for arch in ARCHS:
        paths.append(str(tmp_path / f"{arch}.gguf"))
        to_gguf.convert(gguf_models[arch, False], paths[-1], "Q4_K_M")
    js = writer_test.npm_read(paths)
    for path in paths:
        _, metadata, tensors = gguf.read_gguf(path)
        writer_test.check_file(path, js[path], 3, [(k, kind, v) for k, (kind, v) in metadata.items()],
                               [(t["name"], t["type"], t["shape"], t["bytes"]) for t in tensors])
