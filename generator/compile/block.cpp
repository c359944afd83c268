#include "compile/block.h"

#include <algorithm>

#include "schedules/schedule.h"

namespace padfold {

namespace {

// "dw" and "pw" for the depthwise and pointwise convolutions of a block, else the op.
std::string short_op(const Layer& L) {
  const OpClass c = classify(L);
  if (c == OpClass::Depthwise) return "dw";
  if (c == OpClass::Pointwise) return "pw";
  return L.op_name;
}

}  // namespace

std::string Block::kind() const {
  if (!fused()) return last().op_name;
  std::string k;
  for (const Layer* L : layers) k += (k.empty() ? "" : "->") + short_op(*L);
  return k;
}

std::string Block::names() const {
  std::string n;
  for (const Layer* L : layers) n += (n.empty() ? "" : "+") + L->name;
  return n;
}

std::vector<BufferInfo> block_buffers(const Block& block) {
  if (!block.fused()) return buffer_infos(block.last());
  std::vector<BufferInfo> out;
  for (const Layer* L : block.layers)
    for (BufferInfo b : buffer_infos(*L)) {
      if (b.role == PF_ROLE_INPUT && L != &block.first()) continue;
      if (b.role == PF_ROLE_OUTPUT && L != &block.last()) continue;
      if (b.role == PF_ROLE_WEIGHTS || b.role == PF_ROLE_BIAS) b.name = L->name + "_" + b.name;
      out.push_back(b);
    }
  // The output last, after every layer's weights.
  std::stable_partition(out.begin(), out.end(),
                        [](const BufferInfo& b) { return b.role != PF_ROLE_OUTPUT; });
  return out;
}

}  // namespace padfold
