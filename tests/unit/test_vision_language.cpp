// The vision-language configs as published: Gemma 3's sparse text_config read with
// Gemma3TextConfig's defaults, Qwen3-VL-MoE's experts and M-RoPE, and what is refused.
#include <cmath>

#include "attention/positions/rope.hpp"
#include "pert/config.hpp"
#include "pert/error.hpp"
#include "test_util.hpp"

using namespace pert;

namespace vl_test {
const std::string kConfigPath = "gemma/config.json";
ModelConfig parse_vl(const json& j) { return parse_model_config(j, kConfigPath); }

// google/gemma-3-4b-it's config.json (its vision_config shortened)
json gemma3_4b() {
  return json::parse(R"({
    "architectures": ["Gemma3ForConditionalGeneration"], "boi_token_index": 255999, "eoi_token_index": 256000,
    "eos_token_id": [1, 106], "image_token_index": 262144, "initializer_range": 0.02, "mm_tokens_per_image": 256,
    "model_type": "gemma3",
    "text_config": {"hidden_size": 2560, "intermediate_size": 10240, "model_type": "gemma3_text", "num_hidden_layers": 34,
                    "rope_scaling": {"factor": 8.0, "rope_type": "linear"}, "sliding_window": 1024},
    "torch_dtype": "bfloat16", "transformers_version": "4.50.0.dev0",
    "vision_config": {"hidden_size": 1152, "image_size": 896, "model_type": "siglip_vision_model", "patch_size": 14,
                      "vision_use_head": false}})");
}

// Qwen/Qwen3-VL-30B-A3B-Instruct's config.json (its vision_config shortened)
json qwen3_vl_30b_a3b() {
  return json::parse(R"({
    "architectures": ["Qwen3VLMoeForConditionalGeneration"], "image_token_id": 151655, "model_type": "qwen3_vl_moe",
    "text_config": {"attention_bias": false, "attention_dropout": 0.0, "bos_token_id": 151643, "decoder_sparse_step": 1,
                    "dtype": "bfloat16", "eos_token_id": 151645, "head_dim": 128, "hidden_act": "silu", "hidden_size": 2048,
                    "initializer_range": 0.02, "intermediate_size": 6144, "max_position_embeddings": 262144,
                    "mlp_only_layers": [], "model_type": "qwen3_vl_moe_text", "moe_intermediate_size": 768,
                    "norm_topk_prob": true, "num_attention_heads": 32, "num_experts": 128, "num_experts_per_tok": 8,
                    "num_hidden_layers": 48, "num_key_value_heads": 4, "rms_norm_eps": 1e-06,
                    "rope_scaling": {"mrope_interleaved": true, "mrope_section": [24, 20, 20], "rope_type": "default"},
                    "rope_theta": 5000000, "router_aux_loss_coef": 0.001, "use_cache": true, "vocab_size": 151936},
    "tie_word_embeddings": false, "transformers_version": "4.57.0.dev0", "video_token_id": 151656,
    "vision_config": {"deepstack_visual_indexes": [8, 16, 24], "depth": 27, "model_type": "qwen3_vl_moe"},
    "vision_end_token_id": 151653, "vision_start_token_id": 151652})");
}
}  // namespace vl_test

TEST_CASE("vision-language: Gemma 3 4B's sparse text_config with Gemma3TextConfig's defaults", "[config][vl]") {
  using namespace vl_test;
  const ModelConfig m = parse_vl(gemma3_4b());
  CHECK(m.architecture == "Gemma3ForConditionalGeneration");
  CHECK((m.vocab_size == 262208 && m.hidden_size == 2560 && m.n_layers == 34));
  CHECK((m.n_heads == 8 && m.n_kv_heads == 4 && m.head_dim == 256));
  CHECK(m.max_position_embeddings == 131072);
  CHECK(m.attention_scale == Approx(1.0 / 16.0));  // query_pre_attn_scalar 256
  CHECK((m.tie_word_embeddings && m.qk_norm && m.norm_plus_one && m.sandwich_norms));
  CHECK(m.bos_token_id == 2);
  CHECK(m.eos_token_ids == std::vector<int>{1, 106});  // the top level's
  for (int i = 0; i < 34; ++i) {
    const bool global = (i + 1) % 6 == 0;
    INFO("layer " << i);
    CHECK(m.layers[size_t(i)].window == (global ? 0 : 1024));
    const RopeConfig& r = m.layers[size_t(i)].position.as<RopeConfig>();
    CHECK(r.base == (global ? 1e6 : 1e4));
    CHECK(r.scaling.type == (global ? RopeScalingType::Linear : RopeScalingType::None));
  }
}

TEST_CASE("vision-language: Gemma 3 27B's keys win over the defaults, the top level's over text_config's", "[config][vl]") {
  using namespace vl_test;
  json c = gemma3_4b();
  c["text_config"].update(json{{"head_dim", 128}, {"hidden_size", 5376}, {"intermediate_size", 21504},
                               {"num_attention_heads", 32}, {"num_hidden_layers", 62}, {"num_key_value_heads", 16},
                               {"query_pre_attn_scalar", 168}});
  c["max_position_embeddings"] = 4096;  // (an override at the top level)
  const ModelConfig m = parse_vl(c);
  CHECK((m.n_heads == 32 && m.n_kv_heads == 16 && m.head_dim == 128 && m.n_layers == 62));
  CHECK(m.attention_scale == Approx(1.0 / std::sqrt(168.0)));
  CHECK(m.max_position_embeddings == 4096);
  // Gemma3ForCausalLM keeps pert's own defaults: its published configs are complete
  json text = c["text_config"];
  text["architectures"] = {"Gemma3ForCausalLM"};
  text.erase("rope_scaling");
  REQUIRE_THROWS_NAMING(parse_vl(text), ConfigError, kConfigPath, "vocab_size is required");
  c["text_config"] = "gemma3_text";
  REQUIRE_THROWS_NAMING(parse_vl(c), ConfigError, kConfigPath, "text_config must be an object");
}

TEST_CASE("vision-language: Qwen3-VL-30B-A3B's language model: Qwen3-MoE's experts, interleaved M-RoPE", "[config][vl][moe]") {
  using namespace vl_test;
  json c = qwen3_vl_30b_a3b();
  ModelConfig m = parse_vl(c);
  CHECK((m.n_layers == 48 && m.hidden_size == 2048 && m.head_dim == 128 && m.n_kv_heads == 4 && m.qk_norm));
  CHECK((m.moe.n_experts == 128 && m.moe.n_used == 8 && m.moe.expert_ffn == 768 && m.moe.renormalize));
  CHECK((m.moe.sparse_layer(0) && m.moe.sparse_layer(47)));
  const RopeConfig& r = m.position.as<RopeConfig>();
  CHECK((r.base == 5e6 && r.mrope_interleaved && r.mrope_section == std::vector<int>{24, 20, 20}));
  CHECK(m.layers[0].window == 0);

  // Qwen3VLMoeTextConfig's defaults where the keys are left out: 60 experts, 4 a token, width 1408, base 5e6
  json sparse = c;
  for (const char* key : {"num_experts", "num_experts_per_tok", "moe_intermediate_size", "norm_topk_prob", "rope_theta"})
    sparse["text_config"].erase(key);
  m = parse_vl(sparse);
  CHECK((m.moe.n_experts == 60 && m.moe.n_used == 4 && m.moe.expert_ffn == 1408 && m.moe.renormalize));
  CHECK(m.position.as<RopeConfig>().base == 5e6);
  c["text_config"]["mlp_only_layers"] = {0, 5};
  CHECK_FALSE(parse_vl(c).moe.sparse_layer(5));

  json bad = qwen3_vl_30b_a3b();
  bad["text_config"]["norm_topk_prob"] = false;
  REQUIRE_THROWS_NAMING(parse_vl(bad), ConfigError, kConfigPath, "norm_topk_prob is false, but Qwen3VLMoeForConditionalGeneration's router");
  bad = qwen3_vl_30b_a3b();
  bad["text_config"]["rope_scaling"]["mrope_interleaved"] = false;
  REQUIRE_THROWS_NAMING(parse_vl(bad), ConfigError, kConfigPath, "mrope_interleaved is false");
}
