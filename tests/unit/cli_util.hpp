// Running the pert executable from a test: its exit code and both streams, and the shape of
// a clean failure (one line on stderr, exit 1 or 2, never a signal).
#pragma once
#include <sys/wait.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "test_util.hpp"

// Models of pert's family that the CLI tests run.
inline const std::string kRope = PERT_SOURCE_DIR "/models/rope", kAlibi = PERT_SOURCE_DIR "/models/alibi",
                         kLearned = PERT_SOURCE_DIR "/models/learned";

// dir/text.txt: one sentence pair repeated on `lines` lines, a text for sweep, perplexity and
// attention cells (40 lines: ~6 kB, lengths up to 128; 60: two windows of 256 for models/rope).
inline fs::path repeated_story(const TempDir& dir, int lines) {
  std::string text;
  for (int i = 0; i < lines; ++i)
    text += "Once upon a time there was a little girl named Lily. She liked to play with her red ball in the park.\n";
  write_file(dir / "text.txt", text);
  return dir / "text.txt";
}

struct Run {
  int exit_code = -1;
  std::string out, err;
};

inline std::string slurp(const fs::path& p) {
  std::ifstream in(p);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

inline std::string quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

// pert's command line, quoted for a shell.
inline std::string pert_line(const std::vector<std::string>& args) {
  std::string cmd = quote(PERT_BINARY);
  for (const std::string& a : args) cmd += " " + quote(a);
  return cmd;
}

// A bash command line with stdin from `stdin_path` (a file or /dev/null: never a terminal): its
// exit code and both streams (for what needs a shell: an environment, a pipe, two processes).
inline Run run_shell(const std::string& command, const std::string& stdin_path = "/dev/null") {
  TempDir io;
  const std::string cmd = "bash -c " + quote(command) + " >" + quote((io / "out").string()) + " 2>" +
                          quote((io / "err").string()) + " <" + quote(stdin_path);
  const int status = std::system(cmd.c_str());
  Run r;
  REQUIRE(WIFEXITED(status));
  r.exit_code = WEXITSTATUS(status);
  r.out = slurp(io / "out");
  r.err = slurp(io / "err");
  return r;
}

// pert with stdin read from `stdin_path`.
inline Run run_pert_stdin(const std::vector<std::string>& args, const std::string& stdin_path) {
  return run_shell("exec " + pert_line(args), stdin_path);
}

inline Run run_pert(const std::vector<std::string>& args) { return run_pert_stdin(args, "/dev/null"); }

// pert with `input` on stdin (piped from a file, so not a terminal).
inline Run run_pert_input(const std::vector<std::string>& args, const std::string& input) {
  TempDir tmp;
  write_file(tmp / "stdin", input);
  return run_pert_stdin(args, (tmp / "stdin").string());
}

// A failed run: exit 1 or 2 (never a signal, which the shell reports as 128+N), one line on
// stderr that starts with "pert: error:" and contains every needle.
inline void require_clean_failure(const Run& r, const std::vector<std::string>& needles) {
  INFO("stderr: " << r.err);
  CHECK((r.exit_code == 1 || r.exit_code == 2));
  REQUIRE(!r.err.empty());
  CHECK(r.err.rfind("pert: error: ", 0) == 0);
  CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
  CHECK(r.err.back() == '\n');
  for (const std::string& n : needles) CHECK_THAT(r.err, Catch::Matchers::Contains(n));
}

// The same with `exit_code` (1: bad input, 2: usage) and nothing on stdout: the error comes
// before any output.
inline void require_refusal(const Run& r, const std::vector<std::string>& needles, int exit_code = 1) {
  require_clean_failure(r, needles);
  CHECK(r.exit_code == exit_code);
  CHECK(r.out.empty());
}
