// Retrieval tasks: every prompt checked against the model before any runs, answered greedily,
// scored by RULER's string_match_all (prompts: ruler_prompts.cpp).
#include <algorithm>
#include <map>

#include "pert/error.hpp"
#include "pert/evaluation.hpp"
#include "pert/generate.hpp"
#include "pert/json_util.hpp"
#include "pert/loaded_model.hpp"
#include "pert/passkey.hpp"
#include "pert/positions.hpp"
#include "pert/ruler.hpp"
#include "pert/sampler.hpp"
#include "tasks/pieces.hpp"

namespace pert {

namespace {

std::string ascii_lower(std::string s) {
  for (char& c : s)
    if (c >= 'A' && c <= 'Z') c = char(c - 'A' + 'a');
  return s;
}

std::vector<std::string> read_essay(const RulerSettings& p) {
  bool needed = false;
  for (const std::string& t : p.tasks) needed = needed || ruler_task_needs_essay(t);
  if (!needed) return {};
  if (p.essay_path.empty()) {
    const std::string which = comma_list(p.tasks, [](const std::string& t) { return ruler_task_needs_essay(t) ? t : ""; });
    throw Error("ruler: `tasks` " + which + ": the essay haystack needs a text; give `essay` (a text file, e.g. "
                "WikiText-2's articles, which tools/setup.sh writes to build/data/wikitext2_test_prefix.txt)");
  }
  std::string text;
  try {  // as -f's texts: a regular file or a stream, at most kMaxTextBytes, valid UTF-8
    text = read_utf8_file(p.essay_path);
  } catch (const Error& e) {
    throw Error(std::string("ruler: `essay` ") + e.what());
  }
  std::vector<std::string> sentences = essay_sentences(text);
  if (sentences.empty()) throw Error("ruler: `essay` " + p.essay_path + ": no sentences in the essay text");
  return sentences;
}

// Cells of a task: one per depth, or one (at the first depth) for a task with no needle.
std::vector<double> task_depths(const RulerSettings& p, const std::string& task) {
  return ruler_task_has_depth(task) ? p.depths : std::vector<double>{p.depths.front()};
}

// Every prompt can be built and, with its answer, fits the positions and the memory. A length
// too short for a task's fixed text, or one whose prompt and answer run past a position table,
// skips that (task, length), the reason kept (a grid of every task goes on without it); returns
// them. Only when every cell is skipped is it an error.
std::map<std::pair<std::string, int>, std::string> check_prompts(const Model& model, const RulerPrompts& prompts,
                                                                const RulerSettings& p) {
  const ModelConfig& c = model.config();
  const int max = InferenceState(model, 1, 1).max_positions();
  int longest = 0;
  std::map<std::pair<std::string, int>, std::string> skipped;
  for (const std::string& task : p.tasks)
    for (int n : p.lengths)
      for (int t = 0; t < p.trials && !skipped.count({task, n}); ++t) {
        RulerPrompt r;
        try {
          r = prompts.build(task, n, p.depths.front(), t);
        } catch (const Error& e) {
          skipped[{task, n}] = e.what();
          continue;
        }
        const int need = int(r.ids.size()) + r.budget - 1;
        if (max > 0 && need > max) {
          skipped[{task, n}] = "ruler: " + task + " at `lengths` " + std::to_string(n) + ": the prompt and its answer take " +
                               std::to_string(need) + " positions, " +
                               past_position_table(c.position.scheme->label(), max,
                                                   "give at most " + std::to_string(max - r.budget + 1));
          continue;
        }
        longest = std::max(longest, need);
      }
  if (skipped.size() == p.tasks.size() * p.lengths.size())
    throw Error(skipped.begin()->second + (skipped.size() > 1 ? " (and every other task and length)" : ""));
  require_cache(model, longest, longest, p.cache_type, "ruler: ");
  return skipped;
}

}  // namespace

double ruler_score(const std::string& answer, const std::vector<std::string>& references) {
  if (references.empty()) return 0;
  const std::string a = ascii_lower(answer);
  int found = 0;
  for (const std::string& r : references) found += a.find(ascii_lower(r)) != std::string::npos;
  return double(found) / double(references.size());
}

void validate(const RulerSettings& p) {
  if (p.tasks.empty()) throw Error("ruler: `tasks` is empty; give at least one of " + comma_list(ruler_task_names()));
  for (const std::string& t : p.tasks)
    if (std::find(ruler_task_names().begin(), ruler_task_names().end(), t) == ruler_task_names().end())
      throw Error("ruler: `tasks`: no task \"" + t + "\"");
  if (p.lengths.empty()) throw Error("ruler: `lengths` is empty; give at least one prompt length");
  for (int n : p.lengths)
    if (n < 2) throw Error("ruler: `lengths` must be at least 2 tokens each, got " + std::to_string(n));
  if (p.depths.empty()) throw Error("ruler: `depths` is empty; give at least one depth");
  for (double d : p.depths)
    if (!(d >= 0 && d <= 1)) throw Error("ruler: `depths` must be in [0, 1] each, got " + number_text(d));
  if (p.trials < 1 || p.trials > kMaxTrials)
    throw Error("ruler: `trials` must be from 1 to " + std::to_string(kMaxTrials) + ", got " + std::to_string(p.trials));
  if (p.seed < 0) throw Error("ruler: `seed` must be >= 0, got " + std::to_string(p.seed));
}

std::vector<RulerCell> run_ruler(const Model& model, const Tokenizer& tokenizer, const RulerSettings& p,
                                 const std::function<void(long long, long long)>& progress,
                                 const std::function<void(const RulerCell&)>& cell_done) {
  validate(p);
  const RulerPrompts prompts(tokenizer, p.seed, p.wording, read_essay(p));
  const auto skipped = check_prompts(model, prompts, p);

  GenerateOptions options;
  options.vocab = tokenizer.vocab_size();
  options.eos = model.config().eos_token_ids;
  SamplerParams greedy;
  greedy.temperature = 0;
  Sampler sampler(greedy);

  auto wanted = [&](int index) { return !p.wanted || p.wanted(index); };
  long long total = 0, done = 0;
  int index = 0;
  for (const std::string& task : p.tasks)
    for (int length : p.lengths)
      for (size_t d = 0; d < task_depths(p, task).size(); ++d)
        if (wanted(index++) && !skipped.count({task, length})) total += p.trials;
  std::vector<RulerCell> cells;
  index = 0;
  for (const std::string& task : p.tasks)
    for (int length : p.lengths) {
      std::unique_ptr<InferenceState> state;  // sized for this length's longest prompt and answer
      for (double depth : task_depths(p, task)) {
        if (!wanted(index++)) continue;
        RulerCell cell{task, length, depth, p.trials, 0, {}, {}};
        if (auto it = skipped.find({task, length}); it != skipped.end()) {
          cell.skipped = it->second;
          if (cell_done) cell_done(cell);
          cells.push_back(std::move(cell));
          continue;
        }
        for (int i = 0; i < p.trials; ++i) {
          RulerPrompt prompt = prompts.build(task, length, depth, i);
          const int need = int(prompt.ids.size()) + prompt.budget - 1;
          if (!state || state->n_ctx() < need) state = std::make_unique<InferenceState>(model, need, 512, 1, p.cache_type);
          options.n_predict = prompt.budget;
          RulerTrial r;
          r.trial = i;
          r.prompt_tokens = int(prompt.ids.size());
          r.answer_ids = generate(*state, prompt.ids, options, sampler, [](int) {}).tokens;
          r.answer = tokenizer.decode(r.answer_ids);
          r.score = ruler_score(r.answer, prompt.references);
          r.references = std::move(prompt.references);
          r.needles = std::move(prompt.needles);
          if (p.keep_prompts) r.prompt = std::move(prompt.ids);
          cell.score += r.score;
          cell.results.push_back(std::move(r));
          if (progress) progress(++done, total);
        }
        cell.score = 100.0 * cell.score / p.trials;
        if (cell_done) cell_done(cell);
        cells.push_back(std::move(cell));
      }
    }
  return cells;
}

nlohmann::json ruler_report(const std::string& model_dir, const ModelConfig& c, const RulerSettings& p,
                            const std::string& dtype, const std::vector<RulerCell>& cells) {
  nlohmann::json out = nlohmann::json::array();
  for (const RulerCell& cell : cells) {
    nlohmann::json results = nlohmann::json::array();
    for (const RulerTrial& r : cell.results) {
      nlohmann::json j = {{"trial", r.trial},       {"prompt_tokens", r.prompt_tokens}, {"references", r.references},
                          {"needle_tokens", r.needles}, {"answer_ids", r.answer_ids},   {"answer", r.answer},
                          {"score", r.score}};
      if (!r.prompt.empty()) j["prompt"] = r.prompt;
      results.push_back(std::move(j));
    }
    nlohmann::json j = {{"task", cell.task},
                        {"length", cell.length},
                        {"depth", ruler_task_has_depth(cell.task) ? nlohmann::json(cell.depth) : nlohmann::json(nullptr)},
                        {"score", cell.skipped.empty() ? nlohmann::json(cell.score) : nlohmann::json(nullptr)},
                        {"trials", cell.trials},
                        {"results", results}};
    if (!cell.skipped.empty()) j["skipped"] = cell.skipped;
    out.push_back(std::move(j));
  }
  nlohmann::json report = run_header(model_dir, c, dtype, cache_type_name(p.cache_type));
  report.update({{"tasks", p.tasks},
                 {"lengths", p.lengths},
                 {"depths", p.depths},
                 {"trials", p.trials},
                 {"seed", p.seed},
                 {"template", ruler_template_name(p.wording)},
                 {"essay", p.essay_path},
                 {"answer_slack", kRulerAnswerSlack},
                 {"cells", out}});
  return report;
}

}  // namespace pert
