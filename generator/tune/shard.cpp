// Parsing --shard: i/n, or auto from a Slurm job array's or a Kubernetes Indexed Job's variables.
#include "tune/shard.h"

#include <cstdlib>
#include <cstring>
#include <stdexcept>

namespace padfold {

Shard parse_shard(const std::string& text) {
  Shard s;
  std::string i_text, n_text;
  if (text == "auto") {
    const char* slurm_id = std::getenv("SLURM_ARRAY_TASK_ID");
    const char* slurm_n = std::getenv("SLURM_ARRAY_TASK_COUNT");
    const char* k8s_id = std::getenv("JOB_COMPLETION_INDEX");
    const char* k8s_n = std::getenv("PADFOLD_SHARD_COUNT");
    if (slurm_id && slurm_n) {
      // Arrays may start anywhere (--array=1-8): the index is counted from the lowest task id.
      const char* slurm_min = std::getenv("SLURM_ARRAY_TASK_MIN");
      i_text = slurm_id;
      n_text = slurm_n;
      if (slurm_min && std::strspn(slurm_id, "0123456789") == std::strlen(slurm_id) &&
          std::strspn(slurm_min, "0123456789") == std::strlen(slurm_min) && *slurm_id &&
          *slurm_min && std::strlen(slurm_id) < 7 && std::strlen(slurm_min) < 7)
        i_text = std::to_string(std::stoi(slurm_id) - std::stoi(slurm_min));
    } else if (k8s_id && k8s_n) {
      i_text = k8s_id;
      n_text = k8s_n;
    } else {
      throw std::invalid_argument(
          "--shard auto: expected SLURM_ARRAY_TASK_ID and SLURM_ARRAY_TASK_COUNT (a Slurm job "
          "array of consecutive task ids; SLURM_ARRAY_TASK_MIN is subtracted) or "
          "JOB_COMPLETION_INDEX and PADFOLD_SHARD_COUNT (a Kubernetes Indexed Job: set "
          "PADFOLD_SHARD_COUNT to its completions)");
    }
  } else {
    const size_t slash = text.find('/');
    if (slash == std::string::npos)
      throw std::invalid_argument("--shard: '" + text + "' is not i/n or auto");
    i_text = text.substr(0, slash);
    n_text = text.substr(slash + 1);
  }
  const auto number = [&](const std::string& t) {
    if (t.empty() || t.find_first_not_of("0123456789") != std::string::npos || t.size() > 6)
      throw std::invalid_argument(
          "--shard: '" + text + "' (i/n = '" + i_text + "/" + n_text +
          "'): expected whole numbers i/n of at most 6 digits each, with 0 <= i < n");
    return std::stoi(t);
  };
  s.index = number(i_text);
  s.count = number(n_text);
  if (s.count < 1 || s.index >= s.count)
    throw std::invalid_argument("--shard: '" + text + "' (" + i_text + "/" + n_text +
                                "): expected 0 <= i < n");
  return s;
}

}  // namespace padfold
