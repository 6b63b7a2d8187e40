// The pert executable end to end: exit codes, one-line errors on stderr, never a crash.
#include <cmath>
#include <limits>

#include <cstdlib>

#include "cli_util.hpp"
#include "pert/kernels.hpp"
#include "kernels/ops.hpp"
#include "pert/safetensors.hpp"
#include "pert/threads.hpp"

TEST_CASE("cli: --version, --help and usage errors", "[cli]") {
  Run r = run_pert({"--version"});
  CHECK(r.exit_code == 0);
  CHECK(r.out == "pert " PERT_VERSION "\n");
  r = run_pert({"inspect", "--help"});
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Matchers::Contains("--config") && Catch::Matchers::Contains("--set") &&
                        Catch::Matchers::Contains("--json"));
  require_clean_failure(run_pert({}), {"subcommand is required"});
  // inspect takes the model as every subcommand does (-m, the default) and positionally, once.
  r = run_pert({"inspect"});
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Matchers::StartsWith("model      " PERT_SOURCE_DIR "/models/"));
  for (const std::vector<std::string>& args : {std::vector<std::string>{"inspect", "-m", kAlibi}, {"inspect", kAlibi}}) {
    r = run_pert(args);
    CHECK(r.exit_code == 0);
    CHECK_THAT(r.out, Catch::Matchers::StartsWith("model      " + kAlibi + "\n"));
  }
  require_clean_failure(run_pert({"inspect", "-m", kAlibi, kRope}), {"give the model once"});
  require_clean_failure(run_pert({"inspect", "--frobnicate", "x"}), {"--frobnicate"});
  require_clean_failure(run_pert({"nosuch"}), {"nosuch"});
}

TEST_CASE("cli: inspect shows config, scheme, tensors and checks", "[cli]") {
  TempDir tmp;
  write_model_dir(tmp.path, tiny_config(), tiny_tensors("BF16"));
  const std::string dir = tmp.path.string();

  Run r = run_pert({"inspect", dir});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Matchers::Contains("RoPE (Su et al. 2021): half layout, base 10000, rotary dim 4 of 4"));
  const size_t row = r.out.find("model.layers.1.mlp.down_proj.weight ");
  REQUIRE(row != std::string::npos);
  const std::string line = r.out.substr(row, r.out.find('\n', row) - row);
  CHECK_THAT(line, Catch::Matchers::Contains(" BF16 ") && Catch::Matchers::Contains(" [16, 24] ") &&
                       Catch::Matchers::EndsWith(" 0.001"));
  CHECK_THAT(r.out, Catch::Matchers::Contains("checks passed"));
  CHECK_THAT(r.out, Catch::Matchers::Contains("every weight is finite"));
  CHECK_THAT(r.out, Catch::Matchers::Contains("arch       LlamaForCausalLM\n"));
  CHECK_THAT(r.out, !Catch::Matchers::Contains("ignored config keys"));  // tiny_config's keys are all read

  r = run_pert({"inspect", dir, "--json", "--set", "position.type=alibi", "--set", "rope_theta=null", "--allow-scheme-change"});
  REQUIRE(r.exit_code == 0);
  const json j = json::parse(r.out);
  CHECK(j["config"]["position"] == json{{"type", "alibi"}, {"max_bias", 8.0}});
  CHECK_THAT(j["position"].get<std::string>(), Catch::Matchers::StartsWith("ALiBi"));
  int64_t params = 0;
  for (const TestTensor& t : tiny_tensors()) params += int64_t(t.values.size());
  CHECK(j["parameters"] == params);
  CHECK(j["tensors"].size() == 21);
  CHECK(j["tensors"][0]["name"] == "model.embed_tokens.weight");
  CHECK(j["tensors"][0]["dtype"] == "BF16");
  CHECK(j["checks"].size() == 5);

  write_file(tmp / "yarn.json", R"({"rope_scaling": {"rope_type": "yarn", "factor": 4}})");
  r = run_pert({"inspect", dir, "--config", (tmp / "yarn.json").string()});
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Matchers::Contains("YaRN x4 from L = 64"));
}

// A local layer's cache is a ring of its span and a batch: inspect counts it apart from the global
// layers' per-position figure (2 kv heads of dim 4, F32: 64 bytes a position and layer).
TEST_CASE("cli: inspect's KV cache estimate counts local layers apart", "[cli][layers]") {
  TempDir tmp;
  json c = tiny_config();
  c["layers"] = {{"global", {{"every", 2}}}, {"local", {{"others", true}, {"window", 16}}}};
  write_model_dir(tmp.path, c, tiny_tensors());
  Run r = run_pert({"inspect", tmp.path.string(), "--json"});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  const json memory = json::parse(r.out)["memory"];
  CHECK(memory["global_layers"] == 1);
  CHECK(memory["kv_cache_bytes_per_1000_positions"].get<double>() == 64.0 * 1000);
  CHECK(memory["kv_cache_bytes_local_layers_max"].get<double>() == 64.0 * (15 + 512));
  r = run_pert({"inspect", tmp.path.string()});
  CHECK_THAT(r.out, Catch::Matchers::Contains("per 1000 positions in 1 of 2 layers, and at most 0.0 MiB in the local ones"));
}

TEST_CASE("cli: configs/extend files from inspect to positions", "[cli][extend]") {
  TempDir tmp;
  write_model_dir(tmp.path, tiny_config(), tiny_tensors());
  const std::string dir = tmp.path.string(), configs = PERT_SOURCE_DIR "/configs/extend/";
  Run r = run_pert({"inspect", dir, "--json", "--config", configs + "self-extend.json", "--config", configs + "logn.json"});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  json j = json::parse(r.out);
  CHECK(j["config"]["extend"] == json{{"self_extend", {{"window", 16}, {"group", 8}, {"mode", "exact"}}}, {"logn", {{"trained", 64}}}});
  CHECK_THAT(j["position"].get<std::string>(), Catch::Matchers::Contains("Self-Extend") && Catch::Matchers::Contains("log-n"));
  // Streaming: keys between the sinks and the window are masked (null in JSON), the sinks are not.
  r = run_pert({"positions", "-m", dir, "--distance", "63", "--json", "--config", configs + "streaming.json", "--set",
                "extend.streaming.window=20"});
  REQUIRE(r.exit_code == 0);
  j = json::parse(r.out);
  const json& head = j["scores"][0];
  CHECK(head[19].is_number());  // key 44, the window's oldest
  CHECK(head[20].is_null());    // key 43
  CHECK(head[59].is_null());    // key 4
  CHECK(head[60].is_number());  // key 3, a sink
  // Every exclusive method file replaces the others; a second one is refused, naming both.
  r = run_pert({"inspect", dir, "--config", configs + "rerope.json", "--set", "extend.blockwise={}"});
  require_clean_failure(r, {"extend.", "keep one"});
}

TEST_CASE("cli: inspect refuses bad model directories with one line naming the file", "[cli]") {
  TempDir tmp;
  const std::string dir = tmp.path.string();
  const std::string st = (tmp / "model.safetensors").string();
  const std::string cfg = (tmp / "config.json").string();
  std::vector<TestTensor> tensors = tiny_tensors();
  write_model_dir(tmp.path, tiny_config(), tensors);
  const std::string good = encode_safetensors(tensors);

  SECTION("missing directory") { require_clean_failure(run_pert({"inspect", dir + "/nope"}), {"nope", "not a model directory"}); }
  SECTION("truncated safetensors") {
    write_file(tmp / "model.safetensors", good.substr(0, good.size() / 2));
    require_clean_failure(run_pert({"inspect", dir}), {st, "outside the data area"});
  }
  SECTION("garbage header length") {
    write_file(tmp / "model.safetensors", std::string(8, '\xff') + good.substr(8));
    require_clean_failure(run_pert({"inspect", dir}), {st, "header length"});
  }
  SECTION("header not JSON") {
    write_file(tmp / "model.safetensors", safetensors_image("{\"a\": nope}", ""));
    require_clean_failure(run_pert({"inspect", dir}), {st, "invalid JSON"});
  }
  SECTION("missing tensor") {
    tensors.pop_back();
    write_file(tmp / "model.safetensors", encode_safetensors(tensors));
    require_clean_failure(run_pert({"inspect", dir}), {st, "missing tensor 'lm_head.weight'"});
  }
  SECTION("non-finite weight") {
    tensors[19].values[3] = std::numeric_limits<float>::quiet_NaN();
    write_file(tmp / "model.safetensors", encode_safetensors(tensors));
    require_clean_failure(run_pert({"inspect", dir}), {st, "'model.norm.weight' has 1 non-finite values"});
  }
  SECTION("bad config") {
    json c = tiny_config();
    c["position"] = {{"type", "rope"}, {"scaling", {{"type", "yarn"}, {"factor", 0.5}}}};
    write_file(tmp / "config.json", c.dump());
    require_clean_failure(run_pert({"inspect", dir}), {cfg, "position.scaling.factor must be >= 1"});
  }
  SECTION("bad override") {
    require_clean_failure(run_pert({"inspect", dir, "--set", "position.type=rotary"}),
                          {cfg + " (with overrides)", "position.type"});
    require_clean_failure(run_pert({"inspect", dir, "--set", "nonsense"}), {"--set 'nonsense'"});
    require_clean_failure(run_pert({"inspect", dir, "--config", dir + "/absent.json"}), {"absent.json"});
  }
}

TEST_CASE("cli: generate refuses what it cannot run with one line", "[cli]") {
  TempDir tmp;
  write_model_dir(tmp.path, tiny_config(), tiny_tensors());
  const std::string dir = tmp.path.string();
  require_clean_failure(run_pert({"generate", "-m", dir, "-p", "hi"}), {(tmp / "tokenizer.json").string(), "missing"});
  write_file(tmp / "tokenizer.json", "{\"model\": {}}");
  require_clean_failure(run_pert({"generate", "-m", dir, "-p", "hi"}), {(tmp / "tokenizer.json").string()});
  require_clean_failure(run_pert({"generate", "-m", dir + "/nope", "-p", "hi"}), {"nope"});
  require_clean_failure(run_pert({"generate", "-m", dir, "-p", "hi", "-n", "-3"}), {"-n"});
  require_clean_failure(run_pert({"generate", "-m", dir, "-p", "hi", "--repeat-penalty", "0"}), {"--repeat-penalty"});
}

TEST_CASE("cli: generate with no -m runs the model models/default names", "[cli]") {
  REQUIRE(fs::exists(fs::path(PERT_SOURCE_DIR) / "models" / "default"));
  const Run r = run_pert({"generate", "-p", "Once upon a time", "-n", "12", "--seed", "3", "--json", "-t", "1"});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  const json j = json::parse(r.out);
  CHECK(j["tokens"].size() == (j["stop"] == "length" ? 12u : j["tokens"].size()));
  CHECK(j["tokens"].size() <= 12);
  CHECK(!j["text"].get<std::string>().empty());
  CHECK_THAT(j["model_dir"].get<std::string>(), Catch::Matchers::Contains("models"));

  // A prompt longer than the context is an error before any text is written.
  const Run tight = run_pert({"generate", "-p", "Once upon a time there was", "-c", "3"});
  require_clean_failure(tight, {"prompt has", "context size 3"});
  CHECK(tight.out.empty());
}

// pert bench --roof: a read-bandwidth probe, and for each tg row the bytes a token reads (every
// matrix as kept, counted here from inspect's tensor table; the KV cache at its depth), that
// times t/s, and the share of the probe; and a compute probe per multiplying path, and for each
// pp row its multiply-adds a token, that times t/s, and the share of the peaks' time.
TEST_CASE("cli: bench --roof gives each tg row its bytes a token, GB/s and share of the read probe", "[cli]") {
  const Run info = run_pert({"inspect", kRope, "--json"});  // the default model (models/default names rope)
  REQUIRE(info.exit_code == 0);
  const json model = json::parse(info.out);
  const json& c = model["config"];
  double matrix_values = 0;  // every matrix a decode step multiplies (the tied embedding is the output's)
  for (const json& t : model["tensors"])
    if (t["shape"].size() == 2) matrix_values += t["shape"][0].get<double>() * t["shape"][1].get<double>();
  const double kv_per_position = 2.0 * c["num_hidden_layers"].get<double>() * c["num_key_value_heads"].get<double>() *
                                 c["head_dim"].get<double>();  // values: K and V of every layer
  // bytes a matrix value takes as kept: F32 4, BF16 2, q8 1 + an F16 scale per 32
  for (const auto& [dtype, per_value] : std::vector<std::pair<std::string, double>>{{"f32", 4.0}, {"bf16", 2.0}, {"q8", 1.0625}}) {
    INFO(dtype);
    const Run r = run_pert({"bench", "-p", "8", "-n", "4", "-d", "0,16", "-r", "1", "-t", "1", "--dtype", dtype, "--roof", "--json"});
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    const json j = json::parse(r.out);
    REQUIRE(j["roof"].size() == 1);
    CHECK(j["roof"][0]["threads"] == 1);
    const double roof = j["roof"][0]["read_bytes_per_second"].get<double>();
    CHECK(roof > 1e8);
    CHECK(j["matrix_bytes"].get<double>() == matrix_values * per_value);
    // the compute roof: the matrices' family and F32's for attention, each its path's instruction peak
    const json& compute = j["roof"][0]["compute"];
    CHECK(compute["matrices"]["family"] == (dtype == "f32" ? "f32" : dtype));
    CHECK(compute["attention"]["family"] == "f32");
    CHECK(j["matrix_macs"].get<double>() == matrix_values);
    for (const json& t : j["results"]) {
      INFO(t["test"]);
      if (t["test"].get<std::string>().rfind("pp", 0) == 0) {
        CHECK_FALSE(t.contains("bytes_per_token"));
        // the matrices' MACs a token (the output's once a prompt) and attention's: q·k and p·v per key seen
        const double n = 8, depth = t["depth"].get<double>(), lm_head = c["vocab_size"].get<double>() * c["hidden_size"].get<double>();
        const double keys = c["num_hidden_layers"].get<double>() * (depth + (n + 1) / 2);
        CHECK(t["matrix_macs_per_token"].get<double>() == Approx(matrix_values - lm_head * (1 - 1 / n)));
        CHECK(t["attention_macs_per_token"].get<double>() ==
              Approx(keys * c["num_attention_heads"].get<double>() * 2 * c["head_dim"].get<double>()));
        CHECK(t["macs_per_second"].get<double>() == Approx(t["macs_per_token"].get<double>() * t["tokens_per_second"].get<double>()));
        const double peak_m = compute["matrices"]["macs_per_second"], peak_a = compute["attention"]["macs_per_second"];
        if (peak_m > 0 && peak_a > 0)  // (a plain path has no probe: no share)
          CHECK(t["percent_of_compute_roof"].get<double>() ==
                Approx(100 * t["tokens_per_second"].get<double>() *
                       (t["matrix_macs_per_token"].get<double>() / peak_m + t["attention_macs_per_token"].get<double>() / peak_a)));
        continue;
      }
      CHECK_FALSE(t.contains("macs_per_token"));
      const double context = t["depth"].get<double>() + (4 + 1) / 2.0;  // tg4's mean: 2.5 positions past the depth
      CHECK(t["bytes_per_token"].get<double>() == Approx(matrix_values * per_value + kv_per_position * 4.0 * context));
      CHECK(t["read_bytes_per_second"].get<double>() == Approx(t["bytes_per_token"].get<double>() * t["tokens_per_second"].get<double>()));
      CHECK(t["roof_bytes_per_second"].get<double>() == roof);
      CHECK(t["percent_of_roof"].get<double>() == Approx(100.0 * t["read_bytes_per_second"].get<double>() / roof));
    }
  }
  const Run q8_cache = run_pert({"bench", "-p", "0", "-n", "4", "-r", "1", "-t", "1", "--cache-type", "q8", "--roof", "--json"});
  INFO(q8_cache.err);
  REQUIRE(q8_cache.exit_code == 0);
  const json q8_report = json::parse(q8_cache.out);
  const json& tg = q8_report["results"][0];
  CHECK(tg["bytes_per_token"].get<double>() == Approx(matrix_values * 4.0 + kv_per_position * (1.0 + 2.0 / 32) * 2.5));
  // Markdown: the probe's line above the table, three more columns, empty on prompt rows; CSV: four more fields.
  const Run md = run_pert({"bench", "-p", "8", "-n", "4", "-r", "1", "-t", "1", "--roof"});
  REQUIRE(md.exit_code == 0);
  CHECK_THAT(md.out, Catch::Matchers::StartsWith("memory roof at 1 thread: "));
  CHECK_THAT(md.out, Catch::Matchers::Contains("\ncompute roof at 1 thread: matrices f32 "));
  CHECK_THAT(md.out, Catch::Matchers::Contains("| t/s | MB/token | GB/s | % of roof | GMAC/s | % of compute |"));
  CHECK_THAT(md.out, Catch::Matchers::Contains("% | | |\n"));  // the tg row: the compute columns empty
  CHECK_THAT(md.out, Catch::Matchers::Contains("| | | |"));    // the pp row: the memory columns empty
  const Run csv = run_pert({"bench", "-p", "8", "-n", "4", "-r", "1", "-t", "1", "--roof", "-o", "csv"});
  REQUIRE(csv.exit_code == 0);
  CHECK_THAT(csv.out, Catch::Matchers::Contains(",stddev_ts,bytes_per_token,read_bytes_per_second,roof_bytes_per_second,percent_of_roof,"
                                                "macs_per_token,macs_per_second,percent_of_compute_roof\n"));
  CHECK_THAT(csv.out, Catch::Matchers::Contains(",,,,,"));  // the pp row: the memory fields empty
  CHECK_THAT(csv.out, Catch::Matchers::Contains(",,,\n"));  // the tg row: the compute fields empty
}

// pert bench: every test at every depth, llama-bench's names, one sample per repetition.
TEST_CASE("cli: bench runs ppN and tgN at each depth and reports them as JSON", "[cli]") {
  const Run r = run_pert({"bench", "-p", "8", "-n", "4", "-d", "0,16", "-r", "2", "-t", "1", "--json"});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  const json j = json::parse(r.out);
  CHECK(j["threads"] == json{1});
  CHECK(j["precision"] == "F32");
  CHECK(j["params"].get<long long>() > 0);
  CHECK_THAT(j["blas"].get<std::string>(), Catch::Matchers::StartsWith("OpenBLAS"));  // which kernels ran: in speed tables
  CHECK(!j["blas_core"].get<std::string>().empty());
  const std::vector<std::string> names = {"pp8", "tg4", "pp8 @ d16", "tg4 @ d16"};
  REQUIRE(j["results"].size() == names.size());
  for (size_t i = 0; i < names.size(); ++i) {
    const json& t = j["results"][i];
    CHECK(t["test"] == names[i]);
    CHECK(t["depth"] == (i < 2 ? 0 : 16));
    CHECK(t["threads"] == 1);
    REQUIRE(t["samples"].size() == 2);
    for (const json& s : t["samples"]) CHECK(s.get<double>() > 0.0);
    CHECK(t["tokens_per_second"].get<double>() > 0.0);
  }
  require_clean_failure(run_pert({"bench", "-d", "-1"}), {"-d"});
  const Run only_tg = run_pert({"bench", "-p", "0", "-n", "2", "-r", "1", "-t", "1", "--json"});  // 0: no pp test
  REQUIRE(only_tg.exit_code == 0);
  const json tg = json::parse(only_tg.out)["results"];
  REQUIRE(tg.size() == 1);
  CHECK(tg[0]["test"] == "tg2");
}

TEST_CASE("threads: the default stays within a Slurm task's SLURM_CPUS_PER_TASK", "[cli]") {
  const char* before = std::getenv("SLURM_CPUS_PER_TASK");
  const std::string saved = before ? before : "";
  setenv("SLURM_CPUS_PER_TASK", "1", 1);
  CHECK(pert::default_threads() == 1);
  setenv("SLURM_CPUS_PER_TASK", "0", 1);  // not a grant: ignored
  CHECK(pert::default_threads() >= 1);
  unsetenv("SLURM_CPUS_PER_TASK");
  CHECK(pert::default_threads() >= 1);
  if (before) setenv("SLURM_CPUS_PER_TASK", saved.c_str(), 1);
}

// The CPU and the kernel paths a run took, in bench's and inspect's JSON and at the end of bench's
// table; PERT_KERNELS holds every family at a level, and a value that is no level (or no prefetch
// hint) stops the command with one line naming the variable.
TEST_CASE("cli: bench and inspect name the CPU and the kernel paths, PERT_KERNELS and PERT_PREFETCH", "[cli]") {
  const Run plain = run_shell("PERT_KERNELS=plain PERT_PREFETCH=nta exec " +
                              pert_line({"bench", "-p", "4", "-n", "2", "-r", "1", "-t", "1", "--json"}));
  INFO(plain.err);
  REQUIRE(plain.exit_code == 0);
  const json j = json::parse(plain.out);
  CHECK_FALSE(j["cpu"].get<std::string>().empty());
  CHECK_FALSE(j["cpu_features"].get<std::string>().empty());
  CHECK(j["f32_prefetch"] == "nta");
  for (const char* family : {"f32", "bf16", "q8", "blocks", "cache"}) CHECK(j["kernels"][family] == "plain");
  const Run best = run_pert({"bench", "-p", "4", "-n", "2", "-r", "1", "-t", "1"});
  REQUIRE(best.exit_code == 0);
  CHECK(best.out.find("\ncpu: ") != std::string::npos);
  CHECK(best.out.find("kernels: f32 " + f32_kernels().front()) != std::string::npos);
  const Run info = run_pert({"inspect", kRope, "--json"});
  REQUIRE(info.exit_code == 0);
  CHECK(json::parse(info.out)["kernels"]["q8"] == q8_kernels().front());
  require_refusal(run_shell("PERT_KERNELS=avx9 exec " + pert_line({"bench", "-p", "4", "-n", "0", "-r", "1"})),
                  {"PERT_KERNELS", "avx9", "plain, avx2"});
  require_refusal(run_shell("PERT_PREFETCH=l2 exec " + pert_line({"inspect", kRope})), {"PERT_PREFETCH", "l2", "nta, t0, none"});
}
