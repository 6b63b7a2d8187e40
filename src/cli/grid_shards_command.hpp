// What `pert passkey` and `pert ruler` share: their model, output and shard flags, and their run
// from the flags to the outputs, whole or as a shard (pert/grid_shards.hpp: --shard K/N, resumed
// from --json-out; --merge joins the shards' files).
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "cli/cli_common.hpp"
#include "pert/grid_shards.hpp"
#include "pert/output_file.hpp"
#include "pert/progress.hpp"

namespace pert::cli {

// --shard K/N, --merge FILES and --partial, as `pert passkey` and `pert ruler` take them.
struct ShardFlags {
  std::string shard;
  std::vector<std::string> merge;
  bool partial = false;
  void add_to(CLI::App& app, const std::string& cells);  // cells: "(length, depth) cells"
};

// The flags both tasks take besides their settings.
struct TaskFlags {
  std::string model_dir, csv_file, dump_file;
  ShardFlags shards;
  int threads = 0;
  bool quiet = false;
  JsonFlags json;
  ConfigFlags config;
};

// A task as its command shows it: its name, its grid, its CSV and its table.
struct TaskOutputs {
  std::string command;  // "passkey", "ruler"
  GridOf grid;
  std::function<void(const std::string& path, const nlohmann::json& cells)> write_csv;
  std::function<void(const nlohmann::json& result)> print_table;
};

// Error on flags that do not go together; with --merge, the merged files' outputs (true: done).
bool merge_task(const TaskFlags& a, const TaskOutputs& task);
// The outputs asked for; `file_written`: --json-out holds the result already (a shard's file).
void finish_task(const TaskFlags& a, const TaskOutputs& task, const nlohmann::json& result, bool file_written);
// --shard's run (nullptr without --shard), `wanted` set to its cells still to do.
std::unique_ptr<ShardRun> open_task_shard(const TaskFlags& a, const TaskOutputs& task, const nlohmann::json& head,
                                          const std::string& model_dir, std::function<bool(int)>& wanted);

// The run of a task with settings `S` and cells `C`, after its own checks: the model loaded, the
// cells run (a shard's, or all) with a progress bar, the outputs and --dump-prompts written.
// `run(model, settings, progress, cell_done)` runs the cells; `report(model, settings, dtype,
// cells)` is the JSON result; `prompts(cells)` each prompt's entry with its ids.
template <class S, class C, class Run, class Report, class Prompts>
void run_task(const TaskFlags& a, const TaskOutputs& task, S settings, Run run, Report report, Prompts prompts) {
  use_threads(a.threads);
  const LoadedModel m = load_cli_model(resolve_model_dir(a.model_dir), a.config.overrides(), a.config.weight_type());
  settings.cache_type = a.config.kv_type();
  settings.keep_prompts = !a.dump_file.empty();
  const std::string dtype = resolved_dtype(a.config.dtype, m.dir);
  auto result_of = [&](const std::vector<C>& cells) {
    nlohmann::json r = report(m, settings, dtype, cells);
    reword_skipped(r, cli_words);  // a skipped cell's reason names the flags
    r["config"] = a.config.files;
    r["set"] = a.config.sets;
    return r;
  };
  const std::unique_ptr<ShardRun> shard = open_task_shard(a, task, result_of({}), m.dir.string(), settings.wanted);
  Progress bar(task.command, "prompts", a.quiet);
  const std::vector<C> cells = run(
      m, settings, [&](long long done, long long total) { bar.update(done, total); },
      [&](const C& cell) {
        if (shard) shard->add(result_of({cell})["cells"][0]);
      });
  bar.finish();
  if (shard) return finish_task(a, task, shard->result(), true);  // the shard's file written after each cell
  const nlohmann::json result = result_of(cells);
  if (!a.dump_file.empty()) {
    nlohmann::json dump = result;
    dump["prompts"] = prompts(cells);
    write_json(a.dump_file, dump);
  }
  finish_task(a, task, result, false);
}

}  // namespace pert::cli
