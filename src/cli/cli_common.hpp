// What the subcommands share: the model-selection flags and machine-readable output.
#pragma once
#include <filesystem>
#include <limits>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "pert/config.hpp"
#include "pert/json_util.hpp"
#include "pert/loaded_model.hpp"
#include "pert/model.hpp"
#include "pert/output_file.hpp"
#include "pert/progress.hpp"
#include "pert/threads.hpp"
#include "pert/tokenizer.hpp"

namespace pert::cli {

// --config FILE (repeatable) and --set key.path=value (repeatable), applied in that order.
struct ConfigFlags {
  std::vector<std::string> files;
  std::vector<std::string> sets;
  bool allow_scheme_change = false;
  std::string dtype = "auto";
  std::string cache_type = "f32";

  // --config (unless `with_files` is false: sweep's --config means rows), --set,
  // --allow-scheme-change, --dtype and --cache-type.
  void add_to(CLI::App& app, bool with_files = true);
  ConfigOverrides overrides() const;
  WeightType weight_type() const { return parse_weight_type(dtype); }
  CacheType kv_type() const { return parse_cache_type(cache_type); }
  // --dtype and --cache-type: what the weights and the KV cache are kept in.
  void add_precision(CLI::App& app);
};

// The model directory to use: `given`, or with none the one models/default names (a link to a
// model directory, or a file holding its path relative to models/).
std::filesystem::path resolve_model_dir(const std::string& given);


// pert::load_model, its note (a scheme other than the trained one) printed on stderr.
LoadedModel load_cli_model(const std::filesystem::path& dir, const ConfigOverrides& overrides, WeightType type);

// A library message (error.hpp) in this subcommand's words: each `field` as its flag (n_ctx as
// -c, or as --lengths where the lengths set the context; `set K=V` as --set K=V ...).
// main() names the subcommand before it runs.
void set_subcommand(const std::string& name);
std::string cli_words(const std::string& message);

// Flag checks for ->check(), run while the command line is parsed, so before any work. A bad
// value is a usage error (exit 2) that CLI11 prefixes with the flag's name, e.g.
// "--ctx-size: must be an integer >= 0, got -1": bounds as written, never a 300-digit double.
// Integers in [min, max] (a max of INT_MAX or more reads as ">= min").
CLI::Validator int_in(long long min, long long max = std::numeric_limits<int>::max());
// The same, or the one value `special` that means `meaning`: "must be -1 (MEANING) or an
// integer from 1 to ...".
CLI::Validator int_in_or(long long special, const std::string& meaning, long long min,
                         long long max = std::numeric_limits<int>::max());
// Integers in [min, max], or `word` standing for `value` ("must be WORD or an integer from ..."):
// a transform (the input becomes `value`), for flags such as --buckets log|N.
CLI::Validator word_or_int_in(const std::string& word, long long value, long long min, long long max);
// Finite numbers (NaN and ±Inf refused) in [min, max], or (min, max] when `min_open`; the max
// defaults to the largest float, as the values are kept in floats.
constexpr double kFloatMax = std::numeric_limits<float>::max();
CLI::Validator real_in(double min, double max = kFloatMax, bool min_open = false);
// An output file that can be written: not a directory, in an existing directory that can be
// written, and writable itself if it exists. "" and "-" (stdout) pass.
CLI::Validator writable_file();
// An input file that can be read (pert::check_input_file): not missing, a directory or a device;
// a FIFO only with `streams` (-f <(zcat text.gz)).
CLI::Validator input_file(bool streams = false);
// --config's value: a file, or a merge patch written inline ("{...}", parsed here).
CLI::Validator config_patch();
// A value that must not be empty (-m "": not "use the default" in disguise).
CLI::Validator not_empty();

// `-t/--threads` for every subcommand (at least 1 when given); set_threads(0) (pert/threads.hpp),
// the value when it is not given, runs on the cores not busy at the start, unless
// OMP_NUM_THREADS says otherwise.
void add_threads(CLI::App& app, int& threads);
// set_threads(threads), then a warning on stderr (once a process) when they are more than the
// cores not busy now.
void use_threads(int threads);

// --quiet for the long-running subcommands: no progress on stderr (errors still print).
void add_quiet(CLI::App& app, bool& quiet);


// `--json` (a flag: JSON on stdout instead of the human output) and `--json-out FILE` (JSON to
// a file as well, the human output still on stdout): one meaning of --json in every subcommand.
struct JsonFlags {
  bool to_stdout = false;
  std::string file;
  void add_to(CLI::App& app, const std::string& what);  // what: "the result", "every score"
  bool wanted() const { return to_stdout || !file.empty(); }
  // Writes `j` where asked; true when it went to stdout, so the human output is not wanted.
  bool write(const nlohmann::json& j) const;
};

// Says on stderr that tokenizing `text_name` left characters out (pert::dropped_note), when the
// tokenizer's count has grown past `before`.
void note_dropped(const Tokenizer& tokenizer, size_t before, const std::string& text_name);

// What a run reads, named by flag, for pert::check_distinct_paths: the files of each model
// directory (-m), each --config file and -f TEXT (when given).
std::vector<NamedPath> run_inputs(const std::vector<std::string>& model_dirs, const std::vector<std::string>& configs,
                                  const std::string& text_file = "");

// Writes `j` to `path` ("-": stdout) by pert::write_file: whole or not at all (pert/output_file.hpp).
void write_json(const std::filesystem::path& path, const nlohmann::json& j);
// The CPU and the kernel paths that run on it (kernels.hpp): {"cpu", "cpu_vendor", "cpu_features",
// "kernels": {family: path}, "f32_prefetch"}; cpu_line() says the same in one line of text.
nlohmann::json cpu_json();
std::string cpu_line();

// Thrown by a subcommand that has finished its output but must exit with `code` (e.g. 130
// after SIGINT); main returns it.
struct ExitStatus {
  int code;
};

// Each subcommand file defines one of these; main.cpp registers them all.
void add_inspect(CLI::App& app);
void add_generate(CLI::App& app);
void add_perplexity(CLI::App& app);
void add_sweep(CLI::App& app);
void add_attention(CLI::App& app);
void add_positions(CLI::App& app);
void add_bench(CLI::App& app);
void add_tokenize(CLI::App& app);
void add_passkey(CLI::App& app);
void add_ruler(CLI::App& app);

}  // namespace pert::cli
