// pert passkey's refusals that need the model (the catalogue's style: one line on stderr naming
// the flag, exit 1, nothing on stdout); its flag checks while parsing are in test_catalogue.cpp,
// its prompts and answers against the reference in passkey_test.py.
#include "cli_util.hpp"

// pert passkey: lengths the model or the prompt cannot hold are skipped, each with its reason,
// once the model (and its tokenizer) are loaded, before any prompt runs, as ruler's and sweep's
// cells are; the other lengths run. Only when no length can run is it a refusal naming --lengths.
TEST_CASE("catalogue: passkey lengths", "[catalogue]") {
  const std::string learned = (fs::path(PERT_SOURCE_DIR) / "models" / "learned").string();  // a table of 128
  const std::vector<std::string> passkey = {"passkey", "-m", learned, "-t", "1", "--trials", "2"};
  auto with = [&](const std::vector<std::string>& extra) {
    std::vector<std::string> args = passkey;
    args.insert(args.end(), extra.begin(), extra.end());
    return run_pert(args);
  };
  // The key sentence and the question take 52 tokens with BOS in the family's tokenizer.
  require_refusal(with({"--lengths", "20"}), {"--lengths 20", "too short for the key sentence and the question",
                                              "give at least 52"});
  // 128 prompt tokens and 7 more for the answer: past the table.
  require_refusal(with({"--lengths", "128,20"}), {"--lengths 20", "too short", "(and every other length)"});
  TempDir tmp;
  const std::string json_file = (tmp / "pk.json").string(), csv_file = (tmp / "pk.csv").string();
  Run r = with({"--lengths", "20,64,128", "--depths", "0,1", "-q", "--json-out", json_file, "--csv", csv_file});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Matchers::Contains("| 20 | — | — | — |") && Catch::Matchers::Contains("| 128 | — | — | — |") &&
                        Catch::Matchers::Contains("\n— passkey: --lengths 20: too short for the key sentence") &&
                        Catch::Matchers::Contains("\n— passkey: --lengths 128: the prompt and its answer take 135 positions, "
                                                  "past the learned position table (128 positions); give at most 121"));
  const json result = json::parse(slurp(json_file));
  REQUIRE(result["cells"].size() == 6);
  for (const json& c : result["cells"]) {
    const bool runs = c["length"] == 64;
    CHECK(c.contains("skipped") != runs);
    CHECK(c["accuracy"].is_null() != runs);
    CHECK(c["results"].size() == (runs ? 2u : 0u));
  }
  CHECK_THAT(slurp(csv_file), Catch::Matchers::StartsWith("length,depth,correct,trials,accuracy,skipped\n20,0,0,2,,yes\n"));
  require_refusal(with({"--lengths", "16000000", "--set", "position.beyond=clamp"}),
                  {"--lengths 16000000", "MiB of memory available"});
  r = with({"--lengths", "121", "--depths", "0,1", "-q"});  // the longest that fits
  INFO(r.err);
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Matchers::Contains("| 121 |"));
}
