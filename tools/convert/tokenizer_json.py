#!/usr/bin/env python3
"""Writes a HuggingFace `tokenizer.json` for a llama-style SentencePiece-BPE vocabulary, in the
form transformers' LlamaConverter (convert_slow_tokenizer.py, legacy Llama-2 style) produces.

    tokenizer_json.py (--llama2c TOKENIZER.bin | --spm TOKENIZER.model) OUT.json

Sources:
  --llama2c  a llama2.c `tokenizer.bin` (int32 max_token_length, then per id: float32 score,
             int32 byte length, bytes). Ids 0/1/2 are <unk>, <s>, </s> (stored as "<unk>",
             "\\n<s>\\n", "\\n</s>\\n"), ids 3..258 the byte-fallback tokens <0x00>..<0xFF>; the
             rest are normal pieces, stored with SentencePiece's "▁" (U+2581) as a plain space.
  --spm      a SentencePiece model, read through python3-sentencepiece.

What is written (as HF writes it for meta-llama/Llama-2-7b-hf):
  normalizer     Prepend "▁" (non-empty input only), then Replace " " -> "▁"
  pre_tokenizer  null: the whole normalized line is one BPE word
  post_processor TemplateProcessing: <s> $A  (pair: <s> $A <s> $B)
  decoder        Replace "▁" -> " ", ByteFallback, Fuse, Strip one leading " "
  model          BPE, unk <unk>, byte_fallback, fuse_unk, vocab {piece: id}, merges "left right"

Merges follow HF's SentencePieceExtractor / generate_merges: for every piece in id order, each
split into two non-empty parts that are both vocabulary pieces is a merge carrying the piece's
score; a piece's own merges are ordered by (id(left), id(right)); then all merges are stably
sorted by (score, len(left), len(right)), highest first (current transformers; older releases
sorted by score alone -- `length_tiebreak=False`).

One deliberate difference from HF: only NORMAL pieces take part in merges, as results or as
parts. SentencePiece's own BPE does the same: model_interface.cc keeps CONTROL, UNKNOWN and BYTE
pieces in `reserved_id_map_`, out of the `pieces_` map that bpe_model.cc looks merged symbols up
in, so the text "<s>" is never merged into token 1 nor "<0x41>" into a byte token. HF's
extractor ignores types; for the Llama-2 32k vocabulary and both llama2.c tok512 ones the two
lists are identical (no control/unknown/byte piece splits into two vocabulary pieces, none is
part of a normal piece's split); build() says on stderr how many merges the filter removed when
that is not so. (HF's runtime also splits the added tokens <unk>/<s>/</s> out of raw text
before BPE; SentencePiece, and pert, treat such text as text.)

SentencePiece models that this tokenizer.json cannot reproduce are refused: unigram models,
normalization other than Llama's (rule "identity", add_dummy_prefix, no
remove_extra_whitespaces, whitespace escaped as a "▁" prefix), USER_DEFINED or UNUSED pieces.
A llama2.c tokenizer.bin does not record these; it is taken to come from a Llama-style model.
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tools/: import by folder (tools/README.md)
from convert import llama2c_tokenizer  # noqa: E402
from lib.outputs import replaced  # noqa: E402  (whole or not at all, as pert's own outputs)

SPIECE = "\u2581"  # "▁"
NORMAL, UNKNOWN, CONTROL, BYTE = "normal", "unknown", "control", "byte"


class Piece:
    __slots__ = ("text", "score", "kind")

    def __init__(self, text, score, kind):
        self.text, self.score, self.kind = text, float(score), kind

    def __repr__(self):
        return f"Piece({self.text!r}, {self.score}, {self.kind})"


def pieces_from_llama2c(path, vocab_size=None):
    """Pieces of a llama2.c tokenizer.bin. Raises ValueError naming the file on a bad layout."""
    raw, scores = llama2c_tokenizer.read_tokenizer_bin(path, vocab_size)
    if len(raw) < 259:
        raise ValueError(f"{path}: {len(raw)} entries; a llama-style vocabulary has at least 259 "
                         "(<unk>, <s>, </s>, 256 byte tokens)")
    expect = {0: (b"<unk>", "<unk>", UNKNOWN), 1: (b"\n<s>\n", "<s>", CONTROL), 2: (b"\n</s>\n", "</s>", CONTROL)}
    out = []
    for i, (b, s) in enumerate(zip(raw, scores)):
        if i in expect:
            stored, text, kind = expect[i]
            if b not in (stored, text.encode()):
                raise ValueError(f"{path}: id {i} is {b!r}, expected {stored!r}")
            out.append(Piece(text, s, kind))
        elif i < 259:
            want = f"<0x{i - 3:02X}>"
            if b != want.encode():
                raise ValueError(f"{path}: id {i} is {b!r}, expected the byte token {want}")
            out.append(Piece(want, s, BYTE))
        else:
            try:
                text = b.decode("utf-8")
            except UnicodeDecodeError:
                raise ValueError(f"{path}: id {i} is not valid UTF-8: {b!r}") from None
            if not text:
                raise ValueError(f"{path}: id {i} is empty")
            out.append(Piece(text.replace(" ", SPIECE), s, NORMAL))
    return out


def _spm_proto_info(proto):
    """(trainer_spec.model_type, ids of USER_DEFINED pieces) from a serialized ModelProto
    (model_type: field 2 -> 3, 1 = unigram when unset; pieces: field 1, type: field 3, 4 =
    USER_DEFINED). A minimal wire-format reader: Debian's python3-sentencepiece comes without
    the protobuf runtime that sentencepiece_model_pb2 needs."""
    def fields(b):
        i = 0
        while i < len(b):
            key, i = varint(b, i)
            wire = key & 7
            if wire == 0:
                value, i = varint(b, i)
            elif wire == 2:
                n, i = varint(b, i)
                value, i = b[i:i + n], i + n
            elif wire in (1, 5):
                value, i = None, i + (8 if wire == 1 else 4)
            else:
                raise ValueError(f"unexpected protobuf wire type {wire}")
            yield key >> 3, value

    def varint(b, i):
        r = shift = 0
        while True:
            c = b[i]
            i += 1
            r |= (c & 0x7F) << shift
            shift += 7
            if c < 0x80:
                return r, i

    model_type, user_defined, n = 1, [], 0
    # normalizer_spec (field 3): name (1), add_dummy_prefix (3), remove_extra_whitespaces (4),
    # escape_whitespaces (5), with protobuf defaults; trainer_spec.treat_whitespace_as_suffix (24).
    norm = {"name": "", "add_dummy_prefix": 1, "remove_extra_whitespaces": 1, "escape_whitespaces": 1,
            "treat_whitespace_as_suffix": 0}
    for f, v in fields(proto):
        if f == 1:
            if any(ff == 3 and vv == 4 for ff, vv in fields(v)):
                user_defined.append(n)
            n += 1
        elif f == 2:
            for ff, vv in fields(v):
                if ff == 3:
                    model_type = vv
                elif ff == 24:
                    norm["treat_whitespace_as_suffix"] = vv
        elif f == 3:
            for ff, vv in fields(v):
                key = {1: "name", 3: "add_dummy_prefix", 4: "remove_extra_whitespaces", 5: "escape_whitespaces"}.get(ff)
                if key:
                    norm[key] = vv.decode() if key == "name" else vv
    return model_type, user_defined, norm


def pieces_from_spm(path):
    """Pieces of a SentencePiece model (python3-sentencepiece)."""
    import sentencepiece as spm
    sp = spm.SentencePieceProcessor()
    try:
        loaded = sp.Load(path)
    except (OSError, RuntimeError) as e:
        raise ValueError(f"{path}: not a readable SentencePiece model ({str(e).strip()})") from None
    if not loaded:
        raise ValueError(f"{path}: not a SentencePiece model")
    model_type, user_defined, norm = _spm_proto_info(sp.serialized_model_proto())
    if model_type != 2:
        raise ValueError(f"{path}: SentencePiece model type {model_type} "
                         "(only BPE, 2, becomes a BPE tokenizer.json)")
    if user_defined:
        raise ValueError(f"{path}: USER_DEFINED pieces (ids {user_defined[:4]}...) are not supported")
    llama = {"name": "identity", "add_dummy_prefix": 1, "remove_extra_whitespaces": 0, "escape_whitespaces": 1,
             "treat_whitespace_as_suffix": 0}
    if norm != llama:
        diff = ", ".join(f"{k} {norm[k]!r} (Llama: {v!r})" for k, v in llama.items() if norm[k] != v)
        raise ValueError(f"{path}: normalization unlike Llama's, which is all the tokenizer.json "
                         f"normalizer reproduces: {diff}")
    out = []
    for i in range(sp.GetPieceSize()):
        if sp.IsUnknown(i):
            kind = UNKNOWN
        elif sp.IsControl(i):
            kind = CONTROL
        elif sp.IsByte(i):
            kind = BYTE
        elif sp.IsUnused(i):
            raise ValueError(f"{path}: id {i} is an UNUSED piece, which a BPE tokenizer.json cannot express")
        else:
            kind = NORMAL
        out.append(Piece(sp.IdToPiece(i), sp.GetScore(i), kind))
    return out


def extract_merges(pieces, normal_only=True, length_tiebreak=True):
    """HF generate_merges(): [(left, right)], highest-priority first. `normal_only`: see the
    module docstring."""
    vocab = {}
    for i, p in enumerate(pieces):
        vocab.setdefault(p.text, i)
    ok = {i for i, p in enumerate(pieces) if p.kind == NORMAL} if normal_only else None
    merges = []
    for i, p in enumerate(pieces):
        if ok is not None and i not in ok:
            continue
        t = p.text
        local = []
        for k in range(1, len(t)):
            lid, rid = vocab.get(t[:k]), vocab.get(t[k:])
            if lid is None or rid is None or (ok is not None and (lid not in ok or rid not in ok)):
                continue
            local.append((lid, rid, t[:k], t[k:]))
        local.sort()
        merges.extend((p.score, left, right) for _, _, left, right in local)
    if length_tiebreak:
        merges.sort(key=lambda m: (m[0], len(m[1]), len(m[2])), reverse=True)
    else:
        merges.sort(key=lambda m: m[0], reverse=True)
    return [(left, right) for _, left, right in merges]


def build(pieces, length_tiebreak=True, warn=sys.stderr):
    """The tokenizer.json object for `pieces` (a list of Piece in id order)."""
    vocab = {}
    for i, p in enumerate(pieces):
        if p.text in vocab:
            raise ValueError(f"piece {p.text!r} occurs twice (ids {vocab[p.text]} and {i})")
        vocab[p.text] = i
    unk = [i for i, p in enumerate(pieces) if p.kind == UNKNOWN]
    if len(unk) != 1:
        raise ValueError(f"expected one unknown piece, found {len(unk)}")
    missing = [f"<0x{b:02X}>" for b in range(256) if pieces[vocab.get(f"<0x{b:02X}>", 0)].kind != BYTE]
    if missing:
        raise ValueError(f"byte fallback needs all 256 byte pieces; missing {missing[:4]}...")
    bos = vocab.get("<s>")
    if bos is None or pieces[bos].kind != CONTROL:
        raise ValueError("no <s> control piece")
    merges = extract_merges(pieces, True, length_tiebreak)
    if warn is not None:
        unfiltered = extract_merges(pieces, False, length_tiebreak)
        if unfiltered != merges:
            dropped = set(unfiltered) - set(merges)
            print(f"tokenizer_json: {len(dropped)} merges involving control/unknown/byte pieces left out "
                  f"(HF would keep them), e.g. {sorted(dropped)[:3]}", file=warn)
    for left, right in merges:
        if " " in left or " " in right:
            raise ValueError(f"merge ({left!r}, {right!r}) has a space; the 'left right' form cannot hold it")
    special = [i for i, p in enumerate(pieces) if p.kind in (UNKNOWN, CONTROL)]
    bos_piece = pieces[bos].text
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [
            {"id": i, "content": pieces[i].text, "single_word": False, "lstrip": False, "rstrip": False,
             "normalized": False, "special": True} for i in special],
        "normalizer": {"type": "Sequence", "normalizers": [
            {"type": "Prepend", "prepend": SPIECE},
            {"type": "Replace", "pattern": {"String": " "}, "content": SPIECE}]},
        "pre_tokenizer": None,
        "post_processor": {
            "type": "TemplateProcessing",
            "single": [{"SpecialToken": {"id": bos_piece, "type_id": 0}},
                       {"Sequence": {"id": "A", "type_id": 0}}],
            "pair": [{"SpecialToken": {"id": bos_piece, "type_id": 0}},
                     {"Sequence": {"id": "A", "type_id": 0}},
                     {"SpecialToken": {"id": bos_piece, "type_id": 1}},
                     {"Sequence": {"id": "B", "type_id": 1}}],
            "special_tokens": {bos_piece: {"id": bos_piece, "ids": [bos], "tokens": [bos_piece]}},
        },
        "decoder": {"type": "Sequence", "decoders": [
            {"type": "Replace", "pattern": {"String": SPIECE}, "content": " "},
            {"type": "ByteFallback"},
            {"type": "Fuse"},
            {"type": "Strip", "content": " ", "start": 1, "stop": 0}]},
        "model": {
            "type": "BPE",
            "dropout": None,
            "unk_token": pieces[unk[0]].text,
            "continuing_subword_prefix": None,
            "end_of_word_suffix": None,
            "fuse_unk": True,
            "byte_fallback": True,
            "ignore_merges": False,
            "vocab": vocab,
            "merges": [f"{left} {right}" for left, right in merges],
        },
    }


def write(tokenizer, path):
    """Writes the object as HF does (UTF-8, not ASCII-escaped, indent 2)."""
    with replaced(path, encoding="utf-8") as f:
        json.dump(tokenizer, f, ensure_ascii=False, indent=2)
        f.write("\n")


def _named(path, make):
    try:
        return make()
    except ValueError as e:
        raise ValueError(str(e) if str(e).startswith(f"{path}:") else f"{path}: {e}") from None


def from_llama2c(path, vocab_size=None, **kw):
    """tokenizer.json object for a llama2.c tokenizer.bin (its first vocab_size entries, or all).
    Raises ValueError naming the file."""
    return _named(path, lambda: build(pieces_from_llama2c(path, vocab_size), **kw))


def from_spm(path, **kw):
    """tokenizer.json object for a SentencePiece BPE model. Raises ValueError naming the file."""
    return _named(path, lambda: build(pieces_from_spm(path), **kw))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--llama2c", metavar="TOKENIZER.bin", help="read a llama2.c tokenizer.bin")
    src.add_argument("--spm", metavar="TOKENIZER.model", help="read a SentencePiece model")
    ap.add_argument("out", metavar="OUT.json", help="tokenizer.json to write")
    a = ap.parse_args()
    try:
        tok = from_llama2c(a.llama2c) if a.llama2c else from_spm(a.spm)
    except (OSError, ValueError) as e:
        sys.exit(str(e))
    write(tok, a.out)
    m = tok["model"]
    print(f"wrote {a.out}: {len(m['vocab'])} pieces, {len(m['merges'])} merges", file=sys.stderr)


if __name__ == "__main__":
    main()
