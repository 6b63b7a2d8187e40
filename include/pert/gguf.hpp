// GGUF reader (llama.cpp's model file, versions 2 and 3, little-endian): mmap'd, with every
// count, length, offset and size checked against the file before it is used.
//
// Layout (ggml/docs/gguf.md): "GGUF", u32 version, u64 tensor count, u64 key-value count; the
// key-value pairs (key: u64 length + UTF-8 bytes; u32 value type; the value: a scalar, a
// string, or an array: u32 element type, u64 count, the elements, never arrays of arrays); the
// tensor infos (name, u32 dims, u64 sizes innermost first, u32 ggml_type, u64 offset from the
// data area); padding to `general.alignment` (32 when absent); the data area.
#pragma once
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "pert/mapped_file.hpp"
#include "pert/block_types.hpp"

namespace pert {

// GGUF's value types (gguf_type).
enum class GgufKind : uint32_t { U8 = 0, I8, U16, I16, U32, I32, F32, Bool, String, Array, U64, I64, F64 };
const char* gguf_kind_name(GgufKind kind);  // "u32", "string", "array", ...

// One metadata value, read in place from the mapping (little-endian, not aligned).
struct GgufValue {
  GgufKind kind = GgufKind::U8;
  GgufKind element = GgufKind::U8;     // an array's element type
  uint64_t count = 1;                  // an array's length (1 for a scalar)
  const uint8_t* data = nullptr;       // a scalar's bytes, or an array's first element (not for strings)
  std::vector<std::string_view> strings;  // a string (one), or an array of strings

  bool is_array() const { return kind == GgufKind::Array; }
  GgufKind scalar_kind() const { return is_array() ? element : kind; }
  // Element i (0 for a scalar) of an integer, float or bool type, converted.
  int64_t int_at(uint64_t i) const;     // integers and bool
  uint64_t uint_at(uint64_t i) const;   // u64 past INT64_MAX
  double float_at(uint64_t i) const;    // any number
  bool is_integer() const;              // u8 ... i64 (scalar or elements)
  bool is_number() const;               // integers and floats
  std::string type_name() const;        // "u32", "array of string" ...
};

struct GgufTensor {
  std::string name;
  std::vector<int64_t> shape;  // GGML's order: shape[0] is the innermost (a row's length)
  uint32_t ggml_type = 0;
  const BlockTypeInfo* type = nullptr;  // null: a type pert does not read (refused when used)
  uint64_t offset = 0;                  // from the start of the data area
  const uint8_t* data = nullptr;
  size_t nbytes = 0;
  int64_t numel = 0;
};

// Limits beyond which a header is refused rather than indexed (a 70B model has ~1,000 tensors
// and one array of ~150,000 tokens and another of merges).
inline constexpr uint64_t kMaxGgufTensors = 65'536;
inline constexpr uint64_t kMaxGgufKeys = 65'536;
inline constexpr uint64_t kMaxGgufArray = 16'777'216;
inline constexpr uint32_t kMaxGgufDims = 4;

// A parsed GGUF image; views point into the bytes given.
struct GgufHeader {
  uint32_t version = 0;
  uint64_t alignment = 32;
  uint64_t data_offset = 0;                   // where the data area starts
  std::vector<std::string> keys;              // in file order
  std::map<std::string, GgufValue> metadata;  // by key
  std::vector<GgufTensor> tensors;            // in file order
};
// Throws FormatError naming `label` and the key or tensor at fault.
GgufHeader parse_gguf(const uint8_t* bytes, size_t size, const std::string& label);

// True when the file begins with GGUF's magic (how -m tells a GGUF file from a directory).
bool is_gguf_file(const std::filesystem::path& path);

// A value for people and JSON (`pert inspect`): scalars and strings as they are, an array's
// first `shown` elements and its length.
std::string gguf_value_text(const GgufValue& value, size_t shown = 8);
nlohmann::json gguf_value_json(const GgufValue& value, size_t shown = 8);

// One mmap'd GGUF file, with typed look-ups whose errors name the file and the key.
class GgufFile {
 public:
  explicit GgufFile(const std::filesystem::path& path);

  const std::string& path() const { return file_.path(); }
  size_t file_size() const { return file_.size(); }
  const GgufHeader& header() const { return header_; }
  const GgufValue* find(const std::string& key) const;
  const GgufTensor* tensor(const std::string& name) const;

  // Typed values: FormatError "FILE: key 'K' is missing" or "... is a string, expected an integer".
  int64_t get_int(const std::string& key) const;
  double get_float(const std::string& key) const;  // any number
  bool get_bool(const std::string& key) const;
  std::string get_string(const std::string& key) const;
  // An array of `element`s; I32 accepts any integer elements and F32 any number.
  const GgufValue& get_array(const std::string& key, GgufKind element) const;
  const GgufValue& require(const std::string& key) const;  // any type
  // The same, or nullopt when the key is absent (a present key of the wrong type still throws).
  std::optional<int64_t> opt_int(const std::string& key) const;
  std::optional<double> opt_float(const std::string& key) const;
  std::optional<bool> opt_bool(const std::string& key) const;
  std::optional<std::string> opt_string(const std::string& key) const;

 private:
  MappedFile file_;
  GgufHeader header_;
  std::map<std::string, size_t> tensor_index_;
};

}  // namespace pert
