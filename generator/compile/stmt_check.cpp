#include "compile/stmt_check.h"

#include <algorithm>
#include <cctype>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <regex>
#include <sstream>

#include "algorithm/weight_form.h"

namespace padfold {

namespace {

using Env = std::map<std::string, int64_t>;
using Value = std::optional<int64_t>;

// --- the statement as a tree of blocks ----------------------------------------------------------

struct Node {
  std::string header;  // the line opening the block ("" for the root)
  int line = 0;
  // In order: a statement line (child == nullptr) or a nested block.
  struct Item {
    std::string text;
    std::unique_ptr<Node> child;
  };
  std::vector<Item> items;
  bool has_loop_inside = false;
  double weight = 0;
};

std::string trim(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t\r") + 1 - b);
}

bool is_for(const std::string& header) {
  return header.rfind("for (", 0) == 0 || header.rfind("parallel for (", 0) == 0;
}

std::unique_ptr<Node> parse(const std::string& text) {
  auto root = std::make_unique<Node>();
  std::vector<Node*> stack{root.get()};
  std::istringstream in(text);
  int n = 0;
  for (std::string raw; std::getline(in, raw);) {
    ++n;
    const std::string s = trim(raw);
    if (s.empty()) continue;
    const bool closes = s[0] == '}';
    const bool opens = s.back() == '{';
    if (closes && stack.size() > 1) stack.pop_back();
    if (opens) {
      auto child = std::make_unique<Node>();
      child->header = closes ? trim(s.substr(1)) : s;  // "} else {" -> "else {"
      child->line = n;
      Node* raw_child = child.get();
      stack.back()->items.push_back({"", std::move(child)});
      stack.push_back(raw_child);
    } else if (!closes) {
      stack.back()->items.push_back({s, nullptr});
    }
  }
  std::function<bool(Node&)> mark = [&](Node& node) {
    bool any = false;
    for (auto& item : node.items)
      if (item.child) any = (mark(*item.child) || is_for(item.child->header)) || any;
    node.has_loop_inside = any;
    return any;
  };
  mark(*root);
  return root;
}

// --- integer expressions (Halide's: floor division, min, max, comparisons) ----------------------

class Evaluator {
 public:
  Evaluator(const std::string& text, const Env& env) : s_(text), env_(env) {}
  Value run() {
    Value v = logical_or();
    skip();
    return pos_ == s_.size() ? v : std::nullopt;
  }

 private:
  void skip() {
    while (pos_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[pos_]))) ++pos_;
  }
  bool eat(const std::string& op) {
    skip();
    if (s_.compare(pos_, op.size(), op) != 0) return false;
    pos_ += op.size();
    return true;
  }
  static Value both(Value a, Value b, const std::function<int64_t(int64_t, int64_t)>& f) {
    if (!a || !b) return std::nullopt;
    return f(*a, *b);
  }
  Value logical_or() {
    Value v = logical_and();
    while (eat("||")) v = both(v, logical_and(), [](int64_t a, int64_t b) { return a || b; });
    return v;
  }
  Value logical_and() {
    Value v = compare();
    while (eat("&&")) v = both(v, compare(), [](int64_t a, int64_t b) { return a && b; });
    return v;
  }
  Value compare() {
    Value v = sum();
    for (;;) {
      if (eat("<="))
        v = both(v, sum(), [](int64_t a, int64_t b) { return a <= b; });
      else if (eat(">="))
        v = both(v, sum(), [](int64_t a, int64_t b) { return a >= b; });
      else if (eat("=="))
        v = both(v, sum(), [](int64_t a, int64_t b) { return a == b; });
      else if (eat("!="))
        v = both(v, sum(), [](int64_t a, int64_t b) { return a != b; });
      else if (eat("<"))
        v = both(v, sum(), [](int64_t a, int64_t b) { return a < b; });
      else if (eat(">"))
        v = both(v, sum(), [](int64_t a, int64_t b) { return a > b; });
      else
        return v;
    }
  }
  Value sum() {
    Value v = product();
    for (;;) {
      if (eat("+"))
        v = both(v, product(), [](int64_t a, int64_t b) { return a + b; });
      else if (eat("-"))
        v = both(v, product(), [](int64_t a, int64_t b) { return a - b; });
      else
        return v;
    }
  }
  static int64_t floor_div(int64_t a, int64_t b) {
    const int64_t q = a / b;
    return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
  }
  Value product() {
    Value v = unary();
    for (;;) {
      if (eat("*")) {
        v = both(v, unary(), [](int64_t a, int64_t b) { return a * b; });
      } else if (eat("/")) {
        Value d = unary();
        v = (v && d && *d != 0) ? Value(floor_div(*v, *d)) : std::nullopt;
      } else if (eat("%")) {
        Value d = unary();
        v = (v && d && *d != 0) ? Value(*v - floor_div(*v, *d) * *d) : std::nullopt;
      } else {
        return v;
      }
    }
  }
  Value unary() {
    if (eat("-")) {
      Value v = unary();
      return v ? Value(-*v) : std::nullopt;
    }
    if (eat("!")) {
      Value v = unary();
      return v ? Value(!*v) : std::nullopt;
    }
    return primary();
  }
  Value primary() {
    skip();
    if (eat("(")) {
      Value v = logical_or();
      return eat(")") ? v : std::nullopt;
    }
    if (pos_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[pos_]))) {
      int64_t v = 0;
      while (pos_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[pos_])))
        v = v * 10 + (s_[pos_++] - '0');
      return v;
    }
    std::string name;
    while (pos_ < s_.size() && (std::isalnum(static_cast<unsigned char>(s_[pos_])) ||
                                s_[pos_] == '_' || s_[pos_] == '.' || s_[pos_] == '$'))
      name += s_[pos_++];
    if (name.empty()) return std::nullopt;
    if ((name == "min" || name == "max") && eat("(")) {
      Value a = logical_or();
      if (!eat(",")) return std::nullopt;
      Value b = logical_or();
      if (!eat(")")) return std::nullopt;
      return both(a, b, [&](int64_t x, int64_t y) {
        return name == "min" ? std::min(x, y) : std::max(x, y);
      });
    }
    const auto it = env_.find(name);
    return it == env_.end() ? std::nullopt : Value(it->second);
  }

  const std::string& s_;
  const Env& env_;
  size_t pos_ = 0;
};

Value eval(const std::string& text, const Env& env) {
  return Evaluator(text, env).run();
}

// "for (v, min, extent) {" -> v, min, extent
bool for_parts(const std::string& header, std::string& var, std::string& min, std::string& extent) {
  const size_t open = header.find('(');
  const size_t close = header.rfind(')');
  if (open == std::string::npos || close == std::string::npos || close < open) return false;
  const std::string inside = header.substr(open + 1, close - open - 1);
  std::vector<std::string> parts;
  int depth = 0;
  std::string cur;
  for (char c : inside) {
    if (c == ',' && depth == 0) {
      parts.push_back(trim(cur));
      cur.clear();
      continue;
    }
    depth += c == '(' ? 1 : c == ')' ? -1 : 0;
    cur += c;
  }
  parts.push_back(trim(cur));
  if (parts.size() != 3) return false;
  var = parts[0];
  min = parts[1];
  extent = parts[2];
  return true;
}

// "if (cond) {" / "else if (cond) {" -> cond
std::string condition_of(const std::string& header) {
  const size_t open = header.find('(');
  const size_t close = header.rfind(')');
  return open == std::string::npos || close == std::string::npos
             ? ""
             : header.substr(open + 1, close - open - 1);
}

// --- simulation: how often each block runs ------------------------------------------------------

void simulate(Node& node, Env env, double times);

void simulate_items(Node& node, Env& env, double times) {
  static const std::regex let(R"(^let ([\w.$]+) = (.*)$)");
  for (size_t i = 0; i < node.items.size(); ++i) {
    auto& item = node.items[i];
    if (!item.child) {
      std::smatch m;
      if (std::regex_match(item.text, m, let)) {
        const Value v = eval(m[2].str(), env);
        if (v)
          env[m[1].str()] = *v;
        else
          env.erase(m[1].str());
      }
      continue;
    }
    Node& child = *item.child;
    if (child.header.rfind("if (", 0) == 0) {
      // An if/else-if/else chain: only the branch taken runs (all of them when unknown).
      size_t j = i;
      bool taken = false;
      for (; j < node.items.size() && node.items[j].child; ++j) {
        Node& branch = *node.items[j].child;
        const bool is_else = branch.header.rfind("else", 0) == 0;
        if (j > i && !is_else) break;
        if (taken) continue;
        const bool plain_else = branch.header == "else {";
        const Value c = plain_else ? Value(1) : eval(condition_of(branch.header), env);
        if (!c) {
          simulate(branch, env, times);
        } else if (*c) {
          simulate(branch, env, times);
          taken = true;
        }
      }
      i = j - 1;
      continue;
    }
    simulate(child, env, times);
  }
}

void simulate(Node& node, Env env, double times) {
  std::string var, min, extent;
  if (is_for(node.header) && for_parts(node.header, var, min, extent)) {
    const Value lo = eval(min, env), n = eval(extent, env);
    const int64_t count = n ? std::max<int64_t>(*n, 0) : 1;
    node.weight += times * static_cast<double>(count);
    if (count == 0 || !node.has_loop_inside) return;
    env[var] = lo ? *lo : 0;  // inner extents seen from the first iteration
    simulate_items(node, env, times * static_cast<double>(count));
    return;
  }
  node.weight += times;
  simulate_items(node, env, times);
}

// --- steady state -------------------------------------------------------------------------------

// A loop over one of the output's pure variables (stage s0): the loops partitioning splits.
bool is_output_loop(const Node& n, const std::string& output) {
  std::string var, min, extent;
  return is_for(n.header) && for_parts(n.header, var, min, extent) &&
         var.rfind(output + ".s0.", 0) == 0;
}

bool is_branch(const Node& n) {
  return n.header.rfind("if (", 0) == 0 || n.header.rfind("else", 0) == 0;
}

const std::regex& test_pattern() {
  static const std::regex re(R"(\bselect\(|\blikely\(|\bif \(|\bmin\(|\bmax\()");
  return re;
}

// Whether the min or max call opening at `open` (its '(') clamps a value against a float
// constant, scalar or broadcast ("x16(0.000000f)"): an activation (ReLU, ReLU6, a clip) in the
// epilogue, not a test of where the window lies. The border's clamps are of integer positions.
bool clamps_to_float_constant(const std::string& text, size_t open) {
  static const std::regex constant(R"(^(x\d+\()?-?[0-9.]+(e[-+]?[0-9]+)?f\)?$)");
  std::vector<std::string> args(1);
  int depth = 0;
  for (size_t i = open + 1; i < text.size(); ++i) {
    const char c = text[i];
    if (depth == 0 && c == ')') break;
    if (depth == 0 && c == ',') {
      args.emplace_back();
      continue;
    }
    if (c == '(' || c == '[') ++depth;
    if (c == ')' || c == ']') --depth;
    args.back() += c;
  }
  return std::any_of(args.begin(), args.end(),
                     [](const std::string& a) { return std::regex_match(trim(a), constant); });
}

// The first boundary test in a statement line, or npos.
size_t first_test(const std::string& text) {
  for (std::sregex_iterator it(text.begin(), text.end(), test_pattern()), end; it != end; ++it) {
    const std::string call = it->str(0);
    const size_t at = static_cast<size_t>(it->position(0));
    if ((call == "min(" || call == "max(") && clamps_to_float_constant(text, at + call.size() - 1))
      continue;
    return at;
  }
  return std::string::npos;
}

void collect(const Node& node, bool steady, const std::string& output, StmtReport& report) {
  if (is_for(node.header) && !node.has_loop_inside) {
    StmtLoop loop;
    loop.line = node.line;
    loop.header = node.header;
    loop.steady = steady;
    loop.iterations = node.weight;
    std::function<void(const Node&)> find = [&](const Node& n) {
      for (const auto& item : n.items) {
        if (!loop.test.empty()) return;
        const std::string& text = item.child ? item.child->header : item.text;
        if (const size_t at = first_test(text); at != std::string::npos)
          loop.test = text.substr(at >= 40 ? at - 40 : 0, 150);
        if (item.child) find(*item.child);
      }
    };
    find(node);
    report.innermost.push_back(loop);
    return;
  }
  // Alternatives: consecutive branches, or consecutive loops over the output's variables (with
  // the blocks between them: a peeled tile). The heaviest alternative is the steady state.
  const auto& items = node.items;
  for (size_t i = 0; i < items.size(); ++i) {
    if (!items[i].child) continue;
    const Node& c = *items[i].child;
    const bool alt = is_branch(c) || is_output_loop(c, output);
    if (!alt) {
      collect(c, steady, output, report);
      continue;
    }
    size_t j = i;
    std::vector<const Node*> group;
    for (; j < items.size(); ++j) {
      if (!items[j].child) continue;
      const Node& d = *items[j].child;
      if (is_branch(c) ? !is_branch(d) || (j > i && d.header.rfind("if (", 0) == 0)
                       : !is_output_loop(d, output))
        break;
      group.push_back(&d);
    }
    const Node* heaviest = group.front();
    for (const Node* g : group)
      if (g->weight > heaviest->weight) heaviest = g;
    for (const Node* g : group) collect(*g, steady && g == heaviest, output, report);
    i = j - 1;
  }
}

}  // namespace

int StmtReport::steady_loops() const {
  int n = 0;
  for (const StmtLoop& l : innermost) n += l.steady;
  return n;
}
int StmtReport::steady_loops_with_tests() const {
  int n = 0;
  for (const StmtLoop& l : innermost) n += l.steady && !l.test.empty();
  return n;
}
int StmtReport::border_loops() const {
  return static_cast<int>(innermost.size()) - steady_loops();
}
int StmtReport::border_loops_with_tests() const {
  int n = 0;
  for (const StmtLoop& l : innermost) n += !l.steady && !l.test.empty();
  return n;
}

StmtReport check_stmt(const std::string& text) {
  std::unique_ptr<Node> root = parse(text);
  StmtReport report;
  // The parallel row loop is an internal function called through halide_do_par_for(task, min,
  // extent, ...) (its closure argument "closure_arg", or "closure_arg$1" where Halide numbered
  // it: an update stage's loop); each row value is simulated. Without one, the kernel's own
  // function is.
  static const std::regex par_for(
      R"(halide_do_par_for\(\(halide_task_t\)::([\w]+), (-?\d+), (\d+),)");
  static const std::regex task(
      R"(^internal func (\w+) \(__user_context, ([\w.$]+), closure_arg(\$\d+)?\) \{$)");
  static const std::regex kernel(R"(^\w+ func (\w+) \()");
  std::map<std::string, std::pair<int64_t, int64_t>> ranges;
  for (std::sregex_iterator it(text.begin(), text.end(), par_for), end; it != end; ++it)
    ranges[(*it)[1].str()] = {std::stoll((*it)[2].str()), std::stoll((*it)[3].str())};
  std::string output;  // the output Func's name: the kernel's last argument
  for (const auto& item : root->items) {
    if (!item.child) continue;
    std::smatch m;
    const std::string& h = item.child->header;
    if (std::regex_search(h, m, kernel) && h.rfind("internal", 0) != 0) {
      const size_t close = h.rfind(')');
      const size_t comma = h.rfind(", ", close);
      output = trim(h.substr(comma == std::string::npos ? h.find('(') + 1 : comma + 2,
                             close - (comma == std::string::npos ? h.find('(') + 1 : comma + 2)));
    }
  }
  bool any_task = false;
  for (auto& item : root->items) {
    if (!item.child) continue;
    std::smatch m;
    if (!std::regex_match(item.child->header, m, task)) continue;
    const auto r = ranges.find(m[1].str());
    if (r == ranges.end()) continue;
    any_task = true;
    for (int64_t v = r->second.first; v < r->second.first + r->second.second; ++v) {
      Env env{{m[2].str(), v}};
      simulate_items(*item.child, env, 1);
    }
    collect(*item.child, true, output, report);
  }
  if (!any_task) {
    for (auto& item : root->items) {
      if (!item.child || item.child->header.rfind("internal", 0) == 0) continue;
      Env env;
      simulate(*item.child, env, 1);
      collect(*item.child, true, output, report);
    }
  }
  return report;
}

std::vector<std::string> per_call_weight_stages(const std::string& text) {
  std::vector<std::string> stages;
  std::istringstream in(text);
  for (std::string raw; std::getline(in, raw);) {
    const std::string s = trim(raw);
    if (s.rfind("produce ", 0) != 0) continue;
    std::string name = s.substr(8, s.find_first_of(" {", 8) - 8);
    name = name.substr(0, name.find('$'));  // Halide's suffix of a Func's second definition
    const bool transforms =
        std::any_of(std::begin(kPerCallWeightStages), std::end(kPerCallWeightStages),
                    [&](const char* stage) { return name.find(stage) != std::string::npos; });
    if (transforms && std::find(stages.begin(), stages.end(), name) == stages.end())
      stages.push_back(name);
  }
  return stages;
}

}  // namespace padfold
