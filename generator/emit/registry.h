// The bundle's C sources and consumer files: each target's registry.c (the kernel table the
// runtime reads, with embedded weights as C arrays) and bundle_entry.c, the umbrella header and
// the consumer CMake file.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "base/npy.h"
#include "emit/bundle_plan.h"

namespace padfold {

// The embedded weights (`data`: the values of each of plan.weight_files) as C arrays, one per
// buffer: float32 as their bits (uint32_t), int8, uint8 and int32 as int8_t, uint8_t and int32_t
// values; registry.c's data pointers name them.
std::string embedded_weights_c(const BundlePlan& plan, const std::vector<NpyData>& data);

// <target>/registry.c and <target>/bundle_entry.c, with `embedded_data` (embedded_weights_c, or
// "") in registry.c.
// heap_scratch_kernel: "", or the first kernel whose Halide scratch is on the heap.
void write_registry_sources(const BundlePlan& plan, const TargetPlan& t,
                            const std::filesystem::path& root, const std::string& embedded_data,
                            const std::string& heap_scratch_kernel);

// include/padfold_<model>.h (every kernel's header) and padfold_<model>.cmake.
void write_consumer_files(const BundlePlan& plan, const std::filesystem::path& root);

}  // namespace padfold
