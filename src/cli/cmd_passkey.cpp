// pert passkey: the pass-key retrieval test (the library's run_passkey, include/pert/passkey.hpp,
// where the prompt rules are) as a table, JSON or CSV, with every prompt's ids on request for
// tools/reference/passkey_reference.py.
#include <algorithm>
#include <cstdio>
#include <map>
#include <sstream>

#include "cli/cli_common.hpp"
#include "cli/grid_shards_command.hpp"
#include "pert/output_file.hpp"
#include "pert/passkey.hpp"

namespace pert::cli {

namespace {

using nlohmann::json;

struct PasskeyArgs : TaskFlags {
  PasskeySettings settings;
};

void write_csv(const std::string& path, const json& cells) {
  std::ostringstream out;
  out << "length,depth,correct,trials,accuracy,skipped\n";
  for (const json& c : cells)
    out << c["length"].get<int>() << ',' << number_text(c["depth"]) << ',' << c["correct"].get<int>() << ','
        << c["trials"].get<int>() << ',' << (c["accuracy"].is_null() ? "" : number_text(c["accuracy"])) << ','
        << (c.contains("skipped") ? "yes" : "") << "\n";
  write_file(path, out.str());
}

// A cell's name in a grid: "128 tokens at depth 0.25".
std::string passkey_cell_name(const json& cell) {
  return std::to_string(cell["length"].get<int>()) + " tokens at depth " + number_text(cell["depth"]);
}

GridCells passkey_grid(const json& result) {
  GridCells grid{{}, passkey_cell_name};
  for (const json& n : result["lengths"])
    for (const json& d : result["depths"]) grid.names.push_back(passkey_cell_name({{"length", n}, {"depth", d}}));
  return grid;
}

// Rows: lengths; columns: depths and their mean ("—" for a cell a partial merge lacks, or one
// skipped: its reason below).
void print_table(const json& result) {
  std::map<std::string, double> accuracy;
  std::vector<std::string> reasons;
  for (const json& c : result["cells"]) {
    if (!c["accuracy"].is_null()) accuracy[passkey_cell_name(c)] = c["accuracy"];
    else if (std::find(reasons.begin(), reasons.end(), c["skipped"].get<std::string>()) == reasons.end())
      reasons.push_back(c["skipped"].get<std::string>());
  }
  // (strings from a --merge file shown as text: a control character in one is escaped, not sent to the terminal)
  std::printf("%s: %s\n", printable(result["model_dir"].get<std::string>()).c_str(),
              printable(result["position"].get<std::string>()).c_str());
  std::printf("pass-key retrieval: %d trials per cell (seed %lld), greedy answer of up to %d tokens, trained length %d\n\n",
              result["trials"].get<int>(), result["seed"].get<long long>(), kPasskeyAnswerTokens,
              result["trained_length"].get<int>());
  std::printf("| length |");
  for (const json& d : result["depths"]) std::printf(" %s |", number_text(d).c_str());
  std::printf(" mean |\n|---:|");
  for (size_t i = 0; i <= result["depths"].size(); ++i) std::printf("---:|");
  std::printf("\n");
  for (const json& n : result["lengths"]) {
    std::printf("| %d |", n.get<int>());
    double sum = 0;
    size_t found = 0;
    for (const json& d : result["depths"]) {
      const auto it = accuracy.find(passkey_cell_name({{"length", n}, {"depth", d}}));
      if (it == accuracy.end()) {
        std::printf(" — |");
        continue;
      }
      sum += it->second, ++found;
      std::printf(" %.2f |", it->second);
    }
    if (found == result["depths"].size())
      std::printf(" %.2f |\n", sum / double(found));
    else
      std::printf(" — |\n");
  }
  for (const std::string& r : reasons) std::printf("\n— %s", printable(r).c_str());
  if (!reasons.empty()) std::printf("\n");
}

void run(const PasskeyArgs& a) {
  const TaskOutputs task{"passkey", passkey_grid, write_csv, print_table};
  if (merge_task(a, task)) return;
  if (a.settings.lengths.empty()) throw CLI::RequiredError("--lengths");  // required but with --merge
  check_distinct_paths({{"--json-out", a.json.file}, {"--csv", a.csv_file}, {"--dump-prompts", a.dump_file}},
                       run_inputs({a.model_dir}, a.config.files));
  run_task<PasskeySettings, PasskeyCell>(
      a, task, a.settings,
      [](const LoadedModel& m, const PasskeySettings& s, const auto& progress, const auto& cell_done) {
        return run_passkey(*m.model, m.tokenizer, s, progress, cell_done);
      },
      [](const LoadedModel& m, const PasskeySettings& s, const std::string& dtype, const std::vector<PasskeyCell>& cells) {
        return passkey_report(m.dir.string(), m.model->config(), s, dtype, cells);
      },
      [](const std::vector<PasskeyCell>& cells) {
        json prompts = json::array();
        for (const PasskeyCell& cell : cells)
          for (const PasskeyTrial& t : cell.results)
            prompts.push_back({{"length", cell.length}, {"depth", cell.depth}, {"trial", t.trial}, {"ids", t.prompt}});
        return prompts;
      });
}

}  // namespace

void add_passkey(CLI::App& app) {
  auto a = std::make_shared<PasskeyArgs>();
  CLI::App* cmd = app.add_subcommand(
      "passkey",
      "Pass-key retrieval (Mohtashami & Jaggi 2023): a 5-digit key hidden at a depth of filler text, the greedy answer "
      "checked; accuracy by prompt length and depth");
  std::string filler;
  for (const char* sentence : kPasskeyFiller) filler += (filler.empty() ? "" : " ") + std::string(sentence);
  cmd->footer(
      "Prompt: the filler \"" + filler + "\" in cycle, with \"" + passkey_key_sentence(12345) +
      "\" at a sentence boundary and \"" + kPasskeyQuestion + "\" last. A length counts every prompt token, BOS included; the answer "
      "(up to " + std::to_string(kPasskeyAnswerTokens) + " greedy tokens, which must fit the positions too) is not counted. "
      "The filler before the key is cut at the token level to make the length exact, so a prompt may start "
      "mid-sentence. Depth: the fraction of filler tokens before the key, the sentence boundary nearest to it. Trial i "
      "has the same key and filler start in every cell (both drawn from --seed). Correct iff the answer's first run of "
      "digits starts with the key.");
  cmd->add_option("-m,--model", a->model_dir, "Model directory or GGUF file (default: models/default)")->check(not_empty());
  cmd->add_option("--lengths", a->settings.lengths, "Prompt lengths in tokens, BOS included (required but with --merge)")
      ->delimiter(',')
      ->check(int_in(2, 1 << 24));
  cmd->add_option("--depths", a->settings.depths, "Depths of the key: fractions of the filler before it, 0 (first) to 1 (last)")
      ->delimiter(',')
      ->check(real_in(0.0, 1.0))
      ->capture_default_str();
  cmd->add_option("--trials", a->settings.trials, "Trials per (length, depth) cell, each with its own key")
      ->check(int_in(1, kMaxTrials))
      ->capture_default_str();
  cmd->add_option("--seed", a->settings.seed, "Seed of the keys and filler starts")
      ->check(int_in(0, std::numeric_limits<long long>::max()))
      ->capture_default_str();
  add_threads(*cmd, a->threads);
  a->config.add_to(*cmd);
  add_quiet(*cmd, a->quiet);
  a->json.add_to(*cmd, "the settings and every cell (each trial's key, answer and verdict)");
  cmd->add_option("--csv", a->csv_file, "Write the cells (length, depth, correct, trials, accuracy, skipped) as CSV to this file")
      ->check(writable_file());
  cmd->add_option("--dump-prompts", a->dump_file,
                  "Write the JSON result with every prompt's token ids to this file (tools/reference/passkey_reference.py reads it)")
      ->check(writable_file());
  a->shards.add_to(*cmd, "(length, depth) cells");
  cmd->callback([a] { run(*a); });
}

}  // namespace pert::cli
