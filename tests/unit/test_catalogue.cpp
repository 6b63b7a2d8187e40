// The catalogue of bad inputs: each one, given to the pert executable,
// ends in one line on stderr that names the file or flag and what is wrong, and exit 1 (bad
// input) or 2 (bad usage) — never a signal, a hang or output before the error. The sanitizer
// build runs this same file against its own pert, so a bad read on any path is a failure.
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <functional>
#include <limits>

#include "cli_util.hpp"
#include "pert/safetensors.hpp"

namespace {

// A copy of the family's learned-position model (config, BF16 weights, tokenizer): real files
// to break one thing at a time.
struct ModelCopy {
  TempDir tmp;
  std::string dir = tmp.path.string();
  fs::path config = tmp / "config.json", weights = tmp / "model.safetensors", tokenizer = tmp / "tokenizer.json";

  ModelCopy() {
    const fs::path src = fs::path(PERT_SOURCE_DIR) / "models" / "learned";
    for (const char* f : {"config.json", "model.safetensors", "tokenizer.json"}) fs::copy_file(src / f, tmp / f);
  }
  json read_config() const { return json::parse(slurp(config)); }
  void write_config(const json& c) const { write_file(config, c.dump(2)); }
  void set(const std::string& key, const json& value) const {
    json c = read_config();
    c[key] = value;
    write_config(c);
  }

  // The checkpoint's tensors as values (exact: BF16 goes through F32 and back), to edit.
  std::vector<TestTensor> tensors() const {
    const pert::SafetensorsFile file(weights);
    std::vector<TestTensor> out;
    for (const pert::TensorView& t : file.tensors())
      out.push_back({t.name, pert::dtype_name(t.dtype), t.shape, pert::read_f32(t)});
    return out;
  }
  void write_tensors(const std::vector<TestTensor>& t) const { write_file(weights, encode_safetensors(t)); }

  // pert generate on this copy; `extra` flags replace the defaults they name.
  Run generate(std::vector<std::string> extra = {}) const {
    std::vector<std::string> args = {"generate"};
    for (auto [flag, value] : {std::pair{"-m", dir}, {"-p", "Once upon a time"}, {"-n", "4"}, {"-t", "1"}})
      if (std::find(extra.begin(), extra.end(), flag) == extra.end()) args.insert(args.end(), {flag, value});
    args.insert(args.end(), extra.begin(), extra.end());
    return run_pert(args);
  }
};

TestTensor& find(std::vector<TestTensor>& tensors, const std::string& name) {
  for (TestTensor& t : tensors)
    if (t.name == name) return t;
  FAIL("no tensor " << name);
  return tensors.front();
}

}  // namespace

TEST_CASE("catalogue: the unmodified copy runs, so each refusal below is for its one change", "[catalogue]") {
  const ModelCopy m;
  const Run r = m.generate();
  INFO(r.err);
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Matchers::StartsWith("Once upon a time"));
}

TEST_CASE("catalogue: model directory and weights", "[catalogue]") {
  const ModelCopy m;
  const std::string st = m.weights.string();
  SECTION("missing model directory") { require_refusal(m.generate({"-m", m.dir + "/absent"}), {m.dir + "/absent"}); }
  SECTION("unreadable model directory: config.json is not a readable file") {
    fs::remove(m.config);
    fs::create_directory(m.config);
    require_refusal(m.generate(), {m.config.string()});
  }
  SECTION("unreadable weights file") {
    fs::remove(m.weights);
    fs::create_directory(m.weights);
    require_refusal(m.generate(), {st, "not a regular file"});
    if (::geteuid() != 0) {  // root reads files whatever their mode
      fs::remove(m.weights);
      write_file(m.weights, "x");
      fs::permissions(m.weights, fs::perms::none);
      require_refusal(m.generate(), {st, "cannot open"});
    }
  }
  SECTION("missing tensor") {
    std::vector<TestTensor> t = m.tensors();
    t.erase(t.begin() + 3);
    const std::string name = m.tensors()[3].name;
    m.write_tensors(t);
    require_refusal(m.generate(), {st, "missing tensor '" + name + "'"});
  }
  SECTION("tensor of the wrong shape") {
    std::vector<TestTensor> t = m.tensors();
    TestTensor& norm = find(t, "model.norm.weight");
    norm.shape = {64, 2};
    m.write_tensors(t);
    require_refusal(m.generate(), {st, "'model.norm.weight' has shape [64, 2]", "config.json implies [128]"});
  }
  SECTION("tensor of a dtype pert does not read") {
    std::string image = slurp(m.weights);  // same bytes, the header renamed: BF16 -> I16
    const size_t at = image.find("\"BF16\"");
    REQUIRE(at != std::string::npos);
    image.replace(at, 6, "\"I16\" ");  // same length, so the header length still holds
    write_file(m.weights, image);
    require_refusal(m.generate(), {st, "dtype I16 is not supported"});
  }
  SECTION("NaN in a weight") {
    std::vector<TestTensor> t = m.tensors();
    for (TestTensor& x : t) x.dtype = "F32";  // BF16 holds NaN too, but the test writer takes exact values
    find(t, "model.layers.2.mlp.up_proj.weight").values[77] = std::numeric_limits<float>::quiet_NaN();
    m.write_tensors(t);
    require_refusal(m.generate(), {st, "'model.layers.2.mlp.up_proj.weight' has 1 non-finite values"});
  }
  SECTION("Inf in a weight") {
    std::vector<TestTensor> t = m.tensors();
    for (TestTensor& x : t) x.dtype = "F32";
    find(t, "model.embed_tokens.weight").values[5] = -std::numeric_limits<float>::infinity();
    m.write_tensors(t);
    require_refusal(m.generate(), {st, "'model.embed_tokens.weight' has 1 non-finite values"});
  }
}

TEST_CASE("catalogue: FIFOs and devices where files are read", "[catalogue]") {
  const ModelCopy m;
  // A FIFO nobody writes would block open() for ever; /dev/zero would never end.
  for (const fs::path& f : {m.config, m.tokenizer, m.weights}) {
    const std::string keep = slurp(f);
    fs::remove(f);
    REQUIRE(::mkfifo(f.c_str(), 0600) == 0);
    require_refusal(m.generate(), {f.string(), "not a regular file"});
    fs::remove(f);
    write_file(f, keep);
  }
  require_refusal(m.generate({"--config", "/dev/zero"}), {"/dev/zero", "not a regular file"}, 2);  // refused as given
  const fs::path index = m.tmp / "model.safetensors.index.json";
  fs::remove(m.weights);
  REQUIRE(::mkfifo(index.c_str(), 0600) == 0);
  require_refusal(m.generate(), {index.string(), "not a regular file"});
}

TEST_CASE("catalogue: names from files are escaped in messages", "[catalogue]") {
  const ModelCopy m;
  const std::string st = m.weights.string();
  SECTION("a tensor name with a newline and ESC cannot forge a line or drive the terminal") {
    std::vector<TestTensor> t = m.tensors();
    t.push_back({"evil\npert: error: forged \x1b[31m", "F32", {1}, {0.0f}});
    m.write_tensors(t);
    const Run r = m.generate();
    require_refusal(r, {st, "unexpected tensor 'evil\\x0apert: error: forged \\x1b[31m'"});
    CHECK(r.err.find('\x1b') == std::string::npos);
  }
  SECTION("a shard name with a NUL is shown whole") {
    fs::rename(m.weights, m.tmp / "part.safetensors");
    write_file(m.tmp / "model.safetensors.index.json",
               json({{"weight_map", {{"model.norm.weight", std::string("a\0b.safetensors", 15)}}}}).dump());
    require_refusal(m.generate(), {"model.safetensors.index.json", "names 'a\\x00b.safetensors', not a file"});
  }
}

TEST_CASE("catalogue: values that would give NaN results", "[catalogue]") {
  const ModelCopy m;
  SECTION("config numbers beyond float's range") {
    require_refusal(m.generate({"--set", "rms_norm_eps=1e-320"}), {"rms_norm_eps", "float's range"});
    require_refusal(m.generate({"--set", "rms_norm_eps=1e300"}), {"rms_norm_eps", "float's range", "1e+300"});
  }
  SECTION("weights at BF16's largest value overflow: perplexity and generate refuse, no PPL = nan") {
    std::vector<TestTensor> t = m.tensors();
    const float bf16_max = 3.3895313892515355e38f;  // 0x7f7f
    for (float& v : find(t, "model.layers.0.mlp.up_proj.weight").values) v = bf16_max;
    for (float& v : find(t, "model.layers.0.mlp.gate_proj.weight").values) v = bf16_max;
    m.write_tensors(t);
    const fs::path text = m.tmp / "text.txt";
    write_file(text, "Once upon a time there was a little girl. She liked to play in the park with her dog.\n");
    require_refusal(run_pert({"perplexity", "-m", m.dir, "-f", text.string(), "-c", "8", "-t", "1"}),
                    {"non-finite logits"});
    require_refusal(m.generate(), {"non-finite logits"});
    // pert attention: the cell is an error, not statistics of NaN weights (its only cell: exit 1)
    const std::string out = (m.tmp / "a.json").string();
    const Run a = run_pert({"attention", "-m", m.dir, "-f", text.string(), "--lengths", "8", "--out", out, "-q", "-t", "1"});
    CHECK(a.exit_code == 1);
    CHECK_THAT(json::parse(slurp(out))["cells"][0].value("error", ""),
               Catch::Matchers::Contains("non-finite attention scores"));
  }
  SECTION("a tokenizer whose model.vocab is empty (added tokens alone encode no text)") {
    json tok = json::parse(slurp(m.tokenizer));
    tok["model"]["vocab"] = json::object();
    tok["model"]["merges"] = json::array();
    tok["model"]["unk_token"] = nullptr;
    tok["added_tokens"] = json::array({{{"id", 0}, {"content", "<unk>"}, {"special", true}}});
    write_file(m.tokenizer, tok.dump());
    require_refusal(m.generate(), {m.tokenizer.string(), "model.vocab is empty"});
  }
}

TEST_CASE("catalogue: scheme changes, sweep labels and empty model paths", "[catalogue]") {
  const ModelCopy m;
  SECTION("an override that replaces the trained scheme, and --allow-scheme-change") {
    require_refusal(m.generate({"--set", "position.type=alibi"}),
                    {m.config.string(), "trained with learned positions", "--set position.type=alibi",
                     "--allow-scheme-change"});
    // Allowed, the learned table is then a tensor the config does not use: still refused, for that.
    require_refusal(m.generate({"--set", "position.type=alibi", "--allow-scheme-change"}), {"unexpected tensor"});
  }
  SECTION("--label: one per --config, never two alike") {
    const std::string text = (m.tmp / "t.txt").string(), out = (m.tmp / "s.json").string();
    write_file(text, "Once upon a time.\n");
    const std::vector<std::string> base = {"sweep", "-m", m.dir, "-f", text, "--lengths", "16", "--out", out};
    auto with = [&](std::vector<std::string> extra) {
      std::vector<std::string> args = base;
      args.insert(args.end(), extra.begin(), extra.end());
      return run_pert(args);
    };
    write_file(m.tmp / "c.json", "{}");
    require_refusal(with({"--config", "plain", "--config", (m.tmp / "c.json").string(), "--label", "a"}),
                    {"--label", "1 labels for 2 --config"});
    require_refusal(with({"--config", "plain", "--label", "a", "--label", "b"}), {"--label", "2 labels"});
    CHECK_FALSE(fs::exists(out));
  }
  SECTION("-m \"\" is not the default model") {
    for (const char* cmd : {"generate", "perplexity", "bench", "positions", "tokenize", "sweep", "attention", "passkey", "ruler"})
      require_refusal(run_pert({cmd, "-m", ""}), {"--model", "must not be empty"}, 2);
  }
}

TEST_CASE("catalogue: refused before any text is generated", "[catalogue]") {
  const std::string models = (fs::path(PERT_SOURCE_DIR) / "models").string();
  const std::vector<std::string> rope = {"generate", "-m", models + "/rope", "-t", "1"};
  auto with = [](std::vector<std::string> args, std::vector<std::string> extra) {
    args.insert(args.end(), extra.begin(), extra.end());
    return run_pert(args);
  };
  // A shift that would keep everything: known from the lengths, so refused up front.
  require_refusal(with(rope, {"-p", "Once upon a time there", "-c", "6", "--keep", "-1", "-n", "20"}),
                  {"--keep", "context of 6", "nothing to drop"});
  require_refusal(with(rope, {"-p", "", "-c", "1", "-n", "5"}), {"--keep", "context of 1"});
  // xPos's scales leave float past ~64·scale_base positions: -c beyond them is refused, not NaN at 70.
  require_refusal(run_pert({"generate", "-m", models + "/xpos", "-t", "1", "-p", "Once", "-n", "100", "--set",
                            "position.xpos.scale_base=1"}),
                  {"-c 128", "rope+xpos position table (64 positions)", "pass -c 64"});
  // A config claiming 16M trained positions: positions' default distance stays within the
  // flags' bound (it profiled every one of them, 15 GB, before).
  const Run r = run_pert({"positions", "-m", models + "/rope", "--set", "max_position_embeddings=16777216"});
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Matchers::Contains("query at position 131072"));
}

TEST_CASE("catalogue: sweep files with fields of the wrong type", "[catalogue]") {
  TempDir tmp;
  const std::string file = (tmp / "sweep.json").string(), out = (tmp / "out.json").string();
  const json good = {{"pert_sweep", 1},
                     {"settings", {{"text", "t.txt"}, {"mode", "chunks"}}},
                     {"cells", {{{"model", "m"}, {"config", "plain"}, {"length", 64}, {"ppl", 20.5}, {"ppl_stderr", 0.1},
                                 {"nll", 3.0}, {"tokens", 10}, {"windows", 1}, {"seconds", 0.1},
                                 {"tokens_per_second", 100.0}}}}};
  write_file(file, good.dump());
  REQUIRE(run_pert({"sweep", "--merge", file, "--out", out}).exit_code == 0);
  auto broken = [&](const std::function<void(json&)>& edit, const std::vector<std::string>& needles) {
    json j = good;
    edit(j);
    write_file(file, j.dump());
    require_refusal(run_pert({"sweep", "--merge", file, "--out", out}), needles);
  };
  broken([](json& j) { j["cells"][0].erase("ppl"); }, {file, "cell 0", "lacks \"ppl\""});
  broken([](json& j) { j["cells"][0]["ppl"] = "high"; }, {file, "\"ppl\" must be a number", "\"high\""});
  broken([](json& j) { j["pert_sweep"] = "1"; }, {file, "pert_sweep must be 1"});
  broken([](json& j) { j["cells"][0]["index"] = "x"; }, {file, "\"index\" must be an integer"});
  broken([](json& j) { j["cells"][0]["error"] = 42; }, {file, "\"error\" must be a string"});
  broken([](json& j) { j["cells"][0]["trained_length"] = "L"; }, {file, "\"trained_length\" must be an integer"});
  broken([](json& j) { j["settings"] = json::array({1, 2}); }, {file, "settings must be an object"});
  broken([](json& j) { j["cells"][0]["length"] = -5; }, {file, "\"length\" must be an integer >= 2"});
  broken([](json& j) { j["cells"][0]["pert_version"] = 20.5; }, {file, "\"pert_version\" must be a string"});
  broken([](json& j) { j["settings"]["split_docs"] = "yes"; }, {file, "settings.split_docs must be true or false"});
  // Resuming such a file is refused the same way, before any work.
  json j = good;
  j["cells"][0]["ppl"] = "high";
  write_file(out, j.dump());
  require_refusal(run_pert({"sweep", "-m", (fs::path(PERT_SOURCE_DIR) / "models" / "rope").string(), "-f", file,
                            "--lengths", "64", "--out", out}),
                  {out, "\"ppl\" must be a number"});
}

TEST_CASE("catalogue: config values out of range", "[catalogue]") {
  const ModelCopy m;
  const std::string cfg = m.config.string();
  SECTION("zero heads") {
    m.set("num_attention_heads", 0);
    require_refusal(m.generate(), {cfg, "num_attention_heads"});
  }
  SECTION("negative theta") {
    json c = m.read_config();
    c["position"] = {{"type", "rope"}, {"theta", -10000.0}};
    m.write_config(c);
    require_refusal(m.generate(), {cfg, "position.theta"});
  }
  SECTION("scaling factor below 1") {
    require_refusal(m.generate({"--set", "position.type=rope", "--set", "position.scaling={\"type\":\"linear\",\"factor\":0.5}"}),
                    {cfg, "position.scaling.factor must be >= 1"});
  }
  SECTION("unknown scheme") {
    require_refusal(m.generate({"--set", "position.type=rotary"}), {cfg, "position.type", "rotary"});
  }
  SECTION("unknown field") {
    json c = m.read_config();
    c["position"]["max_positons"] = 256;  // misspelt: must not be silently ignored
    m.write_config(c);
    require_refusal(m.generate(), {cfg, "max_positons"});
  }
}

TEST_CASE("catalogue: tokenizer and prompt", "[catalogue]") {
  const ModelCopy m;
  SECTION("a merge naming a piece not in the vocabulary") {
    json t = json::parse(slurp(m.tokenizer));
    t["model"]["merges"][5] = "▁Once zzzz";
    write_file(m.tokenizer, t.dump());
    require_refusal(m.generate(), {m.tokenizer.string(), "merge", "not in the vocabulary"});
  }
  auto edit_tokenizer = [&](const char* key, const json& value) {
    json t = json::parse(slurp(m.tokenizer));
    t[key] = value;
    write_file(m.tokenizer, t.dump());
  };
  SECTION("an invalid regex") {
    edit_tokenizer("pre_tokenizer", {{"type", "Split"}, {"pattern", {{"Regex", "[a-"}}}, {"behavior", "Isolated"}});
    require_refusal(m.generate(), {m.tokenizer.string(), "pre_tokenizer.pattern.Regex", "invalid regex", "PCRE2"});
  }
  SECTION("an unknown pre-tokenizer") {
    edit_tokenizer("pre_tokenizer", {{"type", "Sequence"}, {"pretokenizers", {{{"type", "Digits"}}, {{"type", "BertPreTokenizer"}}}}});
    require_refusal(m.generate(), {m.tokenizer.string(), "pre_tokenizer.pretokenizers[1].type 'BertPreTokenizer' is not supported"});
  }
  SECTION("an unknown normalizer") {
    edit_tokenizer("normalizer", {{"type", "Precompiled"}, {"precompiled_charsmap", "AAAA"}});
    require_refusal(m.generate(), {m.tokenizer.string(), "normalizer.type 'Precompiled' is not supported"});
  }
  SECTION("a regex that backtracks without end on the prompt") {
    edit_tokenizer("pre_tokenizer", {{"type", "Split"}, {"pattern", {{"Regex", "(a+)+$"}}}, {"behavior", "Isolated"}});
    require_refusal(m.generate({"-p", std::string(5000, 'a') + "b"}), {m.tokenizer.string(), "pre_tokenizer.pattern.Regex", "gave up"});
    require_refusal(run_pert({"tokenize", "-m", m.dir, "-p", std::string(5000, 'a') + "b"}), {m.tokenizer.string(), "gave up"});
  }
  SECTION("prompt longer than the learned position table") {
    std::string prompt;
    for (int i = 0; i < 40; ++i) prompt += "Once upon a time there was a girl. ";
    require_refusal(m.generate({"-p", prompt, "-c", "128"}), {"prompt has", "context size 128"});
    require_refusal(m.generate({"-c", "512"}), {"-c 512", "learned position table (128 positions)"});
  }
  SECTION("context larger than memory allows, refused before allocating") {
    require_refusal(m.generate({"--set", "position.beyond=clamp", "-c", "2000000000"}),
                    {"2000000000 positions needs", "MiB of memory available", "-c"});
  }
  SECTION("invalid UTF-8 in the prompt") {
    require_refusal(m.generate({"-p", "Once \xc3\x28 upon"}), {"--prompt", "not valid UTF-8 (byte 5)"});
  }
}

TEST_CASE("catalogue: flags", "[catalogue]") {
  const ModelCopy m;
  SECTION("-n 0") { require_refusal(m.generate({"-n", "0"}), {"--n-predict", "got 0"}, 2); }
  SECTION("-t 0") { require_refusal(m.generate({"-t", "0"}), {"--threads", "0"}, 2); }
  SECTION("unknown flag") { require_refusal(m.generate({"--frobnicate"}), {"--frobnicate"}, 2); }
  SECTION("-t 0 and unknown flags on every subcommand") {
    const std::string text = m.config.string(), out = (m.tmp / "sweep.json").string();
    for (const std::vector<std::string>& args :
         {std::vector<std::string>{"perplexity", "-m", m.dir, "-f", text}, {"bench", "-m", m.dir},
          {"sweep", "-m", m.dir, "-f", text, "--lengths", "64", "--out", out}, {"positions", "-m", m.dir},
          {"inspect", m.dir}}) {
      INFO(args[0]);
      for (const std::vector<std::string>& bad : {std::vector<std::string>{"--frobnicate"}, {"-t", "0"}}) {
        if (bad[0] == "-t" && (args[0] == "inspect" || args[0] == "positions")) continue;  // no -t: no model runs
        std::vector<std::string> with = args;
        with.insert(with.end(), bad.begin(), bad.end());
        require_refusal(run_pert(with), {bad[0] == "-t" ? "--threads" : "--frobnicate"}, 2);
      }
    }
  }
}

namespace {

// A usage error (exit 2) reading "FLAG: must be RULE, got VALUE", short (bounds as written, not
// CLI11's 300-digit doubles).
void require_usage_error(const Run& r, const std::string& flag, const std::string& rule, const std::string& value) {
  require_refusal(r, {flag + ": must be " + rule + ", got " + value}, 2);
  CHECK(r.err.size() < 160);
}

double seconds_of(const std::function<void()>& f) {
  const auto t0 = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// A text the family's model takes minutes to evaluate (4 MB; pert before these checks ran
// perplexity on it for over two minutes before it could report a bad --json).
fs::path large_text(const TempDir& tmp) {
  std::string text;
  while (text.size() < (4u << 20)) text += "Once upon a time there was a little girl named Lily. She liked to play outside.\n\n";
  const fs::path path = tmp / "large.txt";
  write_file(path, text);
  return path;
}

}  // namespace

// Every value is checked while the command line is parsed: with -m naming no directory at all,
// the error is still the flag's, so it comes before the model loads.
TEST_CASE("catalogue: numeric flags out of range, before the model loads", "[catalogue]") {
  const ModelCopy m;
  const std::string absent = m.dir + "/absent", text = m.config.string(), out = (m.tmp / "sweep.json").string();
  const std::vector<std::string> generate = {"generate", "-m", absent, "-p", "Once"},
                                 perplexity = {"perplexity", "-m", absent, "-f", text},
                                 sweep = {"sweep", "-m", absent, "-f", text, "--lengths", "64", "--out", out},
                                 positions = {"positions", "-m", absent}, bench = {"bench", "-m", absent},
                                 passkey = {"passkey", "-m", absent, "--lengths", "64"};
  struct Case {
    std::vector<std::string> command;
    std::string typed, flag, value, rule, got = "";  // got: as the message quotes it, when not the value
  };
  const std::string k2e31 = " (and at most 2147483647)";
  for (const Case& c : std::vector<Case>{
           // generate: sampling (llama.cpp's ranges), lengths, seed
           {generate, "--top-p", "--top-p", "2", "a number in [0, 1]"},
           {generate, "--top-p", "--top-p", "-1", "a number in [0, 1]"},
           {generate, "--top-p", "--top-p", "nan", "a number in [0, 1]"},
           {generate, "--min-p", "--min-p", "5", "a number in [0, 1]"},
           {generate, "--min-p", "--min-p", "-0.1", "a number in [0, 1]"},
           {generate, "--top-k", "--top-k", "-3", "an integer >= 0"},
           {generate, "--top-k", "--top-k", "2.5", "an integer >= 0"},
           {generate, "--temp", "--temp", "nan", "a finite number >= 0"},
           {generate, "--temp", "--temp", "inf", "a finite number >= 0"},
           {generate, "--temp", "--temp", "-0.5", "a finite number >= 0"},
           {generate, "--temp", "--temp", "1e39", "a finite number >= 0 (and at most 3.40282e+38)"},
           {generate, "--repeat-penalty", "--repeat-penalty", "0", "a finite number > 0"},
           {generate, "--repeat-penalty", "--repeat-penalty", "nan", "a finite number > 0"},
           {generate, "--repeat-last-n", "--repeat-last-n", "-1", "an integer >= 0"},
           {generate, "-n", "--n-predict", "0", "-1 (until end of text or a full context) or an integer from 1 to 1073741824"},
           {generate, "-n", "--n-predict", "abc", "-1 (until end of text or a full context) or an integer from 1 to 1073741824"},
           {generate, "-c", "--ctx-size", "-1", "an integer >= 0"},
           {generate, "-c", "--ctx-size", "99999999999", "an integer >= 0" + k2e31},
           {generate, "--keep", "--keep", "-2", "an integer >= -1"},
           {generate, "-s", "--seed", "-2", "an integer >= -1"},
           {generate, "-s", "--seed", "99999999999999999999", "an integer >= -1 (and at most 9223372036854775807)"},
           {generate, "-t", "--threads", "0", "an integer from 1 to 1024"},
           // perplexity and sweep: the evaluation flags
           {perplexity, "-c", "--ctx-size", "-1", "an integer >= 0"},
           {perplexity, "--stride", "--stride", "-1", "an integer >= 0"},
           {perplexity, "--chunks", "--chunks", "-1", "an integer >= 0"},
           {perplexity, "--buckets", "--buckets", "0", "log or an integer from 1 to 1048576"},
           {perplexity, "-t", "--threads", "-1", "an integer from 1 to 1024"},
           {sweep, "--lengths", "--lengths", "1", "an integer from 2 to 16777216"},
           {sweep, "--lengths", "--lengths", "64,-3", "an integer from 2 to 16777216", "-3"},
           {sweep, "--stride", "--stride", "-1", "an integer >= 0"},
           {sweep, "--buckets", "--buckets", "lin", "log or an integer from 1 to 1048576"},
           {sweep, "--shard", "--shard", "3/2", "K/N with 1 <= K <= N", "'3/2'"},
           // positions: bounded, as the profile holds every position's vector
           {positions, "--distance", "--distance", "0", "an integer from 1 to 131072"},
           {positions, "--distance", "--distance", "1000000000", "an integer from 1 to 131072"},
           {positions, "--query-pos", "--query-pos", "-1", "an integer from 0 to 131072"},
           {positions, "--query-pos", "--query-pos", "1000000000", "an integer from 0 to 131072"},
           // bench: each value of a list
           {bench, "-p", "--n-prompt", "-1", "an integer from 0 to 1048576"},
           {bench, "-p", "--n-prompt", "128,-1", "an integer from 0 to 1048576", "-1"},
           {bench, "-n", "--n-gen", "-1", "an integer from 0 to 1048576"},
           {bench, "-d", "--n-depth", "-1", "an integer from 0 to 1048576"},
           {bench, "-r", "--repetitions", "0", "an integer from 1 to 1000"},
           {bench, "-t", "--threads", "0", "an integer from 1 to 1024"},
           // passkey: depths are fractions of the filler, every value of a list checked
           {passkey, "--depths", "--depths", "1.5", "a number in [0, 1]"},
           {passkey, "--depths", "--depths", "0,-0.25", "a number in [0, 1]", "-0.25"},
           {passkey, "--depths", "--depths", "nan", "a number in [0, 1]"},
           {passkey, "--trials", "--trials", "0", "an integer from 1 to 1048576"},
           {passkey, "--lengths", "--lengths", "64,1", "an integer from 2 to 16777216", "1"},
           {passkey, "--seed", "--seed", "-1", "an integer >= 0"},
           {passkey, "--seed", "--seed", "99999999999999999999", "an integer >= 0 (and at most 9223372036854775807)"},
           {passkey, "-t", "--threads", "0", "an integer from 1 to 1024"},
       }) {
    std::vector<std::string> args = c.command;
    args.insert(args.end(), {c.typed, c.value});
    INFO(args[0] << " " << c.typed << " " << c.value);
    require_usage_error(run_pert(args), c.flag, c.rule, c.got.empty() ? c.value : c.got);
  }
  SECTION("--distance past --query-pos") {
    require_refusal(run_pert({"positions", "-m", absent, "--distance", "100", "--query-pos", "50"}),
                    {"--distance: must be at most --query-pos (50)", "got 100"}, 2);
  }
}

// Before any work even when much is asked for: each of these would run for minutes (or, for
// --distance, allocate gigabytes: it ended in std::bad_alloc) if the flag were checked late.
TEST_CASE("catalogue: flag values refused before any work on the real model", "[catalogue]") {
  const ModelCopy m;
  const fs::path text = large_text(m.tmp);
  const std::string missing = (m.tmp / "no-such-dir" / "x.json").string();
  struct Case {
    std::vector<std::string> args;
    std::string message;
  };
  for (const Case& c : std::vector<Case>{
           {{"generate", "-m", m.dir, "-p", "Once", "-n", "200000", "--ignore-eos", "--set", "position.beyond=clamp",
             "--top-p", "2"},
            "--top-p: must be a number in [0, 1], got 2"},
           {{"positions", "-m", m.dir, "--distance", "1000000000"}, "--distance: must be an integer from 1 to 131072"},
           {{"perplexity", "-m", m.dir, "-f", text.string(), "--json-out", missing}, "--json-out: cannot write " + missing},
           {{"sweep", "-m", m.dir, "-f", text.string(), "--lengths", "64,128", "--out", missing},
            "--out: cannot write " + missing},
       }) {
    INFO(c.args[0]);
    Run r;
    const double s = seconds_of([&] { r = run_pert(c.args); });
    require_refusal(r, {c.message}, 2);
    CHECK(s < 10);  // the work itself: minutes
  }
}

// Every output path (perplexity --json-out, positions --json-out and --csv, sweep --out and --csv) is
// checked while parsing: its directory exists and can be written, and it is not a directory.
TEST_CASE("catalogue: output paths that cannot be written, before the model loads", "[catalogue]") {
  const ModelCopy m;
  const std::string absent = m.dir + "/absent", text = m.config.string(), ok = (m.tmp / "ok.json").string();
  const std::string missing = (m.tmp / "no-such-dir" / "x.json").string(), dir = m.tmp.path.string();
  const fs::path locked = m.tmp / "locked";
  fs::create_directory(locked);
  fs::permissions(locked, fs::perms::owner_read | fs::perms::owner_exec);
  const bool root = ::geteuid() == 0;  // root writes in any directory
  for (const auto& [command, flag] : std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{"perplexity", "-m", absent, "-f", text}, "--json-out"},
           {{"positions", "-m", absent}, "--json-out"},
           {{"positions", "-m", absent}, "--csv"},
           {{"sweep", "-m", absent, "-f", text, "--lengths", "64"}, "--out"},
           {{"sweep", "-m", absent, "-f", text, "--lengths", "64", "--out", ok + ".sweep"}, "--csv"},
           {{"passkey", "-m", absent, "--lengths", "64"}, "--json-out"},
           {{"passkey", "-m", absent, "--lengths", "64"}, "--csv"},
           {{"passkey", "-m", absent, "--lengths", "64"}, "--dump-prompts"},
           {{"ruler", "-m", absent, "--lengths", "64"}, "--json-out"},
           {{"ruler", "-m", absent, "--lengths", "64"}, "--csv"},
           {{"ruler", "-m", absent, "--lengths", "64"}, "--dump-prompts"},
       }) {
    INFO(command[0] << " " << flag);
    auto with = [&, &command = command, &flag = flag](const std::string& path) {
      std::vector<std::string> args = command;
      args.insert(args.end(), {flag, path});
      return run_pert(args);
    };
    require_refusal(with(missing), {flag + ": cannot write " + missing, "no-such-dir does not exist"}, 2);
    require_refusal(with(dir), {flag + ": cannot write " + dir + ": it is a directory"}, 2);
    require_refusal(with(text + "/x.json"), {flag + ": cannot write", text + " is not a directory"}, 2);
    if (!root) require_refusal(with((locked / "x.json").string()), {flag + ": cannot write", "is not writable"}, 2);
    // A writable path gets past the check: the error is then the missing model's (on the last
    // line: sweep first says how many cells it has).
    const Run r = with(ok);
    INFO(r.err);
    CHECK(r.exit_code == 1);
    CHECK(r.out.empty());
    CHECK_THAT(r.err, Catch::Matchers::Contains("pert: error: " + absent));
  }
  fs::permissions(locked, fs::perms::owner_all);
}

// ---- cli-conventions flags (generate -f/stdin/-n -1/--n-probs, --json/--json-out, --stride,
// ---- bench -t lists/-o/tests past the table, llama.cpp's single-dash flags): begin ----
TEST_CASE("catalogue: cli-conventions flags", "[catalogue]") {
  const ModelCopy m;
  const std::string absent = m.dir + "/absent", text = m.config.string();
  write_file(m.tmp / "bad.txt", "Once \xc3\x28 upon");
  const std::string bad_utf8 = (m.tmp / "bad.txt").string();
  struct Case {
    std::vector<std::string> args;
    std::vector<std::string> needles;
    int exit_code;
  };
  for (const Case& c : std::vector<Case>{
           {{"generate", "-m", absent, "-p", "Once", "--json", "--n-probs", "-1"},
            {"--n-probs: must be an integer from 0 to 1048576, got -1"}, 2},
           {{"generate", "-m", absent, "-p", "Once", "--json", "--n-probs", "x"},
            {"--n-probs: must be an integer from 0 to 1048576, got x"}, 2},
           {{"generate", "-m", absent, "-p", "Once", "--n-probs", "3"}, {"--n-probs requires --json"}, 2},
           {{"generate", "-m", absent, "-n", "-2", "-p", "Once"}, {"--n-predict: must be -1 (", "got -2"}, 2},
           {{"generate", "-m", absent, "-f", absent + "/p.txt"}, {"--file", absent + "/p.txt"}, 2},
           {{"generate", "-m", absent, "-p", "Once", "-f", text}, {"--prompt excludes --file"}, 2},
           {{"generate", "-m", m.dir, "-f", bad_utf8}, {bad_utf8, "not valid UTF-8 (byte 5)"}, 1},
           {{"generate", "-m", absent, "-p", "Once", "-ngl", "99"}, {"unknown option -ngl"}, 2},
           {{"perplexity", "-m", absent, "-f", text, "-fa"}, {"unknown option -fa"}, 2},
           {{"bench", "-m", absent, "-ngl", "99"}, {"unknown option -ngl"}, 2},
           {{"perplexity", "-m", absent, "-f", text, "--json", "out.json"}, {"out.json"}, 2},
           {{"positions", "-m", absent, "--json", "-"}, {"not expected: -"}, 2},
           {{"perplexity", "-m", absent, "-f", text, "--json-out", m.tmp.path.string()}, {"--json-out", "directory"}, 2},
           {{"perplexity", "-m", absent, "-f", text, "--stride", "16"}, {"--stride: only with --mode sliding"}, 2},
           {{"perplexity", "-m", absent, "-f", text, "--mode", "llama", "--stride", "0"}, {"--stride: only with --mode sliding"}, 2},
           {{"sweep", "-m", absent, "-f", text, "--lengths", "64", "--out", (m.tmp / "s.json").string(), "--stride", "8"},
            {"--stride: only with --mode sliding"}, 2},
           {{"bench", "-m", absent, "-t", "1,0"}, {"--threads: must be an integer from 1 to 1024, got 0"}, 2},
           {{"bench", "-m", absent, "-t", "1,x"}, {"--threads: must be an integer from 1 to 1024, got x"}, 2},
           {{"bench", "-m", absent, "-o", "xml"}, {"--output: xml not in {md,json,csv}"}, 2},
           {{"bench", "-m", absent, "--json", "-o", "csv"}, {"--output excludes --json"}, 2},
           {{"bench", "-m", m.dir, "-p", "512", "-n", "0"}, {"-p 512", "learned position table (128 positions)"}, 1},
           {{"bench", "-m", m.dir, "-p", "0", "-n", "16", "-d", "120"}, {"-n 16 at -d 120", "136 positions"}, 1},
           {{"perplexity", "-m", absent, "-f", text, "--quiet", "x"}, {"not expected: x"}, 2},
           {{"passkey", "-m", absent}, {"--lengths is required"}, 2},
           {{"passkey", "-m", absent, "--lengths", "64", "-ngl", "99"}, {"unknown option -ngl"}, 2},
       }) {
    INFO(c.args[0] << " " << c.args.back());
    require_refusal(run_pert(c.args), c.needles, c.exit_code);
  }
  SECTION("a prompt on stdin that is not UTF-8") {
    require_refusal(run_pert_input({"generate", "-m", m.dir}, "Once \xc3\x28 upon"), {"stdin", "not valid UTF-8 (byte 5)"}, 1);
  }
}
// ---- cli-conventions flags: end ----

TEST_CASE("catalogue: ruler's --essay is read as -f's texts are", "[catalogue]") {
  const TempDir tmp;
  const std::string rope = (fs::path(PERT_SOURCE_DIR) / "models" / "rope").string();
  auto ruler = [&](const std::string& essay) {
    return run_pert({"ruler", "-m", rope, "--tasks", "niah_single_2", "--lengths", "128", "--trials", "1", "--essay",
                     essay, "-q", "-t", "1"});
  };
  require_refusal(ruler("/dev/zero"), {"--essay /dev/zero", "a device, not a regular file"});
  write_file(tmp / "latin1.txt", "caf\xe9 au lait. A second sentence here.\n");
  require_refusal(ruler((tmp / "latin1.txt").string()), {"--essay", "latin1.txt", "not valid UTF-8 (byte 3)"});
  {
    std::ofstream sparse(tmp / "sparse.txt");
    sparse.seekp((std::streamoff(800) << 20) - 1);
    sparse.put('\n');
  }
  require_refusal(ruler((tmp / "sparse.txt").string()), {"--essay", "sparse.txt", "more than the 768 MiB"});
}
