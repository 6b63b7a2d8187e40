"""The tokenizer.* GGUF metadata of a HuggingFace tokenizer.json, as llama.cpp's
convert_hf_to_gguf.py writes it, for tools/convert/gguf.py's write_gguf (tools/convert/to_gguf.py uses it).

    vocab_metadata(tokenizer_json_path, tokenizer_config_path=None) -> [(key, kind, value)]

tokenizer_config_path None: the tokenizer_config.json beside tokenizer.json, when there is one
(convert_hf_to_gguf.py reads the model directory's). Raises ValueError naming the file for a
tokenizer it cannot express. As a command it prints the metadata (arrays cut short):

    gguf_vocab.py TOKENIZER.json [TOKENIZER_CONFIG.json]

Two kinds, as convert_hf_to_gguf.py tells them apart:
  "gpt2"   byte-level BPE (decoder ByteLevel, no byte fallback): tokens in the GPT-2 alphabet,
           tokenizer.ggml.merges ("left right", a space inside a part written as U+0120, as
           gguf-py's SpecialVocab does), tokenizer.ggml.pre named from the pre-tokenizer:
             Split(Llama 3 regex) + ByteLevel         "llama-bpe"
             Split(Qwen 2 regex, single digits) + ...   "qwen2"
             ByteLevel with its GPT-2 regex             "gpt-2"
             Digits(individual) + ByteLevel(regex)      "smollm"
           (convert_hf_to_gguf.py hashes a test text's tokens instead; it knows these by the
           same regexes). Anything else is refused, as convert_hf_to_gguf.py refuses an unknown
           pre-tokenizer. A normalizer (Qwen's NFC, NFKC) has no GGUF key and is left out, as
           the converter leaves it out: llama.cpp does not normalize.
  "llama"  SentencePiece-style BPE (byte_fallback, "▁" for a space): tokens, scores and token
           types, tokenizer.ggml.add_space_prefix from the normalizer / pre-tokenizer.

Token types (convert_hf_to_gguf.py's get_vocab_base / LlamaHfVocab): an added token that is
special, or looks special (<|...|>, <｜...｜>, <unused...>, <pad>, <mask>), is CONTROL (3), the
unknown token UNKNOWN (2), other added tokens USER_DEFINED (4), <0xNN> pieces of a llama
vocabulary BYTE (6), the rest NORMAL (1); ids that no piece has are "[PAD<id>]", UNUSED (5).

Scores of a llama vocabulary. A SentencePiece model has them (its merge order); a tokenizer.json
has only the merges that HF's SentencePieceExtractor made from them, and llama.cpp's SPM
tokenizer needs the scores back (convert_hf_to_gguf.py's LlamaHfVocab writes -1000.0 for every
piece, which leaves llama.cpp nothing to order merges by). They are recovered from the merges:
the extractor lists every split of a piece in one block, blocks by descending score, and pieces
of equal score interleaved (sorted by the parts' lengths). So the merged pieces are grouped by
overlapping [first, last] merge positions, and group g (in list order) scores -g: pert's GGUF
reader (src/tokenizer/gguf_vocab.cpp) rebuilds the very same merge order from these scores.
Normal pieces no merge makes (single characters) score below every group, -(groups + id);
control, unknown and byte pieces 0, as SentencePiece gives them.

Special token ids and add_bos/add_eos follow gguf-py's SpecialVocab: the tokenizer_config's
bos/eos/unk/pad tokens (a string or {"content": ...}) looked up among the added tokens, the
post-processor's TemplateProcessing for whether BOS/EOS are added, then the config's
add_bos_token / add_eos_token when given.
"""
import argparse
import json
import os
import sys

SPIECE = "\u2581"
NORMAL, UNKNOWN, CONTROL, USER_DEFINED, UNUSED, BYTE = 1, 2, 3, 4, 5, 6

LLAMA3_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|"
                r"\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN2_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|"
               r"\s*[\r\n]+|\s+(?!\S)|\s+")


def _fail(path, what):
    raise ValueError(f"{path}: {what}")


def _looks_special(text):
    """convert_hf_to_gguf.py's does_token_look_special."""
    return (text in ("<pad>", "<mask>", "<2mass>", "[@BOS@]")
            or (text.startswith("<|") and text.endswith("|>"))
            or (text.startswith("<\uff5c") and text.endswith("\uff5c>"))
            or (text.startswith("<unused") and text.endswith(">")))


def _pre_name(pre, path):
    """tokenizer.ggml.pre for a byte-level tokenizer's pre_tokenizer."""
    steps = pre.get("pretokenizers", []) if pre and pre.get("type") == "Sequence" else [pre] if pre else []

    def byte_level(step, regex):
        return (step.get("type") == "ByteLevel" and step.get("add_prefix_space", True) is False
                and bool(step.get("use_regex", True)) == regex)

    if len(steps) == 2 and steps[0].get("type") == "Split" and byte_level(steps[1], False) \
            and steps[0].get("behavior") == "Isolated" and not steps[0].get("invert", False):
        regex = steps[0].get("pattern", {}).get("Regex")
        if regex == LLAMA3_REGEX:
            return "llama-bpe"
        if regex == QWEN2_REGEX:
            return "qwen2"
    if len(steps) == 1 and byte_level(steps[0], True):
        return "gpt-2"
    if len(steps) == 2 and steps[0].get("type") == "Digits" and steps[0].get("individual_digits") \
            and byte_level(steps[1], True):
        return "smollm"
    _fail(path, f"pre_tokenizer {json.dumps(pre)[:200]} is none that llama.cpp knows by name "
                "(llama-bpe, qwen2, gpt-2, smollm)")


def _content(entry):
    if isinstance(entry, str):
        return entry
    if isinstance(entry, dict) and isinstance(entry.get("content"), str):
        return entry["content"]
    return None


def _special_vocab(tok, config, n_vocab):
    """gguf-py SpecialVocab's ids and add flags: ({typ: id}, {typ: bool})."""
    ids, add = {}, {}
    added = tok.get("added_tokens") or []
    bos, eos = _content((config or {}).get("bos_token")), _content((config or {}).get("eos_token"))
    post = tok.get("post_processor")
    for proc in (post.get("processors", [post]) if post else []):
        if proc.get("type") != "TemplateProcessing":
            continue
        single = proc.get("single", [])
        if len(single) > 1:
            first = single[0].get("SpecialToken", {}).get("id")
            last = single[-1].get("SpecialToken", {}).get("id")
            if first:
                if not config:
                    bos = first
                add["bos"] = first == bos
            if last:
                if not config:
                    eos = last
                add["eos"] = last == eos
    for typ, content in (("bos", bos), ("eos", eos), ("unk", _content((config or {}).get("unk_token"))),
                         ("pad", _content((config or {}).get("pad_token")))):
        if isinstance((config or {}).get(f"add_{typ}_token"), bool):
            add[typ] = config[f"add_{typ}_token"]
        if content is None:
            continue
        tid = next((a.get("id") for a in added if a.get("content") == content), None)
        if isinstance(tid, int) and 0 <= tid < n_vocab:
            ids[typ] = tid
    return ids, add


def _spm_scores(pieces, types, merges):
    """Scores that make the SentencePieceExtractor order of `merges` come back (module docstring)."""
    span = {}
    for rank, (left, right) in enumerate(merges):
        lo_hi = span.get(left + right)
        span[left + right] = (rank, rank) if lo_hi is None else (lo_hi[0], rank)
    groups, end = {}, -1
    g = -1
    for piece, (lo, hi) in sorted(span.items(), key=lambda kv: kv[1]):
        if lo > end:
            g += 1
        end = max(end, hi)
        groups[piece] = g
    n_groups = g + 1
    scores = []
    for i, (p, t) in enumerate(zip(pieces, types)):
        if t != NORMAL:
            scores.append(0.0)
        elif p in groups:
            scores.append(-float(groups[p]))
        else:
            scores.append(-float(n_groups + i))
    return scores


def vocab_metadata(tokenizer_json_path, tokenizer_config_path=None):
    path = tokenizer_json_path
    with open(path, encoding="utf-8") as f:
        tok = json.load(f)
    if tokenizer_config_path is None:
        beside = os.path.join(os.path.dirname(os.path.abspath(path)), "tokenizer_config.json")
        tokenizer_config_path = beside if os.path.isfile(beside) else None
    config = None
    if tokenizer_config_path is not None:
        with open(tokenizer_config_path, encoding="utf-8") as f:
            config = json.load(f)
    model = tok.get("model") or {}
    if model.get("type", "BPE") != "BPE":
        _fail(path, f"model type {model.get('type')!r}: only BPE tokenizers become GGUF metadata here")
    vocab = model.get("vocab")
    if not isinstance(vocab, dict):
        _fail(path, "model.vocab is not an object of piece: id")
    added = tok.get("added_tokens") or []
    by_id = {i: p for p, i in vocab.items()}
    added_by_id = {}
    for a in added:
        by_id[a["id"]] = a["content"]
        added_by_id[a["id"]] = a
    n = max(by_id) + 1
    decoder = tok.get("decoder") or {}
    spm = bool(model.get("byte_fallback"))
    if not spm and decoder.get("type") != "ByteLevel":
        _fail(path, "neither SentencePiece-style (byte_fallback) nor byte-level (ByteLevel decoder) BPE")
    unk_content = model.get("unk_token")
    pieces, types = [], []
    for i in range(n):
        p = by_id.get(i)
        if p is None:
            pieces.append(f"[PAD{i}]")
            types.append(UNUSED)
            continue
        pieces.append(p)
        a = added_by_id.get(i)
        if a is not None:
            if spm and p == unk_content:
                types.append(UNKNOWN)
            elif a.get("special") or _looks_special(p):
                types.append(CONTROL)
            else:
                types.append(USER_DEFINED)
        elif spm and len(p) == 6 and p.startswith("<0x") and p.endswith(">"):
            types.append(BYTE)
        else:
            types.append(NORMAL)

    merges = []
    for m in model.get("merges") or []:
        if isinstance(m, str):
            left, sep, right = m.partition(" ")
            if not sep:
                _fail(path, f"merge {m!r} is not 'left right'")
        else:
            left, right = m
        merges.append((left, right))

    meta = [("tokenizer.ggml.model", "string", "llama" if spm else "gpt2")]
    if spm:
        meta.append(("tokenizer.ggml.pre", "string", "default"))
    else:
        meta.append(("tokenizer.ggml.pre", "string", _pre_name(tok.get("pre_tokenizer"), path)))
    meta.append(("tokenizer.ggml.tokens", ("array", "string"), pieces))
    if spm:
        meta.append(("tokenizer.ggml.scores", ("array", "f32"), _spm_scores(pieces, types, merges)))
    meta.append(("tokenizer.ggml.token_type", ("array", "i32"), types))
    if not spm:
        space = lambda s: s.replace(" ", "\u0120")  # noqa: E731  (SpecialVocab's spelling of a space)
        meta.append(("tokenizer.ggml.merges", ("array", "string"), [f"{space(a)} {space(b)}" for a, b in merges]))
    ids, add = _special_vocab(tok, config, n)
    for typ, key in (("bos", "bos_token_id"), ("eos", "eos_token_id"), ("unk", "unknown_token_id"),
                     ("pad", "padding_token_id")):
        if typ in ids:
            meta.append((f"tokenizer.ggml.{key}", "u32", ids[typ]))
    for typ in ("bos", "eos"):
        if typ in add:
            meta.append((f"tokenizer.ggml.add_{typ}_token", "bool", add[typ]))
    if spm:
        norm = json.dumps(tok.get("normalizer")) + json.dumps(tok.get("pre_tokenizer"))
        prefix = '"Prepend"' in norm or '"prepend_scheme": "always"' in norm or '"prepend_scheme": "first"' in norm \
            or '"add_prefix_space": true' in norm
        meta.append(("tokenizer.ggml.add_space_prefix", "bool", prefix))
    template = (config or {}).get("chat_template")
    if isinstance(template, str):
        meta.append(("tokenizer.chat_template", "string", template))
    return meta


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("tokenizer", metavar="TOKENIZER.json")
    ap.add_argument("tokenizer_config", metavar="TOKENIZER_CONFIG.json", nargs="?")
    args = ap.parse_args()
    try:
        meta = vocab_metadata(args.tokenizer, args.tokenizer_config)
    except (OSError, ValueError) as e:
        sys.exit(f"gguf_vocab.py: {e}")
    for key, kind, value in meta:
        shown = value if not isinstance(value, list) else f"[{len(value)}] {value[:5]!r}..."
        print(f"{key} ({kind if isinstance(kind, str) else kind[0] + ' of ' + kind[1]}): {shown}")


if __name__ == "__main__":
    main()
