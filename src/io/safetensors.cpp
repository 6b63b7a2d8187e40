#include "pert/safetensors.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cerrno>
#include <cstring>
#include <limits>
#include <set>

#include "pert/error.hpp"
#include "kernels/fp16.hpp"
#include "kernels/fp8.hpp"
#include "kernels/quants.hpp"
#include "pert/json_util.hpp"

namespace pert {

using nlohmann::json;

size_t dtype_size(DType dtype) { return dtype == DType::F32 ? 4 : dtype == DType::U8 || dtype == DType::F8_E4M3 ? 1 : 2; }

const char* dtype_name(DType dtype) {
  switch (dtype) {
    case DType::F32: return "F32";
    case DType::F16: return "F16";
    case DType::BF16: return "BF16";
    case DType::U8: return "U8";
    case DType::F8_E4M3: return "F8_E4M3";
  }
  return "?";
}

void release_pages(const TensorView& t) {
  const uintptr_t page = uintptr_t(::sysconf(_SC_PAGESIZE));
  const uintptr_t begin = (uintptr_t(t.data) + page - 1) / page * page, end = (uintptr_t(t.data) + t.nbytes) / page * page;
  if (end > begin) ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
}

std::string shape_str(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

namespace {

// Every other dtype the format defines. F8_E5M2: no published block-scaled checkpoint stores it.
const char* const kOtherDtypes[] = {"F64", "F8_E5M2", "I64", "I32", "I16", "I8", "U64", "U32", "U16", "BOOL"};

DType parse_dtype(const json& value, const std::string& where) {
  if (!value.is_string()) throw FormatError(where + ": dtype must be a string, got " + json_brief(value));
  const std::string s = value.get<std::string>();
  if (s == "F32") return DType::F32;
  if (s == "F16") return DType::F16;
  if (s == "BF16") return DType::BF16;
  if (s == "U8") return DType::U8;
  if (s == "F8_E4M3") return DType::F8_E4M3;
  for (const char* other : kOtherDtypes)
    if (s == other)
      throw FormatError(where + ": dtype " + s +
                        " is not supported (pert reads F32, F16, BF16, U8 as MXFP4 parts and F8_E4M3 as block-scaled FP8)");
  throw FormatError(where + ": unknown dtype '" + printable(s) + "'");
}

uint64_t parse_u64(const json& value, const std::string& where, const char* what) {
  if (!value.is_number_unsigned())
    throw FormatError(where + ": " + what + " must be a non-negative integer, got " + json_brief(value));
  return value.get<uint64_t>();
}

TensorView parse_entry(const std::string& name, const json& entry, const std::string& label) {
  const std::string where = label + ": tensor '" + printable(name) + "'";
  if (!entry.is_object()) throw FormatError(where + ": entry must be an object");
  for (const auto& [key, _] : entry.items())
    if (key != "dtype" && key != "shape" && key != "data_offsets")
      throw FormatError(where + ": unknown field '" + printable(key) + "'");
  for (const char* key : {"dtype", "shape", "data_offsets"})
    if (!entry.contains(key)) throw FormatError(where + ": missing field '" + key + "'");

  TensorView t;
  t.name = name;
  t.file = label;
  t.dtype = parse_dtype(entry["dtype"], where);

  const json& shape = entry["shape"];
  if (!shape.is_array()) throw FormatError(where + ": shape must be an array, got " + json_brief(shape));
  uint64_t numel = 1;
  for (const json& dim : shape) {
    const uint64_t d = parse_u64(dim, where, "shape entry");
    if (d != 0 && numel > std::numeric_limits<uint64_t>::max() / 8 / d)
      throw FormatError(where + ": shape " + json_brief(shape) + " overflows");
    numel *= d;
    t.shape.push_back(int64_t(d));
  }
  t.numel = int64_t(numel);

  const json& offsets = entry["data_offsets"];
  if (!offsets.is_array() || offsets.size() != 2)
    throw FormatError(where + ": data_offsets must be [begin, end], got " + json_brief(offsets));
  const uint64_t begin = parse_u64(offsets[0], where, "data_offsets begin");
  const uint64_t end = parse_u64(offsets[1], where, "data_offsets end");
  if (end < begin)
    throw FormatError(where + ": data_offsets [" + std::to_string(begin) + ", " + std::to_string(end) +
                      "] end before begin");
  const uint64_t expected = numel * dtype_size(t.dtype);
  if (end - begin != expected)
    throw FormatError(where + ": data_offsets span " + std::to_string(end - begin) + " bytes, but " +
                      dtype_name(t.dtype) + " " + shape_str(t.shape) + " needs " +
                      std::to_string(expected));
  t.nbytes = size_t(expected);
  t.offset = begin;
  return t;
}

}  // namespace

SafetensorsHeader parse_safetensors(const uint8_t* bytes, size_t size, const std::string& label) {
  if (size < 8)
    throw FormatError(label + ": truncated: " + std::to_string(size) +
                      " bytes, too short for the 8-byte header length");
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | bytes[i];
  if (n > kMaxSafetensorsHeader)
    throw FormatError(label + ": header length " + std::to_string(n) + " exceeds the " +
                      std::to_string(kMaxSafetensorsHeader) + "-byte limit");
  if (n > size - 8)
    throw FormatError(label + ": header length " + std::to_string(n) + " runs past the end of the file (" +
                      std::to_string(size) + " bytes)");
  if (n < 2 || bytes[8] != '{') throw FormatError(label + ": header is not a JSON object");
  const json header = parse_json(std::string_view(reinterpret_cast<const char*>(bytes + 8), n), label + " header");
  if (!header.is_object()) throw FormatError(label + ": header is not a JSON object");

  const size_t n_tensors = header.size() - (header.contains("__metadata__") ? 1 : 0);
  if (n_tensors > kMaxSafetensorsTensors)
    throw FormatError(label + ": " + std::to_string(n_tensors) + " tensors exceed the limit of " +
                      std::to_string(kMaxSafetensorsTensors));
  SafetensorsHeader out;
  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__") {
      if (!entry.is_object()) throw FormatError(label + ": __metadata__ must be an object of strings");
      for (const auto& [k, v] : entry.items()) {
        if (!v.is_string()) throw FormatError(label + ": __metadata__ value '" + k + "' is not a string");
        out.metadata[k] = v.get<std::string>();
      }
      continue;
    }
    out.tensors.push_back(parse_entry(name, entry, label));
  }

  // The tensors must tile the data area [0, size - 8 - n) exactly, in offset order.
  std::sort(out.tensors.begin(), out.tensors.end(), [](const TensorView& a, const TensorView& b) {
    return a.offset != b.offset ? a.offset < b.offset : a.nbytes < b.nbytes;
  });
  const uint64_t data_size = size - 8 - n;
  uint64_t cursor = 0;
  const TensorView* prev = nullptr;
  for (const TensorView& t : out.tensors) {
    const uint64_t begin = t.offset, end = begin + t.nbytes;
    if (end > data_size)
      throw FormatError(label + ": tensor '" + printable(t.name) + "' data_offsets [" + std::to_string(begin) + ", " +
                        std::to_string(end) + "] lie outside the data area (" + std::to_string(data_size) +
                        " bytes)");
    if (begin < cursor)
      throw FormatError(label + ": tensor '" + printable(t.name) + "' overlaps tensor '" + printable(prev->name) + "'");
    if (begin > cursor)
      throw FormatError(label + ": " + std::to_string(begin - cursor) + " unused bytes before tensor '" +
                        printable(t.name) + "' (data_offsets must be contiguous)");
    cursor = end;
    prev = &t;
  }
  if (cursor != data_size)
    throw FormatError(label + ": " + std::to_string(data_size - cursor) +
                      " trailing bytes after the last tensor");
  const uint8_t* data = bytes + 8 + n;
  for (TensorView& t : out.tensors) t.data = data + t.offset;
  return out;
}

SafetensorsFile::SafetensorsFile(const std::filesystem::path& path)
    : file_(path), header_(parse_safetensors(file_.data(), file_.size(), file_.path())) {}

Checkpoint Checkpoint::open(const std::filesystem::path& dir) {
  namespace fs = std::filesystem;
  Checkpoint ck;
  const fs::path single = dir / "model.safetensors";
  const fs::path index = dir / "model.safetensors.index.json";
  std::error_code ec;
  if (fs::exists(single, ec)) {
    ck.source_ = single.string();
    ck.files_.push_back(std::make_unique<SafetensorsFile>(single));
    for (const TensorView& t : ck.files_.back()->tensors()) ck.by_name_[t.name] = &t;
    return ck;
  }
  if (!fs::exists(index, ec))
    throw IoError(dir.string() + ": no model.safetensors or model.safetensors.index.json");

  ck.source_ = index.string();
  const json idx = read_json_file(index);
  if (!idx.is_object() || !idx.contains("weight_map") || !idx["weight_map"].is_object())
    throw FormatError(ck.source_ + ": expected an object with a \"weight_map\" object");
  std::map<std::string, std::string> weight_map;  // tensor -> shard file name
  std::set<std::string> shard_names;
  for (const auto& [name, file] : idx["weight_map"].items()) {
    if (!file.is_string())
      throw FormatError(ck.source_ + ": weight_map['" + printable(name) + "'] must be a file name, got " + printable(json_brief(file)));
    const std::string f = file.get<std::string>();
    // Shards live beside the index: no paths, so a hostile index cannot reach other files.
    if (f.empty() || f.find_first_of(std::string("/\0", 2)) != std::string::npos || f == "." || f == "..")
      throw FormatError(ck.source_ + ": weight_map['" + printable(name) + "'] names '" + printable(f) + "', not a file in the model directory");
    weight_map[name] = f;
    shard_names.insert(f);
  }
  if (weight_map.empty()) throw FormatError(ck.source_ + ": weight_map is empty");
  for (const std::string& f : shard_names) {
    ck.files_.push_back(std::make_unique<SafetensorsFile>(dir / f));
    const SafetensorsFile& shard = *ck.files_.back();
    for (const TensorView& t : shard.tensors()) {
      auto it = weight_map.find(t.name);
      if (it == weight_map.end() || it->second != f)
        throw FormatError(shard.path() + ": tensor '" + printable(t.name) + "' is not mapped to this file by " +
                          index.filename().string());
      ck.by_name_[t.name] = &t;
    }
  }
  for (const auto& [name, f] : weight_map)
    if (!ck.by_name_.count(name))
      throw FormatError((dir / f).string() + ": has no tensor '" + printable(name) + "' (listed in " +
                        index.filename().string() + ")");
  return ck;
}

Checkpoint Checkpoint::of_views(std::vector<TensorView> views, std::string source, std::shared_ptr<const void> storage) {
  Checkpoint ck;
  ck.views_ = std::move(views);
  ck.source_ = std::move(source);
  ck.storage_ = std::move(storage);
  for (const TensorView& t : ck.views_) ck.by_name_[t.name] = &t;
  return ck;
}

const TensorView* Checkpoint::find(const std::string& name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : it->second;
}

namespace {
// config.json's quantization_config for FP8 matrices: quant_method "fp8" (transformers'
// FineGrainedFP8Config, DeepSeek's), weights in blocks, activations quantized by pert's own
// kernels or not at all ("dynamic": no stored input scales). `first` is an FP8 tensor, named
// when the config is absent or says something else.
std::pair<int64_t, int64_t> fp8_block_size(const json& config, const std::string& config_path, const TensorView& first) {
  const std::string key = config_path + ": quantization_config";
  if (!config.is_object() || !config.contains("quantization_config"))
    throw ConfigError(first.file + ": tensor '" + printable(first.name) + "' is F8_E4M3, but " + config_path +
                      " has no quantization_config (pert reads FP8 matrices under quant_method \"fp8\" with weight_block_size)");
  const json& q = config["quantization_config"];
  if (!q.is_object()) throw ConfigError(key + " must be an object, got " + json_brief(q));
  const json method = q.value("quant_method", json());
  if (method != "fp8")
    throw ConfigError(key + ".quant_method is " + json_brief(method) + ", but tensor '" + printable(first.name) +
                      "' is F8_E4M3: pert reads FP8 matrices under quant_method \"fp8\" (block-scaled, weight_scale_inv)");
  if (const json scheme = q.value("activation_scheme", json("dynamic")); scheme != "dynamic")
    throw ConfigError(key + ".activation_scheme is " + json_brief(scheme) +
                      ": pert reads \"dynamic\" only (a static scheme's stored input scales are not read)");
  if (const json fmt = q.value("fmt", json("e4m3")); fmt != "e4m3")
    throw ConfigError(key + ".fmt is " + json_brief(fmt) + ": pert reads \"e4m3\" (F8_E4M3) only");
  const json size = q.value("weight_block_size", json());
  if (size.is_null())
    throw ConfigError(key + " has no weight_block_size: per-tensor FP8 (weight_scale, no blocks) is not read");
  if (!size.is_array() || size.size() != 2 || !size[0].is_number_integer() || !size[1].is_number_integer() ||
      size[0].get<int64_t>() <= 0 || size[1].get<int64_t>() <= 0)
    throw ConfigError(key + ".weight_block_size must be 2 positive integers [rows, cols], got " + json_brief(size));
  return {size[0].get<int64_t>(), size[1].get<int64_t>()};
}

// Every scale finite and positive, and 448 times it too: the matrix's values stay finite.
void check_fp8_scales(const TensorView& scale) {
  const std::vector<float> values = read_f32(scale);
  for (size_t i = 0; i < values.size(); ++i) {
    const float v = values[i];
    if (!(v > 0.0f) || !std::isfinite(v * kE4M3Max)) {
      const size_t cols = size_t(scale.shape[1]);
      throw FormatError(scale.file + ": tensor '" + printable(scale.name) + "' [" + std::to_string(i / cols) + "][" +
                        std::to_string(i % cols) + "] is " + std::to_string(v) +
                        ": an FP8 block's inverse scale must be positive and finite, with 448 times it finite");
    }
  }
}
}  // namespace

Checkpoint read_fp8_matrices(Checkpoint stored, const json& config, const std::string& config_path, int& matrices) {
  matrices = 0;
  const std::string suffix = "_scale_inv";
  std::vector<const TensorView*> fp8;
  for (const auto& [name, t] : stored.tensors()) {
    if (t->dtype == DType::F8_E4M3) fp8.push_back(t);
    if (name.size() > suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0) {  // a scale beside a tensor that is not FP8 would be dropped silently
      const TensorView* scaled = stored.find(name.substr(0, name.size() - suffix.size()));
      if (!scaled || scaled->dtype != DType::F8_E4M3)
        throw FormatError(t->file + ": tensor '" + printable(name) + "' scales " +
                          (scaled ? "tensor '" + printable(scaled->name) + "', which is " + dtype_name(scaled->dtype) + ", not F8_E4M3"
                                  : std::string("no tensor (none is named '") + printable(name.substr(0, name.size() - suffix.size())) + "')"));
    }
  }
  if (fp8.empty()) return stored;
  const auto [block_rows, block_cols] = fp8_block_size(config, config_path, *fp8.front());
  std::vector<TensorView> views;
  std::set<std::string> scales;
  for (const TensorView* t : fp8) {
    const std::string where = t->file + ": tensor '" + printable(t->name) + "'";
    if (t->shape.size() != 2)
      throw FormatError(where + " is F8_E4M3 of shape " + shape_str(t->shape) + ": pert reads FP8 as matrices [rows, cols] only");
    const TensorView* scale = stored.find(t->name + suffix);
    if (!scale)
      throw FormatError(where + " is F8_E4M3 without its inverse scales: missing tensor '" + printable(t->name) + suffix + "'");
    auto blocks = [](int64_t n, int64_t size) { return n == 0 ? 0 : (n - 1) / size + 1; };  // ceil(n / size), no overflow
    const std::vector<int64_t> shape = {blocks(t->shape[0], block_rows), blocks(t->shape[1], block_cols)};
    if (scale->shape != shape || (scale->dtype != DType::F32 && scale->dtype != DType::BF16 && scale->dtype != DType::F16))
      throw FormatError(scale->file + ": tensor '" + printable(scale->name) + "' is " + dtype_name(scale->dtype) + " " +
                        shape_str(scale->shape) + ", but " + shape_str(t->shape) + " in blocks of " + std::to_string(block_rows) +
                        " x " + std::to_string(block_cols) + " needs " + shape_str(shape) + " in F32, BF16 or F16");
    check_fp8_scales(*scale);
    views.push_back(*t);
    views.back().fp8 = {std::make_shared<const TensorView>(*scale), block_rows, block_cols};
    scales.insert(scale->name);
  }
  for (const auto& [name, t] : stored.tensors())
    if (t->dtype != DType::F8_E4M3 && !scales.count(name)) views.push_back(*t);
  matrices = int(fp8.size());
  std::string source = stored.source();
  // The views point into `stored`'s mappings, kept alive by the new checkpoint's storage, whose
  // pointer stays null: a safetensors checkpoint's, not a GGUF file's rows to read in place.
  auto keep = std::make_shared<const Checkpoint>(std::move(stored));
  return Checkpoint::of_views(std::move(views), std::move(source), std::shared_ptr<const void>(keep, nullptr));
}

namespace {
template <class Convert>
void widen16(const uint8_t* src, float* out, size_t n, Convert convert) {
  for (size_t i = 0; i < n; ++i) {
    uint16_t h;
    std::memcpy(&h, src + 2 * i, 2);  // the mapping gives no alignment guarantee
    out[i] = convert(h);
  }
}
}  // namespace

namespace {
// value[n][k] = e4m3(code[n][k]) * scale_inv[n / rows][k / cols], one F32 product each: the
// dequantized weight transformers and DeepSeek's weight_dequant compute in float32.
void dequantize_fp8(const TensorView& t, float* out) {
  const Fp8BlockScales& s = t.fp8;
  if (!s.scale_inv || t.shape.size() != 2)
    throw FormatError(t.file + ": tensor '" + printable(t.name) +
                      "' is F8_E4M3, which pert reads only as a matrix with its weight_scale_inv under quantization_config \"fp8\"");
  const std::vector<float> scales = read_f32(*s.scale_inv);
  const std::array<float, 256>& values = e4m3_values();
  const int64_t N = t.shape[0], K = t.shape[1], scale_cols = s.scale_inv->shape[1];
  for (int64_t n = 0; n < N; ++n) {
    const float* scale_row = scales.data() + size_t(n / s.block_rows * scale_cols);
    const uint8_t* codes = t.data + size_t(n * K);
    float* row = out + size_t(n * K);
    for (int64_t k0 = 0; k0 < K; k0 += s.block_cols) {
      const float scale = scale_row[k0 / s.block_cols];
      for (int64_t k = k0; k < std::min(K, k0 + s.block_cols); ++k) row[k] = values[codes[k]] * scale;
    }
  }
}
}  // namespace

void read_f32(const TensorView& t, float* out) {
  const size_t n = size_t(t.numel);
  if (n == 0) return;  // an empty tensor may come with a null `out`
  if (t.blocks) return dequantize_row(t.blocks->type, t.data, out, t.numel);
  switch (t.dtype) {
    case DType::F32: std::memcpy(out, t.data, n * 4); break;
    case DType::F16: widen16(t.data, out, n, f16_to_f32); break;
    case DType::BF16: widen16(t.data, out, n, bf16_to_f32); break;
    case DType::U8:
      throw FormatError(t.file + ": tensor '" + printable(t.name) + "' is U8, which pert reads only as an MXFP4 matrix's _blocks or _scales");
    case DType::F8_E4M3: dequantize_fp8(t, out); break;
  }
}

namespace {
// A quantized block's values are its small integers times its scales (the type's row says where
// they lie): they are finite exactly when the scales are, which costs 1 to 4 bytes a block to check.
int64_t nonfinite_block_scales(const BlockTypeInfo& type, const uint8_t* data, size_t nbytes) {
  int64_t bad = 0;
  const BlockScales& s = type.scales;
  if (s.kind == BlockScales::None) return 0;  // F32/F16/BF16: views of these carry a DType
  float values[256];
  for (size_t b = 0; b + type.block_bytes <= nbytes; b += type.block_bytes) {
    if (s.kind == BlockScales::E8M0) {  // 255 is NaN (OCP MX), and from 2^126 on the larger codes overflow
      if (data[b + s.at[0]] < 253) continue;
      type.to_float(data + b, values);
      bool finite = data[b + s.at[0]] != 255;
      for (int i = 0; i < type.block_size; ++i) finite = finite && std::isfinite(values[i]);
      bad += !finite;
      continue;
    }
    for (int i = 0; i < s.count; ++i) {
      uint16_t h;
      std::memcpy(&h, data + b + s.at[i], 2);
      bad += (h & 0x7c00) == 0x7c00;
    }
  }
  return bad;
}
}  // namespace

void require_finite(const TensorView& t) {
  // NaN and ±Inf are the values whose exponent bits are all ones, in every dtype read here.
  const size_t n = size_t(t.numel);
  int64_t bad = 0;
  if (t.blocks) {
    bad = nonfinite_block_scales(*t.blocks, t.data, t.nbytes);
  } else if (t.dtype == DType::U8) {
    return;  // raw bytes (MXFP4's parts: their scales are checked as blocks once made)
  } else if (t.dtype == DType::F8_E4M3) {  // no infinities; S.1111.111 is NaN (its scales are checked when read)
    for (size_t i = 0; i < n; ++i) bad += e4m3_is_nan(t.data[i]);
  } else if (t.dtype == DType::F32) {
    for (size_t i = 0; i < n; ++i) {
      uint32_t u;
      std::memcpy(&u, t.data + 4 * i, 4);
      bad += (u & 0x7f800000u) == 0x7f800000u;
    }
  } else {
    const uint16_t exponent = t.dtype == DType::F16 ? 0x7c00 : 0x7f80;
    for (size_t i = 0; i < n; ++i) {
      uint16_t h;
      std::memcpy(&h, t.data + 2 * i, 2);
      bad += (h & exponent) == exponent;
    }
  }
  if (bad)
    throw FormatError(t.file + ": tensor '" + printable(t.name) + "' has " + std::to_string(bad) +
                      (t.blocks ? std::string(" ") + t.blocks->name + " blocks whose scale makes values non-finite (NaN, inf or out of float's range)"
                                : std::string(" non-finite values")));
}

std::vector<float> read_f32(const TensorView& t) {
  std::vector<float> out(size_t(t.numel));
  read_f32(t, out.data());
  return out;
}

}  // namespace pert
