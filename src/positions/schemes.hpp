// Private to src/positions: one factory per scheme file, collected by registry.cpp.
#pragma once
#include <memory>

#include "pert/positions.hpp"

namespace pert {

std::unique_ptr<PositionEncoding> make_none(const ModelConfig& config, const TensorLookup& tensors);
std::unique_ptr<PositionEncoding> make_learned(const ModelConfig& config, const TensorLookup& tensors);
std::unique_ptr<PositionEncoding> make_sinusoidal(const ModelConfig& config, const TensorLookup& tensors);
std::unique_ptr<PositionEncoding> make_rope(const ModelConfig& config, const TensorLookup& tensors);
std::unique_ptr<PositionEncoding> make_alibi(const ModelConfig& config, const TensorLookup& tensors);
std::unique_ptr<PositionEncoding> make_t5(const ModelConfig& config, const TensorLookup& tensors);

inline const char* kLearnedTable = "model.embed_positions.weight";    // [max_positions, hidden]
inline const char* kT5Table = "model.relative_attention_bias.weight";  // [num_buckets, n_heads]

}  // namespace pert
