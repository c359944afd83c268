#include <fmt/format.h>

#include <exception>

#include "api/version.h"
#include "commands.h"

int main(int argc, char** argv) {
  CLI::App app{
      "padfold: generates conv/pool kernels with exact, framework-matching padding.\n"
      "Example: padfold pads --input 7x7 --kernel 4x4 --stride 2 --padding same --compare",
      "padfold"};
  app.set_version_flag("--version", std::string("padfold ") + padfold::version());
  app.require_subcommand(1);
  add_pads_command(app);
  add_resize_command(app);
  add_check_command(app);
  add_compile_command(app);
  add_knobs_command(app);
  add_run_command(app);
  add_stmt_check_command(app);
  add_import_command(app);
  add_tune_command(app);
  add_db_command(app);
  add_bench_command(app);
  add_port_command(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const std::exception& e) {
    fmt::print(stderr, "padfold: error: {}\n", e.what());
    return 1;
  }
  return 0;
}
