"""The float64 reference's learned sink logits (gpt-oss's self_attn.sinks, ../shared/DESIGN.md §7):
a query's weights exp(s_j) / (Σ_k exp(s_k) + exp(sink_h)), the sink's column dropped.

  - reference.softmax_with_sink_logits against a plain per-row loop written here, over rows with
    masked keys, GQA-like repeated heads and sinks large, small and absent; no sinks is torch's
    softmax; a sink of -1e30 is no sink; a huge sink leaves the keys ~0;
  - a tiny checkpoint (reference.make_model) with self_attn.sinks added: forward hands each
    layer's own sinks to the softmax and the weights it observes are the loop's from the same
    scores; sinks of -1e30 give the plain checkpoint's logits exactly, real ones other logits;
  - `reference.py attention` on it reports sink_logit_mass = 1 - the row's weights (= 1 - the
    buckets' mass), and nothing of the kind for a checkpoint without sinks;
  - transformers' gpt-oss eager attention, when /usr/bin/python3 can import it (skipped otherwise).

    /usr/bin/python3 -m pytest -q tests/reference/sink_logits_reference_test.py
"""
import json
import math
import os
import subprocess
import sys

import numpy as np
import pytest
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tools"))
from lib import safetensors_io  # noqa: E402
from reference import reference  # noqa: E402

REFERENCE = os.path.join(HERE, "..", "..", "tools", "reference", "reference.py")
IDS = [(7 * i + 3) % 96 for i in range(24)]
HEADS = 4


# ----------------------------------------------------------------------------- a per-row loop
def loop_weights(row, sink):
    """One query's weights over its keys (-inf: masked) with the sink logit in the denominator."""
    e = [math.exp(s) if s != -math.inf else 0.0 for s in row]
    z = sum(e) + (math.exp(sink) if sink is not None else 0.0)
    return [x / z for x in e]


def loop_softmax(scores, sinks):
    """scores [H, T, T] -> weights [H, T, T], row by row; sinks [H] or None."""
    out = torch.zeros_like(scores)
    for h in range(scores.shape[0]):
        for m in range(scores.shape[1]):
            out[h, m] = torch.tensor(loop_weights(scores[h, m].tolist(), None if sinks is None else float(sinks[h])),
                                     dtype=scores.dtype)
    return out


def causal_scores(T=9, seed=0, spread=4.0):
    g = torch.Generator().manual_seed(seed)
    s = torch.randn(HEADS, T, T, generator=g, dtype=torch.float64) * spread
    return s.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), -math.inf)


# ----------------------------------------------------------------------------- the softmax
@pytest.mark.parametrize("sinks", [[0.5, -2.0, 3.0, 8.0], [-30.0, 0.0, 12.0, -1.0]])
def test_softmax_with_sink_logits_is_the_loop(sinks):
    scores, sinks = causal_scores(), torch.tensor(sinks, dtype=torch.float64)
    got = reference.softmax_with_sink_logits(scores, sinks)
    assert torch.allclose(got, loop_softmax(scores, sinks), rtol=1e-12, atol=1e-15)
    total = got.sum(-1)
    assert (total <= 1).all()
    z = torch.exp(scores).sum(-1) + torch.exp(sinks)[:, None]
    assert torch.allclose(1 - total, torch.exp(sinks)[:, None] / z, rtol=1e-10, atol=1e-15)


def test_softmax_with_sink_logits_without_sinks_and_extremes():
    scores = causal_scores(seed=1)
    assert torch.equal(reference.softmax_with_sink_logits(scores, None), torch.softmax(scores, dim=-1))
    # -1e30: e^(sink - max) = 0, the weights those of no sink
    none = reference.softmax_with_sink_logits(scores, torch.full((HEADS,), -1e30, dtype=torch.float64))
    assert torch.equal(none, torch.softmax(scores, dim=-1))
    # a sink far above every score takes all the mass, without overflow (the max includes it)
    huge = reference.softmax_with_sink_logits(scores, torch.full((HEADS,), 1e4, dtype=torch.float64))
    assert torch.isfinite(huge).all() and huge.max() < 1e-300
    # batched scores [B, H, T, T] take the same per-head sinks
    sinks = torch.tensor([1.0, -1.0, 2.0, 0.0], dtype=torch.float64)
    batched = reference.softmax_with_sink_logits(torch.stack([scores, scores + 1]), sinks)
    assert torch.allclose(batched[1], loop_softmax(scores + 1, sinks), rtol=1e-12, atol=1e-15)


# ----------------------------------------------------------------------------- a tiny checkpoint
def with_sinks(src, dst, sinks_of_layer):
    """dst: src's checkpoint plus model.layers.N.self_attn.sinks [heads] (F32)."""
    os.makedirs(dst, exist_ok=True)
    tensors = safetensors_io.load(os.path.join(src, "model.safetensors"))
    for i, sinks in enumerate(sinks_of_layer):
        tensors[f"model.layers.{i}.self_attn.sinks"] = np.array(sinks, dtype=np.float32)
    safetensors_io.save(os.path.join(dst, "model.safetensors"), tensors, "F32")
    with open(os.path.join(src, "config.json")) as f, open(os.path.join(dst, "config.json"), "w") as g:
        g.write(f.read())


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    root = tmp_path_factory.mktemp("sinks")
    plain = str(root / "plain")
    reference.make_model(plain, None, seed=3, heads=HEADS, kv_heads=2)  # GQA: 2 heads per kv head
    sinks = [[0.5, -1.0, 2.0, -3.0], [1.5, 0.0, -0.5, 4.0]]
    with_sinks(plain, str(root / "sinks"), sinks)
    with_sinks(plain, str(root / "off"), [[-1e30] * HEADS] * 2)
    return {"plain": plain, "sinks": str(root / "sinks"), "off": str(root / "off"), "values": sinks}


def test_forward_uses_each_layers_sinks(models, monkeypatch):
    config, W = reference.load_model_dir(models["sinks"])
    seen, observed = [], {}
    original = reference.softmax_with_sink_logits

    def spy(scores, sinks):
        seen.append((scores.clone(), sinks))
        return original(scores, sinks)

    monkeypatch.setattr(reference, "softmax_with_sink_logits", spy)
    with torch.no_grad():
        reference.forward(config, W, IDS, observe=lambda layer, p: observed.__setitem__(layer, p))
    assert len(seen) == 2
    for layer, (scores, sinks) in enumerate(seen):
        assert sinks.tolist() == pytest.approx(models["values"][layer])
        assert torch.allclose(observed[layer], loop_softmax(scores, sinks), rtol=1e-12, atol=1e-15)
        assert (observed[layer].sum(-1) < 1).all()


def test_sinks_change_the_logits_and_minus_1e30_does_not(models):
    plain = reference.logits_for(models["plain"], IDS)
    assert (reference.logits_for(models["off"], IDS) == plain).all()
    assert abs(reference.logits_for(models["sinks"], IDS) - plain).max() > 1e-3


def attention_json(model_dir, tmp_path, name):
    ids = tmp_path / "ids.txt"
    ids.write_text(" ".join(map(str, IDS)))
    out = tmp_path / f"{name}.json"
    subprocess.run([sys.executable, REFERENCE, "attention", model_dir, str(ids), str(out)], check=True)
    return json.loads(out.read_text())


def test_attention_statistics_report_the_sink_logit_mass(models, tmp_path):
    stats = attention_json(models["sinks"], tmp_path, "sinks")["attention"]["all"]
    config, W = reference.load_model_dir(models["sinks"])
    observed = {}
    with torch.no_grad():
        reference.forward(config, W, IDS, observe=lambda layer, p: observed.__setitem__(layer, p))
    for layer in range(2):
        for h in range(HEADS):
            mass = stats["sink_logit_mass"][layer][h]
            assert mass == pytest.approx(float((1 - observed[layer][h].sum(-1)).mean()), abs=1e-12)
            assert mass == pytest.approx(1 - sum(stats["mass"][layer][h]), abs=1e-12)
            assert 0 < mass < 1
    # a larger sink logit takes more: layer 1's head 3 (4.0) against its head 1 (0.0)
    assert stats["sink_logit_mass"][1][3] > stats["sink_logit_mass"][1][1]
    assert "sink_logit_mass" not in attention_json(models["plain"], tmp_path, "plain")["attention"]["all"]


# ----------------------------------------------------------------------------- transformers
def test_transformers_gpt_oss_eager_attention_agrees():
    pytest.importorskip("transformers")
    from transformers.models.gpt_oss import modeling_gpt_oss

    g = torch.Generator().manual_seed(5)
    B, T, hd, kv = 1, 7, 8, 2
    q = torch.randn(B, HEADS, T, hd, generator=g, dtype=torch.float64)
    k = torch.randn(B, kv, T, hd, generator=g, dtype=torch.float64)
    v = torch.randn(B, kv, T, hd, generator=g, dtype=torch.float64)
    mask = torch.zeros(T, T, dtype=torch.float64).masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), -math.inf)

    class Module(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.sinks = torch.nn.Parameter(torch.tensor([0.5, -2.0, 3.0, 1.0], dtype=torch.float64))
            self.num_key_value_groups = HEADS // kv

    module = Module().eval()
    scale = hd ** -0.5
    _, weights = modeling_gpt_oss.eager_attention_forward(module, q, k, v, mask[None, None], scale)
    scores = q[0] @ k[0].repeat_interleave(HEADS // kv, dim=0).mT * scale + mask
    ours = reference.softmax_with_sink_logits(scores, module.sinks.detach())
    assert torch.allclose(weights[0].detach(), ours, rtol=1e-10, atol=1e-15)
