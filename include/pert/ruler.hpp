// Retrieval tasks after RULER (Hsieh et al. 2024) and Lost in the Middle's key-value retrieval
// (Liu et al. 2023): needles in a haystack (single, multi-key, multi-value, multi-query; noise,
// essay or needle haystacks; number, word or uuid values), variable tracking, common and frequent
// words extraction, and JSON key-value lookup. Each prompt is built by the rules that
// tools/reference/ruler_tasks.py states (and checks pert against, prompt by prompt): every random choice
// from SplitMix64 per trial, haystack prompts exactly `length` tokens with the needles at unit
// boundaries by depth. The answer is greedy and scored as RULER scores it (string_match_all: the
// share of the reference answers found in it, case-insensitive). `pert ruler` and the Python
// module's Model.ruler() run it.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "pert/cache_type.hpp"
#include "pert/model.hpp"
#include "pert/tokenizer.hpp"

namespace pert {

// The wording: RULER's own templates, or short ones of the same tasks for small models and
// short contexts (pert's family at L = 128: RULER's single-needle prompt alone takes 136 tokens).
enum class RulerTemplate { Short, Ruler };
RulerTemplate parse_ruler_template(const std::string& name);  // "short" | "ruler"
const char* ruler_template_name(RulerTemplate t);

const std::vector<std::string>& ruler_task_names();  // niah_single_1 ... kv, in the tables' order
bool ruler_task_needs_essay(const std::string& task);
bool ruler_task_has_depth(const std::string& task);  // cwe and fwe have no needle to place
bool ruler_task_exact_length(const std::string& task);  // haystack tasks: exactly the length; others at most

struct RulerPrompt {
  std::vector<int> ids;                 // BOS first
  std::vector<std::string> references;  // what the answer must contain
  std::string answer;                   // what a model that solves it says (a piece after the question)
  std::vector<int> needles;             // token index of each needle or chain line, as inserted
  int budget = 0;                       // tokens the greedy answer may take: answer's tokens + kRulerAnswerSlack
};
constexpr int kRulerAnswerSlack = 4;

// An essay haystack's sentences: heading lines (" = Title = ") left out, ASCII white space
// between words, a sentence ending with a word that ends in '.', '!' or '?'.
std::vector<std::string> essay_sentences(const std::string& text);

// Builds prompts of one tokenizer, seed and wording (its pieces' ids are remembered; one thread).
class RulerPrompts {
 public:
  RulerPrompts(const Tokenizer& tokenizer, long long seed, RulerTemplate wording,
               std::vector<std::string> essay = {});
  ~RulerPrompts();
  // Error (worded by field) when the task is unknown, needs an essay it was not given, or the
  // length cannot hold its fixed text.
  RulerPrompt build(const std::string& task, int length, double depth, int trial) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

struct RulerSettings {
  std::vector<std::string> tasks;                         // names from ruler_task_names()
  std::vector<int> lengths;                               // prompt lengths in tokens, BOS included
  std::vector<double> depths = {0, 0.25, 0.5, 0.75, 1};  // of the first needle
  int trials = 5;                                         // per cell, each its own draws
  long long seed = 1234;
  RulerTemplate wording = RulerTemplate::Short;
  std::string essay_path;                                 // the essay haystack's text (essay tasks)
  CacheType cache_type = CacheType::F32;
  bool keep_prompts = false;                              // each trial's prompt ids in its result
  // Which cells run, by index in the grid (tasks, lengths, depths; cwe and fwe one depth): every
  // one when empty. A shard of the grid (`pert ruler --shard`), less the cells its file has.
  std::function<bool(int)> wanted;
};

void validate(const RulerSettings& settings);

struct RulerTrial {
  int trial = 0, prompt_tokens = 0;
  std::vector<std::string> references;
  std::vector<int> needles, answer_ids, prompt;
  std::string answer;
  double score = 0;  // share of references found, 0..1
};

struct RulerCell {
  std::string task;
  int length = 0;
  double depth = 0;
  int trials = 0;
  double score = 0;  // mean of the trials' scores × 100 (RULER's scale)
  std::vector<RulerTrial> results;
  std::string skipped;  // why the length cannot hold the task (no results), else empty
};

// Checks every setting and that every prompt and its answer fit the model before anything runs,
// then runs the cells (tasks, lengths, depths; cwe and fwe at the first depth only). A length
// too short for a task's fixed text gives that task's cells there a reason (`skipped`), not a
// score; Error when no cell is left.
// Only the `wanted` cells when given. progress(done, total) after each prompt; cell_done(cell)
// after each cell.
std::vector<RulerCell> run_ruler(const Model& model, const Tokenizer& tokenizer, const RulerSettings& settings,
                                 const std::function<void(long long, long long)>& progress = {},
                                 const std::function<void(const RulerCell&)>& cell_done = {});

double ruler_score(const std::string& answer, const std::vector<std::string>& references);  // 0..1

nlohmann::json ruler_report(const std::string& model_dir, const ModelConfig& config, const RulerSettings& settings,
                            const std::string& dtype, const std::vector<RulerCell>& cells);

}  // namespace pert
