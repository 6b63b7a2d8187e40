// The GGUF reader on hand-built files: every field read as the format defines it, and every
// hostile count, length, type and offset refused with one line naming the file and the key or
// tensor (tests/reference/gguf_model_test.py runs whole models written by tools/convert/to_gguf.py).
#include <catch2/catch.hpp>

#include <cstring>
#include <fstream>
#include <limits>

#include "pert/config.hpp"
#include "pert/error.hpp"
#include "pert/gguf.hpp"
#include "pert/gguf_model.hpp"
#include "test_util.hpp"

using namespace pert;

namespace {

// GGUF bytes, field by field (little-endian).
struct Bytes {
  std::string b;
  Bytes& u32(uint32_t v) { return raw(&v, 4); }
  Bytes& u64(uint64_t v) { return raw(&v, 8); }
  Bytes& f32(float v) { return raw(&v, 4); }
  Bytes& str(const std::string& s) { return u64(s.size()).raw(s.data(), s.size()); }
  Bytes& raw(const void* p, size_t n) {
    b.append(static_cast<const char*>(p), n);
    return *this;
  }
  Bytes& pad(size_t alignment) {
    while (b.size() % alignment) b.push_back('\0');
    return *this;
  }
};

Bytes header(uint64_t tensors, uint64_t keys, uint32_t version = 3) {
  Bytes h;
  h.raw("GGUF", 4).u32(version).u64(tensors).u64(keys);
  return h;
}

GgufHeader parse(const Bytes& bytes) {
  return parse_gguf(reinterpret_cast<const uint8_t*>(bytes.b.data()), bytes.b.size(), "m.gguf");
}

// A file of two keys and two tensors: an F32 [2][3] and a Q8_0 row of 32.
Bytes two_tensors(uint32_t version = 3) {
  Bytes f = header(2, 2, version);
  f.str("general.architecture").u32(8).str("llama");
  f.str("tokenizer.ggml.tokens").u32(9).u32(8).u64(2).str("a").str("b");
  f.str("w").u32(2).u64(3).u64(2).u32(0).u64(0);
  f.str("q").u32(1).u64(32).u32(8).u64(32);
  f.pad(32);
  for (int i = 0; i < 6; ++i) f.f32(float(i));
  f.pad(32);
  const uint16_t d = 0x3c00;  // F16 1.0
  f.raw(&d, 2);
  for (int i = 0; i < 32; ++i) f.b.push_back(char(i - 16));
  return f;
}

}  // namespace

TEST_CASE("GGUF: versions 2 and 3 read field by field", "[gguf]") {
  for (uint32_t version : {2u, 3u}) {
    const Bytes f = two_tensors(version);
    const GgufHeader h = parse(f);
    CHECK(h.version == version);
    CHECK(h.keys == std::vector<std::string>{"general.architecture", "tokenizer.ggml.tokens"});
    CHECK(h.metadata.at("general.architecture").strings[0] == "llama");
    const GgufValue& tokens = h.metadata.at("tokenizer.ggml.tokens");
    CHECK(tokens.type_name() == "array of string");
    CHECK(tokens.strings == std::vector<std::string_view>{"a", "b"});
    REQUIRE(h.tensors.size() == 2);
    CHECK(h.tensors[0].shape == std::vector<int64_t>{3, 2});
    CHECK(h.tensors[0].nbytes == 24);
    float v;
    std::memcpy(&v, h.tensors[0].data + 20, 4);
    CHECK(v == 5.0f);
    CHECK(h.tensors[1].type->type == BlockType::Q8_0);
    CHECK(h.tensors[1].nbytes == 34);
    CHECK(h.tensors[1].data - reinterpret_cast<const uint8_t*>(f.b.data()) == int64_t(h.data_offset + 32));
  }
}

TEST_CASE("GGUF: hostile headers are refused by name", "[gguf]") {
  auto refused = [](const Bytes& f, const std::string& words) {
    INFO(words);
    REQUIRE_THROWS_AS(parse(f), FormatError);
    try {
      parse(f);
    } catch (const FormatError& e) {
      const std::string message = e.what();
      CHECK(message.rfind("m.gguf: ", 0) == 0);
      CHECK(message.find(words) != std::string::npos);
      CHECK(message.find('\n') == std::string::npos);
    }
  };
  refused(Bytes().raw("GGML", 4), "no \"GGUF\" magic");
  refused(header(0, 0, 1), "version 1 is not supported");
  refused(header(0, 0, 0x03000000), "big-endian");
  refused(header(uint64_t(1) << 40, 0), "tensor count 1099511627776");
  refused(header(0, uint64_t(1) << 40), "key-value count");
  // A string of 2^63 bytes.
  refused(header(0, 1).u64(uint64_t(1) << 63), "key 0 needs 9223372036854775808 bytes");
  refused(header(0, 1).str("k").u32(8).u64(uint64_t(1) << 63), "key 'k' needs");
  refused(header(0, 1).str("k").u32(13), "value type is 13");
  refused(header(0, 1).str("k").u32(9).u32(9), "array of arrays");
  refused(header(0, 1).str("k").u32(9).u32(4).u64(uint64_t(1) << 62), "array of 4611686018427387904");
  refused(header(0, 1).str("k").u32(9).u32(8).u64(1000000), "strings is longer than the file");
  refused(header(0, 2).str("k").u32(4).u32(1).str("k").u32(4).u32(1), "key 'k' appears twice");
  refused(header(0, 1).str("general.alignment").u32(4).u32(3), "not a power of two");
  refused(header(0, 1).str("general.alignment").u32(6).f32(32), "is f32, expected u32");
  refused(header(0, 1).str("k").u32(4), "truncated");
  // Tensor infos.
  refused(header(1, 0).str("t").u32(5), "5 dimensions");
  refused(header(1, 0).str("t").u32(1).u64(0), "is zero");
  refused(header(1, 0).str("t").u32(2).u64(uint64_t(1) << 40).u64(uint64_t(1) << 40), "overflow");
  refused(header(1, 0).str("t").u32(1).u64(48).u32(12).u64(0), "not whole Q4_K blocks of 256");
  refused(header(1, 0).str("t").u32(1).u64(4).u32(0).u64(3), "not a multiple of the alignment 32");
  Bytes far = header(1, 0).str("t").u32(1).u64(4).u32(0).u64(uint64_t(-32));
  far.pad(32).b.append(16, '\0');
  refused(far, "tensor 't': 16 bytes at offset 18446744073709551584 of the data area, which holds 16");
  refused(header(1, 0).str("t").u32(1).u64(4).u32(0).u64(0).pad(32), "tensor 't': 16 bytes at offset 0");
  refused(header(2, 0).str("t").u32(1).u64(4).u32(0).u64(0).str("t").u32(1).u64(4).u32(0).u64(0), "appears twice");
  // a: 8 F32 values (32 bytes) from 0; b from 32, or from 0 (inside a).
  Bytes apart = header(2, 0).str("a").u32(1).u64(8).u32(0).u64(0).str("b").u32(1).u64(4).u32(0).u64(32);
  apart.pad(32).b.append(64, '\0');
  CHECK_NOTHROW(parse(apart));
  Bytes overlapping = header(2, 0).str("a").u32(1).u64(8).u32(0).u64(0).str("b").u32(1).u64(4).u32(0).u64(0);
  overlapping.pad(32).b.append(64, '\0');
  refused(overlapping, "tensor 'b' overlaps tensor 'a'");
}

TEST_CASE("GGUF: a type pert does not read is listed, and refused when the model needs it", "[gguf]") {
  Bytes f = header(1, 0).str("token_embd.weight").u32(2).u64(32).u64(4).u32(20).u64(0);  // IQ4_NL
  f.pad(32).b.append(72, '\0');
  const GgufHeader h = parse(f);
  REQUIRE(h.tensors.size() == 1);
  CHECK(h.tensors[0].type == nullptr);
  CHECK(ggml_type_name(20) == "IQ4_NL");
  CHECK(ggml_type_name(99).find("99") != std::string::npos);
}

TEST_CASE("GGUF: typed look-ups name the file and the key", "[gguf]") {
  const TempDir dir;
  const std::string path = (dir.path / "m.gguf").string();
  const Bytes f = two_tensors();
  std::ofstream(path, std::ios::binary).write(f.b.data(), std::streamsize(f.b.size()));
  CHECK(is_gguf_file(path));
  CHECK_FALSE(is_gguf_file(dir.path));
  const GgufFile file(path);
  CHECK(file.get_string("general.architecture") == "llama");
  CHECK_FALSE(file.opt_int("llama.block_count").has_value());
  CHECK_THROWS_WITH(file.get_int("llama.block_count"), path + ": key 'llama.block_count' is missing");
  CHECK_THROWS_WITH(file.get_int("general.architecture"), path + ": key 'general.architecture' is string, expected an integer");
  CHECK_THROWS_WITH(file.get_array("tokenizer.ggml.tokens", GgufKind::F32),
                    path + ": key 'tokenizer.ggml.tokens' is array of string, expected an array of f32");
  // Its metadata is not a model's: the first missing key is named.
  CHECK_THROWS_WITH(gguf_config_json(file), Catch::Contains("tensor 'token_embd.weight' is missing"));
}

TEST_CASE("GGUF: tensor names map to HF's", "[gguf]") {
  CHECK(hf_tensor_name("blk.12.attn_q.weight", "LlamaForCausalLM") == "model.layers.12.self_attn.q_proj.weight");
  CHECK(hf_tensor_name("blk.0.attn_k.bias", "Qwen2ForCausalLM") == "model.layers.0.self_attn.k_proj.bias");
  CHECK(hf_tensor_name("blk.3.ffn_up.weight", "Phi3ForCausalLM") == "model.layers.3.mlp.gate_up_proj.weight");
  CHECK(hf_tensor_name("blk.3.ffn_up.weight", "Qwen3ForCausalLM") == "model.layers.3.mlp.up_proj.weight");
  CHECK(hf_tensor_name("blk.1.attn_q_norm.weight", "Qwen3ForCausalLM") == "model.layers.1.self_attn.q_norm.weight");
  CHECK(hf_tensor_name("output.weight", "LlamaForCausalLM") == "lm_head.weight");
  for (const char* odd : {"blk..attn_q.weight", "blk.1.attn_q", "blk.1.attn_zzz.weight", "blk.1x.attn_q.weight", "foo"})
    CHECK(hf_tensor_name(odd, "LlamaForCausalLM").empty());
}

namespace {

// A model's metadata for gguf_config_json: `arch`'s hyperparameters (4 layers, d = 8, 2 heads),
// token_embd.weight F32 [8 × 4], and `extra` key-value pairs (key, type, value bytes) appended.
GgufFile model_file(const TempDir& dir, const std::string& arch, const std::vector<std::pair<std::string, Bytes>>& extra) {
  std::vector<std::pair<std::string, Bytes>> kv;
  auto u32 = [&](const std::string& key, uint32_t v) { kv.push_back({arch + "." + key, Bytes().u32(4).u32(v)}); };
  auto f32 = [&](const std::string& key, float v) { kv.push_back({arch + "." + key, Bytes().u32(6).f32(v)}); };
  kv.push_back({"general.architecture", Bytes().u32(8).str(arch)});
  u32("embedding_length", 8), u32("attention.head_count", 2), u32("context_length", 64), u32("feed_forward_length", 16);
  u32("block_count", 4);
  if (arch == "cohere2") f32("attention.layer_norm_epsilon", 1e-5f), f32("logit_scale", 0.25f);
  else f32("attention.layer_norm_rms_epsilon", 1e-6f);
  for (const auto& e : extra) kv.push_back({arch + "." + e.first, e.second});
  Bytes f = header(1, kv.size());
  for (const auto& [key, value] : kv) f.str(key).raw(value.b.data(), value.b.size());
  f.str("token_embd.weight").u32(2).u64(8).u64(4).u32(0).u64(0);
  f.pad(32).b.append(8 * 4 * 4, '\0');
  const std::string path = (dir.path / (arch + ".gguf")).string();
  std::ofstream(path, std::ios::binary).write(f.b.data(), std::streamsize(f.b.size()));
  return GgufFile(path);
}

std::pair<std::string, Bytes> f32_key(const std::string& key, float v) { return {key, Bytes().u32(6).f32(v)}; }

}  // namespace

TEST_CASE("GGUF: Gemma's caps are positive finite numbers, not NaN or negative read as none", "[gguf]") {
  const TempDir dir;
  const json c = gguf_config_json(model_file(dir, "gemma2", {}));
  CHECK((c["attn_logit_softcapping"] == 50.0 && c["final_logit_softcapping"] == 30.0));  // absent: Gemma 2's
  CHECK(gguf_config_json(model_file(dir, "gemma3", {}))["final_logit_softcapping"].is_null());
  CHECK(gguf_config_json(model_file(dir, "gemma2", {f32_key("final_logit_softcapping", 0)}))["final_logit_softcapping"].is_null());
  CHECK(gguf_config_json(model_file(dir, "gemma2", {f32_key("attn_logit_softcapping", 20)}))["attn_logit_softcapping"] == 20.0);
  for (const char* key : {"attn_logit_softcapping", "final_logit_softcapping"})
    for (const float bad : {std::numeric_limits<float>::quiet_NaN(), -50.0f, std::numeric_limits<float>::infinity()})
      REQUIRE_THROWS_NAMING(gguf_config_json(model_file(dir, "gemma2", {f32_key(key, bad)})), FormatError,
                            "gemma2.gguf: key 'gemma2." + std::string(key) + "'", "a cap is a positive finite number");
  REQUIRE_THROWS_NAMING(gguf_config_json(model_file(dir, "gemma2", {f32_key("attn_logit_softcapping", 0)})), FormatError,
                        "key 'gemma2.attn_logit_softcapping' is 0", "a cap is a positive finite number");
}

TEST_CASE("GGUF: sliding_window_pattern is read and its type checked, and SmolLM3's window is refused", "[gguf][layers]") {
  const TempDir dir;
  auto types = [](const json& c) { return c.value("layer_types", json()); };
  // Absent: llama.cpp's hard-coded period, written where inspect shows it.
  CHECK(gguf_config_json(model_file(dir, "gemma3", {}))["sliding_window_pattern"] == 6);
  CHECK(gguf_config_json(model_file(dir, "cohere2", {}))["sliding_window_pattern"] == 4);
  const json period = gguf_config_json(model_file(dir, "gemma3", {{"attention.sliding_window_pattern", Bytes().u32(4).u32(2)}}));
  CHECK(period["sliding_window_pattern"] == 2);
  const ModelConfig m = parse_model_config(period, "m.gguf");
  CHECK(describe_architecture(m).find("sliding window 4096 on layer 0; sliding window 4096 on layer 2") != std::string::npos);
  CHECK(types(gguf_config_json(model_file(dir, "cohere2", {{"attention.sliding_window_pattern", Bytes().u32(4).u32(0)}}))) ==
        json::array({"sliding_attention", "sliding_attention", "sliding_attention", "sliding_attention"}));
  Bytes bools = Bytes().u32(9).u32(7).u64(4);  // an array of 4 bools: local, global, local, local
  bools.b += std::string("\1\0\1\1", 4);
  const json listed = gguf_config_json(model_file(dir, "cohere2", {{"attention.sliding_window_pattern", bools}}));
  CHECK(types(listed) == json::array({"sliding_attention", "full_attention", "sliding_attention", "sliding_attention"}));
  const ModelConfig cohere = parse_model_config(listed, "m.gguf");
  CHECK((cohere.layers[1].window == 0 && cohere.layers[1].position.type() == "none" && cohere.layers[3].window == 4096));

  REQUIRE_THROWS_NAMING(gguf_config_json(model_file(dir, "gemma3", {{"attention.sliding_window_pattern", Bytes().u32(8).str("6")}})),
                        FormatError, "gemma3.gguf: key 'gemma3.attention.sliding_window_pattern' is string",
                        "expected a period (an integer) or one bool per layer (4)");
  REQUIRE_THROWS_NAMING(gguf_config_json(model_file(dir, "gemma3", {{"attention.sliding_window_pattern", Bytes().u32(6).f32(6)}})),
                        FormatError, "'gemma3.attention.sliding_window_pattern' is f32");
  REQUIRE_THROWS_NAMING(gguf_config_json(model_file(dir, "gemma3", {{"attention.sliding_window_pattern", Bytes().u32(5).u32(-3)}})),
                        FormatError, "'gemma3.attention.sliding_window_pattern' is -3, expected a period >= 0");
  Bytes three = Bytes().u32(9).u32(7).u64(3);
  three.b += std::string("\1\0\1", 3);
  REQUIRE_THROWS_NAMING(gguf_config_json(model_file(dir, "cohere2", {{"attention.sliding_window_pattern", three}})), FormatError,
                        "'cohere2.attention.sliding_window_pattern' lists 3 layers; the model has 4");
  Bytes twos = Bytes().u32(9).u32(4).u64(4).u32(1).u32(2).u32(1).u32(0);
  REQUIRE_THROWS_NAMING(gguf_config_json(model_file(dir, "cohere2", {{"attention.sliding_window_pattern", twos}})), FormatError,
                        "holds 2 at 1, expected 1 (sliding window) or 0 (global)");

  REQUIRE_THROWS_NAMING(gguf_config_json(model_file(dir, "smollm3", {{"attention.sliding_window", Bytes().u32(4).u32(4)}})),
                        FormatError, "smollm3.gguf: key 'smollm3.attention.sliding_window' is set", "pert does not guess");
  CHECK_FALSE(gguf_config_json(model_file(dir, "smollm3", {})).contains("sliding_window"));
  // A window of 0 is none (llama.cpp's n_swa = 0), as a phi3 config with sliding_window null converts
  CHECK_FALSE(gguf_config_json(model_file(dir, "phi3", {{"attention.sliding_window", Bytes().u32(4).u32(0)}})).contains("sliding_window"));
  CHECK(gguf_config_json(model_file(dir, "phi3", {{"attention.sliding_window", Bytes().u32(4).u32(8)}}))["sliding_window"] == 8);
}
