// Results are never lost: the catalogue of faults around pert's output. A full disk (simulated for
// one directory by tests/helpers/fault_inject.cpp, preloaded), stdout on /dev/full or a closed pipe, two
// shards writing one --out at once, outputs that name one file, names planted in a shared
// directory, outputs that are devices, FIFOs or links, devices given as inputs, and a tokenizer
// that leaves characters out. The sanitizer build runs these against its own pert.
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <csignal>
#include <set>

#include "cli_util.hpp"

namespace {

// The environment that makes writes under `dir` fail once `bytes` bytes are written there (a full
// disk), each after `delay_ms` (a slow disk).
std::string faulty_disk(const fs::path& dir, long bytes, int delay_ms = 0) {
  return "ASAN_OPTIONS=\"${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0\" LD_PRELOAD=" +
         quote(PERT_FAULT_INJECT) + " PERT_FAULT_DIR=" + quote(dir.string()) + " PERT_FAULT_BYTES=" +
         std::to_string(bytes) + " PERT_FAULT_DELAY_MS=" + std::to_string(delay_ms) + " ";
}

Run run_on_full_disk(const std::vector<std::string>& args, const fs::path& dir, long bytes) {
  return run_shell(faulty_disk(dir, bytes) + pert_line(args));
}

std::set<std::string> names_in(const fs::path& dir) {
  std::set<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.insert(e.path().filename().string());
  return names;
}

// A text of ~6 kB for perplexity and sweep cells at lengths up to 128.
fs::path make_text(const TempDir& dir) { return repeated_story(dir, 40); }

bool is_link(const fs::path& p) { return fs::is_symlink(fs::symlink_status(p)); }

}  // namespace

TEST_CASE("output files: a full disk leaves every older file whole and no temporary file", "[catalogue][output]") {
  const TempDir inputs, out;
  const fs::path text = make_text(inputs);
  const std::string sweep = (out / "s.json").string(), csv = (out / "s.csv").string();
  const Run first = run_pert({"sweep", "-m", kRope, "-f", text.string(), "--lengths", "32,64", "--out", sweep, "-q", "-t", "1"});
  INFO(first.err);
  REQUIRE(first.exit_code == 0);
  for (const char* name : {"p.json", "p.csv", "k.json", "k.csv", "k.dump.json", "ppl.json"})
    write_file(out / name, std::string("older results of ") + name + "\n");
  std::map<std::string, std::string> before;
  for (const std::string& name : names_in(out.path)) before[name] = slurp(out / name);
  const std::vector<std::vector<std::string>> commands = {
      {"sweep", "-m", kRope, "-f", text.string(), "--lengths", "32,64,128", "--out", sweep, "-q", "-t", "1"},
      {"positions", "-m", kRope, "--csv", (out / "p.csv").string()},
      {"positions", "-m", kRope, "--json-out", (out / "p.json").string()},
      {"passkey", "-m", kRope, "--lengths", "64", "--depths", "0.5", "--trials", "1", "-q", "-t", "1", "--csv",
       (out / "k.csv").string()},
      {"passkey", "-m", kRope, "--lengths", "64", "--depths", "0.5", "--trials", "1", "-q", "-t", "1", "--json-out",
       (out / "k.json").string()},
      {"passkey", "-m", kRope, "--lengths", "64", "--depths", "0.5", "--trials", "1", "-q", "-t", "1",
       "--dump-prompts", (out / "k.dump.json").string()},
      {"perplexity", "-m", kRope, "-f", text.string(), "-q", "-t", "1", "--json-out", (out / "ppl.json").string()},
  };
  for (long room : {0L, 20L}) {  // nothing fits; the first 20 bytes fit
    for (const auto& args : commands) {
      INFO(args[0] << " " << args[args.size() - 2] << " with " << room << " bytes of room");
      const Run r = run_on_full_disk(args, out.path, room);
      require_clean_failure(r, {out.path.string(), "cannot write: No space left on device"});
      CHECK(r.exit_code == 1);
      CHECK(names_in(out.path).size() == before.size());  // no temporary file left
      for (const auto& [name, bytes] : before) CHECK(slurp(out / name) == bytes);
    }
  }
  // With room, the same sweep resumes and adds its third length.
  const Run resumed = run_pert({"sweep", "-m", kRope, "-f", text.string(), "--lengths", "32,64,128", "--out", sweep, "-q", "-t", "1"});
  CHECK(resumed.exit_code == 0);
  CHECK(json::parse(slurp(sweep))["cells"].size() == 3);
}

TEST_CASE("output files: a signal that ends pert while it writes a file removes the temporary file", "[catalogue][output]") {
  const TempDir out;
  write_file(out / "p.json", "older\n");
  for (const std::string sig : {"TERM", "INT", "HUP"}) {
    INFO("SIG" << sig);
    // The write waits 3 s (a slow disk); the signal comes once the temporary file exists. Job
    // control (set -m), or a background job would ignore SIGINT.
    const Run r = run_shell("set -m; " + faulty_disk(out.path, 1L << 30, 3000) +
                            pert_line({"positions", "-m", kRope, "--json-out", (out / "p.json").string()}) +
                            " >/dev/null & pid=$!; for i in $(seq 200); do ls -A " + quote(out.path.string()) +
                            " | grep -q '^[.]p[.]json[.]' && break; sleep 0.05; done; kill -" + sig + " $pid; wait $pid");
    CHECK(r.exit_code == 128 + (sig == "TERM" ? SIGTERM : sig == "INT" ? SIGINT : SIGHUP));
    CHECK(names_in(out.path) == std::set<std::string>{"p.json"});
    CHECK(slurp(out / "p.json") == "older\n");
  }
}

TEST_CASE("output files: stdout that cannot be written is an error, and a closed pipe stays quiet", "[catalogue][output]") {
  const TempDir inputs;
  const fs::path text = make_text(inputs);
  for (const auto& args : std::vector<std::vector<std::string>>{
           {"tokenize", "-m", kRope, "-f", text.string(), "--json"},
           {"positions", "-m", kRope},
           {"perplexity", "-m", kRope, "-f", text.string(), "-q", "-t", "1", "--chunks", "1"},
           {"generate", "-m", kRope, "-p", "Once upon a time", "-n", "100", "-t", "1", "--ignore-eos"},  // within the context: no note
           {"inspect", kRope, "--json"},
           {"bench", "-m", kRope, "-p", "16", "-n", "4", "-r", "1", "-t", "1", "-q"},
           {"sweep", "--help"},
           {"--version"},
       }) {
    INFO(args[0]);
    const Run r = run_shell(pert_line(args) + " >/dev/full");
    require_clean_failure(r, {"stdout: cannot write: No space left on device"});
    CHECK(r.exit_code == 1);
    // A reader that has gone: SIGPIPE ends pert (141), or with SIGPIPE ignored it ends on EPIPE,
    // quietly either way.
    for (const std::string trap : {"", "trap '' PIPE; "}) {
      const Run piped = run_shell(trap + "(sleep 0.3; exec " + pert_line(args) + ") | true; exit ${PIPESTATUS[0]}");
      INFO("SIGPIPE " << (trap.empty() ? "default" : "ignored") << ": " << piped.err);
      CHECK(piped.err.empty());
      CHECK(piped.exit_code == 141);
    }
  }
}

TEST_CASE("output files: shards writing one --out at once keep every cell", "[catalogue][output]") {
  const TempDir inputs, out;
  const fs::path text = make_text(inputs);
  const std::string sweep = (out / "s.json").string();
  auto shard = [&](const std::string& which) {
    std::vector<std::string> args = {"sweep", "-m", kRope, "-m", kAlibi, "-f", text.string(), "--lengths", "32,64,128",
                                     "--out", sweep, "-q", "-t", "1"};
    if (!which.empty()) args.insert(args.end(), {"--shard", which});
    return pert_line(args);
  };
  SECTION("two shards, a Slurm array's two tasks") {
    const Run r = run_shell(shard("1/2") + " & a=$!; " + shard("2/2") + " & b=$!; wait $a && wait $b");
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
  }
  SECTION("the same sweep twice at once") {
    const Run r = run_shell(shard("") + " & a=$!; " + shard("") + " & b=$!; wait $a && wait $b");
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
  }
  const json cells = json::parse(slurp(sweep))["cells"];
  std::set<std::string> keys;
  for (const json& c : cells) keys.insert(c["model"].get<std::string>() + " " + std::to_string(c["length"].get<int>()));
  CHECK(cells.size() == 6);
  CHECK(keys.size() == 6);
  const std::string csv = slurp(out / "s.csv");
  CHECK(std::count(csv.begin(), csv.end(), '\n') == 7);  // the header and six cells
  const Run again = run_pert({"sweep", "-m", kRope, "-m", kAlibi, "-f", text.string(), "--lengths", "32,64,128", "--out", sweep, "-t", "1"});
  CHECK_THAT(again.err, Catch::Matchers::Contains("0 to run"));
}

TEST_CASE("output files: an output naming another output or an input is refused before any work", "[catalogue][output]") {
  const TempDir inputs, out;
  const fs::path text = make_text(inputs);
  const std::string t = text.string(), r_json = (out / "r.json").string(), r_csv = (out / "r.csv").string();
  const std::string model_config = kRope + "/config.json";
  const std::string config_bytes = slurp(model_config), text_bytes = slurp(text);
  write_file(out / "part.json", "{}");
  struct Case {
    std::vector<std::string> args;
    std::vector<std::string> needles;
  };
  const std::vector<std::string> sweep = {"sweep", "-m", kRope, "-f", t, "--lengths", "32"};
  auto with = [](std::vector<std::string> a, const std::vector<std::string>& more) {
    a.insert(a.end(), more.begin(), more.end());
    return a;
  };
  for (const Case& c : std::vector<Case>{
           {with(sweep, {"--out", r_json, "--csv", r_json}), {"--out and --csv name the same file " + r_json}},
           {with(sweep, {"--out", r_csv}), {"--out and --csv (default: --out with .csv) name the same file " + r_csv}},
           {with(sweep, {"--out", t}), {"--out " + t + " is the -f input"}},
           {with(sweep, {"--out", r_json, "--csv", t}), {"--csv " + t + " is the -f input"}},
           {with(sweep, {"--out", model_config}), {"is the model's config.json input"}},
           {{"sweep", "--merge", (out / "part.json").string(), "--out", (out / "part.json").string()},
            {"--out " + (out / "part.json").string() + " is the --merge input"}},
           {{"perplexity", "-m", kRope, "-f", t, "--json-out", t}, {"--json-out " + t + " is the -f input"}},
           {{"positions", "-m", kRope, "--json-out", r_json, "--csv", r_json}, {"--json-out and --csv name the same file"}},
           {{"positions", "-m", kRope, "--json-out", model_config}, {"is the model's config.json input"}},
           {{"passkey", "-m", kRope, "--lengths", "64", "--csv", r_csv, "--dump-prompts", r_csv},
            {"--csv and --dump-prompts name the same file"}},
       }) {
    INFO(c.args[0] << " " << c.args.back());
    const Run r = run_pert(c.args);
    require_refusal(r, c.needles, 1);
    CHECK(names_in(out.path) == std::set<std::string>{"part.json"});  // nothing written, no lock taken
    CHECK(slurp(model_config) == config_bytes);
    CHECK(slurp(text) == text_bytes);
  }
}

TEST_CASE("output files: names planted in a shared directory are never followed", "[catalogue][output]") {
  const TempDir dir, elsewhere;
  const fs::path victim = elsewhere / "victim";
  write_file(victim, "precious\n");
  const fs::path result = dir / "result.json";
  auto positions_to = [&](const fs::path& p) { return run_pert({"positions", "-m", kRope, "--json-out", p.string()}); };

  SECTION("temporary names planted as links to a victim") {
    for (const char* name : {"result.json.tmp", ".result.json.tmp", "result.json.lock"})
      fs::create_symlink(victim, dir / name);
    const Run r = positions_to(result);
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    CHECK(slurp(victim) == "precious\n");
    CHECK(fs::is_regular_file(fs::symlink_status(result)));
    CHECK(json::parse(slurp(result))["scheme"] == "rope");
    CHECK(names_in(dir.path) == std::set<std::string>{"result.json", "result.json.tmp", ".result.json.tmp", "result.json.lock"});
  }
  SECTION("a sweep's lock file planted as a link is refused, not followed") {
    fs::create_symlink(victim, dir / "s.json.lock");
    const TempDir inputs;
    const Run r = run_pert({"sweep", "-m", kRope, "-f", make_text(inputs).string(), "--lengths", "32", "--out",
                            (dir / "s.json").string(), "-q", "-t", "1"});
    require_clean_failure(r, {(dir / "s.json.lock").string(), "a link; not followed"});
    CHECK(slurp(victim) == "precious\n");
  }
  SECTION("a link to nothing is refused before any work") {
    fs::create_symlink(elsewhere / "new", result);
    require_refusal(positions_to(result), {result.string(), "a link to nothing"}, 2);
    CHECK(!fs::exists(elsewhere / "new"));
  }
  SECTION("the caller's own link to a file: the file is replaced, the link stays") {
    fs::create_symlink(victim, result);
    fs::permissions(victim, fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read);
    REQUIRE(positions_to(result).exit_code == 0);
    CHECK(is_link(result));
    CHECK(json::parse(slurp(victim))["scheme"] == "rope");
    CHECK((fs::status(victim).permissions() & fs::perms::all) ==
          (fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read));  // its mode kept
  }
  if (::geteuid() == 0) {
    SECTION("another user's link is not followed (root only: lchown)") {
      fs::create_symlink(victim, result);
      if (::lchown(result.c_str(), 65534, 65534) != 0) {
        WARN("lchown refused here (a rootless container): skipped");
        return;
      }
      require_refusal(positions_to(result), {result.string(), "a link owned by another user; not followed"}, 2);
      CHECK(slurp(victim) == "precious\n");
    }
    SECTION("a character device is written in place, never replaced (root only: mknod)") {
      const fs::path null = dir / "null";
      if (::mknod(null.c_str(), S_IFCHR | 0666, makedev(1, 3)) != 0) {
        WARN("mknod refused here (a rootless container): skipped");
        return;
      }
      REQUIRE(positions_to(null).exit_code == 0);
      CHECK(fs::is_character_file(fs::symlink_status(null)));
    }
  }
}

TEST_CASE("output files: stdout's link and FIFOs are written in place", "[catalogue][output]") {
  const TempDir dir;
  SECTION("a link to /proc/self/fd/1 (and /dev/stdout) sends the JSON to stdout") {
    const fs::path link = dir / "stdout";
    fs::create_symlink("/proc/self/fd/1", link);
    for (const std::string& target : {link.string(), std::string("/dev/stdout")}) {
      const Run r = run_pert({"positions", "-m", kRope, "--distance", "8", "--json-out", target});
      INFO(r.err);
      REQUIRE(r.exit_code == 0);
      CHECK_THAT(r.out, Catch::Matchers::StartsWith("{"));             // the JSON first,
      CHECK_THAT(r.out, Catch::Matchers::Contains("| distance |"));    // the table after it
      CHECK(is_link(link));
    }
    CHECK(is_link("/dev/stdout"));
  }
  SECTION("a FIFO stays a FIFO and its reader gets the JSON") {
    const fs::path fifo = dir / "fifo";
    REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
    const Run r = run_shell("cat " + quote(fifo.string()) + " > " + quote((dir / "got").string()) + " & " +
                            pert_line({"positions", "-m", kRope, "--distance", "8", "--json-out", fifo.string()}) +
                            " >/dev/null && wait");
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    CHECK(fs::is_fifo(fs::symlink_status(fifo)));
    CHECK(json::parse(slurp(dir / "got"))["scheme"] == "rope");
  }
}

TEST_CASE("output files: devices are refused as inputs before anything is read, and pipes still work", "[catalogue][output]") {
  const TempDir dir;
  const fs::path text = make_text(dir);
  for (const auto& args : std::vector<std::vector<std::string>>{
           {"perplexity", "-m", kRope, "-f", "/dev/zero"},
           {"sweep", "-m", kRope, "-f", "/dev/zero", "--lengths", "32", "--out", (dir / "s.json").string()},
           {"tokenize", "-m", kRope, "-f", "/dev/zero"},
           {"generate", "-m", kRope, "-f", "/dev/zero"},
           {"perplexity", "-m", kRope, "-f", text.string(), "--config", "/dev/zero"},
           {"sweep", "--merge", "/dev/zero", "--out", (dir / "m.json").string()},
       }) {
    INFO(args[0] << " " << args[4]);
    require_refusal(run_pert(args), {"/dev/zero: a device, not a regular file"}, 2);
  }
  const Run piped = run_shell(pert_line({"perplexity", "-m", kRope, "-q", "-t", "1", "--chunks", "1", "--json", "-f"}) +
                              " <(cat " + quote(text.string()) + ")");
  INFO(piped.err);
  CHECK(piped.exit_code == 0);
  CHECK(json::parse(piped.out)["windows"] == 1);
}

TEST_CASE("output files: characters a tokenizer cannot encode are dropped and pert says so once", "[catalogue][output]") {
  const TempDir dir;
  for (const char* f : {"config.json", "model.safetensors", "tokenizer.json"}) fs::copy_file(fs::path(kRope) / f, dir / f);
  json tok = json::parse(slurp(dir / "tokenizer.json"));
  tok["model"]["byte_fallback"] = false;  // no <0xNN> pieces, no <unk>: as HF, the character is left out
  tok["model"]["unk_token"] = nullptr;
  write_file(dir / "tokenizer.json", tok.dump());
  const std::string odd = "Once upon a time \xe2\x98\x83 there was a \xe2\x99\x9e girl.";  // a snowman, a knight
  const Run r = run_pert({"tokenize", "-m", dir.path.string(), "-p", odd, "--json"});
  INFO(r.err);
  CHECK(r.exit_code == 0);
  CHECK(r.err == "pert: warning: --prompt: 2 characters that the tokenizer cannot encode (no piece, no <unk>, no byte "
                 "fallback) were left out, as HF's tokenizers leave them out: the ids are of the text without them\n");
  std::string text;
  for (int i = 0; i < 20; ++i) text += odd + " ";  // (a newline has no piece either)
  write_file(dir / "odd.txt", text);
  const Run ppl = run_pert({"perplexity", "-m", dir.path.string(), "-f", (dir / "odd.txt").string(), "-q", "-t", "1", "-c", "32"});
  CHECK(ppl.exit_code == 0);
  CHECK(std::count(ppl.err.begin(), ppl.err.end(), '\n') == 1);
  CHECK_THAT(ppl.err, Catch::Matchers::Contains("odd.txt: 40 characters"));
  const Run plain = run_pert({"tokenize", "-m", kRope, "-p", odd});  // byte fallback: nothing dropped
  CHECK(plain.err.empty());
}
