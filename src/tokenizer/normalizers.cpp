// Normalizers: string -> string, as HF's (offsets aside).
#include "tokenizer/internal.hpp"

namespace pert::tokenizer {

namespace {

struct UnicodeForm : Normalizer {
  NormalForm form;
  explicit UnicodeForm(NormalForm f) : form(f) {}
  void normalize(std::string& s) const override { s = unicode_normalize(s, form); }
};

struct Lowercase : Normalizer {
  void normalize(std::string& s) const override { s = unicode_lowercase(s); }
};

struct Strip : Normalizer {
  bool left, right;
  Strip(bool l, bool r) : left(l), right(r) {}
  void normalize(std::string& s) const override {
    size_t begin = 0, end = s.size();
    if (left)
      for (size_t i = 0; i < s.size() && is_whitespace(utf8_decode(s, i));) begin = i;
    if (right) {
      end = begin;
      for (size_t i = begin; i < s.size();)
        if (!is_whitespace(utf8_decode(s, i))) end = i;
    }
    s = s.substr(begin, end - begin);
  }
};

struct Prepend : Normalizer {
  std::string prefix;
  explicit Prepend(std::string p) : prefix(std::move(p)) {}
  void normalize(std::string& s) const override {
    if (!s.empty()) s.insert(0, prefix);
  }
};

struct Replace : Normalizer {
  Pattern pattern;
  std::string content;
  Replace(Pattern p, std::string c) : pattern(std::move(p)), content(std::move(c)) {}
  void normalize(std::string& s) const override { s = replace_all(s, pattern, content); }
};

struct Sequence : Normalizer {
  std::vector<std::unique_ptr<Normalizer>> steps;
  void normalize(std::string& s) const override {
    for (const auto& step : steps) step->normalize(s);
  }
};

}  // namespace

std::unique_ptr<Normalizer> parse_normalizer(const json& j, const Source& src, const std::string& key) {
  const std::string type = src.type_of(j, key);
  if (type == "NFC") return std::make_unique<UnicodeForm>(NormalForm::NFC);
  if (type == "NFD") return std::make_unique<UnicodeForm>(NormalForm::NFD);
  if (type == "NFKC") return std::make_unique<UnicodeForm>(NormalForm::NFKC);
  if (type == "NFKD") return std::make_unique<UnicodeForm>(NormalForm::NFKD);
  if (type == "Lowercase") return std::make_unique<Lowercase>();
  if (type == "Strip") return std::make_unique<Strip>(j.value("strip_left", true), j.value("strip_right", true));
  if (type == "Prepend") {
    if (!j.contains("prepend") || !j["prepend"].is_string()) src.fail(key + ".prepend", "must be a string");
    return std::make_unique<Prepend>(j["prepend"].get<std::string>());
  }
  if (type == "Replace") {
    if (!j.contains("content") || !j["content"].is_string()) src.fail(key + ".content", "must be a string");
    return std::make_unique<Replace>(Pattern(j.value("pattern", json()), src, key + ".pattern"), j["content"].get<std::string>());
  }
  if (type == "Sequence") {
    if (!j.contains("normalizers") || !j["normalizers"].is_array()) src.fail(key + ".normalizers", "must be a list");
    auto seq = std::make_unique<Sequence>();
    for (size_t i = 0; i < j["normalizers"].size(); ++i)
      seq->steps.push_back(parse_normalizer(j["normalizers"][i], src, key + ".normalizers[" + std::to_string(i) + "]"));
    return seq;
  }
  src.fail(key + ".type", "'" + type + "' is not supported");
}

}  // namespace pert::tokenizer
