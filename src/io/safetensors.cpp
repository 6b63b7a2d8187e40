#include "pert/safetensors.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cerrno>
#include <cstring>
#include <limits>
#include <set>

#include "pert/error.hpp"
#include "kernels/fp16.hpp"
#include "kernels/quants.hpp"
#include "pert/json_util.hpp"

namespace pert {

using nlohmann::json;

size_t dtype_size(DType dtype) { return dtype == DType::F32 ? 4 : dtype == DType::U8 ? 1 : 2; }

const char* dtype_name(DType dtype) {
  switch (dtype) {
    case DType::F32: return "F32";
    case DType::F16: return "F16";
    case DType::BF16: return "BF16";
    case DType::U8: return "U8";
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

// Every dtype the format defines; pert reads the first three.
const char* const kOtherDtypes[] = {"F64", "F8_E4M3", "F8_E5M2", "I64", "I32", "I16", "I8",
                                    "U64", "U32",     "U16",     "BOOL"};

DType parse_dtype(const json& value, const std::string& where) {
  if (!value.is_string()) throw FormatError(where + ": dtype must be a string, got " + json_brief(value));
  const std::string s = value.get<std::string>();
  if (s == "F32") return DType::F32;
  if (s == "F16") return DType::F16;
  if (s == "BF16") return DType::BF16;
  if (s == "U8") return DType::U8;
  for (const char* other : kOtherDtypes)
    if (s == other)
      throw FormatError(where + ": dtype " + s + " is not supported (pert reads F32, F16, BF16, and U8 as MXFP4 parts)");
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
template <class Convert>
void widen16(const uint8_t* src, float* out, size_t n, Convert convert) {
  for (size_t i = 0; i < n; ++i) {
    uint16_t h;
    std::memcpy(&h, src + 2 * i, 2);  // the mapping gives no alignment guarantee
    out[i] = convert(h);
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
  }
}

namespace {
// A quantized block's values are its small integers times its F16 scales (d, and dmin or m):
// they are finite exactly when the scales are, which costs 2 to 4 bytes a block to check.
int64_t nonfinite_block_scales(const BlockTypeInfo& type, const uint8_t* data, size_t nbytes) {
  std::vector<size_t> scales;  // byte offsets of the F16 scales in a block
  switch (type.type) {
    case BlockType::F32: case BlockType::F16: case BlockType::BF16: return 0;  // views of these carry a DType
    case BlockType::Q4_0: case BlockType::Q5_0: case BlockType::Q8_0: scales = {0}; break;
    case BlockType::Q4_1: case BlockType::Q5_1: case BlockType::Q4_K: case BlockType::Q5_K: scales = {0, 2}; break;
    case BlockType::Q6_K: scales = {type.block_bytes - 2}; break;
    case BlockType::MXFP4: {  // an E8M0 scale byte: 255 is NaN (OCP MX), and from 2^126 on the larger codes overflow
      int64_t bad = 0;
      float values[32];
      for (size_t b = 0; b + type.block_bytes <= nbytes; b += type.block_bytes) {
        if (data[b] < 253) continue;
        dequantize_row(BlockType::MXFP4, data + b, values, 32);
        bool finite = data[b] != 255;
        for (float v : values) finite = finite && std::isfinite(v);
        bad += !finite;
      }
      return bad;
    }
  }
  int64_t bad = 0;
  for (size_t b = 0; b + type.block_bytes <= nbytes; b += type.block_bytes)
    for (size_t at : scales) {
      uint16_t h;
      std::memcpy(&h, data + b + at, 2);
      bad += (h & 0x7c00) == 0x7c00;
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
