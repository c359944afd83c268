// The one check that "the interior runs without bounds checks": reads the lowered statement
// (`padfold compile --emit-stmt`, <target>/<layer>.stmt) of a kernel and tells apart the
// innermost loops of the steady state from those of the border tiles.
//
// Halide's loop partitioning splits a loop over a padded axis into a prologue, a steady state and
// an epilogue: an if/else chain on the parallel row variable, or consecutive loops (or a peeled
// tile) over the output's columns. With every shape fixed, the check simulates the loop nest
// (lets, branch conditions and extents evaluated row by row) to weigh each alternative by the
// iterations it runs; at every split, the alternative that runs the most is the steady state.
// A boundary test is a select, likely, if, min or max inside an innermost loop.
#pragma once

#include <string>
#include <vector>

namespace padfold {

struct StmtLoop {
  int line = 0;           // 1-based line of the loop's header
  std::string header;     // "for (v, min, extent) {"
  bool steady = false;    // part of the steady state
  std::string test;       // the first boundary test in its body, "" if none
  double iterations = 0;  // how often its body runs, summed over the parallel rows
};

struct StmtReport {
  std::vector<StmtLoop> innermost;
  int steady_loops() const;
  int steady_loops_with_tests() const;
  int border_loops() const;
  int border_loops_with_tests() const;
  bool interior_is_clean() const { return steady_loops() > 0 && steady_loops_with_tests() == 0; }
};

StmtReport check_stmt(const std::string& stmt_text);

}  // namespace padfold
