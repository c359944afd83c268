#include "tune/db.h"

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "base/text.h"
#include "tune/measure.h"

namespace padfold {

namespace {

namespace fs = std::filesystem;

constexpr const char* kFormat = "padfold-tune-db";
constexpr const char* kFormatVersion = "1";

constexpr const char* kColumns =
    "signature, target, toolchain, machine, candidate, kind, knobs, status, reason, layer, "
    "median_s, vs_default, vs_incumbent, noise, accepted, samples";

constexpr const char* kSchema = R"(
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS measurements (
  signature TEXT NOT NULL, target TEXT NOT NULL, toolchain TEXT NOT NULL, machine TEXT NOT NULL,
  candidate TEXT NOT NULL, kind TEXT NOT NULL, knobs TEXT NOT NULL, status TEXT NOT NULL,
  reason TEXT NOT NULL, layer TEXT NOT NULL, median_s REAL NOT NULL, vs_default REAL NOT NULL,
  vs_incumbent REAL NOT NULL, noise REAL NOT NULL, accepted INTEGER NOT NULL, samples TEXT NOT NULL,
  PRIMARY KEY (signature, target, toolchain, machine, candidate));
)";

std::string fmt_hex(char c) {
  static const char* digits = "0123456789ABCDEF";
  const auto u = static_cast<unsigned char>(c);
  return std::string("%") + digits[u >> 4] + digits[u & 15];
}

// A prepared statement, finalized on scope exit.
struct Stmt {
  sqlite3_stmt* s = nullptr;
  Stmt(sqlite3* db, const std::string& sql, const std::string& path) {
    if (sqlite3_prepare_v2(db, sql.c_str(), -1, &s, nullptr) != SQLITE_OK)
      throw std::runtime_error(path + ": " + sqlite3_errmsg(db));
  }
  ~Stmt() { sqlite3_finalize(s); }
  void text(int i, const std::string& v) {
    sqlite3_bind_text(s, i, v.c_str(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
  }
  std::string col(int i) const {
    const unsigned char* t = sqlite3_column_text(s, i);
    return t ? reinterpret_cast<const char*>(t) : "";
  }
};

// A read-only open as an SQLite URI. A database left in WAL mode needs a -shm file beside it even
// to be read; where none is there and the directory cannot be written (read-only storage, another
// user's directory), it is opened immutable: nothing can be writing it there.
std::string read_only_uri(const std::string& path) {
  std::string uri = path.rfind('/', 0) == 0 ? "file://" : "file:";  // "//x" is no authority
  for (char c : path) {
    if (c == '%' || c == '?' || c == '#')
      uri += fmt_hex(c);
    else
      uri += c;
  }
  uri += "?mode=ro";
  char header[20] = {};
  std::ifstream f(path, std::ios::binary);
  const bool wal = f.read(header, sizeof header) && header[18] == 2 && header[19] == 2;
  const std::string dir = fs::path(path).parent_path().empty()
                              ? std::string(".")
                              : fs::path(path).parent_path().string();
  // Not with a -wal holding records: immutable would ignore them; the open then fails, named.
  std::error_code ec;
  const bool wal_empty = !fs::exists(path + "-wal") || fs::file_size(path + "-wal", ec) == 0;
  if (wal && wal_empty && !fs::exists(path + "-shm") && ::access(dir.c_str(), W_OK) != 0)
    uri += "&immutable=1";
  return uri;
}

}  // namespace

void check_db_path(const std::string& path, bool must_exist) {
  // SQLite would put its journal beside a device, or fail on a directory: refused up front.
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode))
    throw std::runtime_error(path + ": not a regular file; a tuning database is a regular file" +
                             std::string(must_exist ? "" : " (or a path that does not exist yet)"));
}

TuneDb::TuneDb(const std::string& path, bool read_only) : path_(path), read_only_(read_only) {
  check_db_path(path, read_only);
  const int flags = read_only ? SQLITE_OPEN_READONLY | SQLITE_OPEN_URI
                              : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE;
  const std::string name = read_only ? read_only_uri(path) : path;
  if (sqlite3_open_v2(name.c_str(), &db_, flags, nullptr) != SQLITE_OK) {
    const std::string msg = db_ ? sqlite3_errmsg(db_) : "out of memory";
    sqlite3_close(db_);
    throw std::runtime_error(path + ": cannot open the tuning database: " + msg);
  }
  sqlite3_busy_timeout(db_, 60000);  // shards on one machine may share a file
  try {
    // A file that is not SQLite fails here, before anything is written to it.
    std::string tables;
    {
      Stmt s(db_, "SELECT group_concat(name) FROM sqlite_master WHERE type='table'", path_);
      if (sqlite3_step(s.s) == SQLITE_ROW) tables = s.col(0);
    }
    if (!tables.empty()) {
      // Format and version are read before anything is written (a pragma included): a file of
      // another version is refused exactly as it was.
      Stmt s(db_, "SELECT value FROM meta WHERE key='format'", path_);
      if (sqlite3_step(s.s) != SQLITE_ROW || s.col(0) != kFormat)
        throw std::runtime_error("has no padfold meta table");
      Stmt v(db_, "SELECT value FROM meta WHERE key='format_version'", path_);
      if (sqlite3_step(v.s) == SQLITE_ROW && v.col(0) != kFormatVersion)
        throw std::runtime_error("has format version '" + v.col(0) + "', expected " +
                                 kFormatVersion);
    } else if (read_only) {
      throw std::runtime_error("is empty");
    }
    if (!read_only) {
      exec("PRAGMA journal_mode=WAL");
      // IMMEDIATE: a deferred transaction that reads and then writes gets SQLITE_BUSY at once,
      // without waiting, when another connection (a shard, a merge) wrote in between.
      exec(std::string("BEGIN IMMEDIATE;") + kSchema +
           "INSERT OR IGNORE INTO meta VALUES ('format', '" + kFormat + "'), ('format_version', '" +
           kFormatVersion + "'); COMMIT;");
    }
    Stmt v(db_, "SELECT value FROM meta WHERE key='format_version'", path_);
    if (sqlite3_step(v.s) != SQLITE_ROW || v.col(0) != kFormatVersion)
      throw std::runtime_error("has format version '" + v.col(0) + "', expected " + kFormatVersion);
  } catch (const std::exception& e) {
    // A file SQLite could not open or read (permissions, I/O, a full disk) is not called "not a
    // padfold tuning database": that is for files that are not one.
    const int code = (exec_error_ ? exec_error_ : sqlite3_extended_errcode(db_)) & 0xff;
    const bool io = code == SQLITE_CANTOPEN || code == SQLITE_IOERR || code == SQLITE_PERM ||
                    code == SQLITE_READONLY || code == SQLITE_FULL || code == SQLITE_BUSY ||
                    code == SQLITE_LOCKED || code == SQLITE_NOMEM || code == SQLITE_AUTH;
    const std::string msg = sqlite3_errmsg(db_);
    sqlite3_close(db_);
    db_ = nullptr;
    if (io)
      throw std::runtime_error(path + ": cannot " + (read_only ? "read" : "open") +
                               " the tuning database: " + msg + "; the file was left as it was");
    throw std::runtime_error(path + ": not a padfold tuning database (" + e.what() +
                             "); the file was left as it was");
  }
}

TuneDb::~TuneDb() {
  // The last writer to close leaves the file in rollback-journal mode, so that readers need no
  // -shm/-wal beside it (read-only storage, a directory they cannot write). Another connection
  // still open makes this fail at once (no busy wait); it is tried again when that one closes.
  if (db_ && !read_only_) {
    sqlite3_busy_timeout(db_, 0);
    sqlite3_exec(db_, "PRAGMA journal_mode=DELETE", nullptr, nullptr, nullptr);
  }
  sqlite3_close(db_);
}

void TuneDb::exec(const std::string& sql) const {
  char* err = nullptr;
  if (sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &err) != SQLITE_OK) {
    const std::string msg = err ? err : "unknown error";
    sqlite3_free(err);
    exec_error_ = sqlite3_extended_errcode(db_);  // before the rollback resets it
    sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
    throw std::runtime_error(path_ + ": " + msg);
  }
}

void TuneDb::insert(const Measurement& m) {
  Stmt s(db_,
         std::string("INSERT OR IGNORE INTO measurements (") + kColumns +
             ") VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
         path_);
  const std::string texts[] = {
      m.scope.signature, m.scope.target, m.scope.toolchain, m.scope.machine, m.candidate, m.kind,
      m.knobs,           m.status,       m.reason,          m.layer};
  for (int i = 0; i < 10; ++i) s.text(i + 1, texts[i]);
  sqlite3_bind_double(s.s, 11, m.median_s);
  sqlite3_bind_double(s.s, 12, m.vs_default);
  sqlite3_bind_double(s.s, 13, m.vs_incumbent);
  sqlite3_bind_double(s.s, 14, m.noise);
  sqlite3_bind_int(s.s, 15, m.accepted ? 1 : 0);
  s.text(16, m.samples);
  if (sqlite3_step(s.s) != SQLITE_DONE)
    throw std::runtime_error(path_ + ": cannot store a measurement: " + sqlite3_errmsg(db_));
}

std::vector<Measurement> TuneDb::query(const std::string& where_order,
                                       const std::vector<std::string>& args) const {
  Stmt s(db_, std::string("SELECT ") + kColumns + " FROM measurements " + where_order, path_);
  for (size_t i = 0; i < args.size(); ++i) s.text(static_cast<int>(i) + 1, args[i]);
  // Every text must be UTF-8: compile copies the candidate, machine and toolchain into the
  // manifest (JSON, whose writer throws on anything else). padfold writes only UTF-8; a damaged
  // record is named here, where it is read.
  const auto text = [&](int i) {
    std::string t = s.col(i);
    if (!valid_utf8(t))
      throw std::runtime_error(path_ + ": a damaged record: its " + sqlite3_column_name(s.s, i) +
                               " is not UTF-8 text");
    return t;
  };
  std::vector<Measurement> out;
  int rc;
  while ((rc = sqlite3_step(s.s)) == SQLITE_ROW) {
    Measurement m;
    m.scope = {text(0), text(1), text(2), text(3)};
    m.candidate = text(4);
    m.kind = text(5);
    m.knobs = text(6);
    m.status = text(7);
    m.reason = text(8);
    m.layer = text(9);
    m.median_s = sqlite3_column_double(s.s, 10);
    m.vs_default = sqlite3_column_double(s.s, 11);
    m.vs_incumbent = sqlite3_column_double(s.s, 12);
    m.noise = sqlite3_column_double(s.s, 13);
    m.accepted = sqlite3_column_int(s.s, 14) != 0;
    m.samples = text(15);
    out.push_back(std::move(m));
  }
  if (rc != SQLITE_DONE) throw std::runtime_error(path_ + ": " + sqlite3_errmsg(db_));
  return out;
}

std::vector<Measurement> TuneDb::records(const TuneScope& scope) const {
  return query("WHERE signature=? AND target=? AND toolchain=? AND machine=? ORDER BY candidate",
               {scope.signature, scope.target, scope.toolchain, scope.machine});
}

std::vector<Measurement> TuneDb::all() const {
  return query("ORDER BY signature, target, toolchain, machine, candidate", {});
}

std::optional<Measurement> TuneDb::best(const std::string& signature, const std::string& target,
                                        const std::string& toolchain, const std::string& machine,
                                        bool any_machine) const {
  // A candidate whose confirmation (re-timed beside the default after the search) came out slower
  // than the default does not count.
  const std::string base =
      "AS m WHERE signature=? AND target=? AND kind='knobs' AND status='ok' AND accepted=1 AND NOT "
      "EXISTS (SELECT 1 FROM measurements AS c WHERE c.signature=m.signature AND "
      "c.target=m.target AND c.toolchain=m.toolchain AND c.machine=m.machine AND "
      "c.candidate='confirm:'||m.candidate AND c.vs_default<1) ";
  std::vector<Measurement> found;
  if (any_machine)
    found = query(base +
                      "ORDER BY (toolchain=? AND machine=?) DESC, vs_default DESC, candidate, "
                      "toolchain, machine LIMIT 1",
                  {signature, target, toolchain, machine});
  else
    found =
        query(base + "AND toolchain=? AND machine=? ORDER BY vs_default DESC, candidate LIMIT 1",
              {signature, target, toolchain, machine});
  if (found.empty()) return std::nullopt;
  return found.front();
}

std::vector<std::pair<std::string, std::string>> TuneDb::signatures(
    const std::string& target, const std::string& space, const std::string& machine) const {
  Stmt s(db_,
         "SELECT DISTINCT signature, toolchain FROM measurements WHERE target=? AND "
         "substr(toolchain, 1, ?)=? AND machine=? ORDER BY signature, toolchain",
         path_);
  s.text(1, target);
  sqlite3_bind_int64(s.s, 2, static_cast<sqlite3_int64>(space.size()));
  s.text(3, space);
  s.text(4, machine);
  std::vector<std::pair<std::string, std::string>> out;
  int rc;
  while ((rc = sqlite3_step(s.s)) == SQLITE_ROW) out.emplace_back(s.col(0), s.col(1));
  if (rc != SQLITE_DONE) throw std::runtime_error(path_ + ": " + sqlite3_errmsg(db_));
  return out;
}

void TuneDb::merge_from(const std::vector<std::string>& paths) {
  for (const std::string& p : paths) TuneDb check(p, true);  // names a file that is no database
  exec(std::string("CREATE TEMP TABLE IF NOT EXISTS staging AS SELECT ") + kColumns +
       " FROM measurements WHERE 0; DELETE FROM temp.staging;");
  for (const std::string& p : paths) {
    Stmt attach(db_, "ATTACH DATABASE ? AS other", path_);
    attach.text(1, p);
    if (sqlite3_step(attach.s) != SQLITE_DONE)
      throw std::runtime_error(p + ": cannot attach: " + sqlite3_errmsg(db_));
    exec(std::string("INSERT INTO temp.staging SELECT ") + kColumns +
         " FROM other.measurements; DETACH DATABASE other;");
  }
  exec(std::string("BEGIN IMMEDIATE; INSERT OR IGNORE INTO measurements (") + kColumns +
       ") SELECT " + kColumns +
       " FROM temp.staging ORDER BY signature, target, toolchain, machine, candidate, median_s, "
       "samples; COMMIT; DELETE FROM temp.staging;");
}

void Measurement::take(const MeasureResult& r) {
  status = r.status;
  reason = r.reason;
  median_s = r.median_s;
  vs_default = r.vs_default;
  vs_incumbent = r.vs_incumbent;
  noise = r.noise;
  samples = nlohmann::json(r.samples).dump();
}

}  // namespace padfold
