// pert: command-line entry. Each subcommand lives in its own file; errors from any layer end
// here as one line on stderr and a non-zero exit.
#include <exception>
#include <iostream>

#include <CLI/CLI.hpp>

#include "common.hpp"
#include "pert/error.hpp"

int main(int argc, char** argv) {
  CLI::App app{"pert: a CPU inference runtime for llama-style decoders with configurable positional encodings"};
  app.set_version_flag("--version", "pert " PERT_VERSION);
  app.require_subcommand(1);
  app.failure_message([](const CLI::App*, const CLI::Error& e) {
    return std::string("pert: error: ") + e.what() + " (see --help)\n";
  });
  pert::cli::add_inspect(app);
  pert::cli::add_generate(app);
  pert::cli::add_perplexity(app);
  pert::cli::add_sweep(app);
  pert::cli::add_positions(app);
  pert::cli::add_bench(app);
  pert::cli::add_tokenize(app);
  if (argc > 1 && argv[1][0] != '-' && app.get_subcommands([&](CLI::App* sub) { return sub->check_name(argv[1]); }).empty()) {
    std::cerr << "pert: error: unknown subcommand '" << argv[1] << "' (see --help)\n";
    return 2;
  }
  try {
    app.parse(argc, argv);  // runs the chosen subcommand
  } catch (const CLI::ParseError& e) {
    app.exit(e);  // prints help, the version, or the one-line error
    return e.get_exit_code() == 0 ? 0 : 2;
  } catch (const pert::Error& e) {
    std::cerr << "pert: error: " << e.what() << "\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "pert: internal error: " << e.what() << "\n";
    return 3;
  }
  return 0;
}
