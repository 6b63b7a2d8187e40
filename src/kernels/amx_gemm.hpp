// Prefill's matrix products on AMX tiles (amx_gemm.cpp), each written once against the tile
// interface of amx_tiles.hpp and run on the instructions (the "amx" path of the bf16 and q8
// families, where cpu_supports("amx")) or on the portable model (tests, on every machine).
//
// The weights stay in the layouts ops.hpp gives them; no repack at load:
//   BF16  a 16-row block's [⌈K/2⌉][16][2] is already tdpbf16ps's B operand: B[k][2n..2n+1] is
//         pair k of row n, so 16 pairs of one block are one tile of 16 rows × 64 bytes, read in
//         place (a last, shorter run of pairs is copied into a zeroed tile first). x, rounded
//         to BF16, is A: [rows][pairs padded to 16] so its tiles are 16 rows × 16 pairs.
//   Q8    a 16-row group's block of 32 is [8 quads][16 rows][4] bytes q + 128: XORed with 0x80
//         it is q as int8, tdpbusd's signed B (8 rows × 64 bytes); x's block as bytes qx + 128
//         is the unsigned A (16 rows × 32 bytes). Σ (qx + 128)·q − 128·Σ q = Σ qx·q, the int32
//         that every q8 kernel sums, scaled and added in the plain kernel's order: the floats
//         are the plain kernel's bit for bit.
#pragma once
#include <cstdint>
#include <string>

#include "kernels/ops.hpp"

namespace pert {

enum class TileImpl { model, instructions };

// y[T][N] (+)= round_bf16(x)[T][K] · Wᵀ, W packed as ops.hpp's BF16 layout. Products and sums
// as tdpbf16ps makes them (F32, denormals flushed): not the other paths' floats bit for bit.
void amx_matmul_bf16(TileImpl impl, float* y, const float* x, const uint16_t* packed, int T, int K, int N,
                     bool accumulate);
// The products of one x on Q8 weights (ops.hpp's layout), as matmul_q8: the same floats.
void amx_matmul_q8(TileImpl impl, const float* x, int T, int K, const Projection* products, size_t count);

// Whether AMX runs here: "" when it does, else why not. cpu_bits: what cpuid says of AMX-TILE,
// AMX-BF16, AMX-INT8; request_permission: asks the OS for the tile data (returns 0 or an errno).
// The kernel dispatch asks once (kernels.cpp); tests pass their own answers.
std::string amx_refusal(bool tile, bool bf16, bool int8, int (*request_permission)());
// Linux's arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA), then ARCH_GET_XCOMP_PERM to see it
// granted: 0, or the errno (ENOSYS on a kernel before 5.16 or off Linux).
int request_tile_permission();

}  // namespace pert
