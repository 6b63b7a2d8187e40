// Pass-key retrieval (Mohtashami & Jaggi 2023), as the PI, YaRN, LongLoRA and Self-Extend papers
// run it: a 5-digit key hidden at a depth of filler text, a question at the end, the greedy
// answer checked; accuracy per (prompt length, depth). `pert passkey` and the Python module's
// Model.passkey() run it; docs/results/passkey.md shows what it finds.
//
// How a prompt is built (tools/reference/passkey_reference.py rebuilds every prompt by these rules):
// - Its length N counts every prompt token, the tokenizer's leading special tokens (BOS)
//   included; the answer's tokens come after and are not counted.
// - Each sentence (filler, key sentence, question) is encoded on its own and the ids joined, as
//   the tokenizer joins sentences of one text ("a. b": SentencePiece's leading space; a
//   tokenizer without one gets " " + sentence).
// - The filler is the paper's five sentences in cycle. Trial i draws a 5-digit key and a start
//   offset o in the cycle from the seed, the same for every cell, so cells differ only in
//   length and depth. After the key sentence come whole filler sentences from sentence o on;
//   before it, the filler sentences that precede o in the cycle, cut at the token level to
//   exactly fill N (a window onto a longer text: the prompt may start mid-sentence).
// - Depth d: of the F filler tokens, the number before the key is the one nearest d·F among the
//   sentence boundaries after which the key can go (0: the key first, 1: last before the question).
// - The answer: up to kPasskeyAnswerTokens greedy tokens (stopping at end-of-text); correct iff
//   its first run of digits starts with the key.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "pert/cache_type.hpp"
#include "pert/model.hpp"
#include "pert/tokenizer.hpp"

namespace pert {

constexpr int kPasskeyAnswerTokens = 8;  // a leading space and five digits, with room to spare

// The paper's filler sentences, the key sentence of a key, and the question.
extern const char* const kPasskeyFiller[5];
extern const char* const kPasskeyQuestion;
std::string passkey_key_sentence(int key);

// The most trials a cell may ask for (pass-key and ruler): every trial's draws are made up front.
inline constexpr int kMaxTrials = 1 << 20;

struct PasskeySettings {
  std::vector<int> lengths;                               // prompt lengths in tokens, BOS included
  std::vector<double> depths = {0, 0.25, 0.5, 0.75, 1};  // fractions of the filler before the key
  int trials = 5;                                         // per (length, depth) cell, each its own key (1..kMaxTrials)
  long long seed = 1234;                                  // of the keys and the filler starts
  CacheType cache_type = CacheType::F32;
  bool keep_prompts = false;                              // each trial's prompt ids in its result
  // Which cells run, by index in the grid (lengths, then depths): every one when empty. A shard
  // of the grid (`pert passkey --shard`), less the cells its file has.
  std::function<bool(int)> wanted;
};

// Every setting in range, pert::Error worded by field (error.hpp) otherwise.
void validate(const PasskeySettings& settings);

struct PasskeyTrial {
  int trial = 0, key = 0, filler_offset = 0;
  int key_token = 0;          // index of the key sentence's first token
  int filler_tokens = 0;      // filler tokens in all ...
  int filler_before_key = 0;  // ... and those before the key
  std::vector<int> answer_ids;
  std::string answer;
  bool correct = false;
  std::vector<int> prompt;    // with keep_prompts
};

struct PasskeyCell {
  int length = 0;
  double depth = 0;
  int correct = 0, trials = 0;
  double accuracy = 0;
  std::vector<PasskeyTrial> results;
  // Why the cell did not run ("" when it did): its length is too short for the key and the
  // question, or its prompt and answer run past the position table. The other cells still run.
  std::string skipped;
};

// Checks the settings and every length against the model (the key must fit, the prompt and its
// answer must fit the positions and the memory) before anything runs, then runs every cell in
// order (lengths, then depths), or those `wanted`. progress(done, total) after each prompt;
// cell_done(cell) after each cell.
std::vector<PasskeyCell> run_passkey(const Model& model, const Tokenizer& tokenizer, const PasskeySettings& settings,
                                     const std::function<void(long long, long long)>& progress = {},
                                     const std::function<void(const PasskeyCell&)>& cell_done = {});

// What `pert passkey --json` and Model.passkey() report: the model, its positions, the
// settings, threads and precision, and every cell with each trial's key, answer and verdict.
nlohmann::json passkey_report(const std::string& model_dir, const ModelConfig& config, const PasskeySettings& settings,
                              const std::string& dtype, const std::vector<PasskeyCell>& cells);

}  // namespace pert
