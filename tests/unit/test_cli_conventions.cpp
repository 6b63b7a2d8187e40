// The command-line conventions shared with llama.cpp's tools, on the real pert binary:
// generate's prompt sources, -n -1, --no-display-prompt, --n-probs and Ctrl-C; one meaning of
// --json; llama.cpp's single-dash flags refused by name; --stride only with sliding; bench's
// checks before output, -t lists and -o formats; progress only on a terminal, --quiet; and
// perplexity's last line as llama-perplexity's.
#include <fcntl.h>
#include <sched.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <sstream>
#include <thread>

#include "cli_util.hpp"

namespace {

std::vector<std::string> lines_of(const std::string& s) {
  std::vector<std::string> out;
  std::istringstream in(s);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

// A text of stories long enough for a few windows of 64.
fs::path story_text(const TempDir& tmp) {
  std::string text;
  for (int i = 0; i < 12; ++i)
    text += "Once upon a time there was a little girl named Lily. She liked to play outside with her dog. "
            "One day she found a big red ball in the park.\n\n";
  write_file(tmp / "stories.txt", text);
  return tmp / "stories.txt";
}

// argv for execv: the binary, then `args`.
std::vector<char*> exec_args(const std::vector<std::string>& args) {
  std::vector<char*> argv = {const_cast<char*>(PERT_BINARY)};
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  return argv;
}

// pert with stdin and/or stderr on a new pseudo-terminal (stdout to a file): what pert does
// when a person runs it. The terminal's output (stderr, when it is there) comes back in err.
Run run_pert_tty(const std::vector<std::string>& args, bool stdin_tty, bool stderr_tty) {
  TempDir io;
  const int master = posix_openpt(O_RDWR | O_NOCTTY);
  REQUIRE(master >= 0);
  REQUIRE(grantpt(master) == 0);
  REQUIRE(unlockpt(master) == 0);
  const std::string slave = ptsname(master);
  const std::string out_path = (io / "out").string(), err_path = (io / "err").string();
  std::vector<char*> argv = exec_args(args);
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    setsid();
    const int tty = open(slave.c_str(), O_RDWR);
    const int null = open("/dev/null", O_RDONLY);
    const int out = open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int err = open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (tty < 0 || null < 0 || out < 0 || err < 0) _exit(126);
    dup2(stdin_tty ? tty : null, 0);
    dup2(out, 1);
    dup2(stderr_tty ? tty : err, 2);
    execv(PERT_BINARY, argv.data());
    _exit(127);
  }
  std::string terminal;
  int status = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(300);
  for (bool done = false; !done;) {
    done = waitpid(pid, &status, WNOHANG) == pid;
    pollfd p{master, POLLIN, 0};
    char buf[4096];
    while (poll(&p, 1, done ? 0 : 20) > 0 && (p.revents & POLLIN)) {
      const ssize_t n = read(master, buf, sizeof buf);
      if (n <= 0) break;
      terminal.append(buf, size_t(n));
    }
    if (!done && std::chrono::steady_clock::now() > deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      FAIL("pert ran past 300 s on a terminal");
    }
    if (!done) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  close(master);
  Run r;
  REQUIRE(WIFEXITED(status));
  r.exit_code = WEXITSTATUS(status);
  r.out = slurp(io / "out");
  r.err = stderr_tty ? terminal : slurp(io / "err");
  return r;
}

json json_of(const Run& r) {
  INFO("stderr: " << r.err);
  REQUIRE(r.exit_code == 0);
  return json::parse(r.out);
}

// A usage error: exit 2, one line naming every needle, nothing on stdout.
void require_usage(const Run& r, const std::vector<std::string>& needles) { require_refusal(r, needles, 2); }

}  // namespace

TEST_CASE("conventions: generate reads its prompt from -p, -f FILE or stdin", "[cli][conventions]") {
  TempDir tmp;
  const std::vector<std::string> base = {"generate", "-m", kRope, "-n", "4", "--temp", "0", "-t", "1", "--json"};
  auto with = [&](std::vector<std::string> extra) {
    std::vector<std::string> args = base;
    args.insert(args.end(), extra.begin(), extra.end());
    return args;
  };
  const json want = json_of(run_pert(with({"-p", "Once upon a time"})));
  CHECK(want["prompt"] == "Once upon a time");

  write_file(tmp / "prompt.txt", "Once upon a time\n");  // one trailing newline dropped, as llama.cpp's -f
  const json from_file = json_of(run_pert(with({"-f", (tmp / "prompt.txt").string()})));
  CHECK(from_file["prompt"] == want["prompt"]);
  CHECK(from_file["tokens"] == want["tokens"]);

  const json piped = json_of(run_pert_input(with({}), "Once upon a time\n"));  // no -p, stdin not a terminal
  CHECK(piped["prompt"] == want["prompt"]);
  CHECK(piped["tokens"] == want["tokens"]);
  const json dash = json_of(run_pert_input(with({"-p", "-"}), "Once upon a time"));
  CHECK(dash["tokens"] == want["tokens"]);

  // A prompt that looks like a flag is still the prompt's value.
  CHECK(json_of(run_pert(with({"-p", "-abc"})))["prompt"] == "-abc");

  require_usage(run_pert(with({"-p", "x", "-f", (tmp / "prompt.txt").string()})), {"--prompt", "--file"});
  require_usage(run_pert(with({"-f", (tmp / "absent.txt").string()})), {"--file", "absent.txt"});
  // No prompt and a terminal on stdin: nothing to wait for, a usage error at once.
  const Run none = run_pert_tty({"generate", "-m", kRope, "-n", "4"}, true, false);
  require_usage(none, {"no prompt", "-p", "-f", "stdin"});
}

TEST_CASE("conventions: generate -n -1 runs until the context is full, without a shift", "[cli][conventions]") {
  const json j = json_of(run_pert({"generate", "-m", kRope, "-p", "Once upon a time", "-n", "-1", "-c", "24",
                                    "--ignore-eos", "--temp", "0", "-t", "1", "--json"}));
  CHECK(j["stop"] == "context");
  CHECK(j["context_shifts"] == 0);
  // Every position of the cache holds a token, and the last token sampled from it is out too.
  CHECK(j["prompt_tokens"].size() + j["tokens"].size() == 25);
  // Text mode says so on its stats line.
  const Run r = run_pert({"generate", "-m", kRope, "-p", "Once", "-n", "-1", "-c", "16", "--ignore-eos", "-t", "1"});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.err, Catch::Matchers::Contains("| 0 context shifts | stop: context |"));
}

TEST_CASE("conventions: generate says once when the context will shift or is past the trained length", "[cli][conventions]") {
  const std::vector<std::string> base = {"generate", "-m", kRope, "-p", "Once upon a time", "--temp", "0", "-t", "1"};
  auto with = [&](std::vector<std::string> extra) {
    std::vector<std::string> args = base;
    args.insert(args.end(), extra.begin(), extra.end());
    return run_pert(args);
  };
  const Run shifts = with({"-n", "200"});  // the default context is the trained length, 128
  REQUIRE(shifts.exit_code == 0);
  CHECK_THAT(shifts.err, Catch::Matchers::Contains("pert: note: the context of 128 (the trained length) fills after"));
  const Run past = with({"-n", "8", "-c", "256"});
  REQUIRE(past.exit_code == 0);
  CHECK_THAT(past.err, Catch::Matchers::Contains("pert: note: -c 256 is past the 128 positions the model was trained on"));
  const Run fits = with({"-n", "100"});
  REQUIRE(fits.exit_code == 0);
  CHECK_THAT(fits.err, !Catch::Matchers::Contains("note:"));
}

TEST_CASE("conventions: generate --no-display-prompt writes only the continuation", "[cli][conventions]") {
  const std::vector<std::string> args = {"generate", "-m", kRope, "-p", "Once upon a time", "-n", "8", "--temp", "0", "-t", "1"};
  const Run shown = run_pert(args);
  std::vector<std::string> quiet_args = args;
  quiet_args.push_back("--no-display-prompt");
  const Run hidden = run_pert(quiet_args);
  REQUIRE(shown.exit_code == 0);
  REQUIRE(hidden.exit_code == 0);
  CHECK(shown.out == "Once upon a time" + hidden.out);
  CHECK_THAT(hidden.out, !Catch::Matchers::StartsWith("Once upon a time"));
}

TEST_CASE("conventions: generate --n-probs gives each token's distribution in --json", "[cli][conventions]") {
  SECTION("greedy: the softmax of the logits, the chosen token first") {
    const json j = json_of(run_pert({"generate", "-m", kRope, "-p", "Once upon a time", "-n", "6", "--temp", "0",
                                     "--n-probs", "3", "-t", "1", "--json"}));
    REQUIRE(j["probs"].size() == j["tokens"].size());
    for (size_t i = 0; i < j["probs"].size(); ++i) {
      const json& p = j["probs"][i];
      CHECK(p["id"] == j["tokens"][i]);
      REQUIRE(p["top_probs"].size() == 3);
      CHECK(p["top_probs"][0]["id"] == p["id"]);
      CHECK(p["top_probs"][0]["prob"] == p["prob"]);
      CHECK(p["top_probs"][0]["token"].is_string());
      double sum = 0, last = 1;
      for (const json& t : p["top_probs"]) {
        CHECK(t["prob"].get<double>() <= last);
        last = t["prob"];
        sum += last;
      }
      CHECK(sum <= 1.0 + 1e-6);
      CHECK(last > 0.0);
    }
  }
  SECTION("sampled: the candidates left after top-k, at the temperature, summing to 1") {
    const json j = json_of(run_pert({"generate", "-m", kRope, "-p", "Once upon a time", "-n", "6", "--temp", "1.5",
                                     "--top-k", "2", "--top-p", "1", "--min-p", "0", "--seed", "7", "--n-probs", "5",
                                     "-t", "1", "--json"}));
    REQUIRE(j["probs"].size() == j["tokens"].size());
    for (const json& p : j["probs"]) {
      REQUIRE(p["top_probs"].size() == 2);  // fewer than asked: top-k kept two
      const double sum = p["top_probs"][0]["prob"].get<double>() + p["top_probs"][1]["prob"].get<double>();
      CHECK(sum == Approx(1.0).epsilon(1e-5));
      CHECK((p["id"] == p["top_probs"][0]["id"] || p["id"] == p["top_probs"][1]["id"]));
      CHECK(p["prob"].get<double>() > 0.0);
    }
  }
  SECTION("without --n-probs there is no probs key; without --json it is refused") {
    const json j = json_of(run_pert({"generate", "-m", kRope, "-p", "Once", "-n", "2", "-t", "1", "--json"}));
    CHECK(!j.contains("probs"));
    require_usage(run_pert({"generate", "-m", kRope, "-p", "Once", "--n-probs", "3"}), {"--n-probs", "--json"});
  }
}

TEST_CASE("conventions: Ctrl-C stops generate after the current token, with its stats, exit 130", "[cli][conventions]") {
  TempDir io;
  const std::string out_path = (io / "out").string(), err_path = (io / "err").string();
  const std::vector<std::string> args = {"generate", "-m", kRope, "-p", "Once upon a time", "-n", "100000",
                                         "--ignore-eos", "-t", "1"};
  std::vector<char*> argv = exec_args(args);
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    const int null = open("/dev/null", O_RDONLY);
    const int out = open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int err = open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (null < 0 || out < 0 || err < 0) _exit(126);
    dup2(null, 0);
    dup2(out, 1);
    dup2(err, 2);
    signal(SIGINT, SIG_DFL);  // as from a terminal, whatever the test runner set
    execv(PERT_BINARY, argv.data());
    _exit(127);
  }
  // Text on stdout: the prompt has run and tokens are coming, so the handler is in place.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  auto written = [&] {
    std::error_code ec;
    const auto n = fs::file_size(out_path, ec);  // (uintmax_t)-1 before the child has made it
    return ec ? 0 : n;
  };
  while (written() < 40 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  REQUIRE(kill(pid, SIGINT) == 0);
  int status = 0;
  REQUIRE(waitpid(pid, &status, 0) == pid);
  const std::string out = slurp(out_path), err = slurp(err_path);
  INFO("stderr: " << err);
  REQUIRE(WIFEXITED(status));  // not killed by the signal: it finished its output
  CHECK(WEXITSTATUS(status) == 130);
  CHECK_THAT(out, Catch::Matchers::StartsWith("Once upon a time") && Catch::Matchers::EndsWith("\n"));
  const std::vector<std::string> lines = lines_of(err);  // the context note (it would shift), then the stats
  REQUIRE(lines.size() == 2);
  CHECK_THAT(lines[0], Catch::Matchers::StartsWith("pert: note: the context of 128"));
  CHECK_THAT(lines[1], Catch::Matchers::StartsWith("pert: prompt ") && Catch::Matchers::Contains("| stop: interrupted |"));
}

TEST_CASE("conventions: llama.cpp's single-dash flags are unknown options, on every subcommand", "[cli][conventions]") {
  TempDir tmp;
  const std::string text = story_text(tmp).string();
  for (const std::vector<std::string>& command :
       {std::vector<std::string>{"generate", "-m", kRope, "-p", "Once"}, {"perplexity", "-m", kRope, "-f", text},
        {"sweep", "-m", kRope, "-f", text, "--lengths", "64", "--out", (tmp / "s.json").string()},
        {"positions", "-m", kRope}, {"bench", "-m", kRope}, {"tokenize", "-m", kRope, "-p", "Once"}, {"inspect", kRope},
        {"passkey", "-m", kRope, "--lengths", "64"}, {"ruler", "-m", kRope, "--lengths", "64"}}) {
    for (const std::vector<std::string>& bad : {std::vector<std::string>{"-ngl", "99"}, {"-fa"}, {"-ctk", "q8_0"}}) {
      std::vector<std::string> args = command;
      args.insert(args.end(), bad.begin(), bad.end());
      INFO(args[0] << " " << bad[0]);
      const Run r = run_pert(args);
      require_usage(r, {"unknown option " + bad[0]});
    }
  }
  // Values that look like flags are still values: -n -1, --keep -1, -p -abc.
  const Run r = run_pert({"generate", "-m", kRope, "-p", "-abc", "-n", "-1", "--keep", "-1", "-c", "12", "-t", "1"});
  INFO(r.err);
  CHECK(r.exit_code == 0);
}

TEST_CASE("conventions: an unknown --name is named alone, with the nearest flag or pert's way for llama.cpp's", "[cli][conventions]") {
  TempDir tmp;
  const std::string text = story_text(tmp).string();
  // CLI11 listed every leftover word, reversed ("4 --rope-scale yarn --rope-scaling") and hinted nothing.
  Run r = run_pert({"perplexity", "-m", kRope, "-f", text, "--rope-scaling", "yarn", "--rope-scale", "4"});
  require_usage(r, {"unknown option --rope-scaling; a RoPE scaling is a config key in pert: --set 'rope_scaling="});
  CHECK(r.err.find("--rope-scale ") == std::string::npos);  // the first unknown one only
  r = run_pert({"generate", "-m", kRope, "-p", "Once", "--rope-freq-base", "1e6"});
  require_usage(r, {"unknown option --rope-freq-base; RoPE's base is a config key in pert: --set position.base=N"});
  r = run_pert({"generate", "-m", kRope, "-p", "Once", "--grp-attn-n", "4"});
  require_usage(r, {"unknown option --grp-attn-n; Self-Extend is an extend method in pert"});
  r = run_pert({"generate", "-m", kRope, "-p", "Once", "--top_k", "5"});
  require_usage(r, {"unknown option --top_k; did you mean --top-k? (see pert generate --help)"});
  r = run_pert({"sweep", "-m", kRope, "-f", text, "--length=64", "--out", (tmp / "s.json").string()});
  require_usage(r, {"unknown option --length; did you mean --lengths?"});
  r = run_pert({"bench", "-m", kRope, "--frobnicate"});  // nothing near: no guess
  require_usage(r, {"unknown option --frobnicate (see pert bench --help)"});
  // A value that looks like a long option stays a value.
  r = run_pert({"generate", "-m", kRope, "-p", "--nonsense", "-n", "2", "-t", "1"});
  INFO(r.err);
  CHECK(r.exit_code == 0);
}

TEST_CASE("conventions: --json is a flag everywhere, --json-out FILE writes a file beside the text", "[cli][conventions]") {
  TempDir tmp;
  const std::string text = story_text(tmp).string(), file = (tmp / "r.json").string();
  const std::vector<std::string> ppl = {"perplexity", "-m", kRope, "-f", text, "-c", "64", "-t", "1"};
  auto with = [](std::vector<std::string> args, const std::vector<std::string>& extra) {
    args.insert(args.end(), extra.begin(), extra.end());
    return args;
  };
  const json j = json_of(run_pert(with(ppl, {"--json"})));
  CHECK(j["ppl"].get<double>() > 1.0);
  const Run both = run_pert(with(ppl, {"--json-out", file}));
  REQUIRE(both.exit_code == 0);
  CHECK_THAT(both.out, Catch::Matchers::Contains("NLL by position"));  // the text stays on stdout
  CHECK(json::parse(slurp(file))["ppl"] == j["ppl"]);
  // The old form is refused, not written to a file named like a flag's value.
  require_usage(run_pert(with(ppl, {"--json", (tmp / "old.json").string()})), {"old.json"});
  CHECK(!fs::exists(tmp / "old.json"));

  const std::vector<std::string> pos = {"positions", "-m", kRope, "--distance", "16"};
  const json p = json_of(run_pert(with(pos, {"--json"})));
  CHECK(p["scores"][0].size() == 17);
  const Run table = run_pert(with(pos, {"--json-out", file}));
  REQUIRE(table.exit_code == 0);
  CHECK_THAT(table.out, Catch::Matchers::Contains("| distance |"));
  CHECK(json::parse(slurp(file)) == p);
  // sweep: the sweep file's JSON (cells, settings) on stdout instead of the table.
  const std::string out = (tmp / "s.json").string();
  const json s = json_of(run_pert({"sweep", "-m", kRope, "-f", text, "--lengths", "32", "--out", out, "-t", "1", "--json"}));
  REQUIRE(s["cells"].size() == 1);
  CHECK(s["cells"][0]["ppl"].get<double>() > 1.0);
  CHECK(json::parse(slurp(out))["cells"] == s["cells"]);
  for (const char* cmd :
       {"perplexity", "positions", "generate", "bench", "inspect", "tokenize", "passkey", "ruler", "sweep", "attention"}) {
    INFO(cmd);
    const Run help = run_pert({cmd, "--help"});
    REQUIRE(help.exit_code == 0);
    CHECK_THAT(help.out, Catch::Matchers::Contains("--json "));
    CHECK_THAT(help.out, !Catch::Matchers::Contains("--json TEXT"));
  }
}

TEST_CASE("conventions: --stride needs --mode sliding", "[cli][conventions]") {
  TempDir tmp;
  const std::string text = story_text(tmp).string();
  for (const std::string mode : {"chunks", "llama"}) {
    require_usage(run_pert({"perplexity", "-m", kRope, "-f", text, "--mode", mode, "--stride", "16"}), {"--stride", "sliding"});
    require_usage(run_pert({"sweep", "-m", kRope, "-f", text, "--lengths", "64", "--out", (tmp / "s.json").string(),
                            "--mode", mode, "--stride", "16"}),
                  {"--stride", "sliding"});
  }
  require_usage(run_pert({"perplexity", "-m", kRope, "-f", text, "--stride", "16"}), {"--stride", "sliding"});  // chunks: the default
  const Run ok = run_pert({"perplexity", "-m", kRope, "-f", text, "-c", "64", "--mode", "sliding", "--stride", "16",
                           "-t", "1", "--json"});
  INFO(ok.err);
  REQUIRE(ok.exit_code == 0);
  CHECK(json::parse(ok.out)["stride"] == 16);
}

TEST_CASE("conventions: perplexity ends with llama-perplexity's Final estimate line in every mode", "[cli][conventions]") {
  TempDir tmp;
  const std::string text = story_text(tmp).string();
  for (const std::string mode : {"chunks", "sliding", "llama"}) {
    INFO(mode);
    const std::vector<std::string> args = {"perplexity", "-m", kRope, "-f", text, "-c", "64", "--mode", mode, "-t", "1"};
    std::vector<std::string> as_json = args;
    as_json.push_back("--json");
    const json j = json_of(run_pert(as_json));
    const Run r = run_pert(args);
    REQUIRE(r.exit_code == 0);
    char want[96];
    std::snprintf(want, sizeof want, "Final estimate: PPL = %.4f +/- %.5f", j["ppl"].get<double>(), j["ppl_stderr"].get<double>());
    REQUIRE(!lines_of(r.out).empty());
    CHECK(lines_of(r.out).back() == want);
    CHECK(j["ppl_stderr"].get<double>() > 0.0);
  }
}

TEST_CASE("conventions: bench checks every test before its header, -t lists, -o md|json|csv", "[cli][conventions]") {
  SECTION("a test past the learned table: refused before anything is printed, naming the flag") {
    for (const auto& [args, needle] : std::vector<std::pair<std::vector<std::string>, std::string>>{
             {{"-p", "512"}, "-p 512"},
             {{"-p", "64", "-n", "200"}, "-n 200"},
             {{"-p", "64", "-n", "0", "-d", "0,100"}, "-d 100"}}) {
      std::vector<std::string> full = {"bench", "-m", kLearned, "-r", "1", "-t", "1"};
      full.insert(full.end(), args.begin(), args.end());
      INFO(needle);
      const Run r = run_pert(full);
      require_clean_failure(r, {needle, "learned position table (128 positions)"});
      CHECK(r.exit_code == 1);
      CHECK(r.out.empty());
    }
  }
  SECTION("-t 1,2: every test at each thread count") {
    const json j = json_of(run_pert({"bench", "-m", kRope, "-p", "8", "-n", "2", "-r", "1", "-t", "1,2", "-o", "json"}));
    CHECK(j["threads"] == json({1, 2}));
    REQUIRE(j["results"].size() == 4);
    const std::vector<std::pair<int, std::string>> want = {{1, "pp8"}, {1, "tg2"}, {2, "pp8"}, {2, "tg2"}};
    for (size_t i = 0; i < want.size(); ++i) {
      CHECK(j["results"][i]["threads"] == want[i].first);
      CHECK(j["results"][i]["test"] == want[i].second);
    }
  }
  SECTION("-o csv, -o md, and --json as -o json") {
    const Run csv = run_pert({"bench", "-m", kRope, "-p", "8", "-n", "2", "-r", "1", "-t", "1", "-o", "csv"});
    REQUIRE(csv.exit_code == 0);
    const std::vector<std::string> rows = lines_of(csv.out);
    REQUIRE(rows.size() == 3);
    CHECK(rows[0] == "model,params,precision,cache_type,threads,test,n_prompt,n_gen,n_depth,avg_ts,stddev_ts");
    CHECK_THAT(rows[1], Catch::Matchers::StartsWith("rope,") && Catch::Matchers::Contains(",F32,f32,1,pp8,8,0,0,"));
    CHECK_THAT(rows[2], Catch::Matchers::Contains(",F32,f32,1,tg2,0,2,0,"));
    const Run md = run_pert({"bench", "-m", kRope, "-p", "8", "-n", "0", "-r", "1", "-t", "1", "-o", "md"});
    REQUIRE(md.exit_code == 0);
    CHECK_THAT(md.out, Catch::Matchers::StartsWith("| model | params | precision | kv cache | threads | test | t/s |"));
    const json j = json_of(run_pert({"bench", "-m", kRope, "-p", "8", "-n", "0", "-r", "1", "-t", "1", "--json"}));
    CHECK(j["results"].size() == 1);
    require_usage(run_pert({"bench", "-m", kRope, "-o", "xml"}), {"--output", "xml"});
    require_usage(run_pert({"bench", "-m", kRope, "-o", "md", "--json"}), {"--output", "--json"});
  }
}

TEST_CASE("conventions: progress is a bar on a terminal, plain lines otherwise, nothing with --quiet", "[cli][conventions]") {
  TempDir tmp;
  const std::string text = story_text(tmp).string();
  const std::vector<std::string> ppl = {"perplexity", "-m", kRope, "-f", text, "-c", "64", "-t", "1"};
  const Run plain = run_pert(ppl);
  REQUIRE(plain.exit_code == 0);
  CHECK_THAT(plain.err, Catch::Matchers::StartsWith("perplexity: ") && Catch::Matchers::Contains(" positions ") &&
                            Catch::Matchers::Contains(" windows\n"));
  CHECK(plain.err.find('\r') == std::string::npos);
  CHECK(plain.err.find('[') == std::string::npos);  // no bar drawn into a log
  const Run tty = run_pert_tty(ppl, false, true);
  REQUIRE(tty.exit_code == 0);
  CHECK_THAT(tty.err, Catch::Matchers::Contains("\r\033[K") && Catch::Matchers::Contains("] "));
  CHECK_THAT(tty.out, Catch::Matchers::EndsWith(lines_of(plain.out).back() + "\n"));  // stdout is the same

  auto quiet = [](std::vector<std::string> args) {
    args.push_back("--quiet");
    return args;
  };
  for (const std::vector<std::string>& args :
       {ppl, {"perplexity", "-m", kRope, "-f", text, "-c", "64", "-t", "1", "--mode", "llama"},
        {"sweep", "-m", kRope, "-f", text, "--lengths", "32,64", "--out", (tmp / "s.json").string(), "-t", "1"},
        {"bench", "-m", kRope, "-p", "8", "-n", "2", "-r", "2", "-t", "1"}}) {
    INFO(args[0]);
    const Run r = run_pert(quiet(args));
    INFO(r.err);
    CHECK(r.exit_code == 0);
    CHECK(r.err.empty());
    CHECK(!r.out.empty());
    CHECK(run_pert_tty(quiet(args), false, true).err.empty());
  }
  // Errors still print.
  require_clean_failure(run_pert(quiet({"perplexity", "-m", kRope + "/absent", "-f", text})), {"absent"});
}

TEST_CASE("conventions: a ruler cell past the learned table is skipped with its reason, alone it is refused", "[cli][conventions]") {
  // vt at 112 needs 132 positions with its answer: the grid goes on without it, naming the flag.
  const Run r = run_pert({"ruler", "-m", kLearned, "--tasks", "niah_single_1,vt", "--lengths", "112", "--depths", "0.5",
                          "--trials", "1", "-t", "1", "-q", "--json"});
  const json j = json_of(r);
  REQUIRE(j["cells"].size() == 2);
  CHECK(j["cells"][0]["task"] == "niah_single_1");
  CHECK(j["cells"][0]["score"].is_number());
  CHECK(j["cells"][1]["task"] == "vt");
  CHECK(j["cells"][1]["score"].is_null());
  const std::string why = j["cells"][1].value("skipped", "");
  CHECK(why.find("vt at --lengths 112") != std::string::npos);
  CHECK(why.find("learned position table (128 positions); give at most 108, or --set position.beyond=clamp to reuse the "
                 "last one") != std::string::npos);
  const Run alone = run_pert({"ruler", "-m", kLearned, "--tasks", "vt", "--lengths", "112", "-t", "1", "-q"});
  require_clean_failure(alone, {"vt at --lengths 112", "learned position table (128 positions)"});
}

TEST_CASE("conventions: an empty --name= is an empty value, never the next argument", "[cli][conventions]") {
  const Run empty = run_pert({"tokenize", "-m", kRope, "--prompt=", "--no-parse-special", "--json"});
  INFO(empty.err);
  REQUIRE(empty.exit_code == 0);
  CHECK(empty.out == "[]\n");  // not the ids of "--no-parse-special"
  const Run text = run_pert({"tokenize", "-m", kRope, "--prompt=ab", "--json"});
  CHECK(text.exit_code == 0);
  CHECK(text.out != "[]\n");
  // after --, arguments are left as they are
  const Run rest = run_pert({"tokenize", "-m", kRope, "--json", "--", "--prompt="});
  CHECK(rest.exit_code != 0);
}

static size_t count_of(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

TEST_CASE("conventions: -t past the cores not busy warns once, the default and -t 1 do not", "[cli][conventions]") {
  TempDir tmp;
  const std::string text = story_text(tmp).string();
  cpu_set_t set;
  REQUIRE(sched_getaffinity(0, sizeof set, &set) == 0);
  const int cores = CPU_COUNT(&set);
  std::vector<pid_t> spinners;  // a process running on every core: none is idle
  for (int i = 0; i < cores; ++i) {
    const pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0)
      for (volatile unsigned long x = 0;; x = x + 1) {}
    spinners.push_back(pid);
  }
  const std::string warning = "pert: warning: 2 threads on 1 core not busy now";
  const std::vector<std::string> ppl = {"perplexity", "-m", kRope, "-f", text, "-c", "64", "--chunks", "2", "-q"};
  auto with = [&](std::vector<std::string> extra) {
    extra.insert(extra.begin(), ppl.begin(), ppl.end());
    return run_pert(extra);
  };
  const Run busy = with({"-t", "2"}), one = with({"-t", "1"}), fallback = with({});
  const Run bench = run_pert({"bench", "-m", kRope, "-p", "8", "-n", "0", "-r", "1", "-t", "1,2,3"});
  for (pid_t pid : spinners) kill(pid, SIGKILL), waitpid(pid, nullptr, 0);
  INFO(busy.err);
  CHECK(busy.exit_code == 0);
  CHECK(count_of(busy.err, warning) == 1);
  CHECK(busy.err.find("docs/speed.md") != std::string::npos);
  CHECK(count_of(one.err, "pert: warning") == 0);
  CHECK(count_of(fallback.err, "pert: warning") == 0);  // the default: the cores not busy
  INFO(bench.err);
  CHECK(count_of(bench.err, "pert: warning: ") == 1);  // once, not per thread count
}
