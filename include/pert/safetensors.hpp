// safetensors reader: mmap'd files, a validated JSON header, F32/F16/BF16 tensors, and
// sharded checkpoints through `model.safetensors.index.json`.
//
// Layout (https://github.com/huggingface/safetensors): 8-byte little-endian header length N,
// N bytes of JSON `{name: {dtype, shape, data_offsets: [begin, end]}, "__metadata__": {...}}`,
// then the data; offsets are relative to the end of the header. Validation follows the
// reference implementation: the tensors tile the data area exactly (no overlap, no gap, no
// trailing bytes) and each one's byte length is prod(shape) * sizeof(dtype).
//
// Tensors stay in the mapping in their stored dtype; read_f32() converts on request (the
// model converts every weight once, at load).
#pragma once
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "pert/mapped_file.hpp"
#include "pert/block_types.hpp"

namespace pert {

// U8: raw bytes, read only as the parts of an MXFP4 matrix (gpt-oss's *_blocks and *_scales),
// which an architecture turns into blocks at open; read_f32 refuses it. F8_E4M3: read only as
// a block-scaled FP8 matrix (read_fp8_matrices gives it its scales; read_f32 dequantizes it).
enum class DType { F32, F16, BF16, U8, F8_E4M3 };

size_t dtype_size(DType dtype);
const char* dtype_name(DType dtype);

struct TensorView;
// An FP8 matrix's inverse scales, one per block of block_rows x block_cols (quantization_config
// "fp8", weight_block_size): value[n][k] = e4m3(data[n][k]) * scale_inv[n / block_rows][k / block_cols].
struct Fp8BlockScales {
  std::shared_ptr<const TensorView> scale_inv;  // "<name>_scale_inv" [ceil(N / rows)][ceil(K / cols)]; null: none
  int64_t block_rows = 0, block_cols = 0;
};

struct TensorView {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  int64_t numel = 0;
  uint64_t offset = 0;            // from the start of the data area
  const uint8_t* data = nullptr;  // inside the mapping; not necessarily aligned
  size_t nbytes = 0;
  std::string file;  // the file that holds it, for error messages
  // A GGUF tensor in GGML blocks (Q4_K, ...): data holds the rows as blocks and `dtype` is
  // unused; null for F32/F16/BF16 (either format).
  const BlockTypeInfo* blocks = nullptr;
  Fp8BlockScales fp8;  // an F8_E4M3 matrix's scales (read_fp8_matrices)
};

// Refuses headers larger than this (the reference implementation's limit).
inline constexpr uint64_t kMaxSafetensorsHeader = 100'000'000;
// And files with more tensors than this (a 70B-parameter model has under 1,000; the cap keeps a
// header of millions of tiny entries from costing gigabytes to index).
inline constexpr size_t kMaxSafetensorsTensors = 65'536;

// Parses and validates a whole safetensors image held in memory. `label` names it in errors.
// The returned views point into `bytes`. Throws FormatError.
struct SafetensorsHeader {
  std::vector<TensorView> tensors;          // in data order
  std::map<std::string, std::string> metadata;
};
SafetensorsHeader parse_safetensors(const uint8_t* bytes, size_t size, const std::string& label);

// One mmap'd safetensors file.
class SafetensorsFile {
 public:
  explicit SafetensorsFile(const std::filesystem::path& path);

  const std::string& path() const { return file_.path(); }
  const std::vector<TensorView>& tensors() const { return header_.tensors; }
  const std::map<std::string, std::string>& metadata() const { return header_.metadata; }
  size_t file_size() const { return file_.size(); }

 private:
  MappedFile file_;
  SafetensorsHeader header_;
};

// All tensors of one model directory: `model.safetensors`, or the shards that
// `model.safetensors.index.json` names. Tensor names are unique across shards. Or a GGUF
// file's tensors under HF names (gguf_model.hpp), kept alive by `storage`.
class Checkpoint {
 public:
  static Checkpoint open(const std::filesystem::path& model_dir);
  static Checkpoint of_views(std::vector<TensorView> views, std::string source, std::shared_ptr<const void> storage);

  const TensorView* find(const std::string& name) const;
  const std::map<std::string, const TensorView*>& tensors() const { return by_name_; }
  const std::vector<std::unique_ptr<SafetensorsFile>>& files() const { return files_; }
  // Where to say a tensor is missing: the single file, or the index.
  const std::string& source() const { return source_; }
  // What the views of of_views point into (a mapped GGUF file, rows reordered at open); null
  // for safetensors, whose files() hold their data.
  const std::shared_ptr<const void>& storage() const { return storage_; }

 private:
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::vector<TensorView> views_;
  std::shared_ptr<const void> storage_;
  std::map<std::string, const TensorView*> by_name_;
  std::string source_;
};

// The checkpoint with its block-scaled FP8 matrices read as config.json's quantization_config
// says (DeepSeek-V3/R1, Qwen3-*-FP8: {"quant_method": "fp8", "activation_scheme": "dynamic",
// "weight_block_size": [rows, cols]}): each F8_E4M3 matrix takes its "<name>_scale_inv" beside
// it (Fp8BlockScales), which leaves the checkpoint; which tensors are FP8 is whatever each one's
// dtype says. `stored` as it is when it has neither F8 tensors nor scales. `matrices`: how many.
// Throws FormatError / ConfigError naming the file and tensor or key.
Checkpoint read_fp8_matrices(Checkpoint stored, const nlohmann::json& config, const std::string& config_path, int& matrices);

// Throws FormatError naming the file and the tensor when any value is NaN or ±Inf.
void require_finite(const TensorView& tensor);

// Converts a tensor to F32 into out[0..numel).
void read_f32(const TensorView& tensor, float* out);
std::vector<float> read_f32(const TensorView& tensor);

// Hands the mapped pages that only this tensor covers back to the kernel (they are read again
// from the file if touched), so loading a model never holds the file and its copy at once.
void release_pages(const TensorView& tensor);

std::string shape_str(const std::vector<int64_t>& shape);

}  // namespace pert
