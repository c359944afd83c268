// The one check that "the interior runs without bounds checks": reads the lowered statement
// (`padfold compile --emit-stmt`, <target>/<layer>.stmt) of a kernel and tells apart the
// innermost loops of the steady state from those of the border tiles.
//
// Halide's loop partitioning splits a loop over a padded axis into a prologue, a steady state and
// an epilogue: an if/else chain on the parallel row variable, or consecutive loops (or a peeled
// tile) over the output's columns. With every shape fixed, the check simulates the loop nest
// (lets, branch conditions and extents evaluated row by row) to weigh each alternative by the
// iterations it runs; at every split, the alternative that runs the most is the steady state.
// A boundary test is a select, likely, if, min or max inside an innermost loop; a min or max
// against a float constant is an activation's clamp (ReLU, ReLU6), not a test.
//
// It also finds the stages that transform a kernel's weights on each call, which a bundle whose
// weights are in files should have none of (docs/prepared-weights.md).
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

// The stages of the statement that put the kernel's weights in another form on each call
// (kWinogradWeightRowsStage and the others, algorithm/weight_form.h), each Func named once, in
// the statement's order; none where the kernel reads its weights as they are, prepared by the
// compile or needing no other form.
std::vector<std::string> per_call_weight_stages(const std::string& stmt_text);

}  // namespace padfold
