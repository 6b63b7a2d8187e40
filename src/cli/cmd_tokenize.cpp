// pert tokenize: text to token ids with a directory's tokenizer.json (no model needed), written
// as llama-tokenize writes them (`id -> 'text'`) or as JSON.
#include <cstdio>
#include <iostream>

#include "cli/cli_common.hpp"
#include "pert/error.hpp"
#include "pert/json_util.hpp"
#include "pert/loaded_model.hpp"
#include "pert/tokenizer.hpp"

namespace pert::cli {

namespace {

struct TokenizeArgs {
  std::string model_dir, prompt, file;
  bool lines = false, add_special = false, no_parse_special = false, json = false;
};

// The text's lines: split on "\n" only (a "\r" stays in its line); a final "\n" ends the last
// line rather than starting an empty one.
std::vector<std::string_view> split_lines(std::string_view text) {
  std::vector<std::string_view> lines;
  for (size_t start = 0; start < text.size();) {
    const size_t end = std::min(text.find('\n', start), text.size());
    lines.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return lines;
}

void run_tokenize(const TokenizeArgs& a) {
  std::string text = a.prompt;
  size_t bad = 0;
  if (!a.file.empty()) {
    text = read_text_file(a.file, kMaxTextBytes, /*streams=*/true);
    if (!valid_utf8(text, &bad)) throw FormatError(a.file + ": not valid UTF-8 (byte " + std::to_string(bad) + ")");
  } else if (!valid_utf8(text, &bad)) {
    throw Error("--prompt: not valid UTF-8 (byte " + std::to_string(bad) + ")");
  }
  const Tokenizer tok = load_tokenizer(resolve_model_dir(a.model_dir));
  const std::vector<std::string_view> inputs = a.lines ? split_lines(text) : std::vector<std::string_view>{text};
  std::vector<std::vector<int>> ids;
  const size_t dropped = tok.dropped_characters();
  for (std::string_view input : inputs) ids.push_back(tok.encode(input, a.add_special, !a.no_parse_special));
  note_dropped(tok, dropped, a.file.empty() ? "--prompt" : a.file);

  if (a.json) {  // written as they are: a json array would hold 16 bytes more per id
    auto write_ids = [](const std::vector<int>& line) {
      std::cout << '[';
      for (size_t i = 0; i < line.size(); ++i) std::cout << (i ? "," : "") << line[i];
      std::cout << ']';
    };
    if (!a.lines) {
      write_ids(ids.front());
    } else {
      std::cout << '[';
      for (size_t line = 0; line < ids.size(); ++line) {
        if (line > 0) std::cout << ',';
        write_ids(ids[line]);
      }
      std::cout << ']';
    }
    std::cout << "\n";
    return;
  }
  for (size_t line = 0; line < ids.size(); ++line) {
    if (line > 0) std::cout << "\n";  // a blank line between the lines' tokens
    for (int id : ids[line]) {
      char number[16];
      std::snprintf(number, sizeof number, "%6d", id);
      std::cout << number << " -> '" << tok.token_text(id) << "'\n";
    }
  }
}

}  // namespace

void add_tokenize(CLI::App& app) {
  auto a = std::make_shared<TokenizeArgs>();
  CLI::App* cmd = app.add_subcommand("tokenize", "Text to token ids with a directory's tokenizer.json (no model needed)");
  cmd->add_option("-m,--model", a->model_dir, "Directory with tokenizer.json (and tokenizer_config.json), or a GGUF file (default: models/default)")->check(not_empty());
  auto* prompt = cmd->add_option("-p,--prompt", a->prompt, "Text to tokenize");
  auto* file = cmd->add_option("-f,--file", a->file, "File to tokenize")->check(input_file(/*streams=*/true));
  prompt->excludes(file);
  cmd->add_flag("--lines", a->lines, "Tokenize each line on its own (split on \"\\n\" only)");
  cmd->add_flag("--add-special", a->add_special, "Add the special tokens the post-processor puts around a text (e.g. <s>)");
  cmd->add_flag("--no-parse-special", a->no_parse_special, "Special tokens written in the text stay text (\"<s>\" is three characters)");
  cmd->add_flag("--json", a->json, "Write the ids as a JSON array (with --lines, an array of arrays)");
  cmd->callback([a, prompt, file] {
    if (prompt->count() == 0 && file->count() == 0) throw CLI::RequiredError("-p,--prompt or -f,--file");
    run_tokenize(*a);
  });
}

}  // namespace pert::cli
