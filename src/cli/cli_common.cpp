#include "cli/cli_common.hpp"

#include <omp.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <iostream>

#include "pert/block_types.hpp"
#include "pert/error.hpp"
#include "pert/json_util.hpp"
#include "pert/kernels.hpp"
#include "pert/model_dir.hpp"
#include "pert/output_file.hpp"

namespace pert::cli {

void ConfigFlags::add_to(CLI::App& app, bool with_files) {
  if (with_files)
    app.add_option("--config", files,
                   "JSON merged over config.json (RFC 7386 merge patch): a file, or the JSON itself, e.g. "
                   "'{\"rope_scaling\":{\"rope_type\":\"yarn\",\"factor\":8}}'; repeatable, applied in order")
        ->check(config_patch())
        ->allow_extra_args(false);
  app.add_option("--set", sets,
                 "Set one config value: key.path=value (value is JSON, else a string; null removes); "
                 "repeatable, applied after --config. E.g. --set 'rope_scaling={\"rope_type\":\"linear\",\"factor\":8}'")
      ->allow_extra_args(false);
  app.add_flag("--allow-scheme-change", allow_scheme_change,
               "Let --config/--set replace the positional scheme the model was trained with (by default they "
               "may only rescale or extend it)");
  add_precision(app);
}

void ConfigFlags::add_precision(CLI::App& app) {
  // the block types' rows that --dtype quantizes to
  const std::string blocks = comma_list(block_types(), [](const BlockTypeInfo& t) { return std::string(t.dtype_flag ? t.dtype_flag : ""); });
  app.add_option("--dtype", dtype,
                 "Weights kept and multiplied as stored (auto: a GGUF file's own types, else f32), in f32 (exact), "
                 "bf16 (half the memory traffic), q8 (Q8_0's numbers in pert's packing), or GGML's blocks " +
                     blocks + " (quantized at load)")
      ->check(CLI::IsMember(weight_type_flags()))
      ->capture_default_str();
  app.add_option("--cache-type", cache_type,
                 "KV cache kept in f32 (exact), bf16, f16 (half the bytes) or q8 (blocks of 32 int8 with an F16 "
                 "scale); rotations, biases and products still in F32")
      ->check(CLI::IsMember({"f32", "bf16", "f16", "q8"}))
      ->capture_default_str();
}

ConfigOverrides ConfigFlags::overrides() const {
  ConfigOverrides o;
  o.files.assign(files.begin(), files.end());
  o.sets = sets;
  o.allow_scheme_change = allow_scheme_change;
  return o;
}

std::filesystem::path resolve_model_dir(const std::string& given) {
  namespace fs = std::filesystem;
  if (!given.empty()) return given;
  const fs::path pointer = PERT_DEFAULT_MODEL;
  std::error_code ec;
  if (fs::is_directory(pointer, ec)) return pointer;
  if (fs::is_regular_file(pointer, ec)) {
    std::ifstream in(pointer);
    std::string name;
    std::getline(in, name);
    return pointer.parent_path() / name;
  }
  throw IoError("no -m MODEL_DIR given and " + pointer.string() +
                " does not exist; convert a model first, e.g. /usr/bin/python3 tools/convert/convert_llama2c.py "
                "../shared/data/models/stories260K/stories260K.bin ../shared/data/models/stories260K/tok512.bin "
                "build/models/stories260K, then pass -m build/models/stories260K");
}

namespace {
std::string& subcommand() {
  static std::string name;
  return name;
}
}  // namespace

void set_subcommand(const std::string& name) { subcommand() = name; }

std::string cli_words(const std::string& message) {
  static const std::pair<const char*, const char*> kFlags[] = {
      {"n_ctx", "-c"},          {"n_keep", "--keep"},        {"stride", "--stride"},
      {"mode", "--mode"},       {"max_windows", "--chunks"}, {"n_buckets", "--buckets"},
      {"max_distance", "--distance"}, {"query_pos", "--query-pos"},
      {"allow_scheme_change", "--allow-scheme-change"},      {"config", "--config"},
      {"set", "--set"},         {"temperature", "--temp"},   {"top_k", "--top-k"},
      {"top_p", "--top-p"},     {"min_p", "--min-p"},        {"repeat_penalty", "--repeat-penalty"},
      {"repeat_last_n", "--repeat-last-n"}, {"n_predict", "-n"}, {"buckets", "--buckets"},
      {"split_docs", "--split-docs"}, {"lengths", "--lengths"},  {"depths", "--depths"},
      {"trials", "--trials"},   {"seed", "--seed"},           {"tasks", "--tasks"},
      {"essay", "--essay"},     {"template", "--template"},
  };
  // The grids' lengths set the context: they have --lengths, no -c.
  const std::string& c = subcommand();
  const bool by_lengths = c == "sweep" || c == "attention" || c == "passkey" || c == "ruler";
  return render_fields(message, [&](const std::string& field) -> std::string {
    if (field.rfind("set ", 0) == 0) return "--" + field;  // `set K=V`
    if (field == "n_ctx" && by_lengths) return "--lengths";
    for (const auto& [name, flag] : kFlags)
      if (field == name) return flag;
    return "";
  });
}

LoadedModel load_cli_model(const std::filesystem::path& dir, const ConfigOverrides& overrides, WeightType type) {
  LoadedModel m = load_model(dir, overrides, type);
  if (!m.note.empty()) std::fprintf(stderr, "pert: note: %s\n", cli_words(m.note).c_str());
  return m;
}

namespace {
// int_in, with `special` (when `meaning` is not empty) allowed besides [min, max]; or, when
// `word` is not empty, `word` standing for `special` (the input becomes it: use as a transform).
CLI::Validator int_validator(long long min, long long max, long long special, const std::string& meaning,
                             const std::string& word = "") {
  const bool unbounded = max >= std::numeric_limits<int>::max();  // as far as a user is concerned
  const std::string lo = std::to_string(min), hi = std::to_string(max);
  const std::string also = !word.empty()      ? word + " or "
                           : meaning.empty() ? ""
                                             : std::to_string(special) + " (" + meaning + ") or ";
  const std::string rule = also + (unbounded ? "an integer >= " + lo : "an integer from " + lo + " to " + hi);
  return CLI::Validator(
      [=](std::string& input) -> std::string {
        if (!word.empty() && input == word) {
          input = std::to_string(special);
          return "";
        }
        errno = 0;
        char* end = nullptr;
        const long long v = std::strtoll(input.c_str(), &end, 10);
        const bool number = !input.empty() && end != input.c_str() && *end == '\0';
        if (number && errno == 0 && ((v >= min && v <= max) || (!meaning.empty() && v == special))) return "";
        const bool too_big = number && v > 0 && (errno == ERANGE || v > max);  // past an unstated max
        return "must be " + rule + (too_big && unbounded ? " (and at most " + hi + ")" : "") + ", got " + input;
      },
      (!word.empty() ? word + " or " : meaning.empty() ? "" : std::to_string(special) + " or ") +
          (unbounded ? "INT >= " + lo : "INT in [" + lo + ", " + hi + "]"));
}
}  // namespace

CLI::Validator int_in(long long min, long long max) { return int_validator(min, max, 0, ""); }

CLI::Validator int_in_or(long long special, const std::string& meaning, long long min, long long max) {
  return int_validator(min, max, special, meaning);
}

CLI::Validator word_or_int_in(const std::string& word, long long value, long long min, long long max) {
  return int_validator(min, max, value, "", word);
}

CLI::Validator real_in(double min, double max, bool min_open) {
  const bool unbounded = max >= kFloatMax;
  const std::string lo = number_text(min), hi = number_text(max);
  const std::string rule = unbounded ? std::string(min_open ? "> " : ">= ") + lo
                                     : std::string(min_open ? "in (" : "in [") + lo + ", " + hi + "]";
  return CLI::Validator(
      [=](std::string& input) -> std::string {
        char* end = nullptr;
        const double v = std::strtod(input.c_str(), &end);  // NaN compares false: isfinite first
        const bool whole = !input.empty() && end != input.c_str() && *end == '\0';
        if (whole && std::isfinite(v) && (min_open ? v > min : v >= min) && v <= max) return "";
        const bool too_big = unbounded && whole && std::isfinite(v) && v > max;  // finite, but not as a float
        return std::string(unbounded ? "must be a finite number " : "must be a number ") + rule +
               (too_big ? " (and at most " + hi + ")" : "") + ", got " + input;
      },
      "NUMBER " + rule);
}

CLI::Validator not_empty() {
  return CLI::Validator([](std::string& s) { return s.empty() ? std::string("must not be empty") : std::string(); },
                        "NONEMPTY");
}

namespace {
// A validator from a check that throws pert::Error: its message is CLI11's.
CLI::Validator checked(std::function<void(const std::string&)> check, const std::string& name) {
  return CLI::Validator(
      [check = std::move(check)](std::string& input) -> std::string {
        try {
          check(input);
        } catch (const Error& e) {
          return e.what();
        }
        return "";
      },
      name);
}
}  // namespace

CLI::Validator input_file(bool streams) {
  return checked([streams](const std::string& input) { check_input_file(input, streams); }, "FILE");
}

CLI::Validator config_patch() {
  return checked(
      [](const std::string& input) {
        if (is_inline_config(input)) read_config_patch(input);
        else check_input_file(input);
      },
      "FILE|JSON");
}

CLI::Validator writable_file() {
  return checked([](const std::string& input) { if (!input.empty() && input != "-") check_writable(input); },
                 "FILE (writable)");
}

void add_threads(CLI::App& app, int& threads) {
  app.add_option("-t,--threads", threads,
                 "Threads (default: the " + std::to_string(omp_get_num_procs()) +
                     " cores less those busy at the start, at most SLURM_CPUS_PER_TASK; or OMP_NUM_THREADS)")
      ->check(int_in(1, kMaxThreads));
}

void use_threads(int threads) {
  set_threads(threads);
  if (const std::string warning = busy_cores_warning(threads); !warning.empty())
    std::fprintf(stderr, "pert: warning: %s\n", warning.c_str());
}

void add_quiet(CLI::App& app, bool& quiet) {
  app.add_flag("-q,--quiet", quiet, "No progress on stderr (errors still print)");
}

void JsonFlags::add_to(CLI::App& app, const std::string& what) {
  app.add_flag("--json", to_stdout, "Write " + what + " as JSON to stdout instead of the text");
  app.add_option("--json-out", file, "Write " + what + " as JSON to this file as well (the text still on stdout)")
      ->check(writable_file());
}

bool JsonFlags::write(const nlohmann::json& j) const {
  if (!file.empty()) write_json(file, j);
  if (to_stdout) write_json("-", j);
  return to_stdout;
}

void note_dropped(const Tokenizer& tokenizer, size_t before, const std::string& text_name) {
  const std::string note = dropped_note(tokenizer.dropped_characters() - before, text_name);
  if (!note.empty()) std::fprintf(stderr, "pert: warning: %s\n", printable(note).c_str());
}

std::vector<NamedPath> run_inputs(const std::vector<std::string>& model_dirs, const std::vector<std::string>& configs,
                                  const std::string& text_file) {
  std::vector<NamedPath> inputs;
  if (!text_file.empty()) inputs.push_back({"-f", text_file});
  for (const std::string& c : configs) inputs.push_back({"--config", c});
  for (const std::string& dir : model_dirs)
    for (const std::filesystem::path& f : model_dir_files(resolve_model_dir(dir)))
      inputs.push_back({"model's " + f.filename().string(), f});
  return inputs;
}

void write_json(const std::filesystem::path& path, const nlohmann::json& j) {
  write_file(path, json_file_text(j));
}

nlohmann::json cpu_json() {
  const CpuInfo& cpu = cpu_info();
  nlohmann::json kernels = nlohmann::json::object();
  for (const KernelFamily& f : kernel_families()) kernels[f.name] = f.selected;
  return {{"cpu", cpu.model}, {"cpu_vendor", cpu.vendor}, {"cpu_features", cpu.features},
          {"kernels", kernels}, {"f32_prefetch", f32_prefetch()}};
}

std::string cpu_line() { return cpu_info().model + " (" + cpu_info().features + "); kernels: " + kernel_summary(); }

}  // namespace pert::cli
