// Progress on stderr: a line redrawn in place on a terminal, one log line per update otherwise;
// and the tuner's line on it (candidates done, the best speedup so far, elapsed time and ETA).
#pragma once

#include <chrono>
#include <cstddef>
#include <optional>
#include <string>

namespace padfold {

// Knows nothing of tuning, so that other long commands (padfold compile) can draw theirs with it.
class ProgressLine {
 public:
  // `log_prefix`: when stderr is not a terminal, each update is printed on its own line after it;
  // std::nullopt: nothing is printed there.
  explicit ProgressLine(std::optional<std::string> log_prefix);

  bool live() const { return tty_; }  // stderr is a terminal
  // `text`, after a bar `done`/`total` full when `bar_width` > 0 (terminal only).
  void show(const std::string& text, size_t done = 0, size_t total = 0, size_t bar_width = 0);
  void end_line();  // a terminal's line is kept and the next output starts below it
  void clear();     // a terminal's line is erased

 private:
  bool tty_;
  std::optional<std::string> log_prefix_;
};

// The tuner's progress over every layer's candidates.
struct TuneProgress {
  using Clock = std::chrono::steady_clock;
  ProgressLine line{"tune: "};
  Clock::time_point start = Clock::now();
  size_t total = 0, done = 0;            // candidates, every layer
  std::optional<Clock::time_point> end;  // with --time

  // "<layer> 3/8  best 1.234x default  elapsed 5s  ETA 12s", the bar counting every layer.
  void show(const std::string& layer, size_t layer_done, size_t layer_total, double best);
  void end_line() { line.end_line(); }
};

}  // namespace padfold
