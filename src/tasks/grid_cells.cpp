// A grid's cells as they run (grid.hpp: run_cells), the one loop under `pert sweep`, `pert
// attention` and pert.sweep, and the perplexity measure of `pert sweep` and pert.sweep.
#include <omp.h>

#include <cstdio>
#include <map>

#include "pert/error.hpp"
#include "pert/grid.hpp"
#include "pert/grid_file.hpp"
#include "pert/json_util.hpp"

namespace pert {

using nlohmann::json;

void run_cells(const std::vector<GridCell>& cells, const GridRequest& r, const Measure& measure,
               const std::function<bool(const GridCell&)>& skip,
               const std::function<void(json& cell, int ran, int todo, const std::string& name)>& made) {
  const auto words = r.words ? r.words : [](const std::string& message) { return message; };
  const auto load = r.load ? r.load : [](const std::string& dir, const ConfigOverrides& o, WeightType t) {
    return load_model(dir, o, t);
  };
  const EvalSpec& spec = measure.spec();
  int todo = 0;
  for (const GridCell& cell : cells) todo += !(skip && skip(cell));
  const WeightType weights = parse_weight_type(r.dtype);
  const CacheType cache = parse_cache_type(r.cache_type);
  std::string loaded_key, load_error;
  LoadedModel m;
  std::map<std::pair<std::string, int>, std::vector<int>> tokens_of;  // (model dir, BOS) -> the text's tokens
  int ran = 0;
  for (const GridCell& cell : cells) {
    if (skip && skip(cell)) continue;
    json c = {{"index", cell.index},        {"model", cell.model},           {"config", cell.config},
              {"label", cell.label},        {"config_hash", cell.config_hash}, {"model_hash", cell.model_hash},
              {"length", cell.length},      {"pert_version", PERT_VERSION}};
    const std::string name = model_name(cell.model) + " " + cell.label + " @" + std::to_string(cell.length);
    // A model or config that does not load stops the grid; one that would replace the trained
    // scheme is a row of error cells.
    if (loaded_key != cell.model + "\n" + cell.config) {
      loaded_key.clear();
      load_error.clear();
      ConfigOverrides o = r.overrides;
      if (cell.config != kPlain) o.files.insert(o.files.begin(), cell.config);
      try {
        m = load(cell.model, o, weights);
      } catch (const SchemeChangeError& e) {
        load_error = words(e.what());
      }
      loaded_key = cell.model + "\n" + cell.config;
    }
    if (!load_error.empty()) {
      c["error"] = load_error;
      c["position_label"] = "—";
    } else {
      const ModelConfig& mc = m.model->config();
      c["trained_length"] = mc.max_position_embeddings;
      c["position"] = describe_position(mc);
      c["position_label"] = position_label(mc);
      json resolved = to_json(mc);  // the whole positional block that ran, and the trained one
      c["position_config"] = {{"position", resolved["position"]}, {"extend", resolved.value("extend", json())}};
      if (mc.trained) c["trained_position"] = position_label(*mc.trained);
      const int bos = spec.bos(m.tokenizer, mc.bos_token_id);
      auto& tokens = tokens_of[{cell.model, bos}];  // a config may change the BOS
      if (tokens.empty() && r.tokens) {
        tokens = r.tokens(m.tokenizer, bos);
      } else if (tokens.empty()) {
        const size_t dropped = m.tokenizer.dropped_characters();
        tokens = spec.tokenize(m.tokenizer, bos);
        const std::string note = dropped_note(m.tokenizer.dropped_characters() - dropped,
                                              spec.text_file + " (" + cell.model + ")");
        if (!note.empty()) std::fprintf(stderr, "pert: warning: %s\n", printable(note).c_str());
      }
      c["text_tokens"] = tokens.size();
      c["threads"] = omp_get_max_threads();
      try {
        c.update(measure.run(*m.model, tokens, cell.length, bos, cache,
                             "[" + std::to_string(ran + 1) + "/" + std::to_string(todo) + "] " + name, r.quiet));
      } catch (const Error& e) {  // a cell that cannot run (past a learned table, text too short) is a result
        c["error"] = words(e.what());
      }
    }
    made(c, ++ran, todo, name);
  }
}

json PerplexityMeasure::settings(const json& file, const std::string& out) {
  // Resumed with the buckets left at their default, a sweep keeps its file's (files from before
  // log buckets: 16).
  if (buckets_given_ && !buckets_given_() && file.is_object() && file.contains("buckets"))
    spec_.buckets = buckets_from_json(file["buckets"], out + ": settings.buckets");
  return spec_.settings();
}

json PerplexityMeasure::run(const Model& model, const std::vector<int>& tokens, int length, int bos, CacheType cache,
                            const std::string& label, bool quiet) const {
  PerplexityOptions o = spec_.options(length, bos);
  o.cache_type = cache;
  return perplexity_json(run_perplexity(model, tokens, o, label, quiet), o.mode);
}

std::string PerplexityMeasure::summary(const json& c) const { return ppl_text(c["ppl"], c["ppl_stderr"]); }
std::string PerplexityMeasure::table(const json& cells) const { return markdown_table(cells); }
std::string PerplexityMeasure::csv(const json& sweep) const { return csv_text(sweep); }

}  // namespace pert
