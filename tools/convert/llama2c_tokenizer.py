"""llama2.c `tokenizer.bin`: reading it, and encoding text exactly as llama2.c's run.c does
(dummy-prefix space, code points looked up whole or as byte-fallback tokens <0xNN> = byte + 3,
then merging the adjacent pair with the highest score until none is in the vocabulary).

Format: int32 max_token_length, then per id: float32 score, int32 byte length, bytes.

A module for the other tools and tests; run as a command it prints the ids of a text:

    llama2c_tokenizer.py TOKENIZER.bin TEXT [--no-bos]
"""
import argparse
import struct
import sys


def read_tokenizer_bin(path, vocab_size=None):
    """Returns (pieces as bytes, scores). Reads vocab_size entries, or all of the file."""
    with open(path, "rb") as f:
        data = f.read()
    pos = 4  # max_token_length
    pieces, scores = [], []
    while pos < len(data) and (vocab_size is None or len(pieces) < vocab_size):
        if pos + 8 > len(data):
            raise ValueError(f"{path}: truncated at entry {len(pieces)}")
        score, n = struct.unpack_from("<fi", data, pos)
        pos += 8
        if n < 0 or pos + n > len(data):
            raise ValueError(f"{path}: bad length {n} at entry {len(pieces)}")
        pieces.append(data[pos:pos + n])
        scores.append(score)
        pos += n
    if vocab_size is not None and len(pieces) != vocab_size:
        raise ValueError(f"{path}: {len(pieces)} entries, expected {vocab_size}")
    return pieces, scores


def encode(text, pieces, scores, bos=True):
    """llama2.c run.c encode(): token ids for `text`."""
    lookup = {p: i for i, p in enumerate(pieces)}
    tokens = [1] if bos else []
    if text:
        tokens.append(lookup[b" "])
    for ch in text:
        b = ch.encode("utf-8")
        if b in lookup:
            tokens.append(lookup[b])
        else:
            tokens.extend(byte + 3 for byte in b)
    while True:
        best, best_id, best_at = -1e10, -1, -1
        for i in range(len(tokens) - 1):
            merged = pieces[tokens[i]] + pieces[tokens[i + 1]]
            j = lookup.get(merged)
            if j is not None and scores[j] > best:
                best, best_id, best_at = scores[j], j, i
        if best_at < 0:
            return tokens
        tokens[best_at:best_at + 2] = [best_id]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("tokenizer", metavar="TOKENIZER.bin", help="llama2.c tokenizer")
    ap.add_argument("text", metavar="TEXT", help="text to encode")
    ap.add_argument("--no-bos", action="store_true", help="no BOS (id 1) before the text")
    a = ap.parse_args()
    try:
        pieces, scores = read_tokenizer_bin(a.tokenizer)
    except (OSError, ValueError) as e:
        sys.exit(f"llama2c_tokenizer.py: {e}")
    print(" ".join(map(str, encode(a.text, pieces, scores, bos=not a.no_bos))))


if __name__ == "__main__":
    main()
