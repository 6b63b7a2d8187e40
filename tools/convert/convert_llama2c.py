#!/usr/bin/env python3
"""Converts a llama2.c checkpoint (legacy format) into a pert / HF-llama model directory.

    convert_llama2c.py CHECKPOINT.bin TOKENIZER.bin OUT_DIR [--layout half|interleaved] [--dtype F32|F16|BF16]

TOKENIZER.bin is the checkpoint's llama2.c tokenizer; its vocabulary must match the checkpoint's.
It is written to OUT_DIR/tokenizer.json in HF's Llama format (tools/convert/tokenizer_json.py).

llama2.c rotates interleaved pairs (2i, 2i+1). With --layout half (the default, what HF llama
expects) the q/k projection rows are permuted so that pairs become (i, i + head_dim/2), as HF's
convert_llama_weights_to_hf.py does; with --layout interleaved the weights are kept and the
config says so. Both give the same logits.

Format (../shared/data/README.md): 7 int32 (dim, hidden_dim, n_layers, n_heads, n_kv_heads,
vocab_size -- negative when the classifier is untied --, seq_len), then fp32 weights in the
order of llama2.c run.c memory_map_weights.
"""
import argparse
import json
import os
import struct
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tools/: import by folder (tools/README.md)
from convert import llama2c_tokenizer  # noqa: E402
from lib import safetensors_io  # noqa: E402
from convert import tokenizer_json  # noqa: E402
from lib.outputs import replaced  # noqa: E402  (whole or not at all, as pert's own)


def read_llama2c(path):
    with open(path, "rb") as f:
        raw = f.read()
    if len(raw) < 28:
        sys.exit(f"{path}: too short for a llama2.c header")
    dim, hidden, n_layers, n_heads, n_kv, vocab, seq_len = struct.unpack("<7i", raw[:28])
    shared = vocab > 0
    vocab = abs(vocab)
    if min(dim, hidden, n_layers, n_heads, n_kv, vocab, seq_len) <= 0 or dim % n_heads or n_heads % n_kv:
        sys.exit(f"{path}: implausible llama2.c header {dim, hidden, n_layers, n_heads, n_kv, vocab, seq_len}")
    hs = dim // n_heads
    w = np.frombuffer(raw, dtype="<f4", offset=28)
    pos = 0

    def take(*shape):
        nonlocal pos
        n = int(np.prod(shape))
        if pos + n > w.size:
            sys.exit(f"{path}: truncated: weights end before {shape}")
        a = w[pos:pos + n].reshape(shape).astype(np.float32)
        pos += n
        return a

    p = {"embed": take(vocab, dim), "rms_att": take(n_layers, dim),
         "wq": take(n_layers, n_heads * hs, dim), "wk": take(n_layers, n_kv * hs, dim),
         "wv": take(n_layers, n_kv * hs, dim), "wo": take(n_layers, dim, n_heads * hs),
         "rms_ffn": take(n_layers, dim), "w1": take(n_layers, hidden, dim),
         "w2": take(n_layers, dim, hidden), "w3": take(n_layers, hidden, dim),
         "rms_final": take(dim)}
    take(seq_len * hs // 2)  # legacy freq_cis_real, unused
    take(seq_len * hs // 2)  # legacy freq_cis_imag, unused
    p["wcls"] = p["embed"] if shared else take(vocab, dim)
    if pos != w.size:
        sys.exit(f"{path}: {w.size - pos} unexpected trailing floats")
    hp = dict(dim=dim, hidden=hidden, n_layers=n_layers, n_heads=n_heads, n_kv=n_kv, vocab=vocab,
              seq_len=seq_len, shared=shared)
    return hp, p


def interleaved_to_half(w, n_heads):
    """Rows (2i, 2i+1) of each head -> (i, i + hs/2): HF's permute() for q/k projections."""
    rows, cols = w.shape
    return w.reshape(n_heads, rows // n_heads // 2, 2, cols).transpose(0, 2, 1, 3).reshape(rows, cols)


def convert(checkpoint, tokenizer, out_dir, layout="half", dtype="F32"):
    hp, p = read_llama2c(checkpoint)
    try:
        n = len(llama2c_tokenizer.read_tokenizer_bin(tokenizer)[0])
        if n != hp["vocab"]:
            raise ValueError(f"{tokenizer}: {n} entries, expected {hp['vocab']}")
    except ValueError as e:
        sys.exit(f"{e} (the checkpoint's vocabulary has {hp['vocab']} tokens)")
    except OSError as e:
        sys.exit(f"{tokenizer}: {e.strerror}")
    try:
        tok_json = tokenizer_json.from_llama2c(tokenizer)
    except ValueError as e:
        sys.exit(str(e))
    os.makedirs(out_dir, exist_ok=True)
    tokenizer_json.write(tok_json, os.path.join(out_dir, "tokenizer.json"))
    t = {"model.embed_tokens.weight": p["embed"], "model.norm.weight": p["rms_final"]}
    for i in range(hp["n_layers"]):
        wq, wk = p["wq"][i], p["wk"][i]
        if layout == "half":
            wq, wk = interleaved_to_half(wq, hp["n_heads"]), interleaved_to_half(wk, hp["n_kv"])
        pre = f"model.layers.{i}."
        t.update({pre + "input_layernorm.weight": p["rms_att"][i],
                  pre + "self_attn.q_proj.weight": wq, pre + "self_attn.k_proj.weight": wk,
                  pre + "self_attn.v_proj.weight": p["wv"][i], pre + "self_attn.o_proj.weight": p["wo"][i],
                  pre + "post_attention_layernorm.weight": p["rms_ffn"][i],
                  pre + "mlp.gate_proj.weight": p["w1"][i], pre + "mlp.down_proj.weight": p["w2"][i],
                  pre + "mlp.up_proj.weight": p["w3"][i]})
    if not hp["shared"]:
        t["lm_head.weight"] = p["wcls"]
    safetensors_io.save(os.path.join(out_dir, "model.safetensors"), t, dtype,
                        {"format": "pt", "source": os.path.basename(checkpoint)})
    config = {
        "architectures": ["LlamaForCausalLM"], "model_type": "llama",
        "hidden_size": hp["dim"], "intermediate_size": hp["hidden"], "num_hidden_layers": hp["n_layers"],
        "num_attention_heads": hp["n_heads"], "num_key_value_heads": hp["n_kv"], "vocab_size": hp["vocab"],
        "max_position_embeddings": hp["seq_len"], "rms_norm_eps": 1e-5, "hidden_act": "silu",
        "tie_word_embeddings": hp["shared"], "bos_token_id": 1, "eos_token_id": 2,
        "torch_dtype": {"F32": "float32", "F16": "float16", "BF16": "bfloat16"}[dtype],
    }
    if layout == "half":
        config["rope_theta"] = 10000.0
    else:
        config["position"] = {"type": "rope", "base": 10000.0, "layout": "interleaved"}
    with replaced(os.path.join(out_dir, "config.json")) as f:
        json.dump(config, f, indent=2)
        f.write("\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("checkpoint", metavar="CHECKPOINT.bin", help="llama2.c checkpoint (legacy format)")
    ap.add_argument("tokenizer", metavar="TOKENIZER.bin", help="its llama2.c tokenizer")
    ap.add_argument("out_dir", metavar="OUT_DIR", help="model directory to write")
    ap.add_argument("--layout", choices=["half", "interleaved"], default="half",
                    help="RoPE pair layout of the written q/k weights (default %(default)s, as HF llama)")
    ap.add_argument("--dtype", choices=["F32", "F16", "BF16"], default="F32", help="stored precision (default %(default)s)")
    a = ap.parse_args()
    convert(a.checkpoint, a.tokenizer, a.out_dir, a.layout, a.dtype)
    print(f"wrote {a.out_dir}", file=sys.stderr)


if __name__ == "__main__":
    main()
