#!/usr/bin/env python3
"""Tokenizer acceptance test: pert's tokenizer over tokenizer.json files written by
tools/convert/tokenizer_json.py, against SentencePiece and llama2.c, line by line.

    tokenizer_test.py PERT_TOKENIZE     # the C++ harness (tests/helpers/pert_tokenize.cpp)
    tokenizer_test.py --python          # this file's own BPE over the same tokenizer.json

PERT_TOKENIZE TOKENIZER_JSON TEXT_FILE OUT_FILE encodes each line of TEXT_FILE (split on "\\n"
only) and writes per line: the ids (no BOS/EOS) joined by spaces, a TAB, "ok" when
decode(encode(line)) == line else "roundtrip-mismatch"; or "error" for a line that is not
valid UTF-8. `--python` stands in for it with PyBPE below, which checks the JSON itself and
spells out the algorithm the C++ side implements.

Parts (each must match exactly; exit 1 on any mismatch):
  llama2-32k  tokenizer.json from ../shared's Llama-2 tokenizer.model (--spm), against
              sentencepiece's sp.encode(line) on every line of tinystories_val.txt, every line of
              wikitext-2.test.tokens.txt and EDGE_CASES; a line must round-trip exactly when
              SentencePiece's does (all but those holding a literal "▁"), and invalid UTF-8 must
              give "error".
  stories260K tokenizer.json from the llama2.c tok512.bin (--llama2c), against
              tools/convert/llama2c_tokenizer.py's encode() (run.c's algorithm; quadratic, hence only
              the first 2000 lines of tinystories_val.txt).
  and: the --llama2c export of the same Llama-2 vocabulary (tokenizer.bin) must give the very
  same tokenizer.json as the SentencePiece model.

SentencePiece behaviour being matched (Llama-2 model: normalizer "identity", add_dummy_prefix,
no remove_extra_whitespaces, byte_fallback; split_digits and split_by_whitespace only shape
training: the BPE encoder merges over the whole line):
  - "" -> []. Other text gets one "▁" in front and every " " becomes "▁"; nothing else changes
    (no NFKC: "ﬁ", full-width letters, decomposed accents, "\\r", U+00A0 stay as they are).
  - each character is a symbol; a character that is no piece becomes its UTF-8 bytes as <0xNN>
    tokens (tab, newline, emoji); byte tokens and <unk>/<s>/</s> never merge, so the text "<s>"
    is "▁<", "s", ">".
  - then the adjacent pair whose concatenation is a piece with the highest score is merged,
    repeatedly, the leftmost on ties. The whitespace-only pieces ("▁" and "▁▁" ... 16 × "▁") all
    score -1e9, so they merge last, left to right, after "▁word" pieces took their "▁":
    " In" -> "▁", "▁In"; "a" + 20 spaces + "b" -> "▁a", 16 × "▁", "▁▁▁", "▁b"; " " -> "▁▁".
  - a literal "▁" in the text is a space to SentencePiece and decodes as " ": such lines do not
    round-trip (in SentencePiece either), and that is what is expected of them.
  - HF's rank-ordered merges (score, then longer left part, then longer right part, then
    generation order) reproduce all of this.
"""
import heapq
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tools"))
from convert import llama2c_tokenizer  # noqa: E402
from convert import tokenizer_json  # noqa: E402

SHARED = os.path.join(HERE, "..", "..", "..", "shared", "data")
LLAMA_SPM = os.path.join(SHARED, "tokenizers", "llama2-32k", "tokenizer.model")
LLAMA_BIN = os.path.join(SHARED, "tokenizers", "llama2-32k", "tokenizer.bin")
STORIES_BIN = os.path.join(SHARED, "models", "stories260K", "tok512.bin")
TINYSTORIES = os.path.join(SHARED, "text", "tinystories_val.txt")
WIKITEXT = os.path.join(SHARED, "text", "wikitext-2.test.tokens.txt")
LLAMA2C_LINES = 2000
SPIECE = "\u2581"


def _long_line():
    unit = "The quick brown fox, 12345 naïve café 日本語 😀  jumps\tover   the lazy dog. "
    return (unit * (20000 // len(unit) + 1))[:20000]


# (text or invalid bytes). Lines cannot hold "\n": the harness splits on it.
EDGE_CASES = [
    "", " ", "  ", " " * 16, " " * 17, " " * 40, "   leading", "trailing  ", "multiple   spaces",
    "a" + " " * 20 + "b", " a b ", "\ttabs\tand", "\t", "tab\t\tdouble", "carriage\rreturn", "\r",
    "😀🎉", "👨\u200d👩\u200d👧", "\U0010ffff", "日本語の文章", "naïve café", "nai\u0308ve", "\u0301",
    "\u0301x", "x\u00a0y", "\u3000full\u3000width\u3000", "Ｆｕｌｌｗｉｄｔｈ", "ﬁ ligature", "€ Ω ß",
    "Привет мир", "مرحبا بالعالم", "\ufeffBOM", "\x00nul", "\x7f\x1b[0m", "<s>", "</s>", "<unk>",
    "<s>hello</s>", "<0x41>", "▁", "a ▁ b", "12345", "3.14159 and 2,000,000", "Hello world",
    "don't stop", "e-mail@example.com", "@-@", "a" * 300, "ab" * 2000, _long_line(),
    b"\xff", b"abc\xc3", b"\xc0\xaf", b"\xed\xa0\x80", b"ok\x80ok",
]


class PyBPE:
    """Encoder/decoder over a tokenizer.json of the kind tokenizer_json.py writes, as HF's
    tokenizers runs it, minus the added-token split (text "<s>" stays text, as in SentencePiece):
      normalize: "" -> ""; else "▁" + text with " " -> "▁"   (Prepend, Replace)
      symbols:   one per character; a character not in the vocabulary -> its UTF-8 bytes as
                 <0xNN> tokens (byte_fallback; <unk>, fused, only if a byte token is missing)
      merge:     while some adjacent pair (a, b) is in `merges`, merge the one with the lowest
                 rank (the earliest in the list), the leftmost among equal ranks, into a+b.
                 A heap of (rank, left position) over a linked list of symbols; entries
                 made stale by a merge are skipped when popped. O(n log n).
      decode:    pieces with "▁" -> " ", runs of <0xNN> -> bytes (UTF-8, invalid -> U+FFFD),
                 special tokens dropped, one leading " " stripped."""

    def __init__(self, path):
        with open(path, encoding="utf-8") as f:
            j = json.load(f)
        m = j["model"]
        assert m["type"] == "BPE" and m["byte_fallback"] and m["dropout"] is None, m["type"]
        assert j["pre_tokenizer"] is None
        norms = j["normalizer"]["normalizers"]
        assert norms == [{"type": "Prepend", "prepend": SPIECE},
                         {"type": "Replace", "pattern": {"String": " "}, "content": SPIECE}], norms
        self.vocab = m["vocab"]
        self.pieces = [None] * len(self.vocab)
        for p, i in self.vocab.items():
            self.pieces[i] = p
        assert None not in self.pieces, "vocabulary ids are not 0..n-1"
        self.merges = {}  # (left id, right id) -> (rank, merged id)
        for rank, mg in enumerate(m["merges"]):
            left, right = mg.split(" ") if isinstance(mg, str) else mg
            key = (self.vocab[left], self.vocab[right])
            if key not in self.merges:
                self.merges[key] = (rank, self.vocab[left + right])
        self.byte_ids = [self.vocab.get(f"<0x{b:02X}>") for b in range(256)]
        self.byte_of = {i: b for b, i in enumerate(self.byte_ids) if i is not None}
        self.unk = self.vocab[m["unk_token"]]
        self.special = {t["id"] for t in j["added_tokens"] if t["special"]}

    def encode(self, text):
        if not text:
            return []
        vocab, byte_ids = self.vocab, self.byte_ids
        syms = []
        for ch in SPIECE + text.replace(" ", SPIECE):
            i = vocab.get(ch)
            if i is not None:
                syms.append(i)
                continue
            bs = [byte_ids[b] for b in ch.encode("utf-8")]
            if None not in bs:
                syms.extend(bs)
            elif not syms or syms[-1] != self.unk:  # fuse_unk
                syms.append(self.unk)
        n = len(syms)
        nxt = list(range(1, n)) + [-1]
        prev = list(range(-1, n - 1))
        merges = self.merges
        heap = []
        for i in range(n - 1):
            mg = merges.get((syms[i], syms[i + 1]))
            if mg is not None:
                heap.append((mg[0], i, syms[i], syms[i + 1]))
        heapq.heapify(heap)
        while heap:
            _, i, left, right = heapq.heappop(heap)
            j = nxt[i]
            if syms[i] != left or j < 0 or syms[j] != right:
                continue  # stale: one side has been merged since
            new = merges[(left, right)][1]
            syms[i], syms[j] = new, -1
            k = nxt[j]
            nxt[i] = k
            if k >= 0:
                prev[k] = i
                mg = merges.get((new, syms[k]))
                if mg is not None:
                    heapq.heappush(heap, (mg[0], i, new, syms[k]))
            p = prev[i]
            if p >= 0:
                mg = merges.get((syms[p], new))
                if mg is not None:
                    heapq.heappush(heap, (mg[0], p, syms[p], new))
        return [s for s in syms if s >= 0]

    def decode(self, ids):
        out, pending = [], bytearray()
        for i in ids:
            b = self.byte_of.get(i)
            if b is not None:
                pending.append(b)
                continue
            if pending:
                out.append(pending.decode("utf-8", errors="replace"))
                pending = bytearray()
            if i not in self.special:
                out.append(self.pieces[i].replace(SPIECE, " "))
        if pending:
            out.append(pending.decode("utf-8", errors="replace"))
        text = "".join(out)
        return text[1:] if text.startswith(" ") else text


def as_bytes(line):
    return line if isinstance(line, bytes) else line.encode("utf-8")


def run_python(tok_json, lines, _tmp):
    bpe = PyBPE(tok_json)
    out = []
    for line in lines:
        try:
            text = as_bytes(line).decode("utf-8")
        except UnicodeDecodeError:
            out.append((None, "error"))
            continue
        ids = bpe.encode(text)
        out.append((ids, "ok" if bpe.decode(ids) == text else "roundtrip-mismatch"))
    return out


def run_harness(binary, tok_json, lines, tmp):
    text_path, out_path = os.path.join(tmp, "lines.txt"), os.path.join(tmp, "out.txt")
    with open(text_path, "wb") as f:
        f.write(b"\n".join(as_bytes(line) for line in lines))
    r = subprocess.run([binary, tok_json, text_path, out_path], capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"{binary} failed (exit {r.returncode}): {r.stderr.strip()}")
    with open(out_path, encoding="utf-8") as f:
        rows = f.read().split("\n")
    if rows and rows[-1] == "":
        rows.pop()
    if len(rows) != len(lines):
        sys.exit(f"{binary}: {len(rows)} output lines for {len(lines)} input lines")
    out = []
    for row in rows:
        if row == "error":
            out.append((None, "error"))
            continue
        ids, _, status = row.partition("\t")
        out.append(([int(t) for t in ids.split()], status))
    return out


class Report:
    def __init__(self):
        self.failed = False

    def compare(self, name, lines, expected, got, pieces, seconds):
        """expected/got: [(ids or None, status)]."""
        bad = [k for k, (e, g) in enumerate(zip(expected, got)) if e != g]
        n_tok = sum(len(e[0]) for e in expected if e[0] is not None)
        print(f"{name}: {len(lines)} lines, {n_tok} tokens, {len(bad)} mismatches ({seconds:.2f} s)")
        for k in bad[:5]:
            (e_ids, e_st), (g_ids, g_st) = expected[k], got[k]
            shown = repr(lines[k])
            print(f"  line {k + 1}: {shown[:120]}{'...' if len(shown) > 120 else ''}")
            if e_ids != g_ids:
                e_ids, g_ids = e_ids or [], g_ids or []
                at = next((i for i, (a, b) in enumerate(zip(e_ids, g_ids)) if a != b), min(len(e_ids), len(g_ids)))
                lo = max(0, at - 3)

                def show(ids):
                    return " ".join(repr(pieces[i]) if 0 <= i < len(pieces) else f"#{i}" for i in ids[lo:at + 5])
                print(f"    first difference at token {at}:")
                print(f"      expected … {show(e_ids)}\n      got      … {show(g_ids)}")
            if e_st != g_st:
                print(f"    status: expected {e_st}, got {g_st}")
        if bad:
            self.failed = True


def read_lines(path, limit=None):
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return lines[:limit] if limit else lines


def main():
    args = sys.argv[1:]
    if len(args) != 1:
        sys.exit(__doc__.split("\n\n")[1])
    runner = run_python if args[0] == "--python" else (lambda *a: run_harness(args[0], *a))
    import sentencepiece as spm
    report = Report()
    with tempfile.TemporaryDirectory() as tmp:
        # The tokenizer.json files.
        t0 = time.perf_counter()
        llama_json, llama_bin_json, stories_json = (os.path.join(tmp, n) for n in
                                                    ("llama.json", "llama_bin.json", "stories.json"))
        tokenizer_json.write(tokenizer_json.from_spm(LLAMA_SPM), llama_json)
        tokenizer_json.write(tokenizer_json.from_llama2c(LLAMA_BIN), llama_bin_json)
        tokenizer_json.write(tokenizer_json.from_llama2c(STORIES_BIN), stories_json)
        with open(llama_json, "rb") as a, open(llama_bin_json, "rb") as b:
            same = a.read() == b.read()
        print(f"tokenizer.json written for llama2-32k (--spm and --llama2c: "
              f"{'identical' if same else 'DIFFERENT'}) and stories260K ({time.perf_counter() - t0:.2f} s)")
        report.failed |= not same

        # llama2-32k against SentencePiece.
        sp = spm.SentencePieceProcessor(model_file=LLAMA_SPM)
        pieces = [sp.id_to_piece(i) for i in range(sp.get_piece_size())]
        sets = [("tinystories_val.txt", read_lines(TINYSTORIES)), ("wikitext-2.test.tokens.txt", read_lines(WIKITEXT)),
                ("edge cases", EDGE_CASES)]
        for name, lines in sets:
            t0 = time.perf_counter()
            expected = []
            for line in lines:
                if isinstance(line, bytes):
                    try:
                        line = line.decode("utf-8")
                    except UnicodeDecodeError:
                        expected.append((None, "error"))
                        continue
                ids = sp.encode(line)
                expected.append((ids, "ok" if sp.decode(ids) == line else "roundtrip-mismatch"))
            t_ref = time.perf_counter() - t0
            t0 = time.perf_counter()
            got = runner(llama_json, lines, tmp)
            report.compare(f"llama2-32k vs sentencepiece, {name}", lines, expected, got, pieces,
                           time.perf_counter() - t0)
            print(f"  (sentencepiece: {t_ref:.2f} s)")

        # stories260K against llama2.c's encoder.
        raw, scores = llama2c_tokenizer.read_tokenizer_bin(STORIES_BIN)
        pieces = [p.text for p in tokenizer_json.pieces_from_llama2c(STORIES_BIN)]
        lines = read_lines(TINYSTORIES, LLAMA2C_LINES)
        t0 = time.perf_counter()
        expected = [(llama2c_tokenizer.encode(line, raw, scores, bos=False),
                     "roundtrip-mismatch" if SPIECE in line else "ok") for line in lines]
        t_ref = time.perf_counter() - t0
        t0 = time.perf_counter()
        got = runner(stories_json, lines, tmp)
        report.compare(f"stories260K vs llama2.c encode, first {LLAMA2C_LINES} lines of tinystories_val.txt",
                       lines, expected, got, pieces, time.perf_counter() - t0)
        print(f"  (llama2.c encode: {t_ref:.2f} s)")
    print("FAILED" if report.failed else "all tokenizations match")
    return 1 if report.failed else 0


if __name__ == "__main__":
    sys.exit(main())
