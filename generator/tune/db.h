// The tuning database (SQLite, WAL while it is written): every measurement, keyed by natural keys
// only, so that shard databases merge with INSERT OR IGNORE and the best record is chosen
// deterministically.
#pragma once

#include <sqlite3.h>

#include <optional>
#include <string>
#include <vector>

namespace padfold {

struct MeasureResult;

// Where a measurement applies.
struct TuneScope {
  std::string signature, target, toolchain, machine;
};

struct Measurement {
  TuneScope scope;
  std::string candidate;  // candidate_key of the resolved knobs, or "auto:<name>" for a baseline
  // "knobs"; "baseline" (a Halide autoscheduler's schedule, candidate "auto:<name>"); "confirm"
  // (an accepted candidate re-timed beside the default after the search, "confirm:<candidate>")
  std::string kind;
  std::string knobs;        // resolved knobs as JSON; a baseline's name
  std::string status;       // "ok", "failed" (did not compile or run), "wrong" (output differs)
  std::string reason;       // why it failed
  std::string layer;        // the layer it was measured for (informational: not a key)
  double median_s = 0;      // per call, one thread
  double vs_default = 0;    // speedup over the default knobs, measured interleaved (>1: faster)
  double vs_incumbent = 0;  // speedup over the incumbent it was timed beside (baselines: tuned)
  double noise = 0;         // relative noise of the interleaved ratio
  bool accepted = false;    // became the incumbent: beat it by more than the noise
  std::string samples;      // JSON array of the per-round seconds

  // Takes the measuring child's result: status, reason, median, both ratios, noise and samples.
  void take(const MeasureResult& r);
};

// Throws naming `path` unless it is a regular file (a symbolic link to one counts) or, unless
// must_exist, absent: a device, a directory or a pipe is no database.
void check_db_path(const std::string& path, bool must_exist);

class TuneDb {
 public:
  // Opens (creating) the database; a file that is not a padfold tuning database, or one that
  // cannot be opened or read, throws naming it and saying which. read_only opens need no -shm or
  // -wal beside the file (the last writer to close leaves it in rollback-journal mode).
  explicit TuneDb(const std::string& path, bool read_only = false);
  ~TuneDb();
  TuneDb(const TuneDb&) = delete;
  TuneDb& operator=(const TuneDb&) = delete;

  // Stores one measurement in its own transaction (a record already there is kept).
  void insert(const Measurement& m);
  // Every record of `scope`, in candidate order.
  std::vector<Measurement> records(const TuneScope& scope) const;
  // Every record, ordered by its natural key.
  std::vector<Measurement> all() const;
  // The best record for the signature on the target: accepted "knobs" records with status ok
  // whose confirmation (if any) was not slower than the default, fastest vs_default first, ties
  // broken by candidate key. Without any_machine, only records of this toolchain and machine count;
  // with it, records of any toolchain or machine (this toolchain and machine first).
  std::optional<Measurement> best(const std::string& signature, const std::string& target,
                                  const std::string& toolchain, const std::string& machine,
                                  bool any_machine) const;
  // Every signature with a record measured on `target` on `machine` with a toolchain that begins
  // with `space` (toolchain_space: whatever implementations computed it), with that toolchain,
  // sorted.
  std::vector<std::pair<std::string, std::string>> signatures(const std::string& target,
                                                              const std::string& space,
                                                              const std::string& machine) const;
  // Copies every record of the databases at `paths` in, in one write transaction (INSERT OR
  // IGNORE: a record already here is kept), so a tuner writing this database meanwhile loses
  // nothing. Where several of `paths` carry the same key (each shard times the default), the one
  // with the smallest median wins whatever their order, so merges are deterministic.
  void merge_from(const std::vector<std::string>& paths);

  const std::string& path() const { return path_; }

 private:
  void exec(const std::string& sql) const;
  std::vector<Measurement> query(const std::string& where_order,
                                 const std::vector<std::string>& args) const;
  sqlite3* db_ = nullptr;
  std::string path_;
  bool read_only_ = false;
  mutable int exec_error_ = 0;  // the SQLite error of the last failed exec()
};

}  // namespace padfold
