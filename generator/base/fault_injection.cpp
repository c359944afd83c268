#include "base/fault_injection.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <iterator>
#include <stdexcept>
#include <vector>

namespace padfold {

namespace {

std::vector<std::string> split(const std::string& text, char separator) {
  std::vector<std::string> parts;
  size_t start = 0;
  for (size_t end; (end = text.find(separator, start)) != std::string::npos; start = end + 1)
    parts.push_back(text.substr(start, end - start));
  parts.push_back(text.substr(start));
  return parts;
}

}  // namespace

InjectedFaults injected_faults() {
  InjectedFaults faults;
  const char* spec = std::getenv(kInjectFaultVariable);
  if (!spec) return faults;
  for (const std::string& item : split(spec, ',')) {
    const std::vector<std::string> parts = split(item, ':');
    if (parts[0].empty()) continue;
    InjectedFault f{parts.size() > 1 ? parts[1] : "sigfpe",
                    parts.size() > 2 && parts[2] == "every"};
    static const char* kinds[] = {"sigfpe", "sigsegv", "abort", "hang"};
    if (std::find(std::begin(kinds), std::end(kinds), f.kind) == std::end(kinds))
      throw std::runtime_error(std::string(kInjectFaultVariable) + ": unknown fault '" + f.kind +
                               "' (expected sigfpe, sigsegv, abort or hang)");
    faults[parts[0]] = f;
  }
  return faults;
}

void raise_fault(const InjectedFault& f) {
  if (f.kind == "hang")
    for (;;) pause();
  if (f.kind == "abort") std::abort();
  raise(f.kind == "sigsegv" ? SIGSEGV : SIGFPE);
  std::abort();  // the signal was blocked or handled
}

}  // namespace padfold
