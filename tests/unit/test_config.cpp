#include <cmath>

#include "pert/config.hpp"
#include "attention/positions/rope.hpp"
#include "pert/error.hpp"
#include "pert/positions.hpp"
#include "test_util.hpp"

using namespace pert;

namespace {

const std::string kSource = "dir/config.json";

ModelConfig parse(const json& j) { return parse_model_config(j, kSource); }

std::vector<int> windows(const ModelConfig& m) {
  std::vector<int> out;
  for (const LayerAttention& l : m.layers) out.push_back(l.window);
  return out;
}

json with_position(json position) {
  json c = tiny_config();
  c["position"] = std::move(position);
  return c;
}

json with_scaling(json scaling) { return with_position({{"type", "rope"}, {"scaling", std::move(scaling)}}); }

}  // namespace

TEST_CASE("config: a plain HF llama config resolves to RoPE with HF defaults", "[config]") {
  json c = tiny_config();
  c.erase("rms_norm_eps");
  c.erase("num_key_value_heads");
  c.erase("rope_theta");
  const ModelConfig m = parse(c);
  CHECK(m.vocab_size == 32);
  CHECK(m.hidden_size == 16);
  CHECK(m.intermediate_size == 24);
  CHECK(m.n_layers == 2);
  CHECK(m.n_heads == 4);
  CHECK(m.n_kv_heads == 4);
  CHECK(m.head_dim == 4);
  CHECK(m.max_position_embeddings == 64);
  CHECK(m.rms_norm_eps == 1e-6);
  CHECK(m.bos_token_id == 1);
  CHECK(m.eos_token_ids == std::vector<int>{2});
  CHECK(m.position.type() == "rope");
  CHECK(m.position.as<RopeConfig>().base == 10000.0);
  CHECK(m.position.as<RopeConfig>().rotary_dim == 4);
  CHECK(m.position.as<RopeConfig>().layout == RopeLayout::Half);
  CHECK(m.position.as<RopeConfig>().scaling.type == RopeScalingType::None);
  CHECK_FALSE(m.position.as<RopeConfig>().xpos.enabled);
}

TEST_CASE("config: HF rope keys become the position block", "[config]") {
  json c = tiny_config();
  c["rope_theta"] = 500000.0;
  c["head_dim"] = 8;
  c["partial_rotary_factor"] = 0.5;
  c["eos_token_id"] = {2, 3};
  SECTION("llama3 (rope_type key)") {
    c["rope_scaling"] = {{"rope_type", "llama3"}, {"factor", 8.0}, {"low_freq_factor", 1.0},
                         {"high_freq_factor", 4.0}, {"original_max_position_embeddings", 8192}};
    const ModelConfig m = parse(c);
    CHECK(m.head_dim == 8);
    CHECK(m.position.as<RopeConfig>().base == 500000.0);
    CHECK(m.position.as<RopeConfig>().rotary_dim == 4);
    CHECK(m.eos_token_ids == std::vector<int>{2, 3});
    CHECK(m.position.as<RopeConfig>().scaling.type == RopeScalingType::Llama3);
    CHECK(m.position.as<RopeConfig>().scaling.factor == 8.0);
    CHECK(m.position.as<RopeConfig>().scaling.original_max_position == 8192);
  }
  SECTION("yarn (legacy type key) with the default attention factor") {
    c["rope_scaling"] = {{"type", "yarn"}, {"factor", 4.0}};
    const ModelConfig m = parse(c);
    CHECK(m.position.as<RopeConfig>().scaling.type == RopeScalingType::Yarn);
    CHECK(m.position.as<RopeConfig>().scaling.original_max_position == 64);
    CHECK(m.position.as<RopeConfig>().scaling.attention_factor == Approx(0.1 * std::log(4.0) + 1.0));
    CHECK(m.position.as<RopeConfig>().scaling.beta_fast == 32.0);
    CHECK(m.position.as<RopeConfig>().scaling.beta_slow == 1.0);
  }
  SECTION("'default' means no scaling, 'su' is longrope") {
    c["rope_scaling"] = {{"rope_type", "default"}};
    CHECK(parse(c).position.as<RopeConfig>().scaling.type == RopeScalingType::None);
    c["rope_scaling"] = {{"type", "su"}, {"short_factor", {1.0, 1.5}}, {"long_factor", {2.0, 4.0}}};
    c["original_max_position_embeddings"] = 32;
    const ModelConfig m = parse(c);
    CHECK(m.position.as<RopeConfig>().scaling.type == RopeScalingType::LongRope);
    CHECK(m.position.as<RopeConfig>().scaling.original_max_position == 32);
    CHECK(m.position.as<RopeConfig>().scaling.factor == 2.0);  // max_position_embeddings / original
    CHECK(m.position.as<RopeConfig>().scaling.attention_factor == Approx(std::sqrt(1.0 + std::log(2.0) / std::log(32.0))));
  }
  SECTION("rope_scaling errors name the key") {
    c["rope_scaling"] = {{"factor", 2.0}};
    REQUIRE_THROWS_NAMING(parse(c), ConfigError, kSource, "rope_scaling", "rope_type");
    c["rope_scaling"] = {{"rope_type", "stretch"}, {"factor", 2.0}};
    REQUIRE_THROWS_NAMING(parse(c), ConfigError, kSource, "position.scaling.type", "'stretch'");
    c["rope_scaling"] = {{"rope_type", "mrope"}, {"factor", 2.0}};  // HF's legacy name of default
    REQUIRE_THROWS_NAMING(parse(c), ConfigError, kSource, "rope_scaling.factor is set (2.0)");
    c["rope_scaling"] = "linear";
    REQUIRE_THROWS_NAMING(parse(c), ConfigError, kSource, "rope_scaling must be an object");
  }
}

TEST_CASE("config: every scheme is accepted with its parameters and defaults", "[config]") {
  SECTION("none") { CHECK(parse(with_position({{"type", "none"}})).position.type() == "none"); }
  SECTION("learned") {  // schemes other than rope keep their block private: read it back as JSON
    json p = to_json(parse(with_position({{"type", "learned"}})).position);
    CHECK(p == json{{"type", "learned"}, {"max_positions", 64}, {"beyond", "error"}});
    p = to_json(parse(with_position({{"type", "learned"}, {"max_positions", 100}, {"beyond", "clamp"}})).position);
    CHECK(p == json{{"type", "learned"}, {"max_positions", 100}, {"beyond", "clamp"}});
  }
  SECTION("sinusoidal") {
    json p = to_json(parse(with_position({{"type", "sinusoidal"}})).position);
    CHECK(p == json{{"type", "sinusoidal"}, {"base", 10000.0}, {"embed_scale", 1.0}});
    p = to_json(parse(with_position({{"type", "sinusoidal"}, {"base", 500.0}, {"embed_scale", 4.0}})).position);
    CHECK(p == json{{"type", "sinusoidal"}, {"base", 500.0}, {"embed_scale", 4.0}});
  }
  SECTION("rope with layout, partial rotary and xpos") {
    const ModelConfig m = parse(with_position({{"type", "rope"}, {"base", 5e5}, {"rotary_dim", 2},
                                                {"layout", "interleaved"}, {"xpos", json::object()}}));
    const RopeConfig& p = m.position.as<RopeConfig>();
    CHECK(p.base == 5e5);
    CHECK(p.rotary_dim == 2);
    CHECK(p.layout == RopeLayout::Interleaved);
    CHECK(p.xpos.enabled);
    CHECK(p.xpos.gamma == 0.4);
    CHECK(p.xpos.scale_base == 512.0);
    const ModelConfig mq = parse(with_position({{"type", "rope"}, {"xpos", {{"gamma", 0.5}, {"scale_base", 256}}}}));
    const RopeConfig& q = mq.position.as<RopeConfig>();
    CHECK(q.xpos.gamma == 0.5);
    CHECK(q.xpos.scale_base == 256.0);
  }
  SECTION("rope scaling: linear, ntk, dynamic") {
    for (const char* type : {"linear", "ntk", "dynamic"}) {
      const RopeScaling s = parse(with_scaling({{"type", type}, {"factor", 4}})).position.as<RopeConfig>().scaling;
      CHECK(std::string(rope_scaling_name(s.type)) == type);
      CHECK(s.factor == 4.0);
      CHECK(s.original_max_position == 64);
      CHECK(s.attention_factor == 1.0);
    }
    const RopeScaling s = parse(with_scaling({{"type", "linear"}, {"factor", 2}, {"original_max_position_embeddings", 16}})).position.as<RopeConfig>().scaling;
    CHECK(s.original_max_position == 16);
  }
  SECTION("rope scaling: yarn") {
    const RopeScaling s = parse(with_scaling({{"type", "yarn"}, {"factor", 8}, {"beta_fast", 16}, {"beta_slow", 2},
                                              {"attention_factor", 1.5}})).position.as<RopeConfig>().scaling;
    CHECK(s.factor == 8.0);
    CHECK(s.beta_fast == 16.0);
    CHECK(s.beta_slow == 2.0);
    CHECK(s.attention_factor == 1.5);
  }
  SECTION("rope scaling: llama3") {
    const RopeScaling s = parse(with_scaling({{"type", "llama3"}, {"factor", 8}})).position.as<RopeConfig>().scaling;
    CHECK(s.low_freq_factor == 1.0);
    CHECK(s.high_freq_factor == 4.0);
  }
  SECTION("rope scaling: longrope") {
    const RopeScaling s = parse(with_scaling({{"type", "longrope"}, {"factor", 4}, {"short_factor", {1.0, 1.1}},
                                              {"long_factor", {3.0, 5.0}}})).position.as<RopeConfig>().scaling;
    CHECK(s.short_factor == std::vector<double>{1.0, 1.1});
    CHECK(s.long_factor == std::vector<double>{3.0, 5.0});
    CHECK(s.attention_factor == Approx(std::sqrt(1.0 + std::log(4.0) / std::log(64.0))));
  }
  SECTION("alibi") {
    CHECK(parse(with_position({{"type", "alibi"}})).position.scheme->to_json()["max_bias"] == 8.0);
    CHECK(parse(with_position({{"type", "alibi"}, {"max_bias", 16}})).position.scheme->to_json()["max_bias"] == 16.0);
  }
  SECTION("t5") {
    json p = to_json(parse(with_position({{"type", "t5"}})).position);
    CHECK(p == json{{"type", "t5"}, {"num_buckets", 32}, {"max_distance", 128}});
    p = to_json(parse(with_position({{"type", "t5"}, {"num_buckets", 16}, {"max_distance", 64}})).position);
    CHECK(p == json{{"type", "t5"}, {"num_buckets", 16}, {"max_distance", 64}});
  }
}

TEST_CASE("config: the resolved config parses back to itself", "[config]") {
  for (const json& position : {json{{"type", "none"}}, json{{"type", "learned"}, {"beyond", "clamp"}},
                               json{{"type", "sinusoidal"}, {"embed_scale", 4.0}},
                               json{{"type", "rope"}, {"scaling", {{"type", "yarn"}, {"factor", 4}}}, {"xpos", json::object()}},
                               json{{"type", "rope"}, {"scaling", {{"type", "llama3"}, {"factor", 4}}}},
                               json{{"type", "rope"}, {"scaling", {{"type", "longrope"}, {"short_factor", {1, 1}}, {"long_factor", {2, 2}}}}},
                               json{{"type", "alibi"}}, json{{"type", "t5"}}}) {
    const json resolved = to_json(parse(with_position(position)));
    INFO(resolved.dump());
    CHECK(to_json(parse(resolved)) == resolved);
  }
}

TEST_CASE("config: bad values are refused with the file and the key named", "[config]") {
  json c = tiny_config();
  SECTION("not an object") { REQUIRE_THROWS_NAMING(parse(json::array()), ConfigError, kSource, "JSON object"); }
  SECTION("missing required key") {
    c.erase("hidden_size");
    REQUIRE_THROWS_NAMING(parse(c), ConfigError, kSource, "hidden_size is required");
  }
  SECTION("wrong types and ranges") {
    c["hidden_size"] = "16";
    REQUIRE_THROWS_NAMING(parse(c), ConfigError, kSource, "hidden_size must be an integer");
    c["hidden_size"] = 16.5;
    REQUIRE_THROWS_NAMING(parse(c), ConfigError, kSource, "hidden_size must be an integer");
    c["hidden_size"] = 0;
    REQUIRE_THROWS_NAMING(parse(c), ConfigError, kSource, "hidden_size must be in [1,");
    c["hidden_size"] = -16;
    REQUIRE_THROWS_NAMING(parse(c), ConfigError, kSource, "hidden_size must be in [1,");
    c["hidden_size"] = 18446744073709551615ull;
    REQUIRE_THROWS_NAMING(parse(c), ConfigError, kSource, "hidden_size must be at most");
    c = tiny_config();
    c["rms_norm_eps"] = 0;
    REQUIRE_THROWS_NAMING(parse(c), ConfigError, kSource, "rms_norm_eps must be > 0");
    c["rms_norm_eps"] = "tiny";
    REQUIRE_THROWS_NAMING(parse(c), ConfigError, kSource, "rms_norm_eps must be a finite number");
    // Values the kernels would turn into inf or a denormal in float are refused here.
    c["rms_norm_eps"] = 1e300;
    REQUIRE_THROWS_NAMING(parse(c), ConfigError, kSource, "rms_norm_eps must be a finite number in float's range", "1e+300");
    c["rms_norm_eps"] = 1e-320;
    REQUIRE_THROWS_NAMING(parse(c), ConfigError, kSource, "rms_norm_eps must be a finite number in float's range");
    c = tiny_config();
    c["tie_word_embeddings"] = 1;
    REQUIRE_THROWS_NAMING(parse(c), ConfigError, kSource, "tie_word_embeddings must be true or false");
  }
  SECTION("token ids outside the vocabulary") {
    c["eos_token_id"] = 32;
    REQUIRE_THROWS_NAMING(parse(c), ConfigError, kSource, "eos_token_id", "[0, vocab_size = 32)");
    c["eos_token_id"] = {2, -1};
    REQUIRE_THROWS_NAMING(parse(c), ConfigError, kSource, "eos_token_id");
    c["eos_token_id"] = 2;
    c["bos_token_id"] = {1, 2};
    REQUIRE_THROWS_NAMING(parse(c), ConfigError, kSource, "bos_token_id must be a single token id");
  }
  SECTION("inconsistent dimensions") {
    c["num_attention_heads"] = 3;
    c["num_key_value_heads"] = 3;
    REQUIRE_THROWS_NAMING(parse(c), ConfigError, kSource, "num_attention_heads (3) must divide hidden_size (16)");
    c = tiny_config();
    c["num_key_value_heads"] = 3;
    REQUIRE_THROWS_NAMING(parse(c), ConfigError, kSource, "num_key_value_heads (3) must divide num_attention_heads (4)");
    c["num_key_value_heads"] = 8;
    REQUIRE_THROWS_NAMING(parse(c), ConfigError, kSource, "num_key_value_heads (8) must divide");
    c = tiny_config();
    c["head_dim"] = 5;
    REQUIRE_THROWS_NAMING(parse(c), ConfigError, kSource, "position.rotary_dim must be even", "head_dim 5");
    c = tiny_config();
    c["position"] = {{"type", "rope"}, {"rotary_dim", 3}};
    REQUIRE_THROWS_NAMING(parse(c), ConfigError, kSource, "position.rotary_dim must be even");
    c["position"] = {{"type", "rope"}, {"rotary_dim", 6}};
    REQUIRE_THROWS_NAMING(parse(c), ConfigError, kSource, "position.rotary_dim must be in [2, head_dim = 4]");
    c = tiny_config();
    c["hidden_size"] = 15;
    c["head_dim"] = 4;
    c["position"] = {{"type", "sinusoidal"}};
    REQUIRE_THROWS_NAMING(parse(c), ConfigError, kSource, "sinusoidal needs an even hidden_size");
  }
  SECTION("architectures pert does not compute") {
    c["hidden_act"] = "gelu";
    REQUIRE_THROWS_NAMING(parse(c), ConfigError, kSource, "hidden_act must be \"silu\"");
    c = tiny_config();
    c["architectures"] = {"GemmaForCausalLM"};
    REQUIRE_THROWS_NAMING(parse(c), ConfigError, kSource, "architectures 'GemmaForCausalLM' is not an architecture pert reads",
                          "Qwen2ForCausalLM");
    c = tiny_config();
    c.erase("architectures");
    c["model_type"] = "gpt2";
    REQUIRE_THROWS_NAMING(parse(c), ConfigError, kSource, "model_type 'gpt2' is not a model type pert reads");
    c = tiny_config();
    c["model_type"] = "mistral";
    REQUIRE_THROWS_NAMING(parse(c), ConfigError, kSource, "model_type 'mistral' does not match architectures LlamaForCausalLM");
    c = tiny_config();
    c["final_logit_softcapping"] = 30.0;
    REQUIRE_THROWS_NAMING(parse(c), ConfigError, kSource, "final_logit_softcapping is not read by LlamaForCausalLM",
                          "Gemma2ForCausalLM, Gemma3ForCausalLM and Gemma3ForConditionalGeneration read it");
    c = tiny_config();
    c["sliding_window"] = 8;  // HF's Llama ignores it: refused rather than silently full attention
    REQUIRE_THROWS_NAMING(parse(c), ConfigError, kSource, "sliding_window is not read by LlamaForCausalLM");
    c["architectures"] = {"MistralForCausalLM"};
    c["model_type"] = "mistral";
    c["attention_bias"] = true;
    REQUIRE_THROWS_NAMING(parse(c), ConfigError, kSource, "attention_bias is true, but MistralForCausalLM has no such biases");
    c.erase("attention_bias");
    c["layer_types"] = {"full_attention", "windowed"};
    REQUIRE_THROWS_NAMING(parse(c), ConfigError, kSource, "layer_types entries must be", "\"windowed\" at 1");
    c["layer_types"] = {"full_attention"};
    REQUIRE_THROWS_NAMING(parse(c), ConfigError, kSource, "layer_types must list one type per layer (2)");
    c["sliding_window"] = 0;
    REQUIRE_THROWS_NAMING(parse(c), ConfigError, kSource, "sliding_window must be in [1, ");
  }
  SECTION("unknown scheme or field") {
    REQUIRE_THROWS_NAMING(parse(with_position({{"type", "rotary"}})), ConfigError, kSource, "position.type",
                          "'rotary' is not one of: none, learned, sinusoidal, rope, alibi, t5");
    REQUIRE_THROWS_NAMING(parse(with_position({{"base", 10000}})), ConfigError, kSource, "position.type is required");
    REQUIRE_THROWS_NAMING(parse(with_position({{"type", "alibi"}, {"slopes", 2}})), ConfigError, kSource,
                          "position.slopes is not a field of position type 'alibi'");
    REQUIRE_THROWS_NAMING(parse(with_position({{"type", "none"}, {"base", 10000}})), ConfigError, kSource,
                          "position.base is not a field of position type 'none'");
    REQUIRE_THROWS_NAMING(parse(with_position("rope")), ConfigError, kSource, "position must be an object");
    REQUIRE_THROWS_NAMING(parse(with_position({{"type", "rope"}, {"layout", "neox"}})), ConfigError, kSource,
                          "position.layout must be \"half\" or \"interleaved\"");
    REQUIRE_THROWS_NAMING(parse(with_position({{"type", "rope"}, {"base", 1}})), ConfigError, kSource,
                          "position.base must be > 1");
    REQUIRE_THROWS_NAMING(parse(with_position({{"type", "rope"}, {"xpos", true}})), ConfigError, kSource,
                          "position.xpos must be an object");
    REQUIRE_THROWS_NAMING(parse(with_position({{"type", "rope"}, {"xpos", {{"scale", 1}}}})), ConfigError, kSource,
                          "position.xpos.scale is not a field of xpos");
    REQUIRE_THROWS_NAMING(parse(with_position({{"type", "learned"}, {"beyond", "wrap"}})), ConfigError, kSource,
                          "position.beyond must be \"error\" or \"clamp\"");
    REQUIRE_THROWS_NAMING(parse(with_position({{"type", "t5"}, {"num_buckets", 32}, {"max_distance", 16}})),
                          ConfigError, kSource, "position.max_distance must exceed num_buckets / 2 = 16");
    REQUIRE_THROWS_NAMING(parse(with_position({{"type", "t5"}, {"num_buckets", 1}})), ConfigError, kSource,
                          "position.num_buckets must be at least 2");
  }
  SECTION("bad scaling") {
    REQUIRE_THROWS_NAMING(parse(with_scaling({{"type", "ntk-by-parts"}, {"factor", 2}})), ConfigError, kSource,
                          "position.scaling.type", "'ntk-by-parts' is not one of");
    REQUIRE_THROWS_NAMING(parse(with_scaling({{"type", "linear"}})), ConfigError, kSource,
                          "position.scaling.factor is required");
    REQUIRE_THROWS_NAMING(parse(with_scaling({{"type", "linear"}, {"factor", 0.5}})), ConfigError, kSource,
                          "position.scaling.factor must be >= 1");
    REQUIRE_THROWS_NAMING(parse(with_scaling({{"type", "linear"}, {"factor", 2}, {"beta_fast", 32}})), ConfigError,
                          kSource, "position.scaling.beta_fast is not a field of scaling type 'linear'");
    REQUIRE_THROWS_NAMING(parse(with_scaling({{"type", "yarn"}, {"factor", 2}, {"beta_fast", 1}, {"beta_slow", 2}})),
                          ConfigError, kSource, "position.scaling.beta_fast must be greater than beta_slow");
    REQUIRE_THROWS_NAMING(parse(with_scaling({{"type", "llama3"}, {"factor", 2}, {"high_freq_factor", 0.5}})),
                          ConfigError, kSource, "high_freq_factor must be greater than low_freq_factor");
    REQUIRE_THROWS_NAMING(parse(with_scaling({{"type", "longrope"}, {"short_factor", {1.0}}, {"long_factor", {1.0, 2.0}}})),
                          ConfigError, kSource, "position.scaling.short_factor must be a list of 2 numbers");
    REQUIRE_THROWS_NAMING(parse(with_scaling({{"type", "longrope"}, {"short_factor", {1.0, 0.0}}, {"long_factor", {1.0, 2.0}}})),
                          ConfigError, kSource, "position.scaling.short_factor entries must be numbers > 0 in float's range");
    REQUIRE_THROWS_NAMING(parse(with_scaling({{"type", "longrope"}, {"short_factor", {1.0, 1e-320}}, {"long_factor", {1.0, 2.0}}})),
                          ConfigError, kSource, "position.scaling.short_factor entries must be numbers > 0 in float's range");
    REQUIRE_THROWS_NAMING(parse(with_scaling({{"type", "longrope"}, {"short_factor", {1.0, 1.0}}})), ConfigError,
                          kSource, "position.scaling.long_factor is required");
    REQUIRE_THROWS_NAMING(parse(with_scaling({{"type", "longrope"}, {"short_factor", {1.0, 1.0}}, {"long_factor", {2.0, 2.0}},
                                              {"original_max_position_embeddings", 1}})),
                          ConfigError, kSource, "original_max_position_embeddings must be at least 2 for longrope");
    REQUIRE_THROWS_NAMING(parse(with_scaling({{"type", "linear"}, {"factor", 2}, {"original_max_position_embeddings", 0}})),
                          ConfigError, kSource, "position.scaling.original_max_position_embeddings must be in [1,");
  }
  SECTION("an HF rope_scaling beside pert's RoPE block is its scaling; beside anything else, refused") {
    c["position"] = {{"type", "rope"}, {"base", 500}};
    c["rope_scaling"] = {{"rope_type", "linear"}, {"factor", 2}};
    const auto resolved = [](const json& config) { return to_json(parse(config))["position"]; };
    CHECK(resolved(c) == resolved(with_position({{"type", "rope"}, {"base", 500}, {"scaling", {{"type", "linear"}, {"factor", 2}}}})));
    c["rope_scaling"] = {{"rope_type", "default"}};
    CHECK(resolved(c) == resolved(with_position({{"type", "rope"}, {"base", 500}})));
    c["rope_scaling"] = {{"factor", 8}};  // `set rope_scaling.factor=8` where there was none
    REQUIRE_THROWS_NAMING(parse(c), ConfigError, kSource, "rope_scaling has no \"rope_type\"",
                          "rope_scaling={\"rope_type\":\"yarn\",\"factor\":8}");
    c["position"]["scaling"] = {{"type", "ntk"}, {"factor", 2}};
    c["rope_scaling"] = {{"rope_type", "linear"}, {"factor", 2}};
    REQUIRE_THROWS_NAMING(parse(c), ConfigError, kSource, "rope_scaling is set together with position.scaling; keep one");
    c["position"] = {{"type", "alibi"}};
    REQUIRE_THROWS_NAMING(parse(c), ConfigError, kSource, "position.type is \"alibi\", not \"rope\"");
    c["rope_parameters"] = {{"rope_type", "default"}};
    c["rope_scaling"] = nullptr;
    REQUIRE_THROWS_NAMING(parse(c), ConfigError, kSource, "rope_parameters is set together with \"position\"");
    c["rope_parameters"] = nullptr;
    CHECK(parse(c).position.type() == "alibi");
  }
}

TEST_CASE("config overrides: merge-patch files, then --set in order", "[config]") {
  TempDir tmp;
  const json base = tiny_config();
  SECTION("a file is merged as RFC 7386 says") {
    write_file(tmp / "o.json", R"({"rope_theta": null, "position": {"type": "rope", "scaling": {"type": "linear", "factor": 2}}})");
    const json out = apply_overrides(base, {{tmp / "o.json"}, {}});
    CHECK_FALSE(out.contains("rope_theta"));
    CHECK(out["position"]["scaling"]["factor"] == 2);
    CHECK(out["hidden_size"] == 16);
    write_file(tmp / "p.json", R"({"position": {"scaling": {"factor": 4}}})");
    const json twice = apply_overrides(base, {{tmp / "o.json", tmp / "p.json"}, {}});
    CHECK(twice["position"]["scaling"] == json{{"type", "linear"}, {"factor", 4}});
  }
  SECTION("--set parses JSON values, else takes a string; null removes; objects replace") {
    const json out = apply_overrides(base, {{}, {"position.type=rope", "position.scaling={\"type\":\"ntk\",\"factor\":2}",
                                                 "position.scaling.factor=8", "rms_norm_eps=1e-6",
                                                 "tie_word_embeddings=true", "bos_token_id=null"}});
    CHECK(out["position"] == json{{"type", "rope"}, {"scaling", {{"type", "ntk"}, {"factor", 8}}}});
    CHECK(out["rms_norm_eps"] == 1e-6);
    CHECK(out["tie_word_embeddings"] == true);
    CHECK_FALSE(out.contains("bos_token_id"));
    const json replaced = apply_overrides(out, {{}, {"position={\"type\":\"alibi\"}"}});
    CHECK(replaced["position"] == json{{"type", "alibi"}});
  }
  SECTION("HF's rope_theta and partial_rotary_factor set beside a \"position\" block: refused, not ignored") {
    // (the block decides, so a new base goes into it; without a block the HF keys decide)
    json block = base;
    block["position"] = {{"type", "rope"}};
    REQUIRE_THROWS_NAMING(apply_overrides(block, {{}, {"rope_theta=500"}}), ConfigError, "`set rope_theta`", "position.base");
    REQUIRE_THROWS_NAMING(apply_overrides(block, {{}, {"partial_rotary_factor=0.5"}}), ConfigError,
                          "`set partial_rotary_factor`", "\"position\" block");
    write_file(tmp / "theta.json", R"({"rope_theta": 1e6})");
    REQUIRE_THROWS_NAMING(apply_overrides(block, {{tmp / "theta.json"}, {}}), ConfigError, "theta.json", "rope_theta");
    REQUIRE_THROWS_NAMING(apply_overrides(base, {{tmp / "theta.json"}, {"position.type=rope"}}), ConfigError, "rope_theta");
    CHECK(apply_overrides(block, {{}, {"position.base=500"}})["position"]["base"] == 500);
    CHECK_NOTHROW(apply_overrides(block, {{}, {"rope_theta=null"}}));                 // removing it changes nothing
    CHECK_NOTHROW(apply_overrides(block, {{}, {"rope_theta=500", "position=null"}}));  // the HF keys decide
    CHECK(apply_overrides(base, {{}, {"rope_theta=500"}})["rope_theta"] == 500);
  }
  SECTION("a --config written inline is merged as a file is, in its place among the files") {
    write_file(tmp / "o.json", R"({"position": {"type": "alibi", "max_bias": 4}})");
    const json out = apply_overrides(base, {{tmp / "o.json", R"( {"position": {"max_bias": 16}})"}, {}});
    CHECK(out["position"] == json{{"type", "alibi"}, {"max_bias", 16}});
    REQUIRE_THROWS_NAMING(apply_overrides(base, {{"{\"position\": "}, {}}), FormatError, "inline config {\"position\"",
                          "invalid JSON");
    REQUIRE_THROWS_NAMING(read_config_patch("[1]"), IoError, "[1]");  // not inline: a file name
    CHECK(is_inline_config("\n {}"));
    CHECK_FALSE(is_inline_config("configs/{x}.json"));
  }
  SECTION("files apply before --set") {
    write_file(tmp / "o.json", R"({"position": {"type": "alibi", "max_bias": 4}})");
    const json out = apply_overrides(base, {{tmp / "o.json"}, {"position.max_bias=16"}});
    CHECK(out["position"]["max_bias"] == 16);
  }
  SECTION("errors") {
    REQUIRE_THROWS_NAMING(apply_overrides(base, {{}, {"position.type"}}), ConfigError, "`set` 'position.type'", "key.path=value");
    REQUIRE_THROWS_NAMING(apply_overrides(base, {{}, {"=3"}}), ConfigError, "`set` '=3'");
    REQUIRE_THROWS_NAMING(apply_overrides(base, {{}, {"position..type=x"}}), ConfigError, "empty key");
    REQUIRE_THROWS_NAMING(apply_overrides(base, {{}, {"position.=x"}}), ConfigError, "empty key");
    REQUIRE_THROWS_NAMING(apply_overrides(base, {{}, {"hidden_size.x=1"}}), ConfigError, "'hidden_size' is 16, not an object");
    REQUIRE_THROWS_NAMING(apply_overrides(base, {{}, {"num_hiden_layers=1"}}), ConfigError, "'num_hiden_layers' is not a config key");
    REQUIRE_THROWS_NAMING(apply_overrides(base, {{tmp / "absent.json"}, {}}), IoError, "absent.json");
    write_file(tmp / "bad.json", "{\"position\": ");
    REQUIRE_THROWS_NAMING(apply_overrides(base, {{tmp / "bad.json"}, {}}), FormatError, "bad.json", "invalid JSON");
    write_file(tmp / "list.json", "[1]");
    REQUIRE_THROWS_NAMING(apply_overrides(base, {{tmp / "list.json"}, {}}), ConfigError, "list.json", "JSON object");
    // Found by tests/fuzz (regressions/config): nesting that would recurse through the stack.
    const std::string deep = "position=" + std::string(10000, '[') + std::string(10000, ']');
    REQUIRE_THROWS_NAMING(apply_overrides(base, {{}, {deep}}), FormatError, "`set position`", "nested deeper than 64");
    std::string long_path = "position";
    for (int i = 0; i < 100; ++i) long_path += ".a";
    REQUIRE_THROWS_NAMING(apply_overrides(base, {{}, {long_path + "=1"}}), ConfigError, "101 keys", "deeper than 64");
  }
}

TEST_CASE("config: the architectures' extras, as HF's configs define them", "[config]") {
  json c = tiny_config();
  ModelConfig m = parse(c);
  CHECK(m.architecture == "LlamaForCausalLM");
  CHECK((!m.qkv_bias && !m.o_bias && !m.mlp_bias && !m.fused_projections));
  CHECK(windows(m) == std::vector<int>{0, 0});
  c["attention_bias"] = true;
  c["mlp_bias"] = true;
  m = parse(c);
  CHECK((m.qkv_bias && m.o_bias && m.mlp_bias));

  c = tiny_config();
  c["architectures"] = {"MistralForCausalLM"};
  c["model_type"] = "mistral";
  c["sliding_window"] = 4096;
  CHECK(windows(parse(c)) == std::vector<int>{4096, 4096});
  c["sliding_window"] = nullptr;  // Mistral v0.2 on: no window
  CHECK(windows(parse(c)) == std::vector<int>{0, 0});
  c["sliding_window"] = 16;
  c["layer_types"] = {"sliding_attention", "full_attention"};
  CHECK(windows(parse(c)) == std::vector<int>{16, 0});

  c = tiny_config();
  c["architectures"] = {"Qwen2ForCausalLM"};
  c["model_type"] = "qwen2";
  c["sliding_window"] = 32;
  c["max_window_layers"] = 1;
  m = parse(c);
  CHECK((m.qkv_bias && !m.o_bias && !m.mlp_bias));
  CHECK(windows(m) == std::vector<int>{0, 0});  // use_sliding_window defaults to false
  c["use_sliding_window"] = true;
  CHECK(windows(parse(c)) == std::vector<int>{0, 32});  // layers >= max_window_layers
  CHECK(describe_architecture(parse(c)) == "Qwen2ForCausalLM: q/k/v biases; sliding window 32 on layer 1");
  c.erase("architectures");  // model_type alone names it too
  CHECK(parse(c).architecture == "Qwen2ForCausalLM");

  c["architectures"] = {"Qwen3ForCausalLM"};
  c["model_type"] = "qwen3";
  m = parse(c);
  CHECK((m.qk_norm && !m.qkv_bias && !m.o_bias));
  CHECK(windows(m) == std::vector<int>{0, 32});
  c["attention_bias"] = true;
  CHECK((parse(c).qkv_bias && parse(c).o_bias));

  c = tiny_config();
  c["architectures"] = {"Phi3ForCausalLM"};
  c["model_type"] = "phi3";
  c["sliding_window"] = 2047;
  m = parse(c);
  CHECK((m.fused_projections && !m.qkv_bias));
  CHECK(windows(m) == std::vector<int>{2047, 2047});
  CHECK(to_json(m)["architectures"] == json{"Phi3ForCausalLM"});
  CHECK(describe_architecture(m) == "Phi3ForCausalLM: fused qkv and gate_up projections; sliding window 2047 on every layer");

  c = tiny_config();
  c.erase("architectures");
  c.erase("model_type");
  CHECK(parse(c).architecture == "LlamaForCausalLM");  // pert's own configs name none
}

TEST_CASE("config: transformers v5's rope_parameters read as rope_theta + rope_scaling", "[config]") {
  json c = tiny_config();
  c.erase("rope_theta");
  c["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 500000.0}};
  ModelConfig m = parse(c);
  CHECK(m.position.as<RopeConfig>().base == 500000.0);
  CHECK(m.position.as<RopeConfig>().scaling.type == RopeScalingType::None);
  c["rope_parameters"] = {{"rope_type", "yarn"}, {"rope_theta", 1e6}, {"factor", 4.0}, {"partial_rotary_factor", 0.5}};
  m = parse(c);
  CHECK(m.position.as<RopeConfig>().scaling.type == RopeScalingType::Yarn);
  CHECK(m.position.as<RopeConfig>().scaling.factor == 4.0);
  CHECK(m.position.as<RopeConfig>().rotary_dim == 2);
  c["rope_theta"] = 10000.0;
  REQUIRE_THROWS_NAMING(parse(c), ConfigError, kSource, "rope_parameters is set together with rope_theta");
  c.erase("rope_theta");
  c["rope_parameters"] = {{"rope_theta", 1e4}};
  REQUIRE_THROWS_NAMING(parse(c), ConfigError, kSource, "rope_parameters must be an object with a \"rope_type\"");
  c["rope_parameters"] = {{"full_attention", {{"rope_type", "default"}, {"rope_theta", 5e4}}}};  // one type, every layer's
  CHECK(parse(c).position.as<RopeConfig>().base == 5e4);
}

// transformers v5's Gemma 3: {"full_attention": {...}, "sliding_attention": {...}}, each layer its type's.
TEST_CASE("config: rope_parameters per layer type give each layer its type's RoPE", "[config]") {
  json c = tiny_config();
  c["architectures"] = {"Gemma3ForCausalLM"};
  c["model_type"] = "gemma3_text";
  c["num_hidden_layers"] = 4;
  c["sliding_window_pattern"] = 2;
  c.erase("rope_theta");
  c["rope_parameters"] = {{"full_attention", {{"rope_type", "linear"}, {"factor", 8.0}, {"rope_theta", 1e6}}},
                          {"sliding_attention", {{"rope_type", "default"}, {"rope_theta", 500.0}}}};
  ModelConfig m = parse(c);
  CHECK(m.position.as<RopeConfig>().base == 1e6);
  CHECK(m.position.as<RopeConfig>().scaling.type == RopeScalingType::Linear);
  CHECK(m.layers[1].position.scheme == m.position.scheme);  // (i + 1) % 2 == 0: global
  CHECK(m.layers[0].position.as<RopeConfig>().base == 500.0);
  CHECK(m.layers[0].position.as<RopeConfig>().scaling.type == RopeScalingType::None);
  CHECK(describe_position(m).find("base 500") != std::string::npos);  // (pert inspect's line)
  c["rope_parameters"]["sliding_attention"].erase("rope_theta");  // HF: rope_local_base_freq, 10000
  CHECK(parse(c).layers[0].position.as<RopeConfig>().base == 10000.0);
  c["rope_local_base_freq"] = 250.0;
  CHECK(parse(c).layers[2].position.as<RopeConfig>().base == 250.0);

  json bad = c;
  bad["rope_parameters"]["sliding_attention"]["rope_type"] = "stretch";
  REQUIRE_THROWS_NAMING(parse(bad), ConfigError, kSource, "rope_parameters.sliding_attention.rope_type must be one of");
  bad = c;
  bad["rope_parameters"]["sliding_attention"]["factor"] = 2.0;
  REQUIRE_THROWS_NAMING(parse(bad), ConfigError, kSource, "rope_parameters.sliding_attention.factor is set (2.0)");
  bad = c;
  bad["rope_parameters"]["chunked_attention"] = {{"rope_type", "default"}};
  REQUIRE_THROWS_NAMING(parse(bad), ConfigError, kSource, "rope_parameters.chunked_attention is not a layer type");
  bad = c;
  bad["rope_parameters"].erase("sliding_attention");
  REQUIRE_THROWS_NAMING(parse(bad), ConfigError, kSource, "rope_parameters has no sliding_attention block");
  bad = c;
  bad["layer_types"] = json::array({"full_attention", "full_attention", "full_attention", "full_attention"});
  REQUIRE_THROWS_NAMING(parse(bad), ConfigError, kSource, "rope_parameters.sliding_attention is given, but no layer is sliding_attention");
  bad = c;
  bad["rope_theta"] = 1e4;
  REQUIRE_THROWS_NAMING(parse(bad), ConfigError, kSource, "rope_parameters is set together with rope_theta");
}

// Qwen2-VL / Qwen2.5-VL / Qwen3-VL: the language model's keys at the top level or under
// text_config, M-RoPE's mrope_section validated by key.
TEST_CASE("config: the VL architectures read M-RoPE and text_config", "[config]") {
  json c = tiny_config();
  c["head_dim"] = 8;  // 4 rotary pairs
  c["architectures"] = {"Qwen2VLForConditionalGeneration"};
  c["model_type"] = "qwen2_vl";
  c["rope_scaling"] = {{"type", "mrope"}, {"mrope_section", {1, 2, 1}}};
  c["vision_config"] = {{"depth", 32}};
  ModelConfig m = parse(c);
  CHECK(m.qkv_bias);
  CHECK(m.position.as<RopeConfig>().mrope_section == std::vector<int>{1, 2, 1});
  CHECK_FALSE(m.position.as<RopeConfig>().mrope_interleaved);
  CHECK(mrope_axes(m.position.as<RopeConfig>()) == std::vector<int>{0, 1, 1, 2});
  CHECK(m.position.scheme->label() == "rope mrope");
  json bad = c;
  bad["rope_scaling"]["mrope_section"] = {1, 2, 2};
  REQUIRE_THROWS_NAMING(parse(bad), ConfigError, kSource, "position.mrope_section [1,2,2] sums to 5, not the rotary pairs (rotary_dim/2 = 4)");
  bad["rope_scaling"]["mrope_section"] = {1, -1, 4};
  REQUIRE_THROWS_NAMING(parse(bad), ConfigError, kSource, "position.mrope_section must hold non-negative integers");
  bad["rope_scaling"]["mrope_section"] = {2, 2};
  REQUIRE_THROWS_NAMING(parse(bad), ConfigError, kSource, "position.mrope_section must be a list of three pair counts");
  bad["rope_scaling"] = {{"type", "mrope"}};
  REQUIRE_THROWS_NAMING(parse(bad), ConfigError, kSource, "rope_scaling has no mrope_section");
  bad["rope_scaling"] = {{"type", "mrope"}, {"mrope_section", {1, 2, 1}}, {"mrope_interleaved", true}};
  REQUIRE_THROWS_NAMING(parse(bad), ConfigError, kSource, "rope_scaling.mrope_interleaved is true, but this architecture's M-RoPE is contiguous");
  bad["rope_scaling"] = {{"rope_type", "dynamic"}, {"factor", 2.0}, {"mrope_section", {1, 2, 1}}};
  REQUIRE_THROWS_NAMING(parse(bad), ConfigError, kSource, "mrope_section is set together with dynamic");

  // Qwen3-VL as v5 writes it: the language model under text_config; interleaved, [24, 20, 20] by default
  json v5 = {{"architectures", {"Qwen3VLForConditionalGeneration"}}, {"model_type", "qwen3_vl"}, {"tie_word_embeddings", true},
             {"text_config", tiny_config()}, {"vision_config", {{"depth", 27}}}};
  v5["text_config"]["model_type"] = "qwen3_vl_text";
  v5["text_config"]["head_dim"] = 128;
  v5["text_config"]["tie_word_embeddings"] = false;  // the top level's wins
  v5["text_config"].erase("rope_theta");
  m = parse(v5);
  CHECK((m.qk_norm && m.tie_word_embeddings && m.head_dim == 128));
  CHECK(m.position.as<RopeConfig>().base == 5e5);
  CHECK(m.position.as<RopeConfig>().mrope_section == std::vector<int>{24, 20, 20});
  const std::vector<int> axes = mrope_axes(m.position.as<RopeConfig>());
  CHECK(std::vector<int>(axes.begin(), axes.begin() + 7) == std::vector<int>{0, 1, 2, 0, 1, 2, 0});
  CHECK(std::vector<int>(axes.begin() + 58, axes.end()) == std::vector<int>{1, 2, 0, 0, 0, 0});  // h to 3·20, then t
  v5["text_config"]["rope_scaling"] = {{"rope_type", "default"}, {"mrope_section", {24, 20, 20}}, {"mrope_interleaved", false}};
  REQUIRE_THROWS_NAMING(parse(v5), ConfigError, kSource, "mrope_interleaved is false, but this architecture's M-RoPE is interleaved");
  v5["text_config"]["rope_scaling"] = {{"rope_type", "default"}, {"mrope_section", {4, 30, 30}}, {"mrope_interleaved", true}};
  REQUIRE_THROWS_NAMING(parse(v5), ConfigError, kSource, "interleaved gives the axes t, h, w 22, 21 and 21");
  v5["text_config"] = "none";
  REQUIRE_THROWS_NAMING(parse(v5), ConfigError, kSource, "text_config must be an object");
}

TEST_CASE("config: YaRN's mscale ratio and truncate, LongRoPE's short/long mscale", "[config]") {
  RopeScaling s = parse(with_scaling({{"type", "yarn"}, {"factor", 4.0}, {"mscale", 1.0}, {"mscale_all_dim", 0.5}})).position.as<RopeConfig>().scaling;
  CHECK(s.attention_factor == Approx((0.1 * std::log(4.0) + 1.0) / (0.05 * std::log(4.0) + 1.0)));
  CHECK(s.truncate);
  s = parse(with_scaling({{"type", "yarn"}, {"factor", 4.0}, {"mscale", 1.0}, {"truncate", false}})).position.as<RopeConfig>().scaling;
  CHECK(s.attention_factor == Approx(0.1 * std::log(4.0) + 1.0));  // the ratio needs both
  CHECK(!s.truncate);
  const json longrope = {{"type", "longrope"}, {"short_factor", {1.0, 1.0}}, {"long_factor", {2.0, 2.0}},
                         {"short_mscale", 1.1}, {"long_mscale", 1.3}};
  const ModelConfig m = parse(with_scaling(longrope));
  CHECK(rope_attention_factor(m.position.as<RopeConfig>(), 64) == Approx(1.1));
  CHECK(rope_attention_factor(m.position.as<RopeConfig>(), 65) == Approx(1.3));
  json both = longrope;
  both["attention_factor"] = 1.2;
  REQUIRE_THROWS_NAMING(parse(with_scaling(both)), ConfigError, kSource, "short_mscale and attention_factor are both set");
  json one = longrope;
  one.erase("long_mscale");
  REQUIRE_THROWS_NAMING(parse(with_scaling(one)), ConfigError, kSource, "position.scaling.long_mscale is required");
}

TEST_CASE("config: ignored keys and descriptions", "[config]") {
  json c = tiny_config();
  CHECK(ignored_config_keys(c).empty());
  c["torch_dtype"] = "bfloat16";
  CHECK(ignored_config_keys(c) == std::vector<std::string>{"torch_dtype"});
  c.erase("torch_dtype");
  c["position"] = {{"type", "alibi"}};
  CHECK(ignored_config_keys(c) == std::vector<std::string>{"rope_theta"});
  CHECK_THAT(describe(parse(c).position, 4), Catch::Matchers::Contains("ALiBi"));
  c["position"] = {{"type", "rope"}, {"scaling", {{"type", "yarn"}, {"factor", 4}}}, {"xpos", json::object()}};
  const std::string d = describe(parse(c).position, 4);
  CHECK_THAT(d, Catch::Matchers::Contains("RoPE") && Catch::Matchers::Contains("YaRN x4 from L = 64") &&
                    Catch::Matchers::Contains("xPos"));
}

TEST_CASE("config: the extend block's methods, their defaults from L, and the rules between them", "[config][extend]") {
  auto with_extend = [](json extend, json position = {{"type", "rope"}}) {
    json c = with_position(std::move(position));
    c["extend"] = std::move(extend);
    return c;
  };
  SECTION("defaults are drawn from the trained length L = 64") {
    const ModelConfig m = parse(with_extend({{"self_extend", json::object()}, {"logn", json::object()}}));
    REQUIRE(m.extend.size() == 2);
    const json j = to_json(m)["extend"];
    CHECK(j["self_extend"] == json{{"window", 16}, {"group", 8}, {"mode", "exact"}});
    CHECK(j["logn"] == json{{"trained", 64}});
    CHECK(to_json(parse(with_extend({{"streaming", json::object()}})))["extend"]["streaming"] ==
          json{{"sinks", 4}, {"window", 60}, {"positions", "cache"}});
    CHECK(to_json(parse(with_extend({{"blockwise", json::object()}})))["extend"]["blockwise"] == json{{"block", 32}});
    CHECK(to_json(parse(with_extend({{"leaky_rerope", json::object()}})))["extend"]["leaky_rerope"] ==
          json{{"window", 16}, {"factor", 16.0}});
  }
  SECTION("each method's positions, as its source defines them") {
    const ModelConfig se = parse(with_extend({{"self_extend", {{"window", 8}, {"group", 4}}}}));
    const ExtensionConfig& e = *se.extend[0];
    CHECK(e.near_first(20) == 13);            // m − n < W keeps (m, n)
    CHECK(e.far_query(20) == 20 / 4 + 8 - 2);  // ⌊m/G⌋ + W − ⌊W/G⌋
    CHECK(e.far_key(11) == 2);                 // ⌊n/G⌋
    const ModelConfig lc = parse(with_extend({{"self_extend", {{"window", 8}, {"group", 4}, {"mode", "llama.cpp"}}}}));
    CHECK(lc.extend[0]->near_first(20) == 16);                // K = ⌊20/8⌋ = 2 blocks compressed
    CHECK(lc.extend[0]->far_query(20) == 20 - 2 * (8 - 2));  // m − K(W − W/G)
    const ModelConfig re = parse(with_extend({{"rerope", {{"window", 8}}}}));
    CHECK(re.extend[0]->far_query(100) == 8);
    CHECK(re.extend[0]->far_key(50) == 0);
    const ModelConfig lr = parse(with_extend({{"leaky_rerope", {{"window", 8}, {"factor", 4}}}}));
    CHECK(lr.extend[0]->far_query(20) - lr.extend[0]->far_key(4) == Approx(8 + (20 - 4 - 8) / 4.0));
    const ModelConfig st = parse(with_extend({{"streaming", {{"sinks", 2}, {"window", 10}}}}));
    CHECK(st.extend[0]->first_key(30) == 21);
    CHECK(st.extend[0]->far_query(30) == 11);  // the cache's last slot, S + W − 1
    CHECK(st.extend[0]->far_query(5) == 5);
    const ModelConfig bw = parse(with_extend({{"blockwise", {{"block", 8}}}}));
    CHECK(bw.extend[0]->first_key(17) == 8);
    CHECK(bw.extend[0]->first_key(7) == 0);
    const ModelConfig ln = parse(with_extend({{"logn", {{"trained", 16}}}}));
    CHECK(ln.extend[0]->query_scale(15) == 1.0);
    CHECK(ln.extend[0]->query_scale(31) == Approx(std::log(32.0) / std::log(16.0)));
  }
  SECTION("streaming and blockwise work on every scheme; bias schemes get far sinks") {
    for (const char* type : {"none", "alibi", "learned", "sinusoidal"})
      CHECK_NOTHROW(parse(with_extend({{"blockwise", json::object()}}, {{"type", type}})));
    CHECK_NOTHROW(parse(with_extend({{"streaming", json::object()}}, {{"type", "alibi"}})));
    CHECK_NOTHROW(parse(with_extend({{"streaming", {{"positions", "original"}}}}, {{"type", "learned"}})));
  }
  SECTION("refusals name the key") {
    REQUIRE_THROWS_NAMING(parse(with_extend({{"yarn", json::object()}})), ConfigError, kSource, "extend.yarn",
                          "methods: self_extend");
    REQUIRE_THROWS_NAMING(parse(with_extend(json::array())), ConfigError, kSource, "extend must be an object");
    REQUIRE_THROWS_NAMING(parse(with_extend({{"rerope", 8}})), ConfigError, kSource, "extend.rerope must be an object");
    REQUIRE_THROWS_NAMING(parse(with_extend({{"rerope", {{"w", 8}}}})), ConfigError, kSource,
                          "extend.rerope.w is not a field of method 'rerope'");
    REQUIRE_THROWS_NAMING(parse(with_extend({{"rerope", {{"window", 0}}}})), ConfigError, kSource, "extend.rerope.window");
    REQUIRE_THROWS_NAMING(parse(with_extend({{"leaky_rerope", {{"factor", 1}}}})), ConfigError, kSource,
                          "extend.leaky_rerope.factor must be > 1");
    REQUIRE_THROWS_NAMING(parse(with_extend({{"rerope", json::object()}, {"streaming", json::object()}})), ConfigError,
                          kSource, "keep one");
    REQUIRE_THROWS_NAMING(parse(with_extend({{"self_extend", json::object()}}, {{"type", "alibi"}})), ConfigError, kSource,
                          "extend.self_extend", "rotary scheme");
    REQUIRE_THROWS_NAMING(parse(with_extend({{"streaming", json::object()}}, {{"type", "learned"}})), ConfigError, kSource,
                          "extend.streaming", "\"positions\": \"original\"");
    REQUIRE_THROWS_NAMING(parse(with_extend({{"rerope", json::object()}}, {{"type", "rope"}, {"xpos", json::object()}})),
                          ConfigError, kSource, "extend.rerope", "xPos");
    REQUIRE_THROWS_NAMING(parse(with_extend({{"self_extend", {{"window", 10}, {"group", 4}, {"mode", "llama.cpp"}}}})),
                          ConfigError, kSource, "extend.self_extend.window must be a multiple of group");
    REQUIRE_THROWS_NAMING(parse(with_extend({{"streaming", {{"positions", "slots"}}}})), ConfigError, kSource,
                          "extend.streaming.positions");
  }
  SECTION("null removes a method (a merge patch's way)") {
    CHECK(parse(with_extend({{"rerope", nullptr}})).extend.empty());
  }
}

TEST_CASE("config: the layers block gives layers their own scheme, window, chunk and temperature", "[config][layers]") {
  json c = tiny_config();
  c["num_hidden_layers"] = 8;
  // Cohere's RNoPE-SWA: RoPE in sliding-window layers, a global NoPE layer every 4th
  c["layers"] = {{"global", {{"every", 4}, {"position", {{"type", "none"}}}}}, {"local", {{"others", true}, {"window", 16}}}};
  ModelConfig m = parse(c);
  CHECK(windows(m) == std::vector<int>{16, 16, 16, 0, 16, 16, 16, 0});
  for (int i = 0; i < 8; ++i) CHECK(m.layers[size_t(i)].position.type() == (i % 4 == 3 ? "none" : "rope"));
  CHECK(m.layers[0].position.scheme == m.position.scheme);  // shared, not a copy
  CHECK(has_layer_schemes(m));
  CHECK(describe_layers(m) == "layers 3, 7: NoPE: no positional signal; only the causal mask orders tokens");
  CHECK(position_label(m) == "rope w16 x6 + none x2");  // windows named where layers differ in them
  CHECK(to_json(parse(to_json(m))) == to_json(m));

  // Llama 4's iRoPE: chunked-local RoPE, global NoPE every 4th with the query temperature
  c["layers"] = {{"nope", {{"every", 4}, {"position", {{"type", "none"}}}, {"temperature", {{"scale", 0.1}, {"floor", 8}}}}},
                 {"chunked", {{"others", true}, {"chunk", 8}}}};
  m = parse(c);
  CHECK(m.layers[3].temperature_scale == 0.1);
  CHECK(m.layers[3].temperature_floor == 8);
  CHECK(m.layers[3].query_temperature(6) == 1.0);
  CHECK(m.layers[3].query_temperature(7) == Approx(1 + 0.1 * std::log(2.0)));
  CHECK(m.layers[0].query_temperature(1000) == 1.0);
  CHECK(m.layers[0].chunk == 8);
  CHECK(m.layers[3].chunk == 0);
  CHECK(describe_layers(m) ==
        "every layer but layers 3, 7: chunked local attention of 8 positions; layers 3, 7: NoPE: no positional signal; "
        "only the causal mask orders tokens, query temperature 1 + 0.1·ln(1 + ⌊(m + 1)/8⌋)");
  CHECK(position_label(m) == "rope chunk8 x6 + none temp x2");
  CHECK(to_json(parse(to_json(m))) == to_json(m));

  // Gemma 3: five local layers (their own base, a window) to one global (the model's scheme)
  c["num_hidden_layers"] = 12;
  c["position"] = {{"type", "rope"}, {"base", 1e6}, {"scaling", {{"type", "linear"}, {"factor", 8}}}};
  c["layers"] = {{"global", {{"every", 6}}},  // selects, sets nothing: the model's scheme, every key
                 {"local", {{"others", true}, {"window", 32}, {"position", {{"type", "rope"}, {"base", 10000}}}}}};
  m = parse(c);
  CHECK(windows(m) == std::vector<int>{32, 32, 32, 32, 32, 0, 32, 32, 32, 32, 32, 0});
  CHECK(m.layers[5].position.scheme == m.position.scheme);
  CHECK(m.layers[0].position.as<RopeConfig>().base == 10000);
  INFO(describe_layers(m));
  CHECK(describe_layers(m).rfind("every layer but layers 5, 11: RoPE (Su et al. 2021): half layout, base 10000,", 0) == 0);
  CHECK(to_json(parse(to_json(m))) == to_json(m));
  // the same block as the model's is the model's scheme, one encoding
  c["layers"]["local"]["position"] = c["position"];
  CHECK(!has_layer_schemes(parse(c)));
  CHECK(describe_layers(parse(c)) == "");
}

TEST_CASE("config: the layers block refuses what it cannot mean, naming the rule", "[config][layers]") {
  json c = tiny_config();
  c["num_hidden_layers"] = 4;
  auto refused = [&](json layers, const std::string& what) {
    c["layers"] = std::move(layers);
    REQUIRE_THROWS_NAMING(parse(c), ConfigError, kSource, what);
  };
  refused(json::array({1}), "layers must be an object of named rules");
  refused({{"a", 3}}, "layers.a must be an object (a rule)");
  refused({{"a", json::object()}}, "layers.a must select its layers by exactly one of");
  refused({{"a", {{"every", 2}, {"layers", {1}}}}}, "layers.a must select its layers by exactly one of");
  refused({{"a", {{"layers", {4}}}}}, "layers.a.layers entries must be layer indices in [0, 4), got 4");
  refused({{"a", {{"layers", {1, 1}}}}}, "layers.a.layers lists layer 1 twice");
  refused({{"a", {{"layers", json::array()}}}}, "layers.a.layers must be a non-empty list");
  refused({{"a", {{"every", 0}}}}, "layers.a.every must be in [1, 4]");
  refused({{"a", {{"every", 2}, {"from", 4}}}}, "layers.a.from must be in [0, 3]");
  refused({{"a", {{"others", false}}}}, "layers.a.others must be true");
  refused({{"a", {{"others", true}}}, {"b", {{"others", true}}}}, "both select the other layers");
  refused({{"a", {{"every", 2}, {"window", 8}}}, {"b", {{"layers", {1}}, {"window", 4}}}},
          "layers.b.window is set for layer 1, which layers.a sets too");
  refused({{"a", {{"every", 2}, {"windw", 8}}}}, "layers.a.windw is not a field of a layers rule");
  refused({{"a", {{"every", 2}, {"window", -1}}}}, "layers.a.window must be in [0, ");
  refused({{"a", {{"every", 2}, {"position", "none"}}}}, "layers.a.position must be a position block");
  refused({{"a", {{"every", 2}, {"position", {{"type", "nope"}}}}}}, "layers.a.position.type 'nope' is not one of");
  refused({{"a", {{"every", 2}, {"position", {{"type", "rope"}, {"bse", 1}}}}}}, "layers.a.position.bse is not a field");
  refused({{"a", {{"every", 2}, {"position", {{"type", "learned"}}}}}}, "adds positions to the embeddings");
  refused({{"a", {{"every", 2}, {"position", {{"type", "t5"}}}}}}, "has weights of its own");
  refused({{"a", {{"every", 2}, {"temperature", {{"scale", 0.1}}}}}}, "layers.a.temperature.floor is required");
  refused({{"a", {{"every", 2}, {"temperature", {{"scale", -1}, {"floor", 2}}}}}}, "layers.a.temperature.scale must be >= 0");
  // an "extend" method is checked against every layer's scheme (NoPE layers' aside)
  c["extend"] = {{"rerope", {{"window", 4}}}};
  refused({{"a", {{"every", 2}, {"position", {{"type", "alibi"}}}}}}, "needs a rotary scheme (position.type rope), not 'alibi'");
  c["layers"] = {{"a", {{"every", 2}, {"position", {{"type", "none"}}}}}};
  CHECK(parse(c).extend.size() == 1);
}

TEST_CASE("config: SmolLM3's layers without RoPE, as its config derives or lists them", "[config][layers]") {
  json c = tiny_config();
  c["architectures"] = {"SmolLM3ForCausalLM"};
  c["model_type"] = "smollm3";
  c["num_hidden_layers"] = 8;
  ModelConfig m = parse(c);  // no_rope_layer_interval 4: layers 3 and 7 have no positions
  for (int i = 0; i < 8; ++i) CHECK(m.layers[size_t(i)].position.type() == (i % 4 == 3 ? "none" : "rope"));
  CHECK(windows(m) == std::vector<int>(8, 0));
  CHECK(to_json(parse(to_json(m))) == to_json(m));
  c["no_rope_layer_interval"] = 2;
  CHECK(parse(c).layers[1].position.type() == "none");
  CHECK(parse(c).layers[2].position.type() == "rope");
  c["no_rope_layers"] = {0, 1, 1, 1, 1, 1, 1, 0};  // a list wins over the interval
  c["sliding_window"] = 16;
  c["use_sliding_window"] = true;  // ... and then windows only the layers without RoPE
  m = parse(c);
  CHECK(m.layers[0].position.type() == "none");
  CHECK(m.layers[1].position.type() == "rope");
  CHECK(windows(m) == std::vector<int>{16, 0, 0, 0, 0, 0, 0, 16});
  CHECK(describe_architecture(m) == "SmolLM3ForCausalLM: sliding window 16 on layer 0; sliding window 16 on layer 7");
  c["mlp_bias"] = true;
  CHECK(parse(c).mlp_bias);
  // pert's layers block may give a layer another scheme than the architecture's
  c["layers"] = {{"rope_everywhere", {{"layers", {0, 7}}, {"position", {{"type", "rope"}}}}}};
  CHECK(!has_layer_schemes(parse(c)));
  c.erase("layers");

  c["no_rope_layers"] = {0, 1};
  REQUIRE_THROWS_NAMING(parse(c), ConfigError, kSource, "no_rope_layers must list 1 (RoPE) or 0 (no positions) per layer (8)");
  c["no_rope_layers"] = {0, 1, 1, 1, 1, 1, 1, 2};
  REQUIRE_THROWS_NAMING(parse(c), ConfigError, kSource, "no_rope_layers entries must be 1 (RoPE) or 0", "at 7");
  c = tiny_config();
  c["no_rope_layers"] = {1, 0};  // another architecture's key that would change the math
  REQUIRE_THROWS_NAMING(parse(c), ConfigError, kSource, "no_rope_layers is not read by LlamaForCausalLM");
}

TEST_CASE("config: Gemma 2 and 3, with HF's defaults where a key is absent", "[config][layers]") {
  json c = tiny_config();
  c["architectures"] = {"Gemma2ForCausalLM"};
  c["model_type"] = "gemma2";
  c["num_hidden_layers"] = 4;
  c.erase("tie_word_embeddings");
  c.erase("head_dim");
  ModelConfig m = parse(c);
  CHECK(m.activation == Activation::GeluTanh);
  CHECK((m.norm_plus_one && m.sandwich_norms && m.tie_word_embeddings && !m.qk_norm));
  CHECK(m.head_dim == 256);
  CHECK(m.attention_scale == Approx(1.0 / 16));
  CHECK(m.embed_scale == double(float(std::sqrt(double(m.hidden_size)))));
  CHECK((m.attn_softcap == 50.0 && m.final_softcap == 30.0));
  CHECK(windows(m) == std::vector<int>{4096, 0, 4096, 0});
  c["attn_logit_softcapping"] = nullptr;  // null: no cap
  c["hidden_act"] = "gelu";                // not what Gemma's MLP reads
  CHECK(parse(c).attn_softcap == 0.0);
  c["hidden_activation"] = "gelu";
  REQUIRE_THROWS_NAMING(parse(c), ConfigError, kSource, "hidden_activation must be \"gelu_pytorch_tanh\"");
  c.erase("hidden_activation");
  c["final_logit_softcapping"] = -1;
  REQUIRE_THROWS_NAMING(parse(c), ConfigError, kSource, "final_logit_softcapping must be > 0 (or null: none)");

  c = tiny_config();
  c["architectures"] = {"Gemma3ForCausalLM"};
  c["model_type"] = "gemma3_text";
  c["num_hidden_layers"] = 7;
  c.erase("rope_theta");
  c["rope_scaling"] = {{"rope_type", "linear"}, {"factor", 8.0}};
  m = parse(c);
  CHECK((m.qk_norm && m.attn_softcap == 0.0 && m.final_softcap == 0.0));
  CHECK(windows(m) == std::vector<int>{4096, 4096, 4096, 4096, 4096, 0, 4096});  // (i + 1) % 6 == 0 is global
  CHECK(m.position.as<RopeConfig>().base == 1e6);  // the global layers: rope_theta's default, scaled
  CHECK(m.layers[5].position.scheme == m.position.scheme);
  CHECK(m.layers[0].position.as<RopeConfig>().base == 10000.0);  // the local ones: rope_local_base_freq, unscaled
  CHECK(m.layers[0].position.scheme->label() == "rope");
  CHECK(m.layers[0].position.scheme == m.layers[6].position.scheme);
  c["layer_types"] = {"full_attention", "sliding_attention", "full_attention", "sliding_attention", "sliding_attention",
                      "sliding_attention", "full_attention"};
  m = parse(c);
  CHECK(m.layers[0].position.scheme == m.position.scheme);
  CHECK(m.layers[1].position.as<RopeConfig>().base == 10000.0);
  CHECK(describe_architecture(m).find("GeGLU (tanh GELU); RMSNorm gains 1 + w; a norm before and after each branch") !=
        std::string::npos);
}

TEST_CASE("config: Cohere 2's parallel block, and RoPE only in its sliding-window layers", "[config][layers]") {
  json c = tiny_config();
  c["architectures"] = {"Cohere2ForCausalLM"};
  c["model_type"] = "cohere2";
  c["num_hidden_layers"] = 8;
  c["head_dim"] = 5;  // HF overwrites it with hidden_size / num_attention_heads
  c.erase("tie_word_embeddings");
  ModelConfig m = parse(c);
  CHECK((m.layer_norm && m.parallel_block && m.tie_word_embeddings && !m.sandwich_norms));
  CHECK(m.head_dim == m.hidden_size / m.n_heads);
  CHECK(m.logit_scale == 0.0625);
  CHECK(m.rms_norm_eps == 1e-5);  // layer_norm_eps's default
  CHECK(m.position.as<RopeConfig>().layout == RopeLayout::Interleaved);
  CHECK(windows(m) == std::vector<int>{4096, 4096, 4096, 0, 4096, 4096, 4096, 0});
  for (int i = 0; i < 8; ++i) CHECK(m.layers[size_t(i)].position.type() == (i % 4 == 3 ? "none" : "rope"));
  CHECK(describe_architecture(m).find("LayerNorm; attention and MLP side by side on one norm; logits × 0.0625") != std::string::npos);
  c["logit_scale"] = 0;
  REQUIRE_THROWS_NAMING(parse(c), ConfigError, kSource, "logit_scale must be > 0");
  c = tiny_config();
  c["logit_scale"] = 0.5;  // another architecture's key that would change the math
  REQUIRE_THROWS_NAMING(parse(c), ConfigError, kSource, "logit_scale is not read by LlamaForCausalLM");
}

TEST_CASE("config: Dual Chunk Attention, as an extend method and as Qwen2.5-1M's key", "[config][layers]") {
  json c = tiny_config();
  c["extend"] = {{"dca", {{"chunk_size", 24}, {"local_size", 8}}}};
  ModelConfig m = parse(c);
  REQUIRE(m.extend.size() == 1);
  const ExtensionConfig& d = *m.extend[0];
  CHECK((d.remaps() && d.has_farther() && !d.scales()));
  // chunks of 16: query 40 (chunk 2) sees 32.. as they are, 16..31 from 16 + 8, 0..15 from 24 (= chunk_size)
  CHECK(d.near_first(40) == 32);
  CHECK(d.farther_first(40) == 16);
  CHECK(d.far_query(40) == 24);  // min(40 % 16 + 16, 24)
  CHECK(d.far_query(33) == 17);
  CHECK(d.farther_query(40) == 24);  // min(2·16 − 1, 24)
  CHECK(d.far_key(37) == 5);
  CHECK(to_json(parse(to_json(m))) == to_json(m));
  c["extend"]["dca"]["original_max_position_embeddings"] = 32;
  const ModelConfig scaled = parse(c);
  CHECK(scaled.extend[0]->scales());
  CHECK(scaled.extend[0]->query_scale(31) == 1.0);
  CHECK(scaled.extend[0]->key_scale(127) == Approx(1 + 0.1 * std::log(4.0)));
  c["extend"]["dca"]["local_size"] = 24;
  REQUIRE_THROWS_NAMING(parse(c), ConfigError, kSource, "extend.dca.local_size must be below chunk_size (24)");
  c["extend"] = {{"dca", json::object()}};
  c["position"] = {{"type", "alibi"}};
  REQUIRE_THROWS_NAMING(parse(c), ConfigError, kSource, "extend.dca re-encodes key positions, which needs a rotary scheme");

  c = tiny_config();  // Qwen2.5-1M's key, as vLLM reads it
  c["architectures"] = {"Qwen2ForCausalLM"};
  c["model_type"] = "qwen2";
  c["dual_chunk_attention_config"] = {{"chunk_size", 262144}, {"local_size", 8192}, {"original_max_position_embeddings", 262144},
                                      {"sparse_attention_threshold", 32768}, {"sparse_attention_last_q", 64}};
  m = parse(c);
  REQUIRE(m.extend.size() == 1);
  CHECK(m.extend[0]->to_json() == json{{"chunk_size", 262144}, {"local_size", 8192}, {"original_max_position_embeddings", 262144}});
  c["dual_chunk_attention_config"]["sparse_attention_enabled"] = true;
  REQUIRE_THROWS_NAMING(parse(c), ConfigError, kSource, "dual_chunk_attention_config enables sparse attention (MInference)");
  c["dual_chunk_attention_config"].erase("sparse_attention_enabled");
  c["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 4}};
  REQUIRE_THROWS_NAMING(parse(c), ConfigError, kSource, "dual_chunk_attention_config is set together with rope_scaling");
  c.erase("rope_scaling");
  c["extend"] = {{"dca", json::object()}};
  REQUIRE_THROWS_NAMING(parse(c), ConfigError, kSource, "dual_chunk_attention_config is set together with extend.dca");
  c.erase("extend");
  c["dual_chunk_attention_config"]["chunk"] = 3;
  REQUIRE_THROWS_NAMING(parse(c), ConfigError, kSource, "dual_chunk_attention_config has 'chunk', which pert does not read");
}

TEST_CASE("DeepSeek V3 / V2: MLA's shapes and the routers pert computes, other shapes and choices refused", "[config][deepseek]") {
  json c = tiny_config();  // DeepSeek-V3's keys, shrunk (tools/reference/deepseek.py's)
  c["architectures"] = {"DeepseekV3ForCausalLM"};
  c["model_type"] = "deepseek_v3";
  c.erase("num_key_value_heads");
  c.update(json{{"n_routed_experts", 8}, {"num_experts_per_tok", 2}, {"n_shared_experts", 1}, {"n_group", 4}, {"topk_group", 2},
                {"moe_intermediate_size", 8}, {"first_k_dense_replace", 1}, {"q_lora_rank", 12}, {"kv_lora_rank", 8},
                {"qk_nope_head_dim", 6}, {"qk_rope_head_dim", 4}, {"v_head_dim", 5}});
  ModelConfig m = parse(c);
  CHECK(m.head_dim == 12);  // the cached row: rope + kv_lora_rank, one kv head (mla.hpp)
  CHECK(m.n_kv_heads == 1);
  CHECK(m.mla.qk_head_dim() == 10);
  CHECK(m.mla.enabled());
  CHECK(m.mla.q_lora_rank == 12);
  CHECK(m.position.as<RopeConfig>().rotary_dim == 4);
  CHECK(m.position.as<RopeConfig>().layout == RopeLayout::Interleaved);
  CHECK(m.attention_scale == Approx(1 / std::sqrt(10.0)));
  CHECK(m.moe.router == MoeConfig::Router::SigmoidGroups);
  CHECK(m.moe.routed_scale == 2.5);
  CHECK(m.moe.shared_ffn == 8);
  CHECK(!m.moe.sparse_layer(0));
  CHECK(m.moe.sparse_layer(1));
  c["rope_interleave"] = false;
  c["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 40.0}, {"mscale", 1.0}, {"mscale_all_dim", 1.0},
                       {"original_max_position_embeddings", 16}};
  m = parse(c);
  CHECK(m.position.as<RopeConfig>().layout == RopeLayout::Half);
  const double mscale = 0.1 * std::log(40.0) + 1;  // yarn_get_mscale(40, 1): the softmax scale × its square
  CHECK(m.attention_scale == Approx(mscale * mscale / std::sqrt(10.0)));
  c.erase("rope_scaling");
  c["q_lora_rank"] = nullptr;  // one projection q_proj
  CHECK(parse(c).mla.q_lora_rank == 0);

  auto refused = [&](const char* key, const json& value, const std::string& says) {
    json bad = c;
    bad[key] = value;
    REQUIRE_THROWS_NAMING(parse(bad), ConfigError, kSource, says);
  };
  refused("qk_rope_head_dim", 3, "qk_rope_head_dim must be even");
  refused("num_key_value_heads", 2, "num_key_value_heads (2) must equal num_attention_heads (4)");
  refused("head_dim", 10, "head_dim (10) must equal qk_rope_head_dim (4)");
  refused("partial_rotary_factor", 0.5, "partial_rotary_factor is set");
  refused("kv_lora_rank", 0, "kv_lora_rank must be in [1,");
  refused("topk_method", "greedy", "topk_method is \"greedy\"; DeepSeek V3 chooses by noaux_tc");
  refused("scoring_func", "softmax", "scoring_func is \"softmax\"");
  refused("n_group", 3, "n_group (3) must divide n_routed_experts (8)");
  refused("topk_group", 5, "topk_group (5) keeps more groups than n_group (4)");
  refused("num_experts_per_tok", 5, "num_experts_per_tok (5) is more than the topk_group groups hold (4)");
  refused("attention_bias", true, "attention_bias is true, but DeepseekV3ForCausalLM has no such biases");
  refused("position", json{{"type", "rope"}, {"rotary_dim", 6}}, "position.rotary_dim is 6 (layer 0), but MLA's heads rotate exactly");
  c["v_head_dim"] = 11;  // wider than the key: the latent expands to it
  CHECK(parse(c).mla.v_head_dim == 11);
  c["v_head_dim"] = 5;

  c["architectures"] = {"DeepseekV2ForCausalLM"};  // DeepSeek-V2-Lite's choices
  c["model_type"] = "deepseek_v2";
  c.erase("rope_interleave");
  c.update(json{{"n_group", 1}, {"topk_group", 1}, {"routed_scaling_factor", 1.0}});
  m = parse(c);
  CHECK(m.moe.router == MoeConfig::Router::Softmax);
  CHECK(!m.moe.renormalize);
  CHECK(m.position.as<RopeConfig>().layout == RopeLayout::Interleaved);
  CHECK(m.moe.n_groups == 1);  // greedy: n_group read, no groups
  refused("topk_method", "noaux_tc", "topk_method is \"noaux_tc\": DeepSeek V2 chooses by \"greedy\" or \"group_limited_greedy\"");
  refused("routed_scaling_factor", -1.0, "routed_scaling_factor must be > 0");
  c.update(json{{"topk_method", "group_limited_greedy"}, {"n_group", 4}, {"topk_group", 2}, {"routed_scaling_factor", 16.0}});
  m = parse(c);  // DeepSeek-V2's: groups scored by their best probability, × 16
  CHECK(m.moe.n_groups == 4);
  CHECK(m.moe.topk_groups == 2);
  CHECK(m.moe.routed_scale == 16.0);
  refused("topk_group", 5, "topk_group (5) keeps more groups than n_group (4)");
  c.update(json{{"topk_method", "greedy"}, {"n_group", 1}, {"topk_group", 1}, {"routed_scaling_factor", 1.0}});
  refused("norm_topk_prob", true, "norm_topk_prob is true");
  refused("rope_interleave", false, "rope_interleave is not read by DeepseekV2ForCausalLM");
  c["n_routed_experts"] = nullptr;  // a dense model
  CHECK(parse(c).moe.n_experts == 0);
}

TEST_CASE("DeepSeek-V3's and DeepSeek-V2-Lite's published config.json parse as HF reads them", "[config][deepseek]") {
  const json yarn = {{"beta_fast", 32}, {"beta_slow", 1}, {"factor", 40}, {"mscale", 1.0}, {"mscale_all_dim", 1.0},
                     {"original_max_position_embeddings", 4096}, {"type", "yarn"}};
  json v3 = {{"architectures", {"DeepseekV3ForCausalLM"}}, {"attention_bias", false}, {"attention_dropout", 0.0},
             {"aux_loss_alpha", 0.001}, {"bos_token_id", 0}, {"eos_token_id", 1}, {"ep_size", 1}, {"first_k_dense_replace", 3},
             {"hidden_act", "silu"}, {"hidden_size", 7168}, {"initializer_range", 0.02}, {"intermediate_size", 18432},
             {"kv_lora_rank", 512}, {"max_position_embeddings", 163840}, {"model_type", "deepseek_v3"},
             {"moe_intermediate_size", 2048}, {"moe_layer_freq", 1}, {"n_group", 8}, {"n_routed_experts", 256},
             {"n_shared_experts", 1}, {"norm_topk_prob", true}, {"num_attention_heads", 128}, {"num_experts_per_tok", 8},
             {"num_hidden_layers", 61}, {"num_key_value_heads", 128}, {"num_nextn_predict_layers", 1}, {"pretraining_tp", 1},
             {"q_lora_rank", 1536}, {"qk_nope_head_dim", 128}, {"qk_rope_head_dim", 64}, {"rms_norm_eps", 1e-6},
             {"rope_scaling", yarn}, {"rope_theta", 10000}, {"routed_scaling_factor", 2.5}, {"scoring_func", "sigmoid"},
             {"seq_aux", true}, {"tie_word_embeddings", false}, {"topk_group", 4}, {"topk_method", "noaux_tc"},
             {"torch_dtype", "bfloat16"}, {"use_cache", true}, {"v_head_dim", 128}, {"vocab_size", 129280}};
  const ModelConfig m = parse(v3);
  CHECK(m.head_dim == 576);  // the cached row: 64 rope + 512 latent
  CHECK(m.n_kv_heads == 1);
  const double mscale = 0.1 * std::log(40.0) + 1;
  CHECK(m.attention_scale == Approx(mscale * mscale / std::sqrt(192.0)));  // HF's (nope + rope)^-½ × m²
  CHECK(m.position.as<RopeConfig>().rotary_dim == 64);
  CHECK(m.moe.shared_ffn == 2048);
  CHECK(!m.moe.sparse_layer(2));
  CHECK(m.moe.sparse_layer(3));
  json v2 = v3;  // DeepSeek-V2-Lite's
  v2.update(json{{"architectures", {"DeepseekV2ForCausalLM"}}, {"model_type", "deepseek_v2"}, {"first_k_dense_replace", 1},
                 {"hidden_size", 2048}, {"intermediate_size", 10944}, {"moe_intermediate_size", 1408}, {"n_group", 1},
                 {"n_routed_experts", 64}, {"n_shared_experts", 2}, {"norm_topk_prob", false}, {"num_attention_heads", 16},
                 {"num_experts_per_tok", 6}, {"num_hidden_layers", 27}, {"num_key_value_heads", 16}, {"q_lora_rank", nullptr},
                 {"routed_scaling_factor", 1.0}, {"scoring_func", "softmax"}, {"topk_group", 1}, {"topk_method", "greedy"},
                 {"vocab_size", 102400}});
  v2["rope_scaling"]["mscale"] = v2["rope_scaling"]["mscale_all_dim"] = 0.707;
  v2.erase("num_nextn_predict_layers");
  const ModelConfig l = parse(v2);
  CHECK(l.mla.q_lora_rank == 0);
  const double m2 = 0.1 * 0.707 * std::log(40.0) + 1;  // V2 scales by m² too (transformers PR 47435, DeepSeek's own code)
  CHECK(l.attention_scale == Approx(m2 * m2 / std::sqrt(192.0)));
  CHECK(l.moe.router == MoeConfig::Router::Softmax);
  CHECK(l.moe.shared_ffn == 2816);
}
