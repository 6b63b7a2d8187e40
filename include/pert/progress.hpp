// Progress on stderr for long work (the CLI's subcommands, the Python module's progress=True).
#pragma once
#include <functional>
#include <string>

namespace pert {

// Seconds on the steady clock: what progress bars and generation timings subtract.
double now_seconds();

// A bar redrawn in place on a terminal, otherwise a plain line every 10% ("label: 3/10 windows
// 2s, eta 5s"; a log gets no carriage returns), nothing when `quiet`. With a `sink`, the plain
// lines go to it instead of stderr (the Python module: to sys.stderr, which a notebook shows).
class Progress {
 public:
  using Sink = std::function<void(const std::string& line)>;
  Progress(std::string label, std::string unit, bool quiet = false, Sink sink = {});
  void update(long long done, long long total, const std::string& note = "");
  void finish();  // ends the bar's line

 private:
  std::string label_, unit_;
  Sink sink_;
  bool tty_, quiet_, drawn_ = false;
  int last_decile_ = -1;
  std::string last_note_;
  double start_, last_draw_ = -1;
};

}  // namespace pert
