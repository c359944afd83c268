// --shard i/n: which share of a tuning run's work this process does, and how it is spelled.
#pragma once

#include <string>

namespace padfold {

struct Shard {
  int index = 0, count = 1;
};
// "i/n" (0 <= i < n) or "auto" (SLURM_ARRAY_TASK_ID with SLURM_ARRAY_TASK_COUNT, or
// JOB_COMPLETION_INDEX with PADFOLD_SHARD_COUNT); throws naming what was expected.
Shard parse_shard(const std::string& text);

}  // namespace padfold
