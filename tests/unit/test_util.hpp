// Test helpers: temporary directories, a small independent safetensors writer, and model
// directories built from a config. Malformed inputs are made by the tests themselves.
#pragma once
#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "pert/kernels.hpp"

namespace fs = std::filesystem;
using nlohmann::json;

// SentencePiece's word-boundary mark, as the tokenizer tests spell pieces: M + "word".
inline const std::string M = "\xe2\x96\x81";  // ▁ (U+2581)

struct TempDir {
  fs::path path;
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "pert-test-XXXXXX").string();
    REQUIRE(::mkdtemp(tmpl.data()) != nullptr);
    path = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  fs::path operator/(const std::string& name) const { return path / name; }
};

inline void write_file(const fs::path& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), std::streamsize(bytes.size()));
  REQUIRE(out.good());
}

// Raw safetensors image: 8-byte little-endian length, header text, data bytes.
inline std::string safetensors_image(const std::string& header, const std::string& data) {
  std::string out(8, '\0');
  uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) out[size_t(i)] = char((n >> (8 * i)) & 0xff);
  return out + header + data;
}

// F32 -> F16 bits for values that F16 holds exactly (normal range); tests use such values.
inline uint16_t exact_f16_bits(float x) {
  if (x == 0.0f) return std::signbit(x) ? 0x8000 : 0;
  uint32_t b;
  std::memcpy(&b, &x, 4);
  const uint32_t sign = (b >> 16) & 0x8000, exp = (b >> 23) & 0xff, mant = b & 0x7fffff;
  REQUIRE(exp >= 113);
  REQUIRE(exp <= 142);
  REQUIRE((mant & 0x1fff) == 0);
  return uint16_t(sign | ((exp - 112) << 10) | (mant >> 13));
}

inline uint16_t exact_bf16_bits(float x) {
  uint32_t b;
  std::memcpy(&b, &x, 4);
  REQUIRE((b & 0xffff) == 0);
  return uint16_t(b >> 16);
}

struct TestTensor {
  std::string name;
  std::string dtype;  // "F32", "F16", "BF16", "U8"
  std::vector<int64_t> shape;
  std::vector<float> values;
};

// A well-formed safetensors image of `tensors`, in the given order.
inline std::string encode_safetensors(const std::vector<TestTensor>& tensors, const json& metadata = nullptr) {
  json header = json::object();
  std::string data;
  for (const TestTensor& t : tensors) {
    const size_t begin = data.size();
    for (float v : t.values) {
      if (t.dtype == "F32") {
        data.append(reinterpret_cast<const char*>(&v), 4);
      } else if (t.dtype == "U8") {  // raw bytes (MXFP4's parts), each value 0..255
        data.push_back(char(uint8_t(v)));
      } else {
        const uint16_t h = t.dtype == "F16" ? exact_f16_bits(v) : exact_bf16_bits(v);
        data.append(reinterpret_cast<const char*>(&h), 2);
      }
    }
    header[t.name] = {{"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {begin, data.size()}}};
  }
  if (!metadata.is_null()) header["__metadata__"] = metadata;
  return safetensors_image(header.dump(), data);
}

// Values that every dtype holds exactly: multiples of 1/16 in [-4, 4).
inline std::vector<float> exact_values(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = float(int(rng() % 128) - 64) / 16.0f;
  return v;
}

// n values uniform in [-scale, scale), seeded.
inline std::vector<float> random_floats(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-scale, scale);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

// A tiny llama config: 2 layers, d=16, 4 heads (2 kv) of dim 4, vocab 32, trained ctx 64.
inline json tiny_config() {
  return json{{"architectures", {"LlamaForCausalLM"}},
              {"model_type", "llama"},
              {"vocab_size", 32},
              {"hidden_size", 16},
              {"intermediate_size", 24},
              {"num_hidden_layers", 2},
              {"num_attention_heads", 4},
              {"num_key_value_heads", 2},
              {"max_position_embeddings", 64},
              {"rms_norm_eps", 1e-5},
              {"tie_word_embeddings", false},
              {"rope_theta", 10000.0},
              {"bos_token_id", 1},
              {"eos_token_id", 2}};
}

// The tensors of tiny_config(), written out by hand (independent of pert's expected_tensors).
inline std::vector<TestTensor> tiny_tensors(const std::string& dtype = "F32") {
  std::vector<std::pair<std::string, std::vector<int64_t>>> specs = {{"model.embed_tokens.weight", {32, 16}}};
  for (int i = 0; i < 2; ++i) {
    const std::string l = "model.layers." + std::to_string(i) + ".";
    specs.push_back({l + "input_layernorm.weight", {16}});
    specs.push_back({l + "self_attn.q_proj.weight", {16, 16}});
    specs.push_back({l + "self_attn.k_proj.weight", {8, 16}});
    specs.push_back({l + "self_attn.v_proj.weight", {8, 16}});
    specs.push_back({l + "self_attn.o_proj.weight", {16, 16}});
    specs.push_back({l + "post_attention_layernorm.weight", {16}});
    specs.push_back({l + "mlp.gate_proj.weight", {24, 16}});
    specs.push_back({l + "mlp.up_proj.weight", {24, 16}});
    specs.push_back({l + "mlp.down_proj.weight", {16, 24}});
  }
  specs.push_back({"model.norm.weight", {16}});
  specs.push_back({"lm_head.weight", {32, 16}});
  std::vector<TestTensor> out;
  uint32_t seed = 1;
  for (auto& [name, shape] : specs) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    out.push_back({name, dtype, shape, exact_values(n, seed++)});
  }
  return out;
}

inline void write_model_dir(const fs::path& dir, const json& config, const std::vector<TestTensor>& tensors) {
  fs::create_directories(dir);
  write_file(dir / "config.json", config.dump(2));
  write_file(dir / "model.safetensors", encode_safetensors(tensors));
}

// Asserts that `expr` throws exactly ExceptionType with a message containing every needle.
#define REQUIRE_THROWS_NAMING(expr, ExceptionType, ...)                              \
  do {                                                                               \
    bool thrown_ = false;                                                            \
    try {                                                                            \
      (void)(expr);                                                                  \
    } catch (const ExceptionType& e_) {                                              \
      thrown_ = true;                                                                \
      const std::string msg_ = e_.what();                                            \
      INFO("message: " << msg_);                                                     \
      for (const std::string& needle_ : std::vector<std::string>{__VA_ARGS__})       \
        CHECK_THAT(msg_, Catch::Matchers::Contains(needle_));                        \
      CHECK(msg_.find('\n') == std::string::npos);                                   \
    }                                                                                \
    REQUIRE(thrown_);                                                                \
  } while (0)

// body() once on each path of a kernel family that this CPU runs (kernels.hpp), the family's path
// named in every failure and restored afterwards, so a test covers every path, not only the best.
template <class Body>
void on_each_path(const std::string& family, std::vector<std::string> (*paths)(), const std::string& (*current)(),
                  void (*select)(const std::string&), Body body) {
  struct Restore {
    std::string name;
    void (*select)(const std::string&);
    ~Restore() { select(name); }
  } restore{current(), select};
  for (const std::string& path : paths()) {
    select(path);
    INFO(family << " kernel path " << path);
    body();
  }
}

