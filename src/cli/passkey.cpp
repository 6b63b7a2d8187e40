// pert passkey: the pass-key retrieval test of Mohtashami & Jaggi 2023 (docs/design.md), as the
// PI, YaRN, LongLoRA and Self-Extend papers run it: a key hidden at a depth of filler text, a
// question at the end, the greedy answer checked; accuracy per (prompt length, depth).
//
// How a prompt is built (tools/passkey_reference.py checks every rule):
// - Its length N counts every prompt token, the tokenizer's leading special tokens (BOS)
//   included; the answer's tokens come after and are not counted.
// - Each sentence (filler, key sentence, question) is encoded on its own and the ids joined, as
//   the tokenizer joins sentences of one text ("a. b": SentencePiece's leading space; a
//   tokenizer without one gets " " + sentence). For SentencePiece-style tokenizers these are the
//   ids of the whole text.
// - The filler is the paper's five sentences in cycle. Trial i draws a 5-digit key and a start
//   offset o in the cycle from --seed, the same for every cell, so cells differ only in
//   length and depth. After the key sentence come whole filler sentences from sentence o on;
//   before it, the filler sentences that precede o in the cycle, cut at the token level to
//   exactly fill N (a window onto a longer text: the prompt may start mid-sentence).
// - Depth d: of the F filler tokens, the number before the key is the one nearest d·F among the
//   sentence boundaries after which the key can go (0: the key first, 1: last before the question).
// - The answer: up to kAnswerTokens greedy tokens (stopping at end-of-text); correct iff its
//   first run of digits starts with the key.
#include <omp.h>

#include <cctype>
#include <cmath>
#include <cstdio>
#include <random>
#include <sstream>

#include "common.hpp"
#include "pert/error.hpp"
#include "pert/output_file.hpp"
#include "pert/generate.hpp"

namespace pert::cli {

namespace {

using nlohmann::json;

constexpr const char* kFiller[] = {"The grass is green.", "The sky is blue.", "The sun is yellow.", "Here we go.",
                                   "There and back again."};
constexpr int kCycle = 5;
constexpr const char* kQuestion = "What is the pass key? The pass key is";
constexpr int kAnswerTokens = 8;  // a leading space and five digits, with room to spare
constexpr long long kDefaultSeed = 1234;

struct PasskeyArgs {
  std::string model_dir, csv_file, dump_file;
  std::vector<int> lengths;
  std::vector<double> depths = {0, 0.25, 0.5, 0.75, 1};
  int trials = 5, threads = 0;
  long long seed = kDefaultSeed;
  bool quiet = false;
  JsonFlags json;
  ConfigFlags config;
};

std::string key_sentence(int key) {
  const std::string k = std::to_string(key);
  return "The pass key is " + k + ". Remember it. " + k + " is the pass key.";
}

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

// The sentences as token ids, joined as the tokenizer joins the sentences of one text.
class Sentences {
 public:
  explicit Sentences(const Tokenizer& tok) : tok_(tok), lead_(tok.prefix_special()) {
    const std::vector<int> a = tok.encode("a."), b = tok.encode("b");
    std::vector<int> ab = a;
    ab.insert(ab.end(), b.begin(), b.end());
    own_space_ = tok.decode(ab) == "a. b";  // SentencePiece's "▁b"; byte-level BPE would read "a.b"
    for (const char* s : kFiller) filler_.push_back(encode(s));
    question_ = encode(kQuestion);
  }
  std::vector<int> encode(const std::string& sentence) const { return tok_.encode(own_space_ ? sentence : " " + sentence); }
  const std::vector<int>& lead() const { return lead_; }
  const std::vector<int>& filler(int i) const { return filler_[size_t(((i % kCycle) + kCycle) % kCycle)]; }
  const std::vector<int>& question() const { return question_; }
  // The shortest prompt that holds the key sentence of `key`: no filler.
  int fixed_tokens(int key) const { return int(lead_.size() + encode(key_sentence(key)).size() + question_.size()); }

 private:
  const Tokenizer& tok_;
  std::vector<int> lead_, question_;
  std::vector<std::vector<int>> filler_;
  bool own_space_ = true;
};

struct Prompt {
  std::vector<int> ids;
  int key_token = 0;  // index of the key sentence's first token
  int filler = 0;     // filler tokens in all
  int before = 0;     // ... of them before the key
};

Prompt build_prompt(const Sentences& s, int length, double depth, const Trial& t) {
  const std::vector<int> key = s.encode(key_sentence(t.key));
  Prompt p;
  p.filler = length - s.fixed_tokens(t.key);
  if (p.filler < 0) throw Error("passkey: a prompt of " + std::to_string(length) + " tokens cannot hold the key");
  int after = 0, sentences_after = 0;  // whole sentences o, o+1, ... after the key
  double best = HUGE_VAL;
  for (int m = 0, b = 0; b <= p.filler; b += int(s.filler(t.offset + m).size()), ++m)
    if (const double err = std::fabs(double(p.filler - b) - depth * p.filler); err < best) {
      best = err;
      after = b;
      sentences_after = m;
    }
  p.before = p.filler - after;
  int back = 0, have = 0;  // sentences o-1, o-2, ... until they hold `before` tokens
  while (have < p.before) have += int(s.filler(t.offset - ++back).size());
  std::vector<int> run;
  for (int j = back; j >= 1; --j) run.insert(run.end(), s.filler(t.offset - j).begin(), s.filler(t.offset - j).end());
  p.ids = s.lead();
  p.ids.insert(p.ids.end(), run.end() - p.before, run.end());
  p.key_token = int(p.ids.size());
  p.ids.insert(p.ids.end(), key.begin(), key.end());
  for (int m = 0; m < sentences_after; ++m) p.ids.insert(p.ids.end(), s.filler(t.offset + m).begin(), s.filler(t.offset + m).end());
  p.ids.insert(p.ids.end(), s.question().begin(), s.question().end());
  return p;
}

// Correct iff the answer's first run of digits starts with the key.
bool answer_correct(const std::string& answer, int key) {
  const size_t a = answer.find_first_of("0123456789");
  if (a == std::string::npos) return false;
  size_t b = a;
  while (b < answer.size() && std::isdigit(static_cast<unsigned char>(answer[b]))) ++b;
  return answer.substr(a, b - a).rfind(std::to_string(key), 0) == 0;
}

// Every length fits the model, the prompts and the memory before anything runs.
void check_lengths(const LoadedModel& m, const Sentences& s, const PasskeyArgs& a, const std::vector<Trial>& trials) {
  const ModelConfig& c = m.model->config();
  const int max = InferenceState(*m.model, 1, 1).max_positions();
  int longest = 0, need = 0;
  for (const Trial& t : trials) need = std::max(need, s.fixed_tokens(t.key));
  for (int n : a.lengths) {
    if (n < need)
      throw Error("--lengths " + std::to_string(n) + ": too short for the key sentence and the question (" +
                  std::to_string(need) + " tokens with BOS); give at least " + std::to_string(need));
    if (max > 0 && n + kAnswerTokens - 1 > max)
      throw Error("--lengths " + std::to_string(n) + ": the prompt and its answer take " +
                  std::to_string(n + kAnswerTokens - 1) + " positions, past the " + c.position.scheme->label() +
                  " position table (" + std::to_string(max) + " positions); give at most " +
                  std::to_string(max - kAnswerTokens + 1) +
                  (c.position.type() == "learned" ? ", or --set position.beyond=clamp to reuse the last one" : ""));
    longest = std::max(longest, n);
  }
  try {  // the largest cache, refused here if it cannot be had
    InferenceState(*m.model, longest + kAnswerTokens - 1, 512, 1, a.config.kv_type());
  } catch (const Error& e) {  // its advice names `n_ctx`, which passkey's words make --lengths
    throw Error("--lengths " + std::to_string(longest) + ": " + e.what());
  }
}

std::string number(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%g", v);
  return b;
}

void write_csv(const std::string& path, const json& cells) {
  std::ostringstream out;
  out << "length,depth,correct,trials,accuracy\n";
  for (const json& c : cells)
    out << c["length"].get<int>() << ',' << number(c["depth"]) << ',' << c["correct"].get<int>() << ','
        << c["trials"].get<int>() << ',' << number(c["accuracy"]) << "\n";
  write_file(path, out.str());
}

void print_table(const json& result) {
  const json& cells = result["cells"];
  std::printf("%s: %s\n", result["model_dir"].get<std::string>().c_str(), result["position"].get<std::string>().c_str());
  std::printf("pass-key retrieval: %d trials per cell (seed %lld), greedy answer of up to %d tokens, trained length %d\n\n",
              result["trials"].get<int>(), result["seed"].get<long long>(), kAnswerTokens,
              result["trained_length"].get<int>());
  std::printf("| length |");
  for (const json& d : result["depths"]) std::printf(" %s |", number(d).c_str());
  std::printf(" mean |\n|---:|");
  for (size_t i = 0; i <= result["depths"].size(); ++i) std::printf("---:|");
  std::printf("\n");
  const size_t per_row = result["depths"].size();
  for (size_t row = 0; row * per_row < cells.size(); ++row) {
    std::printf("| %d |", cells[row * per_row]["length"].get<int>());
    double sum = 0;
    for (size_t i = 0; i < per_row; ++i) {
      const double acc = cells[row * per_row + i]["accuracy"];
      sum += acc;
      std::printf(" %.2f |", acc);
    }
    std::printf(" %.2f |\n", sum / double(per_row));
  }
}

void run(const PasskeyArgs& a) {
  check_distinct_paths({{"--json-out", a.json.file}, {"--csv", a.csv_file}, {"--dump-prompts", a.dump_file}},
                       run_inputs({a.model_dir}, a.config.files));
  set_threads(a.threads);
  const LoadedModel m = load_cli_model(resolve_model_dir(a.model_dir), a.config.overrides(), a.config.weight_type());
  const ModelConfig& c = m.model->config();
  const Sentences sentences(m.tokenizer);
  const std::vector<Trial> trials = draw_trials(a.seed, a.trials);
  check_lengths(m, sentences, a, trials);

  GenerateOptions options;
  options.n_predict = kAnswerTokens;
  options.vocab = m.tokenizer.vocab_size();
  options.eos = c.eos_token_ids;
  SamplerParams greedy;
  greedy.temperature = 0;
  Sampler sampler(greedy);

  json cells = json::array(), prompts = json::array();
  Progress bar("passkey", "prompts", a.quiet);
  const long long total = (long long)a.lengths.size() * (long long)a.depths.size() * a.trials;
  long long done = 0;
  for (int length : a.lengths) {
    InferenceState state(*m.model, length + kAnswerTokens - 1, 512, 1, a.config.kv_type());
    for (double depth : a.depths) {
      json results = json::array();
      int correct = 0;
      for (int i = 0; i < a.trials; ++i) {
        const Prompt p = build_prompt(sentences, length, depth, trials[size_t(i)]);
        const GenerateResult r = generate(state, p.ids, options, sampler, [](int) {});
        const std::string answer = m.tokenizer.decode(r.tokens);
        const bool ok = answer_correct(answer, trials[size_t(i)].key);
        correct += ok;
        results.push_back({{"trial", i},
                           {"key", trials[size_t(i)].key},
                           {"filler_offset", trials[size_t(i)].offset},
                           {"key_token", p.key_token},
                           {"filler_tokens", p.filler},
                           {"filler_before_key", p.before},
                           {"answer_ids", r.tokens},
                           {"answer", answer},
                           {"correct", ok}});
        if (!a.dump_file.empty())
          prompts.push_back({{"length", length}, {"depth", depth}, {"trial", i}, {"ids", p.ids}});
        bar.update(++done, total);
      }
      cells.push_back({{"length", length},
                       {"depth", depth},
                       {"accuracy", double(correct) / a.trials},
                       {"correct", correct},
                       {"trials", a.trials},
                       {"results", results}});
    }
  }
  bar.finish();

  json result = {{"model_dir", m.dir.string()},
                 {"position", describe_position(c)},
                 {"position_label", position_label(c)},
                 {"config", a.config.files},
                 {"set", a.config.sets},
                 {"trained_length", c.max_position_embeddings},
                 {"lengths", a.lengths},
                 {"depths", a.depths},
                 {"trials", a.trials},
                 {"seed", a.seed},
                 {"answer_tokens", kAnswerTokens},
                 {"threads", omp_get_max_threads()},
                 {"dtype", resolved_dtype(a.config.dtype, m.dir)},
                 {"cache_type", a.config.cache_type},
                 {"cells", cells}};
  if (!a.dump_file.empty()) {
    json dump = result;
    dump["prompts"] = prompts;
    write_json(a.dump_file, dump);
  }
  if (!a.csv_file.empty()) write_csv(a.csv_file, cells);
  if (a.json.write(result)) return;
  print_table(result);
}

}  // namespace

void add_passkey(CLI::App& app) {
  auto a = std::make_shared<PasskeyArgs>();
  CLI::App* cmd = app.add_subcommand(
      "passkey",
      "Pass-key retrieval (Mohtashami & Jaggi 2023): a 5-digit key hidden at a depth of filler text, the greedy answer "
      "checked; accuracy by prompt length and depth");
  cmd->footer(
      "Prompt: the filler \"The grass is green. The sky is blue. The sun is yellow. Here we go. There and back "
      "again.\" in cycle, with \"The pass key is NNNNN. Remember it. NNNNN is the pass key.\" at a sentence boundary "
      "and \"What is the pass key? The pass key is\" last. A length counts every prompt token, BOS included; the answer "
      "(up to " + std::to_string(kAnswerTokens) + " greedy tokens, which must fit the positions too) is not counted. "
      "The filler before the key is cut at the token level to make the length exact, so a prompt may start "
      "mid-sentence. Depth: the fraction of filler tokens before the key, the sentence boundary nearest to it. Trial i "
      "has the same key and filler start in every cell (both drawn from --seed). Correct iff the answer's first run of "
      "digits starts with the key.");
  cmd->add_option("-m,--model", a->model_dir, "Model directory or GGUF file (default: models/default)")->check(not_empty());
  cmd->add_option("--lengths", a->lengths, "Prompt lengths in tokens, BOS included")
      ->delimiter(',')
      ->required()
      ->check(int_in(2, 1 << 24));
  cmd->add_option("--depths", a->depths, "Depths of the key: fractions of the filler before it, 0 (first) to 1 (last)")
      ->delimiter(',')
      ->check(real_in(0.0, 1.0))
      ->capture_default_str();
  cmd->add_option("--trials", a->trials, "Trials per (length, depth) cell, each with its own key")
      ->check(int_in(1, 1 << 20))
      ->capture_default_str();
  cmd->add_option("--seed", a->seed, "Seed of the keys and filler starts")
      ->check(int_in(0, std::numeric_limits<long long>::max()))
      ->capture_default_str();
  add_threads(*cmd, a->threads);
  a->config.add_to(*cmd);
  add_quiet(*cmd, a->quiet);
  a->json.add_to(*cmd, "the settings and every cell (each trial's key, answer and verdict)");
  cmd->add_option("--csv", a->csv_file, "Write the cells (length, depth, correct, trials, accuracy) as CSV to this file")
      ->check(writable_file());
  cmd->add_option("--dump-prompts", a->dump_file,
                  "Write the JSON result with every prompt's token ids to this file (tools/passkey_reference.py reads it)")
      ->check(writable_file());
  cmd->callback([a] { run(*a); });
}

}  // namespace pert::cli
