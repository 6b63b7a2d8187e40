// NoPE (Kazemnejad et al. 2023): no positional signal; the causal mask alone orders tokens.
// Every hook keeps its default, which does nothing.
#include "schemes.hpp"

namespace pert {

std::unique_ptr<PositionEncoding> make_none(const ModelConfig&, const TensorLookup&) {
  return std::make_unique<PositionEncoding>();
}

}  // namespace pert
