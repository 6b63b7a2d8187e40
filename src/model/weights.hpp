// A loaded model's matrices and vectors, as the forward pass (inference_state.cpp) reads them:
// each matrix a Weight in the type it is kept in (kernels/ops.hpp), norms and biases F32. The
// storage is here too: what load converted or packed, or the GGUF mapping read in place.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "kernels/ops.hpp"
#include "kernels/quants.hpp"

namespace pert {

// One expert's gated MLP.
struct ExpertWeights {
  Weight gate, up;  // [width][d]
  Weight down;      // [d][width]
  const float *b_gate = nullptr, *b_up = nullptr, *b_down = nullptr;  // [width] [width] [d] (gpt-oss)
};

// A layer's mixture of experts (ModelConfig::moe); no experts in a dense layer.
struct MoeWeights {
  const float* router = nullptr;       // [n_experts][d], kept F32: the choice of experts is not rounded
  const float* router_bias = nullptr;  // [n_experts]: added to the logits (gpt-oss)
  const float* score_bias = nullptr;   // [n_experts]: DeepSeek V3's e_score_correction_bias (chooses only)
  std::vector<ExpertWeights> experts;  // [n_experts]
  ExpertWeights shared;                // Qwen2-MoE's shared expert, when shared_gate is set
  const float* shared_gate = nullptr;  // [d]: σ(x·w) scales the shared expert's output
};

// A layer's multi-head latent attention (ModelConfig::mla; mla.hpp), in place of wq/wk/wv.
struct MlaWeights {
  Weight q;                            // [n_heads·qk_head_dim][d] without q_lora_rank
  Weight q_a, q_b;                     // [q_lora_rank][d], [n_heads·qk_head_dim][q_lora_rank]
  const float* q_a_norm = nullptr;     // [q_lora_rank]
  Weight kv_a;                         // [kv_lora_rank + qk_rope_head_dim][d]
  const float* kv_a_norm = nullptr;    // [kv_lora_rank]
  const float* kv_b = nullptr;         // [n_heads][qk_nope_head_dim + v_head_dim][kv_lora_rank], F32: each head's v rows expand its output
  const float* k_absorb = nullptr;     // [n_heads][kv_lora_rank][qk_nope_head_dim]: each head's k_nope rows of kv_b, transposed
};

struct LayerWeights {
  const float* attn_norm;  // [d]
  Weight wq;               // [n_heads·head_dim][d]
  Weight wk;               // [n_kv_heads·head_dim][d]
  Weight wv;               // [n_kv_heads·head_dim][d]
  Weight wo;               // [d][n_heads·head_dim]
  const float* ffn_norm;   // [d]; null for a parallel block (Cohere: the MLP reads attn_norm's output)
  Weight w_gate;           // [ffn][d]
  Weight w_up;             // [ffn][d]
  Weight w_down;           // [d][ffn]
  // Biases, null where the architecture has none (ModelConfig::qkv_bias, o_bias, mlp_bias).
  const float *bq = nullptr, *bk = nullptr, *bv = nullptr, *bo = nullptr;  // [q_dim] [kv_dim] [kv_dim] [d]
  const float *b_gate = nullptr, *b_up = nullptr, *b_down = nullptr;         // [ffn] [ffn] [d]
  const float *q_norm = nullptr, *k_norm = nullptr;  // [head_dim] each (ModelConfig::qk_norm)
  const float* sink_logits = nullptr;                 // [n_heads] (ModelConfig::sink_logits)
  // Gemma: the attention's and the MLP's outputs normalised before they join x (sandwich_norms)
  const float *post_attn_norm = nullptr, *post_ffn_norm = nullptr;  // [d] each
  MoeWeights moe = {};  // in place of gate/up/down where the layer is sparse
  MlaWeights mla = {};  // DeepSeek's attention front end; wo is then [d][n_heads·v_head_dim]
};

struct ModelWeights {
  Weight embed;                       // [vocab][d]
  std::vector<LayerWeights> layers;   // [n_layers]
  const float* final_norm = nullptr;  // [d]
  Weight lm_head;                     // [vocab][d]; the embedding when tied

  Weight weight(const std::string& name) const;  // a matrix, in whichever type it is kept
  const float* tensor(const std::string& name) const;  // an F32 tensor; pert::Error when absent
  const float* optional_tensor(const std::string& name) const;  // null when absent

  // The storage, by HF tensor name (Phi-3's fused matrices split into llama's parts).
  std::map<std::string, std::vector<float>> f32;
  std::map<std::string, std::vector<uint16_t>> bf16;  // ops.hpp's packed BF16 layout
  struct Q8Tensor {
    std::vector<uint8_t> packed;   // ops.hpp's Q8 layout
    std::vector<uint16_t> scales;  // F16
  };
  std::map<std::string, Q8Tensor> q8;
  std::map<std::string, std::vector<uint8_t>> made_blocks;  // made at load: GGML blocks, [N] rows or panels of 8
  std::map<std::string, BlockMatrix> blocks;               // into made_blocks or the GGUF mapping
  std::shared_ptr<const void> mapping;                     // the GGUF mapping, while `blocks` use it
};

}  // namespace pert
