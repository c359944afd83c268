// Timing on a shared machine: the load other processes put on it, a probe of the arithmetic
// threads get, and methods timed in interleaved blocks with medians, timed again while the machine
// was not quiet. `padfold bench` and the benchmarks of bench/ use it.
#pragma once

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace padfold::measure {

using Clock = std::chrono::steady_clock;

// ---------------------------------------------------------------------------------------------
// Load from other processes (the machine is shared): CPU time used by everything but this
// process, in cores, between two snapshots.

struct CpuSnapshot {
  double busy = 0, self = 0;  // clock ticks
  Clock::time_point when;
};

inline CpuSnapshot cpu_snapshot() {
  CpuSnapshot s;
  s.when = Clock::now();
  std::ifstream stat("/proc/stat");
  std::string cpu;
  double v[8] = {0};
  stat >> cpu;
  for (double& x : v) stat >> x;
  s.busy = v[0] + v[1] + v[2] + v[5] + v[6] + v[7];  // user nice system irq softirq steal
  std::ifstream self("/proc/self/stat");
  std::string line;
  std::getline(self, line);
  std::istringstream rest(line.substr(line.rfind(')') + 2));
  std::string field;
  double utime = 0, stime = 0;
  for (int i = 3; i <= 15 && rest >> field; ++i) {
    if (i == 14) utime = std::stod(field);
    if (i == 15) stime = std::stod(field);
  }
  s.self = utime + stime;
  return s;
}

inline double other_load(const CpuSnapshot& a, const CpuSnapshot& b) {
  const double ticks = static_cast<double>(sysconf(_SC_CLK_TCK));
  const double seconds = std::chrono::duration<double>(b.when - a.when).count();
  if (seconds <= 0) return 0;
  return std::max(0.0, (b.busy - a.busy) - (b.self - a.self)) / ticks / seconds;
}

// Parallel capacity: how many cores' worth of plain arithmetic n threads get right now (a few ms
// of independent multiply-adds per thread, against one thread alone). On this shared virtual
// machine a core is sometimes slowed or taken by other tenants without any process of this
// machine showing it; /proc/stat does not see that, this probe does.

inline volatile double probe_sink = 0;

inline volatile double probe_start = 1;  // read at run time, so the compiler cannot fold the work

inline double spin_work(int64_t iterations) {
  const double start = probe_start;
  double a[8] = {start, start, start, start, start, start, start, start};
  for (int64_t i = 0; i < iterations; ++i)
    for (double& x : a) x = x * 0.999999 + 1e-6;
  double sum = 0;
  for (double x : a) sum += x;
  return sum;
}

struct Probe {
  double speed = 1;  // one thread's speed against the fastest seen in this run (<= 1)
  double cores = 1;  // cores' worth of arithmetic n threads got
};

inline Probe probe(int n) {
  static double fastest = 1e9;  // seconds for the work on one thread, best seen
  const int64_t kIterations = static_cast<int64_t>(400000 * probe_start);  // about 1.5 ms
  auto run = [&](int threads) {
    std::vector<std::thread> pool;
    std::vector<double> sink(static_cast<size_t>(threads));
    const auto t0 = Clock::now();
    for (int i = 0; i < threads; ++i)
      pool.emplace_back([&, i] { sink[static_cast<size_t>(i)] = spin_work(kIterations); });
    for (std::thread& t : pool) t.join();
    const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    for (double x : sink) probe_sink = probe_sink + x;  // keeps the work from being optimized out
    return seconds;
  };
  // The libraries' worker threads spin for a few ms after their last parallel region: let them
  // go idle first.
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  double one = 1e9, many = 1e9;
  for (int rep = 0; rep < 3; ++rep) {
    one = std::min(one, run(1));
    if (n > 1) many = std::min(many, run(n));
  }
  fastest = std::min(fastest, one);
  Probe p;
  p.speed = fastest / one;
  p.cores = n > 1 ? n * one / many : 1.0;
  return p;
}

// ---------------------------------------------------------------------------------------------
// Timing: methods run in interleaved blocks; each call is timed on its own; medians.

struct Method {
  std::string name;
  std::function<void()> fn;
  std::vector<double> samples;  // seconds per call
  double total = 0;
};

inline double median(std::vector<double> v) {
  if (v.empty()) return NAN;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

inline void time_methods(std::vector<Method*>& methods, double min_time, double settle) {
  // Warm-up: a few calls each, and an estimate of one call's time.
  std::vector<double> est(methods.size());
  for (size_t m = 0; m < methods.size(); ++m) {
    for (int i = 0; i < 3; ++i) methods[m]->fn();
    const auto t0 = Clock::now();
    int calls = 0;
    do {
      methods[m]->fn();
      ++calls;
    } while (std::chrono::duration<double>(Clock::now() - t0).count() < 0.02);
    est[m] = std::chrono::duration<double>(Clock::now() - t0).count() / calls;
  }
  // Blocks of ~25 ms per method, round robin, until every method has run min_time.
  bool done = false;
  while (!done) {
    done = true;
    for (size_t m = 0; m < methods.size(); ++m) {
      Method& M = *methods[m];
      if (M.total >= min_time && M.samples.size() >= 30) continue;
      done = false;
      const int calls = std::max(3, static_cast<int>(0.025 / est[m]));
      // Let the previous method's worker threads go to sleep (libgomp's spin after a parallel
      // region lasts a few ms) so that they do not compete with this method's threads, then one
      // untimed call to wake this method's own.
      if (settle > 0) std::this_thread::sleep_for(std::chrono::duration<double>(settle));
      M.fn();
      for (int i = 0; i < calls; ++i) {
        const auto t0 = Clock::now();
        M.fn();
        const double dt = std::chrono::duration<double>(Clock::now() - t0).count();
        M.samples.push_back(dt);
        M.total += dt;
      }
    }
  }
}

// How quiet the machine was while methods were timed.
struct QuietLimits {
  double min_time = 0.3, settle = 0.01, max_other_load = 0.3, min_probe = 0.85, retry_wait = 10;
  int retries = 5;
};
struct Quietness {
  double load = 0;   // cores other processes used while timing
  Probe seen;        // the slower of the probes before and after
  bool met = false;  // the limits held (else the last of the retries)
};

// Times `methods` at `threads` threads, again (up to limits.retries times, limits.retry_wait
// seconds apart) while other processes used more than max_other_load cores, or (several threads)
// while the probe found less than min_probe x threads cores' worth of arithmetic before or after
// the timing: on a shared 2-core machine either distorts the times, the 2-thread ones especially.
inline Quietness time_while_quiet(std::vector<Method*>& methods, int threads,
                                  const QuietLimits& limits, const std::string& label) {
  Quietness q;
  for (int attempt = 0;; ++attempt) {
    for (Method* m : methods) m->samples.clear(), m->total = 0;
    const Probe first = probe(threads);
    const CpuSnapshot before = cpu_snapshot();
    time_methods(methods, limits.min_time, limits.settle);
    q.load = other_load(before, cpu_snapshot());
    const Probe last = probe(threads);
    q.seen.speed = std::min(first.speed, last.speed);
    q.seen.cores = std::min(first.cores, last.cores);
    const bool ok = q.load <= limits.max_other_load && q.seen.speed >= limits.min_probe &&
                    (threads == 1 || q.seen.cores >= limits.min_probe * threads);
    q.met = ok;
    if (ok || attempt >= limits.retries) return q;
    std::fprintf(stderr,
                 "%s %dT: other processes used %.2f cores; probe: one thread at %.2f of its best, "
                 "%d threads got %.2f cores; timing again in %g s\n",
                 label.c_str(), threads, q.load, q.seen.speed, threads, q.seen.cores,
                 limits.retry_wait);
    std::this_thread::sleep_for(std::chrono::duration<double>(limits.retry_wait));
  }
}

}  // namespace padfold::measure
