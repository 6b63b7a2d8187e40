// JSON input with errors that name the file: every JSON file pert reads goes through here.
#pragma once
#include <filesystem>
#include <functional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace pert {

// Deeper nesting than this is refused before parsing, so hostile input cannot exhaust the
// stack of nlohmann's recursive parser.
inline constexpr int kMaxJsonDepth = 64;

// FormatError "<where>: invalid JSON: nested deeper than 64 levels" for such text; parse_json
// calls it, and so must anything else that hands hostile text to nlohmann's parser.
void check_json_depth(std::string_view text, const std::string& where);

// What pert reads whole, and the most of each it will read: beyond that a file is refused
// (a hostile /dev/zero or a wrong path must not fill memory).
inline constexpr size_t kMaxJsonBytes = size_t(64) << 20;        // config.json, overrides, indexes, sweeps
inline constexpr size_t kMaxTokenizerBytes = size_t(512) << 20;  // real tokenizer.json files are < 40 MB
inline constexpr size_t kMaxTextBytes = size_t(768) << 20;       // texts to evaluate or tokenize (wikitext-103: 540 MB)

// Checks that `path` can be read as an input before anything is read: it exists, and is a
// regular file or (with `streams`, for a text that may come from a pipe: -f <(zcat t.gz)) a
// FIFO; never a directory or a device (/dev/zero never ends, /dev/tty waits for a person).
// IoError "<path>: ..." naming what it is.
void check_input_file(const std::filesystem::path& path, bool streams = false);

// Reads a whole file of at most `max_bytes`, checked by check_input_file first.
std::string read_text_file(const std::filesystem::path& path, size_t max_bytes = kMaxJsonBytes, bool streams = false);

// Parses `text`; FormatError "<where>: invalid JSON: ..." when it is not well-formed.
nlohmann::json parse_json(std::string_view text, const std::string& where);

inline nlohmann::json read_json_file(const std::filesystem::path& path) {
  return parse_json(read_text_file(path), path.string());
}

// Text from a file made safe to put in a one-line message: control characters (newline, ESC,
// NUL, ...) and bytes that are not UTF-8 written as \xNN, so a name cannot forge a second line,
// drive the terminal or cut the message short.
std::string printable(std::string_view text);
// The same for text of several lines (a table): its line breaks kept, every other control
// character escaped.
std::string printable_lines(std::string_view text);

// A JSON file's text as pert writes its results: indented by 2, invalid UTF-8 replaced, a final newline.
std::string json_file_text(const nlohmann::json& value);

// A short rendering of a JSON value for error messages (long values are cut).
std::string json_brief(const nlohmann::json& value);

// A number as people write it in descriptions ("10000", "0.5"): iostream's default format.
std::string number_text(double x);

// A task report's cells' "skipped" reasons (passkey's, ruler's) in a front end's words (the
// CLI's flags, Python's keywords: error.hpp's fields).
void reword_skipped(nlohmann::json& report, const std::function<std::string(const std::string&)>& words);

// nlohmann's message without its "[json.exception.type_error.302] " prefix.
std::string json_error_text(const nlohmann::json::exception& e);

}  // namespace pert
