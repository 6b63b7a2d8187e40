#!/usr/bin/env python3
"""pert's logits against the PyTorch reference (tools/reference.py), one positional case at a time.

    reference_test.py --list
    reference_test.py CASE PERT_LOGITS

For a random-weight model trained-length L = 32, over T = 128 positions (4L), it checks with
max |Δ| ≤ 1e-4 (float32 pert vs float64 reference):
  - one prefill of all T tokens,
  - token-by-token decode through the KV cache, and chunks of 7,
  - prefill against decode inside pert itself, and for length-dependent schemes (dynamic NTK,
    LongRoPE) decode steps past L against a fresh prefill of the same tokens.
"""
import json
import os
import sys
import tempfile

T, L = 128, 32

LONGROPE = {"type": "longrope", "factor": 4.0,
            "short_factor": [1.0, 1.0, 1.1, 1.2, 1.5, 2.0, 2.5, 3.0],
            "long_factor": [1.0, 1.2, 1.6, 2.2, 3.0, 4.0, 5.0, 6.0]}
# Published configs' keys (Mistral-7B-v0.1, Qwen2.5-0.5B, Phi-3-mini-128k, Llama 3.2), shrunk:
# pert must read them as HF does, including the keys that change nothing.
MISTRAL = {"architectures": ["MistralForCausalLM"], "model_type": "mistral", "rope_theta": 10000.0,
           "sliding_window": 8, "attention_dropout": 0.0, "use_cache": True, "torch_dtype": "bfloat16"}
QWEN2 = {"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "rope_theta": 1000000.0,
         "use_sliding_window": True, "sliding_window": 24, "max_window_layers": 1, "attention_dropout": 0.0,
         "initializer_range": 0.02, "use_cache": True}
PHI3 = {"architectures": ["Phi3ForCausalLM"], "model_type": "phi3", "attention_bias": False, "attention_dropout": 0.0,
        "embd_pdrop": 0.0, "resid_pdrop": 0.0, "original_max_position_embeddings": L, "max_position_embeddings": 4 * L,
        "sliding_window": 20, "pad_token_id": 0, "rope_theta": 10000.0,
        "rope_scaling": {"type": "longrope", "short_factor": LONGROPE["short_factor"], "long_factor": LONGROPE["long_factor"]}}
PHI3_PARTIAL = dict(PHI3, partial_rotary_factor=0.5, sliding_window=None,
                    rope_scaling={"rope_type": "longrope", "short_factor": [1.0, 1.1, 1.5, 2.0],
                                  "long_factor": [1.0, 2.0, 3.0, 5.0], "short_mscale": 1.1, "long_mscale": 1.3})
# name: (position block or None for HF keys, make_model options, length-dependent)
CASES = {
    "none": ({"type": "none"}, {}, False),
    "learned": ({"type": "learned", "max_positions": T}, {}, False),
    "learned_clamp": ({"type": "learned", "beyond": "clamp"}, {}, False),
    "sinusoidal": ({"type": "sinusoidal", "embed_scale": 8.0}, {}, False),
    "rope": ({"type": "rope"}, {}, False),
    "rope_interleaved": ({"type": "rope", "layout": "interleaved"}, {}, False),
    "rope_partial": ({"type": "rope", "rotary_dim": 8, "base": 500.0}, {}, False),
    "rope_partial_interleaved": ({"type": "rope", "rotary_dim": 8, "layout": "interleaved"}, {}, False),
    "rope_linear": ({"type": "rope", "scaling": {"type": "linear", "factor": 4.0}}, {}, False),
    "rope_ntk": ({"type": "rope", "scaling": {"type": "ntk", "factor": 4.0}}, {}, False),
    "rope_dynamic": ({"type": "rope", "scaling": {"type": "dynamic", "factor": 2.0}}, {}, True),
    "rope_yarn": ({"type": "rope", "base": 500.0, "scaling": {"type": "yarn", "factor": 4.0}}, {}, False),
    "rope_yarn_partial": ({"type": "rope", "rotary_dim": 8, "layout": "interleaved",
                           "scaling": {"type": "yarn", "factor": 8.0, "beta_fast": 16, "beta_slow": 2,
                                       "original_max_position_embeddings": 16}}, {}, False),
    "rope_llama3": ({"type": "rope", "scaling": {"type": "llama3", "factor": 8.0}}, {}, False),
    "rope_longrope": ({"type": "rope", "scaling": LONGROPE}, {}, True),
    "rope_xpos": ({"type": "rope", "xpos": {}}, {}, False),
    "rope_xpos_interleaved": ({"type": "rope", "layout": "interleaved", "xpos": {"gamma": 0.2, "scale_base": 64}},
                              {}, False),
    "alibi": ({"type": "alibi"}, {}, False),
    "alibi_6_heads": ({"type": "alibi", "max_bias": 6.0}, {"hidden": 96, "heads": 6, "kv_heads": 3}, False),
    "t5": ({"type": "t5", "num_buckets": 16, "max_distance": 48}, {}, False),
    "hf_yarn_partial": (None, {"extra_config": {"rope_theta": 5000.0, "partial_rotary_factor": 0.5,
                                                "rope_scaling": {"rope_type": "yarn", "factor": 4.0}}}, False),
    "hf_llama3_tied_mha": (None, {"tie": True, "kv_heads": 4,
                                  "extra_config": {"rope_scaling": {"rope_type": "llama3", "factor": 4.0,
                                                                    "original_max_position_embeddings": 16}}}, False),
    "rope_head_dim_bf16": ({"type": "rope"}, {"head_dim": 24, "dtype": "BF16"}, False),
    # HF rope_type variants beyond the position block's: YaRN with DeepSeek's mscale ratio, and untruncated.
    "hf_yarn_mscale": (None, {"extra_config": {"rope_scaling": {"rope_type": "yarn", "factor": 8.0, "mscale": 1.0,
                                                                "mscale_all_dim": 0.5,
                                                                "original_max_position_embeddings": 16}}}, False),
    "hf_yarn_untruncated": (None, {"extra_config": {"rope_scaling": {"rope_type": "yarn", "factor": 4.0, "beta_fast": 20,
                                                                     "truncate": False}}}, False),
    "hf_v5_rope_parameters": (None, {"extra_config": {"rope_parameters": {"rope_type": "llama3", "rope_theta": 50000.0,
                                                                          "factor": 8.0, "low_freq_factor": 1.0,
                                                                          "high_freq_factor": 4.0,
                                                                          "original_max_position_embeddings": 16}}}, False),
    # Architectures (README "Model families").
    "llama_attention_mlp_bias": (None, {"qkv_bias": True, "o_bias": True, "mlp_bias": True,
                                        "extra_config": {"attention_bias": True, "mlp_bias": True,
                                                         "eos_token_id": [2, 5, 7]}}, False),
    "mistral_sliding_window": (None, {"extra_config": MISTRAL}, False),
    "qwen2_biases_window": (None, {"qkv_bias": True, "tie": True, "extra_config": QWEN2}, False),
    "qwen2_window_off": (None, {"qkv_bias": True, "extra_config": dict(QWEN2, use_sliding_window=False,
                                                                        sliding_window=4)}, False),
    # Qwen3-0.6B's keys: q/k norms, head_dim set apart from hidden/heads, windows on from layer 1
    "qwen3_qk_norm_window": (None, {"qk_norm": True, "head_dim": 24, "tie": True,
                                    "extra_config": dict(QWEN2, architectures=["Qwen3ForCausalLM"], model_type="qwen3",
                                                         attention_bias=False, sliding_window=12)}, False),
    "phi3_longrope_window": (None, {"fused": True, "kv_heads": 4, "extra_config": PHI3}, True),
    "phi3_partial_mscale_bf16": (None, {"fused": True, "kv_heads": 4, "dtype": "BF16", "extra_config": PHI3_PARTIAL}, True),
}


def main():
    if sys.argv[1] == "--list":
        print(";".join(CASES))
        return 0
    case, binary = sys.argv[1], sys.argv[2]
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools"))
    import numpy as np
    import reference
    from logits_check import Checker, pert_logits

    position, options, length_dependent = CASES[case]
    options = dict(options)
    dtype = options.pop("dtype", "F32")
    check = Checker(case)
    with tempfile.TemporaryDirectory() as tmp:
        model = os.path.join(tmp, "model")
        reference.make_model(model, position, seed=list(CASES).index(case), dtype=dtype, trained=L, **options)
        vocab = json.load(open(os.path.join(model, "config.json")))["vocab_size"]
        ids = np.random.default_rng(7).integers(0, vocab, T).tolist()
        config, W = reference.load_model_dir(model)
        prefix_ref = {}

        def ref(b):  # reference logits for the first b tokens
            if b not in prefix_ref:
                with reference.torch.no_grad():
                    prefix_ref[b] = reference.forward(config, W, ids[:b]).numpy()
            return prefix_ref[b]

        def run_pert(n, chunk=None):
            return pert_logits(binary, model, ids[:n], tmp, chunk)

        prefill = run_pert(T)
        check("prefill vs reference", prefill, ref(T))
        decode = run_pert(T, 1)
        check("decode vs reference", decode, ref(T))
        check("chunks of 7 vs reference", run_pert(T, 7), ref(T))
        check("prefill vs decode (pert)", prefill, decode)
        if length_dependent:
            for n in (L - 1, L, L + 1, 2 * L + 3):
                check(f"decode step {n - 1} vs fresh prefill of {n} tokens", decode[:n], run_pert(n))
                check(f"reference: {n} tokens vs the first {n} of {T}", ref(n), ref(T)[:n])
    return check.exit_code()


if __name__ == "__main__":
    sys.exit(main())
