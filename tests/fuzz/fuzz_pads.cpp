// libFuzzer: `padfold pads` argument parsing and resolution. The input is the argument list, one
// argument per line. Errors are exceptions main() reports; a crash, a sanitizer report or a hang
// is a finding.
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "commands.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  if (!std::freopen("/dev/null", "w", stdout)) return 1;  // the tables pads prints
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<std::string> args;
  std::string arg;
  for (size_t i = 0; i < size && args.size() < 64; ++i) {
    if (data[i] == '\n') {
      args.push_back(arg);
      arg.clear();
    } else {
      arg += static_cast<char>(data[i]);
    }
  }
  args.push_back(arg);
  CLI::App app{"padfold", "padfold"};
  app.require_subcommand(1);
  add_pads_command(app);
  std::vector<std::string> reversed(args.rbegin(), args.rend());  // CLI11 takes them last first
  try {
    app.parse(reversed);
  } catch (const CLI::Error&) {
  } catch (const std::exception&) {
  }
  return 0;
}
