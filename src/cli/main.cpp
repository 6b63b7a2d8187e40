// pert: command-line entry. Each subcommand lives in its own file; errors from any layer end
// here as one line on stderr and a non-zero exit.
#include <algorithm>
#include <cctype>
#include <csignal>
#include <exception>
#include <iostream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "cli/cli_common.hpp"
#include "pert/error.hpp"
#include "pert/json_util.hpp"
#include "pert/kernels.hpp"
#include "pert/output_file.hpp"

namespace {

// The first argument of `sub` that is no option of it: a single-dash word (llama.cpp's -ngl 99,
// -fa, -ctk q8_0, which CLI11 would read as -n with the value "gl") or a --name it does not have
// (CLI11 would list every leftover word, reversed, with no hint); "" when there is none. Values an
// option takes whatever they look like (-p -abc, -n -1) are skipped.
std::string unknown_option(const CLI::App& sub, int argc, char** argv) {
  for (int i = 2; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--") break;
    if (arg.size() < 2 || arg[0] != '-') continue;  // a value or a positional argument
    const bool word = arg[1] != '-' && arg.size() >= 3 && std::isalpha(static_cast<unsigned char>(arg[1])) &&
                      std::isalpha(static_cast<unsigned char>(arg[2]));
    if (word) return arg;
    const std::string name = arg.substr(0, arg.find('='));
    const CLI::Option* opt = sub.get_option_no_throw(name);
    if (!opt && name.size() > 2 && name[1] == '-' && name != "--help") return name;
    if (arg.find('=') != std::string::npos || !opt) continue;  // --name=value holds its value
    i += std::max(0, std::min(opt->get_type_size_min(), opt->get_items_expected_min()));  // what CLI11 always takes
  }
  return "";
}

// llama.cpp's flags for what pert reads from a model's config: where pert's way is.
const std::pair<const char*, const char*> kLlamaFlags[] = {
    {"--rope-scaling", "a RoPE scaling is a config key in pert: --set 'rope_scaling={\"rope_type\":\"yarn\",\"factor\":4}' "
                       "or --config configs/rope/yarn-x4.json (docs/config.md)"},
    {"--rope-scale", "a RoPE scaling is a config key in pert: --set 'rope_scaling={\"rope_type\":\"linear\",\"factor\":4}' "
                     "(docs/config.md)"},
    {"--rope-freq-scale", "a RoPE scaling is a config key in pert: --set 'rope_scaling={\"rope_type\":\"linear\",\"factor\":4}' "
                          "(the factor is 1 / llama.cpp's freq-scale; docs/config.md)"},
    {"--rope-freq-base", "RoPE's base is a config key in pert: --set position.base=N (--set rope_theta=N where "
                         "config.json has no \"position\" block; docs/config.md)"},
    {"--yarn-orig-ctx", "YaRN's original length is a config key in pert: --set rope_scaling.original_max_position_embeddings=N"},
    {"--grp-attn-n", "Self-Extend is an extend method in pert: --config configs/extend/self-extend.json, its group and "
                     "window as --set extend.self_extend.group=N (docs/config.md)"},
    {"--grp-attn-w", "Self-Extend is an extend method in pert: --config configs/extend/self-extend.json, its window as "
                     "--set extend.self_extend.window=N (docs/config.md)"},
};

// Levenshtein distance, for the nearest option's name.
size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = up;
    }
  }
  return row[b.size()];
}

// What follows "unknown option NAME": llama.cpp's way pointed to pert's, or the nearest option.
std::string unknown_option_hint(const CLI::App& sub, const std::string& name) {
  for (const auto& [flag, hint] : kLlamaFlags)
    if (name == flag) return "; " + std::string(hint);
  std::string best;
  size_t best_distance = 3;  // at most 2 edits away
  for (const CLI::Option* opt : sub.get_options())
    for (const std::string& long_name : opt->get_lnames()) {
      const size_t d = edit_distance(name, "--" + long_name);
      if (d < best_distance) best = "--" + long_name, best_distance = d;
    }
  return best.empty() ? "" : "; did you mean " + best + "?";
}

// `--name=` with nothing after the sign: CLI11 would take the next argument as the value
// (`--prompt= --no-parse-special` tokenized "--no-parse-special"). Split into `--name` and an
// empty argument, it is the empty value it says. Everything after `--` is left as it is.
std::vector<std::string> empty_values_split(int argc, char** argv) {
  std::vector<std::string> args;
  bool rest = false;
  for (int i = 0; i < argc; ++i) {
    const std::string a = argv[i];
    rest = rest || a == "--";
    if (!rest && i > 0 && a.size() > 3 && a.compare(0, 2, "--") == 0 && a.back() == '=' &&
        a.find('=') == a.size() - 1) {
      args.push_back(a.substr(0, a.size() - 1));
      args.emplace_back();
    } else {
      args.push_back(a);
    }
  }
  return args;
}

}  // namespace

int main(int argc_given, char** argv_given) {
  std::vector<std::string> arg_text = empty_values_split(argc_given, argv_given);
  std::vector<char*> arg_ptrs;
  for (std::string& a : arg_text) arg_ptrs.push_back(a.data());
  arg_ptrs.push_back(nullptr);
  const int argc = int(arg_text.size());
  char** argv = arg_ptrs.data();
  CLI::App app{"pert: a CPU inference runtime for llama-style decoders with configurable positional encodings"};
  app.set_version_flag("--version", "pert " PERT_VERSION);
  app.require_subcommand(1);
  app.failure_message([](const CLI::App*, const CLI::Error& e) {
    return std::string("pert: error: ") + pert::printable(e.what()) + " (see --help)\n";  // a flag's value as text
  });
  pert::cli::add_inspect(app);
  pert::cli::add_generate(app);
  pert::cli::add_perplexity(app);
  pert::cli::add_sweep(app);
  pert::cli::add_attention(app);
  pert::cli::add_positions(app);
  pert::cli::add_bench(app);
  pert::cli::add_tokenize(app);
  pert::cli::add_passkey(app);
  pert::cli::add_ruler(app);
  if (argc > 1) pert::cli::set_subcommand(argv[1]);
  if (argc > 1 && argv[1][0] != '-') {
    const auto subs = app.get_subcommands([&](CLI::App* sub) { return sub->check_name(argv[1]); });
    if (subs.empty()) {
      std::cerr << "pert: error: unknown subcommand '" << argv[1] << "' (see --help)\n";
      return 2;
    }
    if (const std::string word = unknown_option(*subs.front(), argc, argv); !word.empty()) {
      std::cerr << "pert: error: unknown option " << pert::printable(word) << unknown_option_hint(*subs.front(), word)
                << " (see pert " << argv[1] << " --help)\n";
      return 2;
    }
  }
  int code = 0;
  try {
    try {
      pert::check_kernel_environment();  // PERT_KERNELS / PERT_PREFETCH: one line now, not mid-run
      app.parse(argc, argv);  // runs the chosen subcommand
    } catch (const pert::cli::ExitStatus& e) {  // the output is complete (e.g. interrupted: 130)
      code = e.code;
    } catch (const CLI::ParseError& e) {
      app.exit(e);  // prints help, the version, or the one-line error
      code = e.get_exit_code() == 0 ? 0 : 2;
    }
    pert::finish_stdout();  // a result that did not reach stdout (a full disk) is an error
  } catch (const pert::BrokenPipe&) {  // stdout's reader is gone (SIGPIPE ignored): quiet, as when it kills
    return 128 + SIGPIPE;
  } catch (const pert::Error& e) {
    std::cerr << "pert: error: " << pert::printable(pert::cli::cli_words(e.what())) << "\n";  // one line, whatever a file held
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "pert: internal error: " << pert::printable(e.what()) << "\n";
    return 3;
  }
  return code;
}
