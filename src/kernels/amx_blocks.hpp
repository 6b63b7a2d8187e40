// Prefill on GGML's block panels on AMX tiles (amx_blocks.cpp): the "amx" path of the blocks
// family (quants_dot.cpp's matmul_blocks, T > 1, every product in panels), written once against
// the tile interface of amx_tiles.hpp and run on the instructions or, in tests, on the model.
//
// tdpbusd multiplies unsigned bytes (A) by signed ones (B). The panels' codes are unsigned
// (Q4_0 and Q4_1 0..15, Q5_0, Q5_1 and Q5_K 0..31, Q4_K 0..15, Q6_K 0..63; MXFP4's doubled E2M1
// values plus 12, 0..24, as the VNNI panels bias them) and x's int8 signed, so the weights are A
// and x is B, without the +128 trick of amx_gemm.cpp's q8:
//   A  16 weight rows (two panels) × one sub-block (32 values; Q6_K's 16) of codes, one byte
//      each: the panel's nibbles and high bits decoded once per work item into
//      [(super-)block][32 rows][values] (the panel bytes cannot be a tile: a byte holds two
//      values' nibbles). 32 rows: two A tiles.
//   B  16 rows of x × the same sub-block, as the instruction reads B: [quads][16 rows][4 bytes],
//      x's int8 values exactly as matmul_blocks quantized them (made once per call).
//   C  [16 weight rows][16 rows of x] int32: Σ code·qx of the sub-block, the same integer the
//      plain and VNNI kernels sum. Stored per sub-block, then scaled in integers as they do (a
//      K-quant's sub-block scales times the sums, the mins or Q6_K's 32·Σ s·Σ qx from x's sums,
//      the legacy biases 8, 16 or MXFP4's 12 times Σ qx) and added in the plain kernel's float
//      steps (quants_blocks.hpp's Lanes): the floats are the plain kernel's, bit for bit.
#pragma once
#include <cstddef>

#include "kernels/amx_gemm.hpp"
#include "kernels/quants.hpp"
#include "kernels/quants_blocks.hpp"

namespace pert {

// products[i].y (+)= x · W_iᵀ for T rows of x, each W_i in panels (w->panels) of a type with
// panels; x as matmul_blocks quantizes it: x_legacy per 32 (Q4_0, Q4_1, Q5_0, Q5_1, MXFP4: q, d,
// sum), x_k per 256 (Q4_K, Q5_K, Q6_K: q, d, bsum). A format no product reads may be empty.
// count <= 4. Throws std::invalid_argument for a product not in panels.
void amx_matmul_blocks(TileImpl impl, const quants::QuantizedX& x_legacy, const quants::QuantizedX& x_k, int T,
                       const BlockProduct* products, size_t count);

}  // namespace pert
