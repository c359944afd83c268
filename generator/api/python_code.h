// Pieces of Python source the reports and the ported modules write: literals, identifiers, pads
// in F.pad's order, the permutations between channels-first and channels-last tensors.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <vector>

namespace padfold {

// A Python string literal of `s` (control characters escaped).
std::string python_string(const std::string& s);

// `s` made safe inside a comment or a docstring of generated code: control characters as spaces,
// double quotes as single ones, backslashes as slashes. Names and descriptions come from the
// model file: none of it may become code.
std::string python_text(const std::string& s);

// "(b_last, a_last, ..., b_first, a_first)": per-axis pads (outermost axis first) in the order
// F.pad and nn.ZeroPad*d take them, the last axis first.
std::string torch_pad_order(const std::vector<int64_t>& before, const std::vector<int64_t>& after);

// "((b0, a0), (b1, a1))" (one axis: "(b0, a0)"): Keras's ZeroPadding*D and Cropping*D argument.
std::string keras_pairs(const std::vector<int64_t>& before, const std::vector<int64_t>& after);

// A float literal that reads back as the same float32.
std::string python_float(float v);

// A tuple literal: "(3,)" for one value, "(3, 3)" for two.
std::string python_tuple(const std::vector<int64_t>& v);
// An int-or-tuple argument as PyTorch and Keras take them: "3" for one value, "(3, 3)" for two.
std::string python_ints(const std::vector<int64_t>& v);

// `name` as a Python identifier not in `used` (then added to it).
std::string python_identifier(const std::string& name, std::set<std::string>& used);

// The permutation (numpy.transpose's) taking a rank-`rank` tensor with channels first or last to
// the other arrangement or the same (then the identity).
std::vector<int64_t> channel_perm(int rank, bool from_channels_last, bool to_channels_last);
bool is_identity(const std::vector<int64_t>& perm);

}  // namespace padfold
