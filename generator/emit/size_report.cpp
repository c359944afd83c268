// bundle_size_report: the libraries of a written bundle, member by member.
#include "emit/size_report.h"

#include <stdlib.h>

#include <fstream>
#include <iterator>
#include <map>
#include <stdexcept>

#include "base/process.h"
#include "emit/dtypes.h"
#include "emit/libraries.h"

namespace padfold {

namespace fs = std::filesystem;

namespace {

// The sources of padfold_runtime_core (runtime/CMakeLists.txt).
constexpr const char* kRuntimeCoreSources[] = {"status.c", "core.c", "cpu.c", "model.c"};

// A directory of its own under the system's temporary directory, removed with the object.
class TempDir {
 public:
  TempDir() {
    std::string pattern = (fs::temp_directory_path() / "padfold-size-XXXXXX").string();
    if (!mkdtemp(pattern.data())) throw std::runtime_error("cannot create a temporary directory");
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

std::optional<SectionSizes> runtime_core_sizes(const std::string& cc, const fs::path& root,
                                               const std::string& target) {
  if (cc.empty()) return std::nullopt;
  const TempDir tmp;
  SectionSizes total;
  for (const char* source : kRuntimeCoreSources) {
    const fs::path object = tmp.path() / (std::string(source) + ".o");
    run_program({cc, "-c", "-O2", "-std=c99", "-I" + (root / "runtime" / "include").string(),
                 "-I" + (root / "include").string(), "-o", object.string(),
                 (root / "runtime" / source).string()},
                "compiling runtime/" + std::string(source) + " for " + target + " (size report)");
    std::ifstream f(object, std::ios::binary);
    const std::string bytes{std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
    total += elf_sizes(bytes, object.string());
  }
  return total;
}

}  // namespace

SizeReport bundle_size_report(const BundlePlan& plan, const fs::path& root, bool runtime_core) {
  SizeReport r;
  for (const WeightFile& w : plan.weight_files) {
    int64_t n = 1;
    for (int64_t d : w.stored_shape()) n *= d;
    r.weights_bytes += n * dtype_size(w.dtype);
  }
  r.weight_buffers = plan.weight_files.size();
  r.weights_embedded = plan.embedded_weights;
  r.arena = plan.arena;
  for (const TargetPlan& t : plan.targets) {
    const fs::path dir = target_dir(root, t);
    std::map<std::string, SectionSizes> members;
    for (const ArchiveMember& m : archive_sizes(dir / plan.static_library))
      members[m.name] = m.sizes;
    TargetSizes s{t.name, {}, {}, {}, std::nullopt, ""};
    for (const KernelPlan& k : plan.kernels) {
      const auto it = members.find(k.function + ".o");
      if (it == members.end())
        throw std::runtime_error((dir / plan.static_library).string() + ": no object " +
                                 k.function + ".o");
      s.kernels.push_back({k.block.fused() ? k.block.names() : k.block.last().name, it->second});
      s.kernels_total += it->second;
    }
    for (const ArchiveMember& m : archive_sizes(dir / plan.halide_runtime))
      s.halide_runtime += m.sizes;
    if (runtime_core) {
      s.runtime_core_compiler = linker_for(t.target);
      s.runtime_core = runtime_core_sizes(s.runtime_core_compiler, root, t.name);
    }
    r.targets.push_back(std::move(s));
  }
  return r;
}

}  // namespace padfold
