// GptOssForCausalLM (HF models/gpt_oss; gpt-oss-20b, -120b): q/k/v/o biases (attention_bias), a
// learned sink logit per head in every softmax (self_attn.sinks), layers alternating a
// sliding_window and full attention (layer_types), YaRN; in every layer num_local_experts
// experts, num_experts_per_tok per token: the router's logits (mlp.router, with a bias), the
// largest kept and a softmax over those alone; each expert's gate and up interleaved in one
// matrix (gate the even rows), the clamped SwiGLU (up + 1)·gate·σ(1.702·gate), gate ≤ limit,
// |up| ≤ limit (swiglu_limit, 7), biases on gate, up and down. Experts stored fused: as shipped,
// MXFP4 (*_blocks [E][rows][K/32][16], *_scales [E][rows][K/32], rows along the output), or in
// F32/BF16 input-first (gate_up_proj [E][d][2·ff], down_proj [E][ff][d]); read at open as
// per-expert matrices (the MXFP4 ones as GGML's blocks, multiplied as stored).
// GGUF `gpt-oss` (llama.cpp's LLM_ARCH_OPENAI_MOE): gpt_oss_from_gguf below, and the experts'
// stacked weights and biases (ffn_{gate,up,down}_exps) split per expert by gguf_model.cpp.
#include <cctype>
#include <cstring>

#include "kernels/quants.hpp"
#include "model/architectures/architecture.hpp"
#include "pert/gguf.hpp"

namespace pert {

namespace {

std::vector<bool> gpt_oss_parse(Fields& f, ModelConfig& mc, int& window, ArchitectureLayers&) {
  read_experts(f, mc, "num_local_experts", 128, 4);
  MoeConfig& m = mc.moe;
  m.expert_ffn = mc.intermediate_size;
  m.router = MoeConfig::Router::TopKSoftmax;
  m.clamped_swiglu = true;
  m.swiglu_limit = f.number("swiglu_limit", 7.0, [](double x) { return x > 0; }, "must be > 0");
  m.biases = true;
  mc.sink_logits = true;
  if (!f.boolean("attention_bias", true)) f.fail("attention_bias", "is false, but gpt-oss's attention has q/k/v/o biases");
  mc.qkv_bias = mc.o_bias = true;
  // GptOssConfig's defaults: a window of 128 on the even layers (layer_types, as published, says which)
  if (!f.has("sliding_window")) window = 128;
  return windowed_but_every(mc.n_layers, 2);
}

// llama.cpp's gpt-oss keys into config.json's form. Its graph hard-codes the rest of HF's model:
// the top-k-then-softmax router over biased logits, the clamped SwiGLU (α 1.702, limit 7: no key,
// swiglu_limit's default here), the sinks, q/k/v/o biases and half-split RoPE. The windows: every
// layer but each sliding_window_pattern-th (2 when absent, as llama.cpp's loader) sees
// attention.sliding_window. YaRN is HF's without truncation (truncate false, as every published
// gpt-oss config.json says; llama.cpp floors and ceils the correction range): a file's YaRN gets
// it. A separate base for the windowed layers (rope.freq_base_swa) is refused unless equal.
void gpt_oss_from_gguf(const GgufFile& f, const std::string& a, json& c) {
  gguf_experts(f, a, c, "num_local_experts", nullptr, false, false);
  c["intermediate_size"] = gguf_positive(f, a + "expert_feed_forward_length");  // (no dense MLP)
  c["sliding_window"] = gguf_positive(f, a + "attention.sliding_window");
  gguf_window_pattern(f, a, 2, c);
  const int layers = c["num_hidden_layers"];
  if (c.contains("sliding_window_pattern")) {  // a period: HF's layer_types spelled out
    json types = json::array();
    for (bool windowed : windowed_but_every(layers, c["sliding_window_pattern"].get<int>()))
      types.push_back(windowed ? "sliding_attention" : "full_attention");
    c["layer_types"] = types;
    c.erase("sliding_window_pattern");
  }
  if (const auto swa_base = f.opt_float(a + "rope.freq_base_swa"); swa_base && *swa_base != c["rope_theta"].get<double>())
    throw FormatError(f.path() + ": key '" + a + "rope.freq_base_swa' is " + std::to_string(*swa_base) + ", not rope.freq_base (" +
                      std::to_string(c["rope_theta"].get<double>()) + "); pert's gpt-oss turns every layer by one base");
  if (f.opt_string(a + "rope.scaling.type") == "yarn") c["rope_scaling"] = {{"truncate", false}};  // (joined to the file's YaRN)
}

// The bytes the fused tensors are copied into, and the checkpoint they came from.
struct GptOssStorage {
  std::shared_ptr<const Checkpoint> stored;
  std::vector<std::vector<uint8_t>> buffers;
};

class Splitter {
 public:
  Splitter(const Checkpoint& stored, GptOssStorage& storage, std::vector<TensorView>& views)
      : s_(stored), storage_(storage), views_(views) {}

  // The tensor `name`, with `shape` and dtype among `dtypes`; ConfigError naming it otherwise.
  const TensorView& need(const std::string& name, const std::vector<int64_t>& shape, bool u8) const {
    const TensorView* t = s_.find(name);
    if (!t) throw ConfigError(s_.source() + ": missing tensor '" + name + "' (gpt-oss's fused experts)");
    if (t->shape != shape || (u8 != (t->dtype == DType::U8)) || t->blocks)
      throw ConfigError(t->file + ": tensor '" + name + "' has shape " + shape_str(t->shape) + " " + dtype_name(t->dtype) +
                        ", expected " + shape_str(shape) + (u8 ? " U8" : " F32, F16 or BF16"));
    return *t;
  }

  // A new view `name` [rows][cols] of t's elements in t's own dtype (F32, F16 or BF16, copied,
  // not widened): element (r, k) is t's element at + r·r_step + k·k_step. The input-first
  // float experts are transposed this way, in tiles so that both sides stay in cache.
  void gather(const std::string& name, const TensorView& t, int64_t rows, int64_t cols, int64_t at, int64_t r_step,
              int64_t k_step) {
    const size_t size = dtype_size(t.dtype);
    std::vector<uint8_t>& b = storage_.buffers.emplace_back(size_t(rows * cols) * size);
    constexpr int64_t kTile = 32;
    for (int64_t r0 = 0; r0 < rows; r0 += kTile)
      for (int64_t k0 = 0; k0 < cols; k0 += kTile)
        for (int64_t r = r0; r < std::min(rows, r0 + kTile); ++r)
          for (int64_t k = k0; k < std::min(cols, k0 + kTile); ++k)
            std::memcpy(&b[size_t(r * cols + k) * size], t.data + size_t(at + r * r_step + k * k_step) * size, size);
    add(name, cols == 1 ? std::vector<int64_t>{rows} : std::vector<int64_t>{rows, cols}, t.dtype, nullptr, b);
  }

  // Rows r0, r0 + step, ... (`rows` of them) of an MXFP4 matrix of K columns, HF's nibble order,
  // as GGML's blocks: the view `name` [rows][K].
  void mxfp4(const std::string& name, const uint8_t* blocks, const uint8_t* scales, int64_t r0, int64_t step, int64_t rows,
             int64_t K) {
    const BlockTypeInfo& info = block_type_info(BlockType::MXFP4);
    const int64_t nb = K / 32;
    std::vector<uint8_t>& b = storage_.buffers.emplace_back(size_t(rows * nb) * info.block_bytes);
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t src = r0 + r * step;
      mxfp4_from_hf(blocks + size_t(src * nb) * 16, scales + size_t(src * nb), nb, b.data() + size_t(r * nb) * info.block_bytes);
    }
    add(name, {rows, K}, DType::F32, &info, b);
  }

 private:
  void add(const std::string& name, std::vector<int64_t> shape, DType dtype, const BlockTypeInfo* blocks,
           const std::vector<uint8_t>& bytes) {
    TensorView v;
    v.name = name;
    v.dtype = dtype;
    v.shape = std::move(shape);
    v.numel = 1;
    for (int64_t n : v.shape) v.numel *= n;
    v.data = bytes.data();
    v.nbytes = bytes.size();
    v.file = s_.source();
    v.blocks = blocks;
    views_.push_back(std::move(v));
  }

  const Checkpoint& s_;
  GptOssStorage& storage_;
  std::vector<TensorView>& views_;
};

// model.layers.N.mlp.experts.<not a digit>...: one of the fused experts' tensors.
bool is_fused_expert(const std::string& name) {
  const std::string mark = ".mlp.experts.";
  const size_t at = name.find(mark);
  return at != std::string::npos && at + mark.size() < name.size() && !std::isdigit(static_cast<unsigned char>(name[at + mark.size()]));
}


Checkpoint gpt_oss_checkpoint(Checkpoint stored, const ModelConfig& c, std::vector<std::string>& notes) {
  auto storage = std::make_shared<GptOssStorage>();
  std::vector<TensorView> views;
  Splitter split(stored, *storage, views);
  const int64_t E = c.moe.n_experts, ff = c.moe.expert_ffn, d = c.hidden_size;
  for (const auto& [name, t] : stored.tensors())
    if (!is_fused_expert(name)) views.push_back(*t);  // everything but the fused experts as stored
  for (int i = 0; i < c.n_layers; ++i) {
    const std::string p = tensor_names::layer_prefix(std::to_string(i)) + "mlp.experts.";
    const TensorView& gate_up_bias = split.need(p + "gate_up_proj_bias", {E, 2 * ff}, false);
    const TensorView& down_bias = split.need(p + "down_proj_bias", {E, d}, false);
    const bool mx = stored.find(p + "gate_up_proj_blocks") != nullptr;
    if (mx && (d % 32 || ff % 32))
      throw ConfigError(stored.source() + ": hidden_size (" + std::to_string(d) + ") and intermediate_size (" + std::to_string(ff) +
                        ") must be multiples of 32 for MXFP4 experts");
    // MXFP4, rows along the output (gate_up's row 2j is gate j, 2j + 1 up j); or input-first floats
    const TensorView *gb = nullptr, *gs = nullptr, *db = nullptr, *ds = nullptr, *gu = nullptr, *dn = nullptr;
    if (mx) {
      gb = &split.need(p + "gate_up_proj_blocks", {E, 2 * ff, d / 32, 16}, true);
      gs = &split.need(p + "gate_up_proj_scales", {E, 2 * ff, d / 32}, true);
      db = &split.need(p + "down_proj_blocks", {E, d, ff / 32, 16}, true);
      ds = &split.need(p + "down_proj_scales", {E, d, ff / 32}, true);
    } else {
      gu = &split.need(p + "gate_up_proj", {E, d, 2 * ff}, false);
      dn = &split.need(p + "down_proj", {E, ff, d}, false);
    }
    for (int64_t e = 0; e < E; ++e) {
      auto name = [&](ExpertPart part) { return expert_tensor(c, i, int(e), part); };
      auto bias = [&](ExpertPart part) { return expert_tensor(c, i, int(e), part, "bias"); };
      if (mx) {
        const uint8_t *blocks = gb->data, *scales = gs->data;
        const int64_t gu0 = e * 2 * ff;
        split.mxfp4(name(ExpertPart::Gate), blocks, scales, gu0, 2, ff, d);
        split.mxfp4(name(ExpertPart::Up), blocks, scales, gu0 + 1, 2, ff, d);
        split.mxfp4(name(ExpertPart::Down), db->data, ds->data, e * d, 1, d, ff);
      } else {  // gate_up [d][2·ff], down [ff][d]: transposed into rows along the input
        const int64_t g0 = e * d * 2 * ff, d0 = e * ff * d;
        split.gather(name(ExpertPart::Gate), *gu, ff, d, g0, 2, 2 * ff);
        split.gather(name(ExpertPart::Up), *gu, ff, d, g0 + 1, 2, 2 * ff);
        split.gather(name(ExpertPart::Down), *dn, d, ff, d0, 1, d);
      }
      split.gather(bias(ExpertPart::Gate), gate_up_bias, ff, 1, e * 2 * ff, 2, 0);
      split.gather(bias(ExpertPart::Up), gate_up_bias, ff, 1, e * 2 * ff + 1, 2, 0);
      split.gather(bias(ExpertPart::Down), down_bias, d, 1, e * d, 1, 0);
    }
  }
  const std::string source = stored.source();
  storage->stored = std::make_shared<const Checkpoint>(std::move(stored));
  notes.push_back("gpt-oss's fused experts (gate_up_proj interleaved, down_proj; MXFP4 or input-first) read as per-expert tensors");
  return Checkpoint::of_views(std::move(views), source, storage);
}

}  // namespace

const ArchitectureSpec kGptOssArchitecture = {
    "GptOssForCausalLM", "gpt_oss", "gpt-oss",
    "rms_norm_eps hidden_act sliding_window layer_types num_local_experts num_experts_per_tok swiglu_limit", "",
    /*attention_bias=*/true, false, gpt_oss_parse, gpt_oss_from_gguf, false,
    {{"post_attention_norm", tensor_names::Part::FfnNorm}},  // the MLP's input norm (llama.cpp's ATTN_POST_NORM)
    {"mlp.router", "mlp.experts", "gate_proj", "up_proj", "down_proj"},
    gpt_oss_checkpoint,
};

}  // namespace pert
