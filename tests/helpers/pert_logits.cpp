// Test harness: runs a model over token ids and writes every position's logits as raw F32
// [T][vocab], so the Python reference tests can compare them.
//   pert_logits MODEL IDS_FILE OUT_FILE [--chunk N] [--ctx N] [--config FILE]... [--set k=v]... [--dtype auto|f32|bf16|q8|q4_k...]
//               [--cache-type f32|bf16|f16|q8] [--attention-stats FILE [--sink N]]
// --chunk N feeds the ids N at a time through the KV cache (1 = token-by-token decode);
// without it the whole sequence is one prefill. --window N cuts the ids into windows of N,
// each run from an empty cache at position 0 (the non-overlapping perplexity evaluation).
// --attention-stats FILE writes the statistics of every query's attention weights as JSON
// (pert/attention_report.hpp's attention_json), --sink N the sink's positions (default 1).
#include <algorithm>
#include <fstream>
#include <iostream>
#include <iterator>

#include <CLI/CLI.hpp>

#include "pert/attention_report.hpp"
#include "pert/error.hpp"
#include "pert/model.hpp"

int main(int argc, char** argv) {
  CLI::App app{"Write pert's logits for a token sequence"};
  std::string model_dir, ids_file, out_file;
  int chunk = 0, ctx = 0, window = 0;
  std::vector<std::string> configs, sets;
  std::string dtype = "auto", cache_type = "f32", stats_file;
  int sink = 1;
  app.add_option("model_dir", model_dir)->required();
  app.add_option("ids_file", ids_file, "whitespace-separated token ids")->required();
  app.add_option("out_file", out_file)->required();
  app.add_option("--chunk", chunk);
  app.add_option("--ctx", ctx);
  app.add_option("--window", window);
  app.add_option("--config", configs, "config override files, as pert's --config")->allow_extra_args(false);
  app.add_option("--set", sets)->allow_extra_args(false);
  app.add_option("--dtype", dtype, "weights as pert's --dtype")->check(CLI::IsMember(pert::weight_type_flags()));
  app.add_option("--cache-type", cache_type, "KV cache as pert's --cache-type")
      ->check(CLI::IsMember({"f32", "bf16", "f16", "q8"}));
  app.add_option("--attention-stats", stats_file, "write the attention weights' statistics here (JSON)");
  app.add_option("--sink", sink, "the sink mass's positions");
  CLI11_PARSE(app, argc, argv);
  try {
    std::ifstream in(ids_file);
    std::vector<int> ids{std::istream_iterator<int>(in), std::istream_iterator<int>()};
    if (ids.empty()) throw pert::Error(ids_file + ": no token ids");
    pert::ConfigOverrides overrides;
    overrides.files.assign(configs.begin(), configs.end());
    overrides.sets = sets;
    auto model = pert::Model::load(model_dir, overrides, pert::parse_weight_type(dtype));
    const int T = int(ids.size()), V = model->config().vocab_size;
    if (window <= 0) window = T;
    if (chunk <= 0) chunk = window;
    pert::InferenceState state(*model, ctx > 0 ? ctx : window, chunk, 1, pert::parse_cache_type(cache_type));
    std::vector<float> logits(size_t(T) * V);
    const int L = model->config().max_position_embeddings;
    pert::AttentionStats stats(model->config().n_layers, model->config().n_heads, window, L, sink, model->config().sink_logits);
    if (!stats_file.empty()) state.observe_attention(&stats);
    for (int start = 0; start < T; start += window)  // each window from position 0 again
      for (int pos = 0; pos < std::min(window, T - start); pos += chunk) {
        const int n = std::min({chunk, window - pos, T - start - pos});
        state.forward(&ids[size_t(start + pos)], n, pos, &logits[size_t(start + pos) * V], true);
      }
    std::ofstream out(out_file, std::ios::binary);
    out.write(reinterpret_cast<const char*>(logits.data()), std::streamsize(logits.size() * sizeof(float)));
    if (!out) throw pert::Error(out_file + ": write failed");
    if (!stats_file.empty()) {
      std::ofstream js(stats_file);
      js << pert::attention_json(pert::attention_result(stats, window, L)).dump() << "\n";
      if (!js) throw pert::Error(stats_file + ": write failed");
    }
  } catch (const pert::Error& e) {
    std::cerr << "pert_logits: error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
