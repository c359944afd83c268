#include "compile/block.h"

#include <algorithm>
#include <stdexcept>

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

const Layer* Block::residual() const {
  const Layer& L = last();
  return layers.size() > 1 && L.op == Op::Add ? &L : nullptr;
}

std::vector<const Layer*> Block::chain() const {
  std::vector<const Layer*> c = layers;
  if (residual()) c.pop_back();
  return c;
}

const std::string& Block::residual_source() const {
  const Layer* add = residual();
  if (!add) throw std::logic_error("block " + names() + " ends in no residual add");
  const std::string& conv = consumer().name;
  return add->inputs.at(add->inputs.at(0) == conv ? 1 : 0);
}

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

std::vector<BufferInfo> block_buffers(const Block& block, const WeightForm& weights) {
  if (!block.fused()) return buffer_infos(block.last(), weights);
  std::vector<BufferInfo> out;
  for (const Layer* L : block.layers)
    for (BufferInfo b : buffer_infos(*L, L == &block.consumer() ? weights : WeightForm{})) {
      if (b.role == PF_ROLE_INPUT && L != &block.first()) continue;
      if (b.role == PF_ROLE_OUTPUT && L != &block.last()) continue;
      if (b.role == PF_ROLE_WEIGHTS || b.role == PF_ROLE_BIAS) b.name = L->name + "_" + b.name;
      if (L == block.residual() && b.role == PF_ROLE_OUTPUT) out.push_back(residual_buffer(*L));
      out.push_back(b);
    }
  // The output last, after every layer's weights.
  std::stable_partition(out.begin(), out.end(),
                        [](const BufferInfo& b) { return b.role != PF_ROLE_OUTPUT; });
  return out;
}

std::vector<std::string> block_input_sources(const Block& block) {
  std::vector<std::string> sources;
  if (!block.fused()) return block.first().inputs;
  sources.push_back(block.first().inputs.at(0));
  if (block.residual()) sources.push_back(block.residual_source());
  return sources;
}

}  // namespace padfold
