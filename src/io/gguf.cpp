#include "pert/gguf.hpp"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <limits>

#include "pert/error.hpp"
#include "pert/json_util.hpp"

namespace pert {

const char* gguf_kind_name(GgufKind kind) {
  static const char* const names[] = {"u8",  "i8",   "u16",    "i16",   "u32", "i32", "f32",
                                      "bool", "string", "array", "u64", "i64", "f64"};
  const auto i = uint32_t(kind);
  return i < sizeof names / sizeof *names ? names[i] : "unknown";
}

namespace {

// Bytes of one element of a fixed-size kind; 0 for string and array.
size_t kind_size(GgufKind kind) {
  switch (kind) {
    case GgufKind::U8: case GgufKind::I8: case GgufKind::Bool: return 1;
    case GgufKind::U16: case GgufKind::I16: return 2;
    case GgufKind::U32: case GgufKind::I32: case GgufKind::F32: return 4;
    case GgufKind::U64: case GgufKind::I64: case GgufKind::F64: return 8;
    default: return 0;
  }
}

template <class T>
T load(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof v);  // little-endian hosts only (x86-64, aarch64)
  return v;
}

// Reads the header front to back; every read is checked against the bytes left, and every
// error names the file and what was being read.
class Cursor {
 public:
  Cursor(const uint8_t* bytes, size_t size, const std::string& label) : p_(bytes), begin_(bytes), end_(bytes + size), label_(label) {}

  size_t offset() const { return size_t(p_ - begin_); }
  size_t left() const { return size_t(end_ - p_); }
  [[noreturn]] void fail(const std::string& what) const { throw FormatError(label_ + ": " + what); }

  const uint8_t* take(uint64_t n, const std::string& what) {
    if (n > left())
      fail(what + " needs " + std::to_string(n) + " bytes at offset " + std::to_string(offset()) + ", the file has " +
           std::to_string(left()) + " left (truncated?)");
    const uint8_t* at = p_;
    p_ += n;
    return at;
  }
  uint32_t u32(const std::string& what) { return load<uint32_t>(take(4, what)); }
  uint64_t u64(const std::string& what) { return load<uint64_t>(take(8, what)); }
  std::string_view string(const std::string& what) {
    const uint64_t n = u64(what + "'s length");
    return {reinterpret_cast<const char*>(take(n, what)), size_t(n)};
  }

 private:
  const uint8_t* p_;
  const uint8_t* begin_;
  const uint8_t* end_;
  const std::string& label_;
};

GgufKind read_kind(Cursor& in, const std::string& what) {
  const uint32_t k = in.u32(what);
  if (k > uint32_t(GgufKind::F64)) in.fail(what + " is " + std::to_string(k) + ", not a GGUF value type (0-12)");
  return GgufKind(k);
}

GgufValue read_value(Cursor& in, const std::string& where) {
  GgufValue v;
  v.kind = read_kind(in, where + ": value type");
  if (v.kind == GgufKind::String) {
    v.strings.push_back(in.string(where));
    return v;
  }
  if (v.kind != GgufKind::Array) {
    v.data = in.take(kind_size(v.kind), where);
    return v;
  }
  v.element = read_kind(in, where + ": array element type");
  if (v.element == GgufKind::Array) in.fail(where + ": an array of arrays (GGUF readers do not nest arrays)");
  v.count = in.u64(where + ": array length");
  if (v.count > kMaxGgufArray)
    in.fail(where + ": array of " + std::to_string(v.count) + " elements (pert reads at most " +
            std::to_string(kMaxGgufArray) + ")");
  if (v.element == GgufKind::String) {
    // Each string needs at least its 8-byte length: refuse a count the file cannot hold
    // before reserving room for it.
    if (v.count > in.left() / 8) in.fail(where + ": array of " + std::to_string(v.count) + " strings is longer than the file");
    v.strings.reserve(size_t(v.count));
    for (uint64_t i = 0; i < v.count; ++i) v.strings.push_back(in.string(where + "[" + std::to_string(i) + "]"));
  } else {
    v.data = in.take(v.count * kind_size(v.element), where + ": array of " + std::to_string(v.count) + " " +
                                                          gguf_kind_name(v.element));
  }
  return v;
}

// A float as an integer without undefined behaviour: truncated, clamped to int64's range, NaN 0.
int64_t saturated(double v) {
  if (!(v == v)) return 0;
  if (v >= 9.2233720368547758e18) return std::numeric_limits<int64_t>::max();
  if (v <= -9.2233720368547758e18) return std::numeric_limits<int64_t>::min();
  return int64_t(v);
}

std::string in_quotes(std::string_view name) { return "'" + printable(name) + "'"; }

}  // namespace

bool GgufValue::is_integer() const {
  const GgufKind k = scalar_kind();
  return k != GgufKind::F32 && k != GgufKind::F64 && k != GgufKind::String && k != GgufKind::Bool;
}
bool GgufValue::is_number() const {
  const GgufKind k = scalar_kind();
  return k != GgufKind::String && k != GgufKind::Bool;
}

std::string GgufValue::type_name() const {
  return is_array() ? std::string("array of ") + gguf_kind_name(element) : gguf_kind_name(kind);
}

int64_t GgufValue::int_at(uint64_t i) const {
  const GgufKind k = scalar_kind();
  const uint8_t* p = data + i * kind_size(k);
  switch (k) {
    case GgufKind::U8: case GgufKind::Bool: return *p;
    case GgufKind::I8: return int8_t(*p);
    case GgufKind::U16: return load<uint16_t>(p);
    case GgufKind::I16: return load<int16_t>(p);
    case GgufKind::U32: return load<uint32_t>(p);
    case GgufKind::I32: return load<int32_t>(p);
    case GgufKind::U64: {
      const uint64_t u = load<uint64_t>(p);
      return u > uint64_t(std::numeric_limits<int64_t>::max()) ? std::numeric_limits<int64_t>::max() : int64_t(u);
    }
    case GgufKind::I64: return load<int64_t>(p);
    case GgufKind::F32: return saturated(load<float>(p));
    case GgufKind::F64: return saturated(load<double>(p));
    default: return 0;
  }
}

uint64_t GgufValue::uint_at(uint64_t i) const {
  return scalar_kind() == GgufKind::U64 ? load<uint64_t>(data + i * 8) : uint64_t(int_at(i));
}

double GgufValue::float_at(uint64_t i) const {
  const GgufKind k = scalar_kind();
  if (k == GgufKind::F32) return load<float>(data + i * 4);
  if (k == GgufKind::F64) return load<double>(data + i * 8);
  if (k == GgufKind::U64) return double(uint_at(i));
  return double(int_at(i));
}

GgufHeader parse_gguf(const uint8_t* bytes, size_t size, const std::string& label) {
  Cursor in(bytes, size, label);
  GgufHeader h;
  if (size < 4 || std::memcmp(bytes, "GGUF", 4) != 0) in.fail("not a GGUF file (no \"GGUF\" magic)");
  in.take(4, "magic");
  h.version = in.u32("version");
  if (h.version > 0xffff && (h.version & 0xffff) == 0)
    in.fail("a big-endian GGUF file (pert reads little-endian ones)");
  if (h.version != 2 && h.version != 3)
    in.fail("GGUF version " + std::to_string(h.version) + " is not supported (pert reads versions 2 and 3)");
  const uint64_t n_tensors = in.u64("tensor count"), n_keys = in.u64("key-value count");
  if (n_tensors > kMaxGgufTensors)
    in.fail("tensor count " + std::to_string(n_tensors) + " is more than pert reads (" + std::to_string(kMaxGgufTensors) + ")");
  if (n_keys > kMaxGgufKeys)
    in.fail("key-value count " + std::to_string(n_keys) + " is more than pert reads (" + std::to_string(kMaxGgufKeys) + ")");

  for (uint64_t i = 0; i < n_keys; ++i) {
    const std::string key(in.string("key " + std::to_string(i)));
    const std::string where = "key " + in_quotes(key);
    GgufValue value = read_value(in, where);
    if (!h.metadata.emplace(key, std::move(value)).second) in.fail(where + " appears twice");
    h.keys.push_back(key);
  }
  if (auto it = h.metadata.find("general.alignment"); it != h.metadata.end()) {
    const GgufValue& a = it->second;
    if (a.kind != GgufKind::U32) in.fail("key 'general.alignment' is " + a.type_name() + ", expected u32");
    h.alignment = a.uint_at(0);
    if (h.alignment == 0 || (h.alignment & (h.alignment - 1)) != 0)
      in.fail("key 'general.alignment' is " + std::to_string(h.alignment) + ", not a power of two");
  }

  std::map<std::string, size_t> seen;
  for (uint64_t i = 0; i < n_tensors; ++i) {
    GgufTensor t;
    t.name = std::string(in.string("tensor " + std::to_string(i) + "'s name"));
    const std::string where = "tensor " + in_quotes(t.name);
    if (!seen.emplace(t.name, size_t(i)).second) in.fail(where + " appears twice");
    const uint32_t dims = in.u32(where + ": dimension count");
    if (dims < 1 || dims > kMaxGgufDims)
      in.fail(where + ": " + std::to_string(dims) + " dimensions (GGUF tensors have 1 to " + std::to_string(kMaxGgufDims) + ")");
    t.numel = 1;
    for (uint32_t d = 0; d < dims; ++d) {
      const uint64_t n = in.u64(where + ": size");
      if (n == 0 || n > uint64_t(std::numeric_limits<int64_t>::max()) / uint64_t(t.numel))
        in.fail(where + ": size " + std::to_string(n) + " of dimension " + std::to_string(d) +
                (n == 0 ? " is zero" : " makes the element count overflow"));
      t.shape.push_back(int64_t(n));
      t.numel *= int64_t(n);
    }
    t.ggml_type = in.u32(where + ": type");
    t.type = block_type_info(t.ggml_type);
    t.offset = in.u64(where + ": offset");
    if (t.offset % h.alignment != 0)
      in.fail(where + ": offset " + std::to_string(t.offset) + " is not a multiple of the alignment " +
              std::to_string(h.alignment));
    if (t.type) {
      if (t.shape[0] % t.type->block_size != 0)
        in.fail(where + ": rows of " + std::to_string(t.shape[0]) + " values are not whole " + t.type->name +
                " blocks of " + std::to_string(t.type->block_size));
      // numel / block_size blocks of block_bytes (<= 210): fits in 64 bits as numel does.
      const uint64_t blocks = uint64_t(t.numel) / uint64_t(t.type->block_size);
      if (blocks > std::numeric_limits<uint64_t>::max() / t.type->block_bytes) in.fail(where + ": byte size overflows");
      t.nbytes = size_t(blocks * t.type->block_bytes);
    }
    h.tensors.push_back(std::move(t));
  }

  // The data area starts at the next multiple of the alignment; every tensor lies inside it.
  const uint64_t header_end = in.offset();
  h.data_offset = (header_end + h.alignment - 1) / h.alignment * h.alignment;
  if (h.data_offset < header_end) in.fail("alignment overflows the header");
  const uint64_t data_size = h.data_offset <= size ? size - h.data_offset : 0;
  if (!h.tensors.empty() && h.data_offset > size)
    in.fail("the data area would start at byte " + std::to_string(h.data_offset) + ", past the end of the file (" +
            std::to_string(size) + " bytes; truncated?)");
  std::vector<const GgufTensor*> by_offset;
  for (GgufTensor& t : h.tensors) {
    if (t.offset > data_size || t.nbytes > data_size - t.offset)
      in.fail("tensor " + in_quotes(t.name) + ": " + std::to_string(t.nbytes) + " bytes at offset " +
              std::to_string(t.offset) + " of the data area, which holds " + std::to_string(data_size) + " (truncated?)");
    t.data = bytes + h.data_offset + t.offset;
    if (t.type) by_offset.push_back(&t);
  }
  std::sort(by_offset.begin(), by_offset.end(), [](auto* a, auto* b) { return a->offset < b->offset; });
  for (size_t i = 1; i < by_offset.size(); ++i)
    if (by_offset[i]->offset < by_offset[i - 1]->offset + by_offset[i - 1]->nbytes)
      in.fail("tensor " + in_quotes(by_offset[i]->name) + " overlaps tensor " + in_quotes(by_offset[i - 1]->name));
  return h;
}

namespace {
nlohmann::json element_json(const GgufValue& v, uint64_t i) {
  const GgufKind k = v.scalar_kind();
  if (k == GgufKind::String) return printable(v.strings[size_t(i)]);
  if (k == GgufKind::Bool) return v.int_at(i) != 0;
  if (k == GgufKind::F32 || k == GgufKind::F64) return v.float_at(i);
  if (k == GgufKind::U64) return v.uint_at(i);
  return v.int_at(i);
}
}  // namespace

nlohmann::json gguf_value_json(const GgufValue& v, size_t shown) {
  if (!v.is_array()) return element_json(v, 0);
  nlohmann::json first = nlohmann::json::array();
  for (uint64_t i = 0; i < std::min<uint64_t>(v.count, shown); ++i) first.push_back(element_json(v, i));
  if (v.count <= shown) return first;
  return {{"type", v.type_name()}, {"count", v.count}, {"first", first}};
}

std::string gguf_value_text(const GgufValue& v, size_t shown) {
  if (!v.is_array()) {
    const std::string s = element_json(v, 0).dump(-1, ' ', true);  // ASCII: safe to cut
    return s.size() > 80 ? s.substr(0, 77) + "..." : s;
  }
  std::string s = "[" + std::to_string(v.count) + " × " + gguf_kind_name(v.element) + "]";
  for (uint64_t i = 0; i < std::min<uint64_t>(v.count, shown); ++i) s += (i ? ", " : " ") + element_json(v, i).dump(-1, ' ', true);
  return s + (v.count > shown ? ", ..." : "");
}

bool is_gguf_file(const std::filesystem::path& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return false;
  std::ifstream f(path, std::ios::binary);
  char magic[4] = {};
  return f.read(magic, 4) && std::memcmp(magic, "GGUF", 4) == 0;
}

GgufFile::GgufFile(const std::filesystem::path& path)
    : file_(path), header_(parse_gguf(file_.data(), file_.size(), file_.path())) {
  for (size_t i = 0; i < header_.tensors.size(); ++i) tensor_index_[header_.tensors[i].name] = i;
}

const GgufValue* GgufFile::find(const std::string& key) const {
  auto it = header_.metadata.find(key);
  return it == header_.metadata.end() ? nullptr : &it->second;
}

const GgufTensor* GgufFile::tensor(const std::string& name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &header_.tensors[it->second];
}

namespace {
[[noreturn]] void wrong_type(const std::string& file, const std::string& key, const GgufValue& v, const char* expected) {
  throw FormatError(file + ": key '" + printable(key) + "' is " + v.type_name() + ", expected " + expected);
}
}  // namespace

const GgufValue& GgufFile::require(const std::string& key) const {
  const GgufValue* v = find(key);
  if (!v) throw FormatError(path() + ": key '" + printable(key) + "' is missing");
  return *v;
}

std::optional<int64_t> GgufFile::opt_int(const std::string& key) const {
  const GgufValue* v = find(key);
  if (!v) return std::nullopt;
  if (v->is_array() || !v->is_integer()) wrong_type(path(), key, *v, "an integer");
  if (v->kind == GgufKind::U64 && v->uint_at(0) > uint64_t(std::numeric_limits<int64_t>::max()))
    throw FormatError(path() + ": key '" + printable(key) + "' is " + std::to_string(v->uint_at(0)) + ", too large");
  return v->int_at(0);
}

std::optional<double> GgufFile::opt_float(const std::string& key) const {
  const GgufValue* v = find(key);
  if (!v) return std::nullopt;
  if (v->is_array() || !v->is_number()) wrong_type(path(), key, *v, "a number");
  return v->float_at(0);
}

std::optional<bool> GgufFile::opt_bool(const std::string& key) const {
  const GgufValue* v = find(key);
  if (!v) return std::nullopt;
  if (v->kind != GgufKind::Bool) wrong_type(path(), key, *v, "a bool");
  return v->int_at(0) != 0;
}

std::optional<std::string> GgufFile::opt_string(const std::string& key) const {
  const GgufValue* v = find(key);
  if (!v) return std::nullopt;
  if (v->kind != GgufKind::String) wrong_type(path(), key, *v, "a string");
  return std::string(v->strings[0]);
}

int64_t GgufFile::get_int(const std::string& key) const { return (require(key), *opt_int(key)); }
double GgufFile::get_float(const std::string& key) const { return (require(key), *opt_float(key)); }
bool GgufFile::get_bool(const std::string& key) const { return (require(key), *opt_bool(key)); }
std::string GgufFile::get_string(const std::string& key) const { return (require(key), *opt_string(key)); }

const GgufValue& GgufFile::get_array(const std::string& key, GgufKind element) const {
  const GgufValue& v = require(key);
  const bool ok = v.is_array() && (v.element == element || (element == GgufKind::I32 && v.is_integer()) ||
                                   (element == GgufKind::F32 && v.is_number()));
  if (!ok) wrong_type(path(), key, v, (std::string("an array of ") + gguf_kind_name(element)).c_str());
  return v;
}

}  // namespace pert
