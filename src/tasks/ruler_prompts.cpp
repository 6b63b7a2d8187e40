// The retrieval tasks' prompts, by the rules tools/reference/ruler_tasks.py states in its docstring (the
// same rules there in Python check these prompts token by token: tests/reference/ruler_test.py).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <map>
#include <set>
#include <sstream>
#include <string>

#include "pert/error.hpp"
#include "pert/ruler.hpp"
#include "tasks/pieces.hpp"

namespace pert {

namespace {

constexpr uint64_t kGolden = 0x9E3779B97F4A7C15ull;
constexpr double kZeta2 = 3.14159265358979323846 * 3.14159265358979323846 / 6;  // fwe's Zipf normaliser
const char* const kNoise[5] = {"The grass is green.", "The sky is blue.", "The sun is yellow.", "Here we go.",
                               "There and back again."};
const char* const kWordList =
#include "ruler_words.inc"
    ;

__extension__ typedef unsigned __int128 u128;  // (GCC's and Clang's)

// SplitMix64 (Steele, Lea and Flood 2014); below(n) = (next · n) >> 64.
class SplitMix {
 public:
  SplitMix(long long seed, int trial) : state_(uint64_t(seed) + uint64_t(trial) * kGolden) {}
  uint64_t next() {
    uint64_t z = (state_ += kGolden);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  uint64_t below(uint64_t n) { return uint64_t(u128(next()) * n >> 64); }
  double fraction() { return double(below(1001)) / 1000; }  // a drawn depth, 0.000 .. 1.000

 private:
  uint64_t state_;
};

struct Words {
  std::vector<std::string> adjectives, nouns;
  Words() {
    std::istringstream in(kWordList);
    std::vector<std::string>* current = nullptr;
    for (std::string line; std::getline(in, line);) {
      if (line.empty() || line[0] == '#') continue;
      if (line == "adjectives:") current = &adjectives;
      else if (line == "nouns:") current = &nouns;
      else if (current) current->push_back(line);
    }
  }
};
const Words& word_lists() {
  static const Words w;
  return w;
}

std::string draw_word(SplitMix& rng) {
  const Words& w = word_lists();
  const std::string& a = w.adjectives[rng.below(w.adjectives.size())];
  return a + "-" + w.nouns[rng.below(w.nouns.size())];
}
std::string draw_number(SplitMix& rng) { return std::to_string(1000000 + rng.below(9000000)); }
std::string draw_uuid(SplitMix& rng) {
  uint64_t a = rng.next(), b = rng.next();
  a = (a & ~(uint64_t(0xF) << 12)) | (uint64_t(0x4) << 12);  // version 4
  b = (b & ~(uint64_t(0x3) << 62)) | (uint64_t(0x2) << 62);  // variant 10xx
  char h[33];
  std::snprintf(h, sizeof h, "%016llx%016llx", (unsigned long long)a, (unsigned long long)b);
  const std::string s(h);
  return s.substr(0, 8) + "-" + s.substr(8, 4) + "-" + s.substr(12, 4) + "-" + s.substr(16, 4) + "-" + s.substr(20);
}
std::string draw(const std::string& kind, SplitMix& rng) {
  return kind == "word" ? draw_word(rng) : kind == "number" ? draw_number(rng) : draw_uuid(rng);
}

template <class T>
void shuffle(std::vector<T>& items, SplitMix& rng) {  // Fisher–Yates, from the last item down
  for (size_t i = items.size(); i-- > 1;) std::swap(items[i], items[rng.below(i + 1)]);
}

// RULER's list of keys: "a", "a and b", "a, b, and c".
std::string listing(const std::vector<std::string>& items) {
  if (items.size() == 1) return items[0];
  if (items.size() == 2) return items[0] + " and " + items[1];
  std::string s;
  for (size_t i = 0; i + 1 < items.size(); ++i) s += items[i] + ", ";
  return s + "and " + items.back();
}

struct NiahSpec {
  const char *haystack, *key, *value;
  int keys, values, queries;
};
const std::map<std::string, NiahSpec>& niah_tasks() {
  static const std::map<std::string, NiahSpec> t = {
      {"niah_single_1", {"noise", "word", "number", 1, 1, 1}},   {"niah_single_2", {"essay", "word", "number", 1, 1, 1}},
      {"niah_single_3", {"essay", "word", "uuid", 1, 1, 1}},     {"niah_multikey_1", {"essay", "word", "number", 4, 1, 1}},
      {"niah_multikey_2", {"needle", "word", "number", 1, 1, 1}}, {"niah_multikey_3", {"needle", "uuid", "uuid", 1, 1, 1}},
      {"niah_multivalue", {"essay", "word", "number", 1, 4, 1}}, {"niah_multiquery", {"essay", "word", "number", 4, 1, 4}}};
  return t;
}

// A needle sentence with its key and value in place.
std::string needle_text(RulerTemplate w, const std::string& value_kind, const std::string& key, const std::string& value) {
  return w == RulerTemplate::Ruler ? "One of the special magic " + value_kind + "s for " + key + " is: " + value + "."
                                   : "The magic " + value_kind + " for " + key + " is " + value + ".";
}

// A trial's haystack units, drawn as far as a prompt needs them.
class Stream {
 public:
  Stream(std::string kind, SplitMix& rng, const std::vector<std::string>* essay = nullptr)
      : kind_(std::move(kind)), rng_(rng), essay_(essay) {
    if (kind_ == "noise") start_ = rng.below(5);
    else if (kind_ == "essay") start_ = rng.below(essay->size());
  }
  void distractors(RulerTemplate w, std::string key_kind, std::string value_kind, std::set<std::string> taken) {
    wording_ = w, key_kind_ = std::move(key_kind), value_kind_ = std::move(value_kind), taken_ = std::move(taken);
  }
  const std::string& unit(size_t i) {
    while (units_.size() <= i) {
      const size_t j = units_.size();
      if (kind_ == "noise") {
        units_.push_back(kNoise[(start_ + j) % 5]);
      } else if (kind_ == "essay") {
        units_.push_back((*essay_)[(start_ + j) % essay_->size()]);
      } else {  // a distractor needle: a fresh key (never one of the trial's) and value
        std::string key = draw(key_kind_, rng_);
        while (taken_.count(key)) key = draw(key_kind_, rng_);
        const std::string value = draw(value_kind_, rng_);
        units_.push_back(needle_text(wording_, value_kind_, key, value));
      }
    }
    return units_[i];
  }

 private:
  std::string kind_;
  SplitMix& rng_;
  const std::vector<std::string>* essay_;
  uint64_t start_ = 0;
  std::vector<std::string> units_;
  RulerTemplate wording_ = RulerTemplate::Short;
  std::string key_kind_, value_kind_;
  std::set<std::string> taken_;
};

struct Insert {
  double depth;
  std::string text;
};

void append(std::vector<int>& ids, const std::vector<int>& more) { ids.insert(ids.end(), more.begin(), more.end()); }

// The body of a haystack prompt: the inserts among the stream's units, exactly `length` − fixed
// tokens; where[i] is the body index of insert i's first token.
std::vector<int> fill(const PieceEncoder& enc, int length, int fixed, Stream& stream, const std::vector<Insert>& inserts,
                      std::vector<int>& where) {
  long long F = length - fixed;
  for (const Insert& x : inserts) F -= (long long)enc.encode(x.text).size();
  if (F < 0)
    throw Error("`lengths` " + std::to_string(length) + ": too short for the task's fixed text (" +
                std::to_string(length - F) + " tokens with BOS); give at least " + std::to_string(length - F));
  // The stream's first units, the fewest that hold F tokens; their last F kept (a window onto the text).
  std::vector<int> flat;
  std::vector<long long> ends;
  while ((long long)flat.size() < F) {
    append(flat, enc.encode(stream.unit(ends.size())));
    ends.push_back((long long)flat.size());
  }
  const long long drop = (long long)flat.size() - F;
  std::vector<long long> bounds{0};
  for (long long e : ends)
    if (e > drop) bounds.push_back(e - drop);
  // Each insert's unit boundary: the nearest to depth·F, ties the earlier.
  std::vector<size_t> at(inserts.size(), 0);
  for (size_t i = 0; i < inserts.size(); ++i) {
    const double target = inserts[i].depth * double(F);
    for (size_t b = 1; b < bounds.size(); ++b)
      if (std::fabs(double(bounds[b]) - target) < std::fabs(double(bounds[at[i]]) - target)) at[i] = b;
  }
  std::vector<size_t> order(inserts.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return at[a] != at[b] ? at[a] < at[b] : inserts[a].depth < inserts[b].depth;
  });
  std::vector<int> ids;
  where.assign(inserts.size(), 0);
  size_t next = 0;
  for (size_t b = 0; b < bounds.size(); ++b) {
    for (; next < order.size() && at[order[next]] == b; ++next) {
      where[order[next]] = int(ids.size());
      append(ids, enc.encode(inserts[order[next]].text));
    }
    if (b + 1 < bounds.size()) ids.insert(ids.end(), flat.begin() + drop + bounds[b], flat.begin() + drop + bounds[b + 1]);
  }
  return ids;
}

std::string too_short(int length, const std::string& what) {
  return "`lengths` " + std::to_string(length) + ": too short for " + what;
}

}  // namespace

RulerTemplate parse_ruler_template(const std::string& name) {
  if (name == "short") return RulerTemplate::Short;
  if (name == "ruler") return RulerTemplate::Ruler;
  throw Error("ruler: `template` must be short or ruler, got \"" + name + "\"");
}
const char* ruler_template_name(RulerTemplate t) { return t == RulerTemplate::Ruler ? "ruler" : "short"; }

const std::vector<std::string>& ruler_task_names() {
  static const std::vector<std::string> names = {
      "niah_single_1", "niah_single_2", "niah_single_3",   "niah_multikey_1", "niah_multikey_2", "niah_multikey_3",
      "niah_multivalue", "niah_multiquery", "vt", "cwe", "fwe", "kv"};
  return names;
}
bool ruler_task_needs_essay(const std::string& task) {
  auto it = niah_tasks().find(task);
  return it != niah_tasks().end() && std::string(it->second.haystack) == "essay";
}
bool ruler_task_has_depth(const std::string& task) { return task != "cwe" && task != "fwe"; }
bool ruler_task_exact_length(const std::string& task) { return niah_tasks().count(task) || task == "vt"; }

std::vector<std::string> essay_sentences(const std::string& text) {
  auto space = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; };
  std::vector<std::string> sentences, words;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    size_t a = 0, b = line.size();
    while (a < b && space(line[a])) ++a;
    while (b > a && space(line[b - 1])) --b;
    if (b > a && line[a] == '=' && line[b - 1] == '=') continue;  // a heading
    for (size_t i = a; i < b;) {
      while (i < b && space(line[i])) ++i;
      size_t j = i;
      while (j < b && !space(line[j])) ++j;
      if (j > i) words.push_back(line.substr(i, j - i));
      i = j;
    }
  }
  std::string current;
  for (const std::string& w : words) {
    current += (current.empty() ? "" : " ") + w;
    const char last = w.back();
    if (last == '.' || last == '!' || last == '?') sentences.push_back(std::move(current)), current.clear();
  }
  if (!current.empty()) sentences.push_back(current);
  return sentences;
}

struct RulerPrompts::Impl {
  PieceEncoder enc;
  long long seed;
  RulerTemplate wording;
  std::vector<std::string> essay;

  std::vector<int> encode_optional(const std::string& s) const { return s.empty() ? std::vector<int>{} : enc.encode(s); }
  RulerPrompt niah(const NiahSpec& t, int length, double depth, int trial) const;
  RulerPrompt vt(int length, double depth, int trial) const;
  RulerPrompt cwe(int length, int trial) const;
  RulerPrompt fwe(int length, int trial) const;
  RulerPrompt kv(int length, double depth, int trial) const;
};

RulerPrompts::RulerPrompts(const Tokenizer& tokenizer, long long seed, RulerTemplate wording, std::vector<std::string> essay)
    : impl_(new Impl{PieceEncoder(tokenizer), seed, wording, std::move(essay)}) {}
RulerPrompts::~RulerPrompts() = default;

RulerPrompt RulerPrompts::build(const std::string& task, int length, double depth, int trial) const {
  if (std::find(ruler_task_names().begin(), ruler_task_names().end(), task) == ruler_task_names().end())
    throw Error("ruler: `tasks`: no task \"" + task + "\"");
  RulerPrompt p;
  try {
    auto niah = niah_tasks().find(task);
    if (niah != niah_tasks().end()) p = impl_->niah(niah->second, length, depth, trial);
    else if (task == "vt") p = impl_->vt(length, depth, trial);
    else if (task == "cwe") p = impl_->cwe(length, trial);
    else if (task == "fwe") p = impl_->fwe(length, trial);
    else p = impl_->kv(length, depth, trial);
  } catch (const Error& e) {
    throw Error("ruler: " + task + " at " + e.what());
  }
  p.budget = int(impl_->enc.encode(p.answer).size()) + kRulerAnswerSlack;
  return p;
}

RulerPrompt RulerPrompts::Impl::niah(const NiahSpec& t, int length, double depth, int trial) const {
  SplitMix rng(seed, trial);
  std::vector<std::string> keys;
  while (int(keys.size()) < t.keys) {
    std::string k = draw(t.key, rng);
    if (std::find(keys.begin(), keys.end(), k) == keys.end()) keys.push_back(std::move(k));
  }
  std::vector<std::vector<std::string>> values(keys.size());
  for (auto& v : values)
    for (int j = 0; j < t.values; ++j) v.push_back(draw(t.value, rng));
  std::vector<int> queried;
  while (int(queried.size()) < t.queries) {
    const int i = int(rng.below(uint64_t(t.keys)));
    if (std::find(queried.begin(), queried.end(), i) == queried.end()) queried.push_back(i);
  }
  std::vector<double> depths{depth};
  for (int i = 1; i < t.keys * t.values; ++i) depths.push_back(rng.fraction());
  std::vector<std::string> query_keys, refs;
  for (int i : queried) {
    query_keys.push_back(keys[size_t(i)]);
    for (const std::string& v : values[size_t(i)]) refs.push_back(v);
  }
  const std::string query = listing(query_keys), kind = t.value;
  const bool one = refs.size() == 1;
  const std::string ts = one ? kind : kind + "s", be = one ? "is" : "are";
  std::string head, question;
  if (wording == RulerTemplate::Ruler) {
    head = std::string(one ? "A" : "Some") + " special magic " + ts + " " + be +
           " hidden within the following text. Make sure to memorize it. I will quiz you about the " + ts + " afterwards.";
    question = std::string(one ? "What is the" : "What are all the") + " special magic " + ts + " for " + query +
               " mentioned in the provided text? The special magic " + ts + " for " + query +
               " mentioned in the provided text " + be;
  } else {
    question = "What " + be + " the magic " + ts + " for " + query + "? The magic " + ts + " for " + query + " " + be;
  }
  if (std::string(t.haystack) == "essay" && essay.empty())
    throw Error("`tasks`: its essay haystack needs a text (`essay`)");
  Stream stream(t.haystack, rng, &essay);
  stream.distractors(wording, t.key, kind, std::set<std::string>(keys.begin(), keys.end()));
  const int first = queried[0];
  std::vector<std::pair<int, int>> order{{first, 0}};
  for (int i = 0; i < t.keys; ++i)
    for (int j = 0; j < t.values; ++j)
      if (!(i == first && j == 0)) order.push_back({i, j});
  std::vector<Insert> inserts;
  for (size_t n = 0; n < order.size(); ++n)
    inserts.push_back({depths[n], needle_text(wording, kind, keys[size_t(order[n].first)],
                                              values[size_t(order[n].first)][size_t(order[n].second)])});
  const std::vector<int> head_ids = encode_optional(head), question_ids = enc.encode(question);
  const int fixed = int(enc.lead().size() + head_ids.size() + question_ids.size());
  RulerPrompt p;
  const std::vector<int> body = fill(enc, length, fixed, stream, inserts, p.needles);
  p.ids = enc.lead();
  append(p.ids, head_ids), append(p.ids, body), append(p.ids, question_ids);
  for (int& w : p.needles) w += int(enc.lead().size() + head_ids.size());
  p.references = refs;
  p.answer = (one ? refs[0] : listing(refs)) + ".";
  return p;
}

RulerPrompt RulerPrompts::Impl::vt(int length, double depth, int trial) const {
  SplitMix rng(seed, trial);
  const int letters = wording == RulerTemplate::Ruler ? 5 : 3;
  std::vector<std::string> names;
  while (names.size() < 5) {
    std::string n;
    for (int i = 0; i < letters; ++i) n += char('A' + rng.below(26));
    if (std::find(names.begin(), names.end(), n) == names.end()) names.push_back(n);
  }
  const std::string value = std::to_string(10000 + rng.below(90000));
  std::vector<double> later;
  for (int i = 0; i < 4; ++i) later.push_back(rng.fraction());
  std::sort(later.begin(), later.end());
  std::vector<Insert> lines{{depth, "VAR " + names[0] + " = " + value + "."}};
  for (int i = 0; i < 4; ++i)
    lines.push_back({depth + (1 - depth) * later[size_t(i)], "VAR " + names[size_t(i) + 1] + " = VAR " + names[size_t(i)] + "."});
  std::string head, question;
  if (wording == RulerTemplate::Ruler) {
    head = "Memorize and track the chain(s) of variable assignment hidden in the following text.";
    question = "Question: Find all variables that are assigned the value " + value +
               " in the text above. Answer: According to the chain(s) of variable assignment in the text above, 5 "
               "variables are assigned the value " + value + ", they are:";
  } else {
    question = "Which variables are " + value + "? They are";
  }
  Stream stream("noise", rng);
  const std::vector<int> head_ids = encode_optional(head), question_ids = enc.encode(question);
  const int fixed = int(enc.lead().size() + head_ids.size() + question_ids.size());
  RulerPrompt p;
  const std::vector<int> body = fill(enc, length, fixed, stream, lines, p.needles);
  p.ids = enc.lead();
  append(p.ids, head_ids), append(p.ids, body), append(p.ids, question_ids);
  for (int& w : p.needles) w += int(enc.lead().size() + head_ids.size());
  p.references = names;
  p.answer = names[0];
  for (size_t i = 1; i < names.size(); ++i) p.answer += " " + names[i];
  return p;
}

// A body of whole items that fits length − fixed tokens: items(n) for the n in [lo, hi] (steps of
// `step`) before the first that does not fit; Error when lo does not. A body's tokens grow with n,
// so the first misfit is found by doubling then halving the step count: a few builds, not one per n.
template <class Items>
std::vector<int> largest_fitting(const PieceEncoder& enc, int length, int fixed, long long lo, long long hi,
                                 long long step, const Items& items, const std::string& what) {
  auto total = [&](long long n) {
    long long t = fixed;
    for (const std::string& s : items(n)) t += (long long)enc.encode(s).size();
    return t;
  };
  if (const long long need = total(lo); need > length)
    throw Error(too_short(length, what) + " (" + std::to_string(need) + " tokens with BOS); give at least " +
                std::to_string(need));
  auto fits = [&](long long k) { return lo + k * step <= hi && total(lo + k * step) <= length; };
  long long good = 0, bad = 1;  // steps past lo: good fits, bad does not
  while (fits(bad)) good = bad, bad *= 2;
  while (bad - good > 1) {
    const long long mid = good + (bad - good) / 2;
    (fits(mid) ? good : bad) = mid;
  }
  std::vector<int> ids;
  for (const std::string& s : items(lo + good * step)) append(ids, enc.encode(s));
  return ids;
}

RulerPrompt RulerPrompts::Impl::cwe(int length, int trial) const {
  SplitMix rng(seed, trial);
  std::vector<std::string> pool = word_lists().adjectives;
  pool.insert(pool.end(), word_lists().nouns.begin(), word_lists().nouns.end());
  shuffle(pool, rng);
  const std::vector<std::string> common(pool.begin(), pool.begin() + 10);
  const int freq_common = length >= 4096 ? 30 : 6, freq_other = length >= 4096 ? 3 : 1;  // RULER's, and below 4096
  std::string head, question;
  if (wording == RulerTemplate::Ruler) {
    head = "Below is a numbered list of words. In these words, some appear more often than others. Memorize the ones "
           "that appear most often.";
    question = "Question: What are the 10 most common words in the above list? Answer: The top 10 words that appear "
               "most often in the list are:";
  } else {
    question = "Which 10 words appear most often? They are";
  }
  const std::vector<int> head_ids = encode_optional(head), question_ids = enc.encode(question);
  const int fixed = int(enc.lead().size() + head_ids.size() + question_ids.size());
  auto items = [&](long long others) {  // the numbered list with `others` other words, shuffled
    std::vector<std::string> list;
    for (int r = 0; r < freq_common; ++r) list.insert(list.end(), common.begin(), common.end());
    for (int r = 0; r < freq_other; ++r) list.insert(list.end(), pool.begin() + 10, pool.begin() + 10 + others);
    SplitMix order(seed + 1, trial);
    shuffle(list, order);
    for (size_t i = 0; i < list.size(); ++i) list[i] = std::to_string(i + 1) + ". " + list[i];
    return list;
  };
  RulerPrompt p;
  const std::vector<int> body = largest_fitting(enc, length, fixed, 0, (long long)pool.size() - 10, 1, items,
                                                "the common words and the question");
  p.ids = enc.lead();
  append(p.ids, head_ids), append(p.ids, body), append(p.ids, question_ids);
  p.references = common;
  for (size_t i = 0; i < common.size(); ++i) p.answer += (i ? " " : "") + std::to_string(i + 1) + ". " + common[i];
  return p;
}

RulerPrompt RulerPrompts::Impl::fwe(int length, int trial) const {
  SplitMix rng(seed, trial);
  const size_t V = size_t(std::max(4, (length - 50) / 50));  // RULER's vocabulary, at least the four ranks asked about
  std::vector<std::string> coded;
  while (coded.size() < V) {
    std::string w;
    for (int i = 0; i < 6; ++i) w += char('a' + rng.below(26));
    if (std::find(coded.begin(), coded.end(), w) == coded.end()) coded.push_back(w);
  }
  coded[0] = "...";  // rank 1: noise
  std::string head, question;
  if (wording == RulerTemplate::Ruler) {
    head = "Read the following coded text and track the frequency of each coded word. Find the three most frequently "
           "appeared coded words.";
    question = "Question: Do not provide any explanation. Please ignore the dots '....'. What are the three most "
               "frequently appeared words in the above coded text? Answer: According to the coded text above, the three "
               "most frequently appeared words are:";
  } else {
    question = "Which three words appear most often, the dots aside? They are";
  }
  const std::vector<int> head_ids = encode_optional(head), question_ids = enc.encode(question);
  const int fixed = int(enc.lead().size() + head_ids.size() + question_ids.size());
  auto text = [&](long long N) {  // rank k appears floor(N / k² / ζ(2)) times, shuffled
    std::vector<std::string> out;
    for (size_t k = 1; k <= coded.size(); ++k)
      for (long long c = (long long)(double(N) / double(k * k) / kZeta2); c > 0; --c) out.push_back(coded[k - 1]);
    SplitMix order(seed + 1, trial);
    shuffle(out, order);
    return out;
  };
  const long long step = std::max(1, length / 32);
  RulerPrompt p;
  const std::vector<int> body = largest_fitting(enc, length, fixed, length / 6, (long long)1 << 40, step, text,
                                                "the coded text and the question");
  p.ids = enc.lead();
  append(p.ids, head_ids), append(p.ids, body), append(p.ids, question_ids);
  p.references.assign(coded.begin() + 1, coded.begin() + 4);
  p.answer = coded[1] + " " + coded[2] + " " + coded[3];
  return p;
}

RulerPrompt RulerPrompts::Impl::kv(int length, double depth, int trial) const {
  SplitMix rng(seed, trial);
  const std::string head = "Extract the value corresponding to the specified key in the JSON object below. JSON data:";
  std::vector<std::pair<std::string, std::string>> records;
  auto more = [&](size_t n) {
    while (records.size() < n) {
      std::string k = draw_uuid(rng);
      records.push_back({k, draw_uuid(rng)});
    }
  };
  more(1);  // the asked record first
  const std::string question = "Key: \"" + records[0].first + "\" Corresponding value:";
  const std::vector<int> head_ids = enc.encode(head), question_ids = enc.encode(question);
  const int fixed = int(enc.lead().size() + head_ids.size() + question_ids.size());
  auto items = [&](long long n) {  // n records, the asked one at floor(depth · (n − 1) + 0.5)
    more(size_t(n));
    std::vector<std::pair<std::string, std::string>> order(records.begin() + 1, records.begin() + n);
    order.insert(order.begin() + (long long)std::floor(depth * double(n - 1) + 0.5), records[0]);
    std::vector<std::string> out;
    for (long long i = 0; i < n; ++i)
      out.push_back(std::string(i == 0 ? "{" : "") + "\"" + order[size_t(i)].first + "\": \"" + order[size_t(i)].second +
                    "\"" + (i == n - 1 ? "}" : ","));
    return out;
  };
  RulerPrompt p;
  const std::vector<int> body = largest_fitting(enc, length, fixed, 2, (long long)1 << 40, 1, items,
                                                "two records and the question");
  p.ids = enc.lead();
  append(p.ids, head_ids), append(p.ids, body), append(p.ids, question_ids);
  p.references = {records[0].second};
  p.answer = records[0].second;
  return p;
}

}  // namespace pert
