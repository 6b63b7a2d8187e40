// GGML's block types (llama.cpp's weight formats, as GGUF files store them): each row of a
// matrix is a run of blocks, each block `block_size` values in `block_bytes` bytes. pert reads
// F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K and MXFP4 (its kernels on them:
// src/kernels/quants.hpp).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

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

struct BlockTypeInfo {
  BlockType type;
  const char* name;    // "Q4_K", as llama.cpp prints it
  int block_size;      // values a block
  size_t block_bytes;  // bytes a block
};

// The types pert reads, or null for any other ggml_type number.
const BlockTypeInfo* block_type_info(uint32_t ggml_type);
const BlockTypeInfo& block_type_info(BlockType type);
// GGML's name of any ggml_type number (also those pert does not read: "Q2_K", "IQ4_NL", ...),
// or "type N" for numbers GGML does not define; for error messages.
std::string ggml_type_name(uint32_t ggml_type);
// Bytes of a row of n values (n a multiple of the block size).
size_t block_row_bytes(BlockType type, int64_t n);

}  // namespace pert
