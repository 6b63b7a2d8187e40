// pert bench: prompt processing (ppN: N tokens in one forward, logits of the last) and
// generation (tgN: N single-token steps) in tokens/s, mean ± sd over repetitions after a
// warm-up, as llama-bench reports them; `-d` runs each test after that many cached tokens
// (untimed), which is where long-context decoding spends its time: attention over the cache.
// `--roof` measures how fast the machine reads memory (a probe per thread count) and gives each
// tg row the bytes a token reads (the matrices as kept, the KV cache at its type and depth),
// that times t/s, and the share of the probe: how close decoding is to the memory roof. It also
// measures the compute roof of the paths that multiply (the matrices' family, F32 for attention:
// compute_roof.hpp) and gives each pp row its multiply-adds a token, that times t/s, and its
// share of the roof: the time the peaks would take (matrices' MACs at theirs, attention's at
// F32's) over the time taken.
#include <cblas.h>
#include <omp.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <iostream>
#include <map>
#include <random>
#include <tuple>

#include "cli/evaluate.hpp"
#include "pert/bandwidth.hpp"
#include "pert/compute_roof.hpp"
#include "pert/error.hpp"
#include "pert/gguf_model.hpp"
#include "pert/grid_file.hpp"
#include "pert/kernels.hpp"
#include "pert/model_dir.hpp"

namespace pert::cli {

namespace {

struct BenchArgs {
  std::string model_dir, output = "md";
  std::vector<int> prompt = {512}, generate = {128}, depth = {0}, threads;
  int reps = 5;
  bool json = false, quiet = false, roof = false;
  ConfigFlags config;
};

struct Test {
  bool prompt;
  int n, depth;
  std::string name() const { return (prompt ? "pp" : "tg") + std::to_string(n) + (depth ? " @ d" + std::to_string(depth) : ""); }
};

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// One timed run of a test: n tokens, prompt (one forward) or generation (n forwards of one),
// after `depth` cached tokens, filled 512 at a time with `filled(done)` after each (a deep fill
// under a method that decodes it position by position takes minutes).
// Seconds of one run of a test, after the cache is filled to its depth; *kv_bytes: what the
// K and V caches held (local layers keep only their span: Attention's ring).
double run_once(const Model& model, CacheType cache, bool prompt, int n, int depth, std::mt19937& rng,
                const std::function<void(int)>& filled, size_t* kv_bytes = nullptr) {
  const int vocab = model.config().vocab_size;
  std::uniform_int_distribution<int> token(0, vocab - 1);
  std::vector<int> ids(static_cast<size_t>(depth + n));
  for (int& id : ids) id = token(rng);
  std::vector<float> logits(static_cast<size_t>(vocab));
  InferenceState state(model, depth + n, prompt ? n : depth > 0 ? 512 : 1, 1, cache);  // allocation is not timed
  if (kv_bytes) *kv_bytes = state.kv_cache_bytes();
  for (int done = 0, step; done < depth; done += step) {
    step = std::min(512, depth - done);
    state.forward(&ids[size_t(done)], step, done, logits.data(), false);
    filled(done + step);
  }
  const auto t0 = std::chrono::steady_clock::now();
  if (prompt)
    state.forward(&ids[size_t(depth)], n, depth, logits.data(), false);
  else
    for (int i = depth; i < depth + n; ++i) state.forward(&ids[size_t(i)], 1, i, logits.data(), false);
  return seconds_since(t0);
}

// Every tensor the loader expects (what `pert inspect` counts from the file).
long long parameter_count(const ModelConfig& c) {
  long long n = 0;
  for (const ExpectedTensor& t : expected_tensors(c)) {
    long long numel = 1;
    for (int64_t dim : t.shape) numel *= dim;
    n += numel;
  }
  return n;
}

// Σ over layers of the keys a token of a test sees, averaged over its tokens (a sliding window's
// layer, its window; a chunked layer, its chunk so far).
double mean_keys_seen(const ModelConfig& c, const Test& t) {
  double keys = 0;
  for (const LayerAttention& l : c.layers)
    for (int p = t.depth; p < t.depth + t.n; ++p) {
      int seen = p + 1;
      if (l.window > 0) seen = std::min(seen, l.window);
      if (l.chunk > 0) seen = std::min(seen, p % l.chunk + 1);
      keys += double(seen) / t.n;
    }
  return keys;
}

// Bytes one generated token reads on average over a tg test: every matrix once, and the K and V
// of every cached position each layer attends to.
double decode_bytes(const Model& model, CacheType cache, const Test& t) {
  const ModelConfig& c = model.config();
  return double(model.matrix_bytes()) + cached_values_per_position(c) * cache_bytes_per_value(cache, c.head_dim) * mean_keys_seen(c, t);
}

// A pp row's multiply-adds a token: the matrices' (the output's once a prompt: logits of its last
// token only) and attention's, q·k and p·v over the keys it sees in every head.
struct PromptMacs {
  double matrices, attention;
};
PromptMacs prompt_macs(const Model& model, const Test& t) {
  const ModelConfig& c = model.config();
  const double lm_head = double(c.vocab_size) * c.hidden_size;
  return {model.matrix_macs() - lm_head * (1.0 - 1.0 / t.n), mean_keys_seen(c, t) * c.n_heads * 2.0 * c.head_dim};
}

// The compute roof at a thread count: the peak of the instruction behind each family that a
// prompt's products run on (0: a path with no probe).
struct ComputeRoof {
  std::string family, path, instruction;
  double macs_per_second = 0;
  nlohmann::json to_json() const {
    return {{"family", family}, {"path", path}, {"instruction", instruction}, {"macs_per_second", macs_per_second}};
  }
  std::string text() const {
    char peak[64] = "no probe";
    if (macs_per_second > 0) std::snprintf(peak, sizeof peak, "%.1f GMAC/s", macs_per_second / 1e9);
    return family + " " + path + (instruction.empty() ? "" : " (" + instruction + ")") + " " + peak;
  }
};
ComputeRoof compute_roof(const std::string& family, int threads) {
  std::string path;
  for (const KernelFamily& f : kernel_families())
    if (f.name == family) path = f.selected;
  const ProductInstruction i = product_instruction(family, path);
  return {family, path, i.name, i.name.empty() ? 0.0 : product_peak(i.name, threads)};
}

// Every test fits the model before anything is printed: a learned position table ends where it ends.
void check_tests_fit(const Model& model, const std::vector<Test>& tests) {
  const int max = InferenceState(model, 1, 1).max_positions();
  for (const Test& t : tests)
    if (max > 0 && t.depth + t.n > max)
      throw Error((t.prompt ? "-p " : "-n ") + std::to_string(t.n) + (t.depth ? " at -d " + std::to_string(t.depth) : "") +
                  ": " + std::to_string(t.depth + t.n) + " positions, past the " + model.config().position.type() +
                  " position table (" + std::to_string(max) + " positions)");
}

void run(const BenchArgs& a) {
  const std::string format = a.json ? "json" : a.output;
  const std::filesystem::path dir = resolve_model_dir(a.model_dir);
  const auto model = Model::load(dir, a.config.overrides(), a.config.weight_type());
  const ModelConfig& c = model->config();
  const long long params = parameter_count(c);
  std::vector<Test> tests;  // llama-bench's order: each depth, its prompt tests, then its generation tests
  for (int depth : a.depth) {
    for (int n : a.prompt)
      if (n > 0) tests.push_back({true, n, depth});  // 0: no such test, as in llama-bench
    for (int n : a.generate)
      if (n > 0) tests.push_back({false, n, depth});
  }
  check_tests_fit(*model, tests);
  std::vector<int> thread_counts = a.threads;
  if (thread_counts.empty()) {  // set_threads' default: the cores not busy now, or OMP_NUM_THREADS
    set_threads(0);
    thread_counts.push_back(omp_get_max_threads());
  }
  const std::string model_name = dir.filename().string(), precision =
      model->gguf() && model->weight_type() == WeightType::Auto ? gguf_file_type(*model->gguf()) : weight_type_name(model->weight_type());
  const CacheType cache = a.config.kv_type();
  const char* kv = cache_type_name(cache);

  std::map<int, double> roof;  // threads -> bytes/s read
  std::map<int, std::pair<ComputeRoof, ComputeRoof>> compute;  // threads -> the matrices' and attention's
  const std::string matrices = model->matrix_family();
  if (a.roof) {
    Progress bar("bench: read-bandwidth and compute probes", "thread counts", a.quiet);
    for (int threads : thread_counts) {
      roof[threads] = read_bandwidth(threads);
      compute[threads] = {compute_roof(matrices, threads), compute_roof("f32", threads)};
      bar.update(int(roof.size()), int(thread_counts.size()));
    }
    bar.finish();
  }

  std::mt19937 rng(1234);
  nlohmann::json results = nlohmann::json::array();
  if (format == "md") {
    for (const auto& [threads, bytes_per_s] : roof) {
      const char* s = threads == 1 ? "" : "s";
      std::printf("memory roof at %d thread%s: %.1f GB/s read (best of 5 passes over 1 GiB)\n", threads, s, bytes_per_s / 1e9);
      std::printf("compute roof at %d thread%s: matrices %s; attention %s\n", threads, s, compute[threads].first.text().c_str(),
                  compute[threads].second.text().c_str());
    }
    if (a.roof) std::printf("\n");
    std::printf("| model | params | precision | kv cache | threads | test | t/s |%s\n|---|---:|---|---|---:|---|---:|%s\n",
                a.roof ? " MB/token | GB/s | % of roof | GMAC/s | % of compute |" : "", a.roof ? "---:|---:|---:|---:|---:|" : "");
  } else if (format == "csv") {
    std::printf("model,params,precision,cache_type,threads,test,n_prompt,n_gen,n_depth,avg_ts,stddev_ts%s\n",
                a.roof ? ",bytes_per_token,read_bytes_per_second,roof_bytes_per_second,percent_of_roof,macs_per_token,"
                         "macs_per_second,percent_of_compute_roof" : "");
  }
  std::fflush(stdout);
  if (stdout_failed()) finish_stdout();  // nowhere to write the rows: stop before the first test
  for (int threads : thread_counts) {
    use_threads(threads);
    for (const Test& t : tests) {
      const std::string test = t.name();
      const std::string bar_label = "bench " + test + (thread_counts.size() > 1 ? " -t " + std::to_string(threads) : "");
      {  // warm-up: caches, page faults, thread start; its depth fill shows how long a run takes
        Progress fill(bar_label + ": warm-up, cache filled", "positions", a.quiet || t.depth == 0);
        run_once(*model, cache, t.prompt, t.n, t.depth, rng, [&](int done) { fill.update(done, t.depth); });
        fill.finish();
      }
      Progress bar(bar_label, "runs", a.quiet);
      std::vector<double> tps;
      size_t kv_bytes = 0;
      for (int r = 0; r < a.reps; ++r) {
        tps.push_back(t.n / run_once(*model, cache, t.prompt, t.n, t.depth, rng, [](int) {}, &kv_bytes));
        bar.update(r + 1, a.reps);
      }
      bar.finish();
      double mean = 0, var = 0;
      for (double x : tps) mean += x / double(tps.size());
      for (double x : tps) var += (x - mean) * (x - mean) / double(std::max<size_t>(1, tps.size() - 1));
      const double sd = std::sqrt(var);
      nlohmann::json result = {{"test", test}, {"n_tokens", t.n}, {"depth", t.depth}, {"threads", threads},
                               {"tokens_per_second", mean}, {"sd", sd}, {"samples", tps}, {"kv_cache_bytes", kv_bytes}};
      // The roof's columns: generation rows only (a prompt reads each matrix once for many tokens).
      const bool roofed = a.roof && !t.prompt;
      const double bytes = roofed ? decode_bytes(*model, cache, t) : 0, read = bytes * mean,
                   percent = roofed ? 100.0 * read / roof[threads] : 0;
      if (roofed)
        result.update({{"bytes_per_token", bytes}, {"read_bytes_per_second", read},
                       {"roof_bytes_per_second", roof[threads]}, {"percent_of_roof", percent}});
      // The compute roof's: prompt rows (a generated token's products wait on memory, not on the ports).
      const bool computed = a.roof && t.prompt;
      const PromptMacs macs = computed ? prompt_macs(*model, t) : PromptMacs{0, 0};
      const auto& [on_matrices, on_attention] = compute[threads];
      const bool peaks = on_matrices.macs_per_second > 0 && on_attention.macs_per_second > 0;
      const double per_second = (macs.matrices + macs.attention) * mean,
                   share = computed && peaks ? 100.0 * mean * (macs.matrices / on_matrices.macs_per_second +
                                                               macs.attention / on_attention.macs_per_second) : 0;
      if (computed) {
        result.update({{"macs_per_token", macs.matrices + macs.attention}, {"matrix_macs_per_token", macs.matrices},
                       {"attention_macs_per_token", macs.attention}, {"macs_per_second", per_second}});
        if (peaks) result["percent_of_compute_roof"] = share;
      }
      results.push_back(result);
      if (format == "md") {
        std::printf("| %s | %.1fM | %s | %s | %d | %s | %.2f ± %.2f |", model_name.c_str(), params / 1e6,
                    precision.c_str(), kv, threads, test.c_str(), mean, sd);
        if (roofed) std::printf(" %.0f | %.1f | %.0f%% | | |", bytes / 1e6, read / 1e9, percent);
        else if (computed && peaks) std::printf(" | | | %.1f | %.0f%% |", per_second / 1e9, share);
        else if (computed) std::printf(" | | | %.1f | |", per_second / 1e9);
        std::printf("\n");
      } else if (format == "csv") {
        std::printf("%s,%lld,%s,%s,%d,%s,%d,%d,%d,%.6f,%.6f", csv_field(model_name).c_str(), params, precision.c_str(),
                    kv, threads, test.c_str(), t.prompt ? t.n : 0, t.prompt ? 0 : t.n, t.depth, mean, sd);
        if (roofed) std::printf(",%.0f,%.6g,%.6g,%.4f,,,", bytes, read, roof[threads], percent);
        else if (computed && peaks) std::printf(",,,,,%.0f,%.6g,%.4f", macs.matrices + macs.attention, per_second, share);
        else if (computed) std::printf(",,,,,%.0f,%.6g,", macs.matrices + macs.attention, per_second);
        std::printf("\n");
      }
      std::fflush(stdout);
      if (stdout_failed()) finish_stdout();
    }
  }
  if (format == "md") std::printf("\ncpu: %s\n", cpu_line().c_str());  // as llama-bench ends on its build
  if (format == "json") {
    nlohmann::json out = {{"model_dir", dir.string()}, {"params", params}, {"precision", precision}, {"cache_type", kv},
                          {"threads", thread_counts}, {"repetitions", a.reps}, {"blas", openblas_get_config()},
                          {"blas_core", openblas_get_corename()}, {"results", results}};
    out.update(cpu_json());
    if (a.roof) {
      out["matrix_bytes"] = model->matrix_bytes();
      out["matrix_macs"] = model->matrix_macs();
      for (const auto& [threads, bytes_per_s] : roof)
        out["roof"].push_back({{"threads", threads}, {"read_bytes_per_second", bytes_per_s},
                               {"compute", {{"matrices", compute[threads].first.to_json()},
                                            {"attention", compute[threads].second.to_json()}}}});
    }
    write_json("-", out);
  }
}

}  // namespace

void add_bench(CLI::App& app) {
  auto a = std::make_shared<BenchArgs>();
  CLI::App* cmd = app.add_subcommand("bench", "Prompt-processing and generation speed, as llama-bench");
  cmd->add_option("-m,--model", a->model_dir, "Model directory or GGUF file (default: models/default)")->check(not_empty());
  cmd->add_option("-p,--n-prompt", a->prompt, "Prompt lengths to test, e.g. 128,512 (0: none)")
      ->delimiter(',')
      ->check(int_in(0, 1 << 20))
      ->capture_default_str();
  cmd->add_option("-n,--n-gen", a->generate, "Generation lengths to test (0: none)")
      ->delimiter(',')
      ->check(int_in(0, 1 << 20))
      ->capture_default_str();
  cmd->add_option("-d,--n-depth", a->depth, "Cached tokens before each test, e.g. 0,4096 (untimed prefill)")
      ->delimiter(',')
      ->check(int_in(0, 1 << 20))
      ->capture_default_str();
  cmd->add_option("-r,--repetitions", a->reps, "Timed runs per test (after one warm-up)")
      ->check(int_in(1, 1000))
      ->capture_default_str();
  cmd->add_option("-t,--threads", a->threads,
                  "Thread counts to test, e.g. 1,2: every test at each (default: as -t elsewhere, the " +
                      std::to_string(omp_get_num_procs()) + " cores less those busy at the start)")
      ->delimiter(',')
      ->check(int_in(1, kMaxThreads));
  a->config.add_to(*cmd);
  CLI::Option* output = cmd->add_option("-o,--output", a->output, "Output format: md (a Markdown table), json or csv")
                            ->check(CLI::IsMember({"md", "json", "csv"}))
                            ->capture_default_str();
  cmd->add_flag("--json", a->json, "The same as -o json")->excludes(output);
  cmd->add_flag("--roof", a->roof,
                "Measure the memory's read bandwidth and the peak of each multiplying path first; give each generation "
                "test the bytes a token reads (matrices as kept, KV cache at its type and depth), GB/s and % of the "
                "read roof, and each prompt test its multiply-adds a token, GMAC/s and % of the compute roof");
  add_quiet(*cmd, a->quiet);
  cmd->callback([a] { run(*a); });
}

}  // namespace pert::cli
