// The tuner's pieces without compiling a kernel: signatures and keys, the database (round trip,
// merge determinism, best-record choice, corrupt files), --shard parsing, the search, transfer
// between signatures.
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <set>

#include "compile/target.h"
#include "schedules/schedule.h"
#include "tune/db.h"
#include "tune/db_schedules.h"
#include "tune/search.h"
#include "tune/shard.h"
#include "tune/signature.h"
#include "tune/transfer.h"

namespace padfold {
namespace {

namespace fs = std::filesystem;

Layer only_layer(const std::string& layer_json) {
  const Model m = parse_spec(
      R"({"model": "m", "defaults": {"layout": "NHWC", "weight_layout": "HWIO"}, "layers": [)" +
          layer_json + "]}",
      "test.json");
  return m.layers.at(0);
}

TEST(TuneSignature, SamePadsSpelledDifferentlyShareASignature) {
  // TensorFlow SAME on 7x7, k4 s2 resolves to pads (1,2) per axis: the explicit pairs are the same
  // kernel, whatever the layer's name.
  const Layer same = only_layer(
      R"({"name": "a", "op": "conv2d", "input_shape": [1, 7, 7, 3], "out_channels": 8,
          "kernel": 4, "stride": 2, "padding": "same", "convention": "tensorflow"})");
  const Layer pairs = only_layer(
      R"({"name": "b", "op": "conv2d", "input_shape": [1, 7, 7, 3], "out_channels": 8,
          "kernel": 4, "stride": 2, "padding": [[1, 2], [1, 2]]})");
  const Layer onnx = only_layer(
      R"({"name": "c", "op": "conv2d", "input_shape": [1, 7, 7, 3], "out_channels": 8,
          "kernel": 4, "stride": 2, "padding": {"pads": [1, 1, 2, 2]}})");
  EXPECT_EQ(layer_signature(same), layer_signature(pairs));
  EXPECT_EQ(layer_signature(same), layer_signature(onnx));
  EXPECT_EQ(layer_signature(same).find("tensorflow"), std::string::npos);
  // Other pads, border or epilogue: another kernel, another signature.
  const Layer lower = only_layer(
      R"({"name": "a", "op": "conv2d", "input_shape": [1, 7, 7, 3], "out_channels": 8,
          "kernel": 4, "stride": 2, "padding": "same_lower"})");
  const Layer reflect = only_layer(
      R"({"name": "a", "op": "conv2d", "input_shape": [1, 7, 7, 3], "out_channels": 8,
          "kernel": 4, "stride": 2, "padding": [[1, 2], [1, 2]], "border": "reflect"})");
  const Layer relu = only_layer(
      R"({"name": "a", "op": "conv2d", "input_shape": [1, 7, 7, 3], "out_channels": 8,
          "kernel": 4, "stride": 2, "padding": [[1, 2], [1, 2]], "activation": "relu"})");
  std::set<std::string> sigs{layer_signature(same), layer_signature(lower),
                             layer_signature(reflect), layer_signature(relu)};
  EXPECT_EQ(sigs.size(), 4u);
}

TEST(TuneSignature, TargetKeyIsNormalised) {
  EXPECT_EQ(target_key(resolve_target("host")),
            target_key(resolve_target(host_target().to_string())));
  EXPECT_EQ(target_key(resolve_target("x86-64-linux-avx2-fma")),
            target_key(resolve_target("x86-64-linux-fma-avx2")));
  EXPECT_NE(target_key(resolve_target("x86-64-linux-avx2-fma")),
            target_key(resolve_target("x86-64-linux-sse41")));
}

TEST(TuneSignature, CandidateKeyIgnoresTheRowName) {
  ScheduleParams a, b;
  b.name = "other.row";
  EXPECT_EQ(candidate_key(a), candidate_key(b));
  b.tile_x = 7;
  EXPECT_NE(candidate_key(a), candidate_key(b));
}

const char* const kDense3x3 =
    R"({"name": "d", "op": "conv2d", "input_shape": [1, 28, 28, 16], "out_channels": 16,
        "kernel": 3, "padding": "same"})";
const char* const kPointwise =
    R"({"name": "p", "op": "conv2d", "input_shape": [1, 28, 28, 16], "out_channels": 16,
        "kernel": 1})";

// A layer's toolchain key with its implementations' versions, `bumped`'s one higher.
std::string key_with(const Layer& L, const Halide::Target& t, const std::string& bumped) {
  std::vector<std::pair<std::string, int>> implementations;
  for (const Implementation* i : applicable_implementations(L, t))
    implementations.emplace_back(i->name, i->version + (i->name == bumped ? 1 : 0));
  return toolchain_key(knob_scope(t), implementations);
}

// A record's toolchain names its target's knob scope and that scope's version, and the
// implementations that can compute its layer with theirs: a change to the GPU knobs' space leaves
// every CPU record valid, and a change to one implementation the records of layers it cannot
// compute.
TEST(TuneSignature, ToolchainKeyIsPerKnobScopeAndImplementation) {
  const Layer dense = only_layer(kDense3x3), pointwise = only_layer(kPointwise);
  const Halide::Target avx2 = resolve_target("x86-64-linux-avx2-fma");
  const std::string cpu = toolchain_key(dense, avx2);
  const std::string gpu = toolchain_key(dense, resolve_target("host-cuda"));
  const auto version = [](const char* scope) {
    return std::to_string(schedule_space_version(scope));
  };
  EXPECT_EQ(cpu.substr(cpu.find('/')), "/cpu-space-" + version("cpu") + "/winograd-1+direct-1");
  EXPECT_EQ(gpu.substr(gpu.find('/')), "/gpu-space-" + version("gpu") + "/direct-1");
  const std::string pw = toolchain_key(pointwise, avx2);
  EXPECT_EQ(pw.substr(pw.find('/')), "/cpu-space-" + version("cpu") + "/gemm-1+direct-1");
  EXPECT_EQ(cpu, toolchain_key(dense, resolve_target("arm-64-linux")));
  EXPECT_EQ(cpu, key_with(dense, avx2, ""));
  EXPECT_THROW(schedule_space_version("npu"), std::invalid_argument);
  for (const Knob& k : knobs()) EXPECT_NO_THROW(schedule_space_version(k.scope)) << k.name;
}

// The tuner's records after a new version of one implementation: a layer it cannot compute keeps
// its best record, a layer it can is tuned anew (compile --db finds nothing for it).
TEST(TuneDb, AnImplementationsNewVersionKeepsTheRecordsOfLayersItCannotCompute) {
  const Layer dense = only_layer(kDense3x3), pointwise = only_layer(kPointwise);
  const Halide::Target t = resolve_target("x86-64-linux-avx2-fma");
  const fs::path dir = fs::temp_directory_path() / ("padfold_impl_" + std::to_string(getpid()));
  fs::create_directories(dir);
  {
    TuneDb db((dir / "a.sqlite").string());
    for (const Layer* L : {&dense, &pointwise}) {
      Measurement m;
      m.scope = {layer_signature(*L), target_key(t), toolchain_key(*L, t), "m1"};
      m.candidate = "c_" + L->name;
      m.kind = "knobs";
      m.knobs = "{\"tile_x\": 2}";
      m.status = "ok";
      m.layer = L->name;
      m.median_s = 1e-3;
      m.vs_default = 1.5;
      m.accepted = true;
      m.samples = "[]";
      db.insert(m);
    }
    const auto best = [&](const Layer& L, const std::string& toolchain) {
      return db.best(layer_signature(L), target_key(t), toolchain, "m1", false);
    };
    ASSERT_TRUE(best(dense, key_with(dense, t, "")));
    ASSERT_TRUE(best(pointwise, key_with(pointwise, t, "")));
    EXPECT_FALSE(best(dense, key_with(dense, t, "winograd")));
    ASSERT_TRUE(best(pointwise, key_with(pointwise, t, "winograd")));
    EXPECT_EQ(best(pointwise, key_with(pointwise, t, "winograd"))->candidate, "c_p");
    EXPECT_FALSE(best(pointwise, key_with(pointwise, t, "direct")));
  }
  fs::remove_all(dir);
}

TEST(TuneSignature, KnobsTextLeavesDefaultsOut) {
  EXPECT_EQ(knobs_text(ScheduleParams{}), "{}");
  ScheduleParams p;
  p.tile_x = 7;
  p.gpu_tile_y = 3;
  EXPECT_EQ(knobs_text(p), R"({"gpu_tile_y":3,"tile_x":7})");
  EXPECT_EQ(knobs_from_text(knobs_text(p)), p);
  const Layer L = only_layer(
      R"({"name": "c", "op": "conv2d", "input_shape": [1, 14, 14, 64], "out_channels": 64,
          "kernel": 3, "padding": "same", "layout": "NHWC", "weight_layout": "HWIO"})");
  const Halide::Target t = resolve_target("x86-64-linux-avx2-fma");
  ScheduleParams resolved = resolve_schedule(L, t, default_schedule(L, t));
  const std::string text = knobs_text(resolved);
  EXPECT_EQ(text.find("gpu_"), std::string::npos) << text;
  EXPECT_EQ(text.find("implementation"), std::string::npos) << text;  // the knobs choose it
  EXPECT_EQ(resolve_schedule(L, t, knobs_from_text(text)).implementation, resolved.implementation);
  resolved.name.clear();
  resolved.implementation.clear();
  EXPECT_EQ(knobs_from_text(text), resolved);
}

struct TempDir {
  fs::path path = fs::temp_directory_path() / ("padfold_tune_test_" + std::to_string(getpid()));
  TempDir() { fs::create_directories(path); }
  ~TempDir() { fs::remove_all(path); }
  std::string file(const std::string& name) const { return (path / name).string(); }
};

Measurement record(const std::string& candidate, double vs_default, bool accepted,
                   const std::string& machine = "m1", double median = 1e-3) {
  Measurement m;
  m.scope = {"sig", "tgt", "tc", machine};
  m.candidate = candidate;
  m.kind = "knobs";
  m.knobs = "{\"tile_x\": 1}";
  m.status = "ok";
  m.layer = "L";
  m.median_s = median;
  m.vs_default = vs_default;
  m.accepted = accepted;
  m.samples = "[]";
  return m;
}

std::vector<std::string> dump(const TuneDb& db) {
  std::vector<std::string> rows;
  for (const Measurement& m : db.all())
    rows.push_back(m.scope.machine + "|" + m.candidate + "|" + std::to_string(m.median_s) + "|" +
                   std::to_string(m.vs_default) + "|" + m.status);
  return rows;
}

TEST(TuneDb, RoundTripKeepsEveryFieldAndTheFirstRecordOfAKey) {
  TempDir dir;
  {
    TuneDb db(dir.file("a.sqlite"));
    Measurement m = record("c1", 1.25, true);
    m.reason = "why";
    m.noise = 0.02;
    m.vs_incumbent = 1.1;
    m.samples = "[0.001,0.002]";
    db.insert(m);
    db.insert(record("c1", 9.0, true));  // same key: ignored
  }
  TuneDb db(dir.file("a.sqlite"), true);
  const auto all = db.all();
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0].scope.signature, "sig");
  EXPECT_EQ(all[0].reason, "why");
  EXPECT_DOUBLE_EQ(all[0].vs_default, 1.25);
  EXPECT_DOUBLE_EQ(all[0].vs_incumbent, 1.1);
  EXPECT_DOUBLE_EQ(all[0].noise, 0.02);
  EXPECT_EQ(all[0].samples, "[0.001,0.002]");
  EXPECT_TRUE(all[0].accepted);
}

TEST(TuneDb, MergeIsDeterministicWhateverTheOrder) {
  TempDir dir;
  {
    TuneDb a(dir.file("a.sqlite")), b(dir.file("b.sqlite"));
    a.insert(record("default", 1.0, true, "m1", 2e-3));
    a.insert(record("c1", 1.2, true));
    b.insert(record("default", 1.0, true, "m1", 1e-3));  // the same key, timed again
    b.insert(record("c2", 1.3, true));
  }
  std::vector<std::string> ab, ba;
  {
    TuneDb out(dir.file("ab.sqlite"));
    out.merge_from({dir.file("a.sqlite"), dir.file("b.sqlite")});
    ab = dump(out);
  }
  {
    TuneDb out(dir.file("ba.sqlite"));
    out.merge_from({dir.file("b.sqlite"), dir.file("a.sqlite")});
    ba = dump(out);
  }
  EXPECT_EQ(ab, ba);
  ASSERT_EQ(ab.size(), 3u);
  EXPECT_NE(ab[2].find("default|0.001"), std::string::npos) << ab[2];  // the smaller median
  TuneDb out(dir.file("ab.sqlite"), true);
  const auto best = out.best("sig", "tgt", "tc", "m1", false);
  ASSERT_TRUE(best);
  EXPECT_EQ(best->candidate, "c2");
}

TEST(TuneDb, BestIsAcceptedUnrefutedAndThisMachinesUnlessAsked) {
  TempDir dir;
  TuneDb db(dir.file("a.sqlite"));
  db.insert(record("default", 1.0, true));
  db.insert(record("fast_rejected", 1.5, false));
  db.insert(record("b_tie", 1.2, true));
  db.insert(record("a_tie", 1.2, true));
  db.insert(record("other_machine", 2.0, true, "m2"));
  Measurement failed = record("broken", 3.0, true);
  failed.status = "failed";
  db.insert(failed);
  EXPECT_EQ(db.best("sig", "tgt", "tc", "m1", false)->candidate, "a_tie");  // tie: key order
  EXPECT_EQ(db.best("sig", "tgt", "tc", "m3", true)->candidate, "other_machine");
  EXPECT_EQ(db.best("sig", "tgt", "tc", "m1", true)->candidate, "a_tie");  // this machine first
  EXPECT_FALSE(db.best("sig", "tgt", "tc", "m3", false));
  EXPECT_FALSE(db.best("sig", "other", "tc", "m1", true));
  // A confirmation slower than the default refutes the candidate.
  Measurement confirm = record("confirm:a_tie", 0.97, false);
  confirm.kind = "confirm";
  db.insert(confirm);
  EXPECT_EQ(db.best("sig", "tgt", "tc", "m1", false)->candidate, "b_tie");
}

TEST(TuneDb, ACorruptFileIsNamedAndLeftAsItWas) {
  TempDir dir;
  const std::string path = dir.file("corrupt.sqlite");
  const std::string junk(4096, 'x');
  std::ofstream(path) << junk;
  try {
    TuneDb db(path);
    FAIL() << "opened a corrupt file";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("not a padfold tuning database"), std::string::npos);
  }
  std::ifstream f(path);
  const std::string after((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  EXPECT_EQ(after, junk);
  // Another SQLite database is refused too, and not written to.
  const std::string other = dir.file("other.sqlite");
  {
    sqlite3* db = nullptr;
    sqlite3_open(other.c_str(), &db);
    sqlite3_exec(db, "CREATE TABLE t (x)", nullptr, nullptr, nullptr);
    sqlite3_close(db);
  }
  EXPECT_THROW(TuneDb{other}, std::runtime_error);
}

// `padfold compile --db` copies a record's candidate, machine and toolchain into the manifest
// (JSON): a record whose text is not UTF-8 is refused when it is read, naming the file and the
// column, rather than making the manifest's writer throw (fuzz_db finding).
TEST(TuneDb, ARecordWhoseTextIsNotUtf8IsNamedWhenRead) {
  TempDir dir;
  const Layer L = only_layer(
      R"({"name": "a", "op": "conv2d", "input_shape": [1, 7, 7, 3], "out_channels": 8,
          "kernel": 3})");
  const Halide::Target t = resolve_target("x86-64-linux-avx2");
  for (const char* column : {"machine", "candidate", "toolchain"}) {
    const std::string path = dir.file(std::string(column) + ".sqlite");
    {
      TuneDb db(path);
      Measurement m = record("c1", 1.5, true, "other machine");
      m.scope.signature = layer_signature(L);
      m.scope.target = target_key(t);
      db.insert(m);
    }
    {
      sqlite3* raw = nullptr;
      ASSERT_EQ(sqlite3_open(path.c_str(), &raw), SQLITE_OK);
      const std::string sql =
          std::string("UPDATE measurements SET ") + column + " = CAST(x'6d8720' AS TEXT)";
      EXPECT_EQ(sqlite3_exec(raw, sql.c_str(), nullptr, nullptr, nullptr), SQLITE_OK);
      sqlite3_close(raw);
    }
    const auto lookup = tuned_schedules_from(path, /*any_machine=*/true);
    try {
      (void)lookup(L, t);
      FAIL() << column << ": a record that is not UTF-8 was used";
    } catch (const std::runtime_error& e) {
      EXPECT_EQ(std::string(e.what()),
                path + ": a damaged record: its " + column + " is not UTF-8 text");
    }
    EXPECT_THROW((void)TuneDb(path, true).all(), std::runtime_error);
  }
}

// The journal mode byte pair of an SQLite file's header: 1 rollback journal, 2 WAL.
int journal_mode_bytes(const std::string& path) {
  char header[20] = {};
  std::ifstream(path, std::ios::binary).read(header, sizeof header);
  return header[18] * 10 + header[19];
}

TEST(TuneDb, AClosedDatabaseIsReadWithoutWritingBesideIt) {
  TempDir dir;
  const std::string path = dir.file("a.sqlite");
  {
    TuneDb db(path);
    db.insert(record("c1", 1.25, true));
    EXPECT_TRUE(fs::exists(path + "-wal"));  // WAL while it is written
  }
  // Closed: back in rollback-journal mode, nothing beside it, so read-only storage can read it.
  EXPECT_EQ(journal_mode_bytes(path), 11);
  {
    TuneDb db(path, true);
    EXPECT_EQ(db.all().size(), 1u);
  }
  for (const char* suffix : {"-wal", "-shm", "-journal"})
    EXPECT_FALSE(fs::exists(path + suffix)) << suffix;
  // A read-only open is an SQLite URI: characters that mean something there are escaped.
  fs::create_directory(dir.path / "we?ird#%20");
  const std::string odd = (dir.path / "we?ird#%20" / "a.sqlite").string();
  fs::copy_file(path, odd);
  EXPECT_EQ(TuneDb(odd, true).all().size(), 1u);
}

// Runs `body` in a child process as an unprivileged user (root: uid 65534; others: themselves),
// for whom permission bits hold; returns its exit status and what it wrote.
std::pair<int, std::string> as_unprivileged(const std::function<int(int)>& body) {
  int fds[2];
  if (::pipe(fds) != 0) return {-1, "pipe failed"};
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::close(fds[0]);
    if (::getuid() == 0 && (::setgid(65534) != 0 || ::setuid(65534) != 0)) ::_exit(99);
    ::_exit(body(fds[1]));
  }
  ::close(fds[1]);
  std::string out;
  char buf[512];
  for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) > 0;) out.append(buf, buf + n);
  ::close(fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

// What a child writes: the record count, or the error.
int count_records(const std::string& path, int fd) {
  std::string text;
  int rc = 0;
  try {
    text = std::to_string(TuneDb(path, true).all().size());
  } catch (const std::exception& e) {
    text = e.what();
    rc = 1;
  }
  if (::write(fd, text.data(), text.size()) < 0) rc = 2;
  return rc;
}

TEST(TuneDb, AWalDatabaseInADirectoryThatCannotBeWrittenIsReadAndErrorsAreNamed) {
  TempDir dir;
  fs::create_directory(dir.path / "ro");
  const std::string path = (dir.path / "ro" / "a.sqlite").string();
  {
    TuneDb db(path);
    db.insert(record("c1", 1.25, true));
  }
  {
    // Left in WAL mode by an older padfold or another program.
    sqlite3* raw = nullptr;
    ASSERT_EQ(sqlite3_open(path.c_str(), &raw), SQLITE_OK);
    sqlite3_exec(raw, "PRAGMA journal_mode=WAL", nullptr, nullptr, nullptr);
    sqlite3_close(raw);
  }
  ASSERT_EQ(journal_mode_bytes(path), 22);
  ::chmod(path.c_str(), 0444);
  ::chmod((dir.path / "ro").c_str(), 0555);
  auto [rc, out] = as_unprivileged([&](int fd) { return count_records(path, fd); });
  EXPECT_EQ(rc, 0) << out;
  EXPECT_EQ(out, "1");
  EXPECT_FALSE(fs::exists(path + "-shm"));
  // A file that cannot be read is called that, not "not a padfold tuning database".
  ::chmod(path.c_str(), 0);
  std::tie(rc, out) = as_unprivileged([&](int fd) { return count_records(path, fd); });
  EXPECT_EQ(rc, 1) << out;
  EXPECT_NE(out.find(path + ": cannot"), std::string::npos) << out;
  EXPECT_EQ(out.find("not a padfold tuning database"), std::string::npos) << out;
  ::chmod((dir.path / "ro").c_str(), 0755);
}

TEST(TuneShard, ParsesIndexCountAndAuto) {
  EXPECT_EQ(parse_shard("2/3").index, 2);
  EXPECT_EQ(parse_shard("2/3").count, 3);
  for (const char* bad : {"3/3", "x", "1/0", "-1/2", "1/", "/2", "1/2/3", "a/b"})
    EXPECT_THROW(parse_shard(bad), std::invalid_argument) << bad;
  try {
    parse_shard("0/1000000");  // in range, but seven digits
    ADD_FAILURE() << "0/1000000 accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("at most 6 digits"), std::string::npos) << e.what();
  }
  unsetenv("SLURM_ARRAY_TASK_ID");
  unsetenv("SLURM_ARRAY_TASK_COUNT");
  unsetenv("JOB_COMPLETION_INDEX");
  unsetenv("PADFOLD_SHARD_COUNT");
  EXPECT_THROW(parse_shard("auto"), std::invalid_argument);
  setenv("JOB_COMPLETION_INDEX", "4", 1);
  setenv("PADFOLD_SHARD_COUNT", "5", 1);
  EXPECT_EQ(parse_shard("auto").index, 4);
  setenv("SLURM_ARRAY_TASK_ID", "1", 1);
  setenv("SLURM_ARRAY_TASK_COUNT", "8", 1);
  EXPECT_EQ(parse_shard("auto").index, 1);  // Slurm first
  EXPECT_EQ(parse_shard("auto").count, 8);
  setenv("SLURM_ARRAY_TASK_ID", "8", 1);
  EXPECT_THROW(parse_shard("auto"), std::invalid_argument);
  setenv("SLURM_ARRAY_TASK_MIN", "1", 1);  // --array=1-8
  EXPECT_EQ(parse_shard("auto").index, 7);
  unsetenv("SLURM_ARRAY_TASK_MIN");
  unsetenv("SLURM_ARRAY_TASK_ID");
  unsetenv("SLURM_ARRAY_TASK_COUNT");
  unsetenv("JOB_COMPLETION_INDEX");
  unsetenv("PADFOLD_SHARD_COUNT");
}

Layer search_layer() {
  return only_layer(
      R"({"name": "a", "op": "conv2d", "input_shape": [1, 16, 16, 16], "out_channels": 32,
          "kernel": 3, "padding": "same"})");
}

TEST(TuneSearch, ProposesDistinctResolvedCandidatesDeterministically) {
  const Layer L = search_layer();
  const Halide::Target t = resolve_target("x86-64-linux-avx2-fma");
  const ScheduleParams def = resolve_schedule(L, t, default_schedule(L, t));
  ASSERT_GT(def.rows_per_task, 0);
  for (SearchStrategy s : {SearchStrategy::Neighbourhood, SearchStrategy::Random}) {
    Search a(s, L, t, def, 42), b(s, L, t, def, 42);
    std::set<std::string> seen{knobs_text(def)};
    const auto batch = a.next_batch(12);
    const auto again = b.next_batch(12);
    ASSERT_EQ(batch.size(), 12u);
    ASSERT_EQ(again.size(), batch.size());
    for (size_t i = 0; i < batch.size(); ++i) {
      EXPECT_EQ(knobs_text(batch[i]), knobs_text(again[i]));  // same seed, same proposals
      EXPECT_TRUE(seen.insert(knobs_text(batch[i])).second) << "proposed twice or the default";
      EXPECT_EQ(knobs_text(resolve_schedule(L, t, batch[i])), knobs_text(batch[i]))
          << "not resolved";
      // Measured at one thread, the search never takes away the parallel loop.
      EXPECT_GT(batch[i].rows_per_task, 0) << knobs_text(batch[i]);
    }
    for (const auto& c : a.next_batch(12)) EXPECT_TRUE(seen.insert(knobs_text(c)).second);
  }
  // The first neighbourhood batch differs from the default in exactly one knob each.
  Search n(SearchStrategy::Neighbourhood, L, t, def, 7);
  for (const ScheduleParams& c : n.next_batch(8)) {
    int changed = 0;
    for (const Knob& k : knobs()) changed += k.get(c) != k.get(def);
    EXPECT_GE(changed, 1);
    EXPECT_LE(changed, 3) << knobs_text(c);  // one knob moved; resolving may adjust a coupled one
  }
}

// A layer too small for two tasks has no parallel loop by default, and no candidate adds one (the
// tuner measures one thread, where a thread's wake-up never shows).
TEST(TuneSearch, ALayerTooSmallForThreadsStaysOnOne) {
  const Layer L = only_layer(
      R"({"name": "a", "op": "conv2d", "input_shape": [1, 6, 6, 8], "out_channels": 8,
          "kernel": 3, "padding": "same"})");
  const Halide::Target t = resolve_target("x86-64-linux-avx2-fma");
  const ScheduleParams def = resolve_schedule(L, t, default_schedule(L, t));
  ASSERT_EQ(def.rows_per_task, 0);
  for (SearchStrategy s : {SearchStrategy::Neighbourhood, SearchStrategy::Random}) {
    Search search(s, L, t, def, 11);
    for (int round = 0; round < 4; ++round)
      for (const ScheduleParams& c : search.next_batch(8))
        EXPECT_EQ(c.rows_per_task, 0) << knobs_text(c);
  }
}

TEST(TuneSearch, TransferredCandidatesComeFirstResolvedAndOnce) {
  const Layer L = search_layer();
  const Halide::Target t = resolve_target("x86-64-linux-avx2-fma");
  ScheduleParams direct = default_schedule(L, t);
  direct.winograd = 0;  // the direct loops, whose tile_x and tile_y the candidates vary
  const ScheduleParams def = resolve_schedule(L, t, direct);
  ScheduleParams a = def, b = def;
  a.tile_x = def.tile_x == 4 ? 2 : 4;
  b.tile_y = def.tile_y == 2 ? 1 : 2;
  Search s(SearchStrategy::Neighbourhood, L, t, def, 3);
  // a twice and the default: each proposed once, never again
  const auto first = s.propose_first({a, b, a, def});
  ASSERT_EQ(first.size(), 4u);
  const auto batch = s.next_batch(4);
  EXPECT_EQ(knobs_text(batch[0]), knobs_text(first[0]));
  EXPECT_EQ(knobs_text(batch[1]), knobs_text(first[1]));
  ASSERT_EQ(batch.size(), 4u);
  EXPECT_EQ(knobs_text(batch[0]), knobs_text(resolve_schedule(L, t, a)));
  EXPECT_EQ(knobs_text(batch[1]), knobs_text(resolve_schedule(L, t, b)));
  std::set<std::string> seen{knobs_text(def)};
  for (const auto& c : batch) EXPECT_TRUE(seen.insert(knobs_text(c)).second) << knobs_text(c);
  for (const auto& c : s.next_batch(8)) EXPECT_TRUE(seen.insert(knobs_text(c)).second);
  // Knobs won on a layer too small for threads keep this layer's threads.
  ScheduleParams serial = a;
  serial.tile_x = 3;
  serial.rows_per_task = 0;
  const auto as_proposed = s.propose_first({serial});
  const auto next = s.next_batch(1);
  ASSERT_EQ(next.size(), 1u);
  EXPECT_EQ(knobs_text(next[0]), knobs_text(as_proposed[0]));
  EXPECT_EQ(next[0].tile_x, 3);
  EXPECT_GT(next[0].rows_per_task, 0);
}

std::string conv_signature(const std::string& fields) {
  return layer_signature(
      only_layer(R"({"name": "x", "op": "conv2d", "padding": "same", )" + fields + "}"));
}

TEST(TuneTransfer, DistanceGrowsWithShapeAndIsInfiniteWhereKnobsCannotCarryOver) {
  const std::string c64 =
      conv_signature(R"("input_shape": [1, 56, 56, 64], "out_channels": 64, "kernel": 3)");
  const std::string c128 =
      conv_signature(R"("input_shape": [1, 28, 28, 128], "out_channels": 128, "kernel": 3)");
  const std::string c512 =
      conv_signature(R"("input_shape": [1, 7, 7, 512], "out_channels": 512, "kernel": 3)");
  const std::string pw =
      conv_signature(R"("input_shape": [1, 28, 28, 128], "out_channels": 128, "kernel": 1)");
  const std::string strided = conv_signature(
      R"("input_shape": [1, 56, 56, 128], "out_channels": 128, "kernel": 3, "stride": 2)");
  const std::string dw = conv_signature(
      R"("input_shape": [1, 28, 28, 128], "out_channels": 128, "kernel": 3, "groups": 128)");
  const std::string nchw = conv_signature(
      R"("input_shape": [1, 128, 28, 28], "out_channels": 128, "kernel": 3, "layout": "NCHW",
         "weight_layout": "OIHW")");
  const std::string pool = layer_signature(only_layer(
      R"({"name": "p", "op": "max_pool", "input_shape": [1, 28, 28, 128], "kernel": 3,
          "padding": "same"})"));
  EXPECT_EQ(signature_distance(c128, c128), 0);
  EXPECT_DOUBLE_EQ(signature_distance(c64, c128), signature_distance(c128, c64));
  EXPECT_DOUBLE_EQ(signature_distance(c64, c128), 1 + 1 + 2);  // channels in, out; 4x pixels
  EXPECT_LT(signature_distance(c128, c64), signature_distance(c128, c512));
  EXPECT_DOUBLE_EQ(signature_distance(c128, pw), std::log2(9.0));
  EXPECT_DOUBLE_EQ(signature_distance(c128, strided), 1);  // same out pixels, another stride
  for (const std::string& far : {dw, nchw, pool, std::string("{not json"), std::string("{}")})
    EXPECT_TRUE(std::isinf(signature_distance(c128, far))) << far;
}

TEST(TuneTransfer, CandidatesAreTheNearestImprovedSignaturesOfThisScope) {
  TempDir dir;
  TuneDb db(dir.file("t.sqlite"));
  const auto sig = [](int channels, int size, const std::string& more = "") {
    return conv_signature(R"("input_shape": [1, )" + std::to_string(size) + ", " +
                          std::to_string(size) + ", " + std::to_string(channels) +
                          R"(], "out_channels": )" + std::to_string(channels) + R"(, "kernel": 3)" +
                          more);
  };
  // Records of this knob scope whatever implementations could compute their layers; another
  // scope's (or Halide's) records transfer nothing.
  const std::string space = "halide-21.0.0/cpu-space-3/";
  const auto winner = [&](const std::string& s, const std::string& layer, int tile_x, double gain,
                          const std::string& machine = "m1",
                          const std::string& toolchain = "halide-21.0.0/cpu-space-3/direct-1") {
    Measurement m = record(layer + "_key", gain, true, machine);
    m.scope.signature = s;
    m.scope.toolchain = toolchain;
    m.layer = layer;
    m.knobs = "{\"tile_x\": " + std::to_string(tile_x) + "}";
    db.insert(m);
  };
  const std::string me = sig(128, 28);
  winner(me, "itself", 7, 1.9);            // this signature: never a donor to itself
  winner(sig(64, 56), "near", 2, 1.2);     // distance 4
  winner(sig(256, 14), "nearer", 3, 1.1);  // distance 4, as near: the larger gain first
  winner(sig(128, 14), "nearest", 4, 1.05, "m1", space + "winograd-1+direct-1");
  winner(sig(128, 14), "older_space", 11, 3.0, "m1", "halide-21.0.0/cpu-space-2/direct-1");
  winner(sig(512, 7), "far", 5, 1.5);
  winner(sig(128, 28, R"(, "groups": 128)"), "depthwise", 6, 2.0);  // knobs of another kind
  winner(sig(128, 56), "elsewhere", 8, 2.0, "m2");                  // another machine
  winner(sig(32, 28), "no_gain", 9, 1.0);  // its best is its default: nothing to transfer
  EXPECT_EQ(toolchain_space(space + "winograd-1+direct-1"), space);
  const TuneScope scope{me, "tgt", space + "winograd-1+direct-1", "m1"};
  const auto found = transfer_candidates(db, scope, 3);
  ASSERT_EQ(found.size(), 3u);
  EXPECT_EQ(found[0].layer, "nearest");
  EXPECT_EQ(found[0].knobs.tile_x, 4);
  EXPECT_EQ(found[1].layer, "near");
  EXPECT_EQ(found[2].layer, "nearer");
  EXPECT_DOUBLE_EQ(found[1].distance, found[2].distance);
  EXPECT_EQ(transfer_candidates(db, scope, 10).size(), 4u);  // "far" too, nothing else
  EXPECT_TRUE(transfer_candidates(db, {me, "tgt", space + "direct-1", "m9"}, 10).empty());
}

}  // namespace
}  // namespace padfold
