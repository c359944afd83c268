// Transfer between layer signatures: a signature's search starts from the knobs that won on the
// signatures nearest to it already in the database (same op, layout and kind of grouping; near in
// channels, output pixels, kernel, stride and dilation), ranked nearest first, before any of its
// own neighbourhood is compiled. Most of ResNet-50's 3x3 convs differ only in their channel
// counts and spatial size, and what won on one is a good first guess for the next.
#pragma once

#include <string>
#include <vector>

#include "schedules/knobs.h"
#include "tune/db.h"

namespace padfold {

// How far apart two signatures (layer_signature's JSON) are for transfer: 0 for the same shape,
// growing with the log2 ratios of channels, output pixels and kernel taps, plus one for each of
// stride and dilation that differ. Infinite where knobs cannot carry over (another op, dtype,
// layout, weight layout, or depthwise against dense), or where either text is no signature.
double signature_distance(const std::string& a, const std::string& b);

struct TransferCandidate {
  std::string signature, layer;  // where the knobs won, and the layer they were measured for
  double distance = 0;
  double vs_default = 0;  // what they gained there
  ScheduleParams knobs;   // as stored (resolved for that layer, not this one)
};

// The winning knobs of up to `count` other signatures of `scope`'s target, Halide version and knob
// scope (toolchain_space), and machine, nearest first: only signatures whose search found
// something faster than their default.
std::vector<TransferCandidate> transfer_candidates(const TuneDb& db, const TuneScope& scope,
                                                   size_t count);

}  // namespace padfold
