// Block-scaled FP8 checkpoints (DeepSeek-V3/R1, Qwen3-*-FP8): every E4M3 code against a table
// derived here from the format's definition; a tiny llama whose matrices are F8_E4M3 with their
// weight_scale_inv gives the logits of its dequantized F32 twin bit for bit, in every --dtype;
// and each bad input refused in one line naming the file and the tensor or key. The logits of
// tiny Llama / Qwen3 / DeepSeek-V3 FP8 checkpoints against the float64 reference: tests/reference/fp8_test.py.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <tuple>

#include "kernels/fp8.hpp"
#include "pert/error.hpp"
#include "pert/model.hpp"
#include "pert/model_dir.hpp"
#include "pert/safetensors.hpp"
#include "test_util.hpp"

using namespace pert;

namespace fp8_test {

// E4M3 from its definition: sign, 4 exponent bits with bias 7, 3 mantissa bits; exponent 0 is
// subnormal (m/8 · 2^-6); S.1111.111 is NaN; no infinities.
double e4m3_definition(int code) {
  const int sign = code >> 7, e = (code >> 3) & 15, m = code & 7;
  if (e == 15 && m == 7) return std::numeric_limits<double>::quiet_NaN();
  const double magnitude = e == 0 ? std::ldexp(m / 8.0, -6) : std::ldexp(1.0 + m / 8.0, e - 7);
  return sign ? -magnitude : magnitude;
}

uint32_t bits_of(float x) {
  uint32_t b;
  std::memcpy(&b, &x, 4);
  return b;
}

TEST_CASE("FP8 E4M3: all 256 codes bit for bit against the format's definition", "[fp8]") {
  int nans = 0;
  for (int code = 0; code < 256; ++code) {
    INFO("code 0x" << std::hex << code);
    const double want = e4m3_definition(code);
    const float got = e4m3_to_f32(uint8_t(code));
    CHECK(e4m3_is_nan(uint8_t(code)) == std::isnan(want));
    CHECK(bits_of(e4m3_values()[size_t(code)]) == bits_of(got));  // the table holds the same values
    if (std::isnan(want)) {
      CHECK(std::isnan(got));
      ++nans;
      continue;
    }
    CHECK(double(float(want)) == want);  // every value is a float exactly
    CHECK(bits_of(got) == bits_of(float(want)));  // -0 included
  }
  CHECK(nans == 2);
  CHECK(e4m3_to_f32(0x7e) == 448.0f);
  CHECK(e4m3_to_f32(0xfe) == -448.0f);
  CHECK(e4m3_to_f32(0x01) == std::ldexp(1.0f, -9));  // the smallest subnormal
  CHECK(e4m3_to_f32(0x07) == 7 * std::ldexp(1.0f, -9));  // the largest
  CHECK(e4m3_to_f32(0x08) == std::ldexp(1.0f, -6));  // the smallest normal
  CHECK(e4m3_to_f32(0x38) == 1.0f);
  CHECK(e4m3_to_f32(0x78) == 256.0f);  // exponent 15 holds values, not infinities
  CHECK(bits_of(e4m3_to_f32(0x80)) == 0x80000000u);
}

// A tensor as bytes: FP8 codes, or floats written as F32 / BF16 (test_util's exact values).
struct RawTensor {
  std::string name, dtype;
  std::vector<int64_t> shape;
  std::string bytes;
};

RawTensor raw(const TestTensor& t) {
  RawTensor r{t.name, t.dtype, t.shape, {}};
  for (float v : t.values) {
    if (t.dtype == "F32") {
      r.bytes.append(reinterpret_cast<const char*>(&v), 4);
    } else {
      const uint16_t h = exact_bf16_bits(v);
      r.bytes.append(reinterpret_cast<const char*>(&h), 2);
    }
  }
  return r;
}

std::string encode(const std::vector<RawTensor>& tensors) {
  json header = json::object();
  std::string data;
  for (const RawTensor& t : tensors) {
    header[t.name] = {{"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {data.size(), data.size() + t.bytes.size()}}};
    data += t.bytes;
  }
  return safetensors_image(header.dump(), data);
}

bool is_projection(const std::string& name) {
  return name.find("_proj.weight") != std::string::npos;  // q/k/v/o, gate/up/down; not embeddings, norms, lm_head
}

// tiny_config()'s tensors with every projection in FP8 blocks of rows x cols (random codes,
// random scales, exact in `scale_dtype`), and the same tensors dequantized to F32 by the definition.
struct Fp8Twin {
  std::vector<RawTensor> fp8;
  std::vector<TestTensor> f32;
};
Fp8Twin fp8_twin(int rows, int cols, const std::string& scale_dtype, uint32_t seed = 7) {
  std::mt19937 rng(seed);
  Fp8Twin out;
  for (TestTensor t : tiny_tensors()) {
    if (!is_projection(t.name)) {
      out.fp8.push_back(raw(t));
      out.f32.push_back(t);
      continue;
    }
    const int64_t N = t.shape[0], K = t.shape[1], sr = (N + rows - 1) / rows, sc = (K + cols - 1) / cols;
    TestTensor scale{t.name + "_scale_inv", scale_dtype, {sr, sc}, {}};
    for (int64_t i = 0; i < sr * sc; ++i)  // in [1/64, 1/16): a BF16 value when scale_dtype is
      scale.values.push_back(float(std::ldexp(1.0 + double(rng() % 128) / 128.0, -6 + int(rng() % 2))));
    RawTensor codes{t.name, "F8_E4M3", t.shape, std::string(size_t(N * K), '\0')};
    for (int64_t n = 0; n < N; ++n)
      for (int64_t k = 0; k < K; ++k) {
        uint8_t code = uint8_t(rng());
        if (((code >> 3) & 15) > 10) code = uint8_t((code & 0x87) | (4 << 3));  // exponents up to 10: no NaN, |value| < 16
        codes.bytes[size_t(n * K + k)] = char(code);
        t.values[size_t(n * K + k)] = float(e4m3_definition(code)) * scale.values[size_t(n / rows * sc + k / cols)];
      }
    out.fp8.push_back(codes);
    out.fp8.push_back(raw(scale));
    out.f32.push_back(t);
  }
  return out;
}

json fp8_config(std::vector<int> block = {6, 10}) {
  json c = tiny_config();
  c["quantization_config"] = {{"quant_method", "fp8"}, {"fmt", "e4m3"}, {"activation_scheme", "dynamic"}, {"weight_block_size", block}};
  return c;
}

void write_fp8_dir(const fs::path& dir, const json& config, const std::vector<RawTensor>& tensors) {
  fs::create_directories(dir);
  write_file(dir / "config.json", config.dump(2));
  write_file(dir / "model.safetensors", encode(tensors));
}

std::vector<float> logits_of(const fs::path& dir, WeightType type) {
  auto model = Model::load(dir, {}, type);
  InferenceState s(*model, 16, 8);
  const int ids[] = {1, 5, 9, 30, 2, 17};
  std::vector<float> logits(6 * 32);
  s.forward(ids, 6, 0, logits.data(), true);
  return logits;
}

TEST_CASE("FP8 matrices: the dequantized F32 twin's logits bit for bit, in every --dtype, ragged blocks, F32 and BF16 scales",
          "[fp8]") {
  TempDir tmp;
  for (const auto& [rows, cols, scale_dtype] : std::vector<std::tuple<int, int, std::string>>{
           {6, 10, "F32"}, {16, 16, "BF16"}, {128, 128, "F32"}}) {
    INFO("blocks " << rows << " x " << cols << ", scales " << scale_dtype);
    const Fp8Twin twin = fp8_twin(rows, cols, scale_dtype);
    const fs::path fp8 = tmp / ("fp8-" + std::to_string(rows)), f32 = tmp / ("f32-" + std::to_string(rows));
    write_fp8_dir(fp8, fp8_config({rows, cols}), twin.fp8);
    write_model_dir(f32, tiny_config(), twin.f32);
    const ModelDir m = open_model_dir(fp8);
    CHECK(m.checkpoint.find("model.layers.0.mlp.up_proj.weight")->dtype == DType::F8_E4M3);
    CHECK(m.checkpoint.find("model.layers.0.mlp.up_proj.weight_scale_inv") == nullptr);  // read with its matrix
    CHECK(std::any_of(m.checks.begin(), m.checks.end(), [](const std::string& c) { return c.rfind("14 FP8 matrices", 0) == 0; }));
    const TensorView& down = *m.checkpoint.find("model.layers.1.mlp.down_proj.weight");
    const std::vector<float> got = read_f32(down);
    for (const TestTensor& t : twin.f32)
      if (t.name == down.name) CHECK(got == t.values);
    for (WeightType type : {WeightType(WeightType::F32), WeightType(WeightType::BF16), WeightType(WeightType::Q8), WeightType(BlockType::Q8_0), WeightType(BlockType::Q4_0)}) {
      INFO("dtype " << weight_type_name(type));
      CHECK(logits_of(fp8, type) == logits_of(f32, type));
    }
  }
}

// The FP8 twin with `edit` applied to its tensors, its config `config`.
template <class Edit>
fs::path bad_dir(const TempDir& tmp, const std::string& name, const json& config, Edit edit) {
  Fp8Twin twin = fp8_twin(6, 10, "F32");
  edit(twin.fp8);
  write_fp8_dir(tmp / name, config, twin.fp8);
  return tmp / name;
}

RawTensor& tensor(std::vector<RawTensor>& all, const std::string& name) {
  for (RawTensor& t : all)
    if (t.name == name) return t;
  FAIL("no tensor " << name);
  return all.front();
}

const std::string kUp = "model.layers.0.mlp.up_proj.weight";

TEST_CASE("FP8 checkpoints: bad scales, configs and codes refused in one line naming the file and the tensor or key", "[fp8]") {
  TempDir tmp;
  auto none = [](std::vector<RawTensor>&) {};
  auto set_scale = [&](float v) {
    return [v](std::vector<RawTensor>& all) {
      RawTensor& s = tensor(all, kUp + "_scale_inv");
      std::memcpy(s.bytes.data() + 4, &v, 4);  // [0][1]
    };
  };
  for (float v : {0.0f, -0.5f, std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(), 1e37f}) {
    INFO("scale " << v);
    REQUIRE_THROWS_NAMING(open_model_dir(bad_dir(tmp, "scale", fp8_config(), set_scale(v))), FormatError,
                          "model.safetensors: tensor '" + kUp + "_scale_inv' [0][1] is ", "must be positive and finite");
  }
  REQUIRE_THROWS_NAMING(open_model_dir(bad_dir(tmp, "shape", fp8_config(), [](std::vector<RawTensor>& all) {
                          RawTensor& s = tensor(all, kUp + "_scale_inv");
                          s.shape = {2, 4}, s.bytes.resize(32);  // [24, 16] in 6 x 10 needs [4, 2]
                        })),
                        FormatError, "model.safetensors: tensor '" + kUp + "_scale_inv' is F32 [2, 4], but [24, 16] in blocks of 6 x 10 needs [4, 2]");
  REQUIRE_THROWS_NAMING(open_model_dir(bad_dir(tmp, "missing", fp8_config(), [](std::vector<RawTensor>& all) {
                          all.erase(std::find_if(all.begin(), all.end(), [](const RawTensor& t) { return t.name == kUp + "_scale_inv"; }));
                        })),
                        FormatError, "model.safetensors: tensor '" + kUp + "' is F8_E4M3 without its inverse scales: missing tensor '" + kUp + "_scale_inv'");
  REQUIRE_THROWS_NAMING(open_model_dir(bad_dir(tmp, "stray", fp8_config(), [](std::vector<RawTensor>& all) {
                          all.push_back({"model.norm.weight_scale_inv", "F32", {1, 1}, std::string(4, '\0')});
                        })),
                        FormatError, "tensor 'model.norm.weight_scale_inv' scales tensor 'model.norm.weight', which is F32, not F8_E4M3");
  REQUIRE_THROWS_NAMING(open_model_dir(bad_dir(tmp, "vector", fp8_config(), [](std::vector<RawTensor>& all) {
                          RawTensor& norm = tensor(all, "model.norm.weight");
                          norm.dtype = "F8_E4M3", norm.bytes.assign(16, char(0x38));
                        })),
                        FormatError, "tensor 'model.norm.weight' is F8_E4M3 of shape [16]: pert reads FP8 as matrices");

  json c = tiny_config();
  REQUIRE_THROWS_NAMING(open_model_dir(bad_dir(tmp, "noconfig", c, none)), ConfigError, "model.safetensors: tensor '",
                        "' is F8_E4M3, but ", "config.json has no quantization_config");
  auto with = [](const std::string& key, const json& value) {
    json c = fp8_config();
    c["quantization_config"][key] = value;
    return c;
  };
  REQUIRE_THROWS_NAMING(open_model_dir(bad_dir(tmp, "method", with("quant_method", "compressed-tensors"), none)), ConfigError,
                        "config.json: quantization_config.quant_method is \"compressed-tensors\", but tensor '", "' is F8_E4M3");
  REQUIRE_THROWS_NAMING(open_model_dir(bad_dir(tmp, "static", with("activation_scheme", "static"), none)), ConfigError,
                        "config.json: quantization_config.activation_scheme is \"static\"", "input scales are not read");
  REQUIRE_THROWS_NAMING(open_model_dir(bad_dir(tmp, "fmt", with("fmt", "e5m2"), none)), ConfigError,
                        "config.json: quantization_config.fmt is \"e5m2\"");
  for (const json& size : {json::array({128}), json::array({128, 0}), json::array({128, 1.5}), json("128x128"), json::array({1, 2, 3})}) {
    INFO(size.dump());
    REQUIRE_THROWS_NAMING(open_model_dir(bad_dir(tmp, "size", with("weight_block_size", size), none)), ConfigError,
                          "config.json: quantization_config.weight_block_size must be 2 positive integers [rows, cols], got ");
  }
  json per_tensor = fp8_config();
  per_tensor["quantization_config"].erase("weight_block_size");
  REQUIRE_THROWS_NAMING(open_model_dir(bad_dir(tmp, "per-tensor", per_tensor, none)), ConfigError,
                        "config.json: quantization_config has no weight_block_size: per-tensor FP8");

  const fs::path nan = bad_dir(tmp, "nan", fp8_config(), [](std::vector<RawTensor>& all) {
    RawTensor& up = tensor(all, kUp);
    up.bytes[3] = char(0x7f), up.bytes[40] = char(0xff);
  });
  CHECK_NOTHROW(open_model_dir(nan));  // the codes are checked at load, with every other tensor's values
  REQUIRE_THROWS_NAMING(Model::load(nan), FormatError, "model.safetensors: tensor '" + kUp + "' has 2 non-finite values");

  // Other dtypes: E5M2 refused at parse; an F8 view with no scales refused when read.
  const std::string e5m2 = encode({{"w", "F8_E5M2", {2, 2}, std::string(4, '\0')}});
  REQUIRE_THROWS_NAMING(parse_safetensors(reinterpret_cast<const uint8_t*>(e5m2.data()), e5m2.size(), "x.safetensors"),
                        FormatError, "x.safetensors: tensor 'w': dtype F8_E5M2 is not supported");
  const std::string e4m3 = encode({{"w", "F8_E4M3", {2, 2}, std::string(4, '\0')}});
  const SafetensorsHeader h = parse_safetensors(reinterpret_cast<const uint8_t*>(e4m3.data()), e4m3.size(), "x.safetensors");
  REQUIRE(h.tensors.size() == 1);
  CHECK(h.tensors[0].nbytes == 4);
  REQUIRE_THROWS_NAMING(read_f32(h.tensors[0]), FormatError, "x.safetensors: tensor 'w' is F8_E4M3, which pert reads only as a matrix with its weight_scale_inv");
}

TEST_CASE("FP8: a checkpoint without F8 tensors ignores another quant_method (gpt-oss's mxfp4)", "[fp8]") {
  TempDir tmp;
  json c = tiny_config();
  c["quantization_config"] = {{"quant_method", "mxfp4"}};
  write_model_dir(tmp / "m", c, tiny_tensors());
  CHECK_NOTHROW(open_model_dir(tmp / "m"));
}

}  // namespace fp8_test
