#include "pert/error.hpp"
#include "pert/model_dir.hpp"
#include "pert/positions.hpp"
#include "test_util.hpp"

using namespace pert;

TEST_CASE("model dir: expected tensors follow HF llama names and [out, in] shapes", "[model_dir]") {
  json c = tiny_config();
  c["num_hidden_layers"] = 1;
  c["position"] = {{"type", "learned"}, {"max_positions", 10}};
  std::vector<ExpectedTensor> want = {
      {"model.embed_tokens.weight", {32, 16}},
      {"model.embed_positions.weight", {10, 16}},
      {"model.layers.0.input_layernorm.weight", {16}},
      {"model.layers.0.self_attn.q_proj.weight", {16, 16}},
      {"model.layers.0.self_attn.k_proj.weight", {8, 16}},
      {"model.layers.0.self_attn.v_proj.weight", {8, 16}},
      {"model.layers.0.self_attn.o_proj.weight", {16, 16}},
      {"model.layers.0.post_attention_layernorm.weight", {16}},
      {"model.layers.0.mlp.gate_proj.weight", {24, 16}},
      {"model.layers.0.mlp.up_proj.weight", {24, 16}},
      {"model.layers.0.mlp.down_proj.weight", {16, 24}},
      {"model.norm.weight", {16}},
      {"lm_head.weight", {32, 16}},
  };
  auto got = expected_tensors(parse_model_config(c, "c"));
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    CHECK(got[i].name == want[i].name);
    CHECK(got[i].shape == want[i].shape);
  }
  // t5 adds the shared bias table; tied embeddings drop lm_head; head_dim widens q/k/v/o.
  c["position"] = {{"type", "t5"}, {"num_buckets", 8}, {"max_distance", 20}};
  c["tie_word_embeddings"] = true;
  c["head_dim"] = 6;
  got = expected_tensors(parse_model_config(c, "c"));
  CHECK(got[1].name == "model.relative_attention_bias.weight");
  CHECK(got[1].shape == std::vector<int64_t>{8, 4});
  CHECK(got[3].shape == std::vector<int64_t>{24, 16});
  CHECK(got[4].shape == std::vector<int64_t>{12, 16});
  CHECK(got[6].shape == std::vector<int64_t>{16, 24});
  CHECK(got.back().name == "model.norm.weight");
}

TEST_CASE("model dir: Qwen2's biases and Phi-3's fused projections by their HF names", "[model_dir]") {
  json c = tiny_config();
  c["architectures"] = {"Qwen2ForCausalLM"};
  c["model_type"] = "qwen2";
  std::vector<ExpectedTensor> got = expected_tensors(parse_model_config(c, "c"));
  CHECK(got.size() == 21 + 2 * 3);
  CHECK(got[5].name == "model.layers.0.self_attn.q_proj.bias");
  CHECK(got[5].shape == std::vector<int64_t>{16});
  CHECK(got[6].shape == std::vector<int64_t>{8});  // k: 2 kv heads of 4
  c["architectures"] = {"Phi3ForCausalLM"};
  c["model_type"] = "phi3";
  got = expected_tensors(parse_model_config(c, "c"));
  CHECK(got.size() == 21 - 2 * 3);
  CHECK(got[2].name == "model.layers.0.self_attn.qkv_proj.weight");
  CHECK(got[2].shape == std::vector<int64_t>{16 + 2 * 8, 16});
  CHECK(got[5].name == "model.layers.0.mlp.gate_up_proj.weight");
  CHECK(got[5].shape == std::vector<int64_t>{2 * 24, 16});
}

TEST_CASE("model dir: generation_config.json's eos ids join config.json's", "[model_dir]") {
  TempDir tmp;
  write_model_dir(tmp.path, tiny_config(), tiny_tensors());
  write_file(tmp / "generation_config.json", json{{"eos_token_id", {2, 7, 9}}, {"do_sample", true}}.dump());
  CHECK(open_model_dir(tmp.path).config.eos_token_ids == std::vector<int>{2, 7, 9});
  write_file(tmp / "generation_config.json", json{{"eos_token_id", 40}}.dump());
  REQUIRE_THROWS_NAMING(open_model_dir(tmp.path), ConfigError, (tmp / "generation_config.json").string(),
                        "eos_token_id must be token ids in [0, vocab_size = 32), got 40");
}

TEST_CASE("model dir: a valid directory opens, in every dtype, with overrides", "[model_dir]") {
  TempDir tmp;
  for (const char* dtype : {"F32", "F16", "BF16"}) {
    write_model_dir(tmp.path, tiny_config(), tiny_tensors(dtype));
    const ModelDir m = open_model_dir(tmp.path);
    CHECK(m.config.position.type() == "rope");
    CHECK(m.checkpoint.tensors().size() == 21);
    CHECK(m.checks.size() == 4);
    CHECK(read_f32(*m.checkpoint.find("model.norm.weight")) == tiny_tensors()[19].values);
  }
  const ModelDir alibi = open_model_dir(tmp.path, {{}, {"position.type=alibi", "rope_theta=null"}, true});
  CHECK(alibi.config.position.type() == "alibi");
  CHECK_FALSE(alibi.config_json.contains("rope_theta"));
}

TEST_CASE("model dir: overrides may rescale the trained scheme, not replace it", "[model_dir]") {
  TempDir tmp;
  write_model_dir(tmp.path, tiny_config(), tiny_tensors());
  const std::string cfg = (tmp / "config.json").string();
  // A scaling, a new base and an extension keep RoPE: the trained scheme is kept alongside.
  const ModelDir ntk = open_model_dir(tmp.path, {{}, {"rope_scaling={\"rope_type\":\"ntk\",\"factor\":4}"}});
  CHECK(ntk.config.position.scheme->label() == "rope ntk x4");
  CHECK(ntk.config.trained->position.scheme->label() == "rope");
  CHECK_NOTHROW(open_model_dir(tmp.path, {{}, {"rope_theta=500000", "extend={\"logn\":{}}"}}));
  REQUIRE_THROWS_NAMING(open_model_dir(tmp.path, {{}, {"position.type=alibi", "rope_theta=null"}}), SchemeChangeError,
                        cfg, "trained with rope positions", "`set position.type=alibi` `set rope_theta=null`",
                        "would run it with alibi", "`allow_scheme_change` runs it anyway");
  // xPos's decay is part of what an xPos model learned: dropping it is a change of scheme too.
  json xpos = tiny_config();
  xpos["position"] = {{"type", "rope"}, {"xpos", json::object()}};
  xpos.erase("rope_theta");
  write_model_dir(tmp.path, xpos, tiny_tensors());
  REQUIRE_THROWS_NAMING(open_model_dir(tmp.path, {{}, {"position.xpos=null"}}), SchemeChangeError, cfg,
                        "trained with rope+xpos positions", "would run it with rope ");
  const ModelDir allowed = open_model_dir(tmp.path, {{}, {"position.xpos=null"}, true});
  CHECK(allowed.config.trained->position.scheme->identity() == "rope+xpos");
  CHECK(allowed.config.position.scheme->identity() == "rope");
  // ... and so is a layer's: SmolLM3's second layer, trained without positions, run with RoPE
  json smol = tiny_config();
  smol["architectures"] = {"SmolLM3ForCausalLM"};
  smol["model_type"] = "smollm3";
  smol["no_rope_layer_interval"] = 2;
  write_model_dir(tmp.path, smol, tiny_tensors());
  REQUIRE_THROWS_NAMING(open_model_dir(tmp.path, {{}, {"no_rope_layer_interval=4"}}), SchemeChangeError, cfg,
                        "trained with none positions in layer 1", "would run it with rope");
  REQUIRE_THROWS_NAMING(open_model_dir(tmp.path, {{}, {"layers={\"r\":{\"layers\":[1],\"position\":{\"type\":\"rope\"}}}"}}),
                        SchemeChangeError, cfg, "in layer 1");
  CHECK_NOTHROW(open_model_dir(tmp.path, {{}, {"layers={\"w\":{\"layers\":[1],\"window\":4}}"}}));  // a window is no change of scheme
}

TEST_CASE("model dir: tensors that do not fit the config are refused", "[model_dir]") {
  TempDir tmp;
  const std::string st = (tmp / "model.safetensors").string();
  auto tensors = tiny_tensors();
  SECTION("missing tensor") {
    tensors.erase(tensors.begin() + 3);  // layer 0 k_proj
    write_model_dir(tmp.path, tiny_config(), tensors);
    REQUIRE_THROWS_NAMING(open_model_dir(tmp.path), ConfigError, st, "missing tensor 'model.layers.0.self_attn.k_proj.weight'");
  }
  SECTION("shape mismatch") {
    tensors[2] = {"model.layers.0.self_attn.q_proj.weight", "F32", {8, 16}, exact_values(128, 1)};
    write_model_dir(tmp.path, tiny_config(), tensors);
    REQUIRE_THROWS_NAMING(open_model_dir(tmp.path), ConfigError, st, "'model.layers.0.self_attn.q_proj.weight'",
                          "shape [8, 16]", "implies [16, 16]");
  }
  SECTION("unexpected tensor") {
    tensors.push_back({"model.layers.0.self_attn.q_proj.bias", "F32", {16}, exact_values(16, 1)});
    write_model_dir(tmp.path, tiny_config(), tensors);
    REQUIRE_THROWS_NAMING(open_model_dir(tmp.path), ConfigError, st, "unexpected tensor 'model.layers.0.self_attn.q_proj.bias'");
  }
  SECTION("precomputed rotary buffers are tolerated") {
    tensors.push_back({"model.layers.0.self_attn.rotary_emb.inv_freq", "F32", {2}, {1.0f, 0.01f}});
    write_model_dir(tmp.path, tiny_config(), tensors);
    CHECK_NOTHROW(open_model_dir(tmp.path));
  }
  SECTION("tied embeddings with an lm_head present") {
    json c = tiny_config();
    c["tie_word_embeddings"] = true;
    write_model_dir(tmp.path, c, tensors);
    REQUIRE_THROWS_NAMING(open_model_dir(tmp.path), ConfigError, st, "unexpected tensor 'lm_head.weight'");
  }
  SECTION("a scheme override that needs a tensor the checkpoint lacks") {
    write_model_dir(tmp.path, tiny_config(), tensors);
    REQUIRE_THROWS_NAMING(open_model_dir(tmp.path, {{}, {"position.type=learned"}, true}), ConfigError, st,
                          "missing tensor 'model.embed_positions.weight'");
  }
  SECTION("no config.json, bad config.json, not a directory") {
    write_file(tmp / "model.safetensors", encode_safetensors(tensors));
    const std::string cfg = (tmp / "config.json").string();
    REQUIRE_THROWS_NAMING(open_model_dir(tmp.path), IoError, cfg, "cannot open");
    write_file(tmp / "config.json", "{\"hidden_size\": 16,");
    REQUIRE_THROWS_NAMING(open_model_dir(tmp.path), FormatError, cfg, "invalid JSON");
    json c = tiny_config();
    c["num_key_value_heads"] = 3;
    write_file(tmp / "config.json", c.dump());
    REQUIRE_THROWS_NAMING(open_model_dir(tmp.path), ConfigError, cfg, "num_key_value_heads");
    REQUIRE_THROWS_NAMING(open_model_dir(tmp.path, {{}, {"num_key_value_heads=5"}}), ConfigError,
                          cfg + " (with overrides)", "num_key_value_heads");
    REQUIRE_THROWS_NAMING(open_model_dir(tmp / "nowhere"), IoError, "nowhere", "not a model directory");
  }
}
