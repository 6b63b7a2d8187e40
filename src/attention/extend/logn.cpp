// log-n attention scaling (Su 2021, kexue.fm/archives/8823, "entropy invariance"; as Qwen-7B's
// use_logn_attn computes it in modeling_qwen.py): the query at 0-based position m is multiplied
// by ln(m + 1)/ln(L) once m + 1 > L (L the trained length), so attention stays as sharp over a
// longer context as it was over L. Keys and values are untouched.
#include <cmath>

#include "attention/plugins.hpp"

namespace pert {

namespace {
struct LogN final : ExtensionConfig {
  int trained = 0;
  const char* type() const override { return "logn"; }
  json to_json() const override { return {{"trained", trained}}; }
  std::string describe() const override {
    return "log-n scaling (Su 2021; Qwen's use_logn_attn): queries past " + std::to_string(trained) + " times ln(m+1)/ln(" +
           std::to_string(trained) + ")";
  }
  bool scales() const override { return true; }
  double query_scale(int m) const override { return m + 1 > trained ? std::log(m + 1.0) / std::log(double(trained)) : 1.0; }
};
}  // namespace

std::shared_ptr<const ExtensionConfig> parse_logn(Fields& f, const PluginContext& context) {
  auto e = std::make_shared<LogN>();
  e->trained = int(f.integer("trained", 2, kMaxCount, std::max(2, context.trained)));
  return e;
}

}  // namespace pert
