// Post-processors: the special tokens HF puts around a single sequence.
#include "pert/json_util.hpp"
#include "tokenizer/internal.hpp"

namespace pert::tokenizer {

namespace {

int checked_id(const json& id, const Source& src, const std::string& key, int vocab_size) {
  if (!id.is_number_integer() || id.get<long long>() < 0 || id.get<long long>() >= vocab_size)
    src.fail(key, "id " + json_brief(id) + " is not a token id (vocabulary of " + std::to_string(vocab_size) + ")");
  return id.get<int>();
}

// TemplateProcessing's "single": [{"SpecialToken": {"id": NAME}} ..., {"Sequence": {"id": "A"}}, ...].
Specials template_processing(const json& j, const Source& src, const std::string& key, int vocab_size) {
  if (!j.contains("single") || !j["single"].is_array()) src.fail(key + ".single", "must be a list of SpecialToken / Sequence items");
  const json specials = j.value("special_tokens", json::object());
  if (!specials.is_object()) src.fail(key + ".special_tokens", "must be an object");
  Specials out;
  bool seen_sequence = false;
  for (size_t i = 0; i < j["single"].size(); ++i) {
    const json& item = j["single"][i];
    const std::string item_key = key + ".single[" + std::to_string(i) + "]";
    if (item.is_object() && item.contains("Sequence")) {
      if (item["Sequence"].value("id", "") != "A" || seen_sequence) src.fail(item_key, "must be the one sequence, \"A\"");
      seen_sequence = true;
    } else if (item.is_object() && item.contains("SpecialToken") && item["SpecialToken"].is_object()) {
      const std::string name = item["SpecialToken"].value("id", "");
      if (!specials.contains(name) || !specials[name].is_object() || !specials[name].contains("ids") || !specials[name]["ids"].is_array())
        src.fail(item_key, "names '" + name + "', which special_tokens does not define with \"ids\"");
      for (const json& id : specials[name]["ids"])
        (seen_sequence ? out.suffix : out.prefix).push_back(checked_id(id, src, key + ".special_tokens." + name, vocab_size));
    } else {
      src.fail(item_key, "is neither a SpecialToken nor a Sequence");
    }
  }
  if (!seen_sequence) src.fail(key + ".single", "has no Sequence \"A\"");
  return out;
}

// BertProcessing / RobertaProcessing: "cls": [content, id] first, "sep": [content, id] last.
Specials cls_sep(const json& j, const Source& src, const std::string& key, int vocab_size) {
  Specials out;
  for (const char* part : {"cls", "sep"}) {
    if (!j.contains(part) || !j[part].is_array() || j[part].size() != 2) src.fail(key + "." + part, "must be [content, id]");
    (std::string(part) == "cls" ? out.prefix : out.suffix).push_back(checked_id(j[part][1], src, key + "." + part, vocab_size));
  }
  return out;
}

}  // namespace

Specials parse_post_processor(const json& j, const Source& src, const std::string& key, int vocab_size) {
  if (j.is_null()) return {};
  const std::string type = src.type_of(j, key);
  if (type == "ByteLevel") return {};  // offsets only
  if (type == "TemplateProcessing") return template_processing(j, src, key, vocab_size);
  if (type == "BertProcessing" || type == "RobertaProcessing") return cls_sep(j, src, key, vocab_size);
  if (type == "Sequence") {
    if (!j.contains("processors") || !j["processors"].is_array()) src.fail(key + ".processors", "must be a list");
    Specials all;  // each processor wraps what the ones before it made
    for (size_t i = 0; i < j["processors"].size(); ++i) {
      Specials s = parse_post_processor(j["processors"][i], src, key + ".processors[" + std::to_string(i) + "]", vocab_size);
      all.prefix.insert(all.prefix.begin(), s.prefix.begin(), s.prefix.end());
      all.suffix.insert(all.suffix.end(), s.suffix.begin(), s.suffix.end());
    }
    return all;
  }
  src.fail(key + ".type", "'" + type + "' is not supported");
}

}  // namespace pert::tokenizer
