// pert tokenize: ids as the library gives them, --lines, --add-special, --no-parse-special,
// JSON and human output, and one-line errors.
#include "cli_util.hpp"
#include "pert/tokenizer.hpp"

namespace {

// A directory with only a tokenizer.json (the family's: llama-style, <s> put first).
struct TokenizerDir {
  TempDir tmp;
  std::string dir = tmp.path.string();
  pert::Tokenizer tok;
  TokenizerDir() {
    fs::copy_file(fs::path(PERT_SOURCE_DIR) / "models" / "rope" / "tokenizer.json", tmp / "tokenizer.json");
    tok = pert::Tokenizer::load(tmp / "tokenizer.json");
  }
};

json ids_of(const Run& r) {
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  return json::parse(r.out);
}

}  // namespace

TEST_CASE("cli: tokenize writes the library's ids", "[cli]") {
  const TokenizerDir d;
  const std::string text = "Once upon a time, <s>there was";
  CHECK(ids_of(run_pert({"tokenize", "-m", d.dir, "-p", text, "--json"})) == json(d.tok.encode(text)));
  CHECK(ids_of(run_pert({"tokenize", "-m", d.dir, "-p", text, "--json", "--add-special"})) == json(d.tok.encode(text, true)));
  CHECK(d.tok.encode(text, true).front() == 1);  // <s> first
  CHECK(ids_of(run_pert({"tokenize", "-m", d.dir, "-p", text, "--json", "--no-parse-special"})) == json(d.tok.encode(text, false, false)));
  CHECK(d.tok.encode(text, false, false) != d.tok.encode(text));  // "<s>" is text, then a token

  // --lines: split on "\n" only, "\r" kept, an empty line is an empty list, no line after the last "\n".
  write_file(d.tmp / "text.txt", "Once\nupon a\r\n\ntime\n");
  json expected = json::array();
  for (const char* line : {"Once", "upon a\r", "", "time"}) expected.push_back(d.tok.encode(line));
  CHECK(ids_of(run_pert({"tokenize", "-m", d.dir, "-f", (d.tmp / "text.txt").string(), "--lines", "--json"})) == expected);

  const Run human = run_pert({"tokenize", "-m", d.dir, "-p", "Once", "--add-special"});
  CHECK(human.exit_code == 0);
  std::string want;
  for (int id : d.tok.encode("Once", true)) {
    char number[16];
    std::snprintf(number, sizeof number, "%6d", id);
    want += std::string(number) + " -> '" + d.tok.token_text(id) + "'\n";
  }
  CHECK(human.out == want);
  CHECK_THAT(human.out, Catch::Matchers::StartsWith("     1 -> '<s>'\n"));
}

TEST_CASE("cli: tokenize refuses bad input with one line", "[cli]") {
  const TokenizerDir d;
  auto refused = [](const Run& r, const std::vector<std::string>& needles, int code) {
    require_clean_failure(r, needles);
    CHECK(r.exit_code == code);
    CHECK(r.out.empty());
  };
  refused(run_pert({"tokenize", "-m", d.dir}), {"--prompt or -f,--file"}, 2);
  write_file(d.tmp / "text.txt", "a");
  refused(run_pert({"tokenize", "-m", d.dir, "-p", "a", "-f", (d.tmp / "text.txt").string()}), {"excludes"}, 2);
  refused(run_pert({"tokenize", "-m", d.dir + "/absent", "-p", "a"}), {d.dir + "/absent/tokenizer.json"}, 1);
  write_file(d.tmp / "bad.txt", "ok \xff");
  refused(run_pert({"tokenize", "-m", d.dir, "-f", (d.tmp / "bad.txt").string()}), {(d.tmp / "bad.txt").string(), "not valid UTF-8 (byte 3)"}, 1);
  write_file(d.tmp / "tokenizer.json", "{\"model\": {\"vocab\": {}, \"merges\": []}}");
  refused(run_pert({"tokenize", "-m", d.dir, "-p", "a"}), {(d.tmp / "tokenizer.json").string(), "empty"}, 1);
}
