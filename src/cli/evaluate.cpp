#include "evaluate.hpp"

#include <cmath>
#include <cstdio>

#include "pert/error.hpp"

namespace pert::cli {

void EvalFlags::add_to(CLI::App& app) {
  app.add_option("-f,--file", text_file, "Text file to evaluate")->required()->check(input_file(/*streams=*/true));
  app.add_option("--mode", mode, "chunks: non-overlapping windows, every token scored (ALiBi paper); "
                                 "sliding: windows moved by --stride, the last stride tokens scored (YaRN paper); "
                                 "llama: as llama-perplexity, chunks of the text tokenized once, BOS in place of "
                                 "each chunk's first token, its second half scored")
      ->check(CLI::IsMember({"chunks", "sliding", "llama"}))
      ->capture_default_str();
  CLI::Option* stride_flag =
      app.add_option("--stride", stride, "With --mode sliding: tokens the window moves and scores (default: half the context)")
          ->check(int_in(0));
  app.add_option("--chunks", max_windows, "Evaluate at most this many windows (0: all)")
      ->check(int_in(0))
      ->capture_default_str();
  buckets_flag = app.add_option("--buckets", buckets,
                                "Buckets of the NLL-by-position curve: log (log-spaced, four to an octave: each of "
                                "positions 2 to 7 its own, 1000-1189 one) or N of equal width")
                     ->transform(word_or_int_in("log", kLogBuckets, 1, kMaxBuckets))
                     ->type_name("log|N")
                     ->default_str("log");
  app.add_flag("--split-docs", split_docs,
               "Documents are separated by blank lines; each is encoded on its own with BOS before it "
               "(as the family was trained)");
  app.parse_complete_callback([this, stride_flag] {
    if (stride_flag->count() > 0 && mode != "sliding")  // not ignored silently: chunks and llama have no stride
      throw CLI::ValidationError("--stride", "only with --mode sliding (the mode is " + mode + ")");
    if (split_docs && mode == "llama")
      throw CLI::ValidationError("--split-docs",
                                 "not with --mode llama, which tokenizes the whole text once, as llama-perplexity");
  });
}

std::string llama_final_text(double ppl, double stderr_) {
  char s[96];
  std::snprintf(s, sizeof s, "Final estimate: PPL = %.4f +/- %.5f", ppl, stderr_);
  return s;
}

}  // namespace pert::cli
