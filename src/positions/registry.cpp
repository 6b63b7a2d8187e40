// The scheme registry: adding a scheme means one file, one entry here, one reference test.
#include "schemes.hpp"

namespace pert {

namespace {
struct Scheme {
  PositionType type;
  std::unique_ptr<PositionEncoding> (*make)(const ModelConfig&, const TensorLookup&);
};
const Scheme kSchemes[] = {
    {PositionType::None, make_none},   {PositionType::Learned, make_learned}, {PositionType::Sinusoidal, make_sinusoidal},
    {PositionType::Rope, make_rope},   {PositionType::Alibi, make_alibi},     {PositionType::T5, make_t5},
};
}  // namespace

std::vector<ExpectedTensor> position_tensors(const ModelConfig& c) {
  switch (c.position.type) {
    case PositionType::Learned: return {{kLearnedTable, {c.position.max_positions, c.hidden_size}}};
    case PositionType::T5: return {{kT5Table, {c.position.num_buckets, c.n_heads}}};
    default: return {};
  }
}

std::unique_ptr<PositionEncoding> make_position_encoding(const ModelConfig& config, const TensorLookup& tensors) {
  for (const Scheme& s : kSchemes)
    if (s.type == config.position.type) return s.make(config, tensors);
  return nullptr;  // unreachable: parse_model_config admits registered types only
}

}  // namespace pert
