// What padfold tune reports at the end: the outcome table, and the outcomes as JSON (--report).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tune/tuner.h"

namespace padfold {

// The final table: default vs tuned vs each autoscheduler.
std::string outcome_table(const std::vector<LayerOutcome>& outcomes);
// The outcomes as JSON (padfold tune --report), for bench/tune_report.py.
nlohmann::json to_json(const std::vector<LayerOutcome>& outcomes);

}  // namespace padfold
