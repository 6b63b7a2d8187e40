#include "cli/grid_shards_command.hpp"

#include "pert/error.hpp"
#include "pert/grid.hpp"

namespace pert::cli {

using nlohmann::json;

void ShardFlags::add_to(CLI::App& app, const std::string& cells) {
  app.add_option("--shard", shard,
                 "Run only share K of N (1 <= K <= N) of the " + cells + " into --json-out, saved after each cell and "
                 "resumed when it exists (a Slurm array's task)")
      ->check(CLI::Validator(
          [](std::string& s) -> std::string {
            return parse_shard(s).second ? "" : "must be K/N with 1 <= K <= N, got '" + s + "'";
          },
          "K/N"));
  app.add_option("--merge", merge,
                 "Join these --shard files' cells (the table, --json-out, --csv) instead of running; refused while a "
                 "cell of the grid is missing")
      ->expected(1, -1)
      ->check(input_file());
  app.add_flag("--partial", partial, "With --merge: join what there is, the missing cells named in a warning");
}

bool merge_task(const TaskFlags& a, const TaskOutputs& task) {
  const ShardFlags& s = a.shards;
  const std::string& command = task.command;
  if (s.partial && s.merge.empty()) throw Error(command + ": --partial goes with --merge");
  if (!s.shard.empty() && a.json.file.empty()) throw Error(command + ": --shard needs --json-out FILE (the shard's file)");
  if (!s.shard.empty() && !a.dump_file.empty()) throw Error(command + ": --dump-prompts runs a whole grid, not a --shard");
  if (s.merge.empty()) return false;
  std::vector<NamedPath> parts;
  for (const std::string& f : s.merge) parts.push_back({"--merge", f});
  check_distinct_paths({{"--json-out", a.json.file}, {"--csv", a.csv_file}}, parts);
  finish_task(a, task, merge_shard_files(s.merge, task.grid, s.partial, command), false);
  return true;
}

void finish_task(const TaskFlags& a, const TaskOutputs& task, const json& result, bool file_written) {
  if (!a.csv_file.empty()) task.write_csv(a.csv_file, result["cells"]);
  JsonFlags out = a.json;
  if (file_written) out.file.clear();
  if (out.write(result)) return;
  task.print_table(result);
}

std::unique_ptr<ShardRun> open_task_shard(const TaskFlags& a, const TaskOutputs& task, const json& head,
                                          const std::string& model_dir, std::function<bool(int)>& wanted) {
  if (a.shards.shard.empty()) return nullptr;
  auto shard = open_shard(a.shards.shard, a.json.file, head, model_dir, task.grid, task.command);
  const ShardRun* s = shard.get();
  wanted = [s](int index) { return s->wanted(index); };
  return shard;
}

}  // namespace pert::cli
