#!/usr/bin/env python3
"""pert's logits against the PyTorch reference (tools/reference/reference.py), one positional case at a time.

    reference_test.py --list
    reference_test.py CASE PERT_LOGITS [--prepared DIR]
    reference_test.py --prepare DIR            # every case's model and reference logits, in one process
    reference_test.py --reference-only CASE    # the reference alone: finite and causal
    reference_test.py --sanity                 # the "extend" block against itself and its sources' loops

For a random-weight model trained-length L = 32, over T = 128 positions (4L), it checks with
max |Δ| ≤ 1e-4 (float32 pert vs float64 reference):
  - one prefill of all T tokens,
  - token-by-token decode through the KV cache, and chunks of 7,
  - prefill against decode inside pert itself, and for length-dependent schemes (dynamic NTK,
    LongRoPE) decode steps past L against a fresh prefill of the same tokens.
LongRoPE by the whole sequence (transformers' choice, the default) encodes every position of a
forward with the factors of the sequence's length, its cache re-encoded when that crosses L0: a
run fed in pieces has each row as the last forward holding it computes it, the reference's
L0-token rows while that forward ends by L0 and its T-token rows past (by_forward_end).
A case's make_model options may carry an "extend" block (the extend_* cases). --prepare writes each
case's model, ids and reference logits under DIR/CASE once (torch is imported once, not per case:
CTest runs it as the fixture of the reference_* tests), and CASE --prepared DIR reads them there
with numpy alone; without --prepared a case prepares itself. --sanity needs no
pert: it checks the reference's extend methods against plain attention where they change nothing,
and against llama.cpp's group-attention loop and StreamingLLM's cache run token by token.
"""
import json
import math
import os
import sys
import tempfile

T, L = 128, 32
SINK = 2  # the attention statistics' sink: the first two positions

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
# Phi-4-mini (HF phi3, shrunk): partial_rotary_factor 0.75, LongRoPE from L0 = 16 of 64, its window of 262144 (none)
# (untied here: tied random embeddings make logits of ~50, whose float32 noise nears the tolerance)
PHI4_MINI = dict(PHI3, original_max_position_embeddings=16, max_position_embeddings=64, partial_rotary_factor=0.75,
                 sliding_window=262144,
                 rope_scaling={"type": "longrope", "short_factor": [1.0, 1.05, 1.1, 1.3, 1.6, 2.0],
                               "long_factor": [1.0, 1.5, 2.5, 4.0, 6.0, 9.0]})
PHI3_PARTIAL = dict(PHI3, partial_rotary_factor=0.5, sliding_window=None,
                    rope_scaling={"rope_type": "longrope", "short_factor": [1.0, 1.1, 1.5, 2.0],
                                  "long_factor": [1.0, 2.0, 3.0, 5.0], "short_mscale": 1.1, "long_mscale": 1.3})
GEMMA2 = {"architectures": ["Gemma2ForCausalLM"], "model_type": "gemma2", "head_dim": 24, "hidden_act": "gelu_pytorch_tanh",
          "hidden_activation": "gelu_pytorch_tanh", "query_pre_attn_scalar": 24, "sliding_window": 8,
          "attn_logit_softcapping": 50.0, "final_logit_softcapping": 30.0, "rope_theta": 10000.0,
          "attention_bias": False, "attention_dropout": 0.0, "pad_token_id": 0, "cache_implementation": "hybrid"}
GEMMA3 = {"architectures": ["Gemma3ForCausalLM"], "model_type": "gemma3_text", "head_dim": 16,
          "hidden_activation": "gelu_pytorch_tanh", "query_pre_attn_scalar": 16, "sliding_window": 8,
          "sliding_window_pattern": 3, "rope_theta": 1000000.0, "rope_local_base_freq": 100.0,
          "rope_scaling": {"rope_type": "linear", "factor": 4.0}, "attn_logit_softcapping": None,
          "final_logit_softcapping": None, "attention_bias": False, "pad_token_id": 0}
COHERE2 = {"architectures": ["Cohere2ForCausalLM"], "model_type": "cohere2", "logit_scale": 0.25, "sliding_window": 8,
           "sliding_window_pattern": 4, "layer_norm_eps": 1e-5, "rope_theta": 50000.0, "attention_bias": False,
           "attention_dropout": 0.0, "use_qk_norm": False, "pad_token_id": 0, "order_of_interleaved_layers": "local_attn_first",
           "position_embedding_type": "rope_gptj", "rotary_pct": 1.0, "use_embedding_sharing": True}
# Qwen2-VL-2B's config keys (v4: the language model's at the top level), shrunk; M-RoPE in
# sections of 2, 3, 3 of the 8 rotary pairs; text alone: plain RoPE.
QWEN2_VL = {"architectures": ["Qwen2VLForConditionalGeneration"], "model_type": "qwen2_vl", "rope_theta": 10000.0,
            "rope_scaling": {"type": "mrope", "mrope_section": [2, 3, 3]}, "use_sliding_window": False,
            "sliding_window": 32768, "max_window_layers": 2, "image_token_id": 90, "video_token_id": 91,
            "vision_start_token_id": 92, "vision_end_token_id": 93, "attention_dropout": 0.0, "use_cache": True}
QWEN3_VL = {"architectures": ["Qwen3VLForConditionalGeneration"], "model_type": "qwen3_vl", "rope_theta": 10000.0,
            "rope_scaling": {"rope_type": "default", "mrope_section": [3, 3, 2], "mrope_interleaved": True},
            "attention_bias": False, "attention_dropout": 0.0, "image_token_id": 90, "video_token_id": 91}
# Gemma 3 as transformers v5 writes it: rope_parameters per layer type
GEMMA3_V5 = dict(GEMMA3, rope_theta=None, rope_scaling=None, rope_local_base_freq=None,
                 rope_parameters={"full_attention": {"rope_type": "linear", "factor": 4.0, "rope_theta": 1000000.0},
                                  "sliding_attention": {"rope_type": "default", "rope_theta": 100.0}})
# Gemma 3's VL checkpoints (google/gemma-3-4b-it's config, shrunk): text_config as sparse as the
# published (None: left out, Gemma3TextConfig's default: 8 heads, 4 KV heads, head_dim 256,
# query_pre_attn_scalar 256, every 6th layer global, rope_theta 1e6, local base 1e4, tied)
GEMMA3_VL = {"architectures": ["Gemma3ForConditionalGeneration"], "model_type": "gemma3", "eos_token_id": [1, 2],
             "num_attention_heads": None, "num_key_value_heads": None, "head_dim": None, "max_position_embeddings": None,
             "tie_word_embeddings": None, "bos_token_id": None, "rms_norm_eps": None, "sliding_window": 8,
             "rope_scaling": {"factor": 4.0, "rope_type": "linear"}}
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
    "rope_longrope_by_position": ({"type": "rope", "scaling": dict(LONGROPE, longrope_choice="position")}, {}, True),
    "rope_xpos": ({"type": "rope", "xpos": {}}, {}, False),
    "rope_xpos_interleaved": ({"type": "rope", "layout": "interleaved", "xpos": {"gamma": 0.2, "scale_base": 64}},
                              {}, False),
    "alibi": ({"type": "alibi"}, {}, False),
    "alibi_6_heads": ({"type": "alibi", "max_bias": 6.0}, {"hidden": 96, "heads": 6, "kv_heads": 3}, False),
    "t5": ({"type": "t5", "num_buckets": 16, "max_distance": 48}, {}, False),
    "kerple": ({"type": "kerple"}, {}, False),
    "kerple_eps": ({"type": "kerple", "eps": 0.3}, {"layers": 3}, False),
    "fire": ({"type": "fire"}, {}, False),
    "xl": ({"type": "xl"}, {}, False),
    "xl_gqa": ({"type": "xl"}, {"layers": 3, "hidden": 96, "heads": 6, "kv_heads": 2}, False),
    "deberta": ({"type": "deberta", "max_relative_positions": 8}, {}, False),
    "deberta_default_span": ({"type": "deberta"}, {"layers": 3, "hidden": 96, "heads": 6, "kv_heads": 3}, False),
    # Llama's attention biases under deberta: the biased q and k are what its position terms read.
    "deberta_attention_bias": ({"type": "deberta", "max_relative_positions": 8},
                               {"qkv_bias": True, "o_bias": True, "extra_config": {"attention_bias": True}}, False),
    "fire_narrow": ({"type": "fire", "width": 8, "eps": 0.01}, {"layers": 3, "hidden": 96, "heads": 6, "kv_heads": 3}, False),
    # Content-dependent positions (issue 69): FoX's forget gates (their running sums cached beside
    # the keys; a window's ring reuses their rows), stick-breaking's weights (no softmax; masked
    # keys skipped by the sticks)
    "fox": ({"type": "fox"}, {}, False),
    "fox_window": ({"type": "fox"}, {"layers": 3, "extra_config": MISTRAL}, False),
    "fox_streaming": ({"type": "fox"}, {"extend": {"streaming": {"sinks": 4, "window": 16, "positions": "original"}}},
                      False),
    "stick_breaking": ({"type": "stick_breaking"}, {}, False),
    "stick_breaking_window": ({"type": "stick_breaking"}, {"layers": 3, "hidden": 96, "heads": 6, "kv_heads": 3,
                                                           "extra_config": MISTRAL}, False),
    "stick_breaking_streaming": ({"type": "stick_breaking"}, {"extend": {"streaming": {"sinks": 4, "window": 16}}}, False),
    # CoPE: positions counted by gates on each row's scores (L + 1 = 33 positions, reached within
    # T; a cap of 5, and log-n's factor on the queries that read the positions; a window's ring,
    # whose masked keys count nothing; streaming's sinks and window, its mask alone)
    "cope": ({"type": "cope"}, {}, False),
    "cope_cap_logn": ({"type": "cope", "npos_max": 6}, {"extend": {"logn": {}}}, False),
    "cope_window": ({"type": "cope"}, {"layers": 3, "hidden": 96, "heads": 6, "kv_heads": 3, "extra_config": MISTRAL}, False),
    "cope_streaming": ({"type": "cope"}, {"extend": {"streaming": {"sinks": 4, "window": 16, "positions": "original"}}}, False),
    "rope_block_hf_yarn": ({"type": "rope", "base": 500.0}, {"extra_config": {"rope_scaling": {"rope_type": "yarn", "factor": 4.0}}},
                           False),
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
    "phi4_mini_partial_longrope": (None, {"fused": True, "kv_heads": 2, "extra_config": PHI4_MINI}, True),
    "phi4_mini_by_position": (None, {"fused": True, "kv_heads": 2, "extra_config": dict(
        PHI4_MINI, rope_scaling=dict(PHI4_MINI["rope_scaling"], longrope_choice="position"))}, True),
    # Training-free extension at attention time: config.json's "extend" block (DESIGN §5).
    # SmolLM3 (HF smollm3, shrunk): NoPE every no_rope_layer_interval-th layer, or as no_rope_layers
    # lists them; a window (use_sliding_window) only on those layers
    "smollm3_nope_every_4th": (None, {"layers": 4, "extra_config": {
        "architectures": ["SmolLM3ForCausalLM"], "model_type": "smollm3", "rope_theta": 5000000.0,
        "no_rope_layer_interval": 4, "use_sliding_window": False, "sliding_window": None, "attention_dropout": 0.0,
        "pad_token_id": 0, "use_cache": True}}, False),
    "smollm3_listed_windowed": (None, {"layers": 3, "mlp_bias": True, "extra_config": {
        "architectures": ["SmolLM3ForCausalLM"], "model_type": "smollm3", "rope_theta": 10000.0,
        "no_rope_layers": [0, 1, 0], "use_sliding_window": True, "sliding_window": 8, "mlp_bias": True,
        "rope_scaling": {"rope_type": "yarn", "factor": 4.0}}}, False),
    # Gemma 2 (HF gemma2, shrunk): GeGLU, (1 + w) norms on both sides of each branch, embeddings × √d,
    # query_pre_attn_scalar, scores and logits soft-capped (at 50 and 30 by default), a window on even layers
    "gemma2_softcaps_window": (None, {"layers": 3, "tie": True, "gemma": True, "head_dim": 24, "extra_config": GEMMA2}, False),
    "gemma2_small_caps": (None, {"layers": 2, "gemma": True, "head_dim": 24, "extra_config": dict(
        GEMMA2, attn_logit_softcapping=2.0, final_logit_softcapping=3.0, query_pre_attn_scalar=16,
        layer_types=["full_attention", "sliding_attention"], tie_word_embeddings=False)}, False),
    # Gemma 3 (HF gemma3_text, shrunk): q/k norms, local layers with their own RoPE base, every 3rd
    # layer global with rope_theta and linear scaling; no caps
    "gemma3_local_global": (None, {"layers": 4, "tie": True, "gemma": True, "qk_norm": True, "head_dim": 16,
                                   "extra_config": GEMMA3}, False),
    "gemma3_default_theta_capped": (None, {"layers": 3, "gemma": True, "qk_norm": True, "extra_config": dict(
        GEMMA3, rope_theta=None, rope_scaling=None, sliding_window_pattern=2, final_logit_softcapping=5.0,
        attn_logit_softcapping=4.0, tie_word_embeddings=False)}, False),
    # Gemma 3 in transformers v5's form: each layer type's rope_parameters block (global linear x4 at 1e6, local 100)
    "gemma3_v5_rope_parameters": (None, {"layers": 4, "tie": True, "gemma": True, "qk_norm": True, "head_dim": 16,
                                         "extra_config": GEMMA3_V5}, False),
    # Qwen2-VL / Qwen2.5-VL / Qwen3-VL's language models (text alone: M-RoPE's three positions equal),
    # their vision tensors skipped; v4's layout (model.layers.*, visual.*) and v5's (model.language_model.*,
    # model.visual.*, text_config)
    "qwen2_vl_mrope": (None, {"qkv_bias": True, "vl": "v4", "extra_config": QWEN2_VL}, False),
    "qwen2_5_vl_v5_window": (None, {"qkv_bias": True, "vl": "v5", "layers": 3, "extra_config": dict(
        QWEN2_VL, architectures=["Qwen2_5_VLForConditionalGeneration"], model_type="qwen2_5_vl", rope_scaling=None,
        rope_theta=None, rope_parameters={"rope_type": "default", "mrope_section": [4, 2, 2], "rope_theta": 5000.0},
        use_sliding_window=True, sliding_window=24, max_window_layers=1)}, False),
    "qwen3_vl_interleaved": (None, {"qk_norm": True, "vl": "v5", "tie": True, "extra_config": QWEN3_VL}, False),
    # Gemma3ForConditionalGeneration's language model (Gemma 3 4B/12B/27B): as published (v4:
    # language_model.model.*, vision_tower.*, multi_modal_projector.*; text_config's defaults) and
    # as transformers v5 writes it (model.language_model.*, lm_head.*, rope_parameters per layer type)
    "gemma3_vl_published_defaults": (None, {"layers": 6, "heads": 8, "kv_heads": 4, "head_dim": 256, "tie": True,
                                            "gemma": True, "qk_norm": True, "vl": "gemma3_v4",
                                            "extra_config": GEMMA3_VL}, False),
    "gemma3_vl_v5_untied": (None, {"layers": 4, "gemma": True, "qk_norm": True, "head_dim": 16, "vl": "gemma3_v5",
                                   "extra_config": dict(GEMMA3_V5, architectures=["Gemma3ForConditionalGeneration"],
                                                        model_type="gemma3", tie_word_embeddings=False,
                                                        layer_types=["sliding_attention", "full_attention",
                                                                     "sliding_attention", "sliding_attention"])}, False),
    # Command R7B (HF cohere2, shrunk): LayerNorm, a parallel block, interleaved RoPE only in the
    # sliding-window layers, global layers without positions, logits × logit_scale
    "cohere2_rnope_swa": (None, {"layers": 4, "tie": True, "parallel": True, "extra_config": COHERE2}, False),
    "cohere2_pattern_2": (None, {"layers": 3, "parallel": True, "extra_config": dict(
        COHERE2, sliding_window_pattern=2, logit_scale=0.5, layer_norm_eps=0.01, tie_word_embeddings=False,
        rope_theta=500.0)}, False),
    # pert's "layers" block: layers with their own scheme, window, chunk or temperature
    "layers_nope_every_4th": ({"type": "rope"}, {"layers": 4, "extra_config": {
        "layers": {"nope": {"every": 4, "position": {"type": "none"}}}}}, False),
    "layers_rnope_swa": ({"type": "rope", "base": 500.0}, {"layers": 4, "extra_config": {
        "layers": {"global": {"every": 2, "position": {"type": "none"}}, "local": {"others": True, "window": 8}}}}, False),
    "layers_irope": ({"type": "rope", "layout": "interleaved", "scaling": {"type": "llama3", "factor": 4.0}},
                     {"layers": 4, "extra_config": {"layers": {
                         "global": {"every": 4, "position": {"type": "none"}, "temperature": {"scale": 0.5, "floor": 8}},
                         "local": {"others": True, "chunk": 16}}}}, False),
    "layers_two_bases": ({"type": "rope", "base": 1000000.0, "scaling": {"type": "linear", "factor": 4.0}},
                         {"layers": 3, "extra_config": {"layers": {
                             "global": {"every": 3},
                             "local": {"others": True, "window": 8, "position": {"type": "rope", "base": 100.0}}}}}, False),
    "layers_alibi_rope": ({"type": "alibi"}, {"layers": 3, "extra_config": {
        "layers": {"rope": {"layers": [1], "position": {"type": "rope"}, "window": 12}}}}, False),
    "layers_dynamic": ({"type": "rope"}, {"layers": 3, "extra_config": {
        "layers": {"dynamic": {"layers": [0, 2], "position": {"type": "rope", "scaling": {"type": "dynamic", "factor": 2.0}}}}}},
                       True),
    "layers_nope_self_extend": ({"type": "rope"}, {"layers": 4, "extend": {"self_extend": {"window": 8, "group": 4}},
                                                   "extra_config": {"layers": {"nope": {"every": 2, "position": {"type": "none"}}}}},
                                False),
    # Dual Chunk Attention (ChunkLlama; Qwen2.5-1M as vLLM runs it): chunks of 24 - 8 = 16, three
    # query positions by the key's chunk; with the length scale; on dynamic NTK (keys rotated on read)
    "extend_dca": ({"type": "rope"}, {"extend": {"dca": {"chunk_size": 24, "local_size": 8}}}, False),
    "extend_dca_scaled": ({"type": "rope", "base": 500.0}, {"extend": {"dca": {
        "chunk_size": 32, "local_size": 4, "original_max_position_embeddings": 16}}}, False),
    "extend_dca_dynamic": ({"type": "rope", "scaling": {"type": "dynamic", "factor": 2.0}},
                           {"extend": {"dca": {"chunk_size": 20, "local_size": 6}}}, True),
    # Qwen2.5-1M's dual_chunk_attention_config (vLLM's key) read as the dca method
    "qwen2_dual_chunk": (None, {"qkv_bias": True, "extra_config": dict(
        QWEN2, use_sliding_window=False, rope_theta=10000.0,
        dual_chunk_attention_config={"chunk_size": 40, "local_size": 8, "original_max_position_embeddings": 48,
                                     "sparse_attention_enabled": False, "sparse_attention_threshold": 32768})}, False),
    "extend_self_extend": ({"type": "rope"}, {"extend": {"self_extend": {"window": 8, "group": 4}}}, False),
    "extend_self_extend_w10_g4": ({"type": "rope"}, {"extend": {"self_extend": {"window": 10, "group": 4}}}, False),
    "extend_self_extend_llama_cpp": ({"type": "rope"}, {"extend": {"self_extend": {"window": 8, "group": 4,
                                                                                   "mode": "llama.cpp"}}}, False),
    "extend_self_extend_yarn": ({"type": "rope", "scaling": {"type": "yarn", "factor": 4.0}},
                                {"extend": {"self_extend": {"window": 8, "group": 4}}}, False),
    "extend_rerope": ({"type": "rope"}, {"extend": {"rerope": {"window": 8}}}, False),
    "extend_leaky_rerope": ({"type": "rope"}, {"extend": {"leaky_rerope": {"window": 8, "factor": 4}}}, False),
    "extend_leaky_rerope_dynamic": ({"type": "rope", "scaling": {"type": "dynamic", "factor": 2.0}},
                                    {"extend": {"leaky_rerope": {"window": 8, "factor": 4}}}, True),
    "extend_logn": ({"type": "rope"}, {"extend": {"logn": {}}}, False),
    "extend_logn_dynamic": (None, {"extend": {"logn": {}},
                                   "extra_config": {"rope_scaling": {"rope_type": "dynamic", "factor": 2.0}}}, True),
    "extend_rerope_logn": ({"type": "rope"}, {"extend": {"rerope": {"window": 8}, "logn": {}}}, False),
    "extend_streaming": ({"type": "rope"}, {"extend": {"streaming": {"sinks": 4, "window": 16}}}, False),
    "extend_streaming_original": ({"type": "rope"}, {"extend": {"streaming": {"sinks": 2, "window": 12,
                                                                              "positions": "original"}}}, False),
    "extend_streaming_alibi": ({"type": "alibi"}, {"extend": {"streaming": {"sinks": 4, "window": 16}}}, False),
    # Mistral's window of 8 inside the default streaming window (L - 4): the sinks stay visible
    "extend_streaming_mistral": (None, {"extend": {"streaming": {}}, "extra_config": MISTRAL}, False),
    "extend_blockwise": ({"type": "rope"}, {"extend": {"blockwise": {"block": 16}}}, False),
    "extend_streaming_kerple": ({"type": "kerple"}, {"extend": {"streaming": {"sinks": 4, "window": 16,
                                                                             "positions": "original"}}}, False),
    "extend_streaming_fire": ({"type": "fire"}, {"extend": {"streaming": {"sinks": 4, "window": 16}}}, False),
    "extend_streaming_xl": ({"type": "xl"}, {"extend": {"streaming": {"sinks": 4, "window": 16}}}, False),
    "extend_logn_deberta": ({"type": "deberta", "max_relative_positions": 8}, {"extend": {"logn": {}}}, False),
    "extend_blockwise_t5": ({"type": "t5", "num_buckets": 16, "max_distance": 48},
                            {"extend": {"blockwise": {"block": 16}}}, False),
}


def whole_sequence_switch(case):
    """L0 for a case whose LongRoPE picks its factors by the whole sequence's length (transformers'
    choice, "longrope_choice": "sequence", the default): a forward ending at n encodes every
    position with the short factors while n <= L0, the long ones past it. None for the others."""
    position, options, _ = CASES[case]
    extra = options.get("extra_config", {})
    scaling = (position or {}).get("scaling") or extra.get("rope_scaling") or {}
    if scaling.get("type", scaling.get("rope_type")) not in ("longrope", "su") or \
            scaling.get("longrope_choice", "sequence") != "sequence":
        return None
    return scaling.get("original_max_position_embeddings") or extra.get("original_max_position_embeddings") or L


def reference_lengths(case):
    """The prefixes whose reference logits a case's test reads: all T tokens, and for the
    length-dependent schemes the lengths around L (L0) where decode is checked against prefill."""
    switch = whole_sequence_switch(case) or L
    return [T] + ([switch - 1, switch, switch + 1, 2 * switch + 3] if CASES[case][2] else [])


def by_forward_end(ref, switch, chunk, np):
    """Under LongRoPE by the whole sequence: the logits of the T ids fed `chunk` at a time (None:
    at once). Row m is what the last forward holding it computes, every position encoded for that
    forward's end e: row m of the reference's first `switch` tokens while e <= switch, of all T
    past it (each class is causal within itself)."""
    ends = [T if chunk is None else min((m // chunk + 1) * chunk, T) for m in range(T)]
    return np.stack([ref(switch)[m] if e <= switch else ref(T)[m] for m, e in enumerate(ends)])


def prepare(case, out, reference, np):
    """The case's model (out/model), its ids (out/ids.json) and the reference's logits for every
    prefix of reference_lengths (out/ref_N.npy)."""
    model, config, W, ids = build(case, out, reference, np)
    probs = {}
    with reference.torch.no_grad():
        for n in reference_lengths(case):
            observe = (lambda layer, p: probs.__setitem__(layer, p)) if n == T else None
            np.save(os.path.join(out, f"ref_{n}.npy"), reference.forward(config, W, ids[:n], observe=observe).numpy())
    switch = whole_sequence_switch(case)
    if switch:  # a greedy decode that crosses L0: each step a forward over every id so far
        with open(os.path.join(out, "greedy.json"), "w") as f:
            json.dump(reference.greedy(model, ids[:switch - 4], 2 * switch), f)
    per_query = reference.attention_per_query([probs[i] for i in sorted(probs)], sink=SINK)
    with open(os.path.join(out, "attention.json"), "w") as f:
        json.dump(reference.attention_stats(per_query, config.get("max_position_embeddings", 2048)), f)
    with open(os.path.join(out, "ids.json"), "w") as f:
        json.dump(ids, f)


def prepare_all(out, reference, np):
    """Every case prepared under out/CASE; written beside out first and then moved in, so a
    reader never sees half of it."""
    import shutil
    fresh = out + ".new"
    shutil.rmtree(fresh, ignore_errors=True)
    for case in CASES:
        os.makedirs(os.path.join(fresh, case))
        prepare(case, os.path.join(fresh, case), reference, np)
    shutil.rmtree(out, ignore_errors=True)
    os.rename(fresh, out)
    print(f"{len(CASES)} cases prepared in {out}")
    return 0


def build(case, tmp, reference, np):
    """The case's random model in tmp/model: (model dir, config, float64 weights, T token ids)."""
    position, options, _ = CASES[case]
    options = dict(options)
    dtype = options.pop("dtype", "F32")
    model = os.path.join(tmp, "model")
    reference.make_model(model, position, seed=list(CASES).index(case), dtype=dtype, trained=L, **options)
    config, W = reference.load_model_dir(model)
    ids = np.random.default_rng(7).integers(0, config["vocab_size"], T).tolist()
    return model, config, W, ids


def sanity(reference, np, Checker):
    """The reference's "extend" block against itself: settings that change nothing give the
    plain model's logits, two spellings of one mask agree, and the closed forms of llama.cpp's
    group attention and StreamingLLM's cache equal those sources' loops run token by token."""
    from reference import reference_extend as ext
    check = Checker("extend sanity", tol=1e-10)

    def none_differ(what, bad):  # bad: the (m, n) pairs that differ
        print(f"{check.name:28s} {what:70s} {len(bad)} pairs differ {bad[:3]}")
        if bad:
            check.failures.append(what)
    with tempfile.TemporaryDirectory() as tmp:
        _, config, W, ids = build("rope", tmp, reference, np)

        def logits(extend, **changes):
            with reference.torch.no_grad():
                return reference.forward(dict(config, extend=extend, **changes), W, ids).numpy()
        plain = logits(None)
        for extend in ({"self_extend": {"window": T}}, {"self_extend": {"window": 8, "group": 1}},
                       {"self_extend": {"window": T, "group": 4, "mode": "llama.cpp"}},
                       {"self_extend": {"window": 8, "group": 1, "mode": "llama.cpp"}},
                       {"rerope": {"window": T}}, {"leaky_rerope": {"window": T}},
                       {"streaming": {"sinks": 4, "window": T - 4}}, {"streaming": {"sinks": 0, "window": T}},
                       {"blockwise": {"block": T}}, {"logn": {"trained": T}},
                       {"dca": {"chunk_size": T + 8, "local_size": 8}},
                       {"dca": {"chunk_size": T + 8, "local_size": 8, "original_max_position_embeddings": T}}):
            check(f"{json.dumps(extend)} vs plain", logits(extend), plain)
        check("leaky_rerope w=8 k=1e13 vs rerope w=8", logits({"leaky_rerope": {"window": 8, "factor": 1e13}}),
              logits({"rerope": {"window": 8}}))
        mistral = logits(None, architectures=["MistralForCausalLM"], sliding_window=8)
        for positions in ("cache", "original"):
            check(f"streaming S=0 W=8 {positions} vs Mistral's window 8",
                  logits({"streaming": {"sinks": 0, "window": 8, "positions": positions}}), mistral)
        for position in ({"type": "alibi"}, {"type": "none"}):
            check(f"{position['type']}: streaming S=4 W={T - 4} vs plain",
                  logits({"streaming": {"sinks": 4, "window": T - 4}}, position=position),
                  logits(None, position=position))

    # llama.cpp examples/main/main.cpp with n_batch 1: the positions its cache holds when token m is
    # decoded (seq_add adds to positions in [p0, p1), seq_div floors them), against the plan's.
    def group_attention_positions(W, G):
        pos, n_past, ga_i, out = [], 0, 0, []

        def seq(p0, p1, f):
            pos[:] = [f(p) if p0 <= p < p1 else p for p in pos]
        for _ in range(T):
            while n_past >= ga_i + W:
                ib, bd = G * ga_i // W, W // G * (G - 1)
                dd = W // G - ib * bd - W
                seq(ga_i, n_past, lambda p: p + ib * bd)
                seq(ga_i + ib * bd, ga_i + ib * bd + W, lambda p: p // G)
                seq(ga_i + ib * bd + W, n_past + ib * bd, lambda p: p + dd)
                n_past, ga_i = n_past - bd, ga_i + W // G
            pos.append(n_past)
            n_past += 1
            out.append(list(pos))  # query m at out[m][m], key n at out[m][n]
        return out
    for W, G in ((8, 4), (8, 2), (12, 3), (16, 8)):
        plan = ext.Plan({"self_extend": {"window": W, "group": G, "mode": "llama.cpp"}}, T)
        loop = group_attention_positions(W, G)
        bad = [(m, n) for m in range(T) for n in range(m + 1)
               if (loop[m][m] - loop[m][n]) != (m - n if plan.near[m, n] else plan.q_far[m] - plan.k_far[n])]
        none_differ(f"llama.cpp W={W} G={G}: distances vs main.cpp's loop", bad)

    # StreamingLLM's eval_long_ppl.py with pos-shift: the cache keeps S sinks and R = W - 1 recent
    # tokens; the query sits at its cache slot, every key at its own.
    for S, W in ((4, 16), (1, 8), (2, 12)):
        plan = ext.Plan({"streaming": {"sinks": S, "window": W, "positions": "cache"}}, T)
        visible = plan.mask(0)
        cache, bad = [], []
        for m in range(T):
            cache.append(m)
            for n in range(m + 1):
                want = (cache.index(m) - cache.index(n)) if n in cache else None
                got = (m - n if plan.near[m, n] else plan.q_far[m] - plan.k_far[n]) if visible[m, n] else None
                if want != got:
                    bad.append((m, n))
            if len(cache) > S + W - 1:
                cache = cache[:S] + cache[len(cache) - (W - 1):]
        none_differ(f"streaming S={S} W={W}: visible keys and distances vs StreamingLLM's cache", bad)
    # vLLM's dual_chunk_flash_attn: query i (L = i + 1 tokens, chunk n = (L - 1) // C) reads its
    # intra keys [nC, i] with q at i % C, succ keys [(n-1)C, nC) with q at min(i % C + C, cs), inter
    # keys [0, (n-1)C) with q at min(2C - 1, cs), every key at j % C (dual_chunk_rope's tables).
    for cs, ls in ((24, 8), (20, 6), (32, 4)):
        C = cs - ls
        plan = ext.Plan({"dca": {"chunk_size": cs, "local_size": ls, "original_max_position_embeddings": 0}}, T)
        bad = []
        for i in range(T):
            n = i // C
            for j in range(i + 1):
                q_at = i % C if j >= n * C else min(i % C + C, cs) if j >= (n - 1) * C else min(2 * C - 1, cs)
                want = q_at - j % C
                got = (i - j if plan.near[i, j] else
                       (plan.q_farther[i] if plan.farther[i, j] else plan.q_far[i]) - plan.k_far[j])
                if want != got or want > cs:
                    bad.append((i, j))
        none_differ(f"dca cs={cs} ls={ls}: distances vs vLLM's three parts and rope tables", bad)
    relative_loops(reference, np, check)
    content_loops(reference, np, check)
    cope_loops(reference, np, check)
    return check.exit_code()


def relative_loops(reference, np, check):
    """XL's and DeBERTa's terms, reference.relative_terms's gathers, against one loop per (m, n)
    pair over the papers' formulas (Dai et al. eq. (8) terms (b)-(d); He et al. eq. (4) with
    microsoft/DeBERTa's p2c index)."""
    torch = reference.torch
    g = torch.Generator().manual_seed(3)
    H, hd, d, T_, k = 3, 4, 12, 11, 4
    q, key = torch.randn(H, T_, hd, generator=g, dtype=torch.float64), torch.randn(H, T_, hd, generator=g, dtype=torch.float64)
    dist = torch.arange(T_)[:, None] - torch.arange(T_)[None, :]
    W = {"model.xl.r_w_bias": torch.randn(H, hd, generator=g, dtype=torch.float64),
         "model.xl.r_r_bias": torch.randn(H, hd, generator=g, dtype=torch.float64),
         "model.layers.0.self_attn.xl.r_net.weight": torch.randn(H * hd, d, generator=g, dtype=torch.float64),
         "model.rel_embeddings.weight": torch.randn(2 * k, d, generator=g, dtype=torch.float64),
         "model.layers.0.self_attn.pos_key_proj.weight": torch.randn(H * hd, d, generator=g, dtype=torch.float64),
         "model.layers.0.self_attn.pos_query_proj.weight": torch.randn(H * hd, d, generator=g, dtype=torch.float64),
         "model.layers.0.self_attn.pos_query_proj.bias": torch.randn(H * hd, generator=g, dtype=torch.float64)}
    u, v, WR = W["model.xl.r_w_bias"], W["model.xl.r_r_bias"], W["model.layers.0.self_attn.xl.r_net.weight"]
    P, Wk, Wq = (W["model.rel_embeddings.weight"], W["model.layers.0.self_attn.pos_key_proj.weight"],
                 W["model.layers.0.self_attn.pos_query_proj.weight"])
    bq = W["model.layers.0.self_attn.pos_query_proj.bias"]
    xl, deb = np.zeros((H, T_, T_)), np.zeros((H, T_, T_))
    for h in range(H):
        rows = slice(h * hd, (h + 1) * hd)
        for m in range(T_):
            for n in range(m + 1):
                R = [math.sin((m - n) / 10000 ** (2 * i / d)) for i in range(d // 2)] + \
                    [math.cos((m - n) / 10000 ** (2 * i / d)) for i in range(d // 2)]
                wr = WR[rows] @ torch.tensor(R, dtype=torch.float64)
                xl[h, m, n] = float(u[h] @ key[h, n] + (q[h, m] + v[h]) @ wr)
                c2p, p2c = min(max(m - n + k, 0), 2 * k - 1), min(max(m - n + k, 0), 2 * k - 1)
                deb[h, m, n] = float(q[h, m] @ (Wk[rows] @ P[c2p]) + key[h, n] @ (Wq[rows] @ P[p2c] + bq[rows]))
    causal = np.tril(np.ones((T_, T_), dtype=bool))
    for kind, want in (("xl", xl), ("deberta", deb)):
        got = reference.relative_terms({"type": kind, "max_relative_positions": k}, W, 0, q, key, dist, hd, 32).numpy()
        check(f"{kind}: relative terms vs a loop over pairs", np.where(causal, got, 0.0), want)


def content_loops(reference, np, check):
    """FoX's decay and stick-breaking's weights, reference.py's cumulative sums and matrix
    products, against one loop per (m, n) pair over the papers' formulas: sum over n < l <= m of
    ln f_l (Lin et al. eq. 5); beta_mn times prod over n < k < m of (1 - beta_mk), the query's own
    key the rest (Tan et al. eq. 2, the authors' attend_current=False and remainder)."""
    torch = reference.torch
    g = torch.Generator().manual_seed(5)
    H, d, T_ = 3, 8, 10
    h = torch.randn(T_, d, generator=g, dtype=torch.float64)
    W = {"model.layers.0.self_attn.fgate_proj.weight": torch.randn(H, d, generator=g, dtype=torch.float64),
         "model.layers.0.self_attn.fgate_proj.bias": torch.randn(H, generator=g, dtype=torch.float64)}
    f = 1 / (1 + torch.exp(-(h @ W["model.layers.0.self_attn.fgate_proj.weight"].T
                              + W["model.layers.0.self_attn.fgate_proj.bias"])))  # [T, H]
    fox = np.zeros((H, T_, T_))
    for a in range(H):
        for m in range(T_):
            for n in range(m + 1):
                fox[a, m, n] = sum(math.log(float(f[l, a])) for l in range(n + 1, m + 1))
    causal = np.tril(np.ones((T_, T_), dtype=bool))
    check("fox: decay vs a loop over pairs", np.where(causal, reference.fox_decay(W, 0, h).numpy(), 0.0), fox)
    z = torch.randn(H, T_, T_, generator=g, dtype=torch.float64) * 2
    z[:, 7, 2:5] = float("-inf")  # keys a query does not see (a window, a pattern's hole)
    z = z.masked_fill(~torch.tensor(causal), float("-inf"))
    sb = np.zeros((H, T_, T_))
    for a in range(H):
        for m in range(T_):
            beta = [1 / (1 + math.exp(-float(z[a, m, n]))) for n in range(m)]
            for n in range(m):
                sb[a, m, n] = beta[n] * math.prod(1 - beta[k] for k in range(n + 1, m))
            sb[a, m, m] = math.prod(1 - b for b in beta)
    check("stick-breaking: weights vs a loop over pairs", reference.stick_breaking(z).numpy(), sb)


def cope_loops(reference, np, check):
    """CoPE's term, reference.py's reversed cumulative sums and gathers, against one loop per (m, n)
    pair over the paper's formulas (Golovneva et al. eqs. 3-5): p_mn = sum over n <= k <= m of
    sigmoid(z_mk), capped at npos_max - 1; e(p) = (ceil p - p) e[floor p] + (p - floor p) e[ceil p]
    (e[p] at an integer p); the term q_m . e(p_mn)."""
    torch = reference.torch
    g = torch.Generator().manual_seed(6)
    H, d, T_ = 2, 4, 12
    for npos in (4, 20):
        E = torch.randn(npos, d, generator=g, dtype=torch.float64)
        W = {"model.layers.0.self_attn.cope_pos_emb": E}
        q = torch.randn(H, T_, d, generator=g, dtype=torch.float64)
        z = torch.randn(H, T_, T_, generator=g, dtype=torch.float64) * 2
        z[:, 9, 3:6] = float("-inf")  # keys a query does not see count nothing
        z[:, 10, 10] = 60.0  # a gate of 1 on the query's own key: p = 1, an integer position
        causal = np.tril(np.ones((T_, T_), dtype=bool))
        z = z.masked_fill(~torch.tensor(causal), float("-inf"))
        want = np.zeros((H, T_, T_))
        for a in range(H):
            for m in range(T_):
                for n in range(m + 1):
                    p = min(sum(1 / (1 + math.exp(-float(z[a, m, k]))) for k in range(n, m + 1)), npos - 1)
                    lo, hi = math.floor(p), math.ceil(p)
                    e = E[lo] if lo == hi else (hi - p) * E[lo] + (p - lo) * E[hi]
                    want[a, m, n] = float(q[a, m] @ e)
        got = reference.cope_bias({"type": "cope", "npos_max": npos}, W, 0, z, q, 32).numpy()
        check(f"cope (npos_max {npos}): position term vs a loop over pairs", np.where(causal, got, 0.0), want)


def check_case(case, binary, prepared, np, Checker, pert_logits, pert_attention):
    """pert's logits for the case against the reference's, read from prepared/CASE or, without
    prepared, computed here first."""
    length_dependent = CASES[case][2]
    switch = whole_sequence_switch(case)
    check = Checker(case)
    with tempfile.TemporaryDirectory() as tmp:
        data = os.path.join(prepared, case) if prepared else tmp
        if not prepared:
            from reference import reference
            prepare(case, tmp, reference, np)
        with open(os.path.join(data, "ids.json")) as f:
            ids = json.load(f)
        model = os.path.join(data, "model")

        def ref(n):  # the reference's logits for the first n tokens
            return np.load(os.path.join(data, f"ref_{n}.npy"))

        def run_pert(n, chunk=None):
            return pert_logits(binary, model, ids[:n], tmp, chunk)

        def want(chunk):  # the reference's logits of the T ids fed `chunk` at a time
            return by_forward_end(ref, switch, chunk, np) if switch else ref(T)

        prefill = run_pert(T)
        check("prefill vs reference", prefill, ref(T))
        decode = run_pert(T, 1)
        check("decode vs reference", decode, want(1))
        chunks = run_pert(T, 7)
        check("chunks of 7 vs reference", chunks, want(7))
        with open(os.path.join(data, "attention.json")) as f:
            attention = json.load(f)
        for chunk, how, logits in ((None, "prefill", prefill), (1, "decode", decode), (7, "chunks of 7", chunks)):
            stats, observed = pert_attention(binary, model, ids, tmp, chunk, SINK)
            # (LongRoPE by the sequence: a run in pieces weighs its early queries with the short
            # factors, the reference's one forward with the long ones; only the prefill compares)
            if not switch or chunk is None:
                check.attention(f"attention statistics, {how}", stats, attention)
            # While statistics are kept one query a step takes the prefill kernel, and a scheme
            # whose rotations depend on the length runs a length class a step: the same
            # weights by another float path. Otherwise summing them leaves the weights as they are.
            if chunk == 1 or length_dependent:
                check(f"{how} logits with statistics vs reference", observed, want(chunk))
            else:
                check.exactly(f"{how} logits with statistics vs without", observed, logits)
        if switch:  # past L0 both hold every position with the long factors; below it see want(1)
            check(f"prefill vs decode (pert) from position {switch}", prefill[switch:], decode[switch:])
            for n in reference_lengths(case)[1:]:
                fresh = run_pert(n)
                check(f"prefill of {n} tokens vs reference", fresh, ref(n))
                check(f"decode step {n - 1} vs fresh prefill of {n} tokens", decode[n - 1], fresh[n - 1])
                whole = ref(switch) if n <= switch else ref(T)
                check(f"reference: {n} tokens vs the first {n} of {switch if n <= switch else T}", ref(n), whole[:n])
            # pert's greedy is its decode's argmax step by step: fed the reference's greedy ids
            # one at a time, each step's argmax must be the next of them (past L0 too)
            with open(os.path.join(data, "greedy.json")) as f:
                greedy = json.load(f)
            prompt = switch - 4
            seq = ids[:prompt] + greedy
            steps = pert_logits(binary, model, seq, tmp, 1)[prompt - 1:-1].argmax(axis=-1).tolist()
            same = steps == greedy
            print(f"{case:28s} {'greedy decode crossing L0 vs reference':46s} {'equal' if same else 'DIFFER'}"
                  f" ({len(greedy)} ids from a prompt of {prompt})")
            if not same:
                print(f"  pert: {steps}\n  want: {greedy}")
                check.failures.append("greedy decode")
            return check.exit_code()
        check("prefill vs decode (pert)", prefill, decode)
        if length_dependent:
            for n in reference_lengths(case)[1:]:
                check(f"decode step {n - 1} vs fresh prefill of {n} tokens", decode[:n], run_pert(n))
                check(f"reference: {n} tokens vs the first {n} of {T}", ref(n), ref(T)[:n])
    return check.exit_code()


def main():
    if sys.argv[1] == "--list":
        print(";".join(CASES))
        return 0
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools"))
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "helpers"))
    import numpy as np
    from logits_check import Checker, pert_attention, pert_logits

    if sys.argv[1] not in ("--sanity", "--prepare", "--reference-only"):
        prepared = sys.argv[4] if sys.argv[3:4] == ["--prepared"] else None
        return check_case(sys.argv[1], sys.argv[2], prepared, np, Checker, pert_logits, pert_attention)
    from reference import reference
    if sys.argv[1] == "--sanity":
        return sanity(reference, np, Checker)
    if sys.argv[1] == "--prepare":
        return prepare_all(sys.argv[2], reference, np)
    case = sys.argv[2]  # --reference-only: the reference alone, finite and causal (a prefix's logits are the same)
    check = Checker(case, tol=1e-10)
    with tempfile.TemporaryDirectory() as tmp:
        _, config, W, ids = build(case, tmp, reference, np)
        switch = whole_sequence_switch(case)  # LongRoPE by the sequence: causal within each class
        lengths = (1, L - 1, L, L + 1, 2 * L + 3, T - 1) + ((switch - 1, switch, switch + 1) if switch else ())
        with reference.torch.no_grad():
            ref = {n: reference.forward(config, W, ids[:n]).numpy() for n in lengths + (T,)}
        check("reference: finite", np.array(0.0 if np.isfinite(ref[T]).all() else np.inf), 0.0)
        for n in lengths:
            whole = switch if switch and n <= switch else T
            check(f"reference: {n} tokens vs the first {n} of {whole}", ref[n], ref[whole][:n])
    return check.exit_code()


if __name__ == "__main__":
    sys.exit(main())
