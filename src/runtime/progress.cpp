#include "pert/progress.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>

namespace pert {

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

Progress::Progress(std::string label, std::string unit, bool quiet, Sink sink)
    : label_(std::move(label)),
      unit_(std::move(unit)),
      sink_(std::move(sink)),
      tty_(!sink_ && isatty(fileno(stderr))),
      quiet_(quiet),
      start_(now_seconds()) {}

void Progress::update(long long done, long long total, const std::string& note) {
  if (quiet_) return;
  const double t = now_seconds(), frac = total > 0 ? double(done) / double(total) : 1.0;
  const int decile = int(frac * 10);
  // A log gets a line a decile, and the end again when its note moves on (windows finishing
  // after their positions all ran).
  if (tty_ ? (t - last_draw_ < 0.1 && done < total) : decile == last_decile_ && !(done >= total && note != last_note_))
    return;
  last_draw_ = t;
  last_decile_ = decile;
  last_note_ = note;
  const int width = 30, filled = int(frac * width);
  const double elapsed = t - start_, eta = frac > 0 ? elapsed * (1 - frac) / frac : 0;
  const std::string bar = tty_ ? " [" + std::string(size_t(filled), '=') + (filled < width ? ">" : "") +
                                     std::string(size_t(std::max(0, width - filled - 1)), ' ') + "]"
                               : ":";  // a log gets plain lines: "label: 3/10 windows 2s, eta 5s"
  char counts[128];
  std::snprintf(counts, sizeof counts, " %lld/%lld %s %.0fs, eta %.0fs", done, total, unit_.c_str(), elapsed, eta);
  const std::string line = label_ + bar + counts + (note.empty() ? "" : " | " + note);
  if (sink_)
    sink_(line + "\n");
  else
    std::fprintf(stderr, "%s%s%s", tty_ ? "\r\033[K" : "", line.c_str(), tty_ ? "" : "\n");
  drawn_ = true;
}

void Progress::finish() {
  if (tty_ && drawn_) std::fputc('\n', stderr);
  drawn_ = false;
}

}  // namespace pert
