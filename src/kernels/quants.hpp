// The kernels on GGML's blocks (pert/block_types.hpp): pert multiplies on the blocks as they
// are (never a dequantized F32 copy), and can quantize F32 rows into the quantized ones
// (--dtype q4_k ... for safetensors models).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "pert/block_types.hpp"

namespace pert {

// n values (a multiple of the block size) from blocks, and into blocks.
// MXFP4: the values are exactly GGML's (dequantize_row_mxfp4), E2M1 value v of a block with
// scale byte e giving v·2^(e − 127), e = 0 included (2^−127, subnormal). e = 255, which the OCP
// MX spec makes NaN, is the scale 2^128 here as in GGML: ±0.5 gives ±2^127, larger values overflow
// to ±inf in F32 and zeros stay 0 (refusing such blocks, if wanted, is the loader's to do). The
// quantizer writes GGML's bytes (quantize_row_mxfp4_ref), never e = 255.
void dequantize_row(BlockType type, const void* blocks, float* out, int64_t n);
void quantize_row(BlockType type, const float* values, void* blocks, int64_t n);

// n_blocks MXFP4 blocks as Hugging Face stores them (gpt-oss's `<name>_blocks` [..., n_blocks, 16]
// and `<name>_scales` [..., n_blocks] uint8) into GGML's 17-byte blocks at out. The numbers are
// the same (the E8M0 byte is copied), only the nibbles move: HF's byte j holds values 2j (low
// nibble) and 2j + 1 (high), GGML's byte j values j (low) and j + 16 (high).
void mxfp4_from_hf(const uint8_t* blocks, const uint8_t* scales, int64_t n_blocks, uint8_t* out);

// A matrix W [N][K] in blocks: row n at data + n·row_stride, block_row_bytes(type, K) bytes;
// or (panels) rows interleaved 8 at a time by repack_panels, panel n/8 at data + n·row_stride.
struct BlockMatrix {
  const uint8_t* data = nullptr;
  BlockType type = BlockType::F32;
  size_t row_stride = 0;
  bool panels = false;
};

// Q4_K, Q5_K, Q6_K, Q4_0, Q5_0, Q4_1, Q5_1 and MXFP4 rows repacked into panels of 8 rows: per
// (super-)block the 8 rows' codes side by side, 4 values of a row in each 4 bytes, the K-quants'
// scales unpacked to bytes, so that one broadcast of 4 values of x meets 8 rows in one
// instruction and a (sub-)block's products add up in int16 before one multiply by the 8 rows'
// scales (src/kernels/quants_panels.cpp). The same numbers: matmul_blocks gives the same floats on
// panels as on the rows. N % 8 == 0.
bool has_panels(BlockType type);
size_t panel_row_bytes(BlockType type, int K);  // bytes per row of the panels (row_stride)
void repack_panels(BlockType type, const uint8_t* rows, size_t row_stride, int N, int K, uint8_t* panels);

// y[T][N] (+)= x[T][K] · W[N][K]ᵀ on the blocks. Quantized types: each row of x is quantized
// once, per 32 values for the legacy types (as GGML's Q8_0/Q8_1, with F32 scales) and per 256 for
// the K-quants (as GGML's Q8_K: F32 scale, int8 values, int16 sums per 16), each block's products
// summed exactly in int32 and then scaled (src/kernels/quants_dot.cpp). F32/F16/BF16: F32 dot products,
// the weights widened on the fly. Throws pert::Error when K is not a multiple of the block size.
void matmul_blocks(float* y, const float* x, const BlockMatrix& w, int T, int K, int N, bool accumulate = false);

// Several products of one x [T][K] (q, k and v; gate and up), x quantized once for all of them
// and the products run in one parallel region.
struct BlockProduct {
  float* y;               // [T][N]
  const BlockMatrix* w;   // [N][K]
  int N;
  bool accumulate = false;
};
void matmul_blocks(const float* x, int T, int K, const BlockProduct* products, size_t count);

// The kernel families this CPU can run, best first ("avx512vnni": the panels two at a time with
// vpdpbusd, the rest as avx2; "avx2"; then "plain": the same integer sums and the same float
// result in plain C++); select_block_kernel picks one (tests compare them), throwing
// std::invalid_argument for a name not available.
std::vector<std::string> block_kernels();
const std::string& block_kernel();
void select_block_kernel(const std::string& name);

}  // namespace pert
