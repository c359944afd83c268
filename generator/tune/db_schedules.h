// padfold compile --db: the tuning database's best record for a layer on a target, as the knobs
// and provenance a bundle's kernel is compiled with.
#pragma once

#include <Halide.h>

#include <functional>
#include <optional>
#include <string>

#include "emit/bundle.h"
#include "frontend/spec.h"

namespace padfold {

// Opens the database at `db_path` read-only (throwing as TuneDb does) and returns the lookup
// CompileOptions::tuned takes: the best record measured with this toolchain on this machine or,
// with `any_machine`, on any (the provenance says whose), else std::nullopt.
std::function<std::optional<TunedSchedule>(const Layer&, const Halide::Target&)>
tuned_schedules_from(const std::string& db_path, bool any_machine);

}  // namespace padfold
