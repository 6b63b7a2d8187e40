"""The Python module (import pert) against the CLI and the float64 reference: logits, greedy
generation, perplexity, attention statistics, sweep, positions, sessions; every error a pert.Error naming what is
wrong; the GIL released while pert computes; no growth over 1000 loads and evals.

Run by ctest (test python_module) with PYTHONPATH=build/python, PERT_BINARY=build/pert and
PERT_BUILD_DIR=build; needs the converted stories260K (tools/setup.sh) and models/.
"""
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

import pert

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.environ.get("PERT_BUILD_DIR", os.path.join(ROOT, "build"))
BINARY = os.environ.get("PERT_BINARY", os.path.join(BUILD, "pert"))
STORIES = os.path.join(BUILD, "models", "stories260K")
TEXT = os.path.join(BUILD, "data", "tinystories_heldout.txt")
sys.path.insert(0, os.path.join(ROOT, "tools"))
from lib.family_names import FAMILY as NAMES  # noqa: E402  (tools/ on the path first)
FAMILY = [d for d in NAMES if os.path.isfile(os.path.join(ROOT, "models", d, "config.json"))]


def cli(*args):
    out = subprocess.run([BINARY, *args], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    return out.stdout


def cli_json(*args):
    return json.loads(cli(*args, "--json"))


@pytest.fixture(scope="module")
def stories():
    if not os.path.isfile(os.path.join(STORIES, "config.json")):
        pytest.skip(f"{STORIES}: not converted (bash tools/setup.sh converts it)")
    return pert.load(STORIES)


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    pert.set_threads(1)  # as the CLI runs here (-t 1), so sums are made in the same order
    yield
    pert.set_threads(0)


# --- against the reference and the CLI ---------------------------------------------------------

@pytest.mark.parametrize("name", FAMILY)
def test_logits_match_the_float64_reference(name):
    reference = pytest.importorskip("reference.reference")
    model_dir = os.path.join(ROOT, "models", name)
    m = pert.load(model_dir)
    ids = m.tokenize("Once upon a time there was a little dog. He liked to run in the park with his friend.",
                     add_special=True)
    ids = (ids * 3)[:80]
    got = m.logits(ids)
    assert got.dtype == np.float32 and got.shape == (len(ids), m.vocab_size)
    want = reference.logits_for(model_dir, ids)
    assert np.max(np.abs(got - want)) <= 1e-4


# M-RoPE (Qwen2-VL's contiguous sections, Qwen3-VL's interleaved): tokens at (t, h, w) positions of a
# 2-D layout (4 text tokens, a 4 x 6 image at t = 4, text from 10 on) against the reference
@pytest.mark.parametrize("arch,rope,extra", [
    ("Qwen2VLForConditionalGeneration", {"type": "mrope", "mrope_section": [2, 3, 3]}, {"qkv_bias": True, "vl": "v4"}),
    ("Qwen3VLForConditionalGeneration", {"rope_type": "default", "mrope_section": [3, 3, 2], "mrope_interleaved": True},
     {"qk_norm": True, "vl": "v5"})])
def test_mrope_positions_per_axis_match_the_reference(arch, rope, extra, tmp_path):
    reference = pytest.importorskip("reference.reference")
    import shutil
    vocab = json.load(open(os.path.join(ROOT, "models", "rope", "config.json")))["vocab_size"]
    model_type = {"Qwen2VLForConditionalGeneration": "qwen2_vl", "Qwen3VLForConditionalGeneration": "qwen3_vl"}[arch]
    reference.make_model(str(tmp_path), None, vocab=vocab, trained=32, **extra,
                         extra_config={"architectures": [arch], "model_type": model_type, "rope_theta": 10000.0,
                                       "rope_scaling": rope})
    shutil.copy(os.path.join(ROOT, "models", "rope", "tokenizer.json"), tmp_path)
    config, W = reference.load_model_dir(str(tmp_path))
    ids = np.random.default_rng(3).integers(0, vocab, 40).tolist()
    layout = [[i, i, i] for i in range(4)] + [[4, 4 + h, 4 + w] for h in range(4) for w in range(6)]
    layout += [[p, p, p] for p in range(10, 10 + 40 - len(layout))]
    with reference.torch.no_grad():
        want = reference.forward(config, W, ids, axis_positions=layout).numpy()
        text = reference.forward(config, W, ids).numpy()
    m = pert.load(tmp_path)
    assert np.max(np.abs(want - text)) > 0.1  # the layout matters
    assert np.max(np.abs(m.session(n_ctx=64).eval(ids, all_logits=True, positions=layout) - want)) <= 1e-4
    s = m.session(n_ctx=64, n_batch=7)  # in pieces, and token by token: the cache holds keys turned
    got = [s.eval(ids[:13], all_logits=True, positions=np.array(layout[:13]))]
    got += [s.eval(ids[i:i + 1], positions=layout[i:i + 1])[None] for i in range(13, 40)]
    assert np.max(np.abs(np.concatenate(got) - want)) <= 1e-4
    assert np.max(np.abs(m.session(n_ctx=64).eval(ids, all_logits=True) - text)) <= 1e-4  # text alone: plain RoPE
    same = [[i, i, i] for i in range(40)]
    assert np.array_equal(m.session(n_ctx=64).eval(ids, all_logits=True, positions=same),
                          m.session(n_ctx=64).eval(ids, all_logits=True))
    for bad, message in ((layout[:3], r"positions: one \[t, h, w\] per id expected \(40 x 3\)"),
                         ([[0.5, 0, 0]] * 40, "positions: integers expected"),
                         ([[0, 0, 64]] * 40, "position on axis w is 64, outside \\[0, 64\\)")):
        with pytest.raises(pert.Error, match=message):
            m.session(n_ctx=64).eval(ids, positions=bad)


def test_positions_per_axis_are_refused_where_the_scheme_takes_none(stories):
    with pytest.raises(pert.Error, match="explicit positions per axis are M-RoPE's"):
        stories.session(n_ctx=8).eval([1, 2], positions=[[0, 0, 0], [1, 1, 1]])


def test_logits_equal_the_cli_harness(stories, tmp_path):
    ids = stories.tokenize("Once upon a time, a cat sat on a mat.", add_special=True)
    (tmp_path / "ids").write_text(" ".join(map(str, ids)))
    harness = os.path.join(BUILD, "tests", "pert_logits")
    # On one thread, as the module here: OpenBLAS's sgemm (machines without AVX-512) sums in another
    # order on two threads.
    subprocess.run([harness, STORIES, str(tmp_path / "ids"), str(tmp_path / "out")], check=True,
                   env=dict(os.environ, OMP_NUM_THREADS="1"))
    want = np.fromfile(tmp_path / "out", dtype=np.float32).reshape(len(ids), -1)
    np.testing.assert_array_equal(stories.logits(ids), want)


def test_session_decode_equals_one_prefill(stories):
    ids = stories.tokenize("Tom and Sue went to the shop to buy some milk.", add_special=True)
    full = stories.logits(ids)
    s = stories.session(n_ctx=64)
    rows = [s.eval(ids[:5], all_logits=True)] + [s.eval([t])[None] for t in ids[5:]]
    assert s.n_past == len(ids) and s.n_ctx == 64
    np.testing.assert_allclose(np.concatenate(rows), full, atol=1e-4)
    # an earlier pos replaces what follows it
    np.testing.assert_allclose(s.eval(ids[3:], pos=3), full[-1], atol=1e-4)
    assert s.shift(1, 2) and s.n_past == len(ids) - 2


def test_greedy_generation_equals_the_cli(stories):
    prompt = "Once upon a time"
    want = cli_json("generate", "-m", STORIES, "-p", prompt, "-n", "60", "--temp", "0", "-t", "1")
    g = stories.generate(prompt, n_predict=60, temp=0)
    pieces = list(g)
    assert all(pieces) and "".join(pieces) == want["text"]
    assert g.tokens == want["tokens"] and g.stop == want["stop"]
    assert g.result()["prompt_tokens"] == want["prompt_tokens"]


def test_generation_with_context_shifts_equals_the_cli(stories):
    args = dict(n_predict=100, n_ctx=32, keep=2, temp=0.9, seed=7, repeat_penalty=1.1)
    want = cli_json("generate", "-m", STORIES, "-p", "The sun", "-n", "100", "-c", "32", "--keep", "2",
                    "--temp", "0.9", "-s", "7", "--repeat-penalty", "1.1", "-t", "1")
    g = stories.generate("The sun", **args)
    assert "".join(g) == want["text"] and g.tokens == want["tokens"]
    assert g.result()["context_shifts"] == want["context_shifts"] > 0


def test_perplexity_equals_the_cli(stories):
    for mode, extra in (("chunks", {}), ("sliding", {"stride": 64}), ("llama", {}), ("chunks", {"buckets": 16})):
        flags = [f"--{k}={v}" for k, v in extra.items()]
        want = cli_json("perplexity", "-m", STORIES, "-f", TEXT, "-c", "128", "--chunks", "6", "--mode", mode, *flags, "-t", "1")
        got = pert.perplexity(stories, file=TEXT, n_ctx=128, chunks=6, mode=mode, **extra)
        for key in ("ppl", "ppl_stderr", "nll", "tokens", "windows", "stride", "nll_by_position", "text_tokens", "buckets"):
            assert got[key] == want[key], (mode, key)
        # log-spaced by default (positions 0-1, 2, 3, ..., 108-127), else 16 of 8 positions each
        spans = [(b["first"], b["last"]) for b in got["nll_by_position"]]
        assert spans[:3] == ([(0, 1), (2, 2), (3, 3)] if "buckets" not in extra else [(0, 7), (8, 15), (16, 23)]), spans
        assert got["buckets"] == extra.get("buckets", "log") and spans[-1][1] == 127
    text = open(TEXT, encoding="utf-8").read()
    assert stories.perplexity(text=text, n_ctx=128, chunks=6)["ppl"] == pert.perplexity(STORIES, file=TEXT, n_ctx=128, chunks=6)["ppl"]
    seen = []
    stories.perplexity(file=TEXT, n_ctx=128, chunks=3, progress=lambda done, total, ppl: seen.append((done, total)))
    assert seen == [(1, 3), (2, 3), (3, 3)]


def test_key_tokens_equal_the_cli(tmp_path):
    """key_tokens= and its keywords: pert.perplexity and pert.sweep choose the key tokens (LongPPL) as
    pert perplexity --key-tokens and pert sweep do, an evaluator under a config of its own included."""
    rope, alibi = (os.path.join(ROOT, "models", n) for n in ("rope", "alibi"))
    if not os.path.isfile(os.path.join(rope, "config.json")):
        pytest.skip("models/rope is not here")
    linear = os.path.join(ROOT, "configs", "rope", "linear-x2.json")
    flags = ["--key-tokens", "--key-short", "48", "--key-step", "16", "--key-alpha", "1", "--key-model", rope,
             "--key-config", linear]
    keys = dict(key_tokens=True, key_short=48, key_step=16, key_alpha=1.0, key_model=rope, key_config=linear)
    want = cli_json("perplexity", "-m", alibi, "-f", TEXT, "--split-docs", "-c", "256", "--chunks", "3", "-t", "1", "-q", *flags)
    got = pert.perplexity(alibi, file=TEXT, split_docs=True, n_ctx=256, chunks=3, **keys)
    for key in ("key_tokens", "key_candidates", "key_ppl", "key_token_indices", "key_config", "key_model", "ppl"):
        assert got[key] == want[key], key
    assert got["key_tokens"] > 0
    inline = pert.perplexity(alibi, file=TEXT, split_docs=True, n_ctx=256, chunks=3,
                             **{**keys, "key_config": [json.load(open(linear))]})
    assert inline["key_token_indices"] == want["key_token_indices"]  # a dict is the same config written inline
    cells = pert.sweep([alibi], [256], file=TEXT, split_docs=True, chunks=3, **keys)
    assert (cells[0]["key_tokens"], cells[0]["key_ppl"]) == (want["key_tokens"], want["key_ppl"])
    with pytest.raises(pert.Error, match="key_config"):  # the evaluator's config needs an evaluator
        pert.perplexity(alibi, file=TEXT, n_ctx=256, chunks=1, key_tokens=True, key_config=linear)


def test_attention_equals_the_cli(stories, tmp_path):
    """pert.attention's arrays are pert attention's JSON for the same cell, and within L only "all"."""
    out = tmp_path / "attention.json"
    want = cli_json("attention", "-m", STORIES, "-f", TEXT, "--lengths", "64,600", "--chunks", "2", "--sink", "3",
                    "--out", str(out), "-t", "1", "-q")["cells"]
    for cell in want:
        got = pert.attention(stories, file=TEXT, n_ctx=cell["length"], chunks=2, sink=3)
        assert got["windows"] == cell["windows"] == 2 and got["queries"] == cell["queries"]
        assert got["buckets"].tolist() == cell["buckets"] and got["trained_length"] == cell["trained_length"]
        assert set(cell["attention"]) == ({"all"} if cell["length"] <= cell["trained_length"] else {"all", "in_L", "past_L"})
        for r, stats in cell["attention"].items():
            for name, value in stats.items():
                assert got[r][name].shape == np.array(value).shape, (r, name)
                np.testing.assert_array_equal(got[r][name], np.array(value, dtype=np.float64), err_msg=f"{r}.{name}")
        assert np.allclose(got["all"]["mass"].sum(-1), 1.0) and (got["all"]["max_weight"] <= 1).all()
    seen = []
    stories.attention(file=TEXT, n_ctx=64, chunks=3, progress=lambda done, total: seen.append((done, total)))
    assert seen in ([(3, 3)], [(1, 3), (2, 3), (3, 3)])  # windows run in step, or one by one


def test_passkey_equals_the_cli():
    rope = os.path.join(ROOT, "models", "rope")
    want = cli_json("passkey", "-m", rope, "--lengths", "64,200", "--depths", "0,0.5,1", "--trials", "3", "-t", "1", "-q")
    got = pert.passkey(rope, [64, 200], depths=[0, 0.5, 1], trials=3)
    assert set(want) - set(got) == {"config", "set"}  # the CLI's flags, which Python passes to load()
    for key in got:
        assert got[key] == want[key], key
    seen = []
    pert.load(rope).passkey([64], depths=[0], trials=3, progress=lambda done, total: seen.append((done, total)))
    assert seen == [(1, 3), (2, 3), (3, 3)]


def test_ruler_equals_the_cli():
    rope = os.path.join(ROOT, "models", "rope")
    want = cli_json("ruler", "-m", rope, "--tasks", "niah_single_1,vt,kv,niah_multikey_2", "--lengths", "100,200",
                    "--depths", "0,1", "--trials", "2", "-t", "1", "-q")
    got = pert.ruler(rope, ["niah_single_1", "vt", "kv", "niah_multikey_2"], [100, 200], depths=[0, 1], trials=2)
    assert set(want) - set(got) == {"config", "set"}
    for key in got:
        if key != "cells":
            assert got[key] == want[key], key
    for a, b in zip(got["cells"], want["cells"]):  # a too-short length's reason: the keyword, the flag
        assert {k: v for k, v in a.items() if k != "skipped"} == {k: v for k, v in b.items() if k != "skipped"}
        assert ("skipped" in a) == ("skipped" in b)
        if "skipped" in a:
            at = f"at lengths {a['length']}: too short"
            assert at in a["skipped"] and at.replace("lengths", "--lengths") in b["skipped"]
    with pytest.raises(pert.Error, match="essay"):
        pert.ruler(rope, ["niah_single_2"], [128])


def test_progress_goes_to_sys_stderr(stories, capsys):
    stories.perplexity(file=TEXT, n_ctx=128, chunks=3, progress=True)
    assert len(pert.sweep(STORIES, 64, file=TEXT, chunks=1, progress=True)) == 1  # one model, one length
    err = capsys.readouterr().err
    assert "perplexity: 381/381 positions" in err and "3/3 windows" in err and "[1/1] " in err and "@64: PPL " in err


def test_sweep_records_equal_pert_sweep(tmp_path):
    if not {"rope", "learned"} <= set(FAMILY):
        pytest.skip("models/rope or models/learned is missing")
    models = [os.path.join(ROOT, "models", d) for d in ("rope", "learned")]
    logn = os.path.join(ROOT, "configs", "extend", "logn.json")
    records = pert.sweep(models, [64, 256], configs=[None, logn], file=TEXT, chunks=2, split_docs=True)
    cli("sweep", "-m", models[0], "-m", models[1], "--config", "plain", "--config", logn, "--lengths", "64,256",
        "-f", TEXT, "--chunks", "2", "--split-docs", "--out", str(tmp_path / "s.json"), "-q", "-t", "1")
    cells = json.load(open(tmp_path / "s.json"))["cells"]
    assert len(records) == len(cells) == 8
    by_key = {(c["model"], c["label"], c["length"]): c for c in cells}
    for r in records:
        c = by_key[(r["model"], r["label"], r["length"])]
        assert ("error" in r) == ("error" in c) == (r["model"] == models[1] and r["length"] == 256)
        if "error" in r:  # past the learned table: the same message, in each front end's words
            assert "set={'position.beyond': 'clamp'}" in r["error"] and "--set position.beyond=clamp" in c["error"]
            assert r["error"].replace("set={'position.beyond': 'clamp'}", "--set position.beyond=clamp") == c["error"]
        else:
            assert (r["ppl"], r["nll_by_position"]) == (c["ppl"], c["nll_by_position"])
    assert [r["index"] for r in records] == [c["index"] for c in cells] == list(range(8))
    # Sharded: each shard its cells (index % 3 == K - 1), merged the same records.
    shards = [pert.sweep(models, [64, 256], configs=[None, logn], file=TEXT, chunks=2, split_docs=True, shard=f"{k}/3")
              for k in (1, 2, 3)]
    assert [[r["index"] for r in part] for part in shards] == [[0, 3, 6], [1, 4, 7], [2, 5]]
    def untimed(rs):
        return [{k: v for k, v in r.items() if k not in ("seconds", "tokens_per_second")} for r in rs]
    assert untimed(pert.merge(shards[2], shards[0], shards[1])) == untimed(records)
    with pytest.raises(pert.Error, match=r"merge: the grid is not whole, 3 of its 8 cells missing \(indices 1, 4, 7\)"):
        pert.merge(shards[0], shards[2])
    assert [r["index"] for r in pert.merge(shards[0], shards[2], partial=True)] == [0, 2, 3, 5, 6]
    assert untimed(pert.merge(*(iter(p) for p in shards))) == untimed(records)  # generators: read once
    for bad in ("0/3", "4/3", "x", (1,), "1/0", (1.5, 2), (True, 2), "1.0/2"):
        with pytest.raises(pert.Error, match="shard: must be K/N"):
            pert.sweep(models, [64], file=TEXT, shard=bad)
    for bad in ([0], [64, 1], [2.5], [True], [1 << 25], ["64"]):
        with pytest.raises(pert.Error, match="lengths: each must be an integer from 2 to 16777216"):
            pert.sweep(models, bad, file=TEXT)
    # Shards of other grids or settings, and records that are not a sweep's, are refused.
    other = pert.sweep(models[:1], [64, 256], configs=[None, logn], file=TEXT, chunks=2, split_docs=True, shard="2/2")
    chunks = pert.sweep(models, [64, 256], configs=[None, logn], file=TEXT, chunks=3, split_docs=True, shard="2/3")
    for part in (other, chunks):
        with pytest.raises(pert.Error, match="different grids"):
            pert.merge(shards[0], part, shards[2])
    for record, what in (({"index": 0}, "not a record"), ({**records[0], "cells": -1}, "not a record"),
                         ([1, 2], "a dict expected"), ({**records[0], "grid": None}, "not a record")):
        with pytest.raises(pert.Error, match=what):
            pert.merge([record])
    huge = [{**records[0], "cells": 10 ** 12}]
    with pytest.raises(pert.Error, match=r"999999999999 of its 1000000000000 cells missing \(indices 1, 2, 3, 4, 5, 6, 7, 8, \.\.\.\)"):
        pert.merge(huge)


def test_merge_refuses_shards_of_grids_the_cli_would_refuse(tmp_path):
    """The grid's identity is the library's (pert/grid.hpp), as `pert sweep --merge` compares files:
    a text or config edited between two shards, or a model retrained in place, is another grid,
    while one model spelled two ways ("models/x" and "models/x/") is the same."""
    text, config = tmp_path / "text.txt", tmp_path / "c.json"
    text.write_text(open(TEXT).read()[:20000])
    config.write_text('{"rope_theta": 10000}')
    def shard(k, model=STORIES):
        return pert.sweep([model], [64, 128], configs=[config], file=text, chunks=1, shard=f"{k}/2")
    first = shard(1)
    assert [r["index"] for r in pert.merge(first, shard(2, STORIES + "/"))] == [0, 1]
    text.write_text(open(TEXT).read()[:20000] + "\nOne more line.\n")
    with pytest.raises(pert.Error, match="different grids"):
        pert.merge(first, shard(2))
    text.write_text(open(TEXT).read()[:20000])
    config.write_text('{"rope_theta": 20000}')
    with pytest.raises(pert.Error, match="different grids"):
        pert.merge(first, shard(2))


def test_positions_equal_the_cli(stories):
    want = cli_json("positions", "-m", STORIES, "--distance", "100")  # (no threads: one loop)
    got = stories.positions(distance=100)
    assert got.shape == (len(want["scores"]), 101)
    np.testing.assert_array_equal(got, np.array(want["scores"]))


def test_config_dict_set_and_file_are_one_override(stories, tmp_path):
    patch = {"rope_scaling": {"rope_type": "linear", "factor": 4.0}}
    (tmp_path / "linear.json").write_text(json.dumps(patch))
    ids = stories.tokenize("One day a bird flew", add_special=True)
    by_dict = pert.load(STORIES, config=patch)
    by_file = pert.load(STORIES, config=tmp_path / "linear.json")
    by_set = pert.load(STORIES, set={"rope_scaling": patch["rope_scaling"]})
    assert "linear" in by_dict.label and by_dict.config == by_file.config == by_set.config
    for m in (by_file, by_set):
        np.testing.assert_array_equal(m.logits(ids), by_dict.logits(ids))
    assert not np.allclose(by_dict.logits(ids), stories.logits(ids))
    assert stories.detokenize(stories.tokenize("A red ball.")) == "A red ball."


# --- errors --------------------------------------------------------------------------------------

def test_every_error_is_a_pert_error_naming_what_is_wrong(stories, tmp_path):
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "config.json").write_text("{ not json")
    no_tokenizer = tmp_path / "no_tokenizer"
    no_tokenizer.mkdir()
    for f in ("config.json", "model.safetensors"):
        os.symlink(os.path.join(STORIES, f), no_tokenizer / f)
    bad_patch = tmp_path / "patch.json"
    bad_patch.write_text("[1, 2]")
    cases = [
        (lambda: pert.load(tmp_path / "missing"), "missing"),
        (lambda: pert.load(broken), "config.json"),
        (lambda: pert.load(no_tokenizer), "tokenizer.json: missing"),
        (lambda: pert.load(STORIES, config=tmp_path / "nope.json"), "nope.json"),
        (lambda: pert.load(STORIES, config=bad_patch), "patch.json"),
        (lambda: pert.load(STORIES, config={"rope_scaling": {"rope_type": "warp"}}), "warp"),
        (lambda: pert.load(STORIES, config={"x": float("nan")}), "config: not JSON"),
        (lambda: pert.load(STORIES, set={"no_such_key": 1}), "no_such_key"),
        (lambda: pert.load(STORIES, dtype="f64"), "dtype"),
        (lambda: stories.logits([0, 512]), "token id 512"),
        (lambda: stories.logits([]), "no token ids"),
        (lambda: stories.logits("abc"), "got a string"),
        (lambda: stories.logits([1.5]), "integers"),
        (lambda: stories.logits([2 ** 70]), "outside the vocabulary"),
        (lambda: stories.logits(7), "token ids expected"),
        (lambda: stories.logits([1], cache_type="q4"), "q4"),
        (lambda: stories.detokenize([-1]), "token id -1"),
        (lambda: stories.session(n_ctx=4).eval([1] * 5), "context size 4"),
        (lambda: stories.session(n_ctx=8).eval([1], pos=3), "gap"),
        (lambda: stories.session().shift(0, 1), "context shift"),
        (lambda: stories.generate("Hi", temp=-1), "temp"),
        (lambda: stories.generate("Hi", n_ctx=2, n_predict=5, keep=-1), "a smaller keep"),
        (lambda: stories.perplexity(file=tmp_path / "none.txt"), "none.txt"),
        (lambda: stories.perplexity(text="too short", n_ctx=128), "fewer than one window"),
        (lambda: stories.perplexity(text="a", file=TEXT), "exactly one"),
        (lambda: stories.perplexity(text="a b c", mode="sideways"), "sideways"),
        (lambda: stories.perplexity(text="a b c", stride=8), "stride"),
        *[(lambda b=b: stories.perplexity(text="a b c", buckets=b), 'buckets: must be "log" or a count from 1 to 1048576')
          for b in ("lin", 0, True, 2.0, 10**30, None)],
        (lambda: stories.positions(layer=99), "layer"),
        (lambda: stories.positions(distance=10, query_pos=5), "distance"),
        (lambda: pert.sweep([STORIES], [64], configs=[None, None], text="x"), "labels"),
        (lambda: stories.passkey([20]), "lengths 20: too short for the key sentence"),
        (lambda: stories.passkey([64], depths=[1.5]), "depths must be in [0, 1]"),
        (lambda: stories.passkey([64], trials=0), "trials"),
        (lambda: stories.passkey([64], trials=10**9), "trials must be from 1 to 1048576"),
        (lambda: stories.ruler(["vt"], [128], trials=10**9), "trials must be from 1 to 1048576"),
        (lambda: stories.passkey([64], cache_type="q4"), "q4"),
    ]
    for call, what in cases:
        with pytest.raises(pert.Error) as e:
            call()
            print("did not raise:", what)
        assert what in str(e.value) and "\n" not in str(e.value), (what, str(e.value))
        # Python's words: keywords, never the CLI's flags, nor the library's `field` marks
        assert not re.search(r"(^|[\s(])--?[a-z]|`", str(e.value)), str(e.value)
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"caf\xe9 " * 100)
    with pytest.raises(pert.Error, match=r"bad\.txt: not valid UTF-8"):
        stories.perplexity(file=bad)
    with pytest.raises(pert.SchemeChangeError, match=r"config \{.*alibi.*\} would run it with alibi.*allow_scheme_change=True runs it anyway"):
        pert.load(STORIES, config={"position": {"type": "alibi"}})
    assert issubclass(pert.SchemeChangeError, pert.Error) and issubclass(pert.Error, Exception)


def test_errors_name_python_keywords_where_the_cli_names_flags():
    learned = pert.load(os.path.join(ROOT, "models", "learned"))
    with pytest.raises(pert.Error, match=r"learned position table \(128 positions\); give a context of at most 128, "
                                         r"or set=\{'position.beyond': 'clamp'\} to reuse the last one"):
        learned.logits([1] * 129)
    with pytest.raises(pert.Error, match=r"n_ctx 256 is past the .* pass n_ctx 128 or less, or "
                                         r"set=\{'position.beyond': 'clamp'\}"):
        learned.generate("Once", n_ctx=256)
    with pytest.raises(pert.Error, match=r"lengths 128: the prompt and its answer take 135 positions, .* give at "
                                         r"most 121, or set=\{'position.beyond': 'clamp'\} to reuse the last one"):
        learned.passkey([128], trials=1)
    r = learned.passkey([64, 128], trials=1, depths=[0.5])  # the length that can run runs; the other says why
    assert [c["accuracy"] is None for c in r["cells"]] == [False, True]
    assert re.search(r"lengths 128: the prompt and its answer take 135 positions, .* set=\{'position.beyond': "
                     r"'clamp'\} to reuse the last one", r["cells"][1]["skipped"]), r["cells"][1]["skipped"]


def test_a_scheme_change_warns_and_sweep_records_it(stories):
    with pytest.warns(UserWarning, match="trained with rope"):
        m = pert.load(STORIES, config={"position": {"type": "alibi"}}, allow_scheme_change=True)
    assert m.label.startswith("alibi")
    records = pert.sweep([STORIES], [64], configs=[{"position": {"type": "alibi"}}], text=open(TEXT).read(), chunks=1)
    assert records[0]["label"] == "config 0" and "allow_scheme_change=True" in records[0]["error"]


# --- the GIL and memory ----------------------------------------------------------------------------

def test_the_gil_is_released_while_pert_computes(stories):
    done = threading.Event()
    result = {}

    def work():
        result["r"] = stories.perplexity(file=TEXT, n_ctx=512, chunks=8)
        done.set()

    thread = threading.Thread(target=work)
    thread.start()
    ticks = 0
    while not done.is_set():  # only runs while the worker does not hold the GIL
        ticks += 1
        time.sleep(0.001)
    thread.join()
    assert result["r"]["windows"] == 8 and ticks >= 10


def refusals_while_busy(worker, touches, message, most=None):
    """Starts `worker` and, while it computes (the only time this thread runs: pert has released
    the GIL), calls each of `touches`, every one of which must succeed or raise pert.Error(message);
    returns how many raised (stopping at `most`), once the worker is done."""
    worker.start()
    refused = 0
    while worker.is_alive() and (most is None or refused < most):
        for touch in touches:
            try:
                touch()
            except pert.Error as e:
                assert str(e) == message
                refused += 1
        time.sleep(0.001)
    worker.join()
    return refused


def test_a_session_used_by_two_threads_at_once_is_an_error(stories):
    s = stories.session(n_ctx=4096)
    ids = (stories.tokenize("Once upon a time there was a big red dog.") * 400)[:4000]
    worker = threading.Thread(target=s.eval, args=(ids,), kwargs={"pos": 0})
    refused = refusals_while_busy(worker, (lambda: s.eval([1], pos=0), lambda: s.n_past),
                                  "session: in use by another thread")
    assert refused >= 2 and s.n_past == 4000


def test_a_generation_read_by_another_thread_while_it_runs_is_an_error(stories):
    g = stories.generate("Once upon a time", n_predict=3000, n_ctx=1024, ignore_eos=True, temp=0)
    pieces = []
    worker = threading.Thread(target=lambda: pieces.extend(g))
    refused = refusals_while_busy(worker, (lambda: g.tokens, lambda: g.result(), lambda: g.stop),
                                  "generation: in use by another thread", most=20)
    assert refused >= 1 and len(g.tokens) == 3000 and g.stop == "length"


def rss_bytes():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def test_a_thousand_loads_and_evals_do_not_grow(stories):
    ids = stories.tokenize("Once upon a time", add_special=True)

    def rounds(n):
        for _ in range(n):
            m = pert.load(STORIES)
            s = m.session(n_ctx=16)
            del m  # the session keeps the model alive
            s.eval(ids)
            s.eval(ids[:1])
            g = stories.generate("Hi", n_predict=2, temp=0)
            "".join(g)

    rounds(100)  # allocator pools warmed up
    before = rss_bytes()
    refs = sys.getrefcount(stories)
    rounds(1000)
    grown = rss_bytes() - before
    assert sys.getrefcount(stories) == refs
    assert grown < 8 << 20, f"RSS grew by {grown / 2**20:.1f} MiB over 1000 rounds"


def test_thread_settings_are_the_clis():
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS", "GOMP_SPINCOUNT", "OMP_WAIT_POLICY")}
    code = "import os, pert; print(os.environ.get('GOMP_SPINCOUNT'), pert.threads())"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout.split()
    assert out[0] == "10000" and 1 <= int(out[1]) <= os.cpu_count()
    env["OMP_NUM_THREADS"] = "3"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout.split()
    assert out[1] == "3"


def test_the_readme_snippet_runs(capsys):
    readme = open(os.path.join(ROOT, "README.md"), encoding="utf-8").read()
    block = readme.split("```python\n")[1].split("```")[0]
    cwd = os.getcwd()
    os.chdir(ROOT)
    try:
        scope = {}
        exec(block, scope)
    finally:
        os.chdir(cwd)
    assert scope["r"]["ppl"] > 1 and capsys.readouterr().out.startswith(str(scope["r"]["ppl"]))


def test_the_docs_example_runs(tmp_path, capsys):
    page = open(os.path.join(ROOT, "docs", "python.md"), encoding="utf-8").read()
    block = page.split("<!-- python-example")[1].split("```python\n")[1].split("```")[0]
    plot = tmp_path / "nll_by_position.png"
    import matplotlib
    matplotlib.use("Agg")
    cwd = os.getcwd()
    os.chdir(ROOT)
    try:
        scope = {}
        exec(block.replace('"build/nll_by_position.png"', repr(str(plot))), scope)
    finally:
        os.chdir(cwd)
    assert plot.stat().st_size > 10_000
    assert scope["logits"].shape == (len(scope["ids"]), scope["rope"].vocab_size) and scope["story"]
    assert scope["yarn"].label != scope["rope"].label
    printed = capsys.readouterr().out  # what a newcomer sees: both PPLs, the next token, the story
    assert printed.count(" at 512") == 2 and "next token after the prompt:" in printed and scope["story"] in printed


# --- hostile calls: an error, never a crash of the interpreter (issue: a notebook never dies) -----

def memory_available():
    with open("/proc/meminfo") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith("MemAvailable:"))


def test_arrays_that_are_not_one_dimensional_are_refused_naming_their_shape(stories):
    s = stories.session(n_ctx=16)
    too_many = memory_available() // (4 * stories.vocab_size) * 3 // 2  # ids whose logits need 1.5x the memory left
    cases = [
        (lambda: stories.logits(np.array([[1, 2], [3, 4]])), "logits: ids: a 1-D sequence of token ids expected, "
                                                               "got an array of shape (2, 2)"),
        (lambda: stories.logits(np.array([[1], [2], [3]])), "logits: ids: a 1-D sequence of token ids expected, "
                                                              "got an array of shape (3, 1)"),
        (lambda: stories.perplexity(tokens=np.ones((50, 2), dtype=np.int64)), "perplexity: tokens: a 1-D sequence of "
                                                                                "token ids expected, got an array of shape (50, 2)"),
        (lambda: stories.logits(np.array(5)), "shape ()"),
        (lambda: s.eval(np.zeros((1, 1), dtype=np.int32)), "eval: ids: a 1-D sequence"),
        (lambda: stories.detokenize(np.zeros((2, 2), dtype=np.int32)), "detokenize: ids: a 1-D sequence"),
        (lambda: stories.logits([np.array([1, 2])]), "token ids must be integers"),
        (lambda: stories.logits([[1, 2]]), "token ids must be integers"),
        (lambda: stories.logits(np.array([1.0, 2.0])), "token ids must be integers"),
        (lambda: stories.logits(np.array([2**64 - 1], dtype=np.uint64)), "token id 18446744073709551615 is outside"),
        (lambda: stories.logits(np.array([-3, 1])), "token id -3 is outside"),
        (lambda: stories.logits(np.ones(too_many, dtype=np.int32)), f"logits: the array of {too_many} x 512 logits "
                                                                      "needs"),  # refused before numpy allocates it
        (lambda: s.eval(np.ones(17, dtype=np.int64)), "eval: 17 ids exceed the context size 16 of this session"),
    ]
    for call, what in cases:
        with pytest.raises(pert.Error) as e:
            call()
        assert what in str(e.value), (what, str(e.value))
    assert stories.logits(np.array([1, 2], dtype=np.uint16)).shape == (2, stories.vocab_size)


def test_a_shift_past_the_cache_is_an_error_whatever_its_numbers(stories):
    s = stories.session(n_ctx=16)
    s.eval([1, 2, 3, 4])
    for keep, discard in [(2**31 - 1, 1), (1, 2**31 - 1), (2**31 - 1, 2**31 - 1), (-1, 1), (0, 0), (3, 2)]:
        with pytest.raises(pert.Error, match=r"context shift: cannot drop"):
            s.shift(keep, discard)
    assert s.n_past == 4 and s.shift(1, 3) and s.n_past == 1


def test_objects_pert_did_not_make_are_a_type_error():
    import copy
    import pickle
    for cls, maker in [(pert.Model, "pert.load"), (pert.Session, "Model.session"), (pert.Generation, "Model.generate")]:
        with pytest.raises(TypeError, match=f"cannot be made directly; use {maker}"):
            cls.__new__(cls)
        with pytest.raises(TypeError):
            cls()
        sub = type("Sub", (cls,), {})
        with pytest.raises(TypeError):
            sub.__new__(sub)
    m = pert.load(os.path.join(ROOT, "models", "rope"))
    for call in (lambda: copy.copy(m), lambda: pickle.dumps(m)):
        with pytest.raises(TypeError):
            call()


def test_thread_counts_are_bounded_as_the_clis():
    try:
        for bad in (100000, 1025, -1):
            with pytest.raises(pert.Error, match=r"threads: must be from 0 \(the default: OMP_NUM_THREADS, else the cores not busy now\) to 1024, got"):
                pert.set_threads(bad)
        pert.set_threads(1024)
        assert pert.threads() == 1024
    finally:
        pert.set_threads(1)


def interrupted_within(call, after=0.5):
    """Seconds from a SIGINT sent `after` seconds into call() until it raised KeyboardInterrupt."""
    sent = []
    timer = threading.Timer(after, lambda: (sent.append(time.monotonic()), os.kill(os.getpid(), signal.SIGINT)))
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            call()
    finally:
        timer.cancel()
    assert sent, "the call ended before the signal"
    return time.monotonic() - sent[0]


def test_ctrl_c_stops_every_long_call_within_a_second(stories):
    rope = pert.load(os.path.join(ROOT, "models", "rope"))
    long_ids = rope.tokenize(open(TEXT, encoding="utf-8").read())[:16_000]  # ~50 s to prefill on one thread
    calls = {
        "perplexity, sliding, stride 1": lambda: stories.perplexity(file=TEXT, mode="sliding", stride=1, n_ctx=256),
        "perplexity of tokens": lambda: rope.perplexity(tokens=long_ids, n_ctx=8192),
        "logits of a long text": lambda: rope.logits(long_ids),
        "a session's eval": lambda: rope.session(n_ctx=len(long_ids)).eval(long_ids),
        "tokenize a long text": lambda: rope.tokenize(open(TEXT, encoding="utf-8").read() * 1000),
        "generate": lambda: "".join(stories.generate("Once", n_predict=10**6, n_ctx=64, ignore_eos=True)),
        "sweep": lambda: pert.sweep([STORIES], [256], file=TEXT, mode="sliding", stride=1),
        "passkey": lambda: rope.passkey([4096] * 20, trials=10),
    }
    for what, call in calls.items():
        took = interrupted_within(call)
        assert took < 1.0, f"{what}: KeyboardInterrupt {took:.2f} s after Ctrl-C"
    s = rope.session(n_ctx=len(long_ids))  # a session stopped mid-prefill keeps what it finished
    interrupted_within(lambda: s.eval(long_ids))
    assert 0 <= s.n_past < len(long_ids)
    s.eval(long_ids[s.n_past:s.n_past + 8])


def test_characters_the_tokenizer_cannot_encode_are_dropped_with_a_warning(tmp_path):
    import shutil
    for f in ("config.json", "model.safetensors"):
        shutil.copy(os.path.join(ROOT, "models", "rope", f), tmp_path / f)
    tok = json.load(open(os.path.join(ROOT, "models", "rope", "tokenizer.json"), encoding="utf-8"))
    tok["model"]["byte_fallback"] = False  # no <0xNN> pieces, no <unk>: HF leaves such a character out
    tok["model"]["unk_token"] = None
    (tmp_path / "tokenizer.json").write_text(json.dumps(tok), encoding="utf-8")
    m = pert.load(tmp_path)
    odd = "Once upon a time \u2603 there was a \u265e girl."
    with pytest.warns(UserWarning, match=r"^text: 2 characters that the tokenizer cannot encode .* were left out"):
        ids = m.tokenize(odd)
    assert "\u2603" not in m.detokenize(ids) and "girl" in m.detokenize(ids)
    with pytest.warns(UserWarning, match=r"^text: 40 characters"):
        m.perplexity(text=" ".join([odd] * 20), n_ctx=32)
    with pytest.warns(UserWarning, match=r"^prompt: 1 character that"):
        next(iter(m.generate("\u2603 Once", n_predict=1)))


def test_an_interpreter_without_numpy_is_told_at_import():
    # Arrays come back as numpy's: without it pert used to import, load, and fail at the first logits.
    code = "import sys; sys.modules['numpy'] = None; import pert"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode != 0
    last = out.stderr.strip().splitlines()[-1]
    assert last.startswith("ImportError: pert needs numpy, which this Python (") and "/usr/bin/python3" in last, last


def test_threads_past_the_cores_not_busy_warn_once_as_the_cli():
    cores = len(os.sched_getaffinity(0))
    spinners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(cores)]
    try:
        time.sleep(0.5)  # every core busy
        code = ("import warnings, pert\n"
                "with warnings.catch_warnings(record=True) as w:\n"
                "    warnings.simplefilter('always')\n"
                "    pert.set_threads(1); pert.set_threads(2); pert.set_threads(3)\n"
                "print(len(w)); print(w[0].message if w else '')\n")
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    finally:
        for p in spinners:
            p.kill()
            p.wait()
    count, message = out.stdout.splitlines()[:2]
    assert out.returncode == 0 and count == "1", out.stdout + out.stderr  # once, not per call; not for 1
    assert message.startswith("2 threads on 1 core not busy now") and "set_threads(0) in Python" in message, message
