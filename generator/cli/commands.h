// Subcommands of the padfold tool. Each add_*_command registers its options and a callback on the
// app; callbacks report failures by throwing, and main() prints them.
#pragma once

#include <CLI/CLI.hpp>

void add_pads_command(CLI::App& app);
void add_resize_command(CLI::App& app);
void add_check_command(CLI::App& app);
void add_compile_command(CLI::App& app);
void add_knobs_command(CLI::App& app);
void add_run_command(CLI::App& app);
void add_stmt_check_command(CLI::App& app);
void add_import_command(CLI::App& app);
void add_tune_command(CLI::App& app);
void add_db_command(CLI::App& app);
void add_bench_command(CLI::App& app);
void add_port_command(CLI::App& app);

// --input NAME=SIZES, repeatable: the sizes of an ONNX model's dynamic graph inputs (import, port).
void add_input_sizes_option(CLI::App* cmd, std::vector<std::string>& inputs);

// --min-time's check, shared by tune and bench: seconds, a finite number in (0, 60].
CLI::Validator min_time_seconds();
