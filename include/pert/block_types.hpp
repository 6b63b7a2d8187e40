// GGML's block types (llama.cpp's weight formats, as GGUF files store them): each row of a
// matrix is a run of blocks, each block `block_size` values in `block_bytes` bytes. The traits
// table (block_types(): one row per type pert reads) is the one place a type is described; its
// kernels: src/kernels/quants.hpp.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace pert {

// The numbers are GGML's (ggml_type), as a GGUF tensor info stores them.
enum class BlockType : uint32_t {
  F32 = 0,
  F16 = 1,
  Q4_0 = 2,
  Q4_1 = 3,
  Q5_0 = 6,
  Q5_1 = 7,
  Q8_0 = 8,
  Q4_K = 12,
  Q5_K = 13,
  Q6_K = 14,
  BF16 = 30,
  MXFP4 = 39,  // OCP microscaling FP4 (gpt-oss's experts): E2M1 values, one E8M0 scale per 32
};

// How a type's dot kernels take x (src/kernels/quants_dot.cpp).
enum class BlockFamily : uint8_t {
  Float,   // F32, F16, BF16: one value a block, widened to F32
  Legacy,  // blocks of 32 with one scale (and a min): x quantized per 32, as GGML's Q8_0/Q8_1
  KQuant,  // super-blocks of 256 with sub-block scales: x quantized per 256, as GGML's Q8_K
};

// Where a block's scales lie. A quantized block's values are small integers times its scales,
// so they are finite exactly when the scales are: the loaders check these bytes, not the values.
struct BlockScales {
  enum Kind : uint8_t { None, F16, E8M0 } kind = None;  // None: the values are F32/F16/BF16 themselves
  uint8_t count = 0;                                    // scales a block
  uint16_t at[2] = {};                                  // their byte offsets in the block
};

// One row per type: everything else (the --dtype choices, help and error texts, the loaders'
// checks, the kernels' dispatch) looks the type up here. Adding a type: its row (quants.cpp), its
// kernels (quants_dot.cpp and the per-CPU files' switches; panels optional) and their tests.
struct BlockTypeInfo {
  BlockType type;
  const char* name;        // "Q4_K", as llama.cpp prints it
  const char* dtype_flag;  // --dtype's spelling where pert quantizes F32 rows to it at load ("q4_k"), else null
  int block_size;          // values a block
  size_t block_bytes;      // bytes a block
  BlockFamily family;
  BlockScales scales;
  BlockType fallback;      // for rows that are not whole blocks of it (llama-quantize's: Q4_K -> Q5_0 ...); itself if none
  void (*to_float)(const uint8_t* block, float* values);    // one block's values, as GGML's dequantize_row_*
  void (*from_float)(const float* values, uint8_t* block);  // one block of values
};

// Every type pert reads, in the table's order (F32, F16, BF16, then the quantized ones).
const std::vector<BlockTypeInfo>& block_types();
// Their names, ", "-separated, for error messages ("F32, F16, BF16, Q8_0, ...").
std::string block_type_names();
// The types pert reads, or null for any other ggml_type number.
const BlockTypeInfo* block_type_info(uint32_t ggml_type);
const BlockTypeInfo& block_type_info(BlockType type);
// GGML's name of any ggml_type number (also those pert does not read: "Q2_K", "IQ4_NL", ...),
// or "type N" for numbers GGML does not define; for error messages.
std::string ggml_type_name(uint32_t ggml_type);
// Bytes of a row of n values (n a multiple of the block size).
size_t block_row_bytes(BlockType type, int64_t n);

}  // namespace pert
