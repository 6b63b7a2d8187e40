// Pass-key retrieval: prompts built by the rules in passkey.hpp, answered greedily, scored.
#include "pert/passkey.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <map>
#include <memory>
#include <random>
#include <string>

#include "pert/error.hpp"
#include "pert/evaluation.hpp"
#include "pert/generate.hpp"
#include "pert/json_util.hpp"
#include "pert/positions.hpp"
#include "pert/sampler.hpp"
#include "tasks/pieces.hpp"

namespace pert {

const char* const kPasskeyFiller[5] = {"The grass is green.", "The sky is blue.", "The sun is yellow.", "Here we go.",
                                       "There and back again."};
const char* const kPasskeyQuestion = "What is the pass key? The pass key is";

std::string passkey_key_sentence(int key) {
  const std::string k = std::to_string(key);
  return "The pass key is " + k + ". Remember it. " + k + " is the pass key.";
}

namespace {

constexpr int kCycle = 5;

// What a trial draws from the seed: its key and where in the cycle its filler starts.
struct Trial {
  int key, offset;
};

std::vector<Trial> draw_trials(long long seed, int n) {
  std::mt19937_64 rng(static_cast<uint64_t>(seed));
  std::vector<Trial> t;
  for (int i = 0; i < n; ++i) {
    const int key = 10000 + int(rng() % 90000);
    t.push_back({key, int(rng() % kCycle)});
  }
  return t;
}

// The filler, the question and key sentences as token ids (pieces.hpp).
class Sentences {
 public:
  explicit Sentences(const Tokenizer& tok) : pieces_(tok) {
    for (const char* s : kPasskeyFiller) filler_.push_back(pieces_.encode(s));
    question_ = pieces_.encode(kPasskeyQuestion);
  }
  const std::vector<int>& encode(const std::string& sentence) const { return pieces_.encode(sentence); }
  const std::vector<int>& lead() const { return pieces_.lead(); }
  const std::vector<int>& filler(int i) const { return filler_[size_t(((i % kCycle) + kCycle) % kCycle)]; }
  const std::vector<int>& question() const { return question_; }
  // The shortest prompt that holds the key sentence of `key`: no filler.
  int fixed_tokens(int key) const { return int(lead().size() + encode(passkey_key_sentence(key)).size() + question_.size()); }

 private:
  PieceEncoder pieces_;
  std::vector<int> question_;
  std::vector<std::vector<int>> filler_;
};

// The prompt of trial t at (length, depth); fills in the trial's prompt facts.
std::vector<int> build_prompt(const Sentences& s, int length, double depth, const Trial& t, PasskeyTrial& out) {
  const std::vector<int>& key = s.encode(passkey_key_sentence(t.key));
  const int filler = length - s.fixed_tokens(t.key);  // >= 0: check_lengths
  int after = 0, sentences_after = 0;  // whole sentences o, o+1, ... after the key
  double best = HUGE_VAL;
  for (int m = 0, b = 0; b <= filler; b += int(s.filler(t.offset + m).size()), ++m)
    if (const double err = std::fabs(double(filler - b) - depth * filler); err < best) {
      best = err;
      after = b;
      sentences_after = m;
    }
  const int before = filler - after;
  int back = 0, have = 0;  // sentences o-1, o-2, ... until they hold `before` tokens
  while (have < before) have += int(s.filler(t.offset - ++back).size());
  std::vector<int> run;
  for (int j = back; j >= 1; --j) run.insert(run.end(), s.filler(t.offset - j).begin(), s.filler(t.offset - j).end());
  std::vector<int> ids = s.lead();
  ids.insert(ids.end(), run.end() - before, run.end());
  out.key_token = int(ids.size());
  ids.insert(ids.end(), key.begin(), key.end());
  for (int m = 0; m < sentences_after; ++m) ids.insert(ids.end(), s.filler(t.offset + m).begin(), s.filler(t.offset + m).end());
  ids.insert(ids.end(), s.question().begin(), s.question().end());
  out.filler_tokens = filler;
  out.filler_before_key = before;
  return ids;
}

// Correct iff the answer's first run of digits starts with the key.
bool answer_correct(const std::string& answer, int key) {
  const size_t a = answer.find_first_of("0123456789");
  if (a == std::string::npos) return false;
  size_t b = a;
  while (b < answer.size() && std::isdigit(static_cast<unsigned char>(answer[b]))) ++b;
  return answer.substr(a, b - a).rfind(std::to_string(key), 0) == 0;
}

// Every length against the model, before anything runs: a length too short for the key and the
// question, or whose prompt and answer run past a position table, is skipped with its reason
// (returned by length; the other lengths run, as ruler's and sweep's cells do); only when every
// length is skipped is it an error. The longest that runs must fit the memory.
std::map<int, std::string> check_lengths(const Model& model, const Sentences& s, const PasskeySettings& p,
                                         const std::vector<Trial>& trials) {
  const ModelConfig& c = model.config();
  const int max = InferenceState(model, 1, 1).max_positions();
  int longest = 0, need = 0;
  for (const Trial& t : trials) need = std::max(need, s.fixed_tokens(t.key));
  std::map<int, std::string> skipped;
  for (int n : p.lengths) {
    const std::string at = "passkey: `lengths` " + std::to_string(n) + ": ";
    if (n < need)
      skipped[n] = at + "too short for the key sentence and the question (" + std::to_string(need) +
                   " tokens with BOS); give at least " + std::to_string(need);
    else if (max > 0 && n + kPasskeyAnswerTokens - 1 > max)
      skipped[n] = at + "the prompt and its answer take " + std::to_string(n + kPasskeyAnswerTokens - 1) + " positions, " +
                   past_position_table(c.position.scheme->label(), max,
                                       "give at most " + std::to_string(max - kPasskeyAnswerTokens + 1));
    else
      longest = std::max(longest, n);
  }
  if (longest == 0)  // no length runs (each is at least 2)
    throw Error(skipped.begin()->second + (skipped.size() > 1 ? " (and every other length)" : ""));
  require_cache(model, longest + kPasskeyAnswerTokens - 1, longest, p.cache_type, "");
  return skipped;
}

}  // namespace

void validate(const PasskeySettings& p) {
  if (p.lengths.empty()) throw Error("passkey: `lengths` is empty; give at least one prompt length");
  for (int n : p.lengths)
    if (n < 2) throw Error("passkey: `lengths` must be at least 2 tokens each, got " + std::to_string(n));
  for (double d : p.depths)
    if (!(d >= 0 && d <= 1)) throw Error("passkey: `depths` must be in [0, 1] each, got " + number_text(d));
  if (p.depths.empty()) throw Error("passkey: `depths` is empty; give at least one depth");
  if (p.trials < 1 || p.trials > kMaxTrials)
    throw Error("passkey: `trials` must be from 1 to " + std::to_string(kMaxTrials) + ", got " + std::to_string(p.trials));
  if (p.seed < 0) throw Error("passkey: `seed` must be >= 0, got " + std::to_string(p.seed));
}

std::vector<PasskeyCell> run_passkey(const Model& model, const Tokenizer& tokenizer, const PasskeySettings& p,
                                     const std::function<void(long long, long long)>& progress,
                                     const std::function<void(const PasskeyCell&)>& cell_done) {
  validate(p);
  const Sentences sentences(tokenizer);
  const std::vector<Trial> trials = draw_trials(p.seed, p.trials);
  const std::map<int, std::string> skipped = check_lengths(model, sentences, p, trials);

  GenerateOptions options;
  options.n_predict = kPasskeyAnswerTokens;
  options.vocab = tokenizer.vocab_size();
  options.eos = model.config().eos_token_ids;
  SamplerParams greedy;
  greedy.temperature = 0;
  Sampler sampler(greedy);

  std::vector<PasskeyCell> cells;
  const int grid = int(p.lengths.size() * p.depths.size());
  auto wanted = [&](int index) { return !p.wanted || p.wanted(index); };
  long long total = 0, done = 0;
  for (int index = 0; index < grid; ++index)
    total += wanted(index) && !skipped.count(p.lengths[size_t(index) / p.depths.size()]) ? p.trials : 0;
  int index = 0;
  for (int length : p.lengths) {
    std::unique_ptr<InferenceState> state;  // made for the length's first wanted cell
    for (double depth : p.depths) {
      if (!wanted(index++)) continue;
      PasskeyCell cell{length, depth, 0, p.trials, 0, {}, {}};
      if (auto it = skipped.find(length); it != skipped.end()) {
        cell.skipped = it->second;
        if (cell_done) cell_done(cell);
        cells.push_back(std::move(cell));
        continue;
      }
      if (!state) state = std::make_unique<InferenceState>(model, length + kPasskeyAnswerTokens - 1, 512, 1, p.cache_type);
      for (int i = 0; i < p.trials; ++i) {
        const Trial& t = trials[size_t(i)];
        PasskeyTrial r;
        r.trial = i;
        r.key = t.key;
        r.filler_offset = t.offset;
        std::vector<int> prompt = build_prompt(sentences, length, depth, t, r);
        r.answer_ids = generate(*state, prompt, options, sampler, [](int) {}).tokens;
        r.answer = tokenizer.decode(r.answer_ids);
        r.correct = answer_correct(r.answer, t.key);
        cell.correct += r.correct;
        if (p.keep_prompts) r.prompt = std::move(prompt);
        cell.results.push_back(std::move(r));
        if (progress) progress(++done, total);
      }
      cell.accuracy = double(cell.correct) / p.trials;
      if (cell_done) cell_done(cell);
      cells.push_back(std::move(cell));
    }
  }
  return cells;
}

nlohmann::json passkey_report(const std::string& model_dir, const ModelConfig& c, const PasskeySettings& p,
                              const std::string& dtype, const std::vector<PasskeyCell>& cells) {
  nlohmann::json out = nlohmann::json::array();
  for (const PasskeyCell& cell : cells) {
    nlohmann::json results = nlohmann::json::array();
    for (const PasskeyTrial& r : cell.results)
      results.push_back({{"trial", r.trial},
                         {"key", r.key},
                         {"filler_offset", r.filler_offset},
                         {"key_token", r.key_token},
                         {"filler_tokens", r.filler_tokens},
                         {"filler_before_key", r.filler_before_key},
                         {"answer_ids", r.answer_ids},
                         {"answer", r.answer},
                         {"correct", r.correct}});
    nlohmann::json j = {{"length", cell.length},
                        {"depth", cell.depth},
                        {"accuracy", cell.skipped.empty() ? nlohmann::json(cell.accuracy) : nlohmann::json(nullptr)},
                        {"correct", cell.correct},
                        {"trials", cell.trials},
                        {"results", results}};
    if (!cell.skipped.empty()) j["skipped"] = cell.skipped;
    out.push_back(std::move(j));
  }
  nlohmann::json report = run_header(model_dir, c, dtype, cache_type_name(p.cache_type));
  report.update({{"lengths", p.lengths},
                 {"depths", p.depths},
                 {"trials", p.trials},
                 {"seed", p.seed},
                 {"answer_tokens", kPasskeyAnswerTokens},
                 {"cells", out}});
  return report;
}

}  // namespace pert
