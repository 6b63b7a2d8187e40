// Regexes through PCRE2 (UTF + Unicode properties, JIT when the platform has it), with match,
// depth and heap limits so a pattern that backtracks without end stops with an error.
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <algorithm>
#include <cstdint>

#include "pert/interrupt.hpp"
#include "pert/tokenizer.hpp"
#include "tokenizer/internal.hpp"

namespace pert::tokenizer {

namespace {

constexpr uint32_t kMatchLimit = 10'000'000;  // PCRE2's default: tens of milliseconds
constexpr uint64_t kMatchLimitPerByte = 8;     // and this much more per byte of text left
constexpr uint32_t kDepthLimit = 1'000'000;
constexpr uint32_t kHeapLimitKiB = 64 * 1024;

// Per thread (a JIT stack cannot be shared between threads that match at once).
struct MatchState {
  pcre2_match_context* context = pcre2_match_context_create(nullptr);
  pcre2_jit_stack* jit_stack = pcre2_jit_stack_create(32 * 1024, 8 * 1024 * 1024, nullptr);
  pcre2_match_data* data = pcre2_match_data_create(1, nullptr);  // group 0 is all we read
  MatchState() {
    pcre2_set_depth_limit(context, kDepthLimit);
    pcre2_set_heap_limit(context, kHeapLimitKiB);
    if (jit_stack) pcre2_jit_stack_assign(context, nullptr, jit_stack);
  }
  ~MatchState() {
    pcre2_match_data_free(data);
    pcre2_jit_stack_free(jit_stack);
    pcre2_match_context_free(context);
  }
};

MatchState& match_state() {
  thread_local MatchState state;
  return state;
}

std::string pcre2_message(int code) {
  PCRE2_UCHAR buffer[256];
  if (pcre2_get_error_message(code, buffer, sizeof buffer) < 0) return "error " + std::to_string(code);
  return reinterpret_cast<const char*>(buffer);
}

}  // namespace

Regex::Regex(const std::string& pattern, const std::string& where) : where_(where) {
  int code = 0;
  PCRE2_SIZE offset = 0;
  // Oniguruma's Ruby syntax (HF's engine) reads ^ and $ at line breaks: PCRE2's MULTILINE.
  pcre2_code* compiled = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                       PCRE2_UTF | PCRE2_UCP | PCRE2_MULTILINE, &code, &offset, nullptr);
  if (!compiled)
    throw FormatError(where + ": invalid regex (PCRE2: " + pcre2_message(code) + " at offset " + std::to_string(offset) + ")");
  pcre2_jit_compile(compiled, PCRE2_JIT_COMPLETE);  // when JIT is unavailable the interpreter runs
  code_.reset(compiled, pcre2_code_free);
}

void Regex::for_each_match(std::string_view s, const MatchSink& sink) const {
  if (!valid_utf8(s)) throw Error(where_ + ": regex applied to text that is not UTF-8");
  MatchState& state = match_state();
  const auto subject = reinterpret_cast<PCRE2_SPTR>(s.data());
  size_t pos = 0, last_end = std::string_view::npos, matches = 0;
  while (pos <= s.size()) {
    // One match may rightly scan the rest of the text (\s*[\r\n]+ backtracking over a run of
    // spaces), so the limit grows with what is left: runaway backtracking is still stopped.
    pcre2_set_match_limit(state.context, uint32_t(std::min<uint64_t>(kMatchLimit + kMatchLimitPerByte * uint64_t(s.size() - pos), UINT32_MAX)));
    const int rc = pcre2_match(code_.get(), subject, s.size(), pos, PCRE2_NO_UTF_CHECK, state.data, state.context);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) throw Error(where_ + ": the regex gave up on this input (PCRE2: " + pcre2_message(rc) + ")");
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(state.data);
    const size_t start = ov[0], end = ov[1];
    if (start > end || end > s.size()) break;  // \K tricks: nothing sensible to split on
    if (start == end && end == last_end) {      // an empty match right after the previous one
      if (start >= s.size()) break;
      pos = start + utf8_char_len(s, start);
      continue;
    }
    if ((++matches & 0xffff) == 0) check_interrupt();  // a pre-tokenizer's split of a whole text
    sink(start, end);
    last_end = end;
    pos = end;
    if (start == end) {
      if (end >= s.size()) break;
      pos = end + utf8_char_len(s, end);
    }
  }
}

Pattern::Pattern(const json& j, const Source& src, const std::string& key) {
  if (j.is_object() && j.size() == 1 && j.contains("String") && j["String"].is_string()) {
    literal_ = j["String"].get<std::string>();
  } else if (j.is_object() && j.size() == 1 && j.contains("Regex") && j["Regex"].is_string()) {
    regex_ = std::make_shared<Regex>(j["Regex"].get<std::string>(), src.where + ": " + key + ".Regex");
  } else {
    src.fail(key, "must be {\"String\": ...} or {\"Regex\": ...}");
  }
}

void Pattern::for_each_match(std::string_view s, const MatchSink& sink) const {
  if (regex_) return regex_->for_each_match(s, sink);
  if (literal_.empty()) return;  // HF: an empty string matches nothing
  size_t matches = 0;
  for (size_t at = s.find(literal_); at != std::string_view::npos; at = s.find(literal_, at + literal_.size())) {
    if ((++matches & 0xffff) == 0) check_interrupt();  // a normalizer's Replace over a whole text
    sink(at, at + literal_.size());
  }
}

std::string replace_all(std::string_view s, const Pattern& p, const std::string& content) {
  std::string out;
  size_t last = 0;
  p.for_each_match(s, [&](size_t start, size_t end) {
    out.append(s, last, start - last);
    out += content;
    last = end;
  });
  out.append(s, last, std::string_view::npos);
  return out;
}

}  // namespace pert::tokenizer
