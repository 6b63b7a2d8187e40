// pert passkey's refusals that need the model (the catalogue's style: one line on stderr naming
// the flag, exit 1, nothing on stdout); its flag checks while parsing are in test_catalogue.cpp,
// its prompts and answers against the reference in passkey_test.py.
#include "cli_util.hpp"

// pert passkey: lengths the model or the prompt cannot hold are refused once the model (and its
// tokenizer) are loaded, before any prompt runs, naming --lengths.
TEST_CASE("catalogue: passkey lengths", "[catalogue]") {
  const std::string learned = (fs::path(PERT_SOURCE_DIR) / "models" / "learned").string();  // a table of 128
  const std::vector<std::string> passkey = {"passkey", "-m", learned, "-t", "1", "--trials", "2"};
  auto with = [&](const std::vector<std::string>& extra) {
    std::vector<std::string> args = passkey;
    args.insert(args.end(), extra.begin(), extra.end());
    return run_pert(args);
  };
  // The key sentence and the question take 52 tokens with BOS in the family's tokenizer.
  require_refusal(with({"--lengths", "64,20"}), {"--lengths 20", "too short for the key sentence and the question",
                                                 "give at least 52"});
  // 128 prompt tokens and 7 more for the answer: past the table, even when a shorter length comes first.
  require_refusal(with({"--lengths", "64,128"}), {"--lengths 128", "135 positions",
                                                  "learned position table (128 positions)", "give at most 121"});
  require_refusal(with({"--lengths", "16000000", "--set", "position.beyond=clamp"}),
                  {"--lengths 16000000", "MiB of memory available"});
  const Run r = with({"--lengths", "121", "--depths", "0,1", "-q"});  // the longest that fits
  INFO(r.err);
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Matchers::Contains("| 121 |"));
}
