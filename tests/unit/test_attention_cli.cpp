// pert attention on the binary: its table, JSON and CSV; the grid's resume, shards and merge;
// the statistics' invariants on a trained model; and its files' faults (a sweep file given to
// it, a cell of the wrong shape), each a one-line error naming the file.
#include <cmath>
#include <sstream>

#include "cli_util.hpp"

namespace {

using nlohmann::json;

fs::path attention_text(const TempDir& dir) { return repeated_story(dir, 60); }

std::vector<std::string> attention_args(const std::string& text, const std::string& out, const std::string& lengths) {
  return {"attention", "-m", kRope, "-f", text, "--lengths", lengths, "--chunks", "2", "--out", out, "-q", "-t", "1"};
}

std::vector<std::string> lines_of(const std::string& s) {
  std::vector<std::string> lines;
  std::istringstream in(s);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

}  // namespace

TEST_CASE("attention: table, JSON and CSV, within L only all queries, past L in_L and past_L too", "[attention][cli]") {
  const TempDir tmp;
  const std::string text = attention_text(tmp).string(), out = (tmp / "a.json").string();
  const Run r = run_pert(attention_args(text, out, "64,256"));
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Matchers::Contains("| rope | plain | rope | 64 | all (128) |"));
  CHECK_THAT(r.out, Catch::Matchers::Contains("| rope | plain | rope | 256 | past_L (256) |"));
  const json a = json::parse(slurp(out));
  REQUIRE(a["settings"]["measure"] == "attention");
  REQUIRE(a["cells"].size() == 2);
  const json& short_cell = a["cells"][0];
  const json& long_cell = a["cells"][1];
  CHECK(short_cell["attention"].size() == 1);  // 64 <= L = 128: "all" alone
  CHECK(long_cell["attention"].size() == 3);
  CHECK(long_cell["queries"] == json({{"all", 512}, {"in_L", 256}, {"past_L", 256}}));
  CHECK(long_cell["buckets"].size() == 9);  // 0, 1, 2-3, ..., 128-255
  CHECK(long_cell["buckets"].back() == json({128, 255}));
  for (const json& c : a["cells"])
    for (auto& [range, stats] : c["attention"].items()) {
      INFO(range);
      REQUIRE(stats["entropy"].size() == 5);  // the rope model: 5 layers of 4 heads
      for (size_t l = 0; l < 5; ++l)
        for (size_t h = 0; h < 4; ++h) {
          double mass = 0;
          for (const json& m : stats["mass"][l][h]) mass += m.get<double>();
          CHECK(mass == Approx(1.0).epsilon(1e-6));  // a query's buckets hold all its weight
          const double entropy = stats["entropy"][l][h], top = stats["max_weight"][l][h];
          CHECK(entropy >= 0.0);
          CHECK(entropy <= std::log(double(c["length"].get<int>())));
          CHECK((top > 0.0 && top <= 1.0));
          CHECK(stats["sink_mass"][l][h].get<double>() <= 1.0);
          CHECK(stats["mean_distance"][l][h].get<double>() < c["length"].get<int>());
        }
    }
  // all = the queries' mean over both ranges, which hold half the queries each
  const double all = long_cell["attention"]["all"]["entropy"][2][1], in = long_cell["attention"]["in_L"]["entropy"][2][1],
               past = long_cell["attention"]["past_L"]["entropy"][2][1];
  CHECK(all == Approx((in + past) / 2).epsilon(1e-12));

  const std::vector<std::string> csv = lines_of(slurp(tmp / "a.csv"));
  REQUIRE(!csv.empty());
  CHECK(csv[0] ==
        "model,config,label,positions,length,trained_length,queries,layer,head,entropy,sink_mass,mean_distance,max_weight,"
        "mass_d0,mass_d1,mass_d2_3,mass_d4_7,mass_d8_15,mass_d16_31,mass_d32_63,mass_d64_127,mass_d128_255,query_count,"
        "windows,sink,pert_version,error");
  CHECK(csv.size() == 1 + 20 + 3 * 20);  // a row per (cell, range, layer, head)
  CHECK(csv[1].rfind(kRope + ",plain,plain,rope,64,128,all,0,0,", 0) == 0);

  // --json: the file's content on stdout; a rerun resumes with nothing to do
  const Run again = run_pert([&] {
    auto args = attention_args(text, out, "64,256");
    args.push_back("--json");
    return args;
  }());
  REQUIRE(again.exit_code == 0);
  CHECK(json::parse(again.out)["cells"] == a["cells"]);
}

TEST_CASE("attention: shards merge to the whole run's figures exactly, --sink 0 takes no sink", "[attention][cli]") {
  const TempDir tmp;
  const std::string text = attention_text(tmp).string(), whole = (tmp / "w.json").string();
  REQUIRE(run_pert(attention_args(text, whole, "32,64,200")).exit_code == 0);
  for (const char* k : {"1/2", "2/2"}) {
    auto args = attention_args(text, (tmp / (std::string("s") + k[0] + ".json")).string(), "32,64,200");
    args.insert(args.end(), {"--shard", k});
    REQUIRE(run_pert(args).exit_code == 0);
  }
  const std::string merged = (tmp / "m.json").string();
  const Run m = run_pert({"attention", "--merge", (tmp / "s1.json").string(), (tmp / "s2.json").string(), "--out", merged});
  INFO(m.err);
  REQUIRE(m.exit_code == 0);
  const json a = json::parse(slurp(whole)), b = json::parse(slurp(merged));
  REQUIRE(a["cells"].size() == 3);
  for (size_t i = 0; i < 3; ++i) CHECK(a["cells"][i]["attention"] == b["cells"][i]["attention"]);

  auto args = attention_args(text, (tmp / "z.json").string(), "64");
  args.insert(args.end(), {"--sink", "0"});
  REQUIRE(run_pert(args).exit_code == 0);
  const json z = json::parse(slurp(tmp / "z.json"));  // named: a range-for over a temporary's member dangles
  for (const json& layer : z["cells"][0]["attention"]["all"]["sink_mass"])
    for (const json& v : layer) CHECK(v.get<double>() == 0.0);
}

TEST_CASE("attention: a cell that cannot run is an error cell, the others run", "[attention][cli]") {
  const TempDir tmp;
  const std::string text = attention_text(tmp).string(), out = (tmp / "l.json").string();
  const Run r = run_pert({"attention", "-m", kLearned, "-f", text, "--lengths", "64,256,100000", "--chunks", "1", "--out",
                          out, "-q", "-t", "1"});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  const json cells = json::parse(slurp(out))["cells"];
  REQUIRE(cells.size() == 3);
  CHECK(cells[0].contains("attention"));
  CHECK_THAT(cells[1].value("error", ""), Catch::Matchers::Contains("128"));  // past the learned table
  CHECK_THAT(cells[2].value("error", ""), Catch::Matchers::Contains("fewer than one window"));
  CHECK_THAT(r.out, Catch::Matchers::Contains("| learned | plain | learned | 256 | — |"));
  CHECK(lines_of(slurp(tmp / "l.csv")).size() == 1 + 20 + 2);  // the error cells a row each
}

TEST_CASE("attention: a text too short for a length names --lengths, the flag pert attention has", "[attention][cli]") {
  const TempDir tmp;
  write_file(tmp / "one.txt", "Once\n");
  const std::string out = (tmp / "s.json").string();
  const Run r = run_pert({"attention", "-m", kRope, "-f", (tmp / "one.txt").string(), "--lengths", "64", "--out", out, "-q",
                          "-t", "1"});
  INFO(r.err);
  const std::string error = json::parse(slurp(out))["cells"][0].value("error", "");
  CHECK_THAT(error, Catch::Matchers::Contains("fewer than one window of 63 (--lengths 64)"));
  CHECK(error.find("-c ") == std::string::npos);
  CHECK(r.err.find("-c 64") == std::string::npos);
}

TEST_CASE("attention: without --out the table alone, no file, --heads lists the sink heads, the CSV records --sink",
          "[attention][cli]") {
  const TempDir tmp;
  const std::string text = attention_text(tmp).string();
  const Run r = run_shell("cd " + quote(tmp.path.string()) + " && exec " +
                          pert_line({"attention", "-m", kRope, "-f", text, "--lengths", "64", "--chunks", "2", "-q", "-t",
                                     "1", "--heads", "0"}));
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Matchers::Contains("| rope | plain | rope | 64 | all (128) |"));
  CHECK(fs::directory_iterator(tmp.path) != fs::directory_iterator());
  for (const auto& f : fs::directory_iterator(tmp.path)) CHECK(f.path().filename() == "text.txt");  // nothing kept
  // --heads 0: every head of the 5 layers x 4, a row each
  CHECK_THAT(r.out, Catch::Matchers::Contains("Heads with a sink mass of at least 0 (all queries, --heads):"));
  int rows = 0;
  for (const std::string& line : lines_of(r.out)) rows += line.rfind("| rope | plain | 64 | ", 0) == 0;
  CHECK(rows == 20);
  const Run none = run_pert({"attention", "-m", kRope, "-f", text, "--lengths", "64", "--chunks", "2", "-q", "-t", "1",
                             "--heads", "1"});
  CHECK_THAT(none.out, Catch::Matchers::Contains("| (none) |"));
  const Run as_json = run_pert({"attention", "-m", kRope, "-f", text, "--lengths", "64", "--chunks", "2", "-q", "-t", "1",
                                "--json"});
  REQUIRE(as_json.exit_code == 0);
  CHECK(json::parse(as_json.out)["cells"][0]["queries"]["all"] == 128);
  require_refusal(run_pert({"attention", "-m", kRope, "-f", text, "--lengths", "64", "--heads", "2"}), {"--heads"}, 2);
  require_refusal(run_pert({"attention", "-m", kRope, "-f", text, "--lengths", "64", "--csv", (tmp / "x.csv").string()}),
                  {"--csv goes with --out"});

  const std::string out = (tmp / "k.json").string();
  auto args = attention_args(text, out, "64");
  args.insert(args.end(), {"--sink", "4"});
  REQUIRE(run_pert(args).exit_code == 0);
  const std::vector<std::string> csv = lines_of(slurp(tmp / "k.csv"));
  REQUIRE(csv.size() == 21);
  CHECK_THAT(csv[0], Catch::Matchers::EndsWith(",windows,sink,pert_version,error"));
  CHECK_THAT(csv[1], Catch::Matchers::Contains(",128,2,4," + std::string(PERT_VERSION) + ","));  // queries, windows, sink
}

TEST_CASE("attention: files of another measure or of the wrong shape are one-line errors naming the file",
          "[attention][cli][catalogue]") {
  const TempDir tmp;
  const std::string text = attention_text(tmp).string(), att = (tmp / "a.json").string(), sw = (tmp / "s.json").string();
  REQUIRE(run_pert(attention_args(text, att, "32")).exit_code == 0);
  REQUIRE(run_pert({"sweep", "-m", kRope, "-f", text, "--lengths", "32", "--chunks", "2", "--out", sw, "-q", "-t", "1"})
              .exit_code == 0);
  require_refusal(run_pert({"sweep", "--merge", att, "--out", (tmp / "x.json").string()}),
                  {att, "attention cells, not perplexity", "pert attention"});
  require_refusal(run_pert({"attention", "--status", sw}), {sw, "perplexity cells, not attention", "pert sweep"});
  require_refusal(run_pert(attention_args(text, sw, "32")), {sw, "perplexity cells, not attention"});

  json bad = json::parse(slurp(att));
  bad["cells"][0]["attention"]["all"]["entropy"][0].erase(0);  // a head missing
  write_file(tmp / "bad.json", bad.dump());
  require_refusal(run_pert({"attention", "--merge", (tmp / "bad.json").string(), "--out", (tmp / "y.json").string()}),
                  {"bad.json", "attention.all.entropy", "[5 layers][4 heads]"});
  bad = json::parse(slurp(att));
  bad["cells"][0]["buckets"] = json::array({json::array({0})});
  write_file(tmp / "bad.json", bad.dump());
  require_refusal(run_pert({"attention", "--status", (tmp / "bad.json").string()}), {"bad.json", "buckets"});
  bad = json::parse(slurp(att));
  bad["settings"]["measure"] = "speed";
  write_file(tmp / "bad.json", bad.dump());
  require_refusal(run_pert({"attention", "--status", (tmp / "bad.json").string()}), {"bad.json", "settings.measure"});
}

TEST_CASE("result files' strings reach the terminal as text with control characters escaped", "[catalogue][cli]") {
  const TempDir tmp;
  const std::string text = attention_text(tmp).string(), sw = (tmp / "s.json").string();
  REQUIRE(run_pert({"sweep", "-m", kRope, "-f", text, "--lengths", "32", "--chunks", "2", "--out", sw, "-q", "-t", "1"})
              .exit_code == 0);
  json s = json::parse(slurp(sw));
  s["cells"][0]["label"] = "plain\x1b]0;owned\x07";
  s["cells"][0]["position_label"] = "rope\x1b[2J";
  s["cells"][0]["config_hash"] = "plain";
  s["grid"][0]["label"] = s["cells"][0]["label"];
  s["shards"] = json::array({"1/1\x1b[31m"});
  write_file(tmp / "evil.json", s.dump());
  const Run merged = run_pert({"sweep", "--merge", (tmp / "evil.json").string(), "--out", (tmp / "m.json").string()});
  INFO(merged.err);
  REQUIRE(merged.exit_code == 0);
  const Run status = run_pert({"sweep", "--status", (tmp / "evil.json").string()});
  const Run shard = run_pert({"sweep", "-m", kRope, "-f", text, "--lengths", "32", "--out", sw, "--shard", "1/2\x1b[31m"});
  for (const Run* r : {&merged, &status, &shard}) {
    CHECK(r->out.find('\x1b') == std::string::npos);
    CHECK(r->err.find('\x1b') == std::string::npos);
  }
  CHECK_THAT(merged.out, Catch::Matchers::Contains("plain\\x1b]0;owned\\x07"));
  CHECK_THAT(status.out, Catch::Matchers::Contains("1/1\\x1b[31m"));
  CHECK_THAT(shard.err, Catch::Matchers::Contains("1/2\\x1b[31m"));
}
