// transformers v5's fused experts (fused_experts_checkpoint in architectures/common.cpp): each
// expert's gate, up and down read as views of the fused tensors' own bytes, under the per-expert
// names, and Mixtral's router under its own name. The logits of such checkpoints against the
// float64 reference, and the refusals of broken ones: tests/reference/moe_test.py (*_fused, bad_fused).
#include <cstring>

#include "model/architectures/architecture.hpp"
#include "pert/error.hpp"
#include "test_util.hpp"

using namespace pert;

namespace fused_experts_test {

TensorView view(const std::string& name, DType dtype, std::vector<int64_t> shape, const uint8_t* data) {
  TensorView v;
  v.name = name;
  v.dtype = dtype;
  v.shape = std::move(shape);
  v.numel = 1;
  for (int64_t n : v.shape) v.numel *= n;
  v.nbytes = size_t(v.numel) * dtype_size(dtype);
  v.data = data;
  v.file = "m/model.safetensors";
  return v;
}

TEST_CASE("transformers v5's fused experts: per-expert views of the same bytes, Mixtral's router renamed", "[moe]") {
  json c = tiny_config();  // d 16, 2 layers
  c["architectures"] = {"MixtralForCausalLM"}, c["model_type"] = "mixtral";
  c["num_local_experts"] = 3, c["num_experts_per_tok"] = 2, c["intermediate_size"] = 4;
  const ModelConfig mc = parse_model_config(c, "m/config.json");
  const int64_t E = 3, ff = 4, d = 16;
  std::vector<uint8_t> gate_up(size_t(E * 2 * ff * d) * 2), down(size_t(E * d * ff) * 2), router(size_t(E * d) * 4);
  std::vector<TensorView> views = {view("model.layers.0.mlp.experts.gate_up_proj", DType::BF16, {E, 2 * ff, d}, gate_up.data()),
                                   view("model.layers.0.mlp.experts.down_proj", DType::BF16, {E, d, ff}, down.data()),
                                   view("model.layers.0.mlp.gate.weight", DType::F32, {E, d}, router.data()),
                                   view("model.norm.weight", DType::F32, {d}, router.data())};
  std::vector<std::string> notes;
  const Checkpoint ck = fused_experts_checkpoint(Checkpoint::of_views(views, "m/model.safetensors", nullptr), mc, notes);
  CHECK(notes.size() == 1);  // said once
  CHECK(!ck.find("model.layers.0.mlp.experts.gate_up_proj"));
  CHECK(!ck.find("model.layers.0.mlp.gate.weight"));
  REQUIRE(ck.find("model.layers.0.block_sparse_moe.gate.weight"));
  CHECK(ck.find("model.layers.0.block_sparse_moe.gate.weight")->data == router.data());
  CHECK(ck.find("model.norm.weight"));  // the other tensors as stored
  for (int64_t e = 0; e < E; ++e) {
    const std::string p = "model.layers.0.block_sparse_moe.experts." + std::to_string(e) + ".";
    const TensorView *w1 = ck.find(p + "w1.weight"), *w3 = ck.find(p + "w3.weight"), *w2 = ck.find(p + "w2.weight");
    REQUIRE((w1 && w3 && w2));
    CHECK((w1->shape == std::vector<int64_t>{ff, d} && w3->shape == std::vector<int64_t>{ff, d} && w2->shape == std::vector<int64_t>{d, ff}));
    CHECK((w1->dtype == DType::BF16 && w1->nbytes == size_t(ff * d * 2) && w2->nbytes == size_t(d * ff * 2)));
    // expert e's gate rows, then its up rows; no copy
    CHECK(w1->data == gate_up.data() + size_t(e * 2 * ff * d) * 2);
    CHECK(w3->data == gate_up.data() + size_t((e * 2 + 1) * ff * d) * 2);
    CHECK(w2->data == down.data() + size_t(e * d * ff) * 2);
  }
  CHECK(!ck.find("model.layers.1.block_sparse_moe.experts.0.w1.weight"));  // layer 1 stored per expert: left as is

  // nothing fused: the checkpoint as it came
  const Checkpoint plain = fused_experts_checkpoint(Checkpoint::of_views({views[3]}, "m/model.safetensors", nullptr), mc, notes);
  CHECK(plain.tensors().size() == 1);
  CHECK(notes.size() == 1);  // (nothing more said)
  // a fused tensor of another width, named with what it needs
  views[1].shape = {E, d, ff + 1};
  REQUIRE_THROWS_NAMING(fused_experts_checkpoint(Checkpoint::of_views(views, "m/model.safetensors", nullptr), mc, notes), ConfigError,
                        "m/model.safetensors: tensor 'model.layers.0.mlp.experts.down_proj' has shape [3, 16, 5] BF16, but "
                        "transformers v5's fused experts need [3, 16, 4]");
}

}  // namespace fused_experts_test
