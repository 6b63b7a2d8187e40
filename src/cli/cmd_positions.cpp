// pert positions: the attention logit of q = k = ones against relative distance, computed by
// the model's own positional scheme (RoPE's long-range decay, ALiBi's lines, xPos's decay).
// tools/plot/plot.py draws it.
#include <cstdio>
#include <sstream>

#include "cli/evaluate.hpp"
#include "pert/error.hpp"
#include "pert/output_file.hpp"
#include "pert/positions.hpp"

namespace pert::cli {

namespace {

struct PositionsArgs {
  std::string model_dir, csv_file;
  JsonFlags json;
  int distance = 0, query_pos = -1, layer = 0;
  ConfigFlags config;
};

void run(const PositionsArgs& a) {
  if (a.distance > 0 && a.query_pos >= 0 && a.distance > a.query_pos)  // before the model loads
    throw CLI::ValidationError("--distance", "must be at most --query-pos (" + std::to_string(a.query_pos) +
                                                 "): keys stop at position 0, got " + std::to_string(a.distance));
  check_distinct_paths({{"--json-out", a.json.file}, {"--csv", a.csv_file}}, run_inputs({a.model_dir}, a.config.files));
  const std::filesystem::path dir = resolve_model_dir(a.model_dir);
  const auto model = Model::load(dir, a.config.overrides(), a.config.weight_type());
  const ModelConfig& c = model->config();
  if (a.layer >= c.n_layers)
    throw CLI::ValidationError("--layer", "must be below the model's " + std::to_string(c.n_layers) + " layers, got " + std::to_string(a.layer));
  const int distance = a.distance > 0 ? a.distance : default_profile_distance(c);
  const int query_pos = a.query_pos >= 0 ? a.query_pos : distance;
  const auto profile = distance_profile(c, [&](const std::string& name) { return model->tensor(name); }, query_pos,
                                        distance, a.layer);
  std::string position = describe_position(c);
  if (has_layer_schemes(c))  // the layer drawn, in a layout of several schemes
    position += "\nlayer " + std::to_string(a.layer) + ": " + describe(c.layers[size_t(a.layer)].position, c.head_dim);
  bool json_on_stdout = false;
  if (a.json.wanted())
    json_on_stdout = a.json.write({{"model_dir", dir.string()},
                                   {"position", position},
                                   {"scheme", c.layers[size_t(a.layer)].position.type()},
                                   {"trained_length", c.max_position_embeddings},
                                   {"query_pos", query_pos},
                                   {"layer", a.layer},
                                   {"per_head", c.n_heads == int(profile.size())},
                                   {"scores", profile}});
  if (!a.csv_file.empty()) {
    std::ostringstream out;
    out << "distance";
    for (size_t h = 0; h < profile.size(); ++h) out << ",head" << h;
    out << "\n";
    for (int dlt = 0; dlt <= distance; ++dlt) {
      out << dlt;
      for (const auto& row : profile) out << ',' << row[size_t(dlt)];
      out << "\n";
    }
    write_file(a.csv_file, out.str());
  }
  if (json_on_stdout) return;
  const std::string note = c.layers[size_t(a.layer)].position.scheme->profile_note();
  std::printf("%s: %s\nattention logit (q·k/√d plus the scheme's bias and terms) for q = k = ones, query at position %d (trained length %d)%s%s\n\n", dir.string().c_str(),
              position.c_str(), query_pos, c.max_position_embeddings,
              profile.size() == 1 && c.n_heads > 1 ? "; p(m)·p(n)/√hidden for positions added to the embeddings" : "",
              note.empty() ? "" : ("; " + note).c_str());
  const size_t shown = std::min<size_t>(profile.size(), 8);
  std::printf("| distance |");
  for (size_t h = 0; h < shown; ++h)
    if (profile.size() == 1)
      std::printf(" score |");
    else
      std::printf(" head %zu |", h);
  std::printf("\n|---:|");
  for (size_t h = 0; h < shown; ++h) std::printf("---:|");
  std::printf("\n");
  for (int dlt = 0;; dlt = dlt == 0 ? 1 : 2 * dlt) {  // 0, 1, 2, 4, ... and the last
    const int at = std::min(dlt, distance);
    std::printf("| %d |", at);
    for (size_t h = 0; h < shown; ++h) std::printf(" %.4f |", profile[h][size_t(at)]);
    std::printf("\n");
    if (at == distance) break;
  }
}

}  // namespace

void add_positions(CLI::App& app) {
  auto a = std::make_shared<PositionsArgs>();
  CLI::App* cmd = app.add_subcommand("positions", "The positional scheme's attention logit against distance (q = k = ones)");
  cmd->add_option("-m,--model", a->model_dir, "Model directory or GGUF file (default: models/default)")->check(not_empty());
  // Bounded (kMaxProfileDistance): the profile holds every key's position vector.
  cmd->add_option("--distance", a->distance, "Largest distance (default: the trained length - 1, at most 131072)")
      ->check(int_in(1, kMaxProfileDistance));
  cmd->add_option("--query-pos", a->query_pos, "Position of the query (default: the largest distance)")
      ->check(int_in(0, kMaxProfileDistance));
  cmd->add_option("--layer", a->layer, "Which layer: its scheme, span and temperature where layers differ, and its weights for schemes with weights per layer (KERPLE) (default 0)")
      ->check(int_in(0, kMaxProfileDistance));
  a->config.add_to(*cmd);
  a->json.add_to(*cmd, "every score");
  cmd->add_option("--csv", a->csv_file, "Write every score as CSV to this file")->check(writable_file());
  cmd->callback([a] { run(*a); });
}

}  // namespace pert::cli
