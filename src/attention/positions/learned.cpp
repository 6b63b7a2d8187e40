// Learned absolute positions (GPT-2 `wpe`): x_m += P[m]. Past the table it is an error, or
// with "beyond": "clamp" the last row is reused.
#include <algorithm>
#include <string>

#include "attention/plugins.hpp"
#include "pert/error.hpp"

namespace pert {

namespace {
class Learned final : public PositionEncoding {
 public:
  Learned(const float* table, int rows, int hidden, bool clamp) : table_(table), rows_(rows), hidden_(hidden), clamp_(clamp) {}

  bool can_shift() const override { return false; }  // positions are in the token states
  int max_positions() const override { return clamp_ ? 0 : rows_; }

  void add_to_embeddings(float* x, int pos0, int n) const override {
    if (!clamp_ && pos0 + n > rows_)
      throw Error("position " + std::to_string(std::max(pos0, rows_)) + " is " +
                  past_position_table("learned", rows_, "give a context of at most " + std::to_string(rows_)));
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

constexpr const char* kPositionTable = "model.embed_positions.weight";  // [max_positions, hidden]

struct LearnedConfig final : SchemeConfig {
  int max_positions = 0;      // rows of the table
  bool clamp_beyond = false;  // past the table, reuse the last row instead of failing
  const char* type() const override { return "learned"; }
  SchemeKind kind() const override { return SchemeKind::Absolute; }
  nlohmann::json to_json() const override {
    return {{"type", type()}, {"max_positions", max_positions}, {"beyond", clamp_beyond ? "clamp" : "error"}};
  }
  std::string label() const override { return clamp_beyond ? "learned clamp" : "learned"; }
  std::string describe(int) const override {
    return "learned absolute embeddings (GPT-2 wpe), " + std::to_string(max_positions) +
           " positions added to the token embeddings; beyond them: " + (clamp_beyond ? "reuse the last row" : "error");
  }
  std::vector<ExpectedTensor> tensors(const ModelConfig& c) const override { return {{kPositionTable, {max_positions, c.hidden_size}}}; }
  std::unique_ptr<PositionEncoding> make(const ModelConfig& c, const TensorLookup& tensors) const override {
    return std::make_unique<Learned>(tensors(kPositionTable), max_positions, c.hidden_size, clamp_beyond);
  }
};
}  // namespace

std::shared_ptr<const SchemeConfig> parse_learned(Fields& f, const PluginContext& context) {
  auto c = std::make_shared<LearnedConfig>();
  c->max_positions = f.positive("max_positions", kMaxCount, context.model.max_position_embeddings);
  const std::string beyond = f.string("beyond", "error");
  if (beyond != "error" && beyond != "clamp") f.fail("beyond", "must be \"error\" or \"clamp\", got \"" + beyond + "\"");
  c->clamp_beyond = beyond == "clamp";
  return c;
}

}  // namespace pert
