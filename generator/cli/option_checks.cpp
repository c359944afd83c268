// Options and option checks more than one subcommand shares.
#include <cmath>
#include <cstdlib>

#include "commands.h"

CLI::Validator min_time_seconds() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        char* end = nullptr;
        const double v = std::strtod(text.c_str(), &end);
        if (text.empty() || *end != '\0' || !std::isfinite(v) || !(v > 0) || v > 60)
          return "'" + text +
                 "' is not a time to measure for; expected seconds, a number in (0, 60]";
        return "";
      },
      "SECONDS");
}

void add_input_sizes_option(CLI::App* cmd, std::vector<std::string>& inputs) {
  cmd->add_option("--input", inputs,
                  "NAME=SIZES (e.g. x=1x3x224x224): the size of a graph input with dynamic dims; "
                  "repeat for each")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
}
