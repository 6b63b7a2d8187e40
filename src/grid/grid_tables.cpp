// A sweep's cells as people read them: the Markdown table (rows model x config, columns lengths)
// and the CSV of every cell (pert/grid_file.hpp).
#include "pert/grid_file.hpp"

#include <algorithm>
#include <cstdio>
#include <map>
#include <sstream>
#include <vector>

namespace pert {

using nlohmann::json;

namespace {

std::string csv_number(const json& v) { return v.is_null() ? "" : v.dump(); }

}  // namespace

std::string markdown_table(const json& cells, const std::string& value) {
  struct Row {
    std::string model, label, positions;
    int trained = 0;
    std::map<int, const json*> at;
  };
  std::vector<Row> rows;
  std::map<std::string, size_t> row_of;
  std::vector<int> lengths;
  const std::map<std::string, std::string> names = model_names(cells);
  for (const json& c : cells) {
    const std::string key = real_path(c["model"]) + "\n" +
                            c["config_hash"].get<std::string>();
    if (!row_of.count(key)) {
      row_of[key] = rows.size();
      rows.push_back({names.at(c["model"]), c["label"], c.value("position_label", "?"), 0, {}});
    }
    Row& row = rows[row_of[key]];
    row.at[c["length"]] = &c;
    if (c.contains("trained_length")) row.trained = c["trained_length"];
    if (std::find(lengths.begin(), lengths.end(), c["length"].get<int>()) == lengths.end()) lengths.push_back(c["length"]);
  }
  std::sort(lengths.begin(), lengths.end());
  int shared_L = -1;  // the trained length every row that knows one shares, else 0
  for (const Row& r : rows)
    if (r.trained > 0) shared_L = shared_L < 0 || shared_L == r.trained ? r.trained : 0;
  shared_L = std::max(shared_L, 0);
  std::ostringstream o;
  o << "| model | config | positions |";
  for (int n : lengths) o << ' ' << n << (n == shared_L ? " (L)" : "") << " |";
  o << "\n|---|---|---|";
  for (size_t i = 0; i < lengths.size(); ++i) o << "---:|";
  o << '\n';
  bool any_trained = false;
  for (const Row& row : rows) {
    o << "| " << row.model << " | " << row.label << " | " << row.positions << " |";
    any_trained |= row.trained > 0;
    for (int n : lengths) {
      auto it = row.at.find(n);
      const json* c = it == row.at.end() ? nullptr : it->second;
      char v[64] = "";
      if (c && c->contains(value) && (*c)[value].is_number())
        std::snprintf(v, sizeof v, shared_L == 0 && row.trained == n ? "**%.2f**" : "%.2f", (*c)[value].get<double>());
      else if (c)
        std::snprintf(v, sizeof v, "—");
      o << ' ' << v;
      if (c && value != "ppl" && c->contains("key_tokens")) o << " (" << (*c)["key_tokens"].get<long long>() << ")";
      o << " |";
    }
    o << '\n';
  }
  if (shared_L == 0 && any_trained) o << "\nBold: the model's trained length.\n";
  std::map<std::string, bool> told;  // each distinct reason once
  for (const json& c : cells)
    if (c.contains("error") && !told[c["error"]]) {
      told[c["error"]] = true;
      o << "\n— " << names.at(c["model"]) << " " << c["label"].get<std::string>() << " @" << c["length"].get<int>()
        << ": " << c["error"].get<std::string>() << "\n";
    }
  return o.str();
}

// The evaluator's configs (settings.key_config) in one CSV field, space-separated as on the command line.
std::string key_configs(const json& settings) {
  std::string joined;
  for (const json& c : settings.value("key_config", json::array())) joined += (joined.empty() ? "" : " ") + c.get<std::string>();
  return joined;
}

std::string csv_text(const json& sweep) {
  const json& s = sweep["settings"];
  const std::string shared = csv_field(s.value("mode", "chunks")) + ',' + (s.value("split_docs", false) ? "true" : "false") +
                             ',' + csv_field(s.value("dtype", "f32")) + ',' + csv_field(s.value("cache_type", "f32"));
  std::ostringstream o;
  // Key tokens (LongPPL), where the sweep chose them: their settings and results after the rest.
  const bool keys = s.value("key_tokens", false);
  const char* key_fields[] = {"key_tokens", "key_candidates", "key_ppl", "key_ppl_stderr", "key_nll"};
  std::string key_shared;
  if (keys)
    key_shared = ',' + csv_number(s.value("key_short", json())) + ',' + csv_number(s.value("key_step", json())) + ',' +
                 csv_number(s.value("key_alpha", json())) + ',' + csv_number(s.value("key_beta", json())) + ',' +
                 csv_field(s.value("key_model", "")) + ',' + csv_field(key_configs(s));
  o << "model,config,label,positions,length,trained_length,mode,split_docs,dtype,cache_type,ppl,ppl_stderr,nll,tokens,windows,"
       "seconds,tokens_per_second,pert_version,error"
    << (keys ? ",key_short,key_step,key_alpha,key_beta,key_model,key_config,key_tokens,key_candidates,key_ppl,key_ppl_stderr,"
               "key_nll"
             : "")
    << '\n';
  for (const json& c : sweep["cells"]) {
    o << csv_field(c["model"]) << ',' << csv_field(c["config"]) << ',' << csv_field(c["label"]) << ','
      << csv_field(c.value("position_label", "")) << ',' << c["length"] << ',' << csv_number(c.value("trained_length", json()))
      << ',' << shared;
    for (const char* key : {"ppl", "ppl_stderr", "nll", "tokens", "windows", "seconds", "tokens_per_second"})
      o << ',' << csv_number(c.value(key, json()));
    o << ',' << csv_field(c.value("pert_version", "")) << ',' << csv_field(c.value("error", ""));
    if (keys) {
      o << key_shared;
      for (const char* key : key_fields) o << ',' << csv_number(c.value(key, json()));
    }
    o << '\n';
  }
  return o.str();
}

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n\r") == std::string::npos) return s;
  std::string q = "\"";
  for (char ch : s) q += ch == '"' ? std::string("\"\"") : std::string(1, ch);
  return q + "\"";
}

}  // namespace pert
