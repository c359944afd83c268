// The memory bandwidth threads get, measured: each thread copies a buffer of its own, far larger
// than the caches, into another. What `padfold bench` states a memory-bound kernel's bytes per
// second as a share of, as it states a compute-bound kernel's GFLOP/s as a share of the FMA peak.
#pragma once

namespace padfold::measure {

// Bytes read plus bytes written per second, in GB/s, by `threads` threads copying at once (best
// of several passes; the stores' write-allocate reads are not counted, as STREAM does not).
double memory_bandwidth_gbps(int threads);

}  // namespace padfold::measure
