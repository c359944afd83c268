// Drawing progress lines on stderr, and the tuner's ETA.
#include "tune/progress.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <utility>

namespace padfold {

ProgressLine::ProgressLine(std::optional<std::string> log_prefix)
    : tty_(isatty(fileno(stderr)) != 0), log_prefix_(std::move(log_prefix)) {}

void ProgressLine::show(const std::string& text, size_t done, size_t total, size_t bar_width) {
  if (tty_) {
    if (bar_width > 0) {
      const size_t filled = total ? std::min(bar_width, done * bar_width / total) : 0;
      fmt::print(stderr, "\r[{}{}] {}\x1b[K", std::string(filled, '#'),
                 std::string(bar_width - filled, '.'), text);
    } else {
      fmt::print(stderr, "\r{}\x1b[K", text);
    }
  } else if (log_prefix_) {
    fmt::print(stderr, "{}{}\n", *log_prefix_, text);
  }
}

void ProgressLine::end_line() {
  if (tty_) fmt::print(stderr, "\n");
}

void ProgressLine::clear() {
  if (tty_) fmt::print(stderr, "\r\x1b[K");
}

void TuneProgress::show(const std::string& layer, size_t layer_done, size_t layer_total,
                        double best) {
  const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  double eta = done ? elapsed / static_cast<double>(done) *
                          static_cast<double>(total > done ? total - done : 0)
                    : 0;
  if (end) eta = std::min(eta, std::chrono::duration<double>(*end - Clock::now()).count());
  line.show(fmt::format("{} {}/{}  best {:.3f}x default  elapsed {:.0f}s  ETA {:.0f}s", layer,
                        layer_done, layer_total, best, elapsed, eta),
            done, total, 24);
}

}  // namespace padfold
