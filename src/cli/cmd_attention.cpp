// pert attention: what each head's attention does (pert/attention_report.hpp) for every model x
// config x length, as a grid command (grid_command.hpp): the cells' summary as a table, each (layer,
// head) in the JSON and the CSV.
#include <cmath>
#include <cstdio>
#include <map>
#include <sstream>
#include <vector>

#include "cli/cli_common.hpp"
#include "cli/grid_command.hpp"
#include "pert/attention_report.hpp"
#include "pert/grid_file.hpp"
#include "pert/progress.hpp"

namespace pert::cli {

namespace {

using nlohmann::json;

constexpr const char* kRanges[] = {"all", "in_L", "past_L"};

// Whether some cell reports the mass of learned sink logits (a gpt-oss model): the table and the
// CSV then have its column, which other models' outputs leave out.
bool has_sink_logits(const json& cells) {
  for (const json& c : cells)
    if (c.contains("attention") && c["attention"].contains("all") && c["attention"]["all"].contains("sink_logit_mass"))
      return true;
  return false;
}

// The CSV's statistic columns, sink_logit_mass beside the BOS's sink mass when some cell has it.
std::vector<const char*> statistics(bool sink_logits) {
  if (sink_logits) return {"entropy", "sink_mass", "sink_logit_mass", "mean_distance", "max_weight"};
  return {"entropy", "sink_mass", "mean_distance", "max_weight"};
}

// "mass_d0", "mass_d1", "mass_d2_3", ...: bucket k's column (distances [2^(k−1), 2^k − 1]).
std::string mass_column(int k) {
  if (k < 2) return "mass_d" + std::to_string(k);
  return "mass_d" + std::to_string(1LL << (k - 1)) + "_" + std::to_string((1LL << k) - 1);
}

// The mean over every layer and head of a [layer][head] array (null entries left out).
double mean_of(const json& by_layer) {
  double sum = 0;
  long long n = 0;
  for (const json& layer : by_layer)
    for (const json& v : layer)
      if (v.is_number()) sum += v.get<double>(), ++n;
  return n ? sum / double(n) : std::nan("");
}

std::string number(double v, const char* format) {
  if (!std::isfinite(v)) return "—";
  char s[32];
  std::snprintf(s, sizeof s, format, v);
  return s;
}

class AttentionMeasure : public Measure {
 public:
  const char* name() const override { return "attention"; }

  void add_flags(CLI::App& cmd) {
    cmd.add_option("-f,--file", spec_.text_file, "Text file whose windows are run")->check(input_file(/*streams=*/true));
    cmd.add_option("--chunks", spec_.max_windows, "At most this many windows per cell (0: all that fit)")
        ->check(int_in(0))
        ->capture_default_str();
    cmd.add_flag("--split-docs", spec_.split_docs,
                 "Documents are separated by blank lines; each is encoded on its own with BOS before it");
    cmd.add_option("--sink", sink_, "The sink mass is the weight on the first N positions (1: the BOS)")
        ->check(int_in(0))
        ->capture_default_str();
    cmd.add_option("--heads", heads_,
                   "Below the table, each head whose sink mass (all queries) is at least MASS, e.g. 0.3: the sink heads")
        ->check(CLI::Range(0.0, 1.0))
        ->type_name("MASS");
  }
  const EvalSpec& spec() const override { return spec_; }

  json settings(const json&, const std::string&) override {
    return {{"measure", "attention"},
            {"text", spec_.text_file},
            {"chunks", spec_.max_windows},
            {"split_docs", spec_.split_docs},
            {"sink", sink_}};
  }

  json run(const Model& model, const std::vector<int>& tokens, int length, int bos, CacheType cache,
           const std::string& label, bool quiet) const override {
    AttentionOptions o;
    o.n_ctx = length;
    o.max_windows = spec_.max_windows;
    o.bos = bos;
    o.sink = sink_;
    o.cache_type = cache;
    Progress bar(label, "positions", quiet);
    const AttentionResult r = evaluate_attention(model, tokens, o, [&](const PerplexityStep& step) {
      bar.update(step.positions, step.total_positions, step.windows_text());
    });
    bar.finish();
    return attention_json(r);
  }

  std::string summary(const json& c) const override {
    const json& all = c["attention"]["all"];
    return "entropy " + number(mean_of(all["entropy"]), "%.3f") + ", sink mass " + number(mean_of(all["sink_mass"]), "%.3f") +
           (all.contains("sink_logit_mass") ? ", sink logit mass " + number(mean_of(all["sink_logit_mass"]), "%.3f") : "") +
           ", mean distance " + number(mean_of(all["mean_distance"]), "%.1f") + " (all queries, mean of the heads)";
  }

  // One row per cell and query range: each statistic's mean over every layer and head.
  std::string table(const json& cells) const override {
    const std::map<std::string, std::string> names = model_names(cells);
    const bool sink_logits = has_sink_logits(cells);
    std::ostringstream o;
    o << "| model | config | positions | length | queries | entropy | sink mass | "
      << (sink_logits ? "sink logit mass | " : "") << "mean distance | max weight |\n"
      << "|---|---|---|---:|---|---:|---:|" << (sink_logits ? "---:|" : "") << "---:|---:|\n";
    std::map<std::string, bool> told;
    std::string errors;
    for (const json& c : cells) {
      const std::string row = "| " + names.at(c["model"]) + " | " + c["label"].get<std::string>() + " | " +
                              c.value("position_label", "?") + " | " + std::to_string(c["length"].get<int>()) + " | ";
      if (c.contains("error")) {
        o << row << "— | — | — | " << (sink_logits ? "— | " : "") << "— | — |\n";
        if (!told[c["error"]]) {
          told[c["error"]] = true;
          errors += "\n— " + cell_name(c) + ": " + c["error"].get<std::string>() + "\n";
        }
        continue;
      }
      for (const char* range : kRanges) {
        if (!c["attention"].contains(range)) continue;
        const json& a = c["attention"][range];
        o << row << range << " (" << c["queries"][range].get<long long>() << ") | " << number(mean_of(a["entropy"]), "%.3f")
          << " | " << number(mean_of(a["sink_mass"]), "%.3f");
        if (sink_logits)  // (a cell of a model without them: —)
          o << " | " << number(a.contains("sink_logit_mass") ? mean_of(a["sink_logit_mass"]) : std::nan(""), "%.3f");
        o << " | " << number(mean_of(a["mean_distance"]), "%.1f")
          << " | " << number(mean_of(a["max_weight"]), "%.3f") << " |\n";
      }
    }
    o << "\nMeans over every layer and head (queries: how many, per head); the JSON and the CSV hold each head's.\n"
      << errors;
    if (heads_ >= 0) o << sink_heads(cells, names);
    return o.str();
  }

  // --heads: each (cell, layer, head) whose sink mass over all queries is at least heads_.
  std::string sink_heads(const json& cells, const std::map<std::string, std::string>& names) const {
    std::ostringstream o;
    o << "\nHeads with a sink mass of at least " << number(heads_, "%g") << " (all queries, --heads):\n\n"
      << "| model | config | length | layer | head | sink mass | entropy | mean distance | max weight |\n"
         "|---|---|---:|---:|---:|---:|---:|---:|---:|\n";
    int found = 0;
    for (const json& c : cells) {
      if (c.contains("error")) continue;
      const json& a = c["attention"]["all"];
      for (size_t l = 0; l < a["sink_mass"].size(); ++l)
        for (size_t h = 0; h < a["sink_mass"][l].size(); ++h) {
          const json& sink = a["sink_mass"][l][h];
          if (!sink.is_number() || sink.get<double>() < heads_) continue;
          ++found;
          auto stat = [&](const char* s, const char* format) {
            return a[s][l][h].is_number() ? number(a[s][l][h].get<double>(), format) : std::string("—");
          };
          o << "| " << names.at(c["model"]) << " | " << c["label"].get<std::string>() << " | " << c["length"] << " | " << l
            << " | " << h << " | " << stat("sink_mass", "%.3f") << " | " << stat("entropy", "%.3f") << " | "
            << stat("mean_distance", "%.1f") << " | " << stat("max_weight", "%.3f") << " |\n";
        }
    }
    if (found == 0) o << "| (none) | | | | | | | | |\n";
    return o.str();
  }

  // One row per (cell, query range, layer, head); an error cell is one row with its error.
  std::string csv(const json& sweep) const override {
    int buckets = 0;
    for (const json& c : sweep["cells"])
      if (c.contains("buckets")) buckets = std::max(buckets, int(c["buckets"].size()));
    const std::vector<const char*> stats = statistics(has_sink_logits(sweep["cells"]));
    std::ostringstream o;
    o << "model,config,label,positions,length,trained_length,queries,layer,head";
    for (const char* s : stats) o << ',' << s;
    for (int k = 0; k < buckets; ++k) o << ',' << mass_column(k);
    o << ",query_count,windows,sink,pert_version,error\n";
    auto field = [](const json& v) { return v.is_number() ? v.dump() : std::string(); };
    const std::string sink = field(sweep["settings"].value("sink", json()));  // --sink, the same in every cell
    for (const json& c : sweep["cells"]) {
      const std::string head = csv_field(c["model"]) + ',' + csv_field(c["config"]) + ',' + csv_field(c["label"]) + ',' +
                               csv_field(c.value("position_label", "")) + ',' + std::to_string(c["length"].get<int>()) +
                               ',' + field(c.value("trained_length", json()));
      const std::string tail = sink + ',' + csv_field(c.value("pert_version", ""));
      if (c.contains("error")) {
        o << head << std::string(5 + stats.size() + size_t(buckets), ',') << ',' << tail << ',' << csv_field(c["error"]) << '\n';
        continue;
      }
      for (const char* range : kRanges) {
        if (!c["attention"].contains(range)) continue;
        const json& a = c["attention"][range];
        for (size_t l = 0; l < a["entropy"].size(); ++l)
          for (size_t h = 0; h < a["entropy"][l].size(); ++h) {
            o << head << ',' << range << ',' << l << ',' << h;
            for (const char* s : stats) o << ',' << (a.contains(s) ? field(a[s][l][h]) : std::string());
            const json& mass = a["mass"][l][h];
            for (size_t k = 0; k < size_t(buckets); ++k) o << ',' << (k < mass.size() ? field(mass[k]) : "");
            o << ',' << c["queries"][range] << ',' << c["windows"] << ',' << tail << ",\n";
          }
      }
    }
    return o.str();
  }

 private:
  EvalSpec spec_;  // the text and its windows: chunks mode
  int sink_ = 1;
  double heads_ = -1;  // --heads MASS (< 0: not asked)
};

}  // namespace

void add_attention(CLI::App& app) {
  auto measure = std::make_shared<AttentionMeasure>();
  add_grid_command(app, "attention",
                   "Per layer and head: entropy, sink mass, mean distance, largest weight and mass by distance of the "
                   "attention weights, for every model x config x length (queries in L and past L apart)",
                   measure, [measure](CLI::App& cmd) { measure->add_flags(cmd); });
}

}  // namespace pert::cli
