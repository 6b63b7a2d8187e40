"""A GGUF file in every front end, as its model directory: the positional A/B (--set, --config,
the scheme guard), perplexity, sweep, pass-key, tokenize, inspect and the Python module give
what the same weights give from safetensors (the F32 file: equal; a quantized one: runs and
says what it is). stories260K from build/models (tools/setup.sh), written by tools/convert/to_gguf.py;
and the family's own models/rope (its plain `"position": {"type": "rope"}` block), refused schemes named.

    PERT_BINARY=build/pert PERT_BUILD_DIR=build /usr/bin/python3 -m pytest tests/integration/gguf_cli_test.py
"""
import json
import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tools"))
from convert import to_gguf  # noqa: E402

PERT = os.environ.get("PERT_BINARY", os.path.join(ROOT, "build", "pert"))
MODEL = os.path.join(ROOT, "build", "models", "stories260K")
TEXT = os.path.join(ROOT, "build", "data", "tinystories_heldout.txt")
LINEAR = '{"rope_type": "linear", "factor": 2.0}'


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    if not os.path.isdir(MODEL):
        pytest.skip(f"{MODEL} missing (bash tools/setup.sh converts it)")
    d = tmp_path_factory.mktemp("gguf")
    out = {}
    for kind in ("F32", "Q8_0"):
        out[kind] = str(d / f"stories260K-{kind}.gguf")
        to_gguf.convert(MODEL, out[kind], kind)
    text = d / "text.txt"
    with open(TEXT, encoding="utf-8") as f:
        text.write_text(f.read()[:6000], encoding="utf-8")  # ~3,000 tokens of stories260K: a dozen windows of 256
    out["text"] = str(text)
    out["dir"] = d
    return out


def pert(*args, check=True):
    r = subprocess.run([PERT, *args], capture_output=True, text=True)
    if check and r.returncode != 0:
        raise AssertionError(f"pert {' '.join(args)}: {r.stderr}")
    return r


def ppl(model, text, *flags):
    r = pert("perplexity", "-m", model, "-f", text, "-c", "256", "-q", "--json", *flags)
    return json.loads(r.stdout)


def test_perplexity_and_the_ab_equal_safetensors(files):
    for flags in ((), ("--set", f"rope_scaling={LINEAR}"), ("--set", "rope_theta=20000")):
        a, b = ppl(MODEL, files["text"], *flags), ppl(files["F32"], files["text"], *flags)
        assert abs(a["ppl"] - b["ppl"]) <= 1e-4 * a["ppl"], (flags, a["ppl"], b["ppl"])
    assert b["dtype"] == "auto" and a["dtype"] == "f32"
    plain = ppl(files["F32"], files["text"])
    assert plain["ppl"] != b["ppl"]  # the override changed something


def test_scheme_guard_names_the_file(files):
    r = pert("perplexity", "-m", files["F32"], "-f", files["text"], "-c", "64", "--set", 'position={"type": "alibi"}',
             check=False)
    assert r.returncode == 1
    line = r.stderr.strip()
    assert "\n" not in line and files["F32"] in line and "trained with rope" in line, line
    pert("perplexity", "-m", files["F32"], "-f", files["text"], "-c", "64", "-q", "--set", 'position={"type": "alibi"}',
         "--allow-scheme-change")


def test_generate_tokenize_and_inspect(files):
    gen = [json.loads(pert("generate", "-m", m, "-p", "Once upon a time", "-n", "12", "--temp", "0", "--json").stdout)
           for m in (MODEL, files["F32"])]
    assert gen[0]["tokens"] == gen[1]["tokens"] and gen[0]["prompt_tokens"] == gen[1]["prompt_tokens"]
    tok = [pert("tokenize", "-m", m, "-p", "Hello there, Lily!", "--json").stdout for m in (MODEL, files["F32"])]
    assert tok[0] == tok[1]
    info = json.loads(pert("inspect", files["Q8_0"], "--json").stdout)
    assert info["gguf"]["metadata"]["general.architecture"] == "llama"
    assert info["gguf"]["config_json"]["num_hidden_layers"] == 5
    assert {t["dtype"] for t in info["tensors"]} >= {"Q8_0", "F32"}
    assert info["memory"]["weight_bytes"] < os.path.getsize(files["Q8_0"])


def test_sweep_and_passkey_run_on_a_gguf_file(files):
    out = str(files["dir"] / "sweep.json")
    pert("sweep", "-m", files["Q8_0"], "-m", MODEL, "-f", files["text"], "--lengths", "64,128",
         "--config", "plain", "-q", "--out", out)
    with open(out) as f:
        sweep = json.load(f)
    assert sweep["settings"]["dtype"] == "auto"
    assert {c["model"] for c in sweep["cells"]} == {files["Q8_0"], MODEL}
    assert all("ppl" in c for c in sweep["cells"])
    r = json.loads(pert("passkey", "-m", files["Q8_0"], "--lengths", "128", "--trials", "1", "-q", "--json").stdout)
    assert r["dtype"] == "auto" and r["cells"]


def test_dtype_converts_a_gguf_model_like_a_directory(files):
    a = ppl(MODEL, files["text"], "--dtype", "q8")
    b = ppl(files["F32"], files["text"], "--dtype", "q8")
    assert abs(a["ppl"] - b["ppl"]) <= 1e-4 * a["ppl"]
    q4 = ppl(MODEL, files["text"], "--dtype", "q4_0")
    assert q4["dtype"] == "q4_0" and abs(q4["ppl"] / a["ppl"] - 1) < 0.2


def test_python_module_loads_a_gguf_file(files):
    build = os.environ.get("PERT_BUILD_DIR", os.path.join(ROOT, "build"))
    if not os.path.isdir(os.path.join(build, "python", "pert")):
        pytest.skip("no Python module in this build (the sanitizer build has none)")
    code = ("import pert, numpy as np, sys\n"
            "a = pert.load(sys.argv[1]); b = pert.load(sys.argv[2])\n"
            "ids = a.tokenize('Once upon a time')\n"
            "assert b.tokenize('Once upon a time') == ids\n"
            "d = np.abs(a.logits(ids) - b.logits(ids)).max()\n"
            "assert d < 1e-4, d\n"
            "assert b.dtype == 'auto' and a.dtype == 'f32', (a.dtype, b.dtype)\n")
    env = dict(os.environ, PYTHONPATH=os.path.join(build, "python"))
    r = subprocess.run(["/usr/bin/python3", "-c", code, MODEL, files["F32"]], capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr


def test_a_broken_file_is_one_line_naming_it(files):
    with open(files["Q8_0"], "rb") as f:
        whole = f.read()
    cases = {"truncated.gguf": whole[: len(whole) // 2], "header.gguf": whole[:40],
             "no_arch.gguf": whole.replace(b"general.architecture", b"general.architecturX")}
    for name, data in cases.items():
        path = files["dir"] / name
        path.write_bytes(data)
        for args in (("inspect", str(path)), ("generate", "-m", str(path), "-p", "hi", "-n", "1")):
            r = pert(*args, check=False)
            lines = r.stderr.strip().split("\n")
            assert r.returncode == 1 and len(lines) == 1 and str(path) in lines[0], (name, args, r.stderr)


def test_the_familys_rope_model_converts_and_others_are_refused(files):
    """models/rope's `"position": {"type": "rope"}` is plain RoPE: its GGUF gives the directory's
    perplexity; a scheme GGUF cannot hold (ALiBi, xPos) is one line naming the block."""
    family = os.path.join(ROOT, "models")
    out = str(files["dir"] / "rope-F32.gguf")
    to_gguf.convert(os.path.join(family, "rope"), out, "F32")
    a, b = ppl(os.path.join(family, "rope"), files["text"]), ppl(out, files["text"])
    assert abs(a["ppl"] - b["ppl"]) <= 1e-6 * a["ppl"], (a["ppl"], b["ppl"])
    for name, what in (("alibi", "(alibi)"), ("xpos", "(rope with xpos)")):
        r = subprocess.run(["/usr/bin/python3", os.path.join(ROOT, "tools", "convert", "to_gguf.py"),
                            os.path.join(family, name), str(files["dir"] / f"{name}.gguf")], capture_output=True, text=True)
        line = r.stderr.strip()
        assert r.returncode != 0 and "\n" not in line and f"\"position\" block {what} has no GGUF form" in line, line
