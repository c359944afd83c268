// `padfold tune`, `padfold db` and `padfold compile --db` end to end on examples/tiny.json, with
// tiny budgets: resume after SIGKILL, shards merged == one process, the tuned knobs in the
// manifest, a crashing candidate recorded as failed, and bad input.
#include <gtest/gtest.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "bundle_util.h"
#include "compile/target.h"
#include "frontend/spec.h"
#include "schedules/schedule.h"
#include "tune/db.h"
#include "tune/signature.h"

namespace padfold::testing {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

const std::string kBin = PADFOLD_BIN;
const std::string kSpec = std::string(PADFOLD_EXAMPLES_DIR) + "/tiny.json";
// Fast measurements: the tests check bookkeeping, not speed.
const std::string kFast = " --no-baselines --min-time 0.005 ";

struct Work {
  fs::path dir;
  explicit Work(const std::string& name) : dir(fs::path(PF_WORK_DIR) / name) {
    fs::remove_all(dir);
    fs::create_directories(dir);
  }
  std::string file(const std::string& name) const { return (dir / name).string(); }
};

CommandResult tune(const std::string& db, const std::string& extra, const std::string& env = "") {
  return run_command(env + " " + shell_quote(kBin) + " tune " + shell_quote(kSpec) + " --db " +
                     shell_quote(db) + kFast + extra);
}

// (signature, candidate) of every "knobs" record.
std::set<std::string> candidate_keys(const std::string& db_path) {
  TuneDb db(db_path, true);
  std::set<std::string> keys;
  for (const Measurement& m : db.all())
    if (m.kind == "knobs") keys.insert(m.scope.signature + " " + m.candidate);
  return keys;
}

std::string file_text(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

// An accepted record of `knobs` for `layer`'s signature on `target`, this machine and toolchain.
Measurement accepted_record(const Layer& layer, const Halide::Target& target,
                            const std::string& candidate, const std::string& knobs,
                            const std::string& measured_for, double vs_default) {
  Measurement m;
  m.scope = {layer_signature(layer), target_key(target), toolchain_key(layer, target),
             machine_id()};
  m.candidate = candidate;
  m.kind = "knobs";
  m.knobs = knobs;
  m.status = "ok";
  m.layer = measured_for;
  m.median_s = 1e-6;
  m.vs_default = vs_default;
  m.accepted = true;
  m.samples = "[]";
  return m;
}

TEST(TuneCli, ResumesAfterSigkillWithoutRemeasuring) {
  Work w("resume");
  const std::string db = w.file("tune.sqlite");
  const std::string pid_file = w.file("pid");
  ASSERT_EQ(
      std::system(("(" + shell_quote(kBin) + " tune " + shell_quote(kSpec) + " --db " +
                   shell_quote(db) + kFast + "--budget 8 --jobs 1 > " + shell_quote(w.file("log")) +
                   " 2>&1 & echo $! > " + shell_quote(pid_file) + ")")
                      .c_str()),
      0);
  const pid_t pid = std::stoi(file_text(pid_file));
  // Kill it once a few candidates are stored, in the middle of the run.
  size_t before = 0;
  for (int i = 0; i < 600 && before < 4; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    if (fs::exists(db)) try {
        before = TuneDb(db, true).all().size();
      } catch (const std::exception&) {
      }
  }
  ASSERT_GE(before, 4u) << file_text(w.file("log"));
  ASSERT_EQ(kill(pid, SIGKILL), 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  // Keyed by signature and candidate: two signatures' defaults may resolve to the same knobs.
  const auto key = [](const Measurement& m) { return m.scope.signature + " " + m.candidate; };
  std::map<std::string, double> killed;
  for (const Measurement& m : TuneDb(db, true).all()) killed[key(m)] = m.median_s;
  ASSERT_GE(killed.size(), before);
  ASSERT_LT(killed.size(), 4u * 8u) << "the run finished before it was killed";

  const CommandResult r = tune(db, "--budget 8 --jobs 1");
  ASSERT_EQ(r.status, 0) << r.output;
  // The killed run's candidate libraries are cleaned up by the next run.
  for (const auto& e : fs::directory_iterator(fs::temp_directory_path()))
    EXPECT_NE(e.path().filename().string().rfind("padfold-tune-" + std::to_string(pid) + "-", 0),
              0u)
        << e.path();
  TuneDb done(db, true);
  std::map<std::string, size_t> per_signature;
  for (const Measurement& m : done.all()) {
    if (m.kind == "knobs") ++per_signature[m.scope.signature];
    const auto k = killed.find(key(m));
    if (k != killed.end()) {
      EXPECT_EQ(k->second, m.median_s) << "re-measured " << m.candidate;
    }
  }
  for (const auto& [candidate, median] : killed) {
    bool kept = false;
    for (const Measurement& m : done.all()) kept |= key(m) == candidate;
    EXPECT_TRUE(kept) << candidate << " lost";
  }
  ASSERT_EQ(per_signature.size(), 4u);
  for (const auto& [sig, n] : per_signature) EXPECT_EQ(n, 8u) << sig;
  // A third run has nothing left to measure.
  const CommandResult again = tune(db, "--budget 8 --jobs 1");
  ASSERT_EQ(again.status, 0) << again.output;
  EXPECT_TRUE(contains(again.output, "0/0/8")) << again.output;  // measured/failed/reused
  EXPECT_EQ(TuneDb(db, true).all().size(), done.all().size());
}

TEST(TuneCli, ThreeShardsMergedEqualOneProcess) {
  Work w("shards");
  // Budget 4 is the default plus the first batch of neighbours, which no timing changes.
  ASSERT_EQ(tune(w.file("single.sqlite"), "--budget 4 --jobs 1").status, 0);
  std::string cmd;
  for (int i = 0; i < 3; ++i)
    cmd += shell_quote(kBin) + " tune " + shell_quote(kSpec) + kFast + "--budget 4 --jobs 1 --db " +
           shell_quote(w.file("s" + std::to_string(i) + ".sqlite")) + " --shard " +
           std::to_string(i) + "/3 > /dev/null 2>&1 & ";
  ASSERT_EQ(std::system((cmd + "wait").c_str()), 0);
  std::set<std::string> per_shard_sigs;
  for (int i = 0; i < 3; ++i) {
    const auto keys = candidate_keys(w.file("s" + std::to_string(i) + ".sqlite"));
    EXPECT_FALSE(keys.empty()) << "shard " << i << " did nothing";
    for (const std::string& k : keys)
      EXPECT_TRUE(per_shard_sigs.insert(k).second) << "two shards measured " << k;
  }
  const std::string s = " " + shell_quote(w.file("s0.sqlite")) + " " +
                        shell_quote(w.file("s1.sqlite")) + " " + shell_quote(w.file("s2.sqlite"));
  const CommandResult m = run_command(shell_quote(kBin) + " db merge" + s + " -o " +
                                      shell_quote(w.file("merged.sqlite")));
  ASSERT_EQ(m.status, 0) << m.output;
  EXPECT_EQ(candidate_keys(w.file("merged.sqlite")), candidate_keys(w.file("single.sqlite")));
  // The merge does not depend on the order of its inputs.
  const CommandResult m2 =
      run_command(shell_quote(kBin) + " db merge " + shell_quote(w.file("s2.sqlite")) + " " +
                  shell_quote(w.file("s0.sqlite")) + " " + shell_quote(w.file("s1.sqlite")) +
                  " -o " + shell_quote(w.file("merged2.sqlite")));
  ASSERT_EQ(m2.status, 0) << m2.output;
  const CommandResult e1 =
      run_command(shell_quote(kBin) + " db export --csv " + shell_quote(w.file("merged.sqlite")));
  const CommandResult e2 =
      run_command(shell_quote(kBin) + " db export --csv " + shell_quote(w.file("merged2.sqlite")));
  ASSERT_EQ(e1.status, 0) << e1.output;
  EXPECT_EQ(e1.output, e2.output);
  EXPECT_TRUE(contains(e1.output, "signature,target,toolchain,machine,candidate")) << e1.output;
}

TEST(TuneCli, ShardsSplitOneLayersCandidates) {
  Work w("candidate_shards");
  // One signature, three shards: each measures the default and its share of the candidates.
  ASSERT_EQ(tune(w.file("single.sqlite"), "--layers stem --budget 5 --jobs 1").status, 0);
  std::string cmd, inputs;
  for (int i = 0; i < 3; ++i) {
    const std::string db = shell_quote(w.file("s" + std::to_string(i) + ".sqlite"));
    cmd += shell_quote(kBin) + " tune " + shell_quote(kSpec) + kFast +
           "--layers stem --budget 5 --jobs 1 --db " + db + " --shard " + std::to_string(i) +
           "/3 > /dev/null 2>&1 & ";
    inputs += " " + db;
  }
  ASSERT_EQ(std::system((cmd + "wait").c_str()), 0);
  const CommandResult m = run_command(shell_quote(kBin) + " db merge" + inputs + " -o " +
                                      shell_quote(w.file("merged.sqlite")));
  ASSERT_EQ(m.status, 0) << m.output;
  const auto single = candidate_keys(w.file("single.sqlite"));
  EXPECT_EQ(single.size(), 5u);
  EXPECT_EQ(candidate_keys(w.file("merged.sqlite")), single);
}

TEST(TuneCli, CompileDbUsesTheBestRecordAndSaysSo) {
  Work w("compile_db");
  const std::string db_path = w.file("tune.sqlite");
  const Model model = load_spec(kSpec);
  const Layer& stem = *model.find_layer("stem");
  const Halide::Target host = resolve_target("host");
  ScheduleParams knobs = default_schedule(stem, host);
  knobs.tile_x = 2;
  knobs.unroll_channels = 3;
  knobs.rows_per_task = 0;
  const ScheduleParams resolved = resolve_schedule(stem, host, knobs);
  ASSERT_NE(knobs_text(resolved),
            knobs_text(resolve_schedule(stem, host, default_schedule(stem, host))));
  {
    TuneDb db(db_path);
    // Records are found by signature, not by the name of the layer they were measured for.
    db.insert(accepted_record(stem, host, candidate_key(resolved), knobs_text(resolved),
                              "some_other_name", 1.5));
  }
  const auto compile = [&](const std::string& out, const std::string& extra,
                           const std::string& env = "") {
    return run_command(env + " " + shell_quote(kBin) + " compile " + shell_quote(kSpec) + " -o " +
                       shell_quote(w.file(out)) + " --db " + shell_quote(db_path) + extra);
  };
  const CommandResult r = compile("bundle", "");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "tuned (db)")) << r.output;
  const json manifest = json::parse(file_text(w.file("bundle/manifest.json")));
  const json& schedules = manifest["targets"][0]["schedules"];
  EXPECT_EQ(schedules["stem"]["source"], "tuned (db)");
  EXPECT_EQ(schedules["stem"]["tile_x"], resolved.tile_x);
  EXPECT_EQ(schedules["stem"]["unroll_channels"], resolved.unroll_channels);
  EXPECT_EQ(schedules["stem"]["rows_per_task"], 0);
  EXPECT_EQ(schedules["stem"]["tuning"]["candidate"], candidate_key(resolved));
  EXPECT_EQ(schedules["stem"]["tuning"]["this_machine"], true);
  EXPECT_EQ(schedules["dw"]["source"], "default");
  // Another machine's record: only with --db-any-machine, and the manifest says whose.
  const std::string other = "PADFOLD_MACHINE_ID=elsewhere";
  const CommandResult r2 = compile("bundle2", "", other);
  ASSERT_EQ(r2.status, 0) << r2.output;
  EXPECT_EQ(json::parse(file_text(
                w.file("bundle2/manifest.json")))["targets"][0]["schedules"]["stem"]["source"],
            "default");
  const CommandResult r3 = compile("bundle3", " --db-any-machine", other);
  ASSERT_EQ(r3.status, 0) << r3.output;
  const json s3 =
      json::parse(file_text(w.file("bundle3/manifest.json")))["targets"][0]["schedules"]["stem"];
  EXPECT_EQ(s3["source"], "tuned (db)");
  EXPECT_EQ(s3["tuning"]["this_machine"], false);
  EXPECT_EQ(s3["tuning"]["machine"], machine_id());
}

// Three convs sharing a signature, a depthwise->pointwise chain and a pool.
const char* kModelSpec =
    R"({"model": "share", "defaults": {"layout": "NHWC", "weight_layout": "HWIO"},
  "layers": [
    {"name": "c1", "op": "conv2d", "input_shape": [1, 12, 12, 8], "out_channels": 8, "kernel": 3,
     "padding": "same"},
    {"name": "c2", "op": "conv2d", "out_channels": 8, "kernel": 3, "padding": "same"},
    {"name": "c3", "op": "conv2d", "out_channels": 8, "kernel": 3, "padding": "same"},
    {"name": "dw", "op": "conv2d", "out_channels": 8, "kernel": 3, "groups": 8, "padding": "same"},
    {"name": "pw", "op": "conv2d", "out_channels": 16, "kernel": 1},
    {"name": "pool", "op": "max_pool", "kernel": 2, "stride": 2}]})";

CommandResult tune_model(const Work& w, const std::string& db, const std::string& extra) {
  const std::string spec = w.file("share.json");
  std::ofstream(spec) << kModelSpec;
  return run_command(shell_quote(kBin) + " tune " + shell_quote(spec) + " --db " + shell_quote(db) +
                     kFast + " --report " + shell_quote(w.file("report.json")) + " " + extra);
}

TEST(TuneCli, AModelIsTunedAsItCompilesWithTimeSplitByEachSignaturesShare) {
  Work w("model");
  // The chain fused: its layers are left out, and said so.
  const CommandResult fused = tune_model(w, w.file("a.sqlite"), "--budget 2 --fuse dw+pw");
  ASSERT_EQ(fused.status, 0) << fused.output;
  EXPECT_TRUE(contains(fused.output,
                       "2 layer(s) run inside fused blocks (--fuse dw+pw) and are "
                       "not tuned: dw, pw"))
      << fused.output;
  json report = json::parse(file_text(w.file("report.json")));
  std::set<std::string> tuned;
  for (const json& o : report) tuned.insert(o["layer"].get<std::string>());
  EXPECT_EQ(tuned, (std::set<std::string>{"c1", "pool"}));
  // Nothing fused: every layer's signature, c1's shared by three layers; with --time, each
  // search is allotted its share of the time left, the largest share first.
  const double time_s = 40;
  const CommandResult all = tune_model(w, w.file("b.sqlite"), "--budget 3 --fuse none --time 40s");
  ASSERT_EQ(all.status, 0) << all.output;
  EXPECT_FALSE(contains(all.output, "fused blocks")) << all.output;
  report = json::parse(file_text(w.file("report.json")));
  ASSERT_EQ(report.size(), 4u) << report.dump(1);
  double shares = 0, largest = 0;
  for (const json& o : report) {
    ASSERT_EQ(o["status"], "ok") << o.dump();
    const double share = o["share"].get<double>(), allotted = o["allotted_s"].get<double>();
    shares += share;
    EXPECT_EQ(o["layers"], o["layer"] == "c1" ? 3 : 1) << o.dump();
    EXPECT_GT(share, 0) << o.dump();
    EXPECT_NEAR(
        share,
        o["default_s"].get<double>() * o["layers"].get<double>() /
            [&] {
              double total = 0;
              for (const json& p : report)
                total += p["default_s"].get<double>() * p["layers"].get<double>();
              return total;
            }(),
        1e-9);
    EXPECT_LE(allotted, time_s) << o.dump();
    largest = std::max(largest, share);
  }
  EXPECT_NEAR(shares, 1, 1e-9);
  for (const json& o : report)
    if (o["share"].get<double>() == largest) {
      // The first search: the whole time less the defaults' measuring, times its share.
      EXPECT_LE(o["allotted_s"].get<double>(), largest * time_s + 1e-6) << o.dump();
      EXPECT_GE(o["allotted_s"].get<double>(), largest * time_s * 0.5) << o.dump();
    }
}

TEST(TuneCli, ASearchStartsFromTheNearestTunedSignaturesWinner) {
  Work w("transfer");
  const std::string db_path = w.file("tune.sqlite");
  std::ofstream(w.file("share.json")) << kModelSpec;
  const Model model = load_spec(w.file("share.json"));
  const Layer& c1 = *model.find_layer("c1");
  const Layer& pw = *model.find_layer("pw");  // 1x1: near c1 (same op, layout, dense)
  const Halide::Target host = resolve_target("host");
  const ScheduleParams def = resolve_schedule(c1, host, default_schedule(c1, host));
  ScheduleParams won = def;
  won.tile_x = def.tile_x == 2 ? 3 : 2;
  won.tile_y = def.tile_y == 2 ? 1 : 2;
  const ScheduleParams resolved = resolve_schedule(c1, host, won);
  ASSERT_NE(candidate_key(resolved), candidate_key(def));
  {
    TuneDb db(db_path);
    db.insert(accepted_record(pw, host, "winner", knobs_text(won), "pw", 1.4));
  }
  const CommandResult r = tune_model(w, db_path, "--budget 2 --layers c1 --jobs 1");
  ASSERT_EQ(r.status, 0) << r.output;
  const json report = json::parse(file_text(w.file("report.json")));
  ASSERT_EQ(report.size(), 1u);
  EXPECT_EQ(report[0]["transferred"], 1) << report.dump(1);
  // The one candidate past the default is pw's winner, resolved for c1, and it was measured.
  bool measured = false;
  for (const Measurement& m : TuneDb(db_path, true).all())
    measured |= m.scope.signature == layer_signature(c1) && m.kind == "knobs" &&
                m.candidate == candidate_key(resolved) && m.status == "ok";
  EXPECT_TRUE(measured);
  // --no-transfer: the search starts from the default alone.
  Work w2("transfer_off");
  fs::copy_file(db_path, w2.file("tune.sqlite"));
  const CommandResult off =
      tune_model(w2, w2.file("tune.sqlite"), "--budget 2 --layers c1 --jobs 1 --no-transfer");
  ASSERT_EQ(off.status, 0) << off.output;
  EXPECT_EQ(json::parse(file_text(w2.file("report.json")))[0]["transferred"], 0);
}

TEST(TuneCli, ACrashingCandidateIsRecordedAsFailed) {
  Work w("crash");
  const std::string db = w.file("tune.sqlite");
  const CommandResult r = tune(db, "--layers stem,pool --budget 4 --jobs 2",
                               std::string("PADFOLD_INJECT_COMPILE_FAULT=stem:sigsegv"));
  ASSERT_EQ(r.status, 0) << r.output;
  size_t failed = 0, ok_stem = 0, ok_pool = 0;
  for (const Measurement& m : TuneDb(db, true).all()) {
    if (m.kind != "knobs") continue;
    if (m.layer == "stem" && m.status == "failed") {
      ++failed;
      EXPECT_TRUE(contains(m.reason, "SIGSEGV")) << m.reason;
    }
    ok_stem += m.layer == "stem" && m.status == "ok";
    ok_pool += m.layer == "pool" && m.status == "ok";
  }
  EXPECT_EQ(failed, 3u);
  EXPECT_EQ(ok_stem, 1u);  // the default (the fault spares it without ":every")
  EXPECT_EQ(ok_pool, 4u);
}

TEST(TuneCli, LayersWhoseCandidatesShareKnobsKeepTheirOwnKernels) {
  // Two depthwise layers differing only in their border: other kernels, the same knobs, so their
  // candidates have the same keys, yet each must be compiled and timed as its own kernel.
  Work w("same_knobs");
  const std::string spec = w.file("two_dw.json");
  std::ofstream(spec)
      << R"({"model": "two_dw", "defaults": {"layout": "NHWC", "weight_layout": "HWIO"},
    "layers": [
      {"name": "dw_a", "op": "conv2d", "input_shape": [1, 12, 12, 16], "out_channels": 16,
       "groups": 16, "kernel": 3, "padding": "same"},
      {"name": "dw_b", "op": "conv2d", "input_shape": [1, 12, 12, 16], "out_channels": 16,
       "groups": 16, "kernel": 3, "padding": "same", "border": "replicate"}]})";
  const std::string db = w.file("tune.sqlite");
  // Resumed, the default of each layer comes from the database and must be rebuilt for it.
  for (const char* budget : {"2", "4"}) {
    const CommandResult r = run_command(shell_quote(kBin) + " tune " + shell_quote(spec) +
                                        " --db " + shell_quote(db) + kFast + "--budget " + budget);
    ASSERT_EQ(r.status, 0) << r.output;
  }
  std::set<std::string> keys_a, keys_b;
  for (const Measurement& m : TuneDb(db, true).all()) {
    EXPECT_EQ(m.status, "ok") << m.layer << " " << m.candidate << ": " << m.reason;
    if (m.kind == "knobs") (m.layer == "dw_a" ? keys_a : keys_b).insert(m.candidate);
  }
  EXPECT_EQ(keys_a.size(), 4u);
  EXPECT_EQ(keys_b.size(), 4u);
  std::vector<std::string> shared;
  std::set_intersection(keys_a.begin(), keys_a.end(), keys_b.begin(), keys_b.end(),
                        std::back_inserter(shared));
  EXPECT_FALSE(shared.empty()) << "the layers' candidates no longer share keys: the test needs "
                                  "two layers that do";
}

TEST(TuneCli, AHangingCandidateIsFailedAtItsTimeout) {
  Work w("hang");
  const std::string db = w.file("tune.sqlite");
  const CommandResult r = tune(db, "--layers pool --budget 2 --compile-timeout 2",
                               "PADFOLD_INJECT_COMPILE_FAULT=pool:hang");
  ASSERT_EQ(r.status, 0) << r.output;
  size_t hung = 0;
  for (const Measurement& m : TuneDb(db, true).all())
    if (m.status == "failed") {
      ++hung;
      EXPECT_TRUE(contains(m.reason, "did not finish within 2 s")) << m.reason;
    }
  EXPECT_EQ(hung, 1u);
}

TEST(TuneCli, BadInputIsNamedAndNothingIsLost) {
  Work w("bad");
  const std::string db = w.file("tune.sqlite");
  CommandResult r = tune(db, "--shard 3/3");
  EXPECT_NE(r.status, 0);
  EXPECT_TRUE(contains(r.output, "--shard: '3/3'")) << r.output;
  r = tune(db, "--shard auto");
  EXPECT_NE(r.status, 0);
  EXPECT_TRUE(contains(r.output, "SLURM_ARRAY_TASK_ID")) << r.output;
  r = tune(db, "--layers stem,nope");
  EXPECT_NE(r.status, 0);
  EXPECT_TRUE(contains(r.output, "no layer 'nope'") && contains(r.output, kSpec)) << r.output;
  r = tune(db, "--time 10x");
  EXPECT_NE(r.status, 0);
  EXPECT_TRUE(contains(r.output, "--time: '10x'")) << r.output;
  r = tune(db, "--target host-cuda");
  EXPECT_NE(r.status, 0);
  EXPECT_TRUE(contains(r.output, "--target host-cuda: a GPU target")) << r.output;
  EXPECT_FALSE(fs::exists(db)) << "a failed start created the database";

  const std::string corrupt = w.file("corrupt.sqlite");
  const std::string junk = "not a database at all\n" + std::string(2000, 'z');
  std::ofstream(corrupt) << junk;
  r = tune(corrupt, "--budget 2");
  EXPECT_NE(r.status, 0);
  EXPECT_TRUE(contains(r.output, corrupt) && contains(r.output, "not a padfold tuning database"))
      << r.output;
  EXPECT_EQ(file_text(corrupt), junk);
  r = run_command(shell_quote(kBin) + " compile " + shell_quote(kSpec) + " -o " +
                  shell_quote(w.file("bundle")) + " --db " + shell_quote(corrupt));
  EXPECT_NE(r.status, 0);
  EXPECT_TRUE(contains(r.output, "not a padfold tuning database")) << r.output;
  EXPECT_FALSE(fs::exists(w.file("bundle")));
  r = run_command(shell_quote(kBin) + " db merge " + shell_quote(corrupt) + " -o " +
                  shell_quote(w.file("merged.sqlite")));
  EXPECT_NE(r.status, 0);
  EXPECT_TRUE(contains(r.output, corrupt)) << r.output;
  EXPECT_FALSE(fs::exists(w.file("merged.sqlite")));
  EXPECT_EQ(file_text(corrupt), junk);
}

// A tiny database of one pool layer, shared by the tests of `padfold db`.
std::string pool_db(const Work& w) {
  const std::string db = w.file("pool.sqlite");
  const CommandResult r = tune(db, "--layers pool --budget 2 --jobs 1");
  EXPECT_EQ(r.status, 0) << r.output;
  return db;
}

TEST(TuneCli, DbExportWritesDevicesInPlaceAndThroughLinks) {
  Work w("export_targets");
  const std::string db = pool_db(w);
  const std::string csv =
      run_command(shell_quote(kBin) + " db export --csv " + shell_quote(db)).output;
  // A symbolic link: the file it points to gets the CSV, the link stays a link.
  std::ofstream(w.file("target.csv")) << "old";
  fs::create_symlink("target.csv", w.file("link.csv"));
  CommandResult r = run_command(shell_quote(kBin) + " db export --csv " + shell_quote(db) + " -o " +
                                shell_quote(w.file("link.csv")));
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_TRUE(fs::is_symlink(w.file("link.csv")));
  EXPECT_EQ(file_text(w.file("target.csv")), csv);
  // A directory: refused with the output's name, and no temporary file is left beside it.
  fs::create_directory(w.file("dir"));
  r = run_command(shell_quote(kBin) + " db export --csv " + shell_quote(db) + " -o " +
                  shell_quote(w.file("dir")));
  EXPECT_NE(r.status, 0);
  EXPECT_TRUE(contains(r.output, w.file("dir") + ": cannot write: is a directory")) << r.output;
  EXPECT_FALSE(fs::exists(w.file("dir.tmp")));
  // A character device: written in place, still a device. As root (CI) a copy of /dev/null made
  // with mknod, so that a regression cannot replace the system's; without root /dev/null itself,
  // which such a user cannot replace.
  std::string device = w.file("fakenull");
  if (::mknod(device.c_str(), S_IFCHR | 0666, makedev(1, 3)) != 0) device = "/dev/null";
  r = run_command(shell_quote(kBin) + " db export --csv " + shell_quote(db) + " -o " +
                  shell_quote(device));
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(fs::status(device).type(), fs::file_type::character);
  for (const auto& e : fs::directory_iterator(w.dir))
    EXPECT_EQ(e.path().string().find(".tmp"), std::string::npos) << e.path();
  // A dangling link (its target not written yet, in another folder): written through too.
  fs::create_directory(w.file("sub"));
  fs::create_symlink("../later.csv", w.file("sub/dangling.csv"));
  r = run_command(shell_quote(kBin) + " db export --csv " + shell_quote(db) + " -o " +
                  shell_quote(w.file("sub/dangling.csv")));
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_TRUE(fs::is_symlink(w.file("sub/dangling.csv")));
  EXPECT_EQ(file_text(w.file("later.csv")), csv);
}

// A database of a newer format version is refused by every command that would write it, and the
// file is left exactly as it was (no table created, no switch to WAL, no -wal or -shm beside it).
TEST(TuneCli, ADatabaseOfAnotherVersionIsRefusedUntouched) {
  Work w("future");
  const std::string db = pool_db(w);
  {
    sqlite3* h = nullptr;
    ASSERT_EQ(sqlite3_open(db.c_str(), &h), SQLITE_OK);
    EXPECT_EQ(sqlite3_exec(h,
                           "UPDATE meta SET value='2' WHERE key='format_version'; ALTER TABLE "
                           "measurements RENAME TO measurements_v2;",
                           nullptr, nullptr, nullptr),
              SQLITE_OK);
    sqlite3_close(h);
  }
  CommandResult r;
  const std::string before = file_text(db);
  const std::string other = pool_db(Work("future_other"));
  for (const std::string& cmd :
       {shell_quote(kBin) + " tune " + shell_quote(kSpec) + " --layers pool --budget 2 --jobs 1" +
            kFast + "--db " + shell_quote(db),
        shell_quote(kBin) + " db merge " + shell_quote(other) + " " + shell_quote(db) + " -o " +
            shell_quote(db)}) {
    r = run_command(cmd);
    EXPECT_NE(r.status, 0) << cmd;
    EXPECT_TRUE(contains(r.output,
                         "has format version '2', expected 1); the file was left as it "
                         "was"))
        << r.output;
    EXPECT_EQ(file_text(db), before) << cmd;
    EXPECT_FALSE(fs::exists(db + "-wal")) << cmd;
    EXPECT_FALSE(fs::exists(db + "-shm")) << cmd;
  }
}

TEST(TuneCli, ReportWriteErrorsFailAndABadReportPathIsFoundBeforeTheRun) {
  Work w("report");
  const std::string db = w.file("tune.sqlite");
  fs::create_directory(w.file("dir"));
  CommandResult r = tune(db, "--layers pool --budget 2 --jobs 1 --report " + w.file("dir"));
  EXPECT_NE(r.status, 0);
  EXPECT_TRUE(contains(r.output, "--report " + w.file("dir") + ": is a directory")) << r.output;
  r = tune(db, "--layers pool --budget 2 --jobs 1 --report " + w.file("none/rep.json"));
  EXPECT_NE(r.status, 0);
  EXPECT_TRUE(contains(r.output, "the directory " + w.file("none") + " does not exist"))
      << r.output;
  EXPECT_FALSE(fs::exists(db)) << "the run started before the --report path was checked";
  r = tune(db, "--layers pool --budget 2 --jobs 1 --report /dev/full");
  EXPECT_NE(r.status, 0);
  EXPECT_TRUE(contains(r.output, "/dev/full: cannot write: No space left on device")) << r.output;
  r = tune(db, "--layers pool --budget 2 --jobs 1 --report " + w.file("rep.json"));
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_FALSE(json::parse(file_text(w.file("rep.json"))).empty());
}

TEST(TuneCli, ADatabaseThatIsNoRegularFileIsRefusedAndNothingIsCreatedBesideIt) {
  Work w("db_not_regular");
  fs::create_directory(w.file("dir"));
  std::vector<std::string> paths = {w.file("dir")};
  if (::mknod(w.file("fakenull").c_str(), S_IFCHR | 0666, makedev(1, 3)) == 0)
    paths.push_back(w.file("fakenull"));  // a copy of /dev/null (needs root)
  for (const std::string& p : paths) {
    const std::vector<std::string> commands = {
        shell_quote(kBin) + " tune " + shell_quote(kSpec) + " --db " + shell_quote(p) + kFast +
            "--layers pool --budget 1 --jobs 1",
        shell_quote(kBin) + " compile " + shell_quote(kSpec) + " -o " +
            shell_quote(w.file("bundle")) + " --db " + shell_quote(p),
        shell_quote(kBin) + " db show " + shell_quote(p),
        shell_quote(kBin) + " db export --csv " + shell_quote(p),
        shell_quote(kBin) + " db merge " + shell_quote(p) + " -o " +
            shell_quote(w.file("m.sqlite")),
        shell_quote(kBin) + " db merge " + shell_quote(pool_db(w)) + " -o " + shell_quote(p)};
    for (const std::string& c : commands) {
      const CommandResult r = run_command(c);
      EXPECT_NE(r.status, 0) << c;
      // CLI11 refuses a directory for the inputs that must exist; padfold refuses the rest.
      EXPECT_TRUE(contains(r.output, p + ": not a regular file") ||
                  contains(r.output, "is actually a directory"))
          << c << "\n"
          << r.output;
    }
    EXPECT_FALSE(fs::exists(p + "-journal")) << p;
    EXPECT_FALSE(fs::exists(p + "-wal")) << p;
    EXPECT_FALSE(fs::exists(w.file("m.sqlite")));
    EXPECT_FALSE(fs::exists(w.file("bundle")));
  }
}

TEST(TuneCli, MergeIntoADatabaseBeingWrittenLosesNoRecordAndLeavesNothingBesideIt) {
  Work w("merge_live");
  const std::string other = pool_db(w);
  const size_t other_records = TuneDb(other, true).all().size();
  const std::string live = w.file("live.sqlite");
  const auto written_record = [](int i) {
    Measurement m;
    m.scope = {"sig", "tgt", "tc", "m1"};
    m.candidate = "w" + std::to_string(i);
    m.kind = "knobs";
    m.knobs = "{}";
    m.status = "ok";
    m.layer = "L";
    m.samples = "[]";
    return m;
  };
  TuneDb(live).insert(written_record(0));
  // A writer holding its connection open, as padfold tune does, storing records before, during
  // and after the merge.
  std::atomic<bool> merged{false};
  int written = 1;
  std::thread writer([&] {
    TuneDb db(live);
    for (int after = 0; after < 30; ++written) {
      db.insert(written_record(written));
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
      if (merged) ++after;
    }
  });
  while (written < 20) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  const CommandResult r = run_command(shell_quote(kBin) + " db merge " + shell_quote(live) + " " +
                                      shell_quote(other) + " -o " + shell_quote(live));
  merged = true;
  writer.join();
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(TuneDb(live, true).all().size(), static_cast<size_t>(written) + other_records);
  // A merge into a new file leaves no -wal or -shm beside it.
  const std::string fresh = w.file("fresh.sqlite");
  ASSERT_EQ(run_command(shell_quote(kBin) + " db merge " + shell_quote(other) + " -o " +
                        shell_quote(fresh))
                .status,
            0);
  for (const std::string& f : {live, fresh, other})
    for (const char* suffix : {"-wal", "-shm"}) EXPECT_FALSE(fs::exists(f + suffix)) << f << suffix;
  EXPECT_EQ(TuneDb(fresh, true).all().size(), other_records);
}

TEST(TuneCli, AnInfiniteTimeIsNoLimitAndABadMinTimeIsRefused) {
  Work w("time_inf");
  for (const std::string time : {"inf", "1e300h"}) {
    const std::string db = w.file(time + ".sqlite");
    const CommandResult r = tune(db, "--layers pool --budget 3 --jobs 1 --time " + time);
    ASSERT_EQ(r.status, 0) << r.output;
    EXPECT_EQ(candidate_keys(db).size(), 3u) << "--time " << time << " ran no search\n" << r.output;
  }
  for (const std::string bad : {"inf", "nan", "-1", "0", "1e300"}) {
    const CommandResult r =
        run_command(shell_quote(kBin) + " tune " + shell_quote(kSpec) + " --db " +
                    shell_quote(w.file("bad.sqlite")) +
                    " --no-baselines --layers pool --budget 2 --min-time " + bad);
    EXPECT_NE(r.status, 0) << bad;
    EXPECT_TRUE(contains(r.output, "--min-time") && contains(r.output, "(0, 60]")) << r.output;
  }
  EXPECT_FALSE(fs::exists(w.file("bad.sqlite")));
}

TEST(TuneCli, ADamagedBestRecordIsNamedWithItsDatabaseCandidateAndLayer) {
  Work w("damaged_record");
  const Model model = load_spec(kSpec);
  const Layer& stem = *model.find_layer("stem");
  const Halide::Target host = resolve_target("host");
  const std::string resolved = knobs_text(default_schedule(stem, host));
  json big = json::parse(resolved);
  big["tile_x"] = 100000;  // out of range
  const std::string too_big = big.dump();
  for (const std::string& knobs : {std::string("{not json"), too_big}) {
    const std::string db_path = w.file("damaged.sqlite");
    fs::remove(db_path);
    {
      TuneDb db(db_path);
      db.insert(accepted_record(stem, host, "damaged-candidate", knobs, "stem", 1.5));
    }
    const CommandResult r =
        run_command(shell_quote(kBin) + " compile " + shell_quote(kSpec) + " -o " +
                    shell_quote(w.file("bundle")) + " --db " + shell_quote(db_path));
    EXPECT_NE(r.status, 0) << knobs;
    EXPECT_TRUE(contains(r.output, db_path + ": the best record for layer 'stem' (candidate "
                                             "damaged-candidate) has knobs that cannot be used"))
        << r.output;
    EXPECT_FALSE(fs::exists(w.file("bundle")));
  }
}

}  // namespace
}  // namespace padfold::testing
