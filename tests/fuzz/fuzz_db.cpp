// libFuzzer: the tuning database as `padfold compile --db FILE [--db-any-machine]` reads it
// (tuned_schedules_from), and as `padfold db export` lists it (TuneDb::all). The input is the
// database file's bytes, written to a private directory as the one file read; the layers of
// fuzz_db_model.h are then looked up, on this machine only and on any.
//
// A std::runtime_error naming the file is the documented failure. Anything else is a finding: a
// crash, a sanitizer report, a hang, another exception escaping, a schedule whose knobs are out of
// their declared ranges (schedules/knobs.h) or that the layer's schedule refuses, a provenance the
// manifest cannot write, or a -journal left beside the database.
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <typeinfo>

#include "compile/lower.h"
#include "fuzz_db_model.h"
#include "schedules/schedule.h"
#include "tune/db.h"
#include "tune/db_schedules.h"

namespace {

namespace fs = std::filesystem;

[[noreturn]] void finding(const std::string& what) {
  std::fprintf(stderr, "fuzz_db finding: %s\n", what.c_str());
  std::abort();
}

std::string dir, path;  // the private directory and the database file in it
padfold::Model model;
Halide::Target target;

void remove_dir() {
  std::error_code ec;
  fs::remove_all(dir, ec);
}

void check_in_range(const padfold::ScheduleParams& p, const std::string& what) {
  for (const padfold::Knob& k : padfold::knobs()) {
    const int64_t v = k.get(p);
    if (v < k.min || v > k.max)
      finding(what + ": knob " + k.name + " = " + std::to_string(v) + " is outside " + k.range());
  }
}

void check_schedule(const padfold::Layer& L, const padfold::TunedSchedule& s) {
  padfold::ScheduleParams requested;
  try {
    requested = padfold::requested_schedule(L, target, s.knobs);
  } catch (const std::exception& e) {
    finding("layer '" + L.name + "': the returned knobs are refused: " + e.what());
  }
  check_in_range(requested, "layer '" + L.name + "' (requested)");
  check_in_range(padfold::resolve_schedule(L, target, requested), "layer '" + L.name + "'");
  try {
    (void)s.provenance.dump(2);  // as the manifest writes it
  } catch (const std::exception& e) {
    finding("layer '" + L.name + "': the provenance cannot be written: " + e.what());
  }
}

// FUZZ_DB_VERBOSE=1: print each lookup's outcome (to see what the seeds reach).
const bool verbose = std::getenv("FUZZ_DB_VERBOSE") != nullptr;

// Runs `body`; the error it may throw must be a std::runtime_error naming the file.
template <typename F>
void expect_error(F body) {
  try {
    body();
  } catch (const std::exception& e) {
    if (typeid(e) != typeid(std::runtime_error))
      finding(std::string(typeid(e).name()) + " escaped: " + e.what());
    if (std::string(e.what()).rfind(path + ": ", 0) != 0)
      finding(std::string("the error does not name the file: ") + e.what());
    if (verbose) std::fprintf(stderr, "error: %s\n", e.what());
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  model = padfold::fuzz_db::setup();
  target = padfold::fuzz_db::target();
  char tmpl[] = "/tmp/fuzz_db.XXXXXX";
  if (!::mkdtemp(tmpl)) return 1;
  dir = tmpl;
  path = dir + "/tune.sqlite";
  std::atexit(remove_dir);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  {
    std::ofstream f(path, std::ios::binary | std::ios::trunc);
    f.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
    if (!f) finding("cannot write " + path);
  }
  // Each lookup on its own (compile stops at the first error), then the listing.
  for (const bool any_machine : {false, true}) {
    std::function<std::optional<padfold::TunedSchedule>(const padfold::Layer&,
                                                        const Halide::Target&)>
        lookup;
    expect_error([&] { lookup = padfold::tuned_schedules_from(path, any_machine); });
    if (!lookup) continue;
    for (const padfold::Layer& L : model.layers)
      expect_error([&] {
        const auto s = lookup(L, target);
        if (s) check_schedule(L, *s);
        if (verbose)
          std::fprintf(stderr, "%s%s: %s\n", L.name.c_str(), any_machine ? " (any machine)" : "",
                       s ? s->provenance.dump().c_str() : "none");
      });
  }
  expect_error([] { (void)padfold::TuneDb(path, true).all(); });
  // A file in WAL mode (header bytes 18, 19) gets SQLite's -wal and -shm beside it in a directory
  // that can be written: removed, so that each input is read alone.
  if (fs::exists(path + "-journal")) finding("a read-only open left a -journal beside the file");
  fs::remove(path + "-wal");
  fs::remove(path + "-shm");
  return 0;
}
