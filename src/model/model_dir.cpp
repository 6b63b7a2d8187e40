#include "pert/model_dir.hpp"

#include <algorithm>
#include <set>

#include "model/architectures/architecture.hpp"
#include "model/mla.hpp"
#include "pert/error.hpp"
#include "pert/gguf_model.hpp"
#include "pert/json_util.hpp"
#include "pert/positions.hpp"

namespace pert {

std::vector<ExpectedTensor> expected_tensors(const ModelConfig& c) {
  // The parts each architecture has (src/model/architectures/): Phi-3 fuses q/k/v and gate/up.
  using namespace tensor_names;
  const int64_t d = c.hidden_size, ff = c.intermediate_size, V = c.vocab_size;
  const int64_t q = int64_t(c.n_heads) * c.head_dim, kv = int64_t(c.n_kv_heads) * c.head_dim;
  std::vector<ExpectedTensor> out = {{kEmbed, {V, d}}};
  for (ExpectedTensor& t : position_tensors(c)) out.push_back(std::move(t));
  for (int i = 0; i < c.n_layers; ++i) {
    auto add = [&](Part part, std::vector<int64_t> shape, const char* kind = "weight") {
      out.push_back({layer_tensor(i, part, kind), std::move(shape)});
    };
    add(Part::AttnNorm, {d});
    if (c.mla.enabled()) {  // DeepSeek's latent attention (model/mla.hpp)
      for (auto& [name, shape] : mla_tensors(c, i)) out.push_back({name, shape});
    } else if (c.fused_projections) {
      add(Part::QKV, {q + 2 * kv, d});
    } else {
      add(Part::Q, {q, d}), add(Part::K, {kv, d}), add(Part::V, {kv, d});
    }
    if (c.qkv_bias) add(Part::Q, {q}, "bias"), add(Part::K, {kv}, "bias"), add(Part::V, {kv}, "bias");
    if (c.qk_norm && c.qk_norm_whole) add(Part::QNorm, {q}), add(Part::KNorm, {kv});  // OLMoE's: the whole projection
    else if (c.qk_norm) add(Part::QNorm, {c.head_dim}), add(Part::KNorm, {c.head_dim});
    if (c.sink_logits) out.push_back({sink_logits_tensor(i), {c.n_heads}});
    add(Part::O, {d, c.mla.enabled() ? int64_t(c.n_heads) * c.mla.v_head_dim : q});
    if (c.o_bias) add(Part::O, {d}, "bias");
    if (!c.parallel_block) add(Part::FfnNorm, {d});  // Cohere: one norm feeds attention and MLP
    if (c.sandwich_norms) add(Part::PreFfnNorm, {d}), add(Part::PostFfnNorm, {d});
    if (c.moe.sparse_layer(i)) {  // the router and each expert's gate, up, down (architectures/)
      const int64_t E = c.moe.n_experts, eff = c.moe.expert_ffn, sff = c.moe.shared_ffn;
      out.push_back({router_tensor(c, i), {E, d}});
      for (int e = 0; e < E; ++e) {
        out.push_back({expert_tensor(c, i, e, ExpertPart::Gate), {eff, d}});
        out.push_back({expert_tensor(c, i, e, ExpertPart::Up), {eff, d}});
        out.push_back({expert_tensor(c, i, e, ExpertPart::Down), {d, eff}});
        if (c.moe.biases)
          for (ExpertPart part : {ExpertPart::Gate, ExpertPart::Up, ExpertPart::Down})
            out.push_back({expert_tensor(c, i, e, part, "bias"), {part == ExpertPart::Down ? d : eff}});
      }
      if (c.moe.biases) out.push_back({router_tensor(c, i, "bias"), {E}});
      if (c.moe.router == MoeConfig::Router::SigmoidGroups) out.push_back({router_tensor(c, i, "e_score_correction_bias"), {E}});
      if (sff) {
        out.push_back({shared_expert_tensor(c, i, ExpertPart::Gate), {sff, d}});
        out.push_back({shared_expert_tensor(c, i, ExpertPart::Up), {sff, d}});
        out.push_back({shared_expert_tensor(c, i, ExpertPart::Down), {d, sff}});
        if (c.moe.gated_shared) out.push_back({shared_expert_gate_tensor(i), {1, d}});
      }
    } else if (c.fused_projections) {
      add(Part::GateUp, {2 * ff, d});
      add(Part::Down, {d, ff});
    } else {
      add(Part::Gate, {ff, d}), add(Part::Up, {ff, d});
      add(Part::Down, {d, ff});
    }
    if (c.mlp_bias) add(Part::Gate, {ff}, "bias"), add(Part::Up, {ff}, "bias"), add(Part::Down, {d}, "bias");
  }
  out.push_back({kFinalNorm, {d}});
  if (!c.tie_word_embeddings) out.push_back({kLmHead, {V, d}});
  return out;
}

// Old HF llama checkpoints carry precomputed RoPE frequencies as buffers; they are derived
// from the config, never read.
static bool is_derived_buffer(const std::string& name) {
  const std::string suffix = "rotary_emb.inv_freq";
  return name.size() >= suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Sets config.trained from config.json alone and refuses overrides that replace its scheme,
// the model's or any layer's.
static void check_trained_scheme(const nlohmann::json& raw, const std::filesystem::path& path,
                                 const ConfigOverrides& overrides, ModelConfig& config) {
  try {
    config.trained = std::make_shared<const ModelConfig>(parse_model_config(raw, path.string()));
  } catch (const Error&) {  // config.json needs the overrides to parse: nothing to compare
    config.trained = nullptr;
    return;
  }
  const ModelConfig& trained_config = *config.trained;
  if (overrides.allow_scheme_change) return;
  auto refuse = [&](const SchemeConfig& trained, const SchemeConfig& running, const std::string& where) {
    throw SchemeChangeError(path.string() + ": trained with " + trained.identity() + " positions" + where + "; " +
                            overrides.describe() + " would run it with " + running.label() +
                            " (an override may rescale or extend the trained scheme, not replace it; "
                            "`allow_scheme_change` runs it anyway)");
  };
  if (trained_config.position.scheme->identity() != config.position.scheme->identity())
    refuse(*trained_config.position.scheme, *config.position.scheme, "");
  for (size_t i = 0; i < config.layers.size() && i < trained_config.layers.size(); ++i) {
    const SchemeConfig& trained = *trained_config.layers[i].position.scheme;
    const SchemeConfig& running = *config.layers[i].position.scheme;
    if (trained.identity() != running.identity()) refuse(trained, running, " in layer " + std::to_string(i));
  }
}

namespace {
// The config (config.json, or a GGUF file's metadata read as one) with the overrides over it.
void read_config(ModelDir& m, const nlohmann::json& raw, const std::filesystem::path& path, const ConfigOverrides& overrides) {
  m.config_json = apply_overrides(raw, overrides);
  const std::string source = path.string() + (overrides.empty() ? "" : " (with overrides)");
  m.config = parse_model_config(m.config_json, source);
  m.config.trained = std::make_shared<const ModelConfig>(m.config);
  if (!overrides.empty()) check_trained_scheme(raw, path, overrides, m.config);
}

// Every tensor the config needs, with its shape, and no other.
void check_tensors(ModelDir& m, const char* config_name) {
  std::set<std::string> expected_names;
  for (const ExpectedTensor& e : expected_tensors(m.config)) {
    expected_names.insert(e.name);
    const TensorView* t = m.checkpoint.find(e.name);
    if (!t) throw ConfigError(m.checkpoint.source() + ": missing tensor '" + e.name + "'");
    if (t->shape != e.shape)
      throw ConfigError(t->file + ": tensor '" + e.name + "' has shape " + shape_str(t->shape) + ", but " + config_name +
                        " implies " + shape_str(e.shape));
  }
  m.checks.push_back("all " + std::to_string(expected_names.size()) + " tensors the config needs are present with the right shapes");
  for (const auto& [name, t] : m.checkpoint.tensors())
    if (!expected_names.count(name) && !is_derived_buffer(name))
      throw ConfigError(t->file + ": unexpected tensor '" + printable(name) + "' (this config does not use it)");
  m.checks.push_back("no unexpected tensors");
}

ModelDir open_gguf(const std::filesystem::path& path, const ConfigOverrides& overrides) {
  ModelDir m;
  m.dir = path;
  m.gguf = std::make_shared<const GgufFile>(path);
  m.checks.push_back("GGUF v" + std::to_string(m.gguf->header().version) + ": " +
                     std::to_string(m.gguf->header().keys.size()) + " keys and " +
                     std::to_string(m.gguf->header().tensors.size()) + " tensors, every offset and size inside the file");
  read_config(m, gguf_config_json(*m.gguf), path, overrides);
  m.checks.push_back("metadata read as config.json, which validates" + std::string(overrides.empty() ? "" : " (after overrides)"));
  m.checkpoint = gguf_checkpoint(m.gguf, m.config);
  check_tensors(m, "the metadata");
  return m;
}
}  // namespace

ModelDir open_model_dir(const std::filesystem::path& dir, const ConfigOverrides& overrides) {
  if (is_gguf_file(dir)) return open_gguf(dir, overrides);
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) throw IoError(dir.string() + ": not a model directory or GGUF file");
  ModelDir m;
  m.dir = dir;
  const std::filesystem::path config_path = dir / "config.json";
  read_config(m, read_json_file(config_path), config_path, overrides);
  m.checks.push_back("config.json parses and validates" +
                     std::string(overrides.empty() ? "" : " (after overrides)"));
  // HF's generate stops at generation_config.json's eos_token_id (Llama 3 instruct lists three
  // there): pert stops at those and config.json's.
  const std::filesystem::path gen_path = dir / "generation_config.json";
  if (std::filesystem::exists(gen_path, ec)) {
    const nlohmann::json gen = read_json_file(gen_path);
    using nlohmann::json;
    const json eos = gen.is_object() && gen.contains("eos_token_id") ? gen["eos_token_id"] : json();
    for (const json& id : eos.is_array() ? eos : eos.is_null() ? json::array() : json::array({eos})) {
      if (!id.is_number_integer() || id.get<long long>() < 0 || id.get<long long>() >= m.config.vocab_size)
        throw ConfigError(gen_path.string() + ": eos_token_id must be token ids in [0, vocab_size = " +
                          std::to_string(m.config.vocab_size) + "), got " + json_brief(id));
      std::vector<int>& ids = m.config.eos_token_ids;
      if (std::find(ids.begin(), ids.end(), id.get<int>()) == ids.end()) ids.push_back(id.get<int>());
    }
    m.checks.push_back("generation_config.json: eos_token_id read");
  }

  m.checkpoint = Checkpoint::open(dir);
  m.checks.push_back(std::to_string(m.checkpoint.files().size()) +
                     " safetensors file(s): headers valid, tensors tile the data exactly");
  int fp8_matrices = 0;  // DeepSeek-V3's, Qwen3-*-FP8's: F8_E4M3 with weight_scale_inv, widened at load
  m.checkpoint = read_fp8_matrices(std::move(m.checkpoint), m.config_json, config_path.string(), fp8_matrices);
  if (fp8_matrices)
    m.checks.push_back(std::to_string(fp8_matrices) +
                       " FP8 matrices (F8_E4M3, quantization_config \"fp8\"): inverse scales of the right shape, positive and finite");
  if (const ArchitectureSpec& spec = architecture_spec(m.config.architecture); spec.checkpoint) {
    m.checkpoint = spec.checkpoint(std::move(m.checkpoint), m.config, m.checks);  // (gpt-oss: its fused experts split)
  }
  if (const ArchitectureSpec& spec = architecture_spec(m.config.architecture); spec.vision_tensors) {
    int skipped = 0;  // a vision-language model: its language model's tensors, under pert's names
    m.checkpoint = language_model_checkpoint(std::move(m.checkpoint), spec, skipped);
    std::string prefixes = spec.vision_tensors;  // "visual. model.visual." as "visual.*, model.visual.*"
    for (size_t at = 0; (at = prefixes.find(' ', at)) != std::string::npos; at += 3) prefixes.replace(at, 1, "*, ");
    m.checks.push_back("skipped " + std::to_string(skipped) + " vision tensors (" + prefixes + "*): pert runs the language model");
  }

  check_tensors(m, "config.json");
  return m;
}

std::vector<std::filesystem::path> model_dir_files(const std::filesystem::path& dir) {
  namespace fs = std::filesystem;
  std::vector<fs::path> files;
  std::error_code ec;
  if (is_gguf_file(dir)) return {dir};
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name == "config.json" || name == "generation_config.json" || name == "tokenizer.json" ||
        name == "tokenizer_config.json" || name == "model.safetensors.index.json" || e.path().extension() == ".safetensors")
      files.push_back(e.path());
  }
  return files;
}

}  // namespace pert
