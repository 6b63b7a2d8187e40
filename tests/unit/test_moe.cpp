// Mixtures of experts: the routers (moe.cpp's route) against plain loops written from HF's
// definitions, and the bad inputs of MoE configs and checkpoints refused in one line naming the
// key or tensor. The blocks' logits against the float64 reference: tests/reference/moe_test.py,
// tests/reference/gpt_oss_test.py.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "model/moe.hpp"
#include "pert/error.hpp"
#include "pert/model.hpp"
#include "test_util.hpp"

using namespace pert;

namespace moe_test {

// The k indices of the largest values (ties: the lower index), plainly.
std::vector<int> largest(const std::vector<double>& v, int k) {
  std::vector<int> idx(v.size());
  std::iota(idx.begin(), idx.end(), 0);
  std::stable_sort(idx.begin(), idx.end(), [&](int a, int b) { return v[size_t(a)] > v[size_t(b)]; });
  idx.resize(size_t(k));
  return idx;
}

void check_route(const MoeConfig& m, const std::vector<float>& logits, const std::vector<float>& bias, const std::vector<int>& want_experts,
                 const std::vector<double>& want_weights) {
  std::vector<int> chosen(size_t(m.n_used));
  std::vector<float> weights(size_t(m.n_used));
  RouteScratch scratch;
  route(m, logits.data(), bias.empty() ? nullptr : bias.data(), 1, chosen.data(), weights.data(), scratch);
  CHECK(chosen == want_experts);
  for (size_t j = 0; j < want_weights.size(); ++j) CHECK(weights[j] == Approx(want_weights[j]).epsilon(1e-6));
}

TEST_CASE("MoE routers: softmax top-k, top-k then softmax, DeepSeek's groups, against plain loops", "[moe]") {
  const std::vector<float> l = {0.3f, -1.2f, 2.0f, 0.9f, 2.0f, -0.1f, 1.1f, 0.0f};
  std::vector<double> p(l.size());
  double all = 0;
  for (size_t e = 0; e < l.size(); ++e) all += p[e] = std::exp(double(l[e]));
  for (double& x : p) x /= all;
  MoeConfig m;
  m.n_experts = 8, m.n_used = 3;
  const std::vector<int> top = largest(p, 3);  // 2, 4 (a tie: the lower first), 6
  CHECK(top == std::vector<int>{2, 4, 6});
  m.renormalize = false;  // Qwen-MoE / OLMoE without norm_topk_prob: the softmax's own weights
  check_route(m, l, {}, top, {p[2], p[4], p[6]});
  m.renormalize = true;  // Mixtral: divided by their sum
  const double kept = p[2] + p[4] + p[6];
  check_route(m, l, {}, top, {p[2] / kept, p[4] / kept, p[6] / kept});
  m.router = MoeConfig::Router::TopKSoftmax;  // gpt-oss: a softmax over the chosen logits alone
  check_route(m, l, {}, top, {p[2] / kept, p[4] / kept, p[6] / kept});

  // DeepSeek V2's group_limited_greedy: 4 groups of 2 scored by their best probability, the 2
  // best kept, the 3 largest probabilities in them, not renormalised, × 16
  m.router = MoeConfig::Router::Softmax;
  m.renormalize = false;
  m.n_groups = 4, m.topk_groups = 2, m.routed_scale = 16;
  std::vector<double> best(4), in_kept(8, -1);
  for (size_t g = 0; g < 4; ++g) best[g] = std::max(p[2 * g], p[2 * g + 1]);
  for (int g : largest(best, 2)) in_kept[size_t(2 * g)] = p[size_t(2 * g)], in_kept[size_t(2 * g + 1)] = p[size_t(2 * g + 1)];
  const std::vector<int> limited = largest(in_kept, 3);  // groups 1 (2) and 2 (4): experts 2, 4 and 3, not 6
  CHECK(limited == std::vector<int>{2, 4, 3});
  check_route(m, l, {}, limited, {p[2] * 16, p[4] * 16, p[3] * 16});
  m.n_groups = 1, m.topk_groups = 1, m.routed_scale = 1, m.renormalize = true;

  // DeepSeek V3: 4 groups of 2; a group's score the sum of its two s + bias; the 2 best groups;
  // the 3 best s + bias in them; weights the chosen s, renormalised, × 2.5
  m.router = MoeConfig::Router::SigmoidGroups;
  m.n_groups = 4, m.topk_groups = 2, m.routed_scale = 2.5;
  const std::vector<float> bias = {0.0f, 0.0f, -3.0f, 0.0f, 0.0f, 0.0f, 0.5f, 0.5f};
  std::vector<double> s(8), choice(8), group(4);
  for (size_t e = 0; e < 8; ++e) s[e] = 1 / (1 + std::exp(-double(l[e]))), choice[e] = s[e] + bias[e];
  for (size_t g = 0; g < 4; ++g) group[g] = choice[2 * g] + choice[2 * g + 1];
  const std::vector<int> groups = largest(group, 2);  // 3 (6, 7: the bias) and 2 (4, 5)
  std::vector<double> masked(8, -1e9);
  for (int g : groups) masked[size_t(2 * g)] = choice[size_t(2 * g)], masked[size_t(2 * g + 1)] = choice[size_t(2 * g + 1)];
  const std::vector<int> chosen = largest(masked, 3);
  CHECK(std::find(chosen.begin(), chosen.end(), 2) == chosen.end());  // expert 2's logit is the largest: its bias sinks its group
  double sum = 0;
  for (int e : chosen) sum += s[size_t(e)];
  std::vector<double> want;
  for (int e : chosen) want.push_back(s[size_t(e)] / sum * 2.5);
  check_route(m, l, bias, chosen, want);
}

TEST_CASE("MoE configs: a router asking for more experts than exist, and keys pert does not compute, refused by key",
          "[moe][config]") {
  json c = tiny_config();
  c["architectures"] = {"MixtralForCausalLM"}, c["model_type"] = "mixtral";
  c["num_local_experts"] = 4, c["num_experts_per_tok"] = 5;
  REQUIRE_THROWS_NAMING(parse_model_config(c, "m/config.json"), ConfigError,
                        "m/config.json: num_experts_per_tok (5) asks for more experts than num_local_experts (4) has");
  c["num_experts_per_tok"] = 2;
  CHECK(parse_model_config(c, "m/config.json").moe.n_experts == 4);
  json q = tiny_config();
  q["architectures"] = {"Qwen2MoeForCausalLM"}, q["model_type"] = "qwen2_moe";
  q["num_experts"] = 4, q["num_experts_per_tok"] = 2, q["use_sliding_window"] = true, q["sliding_window"] = 8;
  REQUIRE_THROWS_NAMING(parse_model_config(q, "q/config.json"), ConfigError, "use_sliding_window is true: pert does not compute");
  q["use_sliding_window"] = false, q["mlp_only_layers"] = {2};
  REQUIRE_THROWS_NAMING(parse_model_config(q, "q/config.json"), ConfigError, "mlp_only_layers entries must be layer indices in [0, 2)");
  json l = tiny_config();
  l["num_experts"] = 8;  // a Llama config with experts: another architecture's key
  REQUIRE_THROWS_NAMING(parse_model_config(l, "l/config.json"), ConfigError, "num_experts is not read by LlamaForCausalLM");
  l.erase("num_experts"), l["n_routed_experts"] = 8;  // DeepSeek's, not computed here
  REQUIRE_THROWS_NAMING(parse_model_config(l, "l/config.json"), ConfigError, "l/config.json: n_routed_experts ");
}

// A tiny gpt-oss directory: d = ff = 32 (whole MXFP4 blocks), 2 experts, its experts in MXFP4.
std::vector<TestTensor> gpt_oss_tensors(int scale_byte) {
  const int d = 32, ff = 32, E = 2, heads = 4, kv = 2, hd = 8, V = 32;
  std::vector<std::pair<std::string, std::vector<int64_t>>> floats = {{"model.embed_tokens.weight", {V, d}}};
  std::vector<TestTensor> out;
  for (int i = 0; i < 2; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    for (auto [n, shape] : std::vector<std::pair<std::string, std::vector<int64_t>>>{
             {"input_layernorm.weight", {d}}, {"post_attention_layernorm.weight", {d}},
             {"self_attn.q_proj.weight", {heads * hd, d}}, {"self_attn.q_proj.bias", {heads * hd}},
             {"self_attn.k_proj.weight", {kv * hd, d}},    {"self_attn.k_proj.bias", {kv * hd}},
             {"self_attn.v_proj.weight", {kv * hd, d}},    {"self_attn.v_proj.bias", {kv * hd}},
             {"self_attn.o_proj.weight", {d, heads * hd}}, {"self_attn.o_proj.bias", {d}},
             {"self_attn.sinks", {heads}},                 {"mlp.router.weight", {E, d}}, {"mlp.router.bias", {E}},
             {"mlp.experts.gate_up_proj_bias", {E, 2 * ff}}, {"mlp.experts.down_proj_bias", {E, d}}})
      floats.push_back({p + n, shape});
    auto u8 = [&](const std::string& n, std::vector<int64_t> shape, int value) {
      int64_t count = 1;
      for (int64_t x : shape) count *= x;
      out.push_back({p + n, "U8", shape, std::vector<float>(size_t(count), float(value))});
    };
    u8("mlp.experts.gate_up_proj_blocks", {E, 2 * ff, d / 32, 16}, 0x21);
    u8("mlp.experts.gate_up_proj_scales", {E, 2 * ff, d / 32}, scale_byte);
    u8("mlp.experts.down_proj_blocks", {E, d, ff / 32, 16}, 0x12);
    u8("mlp.experts.down_proj_scales", {E, d, ff / 32}, 120);
  }
  floats.push_back({"model.norm.weight", {d}});
  floats.push_back({"lm_head.weight", {V, d}});
  uint32_t seed = 1;
  for (auto& [name, shape] : floats) {
    int64_t n = 1;
    for (int64_t x : shape) n *= x;
    out.push_back({name, "F32", shape, exact_values(n, seed++)});
  }
  return out;
}

json gpt_oss_config() {
  json c = tiny_config();
  c["architectures"] = {"GptOssForCausalLM"}, c["model_type"] = "gpt_oss";
  c["hidden_size"] = 32, c["intermediate_size"] = 32, c["head_dim"] = 8, c["num_local_experts"] = 2, c["num_experts_per_tok"] = 1;
  c["attention_bias"] = true, c["sliding_window"] = 4, c["layer_types"] = {"sliding_attention", "full_attention"};
  return c;
}

TEST_CASE("gpt-oss: MXFP4 experts read as shipped, a scale out of range or a misshapen part refused by tensor", "[moe][mxfp4]") {
  TempDir tmp;
  write_model_dir(tmp.path / "ok", gpt_oss_config(), gpt_oss_tensors(120));
  auto model = Model::load(tmp.path / "ok");
  CHECK(model->config().moe.n_experts == 2);
  InferenceState s(*model, 16, 8);
  std::vector<float> logits(32);
  const int ids[] = {1, 5, 9};
  s.forward(ids, 3, 0, logits.data(), false);
  CHECK(std::all_of(logits.begin(), logits.end(), [](float x) { return std::isfinite(x); }));

  write_model_dir(tmp.path / "nan", gpt_oss_config(), gpt_oss_tensors(255));  // E8M0's NaN
  REQUIRE_THROWS_NAMING(Model::load(tmp.path / "nan"), FormatError, "tensor 'model.layers.0.mlp.experts.0.gate_proj.weight' has",
                        "MXFP4 blocks whose scale makes values non-finite");
  std::vector<TestTensor> bad = gpt_oss_tensors(120);
  for (TestTensor& t : bad)
    if (t.name == "model.layers.1.mlp.experts.down_proj_scales") t.shape = {2, 32, 2}, t.values.resize(128);
  write_model_dir(tmp.path / "shape", gpt_oss_config(), bad);
  REQUIRE_THROWS_NAMING(Model::load(tmp.path / "shape"), ConfigError,
                        "tensor 'model.layers.1.mlp.experts.down_proj_scales' has shape [2, 32, 2] U8, expected [2, 32, 1] U8");
  bad = gpt_oss_tensors(120);
  bad.erase(std::remove_if(bad.begin(), bad.end(), [](const TestTensor& t) { return t.name == "model.layers.0.mlp.experts.down_proj_bias"; }),
            bad.end());
  write_model_dir(tmp.path / "missing", gpt_oss_config(), bad);
  REQUIRE_THROWS_NAMING(Model::load(tmp.path / "missing"), ConfigError, "missing tensor 'model.layers.0.mlp.experts.down_proj_bias'");
}

}  // namespace moe_test
