// `padfold compile` with paths a hostile or careless user might give: quotes and shell syntax in
// -o, C and CMake syntax in the spec's directory name, an empty -o, a bundle being written by
// another compile, an unknown target after a good one. None of it may run code, reach the
// generated sources or leave a partial bundle.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "base/npy.h"
#include "bundle_util.h"
#include "padfold_runtime.h"

namespace padfold::testing {
namespace {

namespace fs = std::filesystem;

class HostilePaths : public ::testing::Test {
 protected:
  void SetUp() override {
    work_ = fs::path(PF_WORK_DIR) /
            (std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()) + "_" +
             std::to_string(getpid()));
    fs::remove_all(work_);
    fs::create_directories(work_);
  }
  void TearDown() override { fs::remove_all(work_); }

  CommandResult compile(const fs::path& spec, const std::string& out,
                        const std::string& target = "host") {
    return run_command("cd " + shell_quote(work_.string()) + " && " + PADFOLD_BIN + " compile " +
                       shell_quote(spec.string()) + " -o " + shell_quote(out) + " --target " +
                       shell_quote(target));
  }

  // Every file padfold generated from templates (sources, CMake, manifest).
  std::string generated_text(const fs::path& bundle) {
    std::string all;
    for (const auto& e : fs::recursive_directory_iterator(bundle)) {
      const std::string ext = e.path().extension().string();
      if (!e.is_regular_file() || (ext != ".c" && ext != ".cmake" && ext != ".json")) continue;
      if (e.path().string().find("/runtime/") != std::string::npos) continue;  // copied sources
      std::ifstream f(e.path());
      std::stringstream ss;
      ss << f.rdbuf();
      all += ss.str();
    }
    return all;
  }

  bool opens(const fs::path& bundle) {
    char err[PF_ERRLEN];
    pf_bundle* b = nullptr;
    const pf_status s = pf_bundle_open(bundle.c_str(), nullptr, &b, err, sizeof err);
    pf_bundle_close(b);
    return s == PF_OK;
  }

  fs::path work_;
};

// A one-layer spec at `spec` whose weights are the file `weights` (written here).
void write_spec_with_weights(const fs::path& spec, const fs::path& weights) {
  const float w = 1.0f;
  write_npy_f32(weights.string(), {1, 1, 1, 1}, &w);
  std::ofstream(spec) << R"({"model": "wf", "defaults": {"layout": "NHWC"},
    "inputs": [{"name": "x", "shape": [1, 4, 4, 1]}],
    "layers": [{"name": "c", "op": "conv2d", "input": "x", "kernel": 1, "out_channels": 1,
                "bias": false, "weight_files": {"weights": ")"
                      << weights.string() << R"("}}]})";
}

TEST_F(HostilePaths, QuotesAndShellSyntaxInTheOutputPath) {
  for (const std::string name :
       {"o'brien", "x'; touch INJECTED; echo '", "a\"$(touch INJECTED)\""}) {
    const fs::path out = work_ / name;
    const CommandResult r = compile(PF_TINY_SPEC, out.string());
    EXPECT_EQ(r.status, 0) << name << "\n" << r.output;
    EXPECT_FALSE(fs::exists(work_ / "INJECTED")) << name;
    EXPECT_TRUE(fs::exists(out / "manifest.json")) << name;
    EXPECT_TRUE(opens(out)) << name;  // the shared library was really linked
  }
}

TEST_F(HostilePaths, SpecDirectoryNameNeverReachesGeneratedCode) {
  // C code and CMake commands in the directory the spec lives in.
  const fs::path dir = work_ / "x*" /
                       "__attribute__((constructor)) static void f(void){__builtin_trap();}" / "*" /
                       "a\nset(INJECTED 1)\n#";
  fs::create_directories(dir);
  fs::copy_file(PF_TINY_SPEC, dir / "tiny.json");
  const fs::path out = work_ / "bundle";
  const CommandResult r = compile(dir / "tiny.json", out.string());
  ASSERT_EQ(r.status, 0) << r.output;
  const std::string text = generated_text(out);
  EXPECT_FALSE(contains(text, "constructor")) << text;
  EXPECT_FALSE(contains(text, "__builtin_trap"));
  EXPECT_FALSE(contains(text, "INJECTED"));
  EXPECT_FALSE(contains(text, dir.string()));
  EXPECT_TRUE(opens(out));  // a constructor in the library would trap here
}

TEST_F(HostilePaths, EmptyOutputPathIsAnError) {
  const CommandResult r = compile(PF_TINY_SPEC, "");
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_TRUE(contains(r.output, "no output directory given")) << r.output;
  EXPECT_FALSE(contains(r.output, "is as it was")) << r.output;  // not "no bundle written;  is"
  EXPECT_TRUE(fs::is_empty(work_));
}

TEST_F(HostilePaths, UnknownTargetFailsBeforeAnyKernelCompiles) {
  const fs::path out = work_ / "bundle";
  const CommandResult r = compile(PF_TINY_SPEC, out.string(), "host,bogus");
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_TRUE(contains(r.output, "unknown target 'bogus'")) << r.output;
  EXPECT_FALSE(contains(r.output, "stem")) << r.output;  // no kernel was compiled or reported
  EXPECT_TRUE(fs::is_empty(work_));  // nothing written: no bundle, no staging, no lock
}

TEST_F(HostilePaths, SecondWriterOfOneBundleFailsAtOnce) {
  const fs::path out = work_ / "bundle";
  ASSERT_EQ(compile(PF_TINY_SPEC, out.string()).status, 0);
  const auto manifest_time = fs::last_write_time(out / "manifest.json");
  EXPECT_FALSE(fs::exists(work_ / ".bundle.lock"));  // removed when the compile was done
  // Another compile holds the bundle's lock.
  const int fd = open((work_ / ".bundle.lock").c_str(), O_RDWR | O_CREAT, 0644);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(flock(fd, LOCK_EX | LOCK_NB), 0);
  const CommandResult r = compile(PF_TINY_SPEC, out.string());
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_TRUE(contains(r.output, "another padfold compile is writing this bundle")) << r.output;
  EXPECT_EQ(fs::last_write_time(out / "manifest.json"), manifest_time);
  EXPECT_TRUE(opens(out));
  close(fd);
  EXPECT_EQ(compile(PF_TINY_SPEC, out.string()).status, 0);  // free again
}

// A second model compiled into the first one's directory replaces the whole bundle: no file of the
// first (registry, CMake file, libraries) survives to break its consumers silently.
TEST_F(HostilePaths, SecondModelReplacesTheWholeBundle) {
  const fs::path out = work_ / "bundle";
  ASSERT_EQ(compile(PF_TINY_SPEC, out.string()).status, 0);
  ASSERT_TRUE(fs::exists(out / "padfold_tiny.cmake"));
  const CommandResult r = compile(PF_EMBEDDED_SPEC, out.string());
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_FALSE(fs::exists(out / "padfold_tiny.cmake"));
  EXPECT_FALSE(fs::exists(out / "include" / "padfold_tiny.h"));
  std::ifstream f(out / "manifest.json");
  std::stringstream ss;
  ss << f.rdbuf();
  EXPECT_FALSE(contains(ss.str(), "\"tiny\"")) << ss.str().substr(0, 200);
  for (const auto& e : fs::recursive_directory_iterator(out))
    EXPECT_FALSE(contains(e.path().filename().string(), "_tiny")) << e.path();
  EXPECT_TRUE(opens(out));
}

// The old bundle is removed once the inputs are read: an input inside it (the spec, a weight file,
// --schedules, --db; directly or through a symbolic link) is refused before anything is written.
TEST_F(HostilePaths, InputInsideTheOutputIsRefusedAndKept) {
  const fs::path out = work_ / "bundle";
  ASSERT_EQ(compile(PF_TINY_SPEC, out.string()).status, 0);
  const auto manifest_time = fs::last_write_time(out / "manifest.json");
  fs::copy_file(PF_TINY_SPEC, out / "myspec.json");
  fs::create_symlink(out / "myspec.json", work_ / "link.json");
  for (const fs::path& spec : {out / "myspec.json", work_ / "link.json"}) {
    const CommandResult r = compile(spec, out.string());
    EXPECT_EQ(r.status, 1) << r.output;
    EXPECT_TRUE(contains(r.output, "spec " + spec.string() + ": inside -o " + out.string()))
        << r.output;
  }
  std::ofstream(out / "knobs.json") << "{}";
  CommandResult r = run_command(std::string(PADFOLD_BIN) + " compile " + shell_quote(PF_TINY_SPEC) +
                                " -o " + shell_quote(out.string()) + " --schedules " +
                                shell_quote((out / "knobs.json").string()));
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_TRUE(contains(r.output, "--schedules " + (out / "knobs.json").string() + ": inside -o"))
      << r.output;
  write_spec_with_weights(work_ / "wf.json", out / "w.npy");
  r = compile(work_ / "wf.json", out.string());
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_TRUE(contains(
      r.output, "weight file of layer 'c' (weights) " + (out / "w.npy").string() + ": inside -o"))
      << r.output;
  for (const char* kept : {"myspec.json", "knobs.json", "w.npy"})
    EXPECT_TRUE(fs::exists(out / kept)) << kept;
  EXPECT_EQ(fs::last_write_time(out / "manifest.json"), manifest_time);
  EXPECT_TRUE(opens(out));
}

// A directory is replaced only when it holds nothing but what a bundle consists of: a stray
// manifest.json does not make a project a bundle, and files added to a real bundle are kept.
TEST_F(HostilePaths, OnlyWhatABundleConsistsOfIsReplaced) {
  const fs::path proj = work_ / "proj";
  fs::create_directories(proj / "src");
  std::ofstream(proj / "src" / "main.c") << "int main(){}";
  std::ofstream(proj / "README") << "important";
  std::ofstream(proj / "manifest.json") << R"({"format":"padfold-bundle"})";
  CommandResult r = compile(PF_TINY_SPEC, proj.string());
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_TRUE(contains(r.output, "files padfold compile does not write: README, src/;"))
      << r.output;
  EXPECT_TRUE(fs::exists(proj / "src" / "main.c"));
  EXPECT_TRUE(fs::exists(proj / "README"));

  const fs::path out = work_ / "bundle";
  ASSERT_EQ(compile(PF_TINY_SPEC, out.string()).status, 0);
  for (int i = 0; i < 7; ++i) std::ofstream(out / ("notes" + std::to_string(i) + ".txt")) << i;
  r = compile(PF_TINY_SPEC, out.string());
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_TRUE(
      contains(r.output, "notes0.txt, notes1.txt, notes2.txt, notes3.txt, notes4.txt and 2 more"))
      << r.output;
  EXPECT_TRUE(fs::exists(out / "notes6.txt"));
  EXPECT_TRUE(opens(out));
  for (int i = 0; i < 7; ++i) fs::remove(out / ("notes" + std::to_string(i) + ".txt"));
  EXPECT_EQ(compile(PF_TINY_SPEC, out.string()).status, 0);
}

// -o a symbolic link: the bundle is written where it points and the link kept; a dangling link is
// refused before anything compiles.
TEST_F(HostilePaths, OutputThroughASymbolicLink) {
  const fs::path real = work_ / "disk" / "bundle";
  fs::create_directories(real);
  const fs::path link = work_ / "link";
  fs::create_directory_symlink(real, link);
  for (int i = 0; i < 2; ++i) {  // into the empty directory, then over the bundle there
    const CommandResult r = compile(PF_TINY_SPEC, link.string());
    ASSERT_EQ(r.status, 0) << r.output;
    EXPECT_TRUE(fs::is_symlink(link));
    EXPECT_EQ(fs::read_symlink(link), real);
    EXPECT_TRUE(fs::exists(real / "manifest.json"));
    EXPECT_TRUE(opens(real));
  }
  for (const fs::path& dir : {work_, work_ / "disk"})  // no staging directory or lock left
    for (const auto& e : fs::directory_iterator(dir))
      EXPECT_TRUE(e.path() == link || e.path() == real || e.path() == work_ / "disk") << e.path();

  const fs::path dangling = work_ / "dangling";
  fs::create_directory_symlink(work_ / "nowhere" / "x", dangling);
  const CommandResult r = compile(PF_TINY_SPEC, dangling.string());
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_TRUE(contains(r.output, "-o " + dangling.string() + ": a symbolic link to " +
                                     (work_ / "nowhere" / "x").string() + ", which does not exist"))
      << r.output;
  EXPECT_FALSE(contains(r.output, "stem")) << r.output;  // refused before any kernel compiled
  EXPECT_FALSE(fs::exists(work_ / "nowhere"));
  EXPECT_FALSE(fs::exists(work_ / ".dangling.lock"));
}

// Files that are not what they claim to be are refused without reading them whole: a FIFO as a
// bundle's manifest (compile used to hang on it), /dev/zero and /etc/passwd as statements.
TEST_F(HostilePaths, FifosDevicesAndOtherFilesAreRefusedUpFront) {
  const fs::path dir = work_ / "fifo";
  fs::create_directories(dir);
  ASSERT_EQ(mkfifo((dir / "manifest.json").c_str(), 0644), 0);
  CommandResult r = run_command("timeout 60 " + std::string(PADFOLD_BIN) + " compile " +
                                shell_quote(PF_TINY_SPEC) + " -o " + shell_quote(dir.string()));
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_TRUE(contains(r.output, "manifest.json: not a regular file (a FIFO)")) << r.output;
  EXPECT_TRUE(fs::is_fifo(dir / "manifest.json"));

  r = run_command("ulimit -v 2000000; timeout 60 " + std::string(PADFOLD_BIN) +
                  " stmt-check /dev/zero");
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_TRUE(contains(r.output, "/dev/zero: not a regular file (a character device)")) << r.output;
  std::ofstream(work_ / "passwd.stmt") << "root:x:0:0:root:/root:/bin/bash\n";
  r = run_command(std::string(PADFOLD_BIN) + " stmt-check " +
                  shell_quote((work_ / "passwd.stmt").string()));
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_TRUE(contains(r.output, "passwd.stmt: not a Halide .stmt file")) << r.output;
  EXPECT_FALSE(contains(r.output, "FAIL")) << r.output;
}

// Two compiles of one spec into different directories give the same bundle, byte for byte: no
// file holds the output path, the staging directory or padfold's pid (Halide's include guards
// did). No field legitimately differs.
TEST_F(HostilePaths, OneSpecCompiledTwiceGivesIdenticalBundles) {
  const fs::path a = work_ / "a", b = work_ / "elsewhere" / "other name";
  const std::string targets = "host,x86-64-linux-avx2-fma";
  for (const fs::path& out : {a, b}) {
    const CommandResult r =
        run_command(std::string(PADFOLD_BIN) + " compile " + shell_quote(PF_TINY_SPEC) + " -o " +
                    shell_quote(out.string()) + " --target " + targets + " --emit-stmt");
    ASSERT_EQ(r.status, 0) << r.output;
  }
  const auto read = [](const fs::path& p) {
    std::ifstream f(p, std::ios::binary);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
  };
  size_t files = 0;
  for (const auto& e : fs::recursive_directory_iterator(a)) {
    const fs::path rel = fs::relative(e.path(), a);
    ASSERT_TRUE(fs::exists(b / rel)) << rel;
    if (!e.is_regular_file()) continue;
    ++files;
    const std::string text = read(e.path());
    EXPECT_TRUE(text == read(b / rel)) << rel << " differs";
    EXPECT_FALSE(contains(text, work_.string())) << rel << " holds the build path";
    EXPECT_FALSE(contains(text, "partial-")) << rel << " holds the staging directory's name";
  }
  size_t files_b = 0;
  for (const auto& e : fs::recursive_directory_iterator(b)) files_b += e.is_regular_file();
  EXPECT_EQ(files, files_b);
  EXPECT_GT(files, 20u);
}

}  // namespace
}  // namespace padfold::testing
