// A grid's cells as they run (grid.hpp: run_cells), the one loop under `pert sweep`, `pert
// attention` and pert.sweep, and the perplexity measure of `pert sweep` and pert.sweep.
#include <omp.h>

#include <cstdio>
#include <map>
#include <set>

#include "pert/error.hpp"
#include "pert/grid.hpp"
#include "pert/grid_file.hpp"
#include "pert/json_util.hpp"
#include "pert/model_dir.hpp"

namespace pert {

using nlohmann::json;

namespace {

template <class E>
[[noreturn]] void rethrow_as(const E&, const std::string& message) {
  throw E(message);
}

ConfigOverrides cell_overrides(const GridCell& cell, const GridRequest& r) {
  ConfigOverrides o = r.overrides;
  if (cell.config != kPlain) o.files.insert(o.files.begin(), cell.config);
  return o;
}

// Every (model, config) the cells to run need, opened as a load opens it (the config over the
// model, checked against its tensors and the trained scheme; no weights read) and each model's
// tokenizer, before the first cell runs: a layout that does not fit a model stops the grid
// before any cell, not after the cells before it. Returns the pairs refused as a change of the
// trained scheme (model + "\n" + config -> the message): their cells are error cells.
std::map<std::string, std::string> check_cells(const std::vector<GridCell>& cells, const GridRequest& r,
                                               const std::function<bool(const GridCell&)>& skip,
                                               const std::function<std::string(const std::string&)>& words) {
  std::map<std::string, std::string> refused;
  std::set<std::string> pairs, models;
  for (const GridCell& cell : cells) {
    if ((skip && skip(cell)) || !pairs.insert(cell.model + "\n" + cell.config).second) continue;
    // (the message names the model's file; a config's is named before it)
    const std::string where = cell.config == kPlain ? "" : r.command + ": `config` " + cell.config + " on " + cell.model + ": ";
    try {
      open_model_dir(cell.model, cell_overrides(cell, r));
      if (models.insert(cell.model).second) load_tokenizer(cell.model);
    } catch (const SchemeChangeError& e) {
      refused[cell.model + "\n" + cell.config] = words(e.what());
    } catch (const IoError& e) {
      rethrow_as(e, words(where + e.what()));
    } catch (const FormatError& e) {
      rethrow_as(e, words(where + e.what()));
    } catch (const ConfigError& e) {
      rethrow_as(e, words(where + e.what()));
    }
  }
  return refused;
}

}  // namespace

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
  const std::map<std::string, std::string> refused = check_cells(cells, r, skip, words);
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
    if (loaded_key != cell.model + "\n" + cell.config) {
      loaded_key = cell.model + "\n" + cell.config;
      const auto it = refused.find(loaded_key);
      load_error = it == refused.end() ? "" : it->second;
      if (load_error.empty()) m = load(cell.model, cell_overrides(cell, r), weights);
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
  o.key.evaluator = key_evaluator_.get(spec_, tokens, bos);
  o.key.shared = key_evaluator_.choices();
  return perplexity_json(run_perplexity(model, tokens, o, label, quiet), o.mode);
}

std::string PerplexityMeasure::summary(const json& c) const {
  std::string line = ppl_text(c["ppl"], c["ppl_stderr"]);
  if (c.contains("key_tokens"))
    line += "; " + std::to_string(c["key_tokens"].get<long long>()) + " key tokens" +
            (c["key_ppl"].is_number() ? ", key-token " + ppl_text(c["key_ppl"], c["key_ppl_stderr"]) : "");
  return line;
}

std::string PerplexityMeasure::table(const json& cells) const {
  bool keys = false;  // key-token perplexity (LongPPL) beside the plain: its own table after the first
  for (const json& c : cells) keys |= c.contains("key_tokens");
  if (!keys) return markdown_table(cells);
  return markdown_table(cells) + "\nKey-token perplexity (LongPPL, chosen by " + spec_.key_evaluator() +
         "; in brackets the key tokens):\n\n" +
         markdown_table(cells, "key_ppl");
}
std::string PerplexityMeasure::csv(const json& sweep) const { return csv_text(sweep); }

}  // namespace pert
