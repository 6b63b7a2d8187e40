// pert ruler: the retrieval tasks (the library's run_ruler, include/pert/ruler.hpp; the prompt
// rules in tools/reference/ruler_tasks.py) as a table, JSON or CSV, with every prompt's ids on request for
// tools/reference/ruler_reference.py.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <sstream>

#include "cli/cli_common.hpp"
#include "cli/grid_shards_command.hpp"
#include "pert/error.hpp"
#include "pert/output_file.hpp"
#include "pert/passkey.hpp"
#include "pert/ruler.hpp"

namespace pert::cli {

namespace {

// The WikiText-2 articles tools/setup.sh writes: the essay haystack when --essay is not given.
constexpr const char* kSetupEssay = PERT_SETUP_ESSAY;

using nlohmann::json;

struct RulerArgs : TaskFlags {
  std::string wording = "short";
  std::vector<std::string> tasks = {"niah_single_1"};
  RulerSettings settings;
};

void write_ruler_csv(const std::string& path, const json& cells) {
  std::ostringstream out;
  out << "task,length,depth,score,trials,skipped\n";
  for (const json& c : cells)
    out << c["task"].get<std::string>() << ',' << c["length"].get<int>() << ','
        << (c["depth"].is_null() ? "" : number_text(c["depth"])) << ','
        << (c["score"].is_null() ? "" : number_text(c["score"])) << ',' << c["trials"].get<int>() << ','
        << (c.contains("skipped") ? "yes" : "") << "\n";
  write_file(path, out.str());
}

// Rows: tasks; columns: lengths; each the mean over depths of the cells' scores, and the mean over
// tasks (RULER's average) at the foot. A length too short for a task reads "—", its reason below.
void print_ruler_table(const json& result) {
  const json& cells = result["cells"];
  // (strings from a --merge file shown as text: a control character in one is escaped, not sent to the terminal)
  std::printf("%s: %s\n", printable(result["model_dir"].get<std::string>()).c_str(),
              printable(result["position"].get<std::string>()).c_str());
  std::printf("retrieval (RULER's tasks, %s wording): %d trials per cell (seed %lld), trained length %d; "
              "score = string_match_all x 100, the mean over depths\n\n",
              printable(result["template"].get<std::string>()).c_str(), result["trials"].get<int>(), result["seed"].get<long long>(),
              result["trained_length"].get<int>());
  std::map<std::pair<std::string, int>, std::pair<double, int>> sum;  // (task, length) -> (score sum, cells)
  std::vector<std::string> reasons;
  for (const json& c : cells) {
    auto& s = sum[{c["task"].get<std::string>(), c["length"].get<int>()}];
    if (c["score"].is_null()) {
      if (s.second == 0) reasons.push_back(c["skipped"].get<std::string>());
      s.second = -1;
    } else {
      s.first += c["score"].get<double>(), s.second += 1;
    }
  }
  std::printf("| task |");
  for (const json& n : result["lengths"]) std::printf(" %d |", n.get<int>());
  std::printf("\n|---|");
  for (size_t i = 0; i < result["lengths"].size(); ++i) std::printf("---:|");
  std::printf("\n");
  std::map<int, std::pair<double, int>> mean;  // length -> (sum of task means, tasks)
  for (const json& t : result["tasks"]) {
    std::printf("| %s |", printable(t.get<std::string>()).c_str());
    for (const json& n : result["lengths"]) {
      const auto& s = sum[{t.get<std::string>(), n.get<int>()}];
      if (s.second <= 0) {
        std::printf(" — |");
        continue;
      }
      std::printf(" %.1f |", s.first / s.second);
      mean[n.get<int>()].first += s.first / s.second, mean[n.get<int>()].second += 1;
    }
    std::printf("\n");
  }
  if (result["tasks"].size() > 1) {
    std::printf("| mean |");
    for (const json& n : result["lengths"]) {
      const auto& m = mean[n.get<int>()];
      if (m.second == 0) std::printf(" — |");
      else std::printf(" %.1f |", m.first / m.second);
    }
    std::printf("\n");
  }
  for (const std::string& r : reasons) std::printf("\n— %s", printable(r).c_str());
  if (!reasons.empty()) std::printf("\n");
}

// A cell's name in a grid: "vt at 128 tokens, depth 0.5" (cwe and fwe: no depth).
std::string ruler_cell_name(const json& cell) {
  return cell["task"].get<std::string>() + " at " + std::to_string(cell["length"].get<int>()) + " tokens" +
         (cell["depth"].is_null() ? "" : ", depth " + number_text(cell["depth"]));
}

GridCells ruler_grid(const json& result) {
  GridCells grid{{}, ruler_cell_name};
  for (const json& t : result["tasks"])
    for (const json& n : result["lengths"]) {
      if (!ruler_task_has_depth(t)) {
        grid.names.push_back(ruler_cell_name({{"task", t}, {"length", n}, {"depth", nullptr}}));
        continue;
      }
      for (const json& d : result["depths"]) grid.names.push_back(ruler_cell_name({{"task", t}, {"length", n}, {"depth", d}}));
    }
  return grid;
}

void run(RulerArgs a) {
  const TaskOutputs task{"ruler", ruler_grid, write_ruler_csv, print_ruler_table};
  if (merge_task(a, task)) return;
  if (a.settings.lengths.empty()) throw CLI::RequiredError("--lengths");  // required but with --merge
  if (a.tasks.size() == 1 && a.tasks[0] == "all") a.tasks = ruler_task_names();
  const bool needs_essay = std::any_of(a.tasks.begin(), a.tasks.end(), ruler_task_needs_essay);
  if (needs_essay && a.settings.essay_path.empty() && std::filesystem::is_regular_file(kSetupEssay)) {
    a.settings.essay_path = kSetupEssay;  // what tools/setup.sh wrote
    std::fprintf(stderr, "pert: note: the essay haystack is %s (tools/setup.sh's WikiText-2 articles; --essay to choose)\n",
                 kSetupEssay);
  }
  std::vector<NamedPath> inputs = run_inputs({a.model_dir}, a.config.files);
  if (!a.settings.essay_path.empty()) inputs.push_back({"--essay", a.settings.essay_path});
  check_distinct_paths({{"--json-out", a.json.file}, {"--csv", a.csv_file}, {"--dump-prompts", a.dump_file}}, inputs);
  a.settings.tasks = a.tasks;
  a.settings.wording = parse_ruler_template(a.wording);
  validate(a.settings);  // before the model loads
  run_task<RulerSettings, RulerCell>(
      a, task, a.settings,
      [](const LoadedModel& m, const RulerSettings& s, const auto& progress, const auto& cell_done) {
        return run_ruler(*m.model, m.tokenizer, s, progress, cell_done);
      },
      [](const LoadedModel& m, const RulerSettings& s, const std::string& dtype, const std::vector<RulerCell>& cells) {
        return ruler_report(m.dir.string(), m.model->config(), s, dtype, cells);
      },
      [](const std::vector<RulerCell>& cells) {
        json prompts = json::array();
        for (const RulerCell& cell : cells)
          for (const RulerTrial& t : cell.results)
            prompts.push_back({{"task", cell.task}, {"length", cell.length}, {"depth", cell.depth}, {"trial", t.trial},
                               {"ids", t.prompt}});
        return prompts;
      });
}

}  // namespace

void add_ruler(CLI::App& app) {
  auto a = std::make_shared<RulerArgs>();
  CLI::App* cmd = app.add_subcommand(
      "ruler",
      "Retrieval tasks after RULER (Hsieh et al. 2024) and Lost in the Middle: needles in a haystack, variable "
      "tracking, common and frequent words, JSON key-value lookup; the greedy answer scored by string_match_all, by "
      "task, prompt length and depth");
  cmd->footer(
      "Tasks: " + comma_list(ruler_task_names()) + " (all: every one). niah_*: 'One of the special magic numbers for KEY is: VALUE.' needles "
      "(short wording: 'The magic number for KEY is VALUE.') in a haystack of pass-key's noise sentences, of an essay's "
      "sentences (--essay, e.g. WikiText-2) or of distractor needles; keys adjective-noun words, values 7-digit "
      "numbers or uuids; multikey: 4 keys, 1 asked; multivalue: 4 values; multiquery: 4 keys asked. vt: a chain "
      "'VAR A = 12345. VAR B = VAR A.' of 4 hops, all 5 names asked. cwe: a numbered list where 10 words appear 6 "
      "times (30 from 4096 tokens on), others once (3); the 10 asked. fwe: coded words with Zipf counts; the 2nd to "
      "4th most frequent asked. kv: a JSON object of uuid keys and values; one asked. A length counts every prompt "
      "token, BOS included; haystack tasks fill it exactly (the first unit cut at the token level), cwe, fwe and kv "
      "with whole items up to it. Depth: where the first needle (of the first asked key; vt: the chain's first line) "
      "stands among the haystack tokens; the others at depths drawn per trial. Trial i draws the same keys, values "
      "and haystack in every cell (SplitMix64 from --seed). Score: the share of the reference answers that the "
      "greedy answer (up to the reference's tokens + 4) contains, ignoring case, x 100. The rules in full: "
      "tools/reference/ruler_tasks.py, which rebuilds every prompt (tools/reference/ruler_reference.py).");
  cmd->add_option("-m,--model", a->model_dir, "Model directory or GGUF file (default: models/default)")->check(not_empty());
  cmd->add_option("--tasks", a->tasks, "Tasks, e.g. niah_single_1,vt (all: every task)")
      ->delimiter(',')
      ->capture_default_str();
  cmd->add_option("--lengths", a->settings.lengths, "Prompt lengths in tokens, BOS included (required but with --merge)")
      ->delimiter(',')
      ->check(int_in(2, 1 << 24));
  cmd->add_option("--depths", a->settings.depths, "Depths of the first needle: 0 (first) to 1 (last before the question)")
      ->delimiter(',')
      ->check(real_in(0.0, 1.0))
      ->capture_default_str();
  cmd->add_option("--trials", a->settings.trials, "Trials per (task, length, depth) cell, each with its own draws")
      ->check(int_in(1, kMaxTrials))
      ->capture_default_str();
  cmd->add_option("--seed", a->settings.seed, "Seed of every draw")
      ->check(int_in(0, std::numeric_limits<long long>::max()))
      ->capture_default_str();
  cmd->add_option("--template", a->wording, "Wording: short (small models, short contexts) or ruler (RULER's own)")
      ->check(CLI::IsMember({"short", "ruler"}))
      ->capture_default_str();
  cmd->add_option("--essay", a->settings.essay_path, "Text whose sentences make the essay haystack (niah_single_2 and -3, "
                  "multikey_1, multivalue, multiquery; default: " + std::string(kSetupEssay) + ", which tools/setup.sh writes)")
      ->check(CLI::ExistingFile);
  add_threads(*cmd, a->threads);
  a->config.add_to(*cmd);
  add_quiet(*cmd, a->quiet);
  a->json.add_to(*cmd, "the settings and every cell (each trial's references, answer and score)");
  cmd->add_option("--csv", a->csv_file, "Write the cells (task, length, depth, score, trials, skipped) as CSV to this file")
      ->check(writable_file());
  cmd->add_option("--dump-prompts", a->dump_file,
                  "Write the JSON result with every prompt's token ids to this file (tools/reference/ruler_reference.py reads it)")
      ->check(writable_file());
  a->shards.add_to(*cmd, "(task, length, depth) cells");
  cmd->callback([a] { run(*a); });
}

}  // namespace pert::cli
