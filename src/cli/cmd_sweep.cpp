// The grid commands' front end (grid_command.hpp): their flags checked and turned into a request of
// the library's grid (pert/grid.hpp), its result printed.
#include <cstdio>
#include <iostream>

#include "cli/cli_common.hpp"
#include "cli/evaluate.hpp"
#include "cli/grid_command.hpp"
#include "pert/error.hpp"
#include "pert/grid_file.hpp"
#include "pert/json_util.hpp"

namespace pert::cli {

namespace {

using nlohmann::json;

struct SweepArgs {
  std::vector<std::string> models, configs, labels, merge, status;
  std::vector<int> lengths;
  std::string out, csv, shard;
  int threads = 0;
  bool quiet = false, json = false, partial = false;
  ConfigFlags overrides;  // --set, --allow-scheme-change and --dtype for every cell
  std::string command;    // "sweep", "attention"
  std::shared_ptr<Measure> measure;

  GridRequest request() const {
    GridRequest r;
    r.command = command;
    r.models = models;
    r.configs = configs;
    r.labels = labels;
    r.lengths = lengths;
    r.out = out;
    r.csv = csv;
    r.shard = shard;
    r.overrides = overrides.overrides();
    r.dtype = overrides.dtype;
    r.cache_type = overrides.cache_type;
    r.partial = partial;
    r.quiet = quiet;
    r.load = [](const std::string& dir, const ConfigOverrides& o, WeightType t) { return load_cli_model(dir, o, t); };
    r.words = cli_words;
    return r;
  }
};

// Refuses --out and the CSV naming one file, or one of `inputs`, before any work.
void check_outputs(const SweepArgs& a, const std::vector<NamedPath>& inputs) {
  check_distinct_paths({{"--out", a.out},
                        {a.csv.empty() ? "--csv (default: --out with .csv)" : "--csv", grid_csv_path(a.request())}},
                       inputs);
}

// What stdout gets at the end: the cells as a Markdown table, or with --json the whole sweep.
void print(const SweepArgs& a, const json& sweep) {
  if (a.json)
    write_json("-", sweep);
  else
    std::cout << printable_lines(a.measure->table(sweep["cells"]));  // (names and labels from files, as text)
}

// After the table: exit 1 where cells were asked for and none of them could run. A shard's
// share is not its grid (a Slurm array's merge waits for every task to succeed): its merge says.
void refuse_all_failed(const SweepArgs& a, int cells, int failed) {
  if (cells == 0 || failed < cells || !a.shard.empty()) return;
  throw Error(a.command + ": none of the " + std::to_string(cells) + (cells == 1 ? " cell" : " cells") + " could run; " +
              (a.out.empty() ? std::string("the table says why") : "each cell's \"error\" in " + a.out + " says why"));
}

void run_merge(const SweepArgs& a) {
  std::vector<NamedPath> parts;
  for (const std::string& file : a.merge) parts.push_back({"--merge", file});
  check_outputs(a, parts);
  const json merged = merge_grid(a.merge, a.request(), *a.measure);
  print(a, merged);
  int failed = 0;
  for (const json& c : merged["cells"]) failed += c.contains("error");
  refuse_all_failed(a, int(merged["cells"].size()), failed);
}

void run_status(const SweepArgs& a) {
  const json status = grid_status(a.status, *a.measure);
  if (a.json)
    write_json("-", status);
  else
    std::cout << grid_status_table(status);
}

void run_sweep(const SweepArgs& a) {
  const std::string& cmd = a.command;
  if (a.models.empty()) throw Error(cmd + ": give at least one -m MODEL_DIR (or --merge FILES, or --status FILES)");
  // No --out: a quick look, the table (or --json) on stdout and nothing kept.
  if (a.out.empty() && (!a.csv.empty() || !a.shard.empty()))
    throw Error(cmd + ": " + (a.csv.empty() ? "--shard" : "--csv") + " goes with --out FILE.json");
  if (a.partial) throw Error(cmd + ": --partial goes with --merge");
  if (a.lengths.empty()) throw Error(cmd + ": give --lengths, e.g. --lengths 128,256,512");
  const std::string& text = a.measure->spec().text_file;
  if (text.empty()) throw Error(cmd + ": give -f TEXT");
  std::vector<std::string> config_files;
  for (const std::string& c : a.configs)
    if (c != kPlain) config_files.push_back(c);
  std::vector<NamedPath> inputs = run_inputs(a.models, config_files, text);
  for (NamedPath& p : key_inputs(a.measure->spec())) inputs.push_back(std::move(p));
  check_outputs(a, inputs);
  use_threads(a.threads);
  GridOutcome outcome;
  print(a, run_grid(a.request(), *a.measure, &outcome));
  refuse_all_failed(a, outcome.cells, outcome.failed);
}

}  // namespace

void add_grid_command(CLI::App& app, const std::string& name, const std::string& description,
                      std::shared_ptr<Measure> measure, const std::function<void(CLI::App& cmd)>& add_flags) {
  auto a = std::make_shared<SweepArgs>();
  a->command = name;
  a->measure = std::move(measure);
  CLI::App* cmd = app.add_subcommand(name, description);
  cmd->add_option("-m,--model", a->models, "Model directory or GGUF file (repeatable)")->allow_extra_args(false)->check(not_empty());
  cmd->add_option("--config", a->configs,
                  "Config override, a file or inline JSON ('{...}'), one row per config and model (repeatable; "
                  "'plain': config.json as is; default: plain)")
      ->allow_extra_args(false);
  cmd->add_option("--label", a->labels,
                  "Row label of each --config, in order (default: the file's name, or its path where two share one)")
      ->allow_extra_args(false);
  cmd->add_option("--lengths", a->lengths, "Context lengths, e.g. 128,256,512")
      ->delimiter(',')
      ->check(int_in(2, 1 << 24));
  add_flags(*cmd);
  a->overrides.add_to(*cmd, /*with_files=*/false);
  cmd->add_option("--out", a->out, "Result file (JSON); cells already in it are skipped (none: the table only, nothing kept)")->check(writable_file());
  cmd->add_flag("--json", a->json, "Write the result (what --out holds) as JSON to stdout instead of the table");
  cmd->add_option("--csv", a->csv, "CSV file (default: --out with .csv)")->check(writable_file());
  cmd->add_option("--shard", a->shard, "Run only share K of N (1 <= K <= N) of the cells, e.g. for a Slurm array")
      ->check(CLI::Validator(
          [](std::string& s) -> std::string {
            return parse_shard(s).second ? "" : "must be K/N with 1 <= K <= N, got '" + s + "'";
          },
          "K/N"));
  cmd->add_option("--merge", a->merge,
                  "Add these files' cells to --out's instead of running; refused while a cell of their grid is missing")
      ->expected(1, -1)
      ->check(input_file());
  cmd->add_flag("--partial", a->partial, "With --merge: merge what there is, the missing cells named in a warning");
  cmd->add_option("--status", a->status,
                  "Show each file's share of its grid done, failed and missing, then the whole grid's; runs nothing")
      ->expected(1, -1)
      ->check(input_file());
  add_threads(*cmd, a->threads);
  add_quiet(*cmd, a->quiet);
  cmd->callback([a] {
    const std::string& c = a->command;
    if (!a->status.empty()) {
      if (!a->models.empty() || !a->merge.empty() || !a->out.empty())
        throw Error(c + ": --status only reads its files; drop -m, --merge and --out");
      run_status(*a);
    } else if (!a->merge.empty()) {
      if (!a->models.empty()) throw Error(c + ": --merge runs nothing; drop -m");
      if (a->out.empty()) throw Error(c + ": --merge needs --out");
      run_merge(*a);
    } else {
      run_sweep(*a);
    }
  });
}

void add_sweep(CLI::App& app) {
  auto eval = std::make_shared<EvalFlags>();  // (the measure reads it; its function keeps it)
  auto measure = std::make_shared<PerplexityMeasure>(*eval, [eval] { return eval->buckets_flag->count() > 0; });
  add_grid_command(app, "sweep", "Perplexity of every model x config x length, as a table, JSON and CSV", measure,
                   [eval](CLI::App& cmd) {
                     eval->add_to(cmd);
                     cmd.get_option("--file")->required(false);
                   });
}

}  // namespace pert::cli
