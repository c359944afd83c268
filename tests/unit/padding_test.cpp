// Tests of generator/padding.{h,cpp}.
//
// Every convention is re-derived here by brute force from what it means (windows that must fit,
// output sizes that must match, crops of a 'full' correlation, ...), never by restating the
// closed-form formulas of padding.cpp, and compared with resolve_forward / resolve_transposed over
// random shapes. The tables of ../shared/docs/padding-conventions.md are checked row by row.
#include "padding/padding.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "reference/reference.h"

namespace padfold {
namespace {

// ---------------------------------------------------------------------------------------------
// Brute-force definitions, one spatial axis.

struct Pads {
  int64_t before = 0, after = 0;
};

// Span of a dilated kernel: one past the offset of its last tap.
int64_t span(int64_t k, int64_t d) {
  int64_t last = 0;
  for (int64_t t = 0; t < k; ++t) last = t * d;
  return last + 1;
}

// Windows of width `w` starting at 0, s, 2s, ... that lie wholly inside [0, len).
int64_t fitting_windows(int64_t len, int64_t w, int64_t s) {
  int64_t n = 0;
  for (int64_t p = 0; p + w <= len; p += s) ++n;
  return n;
}

// Positions 0, s, 2s, ... inside [0, n).
int64_t positions_in(int64_t n, int64_t s) {
  int64_t c = 0;
  for (int64_t p = 0; p < n; p += s) ++c;
  return c;
}

// TF/Keras SAME, ONNX SAME_UPPER/SAME_LOWER: one output per stride position inside the input;
// the least total padding that lets all those windows fit; the odd pixel after (upper) or before.
Pads brute_same(int64_t in, int64_t ke, int64_t s, bool lower) {
  const int64_t out = positions_in(in, s);
  int64_t total = 0;
  while (fitting_windows(in + total, ke, s) < out) ++total;
  Pads p;
  p.before = lower ? total - total / 2 : total / 2;
  p.after = total - p.before;
  return p;
}

// PyTorch padding='same' (stride 1): the least total padding whose output is as long as the
// input, the extra pixel at the end.
Pads brute_torch_same(int64_t in, int64_t ke) {
  int64_t total = 0;
  while (fitting_windows(in + total, ke, 1) != in) ++total;
  return {total / 2, total - total / 2};
}

// scipy.signal.correlate(x, k, mode='same'): the 'full' correlation has one output per shift at
// which the kernel overlaps the input; 'same' keeps in-many of them, centred as scipy's
// _centered does (start = (full_len - in_len) // 2). Output j of 'full' is the window whose first
// tap is at input index j - (ke - 1).
Pads brute_scipy_same(int64_t in, int64_t ke) {
  int64_t full_len = 0;
  for (int64_t first = -(ke - 1); first <= in - 1; ++first) ++full_len;  // overlapping shifts
  const int64_t start = (full_len - in) / 2;
  const int64_t first_tap_of_output0 = start - (ke - 1);
  const int64_t last_tap_of_last_output = (start + in - 1 - (ke - 1)) + ke - 1;
  return {-first_tap_of_output0, last_tap_of_last_output - (in - 1)};
}

// Keras causal: output t sees inputs up to t*s and nothing later; all padding before.
Pads brute_causal(int64_t ke) {
  int64_t before = 0;
  while ((ke - 1) - before > 0) ++before;  // last tap of window 0 must land on input index 0
  return {before, 0};
}

// 'full': every window that overlaps the input at all.
Pads brute_full(int64_t ke) {
  int64_t before = 0;
  while (-(before + 1) + ke - 1 >= 0) ++before;  // a window starting one further left overlaps
  return {before, before};
}

// Output count for given pads. Floor mode: windows that fit. Ceil mode: also one partial window
// if the full ones leave trailing elements uncovered, then PyTorch drops the last window if it
// starts at or beyond in + pad_before (inside the right padding). nullopt: no window fits.
std::optional<int64_t> brute_output(int64_t in, Pads p, int64_t ke, int64_t s, bool ceil_mode) {
  const int64_t len = in + p.before + p.after;
  std::vector<int64_t> starts;
  for (int64_t q = 0; q + ke <= len; q += s) starts.push_back(q);
  if (starts.empty()) return std::nullopt;
  if (ceil_mode) {
    if (starts.back() + ke < len) starts.push_back(starts.back() + s);
    if (starts.back() >= in + p.before) starts.pop_back();
  }
  return static_cast<int64_t>(starts.size());
}

// Pads a convention gives for one axis; nullopt where the convention is undefined (stride > 1 for
// torch_same and scipy_same).
std::optional<Pads> brute_pads(PadMode mode, const AxisParams& a, Pads explicit_pads) {
  const int64_t ke = span(a.kernel, a.dilation);
  switch (mode) {
    case PadMode::Explicit:
      return explicit_pads;
    case PadMode::Valid:
      return Pads{};
    case PadMode::SameUpper:
      return brute_same(a.input, ke, a.stride, false);
    case PadMode::SameLower:
      return brute_same(a.input, ke, a.stride, true);
    case PadMode::TorchSame:
      if (a.stride != 1) return std::nullopt;
      return brute_torch_same(a.input, ke);
    case PadMode::ScipySame:
      if (a.stride != 1) return std::nullopt;
      return brute_scipy_same(a.input, ke);
    case PadMode::Causal:
      return brute_causal(ke);
    case PadMode::Full:
      return brute_full(ke);
  }
  return std::nullopt;
}

// "The pads would change with the input size": compare the pads at every input size 1..64.
bool brute_input_dependent(PadMode mode, AxisParams a, Pads explicit_pads) {
  std::optional<Pads> first;
  for (int64_t in = 1; in <= 64; ++in) {
    a.input = in;
    const auto p = brute_pads(mode, a, explicit_pads);
    if (!p) return false;
    if (!first) first = p;
    if (p->before != first->before || p->after != first->after) return true;
  }
  return false;
}

struct Expected {
  bool error = false;
  std::vector<AxisPads> axes;
  bool asymmetric = false, input_dependent = false;
};

Expected brute_forward(PadMode mode, const std::vector<AxisParams>& axes,
                       const std::vector<Pads>& explicit_pads, bool ceil_mode) {
  Expected e;
  for (size_t i = 0; i < axes.size(); ++i) {
    const AxisParams& a = axes[i];
    const auto p = brute_pads(mode, a, explicit_pads.empty() ? Pads{} : explicit_pads[i]);
    if (!p || p->before <= -a.input || p->after <= -a.input) return {true, {}, false, false};
    const auto out = brute_output(a.input, *p, span(a.kernel, a.dilation), a.stride, ceil_mode);
    if (!out) return {true, {}, false, false};
    AxisPads ap;
    ap.before = p->before;
    ap.after = p->after;
    ap.output = *out;
    e.axes.push_back(ap);
    e.asymmetric = e.asymmetric || p->before != p->after;
    e.input_dependent =
        e.input_dependent ||
        brute_input_dependent(mode, a, explicit_pads.empty() ? Pads{} : explicit_pads[i]);
  }
  return e;
}

PaddingSpec spec_for(PadMode mode, const std::vector<Pads>& explicit_pads) {
  PaddingSpec s;
  s.mode = mode;
  s.written = to_string(mode);
  for (const Pads& p : explicit_pads) {
    s.before.push_back(p.before);
    s.after.push_back(p.after);
  }
  return s;
}

std::string describe(PadMode mode, const std::vector<AxisParams>& axes,
                     const std::vector<Pads>& pads, bool ceil_mode) {
  std::string s = to_string(mode) + (ceil_mode ? " ceil" : "") + ":";
  for (size_t i = 0; i < axes.size(); ++i) {
    const AxisParams& a = axes[i];
    s += " [in=" + std::to_string(a.input) + " k=" + std::to_string(a.kernel) +
         " s=" + std::to_string(a.stride) + " d=" + std::to_string(a.dilation);
    if (!pads.empty())
      s += " pads=" + std::to_string(pads[i].before) + "," + std::to_string(pads[i].after);
    s += "]";
  }
  return s;
}

// ---------------------------------------------------------------------------------------------
// Brute force itself against hand-checked values.

TEST(BruteForce, AgreesWithHandDerivedCases) {
  EXPECT_EQ(span(3, 2), 5);
  EXPECT_EQ(span(1, 7), 1);
  // TF SAME, in=8 k=3 s=2: windows at 0,2,4,6 need 9 elements: one pad, after.
  const Pads p = brute_same(8, 3, 2, false);
  EXPECT_EQ(p.before, 0);
  EXPECT_EQ(p.after, 1);
  const Pads q = brute_scipy_same(6, 4);
  EXPECT_EQ(q.before, 2);
  EXPECT_EQ(q.after, 1);
  EXPECT_EQ(brute_output(4, {0, 0}, 3, 2, true), 2);
  EXPECT_EQ(brute_output(5, {0, 0}, 2, 2, true), 3);   // partial window at 4
  EXPECT_EQ(brute_output(5, {0, 0}, 2, 2, false), 2);  // floor drops it
  EXPECT_EQ(brute_output(5, {1, 1}, 2, 3, true), 2);   // partial window at 6 starts at in+pb
  EXPECT_EQ(brute_output(2, {0, 0}, 3, 1, false), std::nullopt);
}

// ---------------------------------------------------------------------------------------------
// Random comparison with resolve_forward.

struct RandomCase {
  std::vector<AxisParams> axes;
  std::vector<Pads> pads;
};

RandomCase random_case(std::mt19937& rng, bool with_pads) {
  auto uni = [&](int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
  };
  RandomCase c;
  const int64_t dims = uni(1, 3);
  for (int64_t i = 0; i < dims; ++i) {
    AxisParams a;
    a.input = uni(1, 40);
    a.kernel = uni(1, 9);
    a.stride = uni(1, 5);
    a.dilation = uni(1, 3);
    c.axes.push_back(a);
    if (with_pads) {  // a third of the pads negative: crops, some of the whole input
      const int64_t ke = span(a.kernel, a.dilation);
      auto pad = [&] { return uni(0, 2) == 0 ? -uni(1, a.input) : uni(0, ke); };
      c.pads.push_back({pad(), pad()});
    }
  }
  return c;
}

class ForwardRandom : public ::testing::TestWithParam<std::tuple<PadMode, bool>> {};

TEST_P(ForwardRandom, MatchesBruteForce) {
  const PadMode mode = std::get<0>(GetParam());
  const bool ceil_mode = std::get<1>(GetParam());
  std::mt19937 rng(1234u + static_cast<unsigned>(mode) * 17u + (ceil_mode ? 1u : 0u));
  int errors = 0, ok = 0, mismatches = 0;
  for (int iter = 0; iter < 3000 && mismatches < 10; ++iter) {
    // torch_same/scipy_same: also draw stride-1 cases often enough to exercise them.
    RandomCase c = random_case(rng, mode == PadMode::Explicit);
    if ((mode == PadMode::TorchSame || mode == PadMode::ScipySame) && iter % 2 == 0)
      for (AxisParams& a : c.axes) a.stride = 1;
    const Expected e = brute_forward(mode, c.axes, c.pads, ceil_mode);
    const std::string what = describe(mode, c.axes, c.pads, ceil_mode);
    const PaddingSpec spec = spec_for(mode, c.pads);
    if (e.error) {
      ++errors;
      EXPECT_THROW(resolve_forward(spec, c.axes, ceil_mode), PaddingError) << what;
      continue;
    }
    ++ok;
    Resolved r;
    try {
      r = resolve_forward(spec, c.axes, ceil_mode);
    } catch (const PaddingError& err) {
      ADD_FAILURE() << what << ": unexpected error " << err.what();
      ++mismatches;
      continue;
    }
    ASSERT_EQ(r.axes.size(), c.axes.size()) << what;
    bool same = true;
    for (size_t i = 0; i < c.axes.size(); ++i) {
      EXPECT_EQ(r.axes[i].before, e.axes[i].before) << what << " axis " << i;
      EXPECT_EQ(r.axes[i].after, e.axes[i].after) << what << " axis " << i;
      EXPECT_EQ(r.axes[i].output, e.axes[i].output) << what << " axis " << i;
      same = same && r.axes[i].before == e.axes[i].before && r.axes[i].after == e.axes[i].after &&
             r.axes[i].output == e.axes[i].output;
    }
    EXPECT_EQ(r.asymmetric, e.asymmetric) << what;
    // padfold flags every strided SAME layer as input dependent; by the definition only kernels
    // wider than one pixel are (a 1-wide kernel never needs SAME padding). Checked separately in
    // InputDependent.OneWideStridedSameIsNotInputDependent.
    const bool one_wide_strided_same =
        (mode == PadMode::SameUpper || mode == PadMode::SameLower) &&
        std::all_of(c.axes.begin(), c.axes.end(),
                    [](const AxisParams& a) { return a.kernel == 1 || a.stride == 1; }) &&
        std::any_of(c.axes.begin(), c.axes.end(),
                    [](const AxisParams& a) { return a.kernel == 1 && a.stride != 1; });
    if (!one_wide_strided_same) {
      EXPECT_EQ(r.input_dependent, e.input_dependent) << what;
    }
    if (!same) ++mismatches;
  }
  // Both branches must have been exercised where the convention allows it.
  EXPECT_GT(ok, 100);
  if (mode == PadMode::Valid || mode == PadMode::Explicit || mode == PadMode::TorchSame ||
      mode == PadMode::ScipySame) {
    EXPECT_GT(errors, 10);
  }
}

std::string mode_param_name(const ::testing::TestParamInfo<std::tuple<PadMode, bool>>& info) {
  return to_string(std::get<0>(info.param)) + (std::get<1>(info.param) ? "_ceil" : "_floor");
}

INSTANTIATE_TEST_SUITE_P(
    AllModes, ForwardRandom,
    ::testing::Combine(::testing::Values(PadMode::Explicit, PadMode::Valid, PadMode::SameUpper,
                                         PadMode::SameLower, PadMode::TorchSame, PadMode::ScipySame,
                                         PadMode::Causal, PadMode::Full),
                       ::testing::Bool()),
    mode_param_name);

// ---------------------------------------------------------------------------------------------
// The forward table of padding-conventions.md, row by row.

struct Cell {
  int64_t before, after, out;  // out < 0: n/a (the convention needs stride 1)
};
constexpr Cell NA{-1, -1, -1};

struct ForwardRow {
  int64_t in, k, s, d;
  Cell same_upper, same_lower, torch, scipy, correlate2d, causal, naive;
};

const ForwardRow kForwardTable[] = {
    {5, 3, 1, 1, {1, 1, 5}, {1, 1, 5}, {1, 1, 5}, {1, 1, 5}, {1, 1, 5}, {2, 0, 5}, {1, 1, 5}},
    {5, 2, 1, 1, {0, 1, 5}, {1, 0, 5}, {0, 1, 5}, {1, 0, 5}, {0, 1, 5}, {1, 0, 5}, {1, 1, 6}},
    {6, 4, 1, 1, {1, 2, 6}, {2, 1, 6}, {1, 2, 6}, {2, 1, 6}, {1, 2, 6}, {3, 0, 6}, {2, 2, 7}},
    {1, 4, 1, 1, {1, 2, 1}, {2, 1, 1}, {1, 2, 1}, {2, 1, 1}, {1, 2, 1}, {3, 0, 1}, {2, 2, 2}},
    {3, 7, 1, 1, {3, 3, 3}, {3, 3, 3}, {3, 3, 3}, {3, 3, 3}, {3, 3, 3}, {6, 0, 3}, {3, 3, 3}},
    {6, 3, 1, 2, {2, 2, 6}, {2, 2, 6}, {2, 2, 6}, {2, 2, 6}, {2, 2, 6}, {4, 0, 6}, {1, 1, 4}},
    {6, 2, 1, 3, {1, 2, 6}, {2, 1, 6}, {1, 2, 6}, {2, 1, 6}, {1, 2, 6}, {3, 0, 6}, {1, 1, 5}},
    {4, 2, 2, 1, {0, 0, 2}, {0, 0, 2}, NA, NA, NA, {1, 0, 2}, {1, 1, 3}},
    {7, 3, 2, 1, {1, 1, 4}, {1, 1, 4}, NA, NA, NA, {2, 0, 4}, {1, 1, 4}},
    {8, 3, 2, 1, {0, 1, 4}, {1, 0, 4}, NA, NA, NA, {2, 0, 4}, {1, 1, 4}},
    {7, 4, 2, 1, {1, 2, 4}, {2, 1, 4}, NA, NA, NA, {3, 0, 4}, {2, 2, 4}},
    {9, 4, 3, 1, {0, 1, 3}, {1, 0, 3}, NA, NA, NA, {3, 0, 3}, {2, 2, 4}},
    {10, 5, 4, 1, {1, 2, 3}, {2, 1, 3}, NA, NA, NA, {4, 0, 3}, {2, 2, 3}},
    {5, 1, 3, 1, {0, 0, 2}, {0, 0, 2}, NA, NA, NA, {0, 0, 2}, {0, 0, 2}},
    {7, 2, 3, 2, {1, 1, 3}, {1, 1, 3}, NA, NA, NA, {2, 0, 3}, {1, 1, 3}},
};

class ForwardTable : public ::testing::TestWithParam<ForwardRow> {};

void check_cell(const PaddingSpec& spec, const AxisParams& a, const Cell& c,
                const std::string& column) {
  const std::string what = column + " in=" + std::to_string(a.input) +
                           " k=" + std::to_string(a.kernel) + " s=" + std::to_string(a.stride) +
                           " d=" + std::to_string(a.dilation);
  if (c.out < 0) {
    EXPECT_THROW(resolve_forward(spec, {a}), PaddingError) << what;
    return;
  }
  const Resolved r = resolve_forward(spec, {a});
  ASSERT_EQ(r.axes.size(), 1u);
  EXPECT_EQ(r.axes[0].before, c.before) << what;
  EXPECT_EQ(r.axes[0].after, c.after) << what;
  EXPECT_EQ(r.axes[0].output, c.out) << what;
}

void check_brute(PadMode mode, const AxisParams& a, const Cell& c, const std::string& column) {
  const auto p = brute_pads(mode, a, {});
  if (c.out < 0) {
    EXPECT_FALSE(p.has_value()) << column;
    return;
  }
  ASSERT_TRUE(p.has_value()) << column;
  EXPECT_EQ(p->before, c.before) << "brute force, " << column;
  EXPECT_EQ(p->after, c.after) << "brute force, " << column;
  EXPECT_EQ(brute_output(a.input, *p, span(a.kernel, a.dilation), a.stride, false), c.out)
      << "brute force, " << column;
}

TEST_P(ForwardTable, Row) {
  const ForwardRow& row = GetParam();
  AxisParams a;
  a.input = row.in;
  a.kernel = row.k;
  a.stride = row.s;
  a.dilation = row.d;
  check_cell(parse_padding_name("same", "tensorflow"), a, row.same_upper, "TF SAME");
  check_cell(parse_padding_name("same", "keras"), a, row.same_upper, "Keras SAME");
  check_cell(parse_padding_name("same_upper"), a, row.same_upper, "ONNX SAME_UPPER");
  check_cell(parse_padding_name("same_lower"), a, row.same_lower, "ONNX SAME_LOWER");
  check_cell(parse_padding_name("same", "pytorch"), a, row.torch, "PyTorch same");
  check_cell(parse_padding_name("same", "scipy"), a, row.scipy, "SciPy same");
  // scipy.signal.correlate2d 'same' puts the odd pixel at the end: it equals torch_same.
  check_cell(parse_padding_name("torch_same"), a, row.correlate2d, "correlate2d same");
  check_cell(parse_padding_name("causal"), a, row.causal, "causal");
  check_cell(explicit_padding({row.k / 2}, 1), a, row.naive, "naive k//2");

  check_brute(PadMode::SameUpper, a, row.same_upper, "SAME_UPPER");
  check_brute(PadMode::SameLower, a, row.same_lower, "SAME_LOWER");
  check_brute(PadMode::TorchSame, a, row.torch, "torch same");
  check_brute(PadMode::ScipySame, a, row.scipy, "scipy same");
  check_brute(PadMode::Causal, a, row.causal, "causal");
}

INSTANTIATE_TEST_SUITE_P(Doc, ForwardTable, ::testing::ValuesIn(kForwardTable));

// ---------------------------------------------------------------------------------------------
// Transposed convolution.

// Length of the full transposed output by scattering every input through every tap.
int64_t brute_full_transposed(int64_t in, int64_t k, int64_t s, int64_t d, int64_t output_padding) {
  int64_t last = 0;
  for (int64_t i = 0; i < in; ++i)
    for (int64_t t = 0; t < k; ++t) last = std::max(last, i * s + t * d);
  return last + 1 + output_padding;
}

struct TransposedRow {
  int64_t in, k, s, d, full, out;
  Pads upper, lower;
};

const TransposedRow kTransposedTable[] = {
    {3, 3, 2, 1, 7, 6, {0, 1}, {1, 0}},   {4, 4, 2, 1, 10, 8, {1, 1}, {1, 1}},
    {3, 3, 1, 1, 5, 3, {1, 1}, {1, 1}},   {3, 4, 1, 1, 6, 3, {1, 2}, {2, 1}},
    {5, 5, 2, 1, 13, 10, {1, 2}, {2, 1}}, {3, 1, 3, 1, 7, 9, {0, -2}, {0, -2}},
    {2, 2, 3, 1, 5, 6, {0, -1}, {0, -1}}, {4, 3, 2, 2, 11, 8, {1, 2}, {2, 1}},
};

class TransposedTable : public ::testing::TestWithParam<TransposedRow> {};

TEST_P(TransposedTable, Row) {
  const TransposedRow& row = GetParam();
  AxisParams a;
  a.input = row.in;
  a.kernel = row.k;
  a.stride = row.s;
  a.dilation = row.d;
  EXPECT_EQ(brute_full_transposed(row.in, row.k, row.s, row.d, 0), row.full);
  const Resolved up = resolve_transposed(parse_padding_name("same_upper"), {a}, {});
  ASSERT_EQ(up.axes.size(), 1u);
  EXPECT_EQ(up.axes[0].before, row.upper.before);
  EXPECT_EQ(up.axes[0].after, row.upper.after);
  EXPECT_EQ(up.axes[0].output, row.out);
  const Resolved lo = resolve_transposed(parse_padding_name("same_lower"), {a}, {});
  ASSERT_EQ(lo.axes.size(), 1u);
  EXPECT_EQ(lo.axes[0].before, row.lower.before);
  EXPECT_EQ(lo.axes[0].after, row.lower.after);
  EXPECT_EQ(lo.axes[0].output, row.out);
  // TF conv_transpose SAME is SAME_UPPER.
  const Resolved tf = resolve_transposed(parse_padding_name("same", "tensorflow"), {a}, {});
  EXPECT_EQ(tf.axes[0].before, row.upper.before);
  EXPECT_EQ(tf.axes[0].after, row.upper.after);
}

INSTANTIATE_TEST_SUITE_P(Doc, TransposedTable, ::testing::ValuesIn(kTransposedTable));

// A transposed conv with auto_pad SAME is the adjoint of the forward SAME conv whose input is the
// transposed output (in*s long): its crop before equals that forward conv's pad before, and the
// forward conv maps in*s back to in outputs. Crops past the full output become zero-extension.
TEST(TransposedRandom, SameIsAdjointOfForwardSame) {
  std::mt19937 rng(77);
  auto uni = [&](int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
  };
  for (int iter = 0; iter < 3000; ++iter) {
    const int dims = static_cast<int>(uni(1, 3));
    const bool lower = uni(0, 1) == 1;
    std::vector<AxisParams> axes;
    for (int i = 0; i < dims; ++i) {
      AxisParams a;
      a.input = uni(1, 40);
      a.kernel = uni(1, 9);
      a.stride = uni(1, 5);
      a.dilation = uni(1, 3);
      axes.push_back(a);
    }
    const PaddingSpec spec = parse_padding_name(lower ? "same_lower" : "same_upper");
    const Resolved r = resolve_transposed(spec, axes, {});
    ASSERT_EQ(r.axes.size(), axes.size());
    const std::string what = describe(spec.mode, axes, {}, false);
    for (size_t i = 0; i < axes.size(); ++i) {
      const AxisParams& a = axes[i];
      const int64_t out = a.input * a.stride;
      const int64_t full = brute_full_transposed(a.input, a.kernel, a.stride, a.dilation, 0);
      const Pads fwd = brute_same(out, span(a.kernel, a.dilation), a.stride, lower);
      ASSERT_EQ(positions_in(out, a.stride), a.input);
      EXPECT_EQ(r.axes[i].output, out) << what;
      EXPECT_EQ(r.axes[i].before, fwd.before) << what;
      EXPECT_EQ(r.axes[i].after, full - out - fwd.before) << what;
      if (r.axes[i].after < 0) {
        EXPECT_EQ(fwd.after, 0) << what;
      }
    }
  }
}

// The crops of a transposed SAME conv total s*(in-1) + ke + op - in*s = ke - s + op: the same for
// every input size. (padfold nevertheless sets input_dependent; see
// InputDependent.TransposedSameIsNotInputDependent.)
TEST(TransposedRandom, SameCropsDoNotDependOnInputSize) {
  for (const char* name : {"same_upper", "same_lower"}) {
    for (int64_t k = 1; k <= 6; ++k) {
      for (int64_t s = 1; s <= 4; ++s) {
        for (int64_t d = 1; d <= 2; ++d) {
          for (int64_t op = 0; op < std::max(s, d); ++op) {
            std::optional<AxisPads> first;
            for (int64_t in = 1; in <= 30; ++in) {
              AxisParams a;
              a.input = in;
              a.kernel = k;
              a.stride = s;
              a.dilation = d;
              const AxisPads p = resolve_transposed(parse_padding_name(name), {a}, {op}).axes[0];
              EXPECT_EQ(p.output, in * s);
              EXPECT_EQ(p.output + p.before + p.after, brute_full_transposed(in, k, s, d, op));
              if (!first) first = p;
              EXPECT_EQ(p.before, first->before)
                  << name << " k=" << k << " s=" << s << " d=" << d << " op=" << op << " in=" << in;
              EXPECT_EQ(p.after, first->after)
                  << name << " k=" << k << " s=" << s << " d=" << d << " op=" << op << " in=" << in;
            }
          }
        }
      }
    }
  }
}

// Explicit pads and output_padding: output = full (scattered) - crops; output_shape overrides
// the pads with the ONNX rule (odd pixel first unless SAME_UPPER; a shortfall becomes
// zero-extension at the end).
TEST(TransposedRandom, ExplicitAndOutputShape) {
  std::mt19937 rng(78);
  auto uni = [&](int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
  };
  int errors = 0;
  for (int iter = 0; iter < 3000; ++iter) {
    AxisParams a;
    a.input = uni(1, 20);
    a.kernel = uni(1, 9);
    a.stride = uni(1, 5);
    a.dilation = uni(1, 3);
    const int64_t ke = span(a.kernel, a.dilation);
    const int64_t op = uni(0, std::max(a.stride, a.dilation) - 1);
    const int64_t full = brute_full_transposed(a.input, a.kernel, a.stride, a.dilation, op);
    const Pads p{uni(0, ke), uni(0, ke)};
    const std::string what =
        describe(PadMode::Explicit, {a}, {p}, false) + " op=" + std::to_string(op);
    const PaddingSpec spec = explicit_padding({p.before, p.after}, 1);
    if (full - p.before - p.after <= 0) {
      ++errors;
      EXPECT_THROW(resolve_transposed(spec, {a}, {op}), PaddingError) << what;
    } else {
      const Resolved r = resolve_transposed(spec, {a}, {op});
      EXPECT_EQ(r.axes[0].before, p.before) << what;
      EXPECT_EQ(r.axes[0].after, p.after) << what;
      EXPECT_EQ(r.axes[0].output, full - p.before - p.after) << what;
      EXPECT_FALSE(r.input_dependent) << what;
    }
    // output_padding must be below max(stride, dilation).
    EXPECT_THROW(resolve_transposed(spec, {a}, {std::max(a.stride, a.dilation)}), PaddingError);
    EXPECT_THROW(resolve_transposed(spec, {a}, {-1}), PaddingError);

    const int64_t want = std::max<int64_t>(1, full + uni(-4, 4));
    for (const char* name : {"same_upper", "same_lower", ""}) {
      const PaddingSpec s2 = *name ? parse_padding_name(name) : spec;
      const Resolved r = resolve_transposed(s2, {a}, {op}, std::vector<int64_t>{want});
      const int64_t total = full - want;
      EXPECT_EQ(r.axes[0].output, want) << what << " output_shape " << want;
      EXPECT_EQ(r.axes[0].before + r.axes[0].after, total) << what;
      if (total < 0) {
        EXPECT_EQ(r.axes[0].before, 0) << what;
      } else {
        const bool upper = std::string(name) == "same_upper";
        EXPECT_EQ(r.axes[0].before - r.axes[0].after, (total % 2) * (upper ? -1 : 1)) << what;
      }
    }
  }
  EXPECT_GT(errors, 10);
}

TEST(Transposed, RejectsForwardOnlyConventions) {
  AxisParams a;
  a.input = 4;
  a.kernel = 3;
  for (const char* n : {"torch_same", "scipy_same", "causal", "full"})
    EXPECT_THROW(resolve_transposed(parse_padding_name(n), {a}, {}), PaddingError) << n;
  EXPECT_THROW(resolve_transposed(parse_padding_name("valid"), {a, a}, {0}), PaddingError);
  EXPECT_THROW(resolve_transposed(parse_padding_name("valid"), {a}, {}, std::vector<int64_t>{}),
               PaddingError);
  EXPECT_THROW(resolve_transposed(explicit_padding({1, 1, 1, 1}, 2), {a}, {}), PaddingError);
}

TEST(Transposed, ValidIsTheFullOutput) {
  AxisParams a;
  a.input = 5;
  a.kernel = 3;
  a.stride = 2;
  a.dilation = 2;
  const Resolved r = resolve_transposed(parse_padding_name("valid"), {a}, {1});
  EXPECT_EQ(r.axes[0].before, 0);
  EXPECT_EQ(r.axes[0].after, 0);
  EXPECT_EQ(r.axes[0].output, brute_full_transposed(5, 3, 2, 2, 1));
}

// Numerically: <conv(x; pads), y> == <x, conv_transpose(y; crops)> with the crops padfold gives,
// so the transposed output really is the gradient of the forward SAME conv.
TEST(TransposedRandom, AdjointNumerically) {
  std::mt19937 rng(79);
  auto uni = [&](int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
  };
  std::normal_distribution<float> normal;
  for (int iter = 0; iter < 60; ++iter) {
    const int dims = static_cast<int>(uni(1, 2));
    const bool lower = uni(0, 1) == 1;
    std::vector<AxisParams> axes;
    for (int i = 0; i < dims; ++i) {
      AxisParams a;
      a.input = uni(1, 6);
      a.kernel = uni(1, 4);
      a.stride = uni(1, 3);
      a.dilation = uni(1, 2);
      axes.push_back(a);
    }
    const Resolved t =
        resolve_transposed(parse_padding_name(lower ? "same_lower" : "same_upper"), axes, {});
    // Transposed: y (1, 3, in...) -> (1, 2, in*s...) with weights (C_in=3, C_out=2, k...). The
    // same weight array read as (O=3, I=2, k...) is the forward conv (1, 2, in*s...) -> (1, 3,
    // in...).
    std::vector<int64_t> small = {1, 3}, big = {1, 2}, wshape = {3, 2};
    std::vector<int64_t> stride, dil, cb, ca;
    for (size_t i = 0; i < axes.size(); ++i) {
      small.push_back(axes[i].input);
      big.push_back(t.axes[i].output);
      wshape.push_back(axes[i].kernel);
      stride.push_back(axes[i].stride);
      dil.push_back(axes[i].dilation);
      cb.push_back(t.axes[i].before);
      ca.push_back(t.axes[i].after);
    }
    auto random_tensor = [&](std::vector<int64_t> shape) {
      ref::Tensor r(std::move(shape));
      for (float& v : r.data) v = normal(rng);
      return r;
    };
    const ref::Tensor y = random_tensor(small);
    const ref::Tensor x = random_tensor(big);
    const ref::Tensor w = random_tensor(wshape);
    ref::ConvParams fp;
    fp.stride = stride;
    fp.dilation = dil;
    fp.pad_before = cb;
    for (size_t i = 0; i < axes.size(); ++i)
      fp.pad_after.push_back(std::max<int64_t>(0, (axes[i].input - 1) * axes[i].stride +
                                                      span(axes[i].kernel, axes[i].dilation) -
                                                      cb[i] - t.axes[i].output));
    const ref::Tensor fwd =
        ref::conv(x, w, nullptr, fp, std::vector<int64_t>(small.begin() + 2, small.end()));
    const ref::Tensor bwd = ref::conv_transpose(y, w, nullptr, stride, dil, cb, ca, 1);
    ASSERT_EQ(bwd.shape, big);
    ASSERT_EQ(fwd.shape, y.shape);
    double lhs = 0, rhs = 0;
    for (size_t i = 0; i < fwd.data.size(); ++i) lhs += double(fwd.data[i]) * y.data[i];
    for (size_t i = 0; i < x.data.size(); ++i) rhs += double(x.data[i]) * bwd.data[i];
    EXPECT_NEAR(lhs, rhs, 1e-3 * (1 + std::abs(lhs)))
        << describe(PadMode::SameUpper, axes, {}, false);
  }
}

// ---------------------------------------------------------------------------------------------
// Worked examples through the naive reference conv.

ref::Tensor conv1d(const std::vector<float>& x, const std::vector<float>& k, int64_t stride,
                   const AxisPads& p) {
  const ref::Tensor xt({1, 1, static_cast<int64_t>(x.size())}, x);
  const ref::Tensor wt({1, 1, static_cast<int64_t>(k.size())}, k);
  ref::ConvParams cp;
  cp.stride = {stride};
  cp.pad_before = {p.before};
  cp.pad_after = {p.after};
  return ref::conv(xt, wt, nullptr, cp, {p.output});
}

TEST(WorkedExamples, TfSameStride2VersusNaiveSymmetric) {
  AxisParams a;
  a.input = 4;
  a.kernel = 2;
  a.stride = 2;
  const Resolved tf = resolve_forward(parse_padding_name("same", "tensorflow"), {a});
  EXPECT_EQ(conv1d({1, 2, 3, 4}, {0, 1}, 2, tf.axes[0]).data, (std::vector<float>{2, 4}));
  // padding=k//2 on both sides: different values and a third output element.
  const Resolved naive = resolve_forward(explicit_padding({1}, 1), {a});
  EXPECT_EQ(conv1d({1, 2, 3, 4}, {0, 1}, 2, naive.axes[0]).data, (std::vector<float>{1, 3, 0}));
}

TEST(WorkedExamples, ScipyVersusTorchSameOnOnes) {
  AxisParams a;
  a.input = 6;
  a.kernel = 4;
  const std::vector<float> x(6, 1.f), k(4, 1.f);
  const Resolved sp = resolve_forward(parse_padding_name("same", "scipy"), {a});
  EXPECT_EQ(conv1d(x, k, 1, sp.axes[0]).data, (std::vector<float>{2, 3, 4, 4, 4, 3}));
  const Resolved pt = resolve_forward(parse_padding_name("same", "pytorch"), {a});
  EXPECT_EQ(conv1d(x, k, 1, pt.axes[0]).data, (std::vector<float>{3, 4, 4, 4, 3, 2}));
}

// scipy.signal.correlate(x, k, 'same') computed the scipy way (full correlation, centred crop)
// equals the reference conv with padfold's scipy_same pads, for random data.
TEST(WorkedExamples, ScipySameEqualsCentredFullCorrelation) {
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(-1, 1);
  for (int64_t n = 1; n <= 9; ++n) {
    for (int64_t k = 1; k <= 8; ++k) {
      std::vector<float> x(static_cast<size_t>(n)), w(static_cast<size_t>(k));
      for (float& v : x) v = u(rng);
      for (float& v : w) v = u(rng);
      std::vector<double> full;
      for (int64_t f = 0; f < n + k - 1; ++f) {
        double acc = 0;
        for (int64_t t = 0; t < k; ++t) {
          const int64_t i = f - (k - 1) + t;
          if (i >= 0 && i < n) acc += double(x[size_t(i)]) * w[size_t(t)];
        }
        full.push_back(acc);
      }
      const int64_t start = (static_cast<int64_t>(full.size()) - n) / 2;
      AxisParams a;
      a.input = n;
      a.kernel = k;
      const Resolved r = resolve_forward(parse_padding_name("scipy_same"), {a});
      const ref::Tensor y = conv1d(x, w, 1, r.axes[0]);
      ASSERT_EQ(y.numel(), n);
      for (int64_t j = 0; j < n; ++j)
        EXPECT_NEAR(y.data[size_t(j)], full[size_t(start + j)], 1e-5) << "n=" << n << " k=" << k;
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Flags.

TEST(Flags, AsymmetricAndInputDependent) {
  AxisParams a;
  a.input = 8;
  a.kernel = 3;
  a.stride = 2;
  AxisParams b = a;
  b.input = 7;
  const Resolved r1 = resolve_forward(parse_padding_name("same_upper"), {a});
  EXPECT_TRUE(r1.asymmetric);  // (0,1)
  EXPECT_TRUE(r1.input_dependent);
  const Resolved r2 = resolve_forward(parse_padding_name("same_upper"), {b});
  EXPECT_FALSE(r2.asymmetric);  // (1,1)
  EXPECT_TRUE(r2.input_dependent);
  const Resolved r3 = resolve_forward(parse_padding_name("same_upper"), {b, a});
  EXPECT_TRUE(r3.asymmetric);  // any axis

  AxisParams c;
  c.input = 8;
  c.kernel = 3;
  const Resolved r4 = resolve_forward(parse_padding_name("same_upper"), {c});
  EXPECT_FALSE(r4.input_dependent);  // stride 1: always k-1
  EXPECT_FALSE(r4.asymmetric);
  EXPECT_TRUE(resolve_forward(parse_padding_name("causal"), {c}).asymmetric);
  EXPECT_FALSE(resolve_forward(parse_padding_name("causal"), {c}).input_dependent);
  EXPECT_FALSE(resolve_forward(parse_padding_name("full"), {c}).asymmetric);
  EXPECT_FALSE(resolve_forward(parse_padding_name("valid"), {c}).asymmetric);
  EXPECT_TRUE(resolve_forward(explicit_padding({0, 1}, 1), {c}).asymmetric);
  EXPECT_FALSE(resolve_forward(explicit_padding({0, 1}, 1), {c}).input_dependent);
}

// By the definition ("the pads would change with the input size") a 1-wide kernel under SAME
// never pads, whatever the stride and input size: ONNX SAME_UPPER with k=1, s=2 always gives
// (0,0). padfold currently flags every strided SAME layer. Disabled until padding.cpp decides;
// see the report (1x1 stride-2 SAME convs are the ResNet downsampling shortcut).
TEST(InputDependent, OneWideStridedSameIsNotInputDependent) {
  for (int64_t in = 1; in <= 20; ++in) {
    AxisParams a;
    a.input = in;
    a.kernel = 1;
    a.stride = 2;
    const Resolved r = resolve_forward(parse_padding_name("same_upper"), {a});
    EXPECT_EQ(r.axes[0].before + r.axes[0].after, 0);
    EXPECT_FALSE(r.input_dependent) << "in=" << in;
  }
}

// Same for transposed SAME: the crops are ke - s + output_padding in total for every input size
// (TransposedRandom.SameCropsDoNotDependOnInputSize), yet padfold sets input_dependent for every
// auto_pad SAME transposed conv. Disabled until padding.cpp decides; see the report.
TEST(InputDependent, TransposedSameIsNotInputDependent) {
  AxisParams a;
  a.input = 5;
  a.kernel = 3;
  a.stride = 2;
  EXPECT_FALSE(resolve_transposed(parse_padding_name("same_upper"), {a}, {}).input_dependent);
  EXPECT_FALSE(resolve_transposed(parse_padding_name("same_lower"), {a}, {}).input_dependent);
}

TEST(InputDependent, OneWideStridedSamePadsNothing) {
  for (int64_t in = 1; in <= 20; ++in) {
    AxisParams a;
    a.input = in;
    a.kernel = 1;
    a.stride = 2;
    const Resolved r = resolve_forward(parse_padding_name("same_upper"), {a});
    EXPECT_EQ(r.axes[0].before, 0);
    EXPECT_EQ(r.axes[0].after, 0);
  }
}

// ---------------------------------------------------------------------------------------------
// Names, aliases and errors.

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const PaddingError& e) {
    return e.what();
  }
  return "";
}

TEST(ParseName, AliasesAndConventions) {
  struct Case {
    const char* name;
    const char* conv;
    PadMode mode;
  };
  const Case cases[] = {
      {"valid", "", PadMode::Valid},
      {"VALID", "", PadMode::Valid},
      {"same", "", PadMode::SameUpper},
      {"SAME", "", PadMode::SameUpper},
      {"same", "tensorflow", PadMode::SameUpper},
      {"same", "tf", PadMode::SameUpper},
      {"same", "keras", PadMode::SameUpper},
      {"same", "Keras", PadMode::SameUpper},
      {"same", "onnx", PadMode::SameUpper},
      {"same", "onnx_upper", PadMode::SameUpper},
      {"same", "same_upper", PadMode::SameUpper},
      {"same", "onnx_lower", PadMode::SameLower},
      {"same", "same_lower", PadMode::SameLower},
      {"same", "pytorch", PadMode::TorchSame},
      {"same", "torch", PadMode::TorchSame},
      {"same", "scipy", PadMode::ScipySame},
      {"same_upper", "", PadMode::SameUpper},
      {"SAME_UPPER", "", PadMode::SameUpper},
      {"same_lower", "", PadMode::SameLower},
      {"SAME_LOWER", "", PadMode::SameLower},
      {"torch_same", "", PadMode::TorchSame},
      {"scipy_same", "", PadMode::ScipySame},
      {"causal", "", PadMode::Causal},
      {"full", "", PadMode::Full},
  };
  for (const Case& c : cases) {
    const PaddingSpec s = parse_padding_name(c.name, c.conv);
    EXPECT_EQ(s.mode, c.mode) << c.name << " / " << c.conv;
    EXPECT_NE(s.written.find(c.name), std::string::npos) << s.written;
    EXPECT_TRUE(s.before.empty() && s.after.empty());
  }
  for (PadMode m : {PadMode::Valid, PadMode::SameUpper, PadMode::SameLower, PadMode::TorchSame,
                    PadMode::ScipySame, PadMode::Causal, PadMode::Full})
    EXPECT_EQ(parse_padding_name(to_string(m)).mode, m);
}

TEST(ParseName, Errors) {
  const std::string unknown = error_of([] { parse_padding_name("sname"); });
  EXPECT_NE(unknown.find("sname"), std::string::npos) << unknown;
  EXPECT_NE(unknown.find("same_upper"), std::string::npos) << unknown;
  const std::string conv = error_of([] { parse_padding_name("same", "caffe"); });
  EXPECT_NE(conv.find("caffe"), std::string::npos) << conv;
  EXPECT_NE(conv.find("pytorch"), std::string::npos) << conv;
  const std::string stray = error_of([] { parse_padding_name("valid", "pytorch"); });
  EXPECT_NE(stray.find("only applies to padding 'same'"), std::string::npos) << stray;
  EXPECT_THROW(parse_padding_name(""), PaddingError);
  EXPECT_THROW(parse_padding_name("same", "onnx_middle"), PaddingError);
}

TEST(ResolveForward, StrideErrorsMentionSameUpper) {
  AxisParams a;
  a.input = 10;
  a.kernel = 3;
  a.stride = 2;
  for (const char* conv : {"pytorch", "scipy"}) {
    const std::string msg =
        error_of([&] { resolve_forward(parse_padding_name("same", conv), {a}); });
    EXPECT_NE(msg.find("same_upper"), std::string::npos) << conv << ": " << msg;
    EXPECT_NE(msg.find("stride"), std::string::npos) << msg;
  }
  // Only the strided axis matters, and the message names it.
  AxisParams b = a;
  b.stride = 1;
  const std::string msg = error_of([&] {
    resolve_forward(parse_padding_name("torch_same"), {b, a});
  });
  EXPECT_NE(msg.find("spatial axis 1"), std::string::npos) << msg;
  EXPECT_NO_THROW(resolve_forward(parse_padding_name("torch_same"), {b, b}));
}

TEST(ResolveForward, KernelLargerThanPaddedInput) {
  AxisParams a;
  a.input = 3;
  a.kernel = 3;
  a.dilation = 2;  // ke = 5
  const std::string msg = error_of([&] { resolve_forward(parse_padding_name("valid"), {a}); });
  EXPECT_NE(msg.find("effective kernel (5)"), std::string::npos) << msg;
  EXPECT_THROW(resolve_forward(explicit_padding({1, 0}, 1), {a}), PaddingError);  // 4 < 5
  EXPECT_NO_THROW(resolve_forward(explicit_padding({1}, 1), {a}));                // 5 fits
  EXPECT_THROW(resolve_forward(explicit_padding({0, 1}, 1), {a}, true), PaddingError);
  EXPECT_NO_THROW(resolve_forward(parse_padding_name("same"), {a}));
}

TEST(ResolveForward, RejectsNonPositiveAxisParams) {
  for (int field = 0; field < 4; ++field) {
    for (int64_t v : {0, -1}) {
      AxisParams a;
      a.input = 5;
      a.kernel = 3;
      (field == 0 ? a.input : field == 1 ? a.kernel : field == 2 ? a.stride : a.dilation) = v;
      EXPECT_THROW(resolve_forward(parse_padding_name("valid"), {a}), PaddingError) << field;
    }
  }
}

TEST(ExplicitPadding, Forms) {
  const PaddingSpec one = explicit_padding({2}, 3);
  EXPECT_EQ(one.mode, PadMode::Explicit);
  EXPECT_EQ(one.before, (std::vector<int64_t>{2, 2, 2}));
  EXPECT_EQ(one.after, (std::vector<int64_t>{2, 2, 2}));
  const PaddingSpec per_dim = explicit_padding({1, 2, 3}, 3);
  EXPECT_EQ(per_dim.before, (std::vector<int64_t>{1, 2, 3}));
  EXPECT_EQ(per_dim.after, (std::vector<int64_t>{1, 2, 3}));
  const PaddingSpec onnx = explicit_padding({1, 2, 3, 4}, 2);  // ONNX: x1_b, x2_b, x1_e, x2_e
  EXPECT_EQ(onnx.before, (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(onnx.after, (std::vector<int64_t>{3, 4}));
  const PaddingSpec one_dim = explicit_padding({0, 2}, 1);
  EXPECT_EQ(one_dim.before, (std::vector<int64_t>{0}));
  EXPECT_EQ(one_dim.after, (std::vector<int64_t>{2}));
  EXPECT_EQ(explicit_padding({0}, 2).before, (std::vector<int64_t>{0, 0}));

  AxisParams a;
  a.input = 5;
  a.kernel = 3;
  const Resolved r = resolve_forward(onnx, {a, a});
  EXPECT_EQ(r.axes[0].before, 1);
  EXPECT_EQ(r.axes[0].after, 3);
  EXPECT_EQ(r.axes[0].output, 7);
  EXPECT_EQ(r.axes[1].output, 9);
}

// Negative pads crop: windows start inside the input, and only forward windows take them.
TEST(ExplicitPadding, NegativePadsCrop) {
  AxisParams a;
  a.input = 7;
  a.kernel = 1;
  a.stride = 2;
  // Keras's ZeroPadding2D(((0, 1), ...)) then Cropping2D(((1, 0), ...)): the input shifted by one.
  const Resolved r = resolve_forward(explicit_padding({-1, 1}, 1), {a});
  EXPECT_EQ(r.axes[0].before, -1);
  EXPECT_EQ(r.axes[0].after, 1);
  EXPECT_EQ(r.axes[0].output, 4);  // taps 1, 3, 5, 7 (the last in the padding)
  EXPECT_EQ(tap_position<int64_t>(0, 0, a.stride, r.axes[0].before, a.dilation), 1);
  const std::string whole = error_of([&] { resolve_forward(explicit_padding({-7, 9}, 1), {a}); });
  EXPECT_NE(whole.find("must leave part of the input"), std::string::npos) << whole;
  a.kernel = 3;
  EXPECT_THROW(resolve_forward(explicit_padding({-3, -2}, 1), {a}), PaddingError);  // 2 < 3
  const std::string transposed = error_of([&] {
    resolve_transposed(explicit_padding({-1, 0}, 1), {a}, {});
  });
  EXPECT_NE(transposed.find("must be >= 0"), std::string::npos) << transposed;
  // A crop takes a border whose values do not come from the (cropped) input's edge.
  const Resolved crop = resolve_forward(explicit_padding({-1, 1}, 1), {a});
  EXPECT_NO_THROW(validate_border(Border::Zeros, crop, {a}));
  EXPECT_NO_THROW(validate_border(Border::Constant, crop, {a}));
  for (Border b : {Border::Reflect, Border::Replicate, Border::Symmetric, Border::Circular})
    EXPECT_THROW(validate_border(b, crop, {a}), PaddingError) << to_string(b);
}

TEST(ExplicitPadding, Errors) {
  const std::string far = error_of([] { explicit_padding({1, -(int64_t{1} << 40)}, 1); });
  EXPECT_NE(far.find("within"), std::string::npos) << far;
  const std::string count = error_of([] { explicit_padding({1, 2, 3}, 2); });
  EXPECT_NE(count.find("3 values"), std::string::npos) << count;
  EXPECT_THROW(explicit_padding({}, 2), PaddingError);
  EXPECT_THROW(explicit_padding({1, 2, 3, 4, 5}, 2), PaddingError);
  // A spec built for 2 dims applied to 3 axes.
  AxisParams a;
  a.input = 5;
  a.kernel = 3;
  const std::string dims = error_of([&] {
    resolve_forward(explicit_padding({1, 1}, 2), {a, a, a});
  });
  EXPECT_NE(dims.find("3 spatial dims"), std::string::npos) << dims;
}

// ---------------------------------------------------------------------------------------------
// Limits (base/limits.h): every size must fit an int32, and no arithmetic on sizes overflows.

// The field a resolution names, or "" when it succeeds.
std::string limit_field(const std::function<void()>& f) {
  try {
    f();
  } catch (const PaddingLimitError& e) {
    return e.field;
  } catch (const PaddingError& e) {
    return "not a limit: " + e.field;
  }
  return "";
}

TEST(Limits, AxisParamsBeyondInt32NameTheirField) {
  const int64_t huge[] = {kMaxSize + 1, int64_t{1} << 62, std::numeric_limits<int64_t>::max()};
  const char* fields[] = {"input_shape", "kernel", "stride", "dilation"};
  for (int field = 0; field < 4; ++field)
    for (int64_t v : huge) {
      AxisParams a;
      a.input = 7;
      a.kernel = field == 1 ? 1 : 3;
      (field == 0 ? a.input : field == 1 ? a.kernel : field == 2 ? a.stride : a.dilation) = v;
      for (const char* mode : {"valid", "same", "full"}) {
        EXPECT_EQ(limit_field([&] { resolve_forward(parse_padding_name(mode), {a}); }),
                  fields[field])
            << mode << " " << v;
        EXPECT_EQ(limit_field([&] { resolve_transposed(parse_padding_name("valid"), {a}, {}); }),
                  fields[field])
            << v;
      }
    }
  AxisParams a;
  a.input = 7;
  a.kernel = 3;
  a.dilation = int64_t{1} << 62;  // once printed a negative output size
  EXPECT_EQ(error_of([&] { resolve_forward(parse_padding_name("same"), {a}); }),
            "spatial axis 0: dilation must be at most 2147483647 (the int32 limit), got "
            "4611686018427387904");
  a.dilation = std::numeric_limits<int64_t>::max();  // once gave output 9 from input 7
  EXPECT_EQ(limit_field([&] { resolve_forward(parse_padding_name("same"), {a}); }), "dilation");
  // The limit itself is fine.
  a.dilation = 1;
  a.stride = kMaxSize;
  EXPECT_EQ(resolve_forward(parse_padding_name("same"), {a}).axes[0].output, 1);
  a.input = kMaxSize;
  a.stride = 1;
  EXPECT_EQ(resolve_forward(parse_padding_name("valid"), {a}).axes[0].output, kMaxSize - 2);
}

TEST(Limits, DerivedSizesBeyondInt32) {
  AxisParams a;
  a.input = 7;
  a.kernel = 3;
  a.dilation = kMaxSize;  // effective kernel 2*(2^31-1)+1
  EXPECT_EQ(limit_field([&] { resolve_forward(parse_padding_name("full"), {a}); }), "dilation");
  EXPECT_NE(error_of([&] {
              resolve_forward(parse_padding_name("full"), {a});
            }).find("the effective kernel (3-1)*2147483647+1 = 4294967295 exceeds 2147483647"),
            std::string::npos);
  a.dilation = 1;
  // Explicit pads beyond the limit, and a padded input beyond it.
  EXPECT_EQ(limit_field([] { explicit_padding({kMaxSize + 1}, 1); }), "padding");
  EXPECT_EQ(limit_field([&] { resolve_forward(explicit_padding({kMaxSize}, 1), {a}); }), "padding");
  a.input = kMaxSize;
  EXPECT_EQ(limit_field([&] { resolve_forward(parse_padding_name("same"), {a}); }), "padding");
  EXPECT_EQ(limit_field([&] { resolve_forward(parse_padding_name("valid"), {a}); }), "");
  // Transposed: the full output, output_shape and the ONNX auto_pad output input*stride.
  AxisParams t;
  t.input = 2000000000;
  t.kernel = 3;
  t.stride = 2;
  EXPECT_EQ(limit_field([&] { resolve_transposed(parse_padding_name("valid"), {t}, {}); }),
            "stride");
  t.input = 5;
  EXPECT_EQ(limit_field([&] {
              resolve_transposed(parse_padding_name("valid"), {t}, {},
                                 std::vector<int64_t>{kMaxSize + 1});
            }),
            "output_shape");
  t.kernel = 1;  // full output 2*(in-1)+1 fits, in*2 does not
  t.stride = 2;
  t.input = 1073741824;
  EXPECT_EQ(limit_field([&] { resolve_transposed(parse_padding_name("valid"), {t}, {}); }), "");
  EXPECT_EQ(limit_field([&] { resolve_transposed(parse_padding_name("same_upper"), {t}, {}); }),
            "stride");
}

__extension__ using Int128 = __int128;  // exact products of two int64 values

// Random sizes on every scale up to int64: a resolution either fails with a PaddingError or gives
// pads and outputs within the limit that satisfy the window arithmetic exactly (checked in 128
// bits, so a wrapped int64 result cannot pass).
TEST(Limits, RandomHugeSizesNeverOverflow) {
  std::mt19937_64 rng(2024);
  auto size = [&]() -> int64_t {
    const int bits = std::uniform_int_distribution<int>(0, 63)(rng);
    const uint64_t v = rng() >> (64 - std::max(bits, 1));
    return static_cast<int64_t>(std::max<uint64_t>(v, 1));
  };
  const char* modes[] = {"valid", "same_upper", "same_lower", "causal", "full"};
  int resolved = 0;
  for (int iter = 0; iter < 20000; ++iter) {
    AxisParams a{size(), size(), size(), size()};
    if (iter % 2) a.dilation = 1;
    if (iter % 3 == 0) a.kernel = std::uniform_int_distribution<int64_t>(1, 5)(rng);
    const bool transposed = iter % 5 == 0;
    const bool ceil_mode = iter % 7 == 0;
    PaddingSpec spec = parse_padding_name(modes[iter % 5]);
    if (iter % 11 == 0) {
      try {
        spec = explicit_padding({size() - 1, size() - 1}, 1);
      } catch (const PaddingError&) {
        continue;
      }
    }
    Resolved r;
    try {
      if (transposed) {
        if (spec.mode != PadMode::Explicit && spec.mode != PadMode::Valid &&
            spec.mode != PadMode::SameUpper && spec.mode != PadMode::SameLower)
          continue;
        r = resolve_transposed(spec, {a}, {});
      } else {
        r = resolve_forward(spec, {a}, ceil_mode);
      }
    } catch (const PaddingError&) {
      continue;
    }
    ++resolved;
    const AxisPads& p = r.axes[0];
    EXPECT_GT(p.output, 0);
    EXPECT_LE(p.output, kMaxSize);
    EXPECT_LE(p.before, kMaxSize);
    EXPECT_LE(p.after, kMaxSize);
    const Int128 ke = static_cast<Int128>(a.kernel - 1) * a.dilation + 1;
    if (transposed) {
      const Int128 full = static_cast<Int128>(a.stride) * (a.input - 1) + ke;
      EXPECT_EQ(full - p.before - p.after, p.output);
    } else if (!ceil_mode) {
      const Int128 padded = static_cast<Int128>(a.input) + p.before + p.after;
      EXPECT_LE(static_cast<Int128>(p.output - 1) * a.stride + ke, padded);
      EXPECT_GT(static_cast<Int128>(p.output) * a.stride + ke, padded);
    }
  }
  EXPECT_GT(resolved, 1000);
}

TEST(Limits, CheckedArithmetic) {
  const int64_t max = std::numeric_limits<int64_t>::max();
  EXPECT_EQ(checked_add(max - 1, 1), max);
  EXPECT_EQ(checked_add(max, 1), std::nullopt);
  EXPECT_EQ(checked_sub(-max, 2), std::nullopt);
  EXPECT_EQ(checked_mul(int64_t{1} << 31, int64_t{1} << 31), int64_t{1} << 62);
  EXPECT_EQ(checked_mul(int64_t{1} << 32, int64_t{1} << 31), std::nullopt);
  EXPECT_EQ(checked_product({}), 1);
  EXPECT_EQ(checked_product({1 << 20, 1 << 20, 1 << 20}), int64_t{1} << 60);
  EXPECT_EQ(checked_product({1 << 20, 1 << 20, 1 << 20, 1 << 20}), std::nullopt);
  AxisParams a;
  a.kernel = 3;
  a.dilation = max;
  EXPECT_THROW(effective_kernel(a), PaddingLimitError);
}

// ---------------------------------------------------------------------------------------------
// Border modes.

TEST(Border, ParseAndNames) {
  EXPECT_EQ(parse_border("zeros"), Border::Zeros);
  EXPECT_EQ(parse_border("zero"), Border::Zeros);
  EXPECT_EQ(parse_border("constant"), Border::Constant);
  EXPECT_EQ(parse_border("reflect"), Border::Reflect);
  EXPECT_EQ(parse_border("mirror"), Border::Reflect);
  EXPECT_EQ(parse_border("symmetric"), Border::Symmetric);
  EXPECT_EQ(parse_border("SYMMETRIC"), Border::Symmetric);
  EXPECT_EQ(parse_border("replicate"), Border::Replicate);
  EXPECT_EQ(parse_border("edge"), Border::Replicate);
  EXPECT_EQ(parse_border("nearest"), Border::Replicate);
  EXPECT_EQ(parse_border("circular"), Border::Circular);
  EXPECT_EQ(parse_border("wrap"), Border::Circular);
  EXPECT_EQ(parse_border("grid-wrap"), Border::Circular);
  EXPECT_THROW(parse_border("periodic"), PaddingError);
  for (Border b : {Border::Zeros, Border::Constant, Border::Reflect, Border::Symmetric,
                   Border::Replicate, Border::Circular})
    EXPECT_EQ(parse_border(to_string(b)), b);
}

Resolved pads_of(int64_t before, int64_t after) {
  Resolved r;
  AxisPads p;
  p.before = before;
  p.after = after;
  r.axes.push_back(p);
  return r;
}

TEST(Border, Validate) {
  AxisParams a;
  a.input = 4;
  // reflect needs pad < n
  EXPECT_NO_THROW(validate_border(Border::Reflect, pads_of(3, 0), {a}));
  EXPECT_NO_THROW(validate_border(Border::Reflect, pads_of(0, 3), {a}));
  const std::string r = error_of([&] { validate_border(Border::Reflect, pads_of(0, 4), {a}); });
  EXPECT_NE(r.find("reflect"), std::string::npos) << r;
  EXPECT_NE(r.find("spatial axis 0"), std::string::npos) << r;
  // symmetric and circular allow pad == n, not more
  for (Border b : {Border::Symmetric, Border::Circular}) {
    EXPECT_NO_THROW(validate_border(b, pads_of(4, 4), {a})) << to_string(b);
    EXPECT_THROW(validate_border(b, pads_of(5, 0), {a}), PaddingError) << to_string(b);
    EXPECT_THROW(validate_border(b, pads_of(0, 5), {a}), PaddingError) << to_string(b);
  }
  // replicate, zeros, constant: anything
  for (Border b : {Border::Replicate, Border::Zeros, Border::Constant})
    EXPECT_NO_THROW(validate_border(b, pads_of(100, 100), {a})) << to_string(b);
  // names the offending axis
  AxisParams big;
  big.input = 10;
  Resolved two = pads_of(4, 4);
  two.axes.push_back(two.axes[0]);
  const std::string m = error_of([&] { validate_border(Border::Reflect, two, {big, a}); });
  EXPECT_NE(m.find("spatial axis 1"), std::string::npos) << m;
}

// ---------------------------------------------------------------------------------------------
// validate_pool_windows: pools that ignore zero padding need every window to read some input.

// Whether some window of a pool has no tap on an input element (its value would be undefined).
bool brute_empty_window(const AxisParams& a, const AxisPads& p, bool taps_only) {
  for (int64_t j = 0; j < p.output; ++j) {
    const int64_t start = j * a.stride - p.before;
    bool reads = false;
    if (taps_only) {
      for (int64_t t = 0; t < a.kernel; ++t) {
        const int64_t q = start + t * a.dilation;
        reads = reads || (q >= 0 && q < a.input);
      }
    } else {  // the window's extent overlaps the input
      reads = start + span(a.kernel, a.dilation) - 1 >= 0 && start < a.input;
    }
    if (!reads) return true;
  }
  return false;
}

TEST(PoolWindows, MatchesBruteForce) {
  std::mt19937 rng(91);
  auto uni = [&](int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
  };
  int rejected = 0, accepted = 0;
  for (int iter = 0; iter < 20000; ++iter) {
    AxisParams a;
    a.input = uni(1, 12);
    a.kernel = uni(1, 5);
    a.stride = uni(1, 4);
    a.dilation = uni(1, 3);
    const int64_t ke = span(a.kernel, a.dilation);
    const bool ceil_mode = uni(0, 1) == 1;
    const PaddingSpec spec = explicit_padding({uni(0, ke + 1), uni(0, ke + 1)}, 1);
    Resolved r;
    try {
      r = resolve_forward(spec, {a}, ceil_mode);
    } catch (const PaddingError&) {
      continue;
    }
    const bool empty = brute_empty_window(a, r.axes[0], true);
    // Dilated windows whose extent covers the input but whose taps all miss it are checked in
    // PoolWindows.DilatedWindowStraddlingTheInput.
    if (empty != brute_empty_window(a, r.axes[0], false)) continue;
    bool threw = false;
    try {
      validate_pool_windows(r, {a});
    } catch (const PaddingError&) {
      threw = true;
    }
    EXPECT_EQ(threw, empty) << describe(PadMode::Explicit, {a}, {{spec.before[0], spec.after[0]}},
                                        ceil_mode);
    (threw ? rejected : accepted)++;
  }
  EXPECT_GT(rejected, 100);
  EXPECT_GT(accepted, 100);
}

// in=1, k=2, dilation 3, pads (1,2): the only window has taps at -1 and 2, both in the padding,
// so a max pool over zero padding has nothing to take the max of. validate_pool_windows only
// compares the window's extent [-1, 2] with the input and accepts it. Disabled; see the report.
TEST(PoolWindows, DilatedWindowStraddlingTheInput) {
  AxisParams a;
  a.input = 1;
  a.kernel = 2;
  a.dilation = 3;
  const Resolved r = resolve_forward(explicit_padding({1, 2}, 1), {a});
  ASSERT_EQ(r.axes[0].output, 1);
  EXPECT_THROW(validate_pool_windows(r, {a}), PaddingError);
}

// The first window with no tap on the input, by walking every tap of every window.
std::optional<int64_t> brute_first_empty_window(const AxisParams& a, const AxisPads& p) {
  for (int64_t j = 0; j < p.output; ++j) {
    bool reads = false;
    for (int64_t t = 0; t < a.kernel && !reads; ++t) {
      const int64_t q = j * a.stride - p.before + t * a.dilation;
      reads = q >= 0 && q < a.input;
    }
    if (!reads) return j;
  }
  return std::nullopt;
}

// The closed form of validate_pool_windows finds the same first empty window as walking them,
// dilated windows whose taps step over a small input included (dilation > input).
TEST(PoolWindows, ClosedFormNamesTheFirstEmptyWindow) {
  std::mt19937 rng(17);
  auto uni = [&](int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
  };
  int rejected = 0, accepted = 0, stepped_over = 0;
  for (int iter = 0; iter < 40000; ++iter) {
    AxisParams a;
    a.input = uni(1, 10);
    a.kernel = uni(1, 5);
    a.stride = uni(1, 5);
    a.dilation = uni(1, 13);
    const int64_t ke = span(a.kernel, a.dilation);
    const PaddingSpec spec = explicit_padding({uni(0, ke + 3), uni(0, ke + 3)}, 1);
    Resolved r;
    try {
      r = resolve_forward(spec, {a}, uni(0, 1) == 1);
    } catch (const PaddingError&) {
      continue;
    }
    const std::optional<int64_t> want = brute_first_empty_window(a, r.axes[0]);
    const std::string msg = error_of([&] { validate_pool_windows(r, {a}); });
    const std::string where =
        describe(PadMode::Explicit, {a}, {{spec.before[0], spec.after[0]}}, false);
    if (!want) {
      EXPECT_EQ(msg, "") << where;
      ++accepted;
      continue;
    }
    EXPECT_NE(msg.find("pooling window " + std::to_string(*want) + " has every tap"),
              std::string::npos)
        << msg << " " << where;
    ++rejected;
    // An empty window whose extent overlaps the input: its taps step over it.
    const int64_t start = *want * a.stride - r.axes[0].before;
    if (start <= a.input - 1 && start + (a.kernel - 1) * a.dilation >= 0) ++stepped_over;
  }
  EXPECT_GT(rejected, 1000);
  EXPECT_GT(accepted, 1000);
  EXPECT_GT(stepped_over, 10);
}

// A pool over a wide axis: walking every tap of every window took hours (2^25 windows of 2^24
// taps); the closed form does not depend on their number.
TEST(PoolWindows, WideAxesAreChecked) {
  AxisParams a;
  a.input = int64_t{1} << 24;
  a.kernel = int64_t{1} << 24;
  Resolved r = resolve_forward(parse_padding_name("full"), {a});
  EXPECT_EQ(r.axes[0].output, (int64_t{1} << 25) - 1);
  EXPECT_NO_THROW(validate_pool_windows(r, {a}));
  // The last of 2^30 + 1 windows lies wholly in the right padding.
  AxisParams b;
  b.input = int64_t{1} << 30;
  b.kernel = 2;
  r = resolve_forward(explicit_padding({0, 2}, 1), {b});
  EXPECT_EQ(error_of([&] { validate_pool_windows(r, {b}); }),
            "spatial axis 0: with pads 0/2, pooling window 1073741824 has every tap in the padding "
            "and no input to pool; use pads smaller than the window (PyTorch requires pad <= "
            "kernel/2), or count_include_pad / a non-zero border");
  // Taps 2^30 apart, stride 3, over an input of 2^29: window o reads the input through its second
  // tap while 3*o < 2^29; the windows after that step over it until the pads end.
  AxisParams c;
  c.input = int64_t{1} << 29;
  c.kernel = 2;
  c.stride = 3;
  c.dilation = int64_t{1} << 30;
  r = resolve_forward(explicit_padding({int64_t{1} << 30, 3 << 20}, 1), {c});
  const int64_t first_empty = (c.input + 2) / 3;
  ASSERT_GT(r.axes[0].output, first_empty + 1);
  EXPECT_NE(error_of([&] {
              validate_pool_windows(r, {c});
            }).find("pooling window " + std::to_string(first_empty) + " has"),
            std::string::npos);
}

// validate_border accepts exactly the pads for which the reference can produce every padded index.
TEST(Border, ValidateAgreesWithReferenceIndexing) {
  const std::pair<Border, ref::BorderKind> modes[] = {
      {Border::Zeros, ref::BorderKind::Zeros},
      {Border::Constant, ref::BorderKind::Constant},
      {Border::Reflect, ref::BorderKind::Reflect},
      {Border::Symmetric, ref::BorderKind::Symmetric},
      {Border::Replicate, ref::BorderKind::Replicate},
      {Border::Circular, ref::BorderKind::Circular},
  };
  for (const auto& [b, k] : modes) {
    for (int64_t n = 1; n <= 6; ++n) {
      for (int64_t pb = 0; pb <= 8; ++pb) {
        for (int64_t pa = 0; pa <= 8; ++pa) {
          bool ref_ok = true;
          for (int64_t i = -pb; i < n + pa && ref_ok; ++i) {
            try {
              ref::border_index(i, n, k);
            } catch (const std::out_of_range&) {
              ref_ok = false;
            }
          }
          AxisParams a;
          a.input = n;
          bool padfold_ok = true;
          try {
            validate_border(b, pads_of(pb, pa), {a});
          } catch (const PaddingError&) {
            padfold_ok = false;
          }
          EXPECT_EQ(padfold_ok, ref_ok)
              << to_string(b) << " n=" << n << " pads=" << pb << "," << pa;
        }
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------
// The rules padding.h exports for the algorithms, the frontend and the CLI.

// Where the taps of output `o` land, by walking the padded input: window o starts o*stride
// elements into it (the padded input starts pad_before elements before input index 0), and each
// tap is `dilation` further than the last.
std::vector<int64_t> walked_taps(int64_t o, int64_t k, int64_t stride, int64_t before,
                                 int64_t dilation) {
  int64_t start = -before;
  for (int64_t i = 0; i < o; ++i) start += stride;
  std::vector<int64_t> taps;
  for (int64_t t = 0, pos = start; t < k; ++t, pos += dilation) taps.push_back(pos);
  return taps;
}

TEST(TapPosition, HandValues) {
  EXPECT_EQ(tap_position<int64_t>(0, 0, 1, 0, 1), 0);
  EXPECT_EQ(tap_position<int64_t>(0, 0, 2, 1, 1), -1);  // first tap in the left padding
  EXPECT_EQ(tap_position<int64_t>(3, 2, 2, 1, 3), 11);  // 6 - 1 + 6
  EXPECT_EQ(tap_position<int64_t>(4, 1, 3, 2, 2), 12);  // 12 - 2 + 2
  EXPECT_EQ(tap_position<int64_t>(1, 0, 1, 5, 1), -4);
  // 64-bit positions stay 64-bit.
  EXPECT_EQ(tap_position<int64_t>(int64_t{1} << 33, 0, 2, 0, 1), int64_t{1} << 34);
}

TEST(TapPosition, MatchesWalkingTheWindow) {
  for (int64_t stride = 1; stride <= 4; ++stride)
    for (int64_t dilation = 1; dilation <= 3; ++dilation)
      for (int64_t before = 0; before <= 4; ++before)
        for (int64_t k = 1; k <= 5; ++k)
          for (int64_t o = 0; o < 6; ++o) {
            const auto taps = walked_taps(o, k, stride, before, dilation);
            for (int64_t t = 0; t < k; ++t)
              EXPECT_EQ(tap_position<int64_t>(o, t, stride, before, dilation),
                        taps[static_cast<size_t>(t)])
                  << "o=" << o << " t=" << t << " s=" << stride << " d=" << dilation
                  << " before=" << before;
          }
}

// A tile of outputs reads, along one axis, the positions from its first window's first tap to its
// last window's last tap: walk every window of the tile and measure that span. Where the reads
// leave no gaps (dilation 1, windows that touch or overlap), the span is also the count of the
// positions read.
TEST(WindowExtent, MatchesTheWalkedWindowsOfATile) {
  for (int64_t stride = 1; stride <= 4; ++stride)
    for (int64_t dilation = 1; dilation <= 3; ++dilation)
      for (int64_t k = 1; k <= 6; ++k)
        for (int64_t tile = 1; tile <= 9; ++tile)
          for (int64_t first = 0; first <= 2; ++first) {
            std::vector<int64_t> read;
            for (int64_t o = first; o < first + tile; ++o)
              for (int64_t pos : walked_taps(o, k, stride, 1, dilation)) read.push_back(pos);
            const auto [lo, hi] = std::minmax_element(read.begin(), read.end());
            AxisParams a;
            a.kernel = k;
            a.stride = stride;
            a.dilation = dilation;
            const std::string what = "k=" + std::to_string(k) + " s=" + std::to_string(stride) +
                                     " d=" + std::to_string(dilation) +
                                     " tile=" + std::to_string(tile);
            EXPECT_EQ(window_extent(a, tile), *hi - *lo + 1) << what;
            std::sort(read.begin(), read.end());
            const auto distinct = std::unique(read.begin(), read.end()) - read.begin();
            if (dilation == 1 && stride <= k) {
              EXPECT_EQ(window_extent(a, tile), distinct) << what;
            }
          }
}

TEST(WindowExtent, OneOutputIsTheEffectiveKernelAndLimits) {
  AxisParams a;
  a.kernel = 5;
  a.dilation = 3;
  a.stride = 2;
  EXPECT_EQ(window_extent(a), effective_kernel(a));
  EXPECT_EQ(window_extent(a), 13);
  EXPECT_EQ(window_extent(a, 4), 3 * 2 + 13);
  EXPECT_THROW(window_extent(a, 0), std::invalid_argument);
  a.stride = std::numeric_limits<int64_t>::max() / 2;
  EXPECT_THROW(window_extent(a, 3), PaddingLimitError);
  a.stride = 1;
  a.dilation = std::numeric_limits<int64_t>::max();
  EXPECT_THROW(window_extent(a, 1), PaddingLimitError);
}

// Transposed convolution: input i, through tap t, lands on position i*stride + t*dilation of the
// full output, which is position (that - crop_before) of the cropped output.
TEST(TapPosition, TransposedIsTheInverse) {
  for (int64_t stride = 1; stride <= 4; ++stride)
    for (int64_t dilation = 1; dilation <= 3; ++dilation)
      for (int64_t before = 0; before <= 4; ++before)
        for (int64_t i = 0; i < 6; ++i)
          for (int64_t t = 0; t < 4; ++t) {
            int64_t full = 0;
            for (int64_t j = 0; j < i; ++j) full += stride;
            for (int64_t j = 0; j < t; ++j) full += dilation;
            const int64_t y = full - before;
            EXPECT_EQ(transposed_source_times_stride<int64_t>(y, t, before, dilation), i * stride)
                << "i=" << i << " t=" << t << " s=" << stride << " d=" << dilation
                << " before=" << before;
          }
  // Off the stride grid no input reaches the position through that tap.
  EXPECT_EQ(transposed_source_times_stride<int64_t>(3, 0, 0, 1) % 2, 1);
  EXPECT_EQ(transposed_source_times_stride<int64_t>(0, 1, 1, 1), 0);  // input 0, tap 1, crop 1
}

TEST(LastWindowOverhangs, CeilModeCases) {
  struct Case {
    int64_t in, k, s, d, before, after;
    bool ceil_mode;
    int64_t out;
    bool overhangs;
  };
  const Case cases[] = {
      // in=5 k=2 s=2: floor keeps windows [0,1] and [2,3]; ceil adds [4,5], tap 5 past the input.
      {5, 2, 2, 1, 0, 0, false, 2, false},
      {5, 2, 2, 1, 0, 0, true, 3, true},
      // in=4 k=3 s=2 ceil: windows [0,2] and [2,4]; tap 4 past the input.
      {4, 3, 2, 1, 0, 0, true, 2, true},
      // in=6 k=3 s=2 pads 1/1 ceil: last window [5,7] reaches past 6 + 1.
      {6, 3, 2, 1, 1, 1, true, 4, true},
      // in=5 k=2 s=3 pads 1/1 ceil: the window at 5 would start in the right padding and is
      // dropped; the last kept window [2,3] is inside.
      {5, 2, 3, 1, 1, 1, true, 2, false},
      // ceil_mode with windows that tile exactly: no partial window.
      {7, 3, 2, 1, 0, 0, true, 3, false},
      // dilated: in=8 k=2 d=3 s=3 ceil: taps {0,3}, {3,6}, and {6,9} reaching past 8.
      {8, 2, 3, 3, 0, 0, true, 3, true},
      {8, 2, 3, 3, 0, 0, false, 2, false},
  };
  for (const Case& c : cases) {
    AxisParams a;
    a.input = c.in;
    a.kernel = c.k;
    a.stride = c.s;
    a.dilation = c.d;
    const Resolved r = resolve_forward(explicit_padding({c.before, c.after}, 1), {a}, c.ceil_mode);
    const std::string what = "in=" + std::to_string(c.in) + " k=" + std::to_string(c.k) +
                             " s=" + std::to_string(c.s) + " d=" + std::to_string(c.d) +
                             (c.ceil_mode ? " ceil" : " floor");
    ASSERT_EQ(r.axes[0].output, c.out) << what;
    EXPECT_EQ(last_window_overhangs(a, r.axes[0]), c.overhangs) << what;
  }
}

TEST(LastWindowOverhangs, OnlyWithCeilModeAndMatchesTheLastTap) {
  std::mt19937 rng(7);
  auto uni = [&](int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
  };
  int overhanging = 0;
  for (int iter = 0; iter < 5000; ++iter) {
    AxisParams a;
    a.input = uni(1, 20);
    a.kernel = uni(1, 5);
    a.stride = uni(1, 4);
    a.dilation = uni(1, 3);
    const int64_t ke = span(a.kernel, a.dilation);
    const bool ceil_mode = uni(0, 1) == 1;
    Resolved r;
    try {
      r = resolve_forward(explicit_padding({uni(0, ke), uni(0, ke)}, 1), {a}, ceil_mode);
    } catch (const PaddingError&) {
      continue;
    }
    const AxisPads& p = r.axes[0];
    const auto taps = walked_taps(p.output - 1, a.kernel, a.stride, p.before, a.dilation);
    const bool past = taps.back() >= a.input + p.after;
    EXPECT_EQ(last_window_overhangs(a, p), past);
    if (!ceil_mode) {
      EXPECT_FALSE(last_window_overhangs(a, p));
    }
    overhanging += past;
  }
  EXPECT_GT(overhanging, 100);
}

TEST(PoolIgnoresPadding, TruthTable) {
  const Border borders[] = {Border::Zeros,     Border::Constant,  Border::Reflect,
                            Border::Symmetric, Border::Replicate, Border::Circular};
  for (Border b : borders) {
    for (bool cip : {false, true}) {
      const std::string what = to_string(b) + (cip ? " count_include_pad" : "");
      // Max pool: zero padding is excluded (never wins); any other border is read.
      EXPECT_EQ(pool_ignores_padding(PoolKind::Max, b, cip), b == Border::Zeros) << what;
      // Average pool: without count_include_pad only real taps count, whatever the border.
      EXPECT_EQ(pool_ignores_padding(PoolKind::Avg, b, cip), !cip) << what;
    }
  }
}

TEST(TransposedBorder, ZerosOnly) {
  EXPECT_NO_THROW(validate_transposed_border(Border::Zeros, "conv_transpose2d"));
  for (Border b : {Border::Constant, Border::Reflect, Border::Symmetric, Border::Replicate,
                   Border::Circular}) {
    try {
      validate_transposed_border(b, "conv_transpose2d");
      ADD_FAILURE() << to_string(b) << ": no error";
    } catch (const PaddingError& e) {
      EXPECT_EQ(e.field, "border");
      EXPECT_EQ(std::string(e.what()),
                "'" + to_string(b) +
                    "' on a conv_transpose2d layer; expected zeros: a transposed convolution's "
                    "pads crop its output instead of extending its input, so there is no padded "
                    "region for a border mode to fill");
    }
  }
  const std::string msg =
      error_of([] { validate_transposed_border(Border::Replicate, "conv_transpose1d"); });
  EXPECT_NE(msg.find("'replicate' on a conv_transpose1d layer"), std::string::npos) << msg;
}

TEST(KerasCausal, Conv1dOnly) {
  EXPECT_TRUE(keras_has_causal(1));
  EXPECT_FALSE(keras_has_causal(2));
  EXPECT_FALSE(keras_has_causal(3));
  const PaddingSpec causal = parse_padding_name("causal");
  EXPECT_NO_THROW(validate_keras_causal(causal, 1));
  for (size_t dims : {2u, 3u}) {
    try {
      validate_keras_causal(causal, dims);
      ADD_FAILURE() << dims << " dims: no error";
    } catch (const PaddingError& e) {
      EXPECT_EQ(std::string(e.what()), "Keras has causal padding for Conv1D only");
      EXPECT_EQ(e.field, "padding");
    }
  }
  for (const char* other : {"valid", "same_upper", "full"})
    EXPECT_NO_THROW(validate_keras_causal(parse_padding_name(other), 2)) << other;
  // padfold itself resolves causal on every axis of a 2-D layer.
  AxisParams a;
  a.input = 6;
  a.kernel = 3;
  const Resolved r = resolve_forward(causal, {a, a});
  EXPECT_EQ(r.axes[1].before, 2);
  EXPECT_EQ(r.axes[1].after, 0);
}

// Names come from one table per enum; the messages list them in table order.
TEST(Names, PaddingNamesAndMessages) {
  EXPECT_EQ(padding_names(),
            "valid, same, same_upper, same_lower, torch_same, scipy_same, causal, full");
  EXPECT_EQ(error_of([] { parse_padding_name("sname"); }),
            "unknown padding 'sname'; expected valid, same (with a convention), same_upper, "
            "same_lower, torch_same, scipy_same, causal, full, or explicit integer pads");
  EXPECT_EQ(error_of([] { parse_padding_name("same", "caffe"); }),
            "unknown convention 'caffe' for padding 'same'; expected one of tensorflow, keras, "
            "onnx, onnx_lower, pytorch, scipy");
  EXPECT_EQ(error_of([] { parse_padding_name("explicit"); }).rfind("unknown padding", 0), 0u);
  EXPECT_EQ(to_string(PadMode::Explicit), "explicit");
  EXPECT_EQ(error_of([] { parse_border("periodic"); }),
            "unknown border mode 'periodic'; expected zeros, constant, reflect, symmetric, "
            "replicate or circular (aliases: mirror, edge, nearest, wrap)");
  EXPECT_EQ(to_string(Border::Circular), "circular");
  EXPECT_EQ(parse_border("Grid-Wrap"), Border::Circular);
}

}  // namespace
}  // namespace padfold

namespace padfold {
namespace {

// A Pad folded into the conv or pool that reads it (fold_explicit_pad): the reader's border and
// pads after the fold, or why it cannot be one layer.
TEST(FoldExplicitPad, TheFillBecomesTheBorderOrAddsToTheReadersPads) {
  const Resolved none{{{0, 0, 5}, {0, 0, 5}}};
  const Resolved own{{{1, 1, 5}, {0, 1, 5}}};
  const ExplicitPad zeros{{2, 0}, {1, 3}, PadFill::Constant, 0.f};
  auto fold = [](const ExplicitPad& p, WindowOp op, const Resolved& r, bool cip = false) {
    return fold_explicit_pad(p, {op, &r, Border::Zeros, cip});
  };
  const auto conv = std::get<FoldedPad>(fold(zeros, WindowOp::Conv, none));
  EXPECT_EQ(conv.border, Border::Zeros);
  EXPECT_EQ(conv.before, (std::vector<int64_t>{2, 0}));
  EXPECT_EQ(conv.after, (std::vector<int64_t>{1, 3}));
  // The Pad's zeros take part in a max: a constant border, not the padding a max ignores.
  const auto max = std::get<FoldedPad>(fold(zeros, WindowOp::MaxPool, none));
  EXPECT_EQ(max.border, Border::Constant);
  EXPECT_EQ(max.border_value, 0.f);
  // ... and in an average, which then counts them.
  EXPECT_TRUE(std::get<FoldedPad>(fold(zeros, WindowOp::AvgPool, none)).count_include_pad);
  const ExplicitPad reflect{{1, 1}, {1, 1}, PadFill::Reflect, 0.f};
  EXPECT_EQ(std::get<FoldedPad>(fold(reflect, WindowOp::Conv, none)).border, Border::Reflect);
  const ExplicitPad edge{{1, 1}, {1, 1}, PadFill::Edge, 0.f};
  EXPECT_EQ(std::get<FoldedPad>(fold(edge, WindowOp::AvgPool, none)).border, Border::Replicate);
  const ExplicitPad twos{{1, 0}, {0, 0}, PadFill::Constant, 2.f};
  const auto c2 = std::get<FoldedPad>(fold(twos, WindowOp::Conv, none));
  EXPECT_EQ(c2.border, Border::Constant);
  EXPECT_EQ(c2.border_value, 2.f);

  // Zeros before a zero-bordered conv with pads of its own: the sums.
  const auto sum = std::get<FoldedPad>(fold(zeros, WindowOp::Conv, own));
  EXPECT_EQ(sum.before, (std::vector<int64_t>{3, 0}));
  EXPECT_EQ(sum.after, (std::vector<int64_t>{2, 4}));
  EXPECT_EQ(std::get<FoldedPad>(fold(zeros, WindowOp::AvgPool, own, true)).before,
            (std::vector<int64_t>{3, 0}));
  // No single border: the reader's own zeros and another fill, a max pool's own padding (never
  // wins) against the Pad's values, an average that leaves its own pads out but counts the Pad's.
  EXPECT_NE(std::get<std::string>(fold(reflect, WindowOp::Conv, own)).find("in mode reflect"),
            std::string::npos);
  EXPECT_NE(std::get<std::string>(fold(twos, WindowOp::Conv, own)).find("with 2"),
            std::string::npos);
  EXPECT_NE(std::get<std::string>(fold(zeros, WindowOp::MaxPool, own)).find("never win the max"),
            std::string::npos);
  EXPECT_NE(std::get<std::string>(fold(zeros, WindowOp::AvgPool, own)).find("count_include_pad"),
            std::string::npos);
  // A conv whose own border is not zeros cannot take the Pad's zeros into its pads.
  EXPECT_TRUE(std::holds_alternative<std::string>(
      fold_explicit_pad(zeros, {WindowOp::Conv, &own, Border::Reflect, false})));
}

// Negative pads are crops (a Slice, ONNX Pad's negative pads): they add to any reader's pads and
// keep its border, unless the reader pads where the crop cuts; a Pad before a reader with crops
// of its own (the Slice after the Pad, folded first) gives the difference.
TEST(FoldExplicitPad, CropsAddUnlessTheReaderPadsWhereTheyCut) {
  const Resolved none{{{0, 0, 5}, {0, 0, 5}}};
  const Resolved own{{{1, 1, 5}, {0, 1, 5}}};
  const ExplicitPad crop{{-1, -2}, {0, 0}, PadFill::Constant, 0.f};
  const auto max = std::get<FoldedPad>(
      fold_explicit_pad(crop, {WindowOp::MaxPool, &none, Border::Replicate, false}));
  EXPECT_EQ(max.before, (std::vector<int64_t>{-1, -2}));
  EXPECT_EQ(max.border, Border::Replicate);  // a crop adds no values: the border stays
  const ExplicitPad crop_w{{0, -2}, {0, 0}, PadFill::Constant, 0.f};
  const auto conv = std::get<FoldedPad>(
      fold_explicit_pad(crop_w, {WindowOp::AvgPool, &own, Border::Zeros, false}));
  EXPECT_EQ(conv.before, (std::vector<int64_t>{1, -2}));
  EXPECT_EQ(conv.after, (std::vector<int64_t>{1, 1}));
  EXPECT_FALSE(conv.count_include_pad);
  // Cropping H's start under the reader's own pad there: no pads say both.
  EXPECT_NE(std::get<std::string>(fold_explicit_pad(crop, {WindowOp::Conv, &own, Border::Zeros}))
                .find("where the crop cuts"),
            std::string::npos);
  // ZeroPadding2D(((0, 1), (0, 1))) then Cropping2D(((1, 0), (1, 0))) before an average pool that
  // counts no padding: the crop folded first, then the Pad's zeros, counted as data.
  const Resolved cropped{{{-1, 0, 5}, {-1, 0, 5}}};
  const ExplicitPad zero_pad{{0, 0}, {1, 1}, PadFill::Constant, 0.f};
  const auto shifted = std::get<FoldedPad>(
      fold_explicit_pad(zero_pad, {WindowOp::AvgPool, &cropped, Border::Zeros, false}));
  EXPECT_EQ(shifted.before, (std::vector<int64_t>{-1, -1}));
  EXPECT_EQ(shifted.after, (std::vector<int64_t>{1, 1}));
  EXPECT_EQ(shifted.border, Border::Zeros);
  EXPECT_TRUE(shifted.count_include_pad);
}


// counted_positions against PyTorch's average-pool divisor (its CPU kernel's closed form), which
// carries over to crops: the window's taps inside the padded input (its end clipped by a ceil_mode
// overhang), or only those on the input when the pool ignores its padding.
TEST(PoolCount, CountedPositionsMatchTheDivisorOfPyTorch) {
  std::mt19937 rng(92);
  auto uni = [&](int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
  };
  int checked = 0, cropped = 0;
  for (int iter = 0; iter < 5000; ++iter) {
    AxisParams a;
    a.input = uni(1, 12);
    a.kernel = uni(1, 5);
    a.stride = uni(1, 4);
    const bool ceil_mode = uni(0, 1) == 1, ignores = uni(0, 1) == 1;
    const PaddingSpec spec = explicit_padding({uni(-2, a.kernel - 1), uni(-2, a.kernel - 1)}, 1);
    Resolved r;
    try {
      r = resolve_forward(spec, {a}, ceil_mode);
    } catch (const PaddingError&) {
      continue;
    }
    const AxisPads& p = r.axes[0];
    const CountedRange range = counted_positions(a, p, ignores);
    for (int64_t o = 0; o < p.output; ++o) {
      const int64_t start = o * a.stride - p.before;
      const int64_t end = std::min(start + a.kernel, a.input + p.after);
      const int64_t divisor =
          ignores ? std::min(end, a.input) - std::max<int64_t>(start, 0) : end - start;
      int64_t counted = 0;
      for (int64_t t = 0; t < a.kernel; ++t)
        counted += start + t >= range.lo && start + t < range.hi;
      ASSERT_EQ(counted, std::max<int64_t>(divisor, 0))
          << "in " << a.input << " k " << a.kernel << " s " << a.stride << " pads " << p.before
          << "/" << p.after << (ceil_mode ? " ceil" : "") << (ignores ? " ignoring" : "")
          << ", window " << o;
      ++checked;
    }
    cropped += p.before < 0 || p.after < 0;
  }
  EXPECT_GT(checked, 5000);
  EXPECT_GT(cropped, 200);
}

}  // namespace
}  // namespace padfold
