// Writes fuzz_db's seeds, small tuning databases for the layers of fuzz_db_model.h, with padfold's
// own database writer (TuneDb), then rewrites each with 512-byte pages so that it stays a few KB:
//   empty.sqlite          a valid database without records
//   tiny.sqlite           the first layer's default, a faster accepted candidate, a failed one,
//                         its confirmation and an autoscheduler baseline; the third layer's
//                         faster candidate (this machine)
//   other_machine.sqlite  the second and last layers' records of another machine and toolchain
//                         (--db-any-machine), one refuted by its confirmation
//   damaged.sqlite        best records whose knobs are out of range or not JSON
//   wal.sqlite            the third layer's faster candidate, the file left in WAL mode (by an
//                         older padfold or another program), without a -wal
// Regenerate (they are committed in tests/fuzz/seeds/db) after a change of the signature, the
// target key or the knobs, from a build with PADFOLD_FUZZ=ON:
//   build-san/bin/fuzz_db_seeds tests/fuzz/seeds/db
#include <sqlite3.h>

#include <cstdio>
#include <filesystem>
#include <stdexcept>
#include <string>

#include "compile/lower.h"
#include "fuzz_db_model.h"
#include "schedules/schedule.h"
#include "tune/db.h"
#include "tune/signature.h"

namespace {

namespace fs = std::filesystem;
using namespace padfold;

void sql(const std::string& path, const std::string& statements) {
  sqlite3* db = nullptr;
  if (sqlite3_open(path.c_str(), &db) != SQLITE_OK ||
      sqlite3_exec(db, statements.c_str(), nullptr, nullptr, nullptr) != SQLITE_OK) {
    const std::string msg = sqlite3_errmsg(db);
    sqlite3_close(db);
    throw std::runtime_error(path + ": " + msg);
  }
  sqlite3_close(db);
}

struct Seeds {
  Model model = fuzz_db::setup();
  Halide::Target target = fuzz_db::target();

  Measurement record(const Layer& L, const ScheduleParams& knobs, double vs_default,
                     const std::string& machine = machine_id(),
                     const std::string& toolchain = "") const {
    Measurement m;
    m.scope = {layer_signature(L), target_key(target),
               toolchain.empty() ? toolchain_key(L, target) : toolchain, machine};
    m.candidate = candidate_key(knobs);
    m.kind = "knobs";
    m.knobs = knobs_text(knobs);
    m.status = "ok";
    m.layer = L.name;
    m.median_s = 1e-4 / vs_default;
    m.vs_default = vs_default;
    m.vs_incumbent = vs_default;
    m.noise = 0.01;
    m.accepted = true;
    m.samples = "[" + std::to_string(m.median_s) + "]";
    return m;
  }
  ScheduleParams resolved(const Layer& L, const nlohmann::json& overrides) const {
    return resolve_schedule(L, target, requested_schedule(L, target, overrides));
  }
  ScheduleParams defaults(const Layer& L) const { return resolved(L, nlohmann::json::object()); }
  ScheduleParams faster(const Layer& L) const {
    return resolved(L, {{"tile_x", 2}, {"rows_per_task", 4}});
  }

  void tiny(TuneDb& db) const {
    const Layer& L = model.layers.front();
    db.insert(record(L, defaults(L), 1.0));
    db.insert(record(L, faster(L), 1.3));
    Measurement failed = record(L, resolved(L, {{"tile_x", 7}}), 0);
    failed.status = "failed";
    failed.reason = "did not compile";
    failed.accepted = false;
    db.insert(failed);
    Measurement confirm = record(L, faster(L), 1.28);
    confirm.candidate = "confirm:" + confirm.candidate;
    confirm.kind = "confirm";
    confirm.accepted = false;
    db.insert(confirm);
    Measurement baseline = record(L, defaults(L), 0.8);
    baseline.candidate = "auto:Mullapudi2016";
    baseline.kind = "baseline";
    baseline.knobs = "Mullapudi2016";
    baseline.accepted = false;
    db.insert(baseline);
    one_record(db);
  }
  void one_record(TuneDb& db) const {
    db.insert(record(model.layers[2], faster(model.layers[2]), 1.3));
  }
  void other_machine(TuneDb& db) const {
    const std::string machine = "other (Some CPU)", toolchain = "halide-20.0.0/space-1";
    db.insert(record(model.layers[1], faster(model.layers[1]), 1.2, machine, toolchain));
    const Layer& L = model.layers.back();
    db.insert(record(L, faster(L), 1.2, machine, toolchain));
    db.insert(record(L, defaults(L), 1.5, machine, toolchain));
    Measurement confirm = record(L, defaults(L), 0.9, machine, toolchain);
    confirm.candidate = "confirm:" + confirm.candidate;
    confirm.kind = "confirm";
    confirm.accepted = false;
    db.insert(confirm);
  }
  void damaged(TuneDb& db) const {
    Measurement out_of_range = record(model.layers[0], faster(model.layers[0]), 1.4);
    out_of_range.knobs = R"({"tile_x": 1000, "vector_lanes": 3})";
    db.insert(out_of_range);
    Measurement not_json = record(model.layers[1], faster(model.layers[1]), 1.4);
    not_json.knobs = R"({"tile_x": 2,)";
    db.insert(not_json);
  }

  void write(const fs::path& dir, const std::string& name, void (Seeds::*fill)(TuneDb&) const,
             bool wal = false) const {
    const std::string path = (dir / name).string();
    fs::remove(path);
    {
      TuneDb db(path);
      if (fill) (this->*fill)(db);
    }
    sql(path, "PRAGMA page_size=512; VACUUM;");
    if (wal) sql(path, "PRAGMA journal_mode=WAL;");
    std::printf("%s: %ju bytes\n", path.c_str(), static_cast<uintmax_t>(fs::file_size(path)));
  }
};

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: fuzz_db_seeds DIR\n");
    return 2;
  }
  try {
    const Seeds s;
    s.write(argv[1], "empty.sqlite", nullptr);
    s.write(argv[1], "tiny.sqlite", &Seeds::tiny);
    s.write(argv[1], "other_machine.sqlite", &Seeds::other_machine);
    s.write(argv[1], "damaged.sqlite", &Seeds::damaged);
    s.write(argv[1], "wal.sqlite", &Seeds::one_record, /*wal=*/true);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fuzz_db_seeds: %s\n", e.what());
    return 1;
  }
  return 0;
}
