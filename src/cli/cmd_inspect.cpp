// pert inspect MODEL: the resolved config, the positional scheme in words, the tensors, and
// every check that passed; for a GGUF file its metadata too, and the memory it runs in.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <set>

#include "cli/cli_common.hpp"
#include "pert/config.hpp"
#include "pert/error.hpp"
#include "pert/json_util.hpp"
#include "pert/model_dir.hpp"

namespace pert::cli {

namespace {

struct InspectArgs {
  std::string model_dir, model_flag;  // as every subcommand takes it (-m), or positionally
  ConfigFlags config;
  bool json = false;
};

// Forward-pass order (layer 2 before layer 10), then whatever else the files hold.
std::vector<const TensorView*> tensors_in_order(const ModelDir& m) {
  std::vector<const TensorView*> out;
  std::set<std::string> seen;
  for (const ExpectedTensor& e : expected_tensors(m.config)) {
    out.push_back(m.checkpoint.find(e.name));
    seen.insert(e.name);
  }
  for (const auto& [name, t] : m.checkpoint.tensors())
    if (!seen.count(name)) out.push_back(t);
  return out;
}

const char* type_name(const TensorView& t) { return t.blocks ? t.blocks->name : dtype_name(t.dtype); }

// Resident memory of a run: the weights as the given --dtype keeps them (a GGUF file's own
// blocks are read in place from the mapping: its size), and the F32 KV cache per 1,000 positions.
// The KV cache in F32: global layers grow with the context; a local layer (window, chunk) keeps
// at most its span and a batch of 512 in a ring, unless an extend method needs every key.
nlohmann::json memory_estimate(const ModelDir& m, const ModelConfig& c) {
  size_t weights = 0;
  for (const auto& [name, t] : m.checkpoint.tensors()) weights += t->nbytes;
  const double row = cached_values_per_position(c) * 4.0;  // a position's keys and values, one layer
  int global = 0;
  double local_max = 0;
  for (const LayerAttention& l : c.layers) {
    const int span = l.span();
    if (span < 0 || !c.extend.empty()) ++global;  // (extend: counted as global, as most methods need every key)
    else local_max += row * (span + 512);
  }
  nlohmann::json out = {{"weight_bytes", weights}, {"kv_cache_bytes_per_1000_positions", row * global * 1000},
                        {"global_layers", global}, {"kv_cache_bytes_local_layers_max", local_max}};
  if (const MlaConfig& mla = c.mla; mla.enabled())  // DeepSeek: MLA's latent row against every head's key and value (one layer, f32)
    out["mla_cache_bytes_per_position_per_layer"] = {
        {"mla_latent", row}, {"plain_mha", double(c.n_heads) * (mla.qk_head_dim() + mla.v_head_dim) * 4.0}};
  return out;
}

void run_inspect(const InspectArgs& args) {
  if (!args.model_dir.empty() && !args.model_flag.empty())
    throw CLI::ValidationError("MODEL", "give the model once: -m " + args.model_flag + " or " + args.model_dir);
  ModelDir m = open_model_dir(resolve_model_dir(args.model_flag.empty() ? args.model_dir : args.model_flag),
                              args.config.overrides());
  const ModelConfig& c = m.config;

  int64_t params = 0;
  for (const auto& [name, t] : m.checkpoint.tensors()) {
    params += t->numel;
    require_finite(*t);
  }
  m.checks.push_back("every weight is finite");
  const std::string position = describe_position(c);
  // What config.json's scheme alone says, when the running one differs (overrides, "extend").
  const std::string trained = c.trained ? describe_position(*c.trained) : position;
  const bool overridden = trained != position;
  const std::vector<std::string> ignored = ignored_config_keys(m.config_json);

  if (args.json) {
    nlohmann::json tensors = nlohmann::json::array();
    for (const TensorView* t : tensors_in_order(m))
      tensors.push_back({{"name", t->name}, {"dtype", type_name(*t)}, {"shape", t->shape},
                         {"bytes", t->nbytes}, {"file", t->file}});
    nlohmann::json out = {{"model_dir", m.dir.string()},   {"config", to_json(c)},
                          {"position", position},          {"trained_position", trained},
                          {"position_label", position_label(c)}, {"tensors", tensors},
                          {"parameters", params},          {"ignored_config_keys", ignored},
                          {"checks", m.checks}, {"memory", memory_estimate(m, c)}};
    out.update(cpu_json());
    if (m.gguf) {
      nlohmann::json meta = nlohmann::json::object();
      for (const std::string& key : m.gguf->header().keys) meta[printable(key)] = gguf_value_json(*m.gguf->find(key));
      out["gguf"] = {{"version", m.gguf->header().version}, {"alignment", m.gguf->header().alignment},
                     {"file_bytes", m.gguf->file_size()}, {"metadata", meta}, {"config_json", m.config_json}};
    }
    std::cout << out.dump(2) << "\n";
    return;
  }

  std::printf("model      %s\n", m.dir.string().c_str());
  std::printf("arch       %s\n", describe_architecture(c).c_str());
  std::printf("shape      %d layers, hidden %d, MLP %d, %d heads (%d kv) of dim %d, vocab %d\n", c.n_layers,
              c.hidden_size, c.intermediate_size, c.n_heads, c.n_kv_heads, c.head_dim, c.vocab_size);
  std::printf("context    trained at %d tokens\n", c.max_position_embeddings);
  if (overridden) {
    std::printf("position   trained with %s\n", trained.c_str());
    std::printf("           running %s\n", position.c_str());
  } else {
    std::printf("position   %s\n", position.c_str());
  }
  std::printf("parameters %lld (%.3f M)\n", (long long)params, params / 1e6);
  std::printf("cpu        %s\n", cpu_line().c_str());
  const nlohmann::json memory = memory_estimate(m, c);
  const int global = memory["global_layers"].get<int>();
  char local[160] = "";
  if (global < c.n_layers)
    std::snprintf(local, sizeof local, " in %d of %d layers, and at most %.1f MiB in the local ones", global, c.n_layers,
                  memory["kv_cache_bytes_local_layers_max"].get<double>() / 1048576.0);
  std::printf("memory     weights %.1f MiB%s; KV cache %.1f MiB per 1000 positions%s (f32; --cache-type f16 halves it)\n",
              memory["weight_bytes"].get<double>() / 1048576.0, m.gguf ? " as stored, read in place (--dtype auto; quantized matrices copied at load into their kernels' layouts)" : " as stored",
              memory["kv_cache_bytes_per_1000_positions"].get<double>() / 1048576.0, local);
  if (memory.contains("mla_cache_bytes_per_position_per_layer")) {
    const nlohmann::json& b = memory["mla_cache_bytes_per_position_per_layer"];
    const double latent = b["mla_latent"], mha = b["plain_mha"];
    std::printf("           MLA: pert caches the latent and the rope key (kv_lora_rank + qk_rope_head_dim), %.0f bytes a position "
                "and layer (f32), 1/%.1f of plain multi-head attention's %.0f (every head's key and value)\n",
                latent, mha / latent, mha);
  }
  if (m.gguf) {
    std::printf("\nGGUF v%u metadata (%zu keys):\n", m.gguf->header().version, m.gguf->header().keys.size());
    for (const std::string& key : m.gguf->header().keys)
      std::printf("  %-44s %-16s %s\n", printable(key).c_str(), m.gguf->find(key)->type_name().c_str(),
                  gguf_value_text(*m.gguf->find(key)).c_str());
  }
  std::printf("\nresolved config:\n%s\n", to_json(c).dump(2).c_str());
  if (!ignored.empty()) {
    std::printf("\nignored config keys:");
    for (const auto& k : ignored) std::printf(" %s", k.c_str());
    std::printf("\n");
  }
  size_t width = 4, type_width = 5;  // (type names run from "F32" to "F8_E4M3")
  for (const auto& [name, t] : m.checkpoint.tensors())
    width = std::max(width, name.size()), type_width = std::max(type_width, std::strlen(type_name(*t)));
  std::printf("\n%-*s  %-*s  %-14s  %9s\n", int(width), "name", int(type_width), "dtype", "shape", "MiB");
  for (const TensorView* t : tensors_in_order(m))
    std::printf("%-*s  %-*s  %-14s  %9.3f\n", int(width), printable(t->name).c_str(), int(type_width), type_name(*t),
                shape_str(t->shape).c_str(), t->nbytes / 1048576.0);
  std::printf("\nchecks passed:\n");
  for (const auto& check : m.checks) std::printf("  ok  %s\n", check.c_str());
}

}  // namespace

void add_inspect(CLI::App& app) {
  auto args = std::make_shared<InspectArgs>();
  CLI::App* cmd = app.add_subcommand("inspect", "Validate a model directory or GGUF file and show its config, positions and tensors");
  cmd->add_option("-m,--model", args->model_flag, "Model directory or GGUF file (default: models/default)")->check(not_empty());
  cmd->add_option("model_dir", args->model_dir, "The same, as a positional argument (pert inspect MODEL)")->check(not_empty());
  args->config.add_to(*cmd);
  cmd->add_flag("--json", args->json, "Print one JSON object instead of text");
  cmd->callback([args] { run_inspect(*args); });
}

}  // namespace pert::cli
