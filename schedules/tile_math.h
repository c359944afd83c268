// Tile arithmetic shared by the schedule families: clamping, divisors and tile fitting.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdlib>

namespace padfold {

// `v` clamped to [lo, hi], as an int (hi is at least lo).
inline int clamp_int(int64_t v, int lo, int64_t hi) {
  return static_cast<int>(std::max<int64_t>(lo, std::min<int64_t>(v, hi)));
}

// The largest divisor of `extent` that is at most `most` (1 when there is none).
inline int divisor_at_most(int64_t extent, int most) {
  for (int d = static_cast<int>(std::min<int64_t>(most, extent)); d > 1; --d)
    if (extent % d == 0) return d;
  return 1;
}

// A tile size for an axis of `extent` near `preferred`: the size in [preferred/2, 2*preferred] (at
// most `most`) computing the fewest points (a divisor of the extent computes no overlap), ties to
// the size nearest `preferred`, larger first.
inline int fit_tile(int preferred, int64_t extent, int most) {
  int best = preferred;
  int64_t best_total = (extent + preferred - 1) / preferred * preferred;
  for (int t = std::max(1, preferred / 2); t <= std::min<int64_t>(2 * preferred, extent); ++t) {
    if (t > most) break;
    const int64_t total = (extent + t - 1) / t * t;
    const int distance = std::abs(t - preferred), best_distance = std::abs(best - preferred);
    if (total < best_total || (total == best_total && (distance < best_distance ||
                                                       (distance == best_distance && t > best)))) {
      best = t;
      best_total = total;
    }
  }
  return best;
}

}  // namespace padfold
