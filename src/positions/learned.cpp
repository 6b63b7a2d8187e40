// Learned absolute positions (GPT-2 `wpe`): x_m += P[m]. Past the table it is an error, or
// with "beyond": "clamp" the last row is reused.
#include <algorithm>
#include <string>

#include "pert/error.hpp"
#include "schemes.hpp"

namespace pert {

namespace {
class Learned final : public PositionEncoding {
 public:
  Learned(const float* table, int rows, int hidden, bool clamp) : table_(table), rows_(rows), hidden_(hidden), clamp_(clamp) {}

  bool can_shift() const override { return false; }  // positions are in the token states
  int max_positions() const override { return clamp_ ? 0 : rows_; }

  void add_to_embeddings(float* x, int pos0, int n) const override {
    if (!clamp_ && pos0 + n > rows_)
      throw Error("position " + std::to_string(std::max(pos0, rows_)) + " is past the learned position table (" +
                  std::to_string(rows_) + " positions); use --set position.beyond=clamp to reuse the last one");
    for (int t = 0; t < n; ++t) {
      const float* row = table_ + size_t(std::min(pos0 + t, rows_ - 1)) * hidden_;
      float* xt = x + size_t(t) * hidden_;
      for (int i = 0; i < hidden_; ++i) xt[i] += row[i];
    }
  }

 private:
  const float* table_;  // [rows][hidden]
  int rows_, hidden_;
  bool clamp_;
};
}  // namespace

std::unique_ptr<PositionEncoding> make_learned(const ModelConfig& c, const TensorLookup& tensors) {
  return std::make_unique<Learned>(tensors(kLearnedTable), c.position.max_positions, c.hidden_size,
                                   c.position.clamp_beyond);
}

}  // namespace pert
