// The bundle's manifest.json: format, model graph, every target with its kernels' knobs, and every
// kernel with its pads, border and buffers.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "emit/bundle_plan.h"
#include "emit/kernel_jobs.h"

namespace padfold {

// `builds` as compile_kernels returns them; `shared_libraries` per target, as link_bundle_library
// returned them.
nlohmann::json bundle_manifest(const BundlePlan& plan, const std::vector<KernelBuild>& builds,
                               const std::vector<std::optional<std::string>>& shared_libraries);

}  // namespace padfold
