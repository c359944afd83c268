#include <fmt/format.h>

#include <filesystem>
#include <map>

#include "base/atomic_file.h"
#include "commands.h"
#include "tune/db.h"

namespace {

namespace fs = std::filesystem;

struct DbArgs {
  std::vector<std::string> inputs;
  std::string out, db;
  bool csv = false;
};

// Merges in place, in one SQLite transaction on the output: a tuner writing it at the same time
// (shards sharing one file) waits for the merge or the merge for it, and neither loses a record.
// An output created here and not completed is removed.
void run_merge(const DbArgs& a) {
  padfold::check_db_path(a.out, false);
  const bool existed = fs::exists(a.out);
  std::vector<std::string> others;
  bool out_is_input = false;
  for (const std::string& in : a.inputs) {
    if (existed && fs::equivalent(in, a.out))
      out_is_input = true;
    else
      others.push_back(in);
  }
  if (existed && !out_is_input)
    throw std::runtime_error(a.out + " exists; name it among the inputs to merge into it");
  size_t records = 0;
  try {
    padfold::TuneDb db(a.out);
    db.merge_from(others);
    records = db.all().size();
  } catch (...) {
    std::error_code ec;
    if (!existed)
      for (const char* suffix : {"", "-wal", "-shm", "-journal"}) fs::remove(a.out + suffix, ec);
    throw;
  }
  fmt::print("merged {} database(s) into {}: {} records\n", a.inputs.size(), a.out, records);
}

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string q = "\"";
  for (char c : s) q += c == '"' ? std::string("\"\"") : std::string(1, c);
  return q + "\"";
}

void run_export(const DbArgs& a) {
  if (!a.csv) throw std::runtime_error("db export: give the format: --csv");
  padfold::TuneDb db(a.db, true);
  std::string text =
      "signature,target,toolchain,machine,candidate,kind,knobs,status,reason,layer,median_s,"
      "vs_default,vs_incumbent,noise,accepted\n";
  for (const padfold::Measurement& m : db.all()) {
    for (const std::string* f :
         {&m.scope.signature, &m.scope.target, &m.scope.toolchain, &m.scope.machine, &m.candidate,
          &m.kind, &m.knobs, &m.status, &m.reason, &m.layer})
      text += csv_field(*f) + ",";
    text += fmt::format("{:.9g},{:.6g},{:.6g},{:.6g},{}\n", m.median_s, m.vs_default,
                        m.vs_incumbent, m.noise, m.accepted ? 1 : 0);
  }
  if (a.out.empty()) {
    fmt::print("{}", text);
    return;
  }
  padfold::write_file_replacing(a.out, text);  // a device written in place, a link followed
}

void run_show(const DbArgs& a) {
  padfold::TuneDb db(a.db, true);
  struct Summary {
    std::string layer;
    size_t ok = 0, failed = 0;
    const padfold::Measurement* best = nullptr;
    std::vector<const padfold::Measurement*> baselines;
  };
  const std::vector<padfold::Measurement> all = db.all();
  std::map<std::string, Summary> scopes;  // in key order
  for (const padfold::Measurement& m : all) {
    Summary& s = scopes[m.scope.signature + "\n" + m.scope.target + "\n" + m.scope.toolchain +
                        "\n" + m.scope.machine];
    if (s.layer.empty()) s.layer = m.layer;
    if (m.kind == "baseline") {
      s.baselines.push_back(&m);
      continue;
    }
    (m.status == "ok" ? s.ok : s.failed)++;
    if (m.status == "ok" && m.accepted &&
        (!s.best || m.vs_default > s.best->vs_default ||
         (m.vs_default == s.best->vs_default && m.candidate < s.best->candidate)))
      s.best = &m;
  }
  fmt::print("{}: {} records, {} layer signature/target/toolchain/machine scopes\n", a.db,
             all.size(), scopes.size());
  for (const auto& [key, s] : scopes) {
    const padfold::Measurement& any = s.best ? *s.best : *s.baselines.front();
    fmt::print("\n{} ({} ok, {} failed)\n  signature {}\n  target {}\n  toolchain {}, machine {}\n",
               s.layer, s.ok, s.failed, any.scope.signature, any.scope.target, any.scope.toolchain,
               any.scope.machine);
    if (s.best)
      fmt::print("  best {:.3f}x the default ({:.4f} ms), candidate {}: {}\n", s.best->vs_default,
                 s.best->median_s * 1e3, s.best->candidate, s.best->knobs);
    for (const padfold::Measurement* b : s.baselines)
      fmt::print("  {}: {}\n", b->knobs,
                 b->status == "ok" ? fmt::format("{:.3f}x the default", b->vs_default)
                                   : b->status + ": " + b->reason);
  }
}

}  // namespace

void add_db_command(CLI::App& app) {
  auto args = std::make_shared<DbArgs>();
  CLI::App* db = app.add_subcommand("db", "Inspect and merge tuning databases (padfold tune).");
  db->require_subcommand(1);
  CLI::App* merge =
      db->add_subcommand("merge",
                         "Merge tuning databases (e.g. one per shard) into one.\n"
                         "Example: padfold db merge shard0.sqlite shard1.sqlite -o tune.sqlite");
  merge->add_option("inputs", args->inputs, "databases to merge")
      ->required()
      ->check(CLI::ExistingFile);
  merge->add_option("-o,--out", args->out, "the merged database to write")->required();
  merge->callback([args] { run_merge(*args); });
  CLI::App* show = db->add_subcommand("show",
                                      "Summarise a tuning database: per layer signature "
                                      "and target, the best record and the baselines.");
  show->add_option("db", args->db, "tuning database")->required()->check(CLI::ExistingFile);
  show->callback([args] { run_show(*args); });
  CLI::App* exp = db->add_subcommand("export", "Every measurement as CSV.");
  exp->add_option("db", args->db, "tuning database")->required()->check(CLI::ExistingFile);
  exp->add_flag("--csv", args->csv, "CSV (the only format)");
  exp->add_option("-o,--out", args->out, "file to write (default: standard output)");
  exp->callback([args] { run_export(*args); });
}
