// The natural keys of the tuning database: what a measurement is of (the layer's canonical
// resolved signature, the candidate's resolved knobs), where (normalised target features, machine)
// and with what (toolchain). Never the spec's spelling: two specs whose pads resolve alike share
// records, and `host` keys like the target string it stands for.
#pragma once

#include <Halide.h>

#include <string>
#include <utility>
#include <vector>

#include "frontend/spec.h"
#include "schedules/knobs.h"

namespace padfold {

// Canonical JSON of what the kernel computes: op, dims, dtype, layouts, resolved per-side pads,
// border (and its value), stride, dilation, groups, epilogue. No layer name, no convention.
std::string layer_signature(const Layer& layer);

// The target as arch-bits-os plus its sorted CPU features (and the CPU it is tuned for).
std::string target_key(const Halide::Target& target);

// "halide-<major>.<minor>.<patch>/<scope>-space-<version>/<implementation>-<version>+...": the
// knob scope the target's schedules read with its schedule-space version (schedules/knobs.h), and
// each implementation that can compute the layer with its version (schedules/schedule.h), so that
// a change to one scope's space, or to one implementation, leaves the records of the others valid.
std::string toolchain_key(const Layer& layer, const Halide::Target& target);
// A toolchain key's Halide version and knob scope, without the implementations:
// "halide-<major>.<minor>.<patch>/<scope>-space-<version>/" (what transfer between signatures
// shares: knobs carried over are measured again).
std::string toolchain_space(const std::string& toolchain);
// The same of a scope and implementations given (what toolchain_key composes).
std::string toolchain_key(const std::string& scope,
                          const std::vector<std::pair<std::string, int>>& implementations);

// $PADFOLD_MACHINE_ID, else /etc/machine-id, else the host name; with the CPU model name.
std::string machine_id();

// The candidate's key: a hex hash of knobs_text.
std::string candidate_key(const ScheduleParams& resolved);
// The resolved knobs as the canonical JSON the database stores: those off their declared defaults
// only (no row name), so that a knob added later at a default that keeps the schedules as they were
// changes no stored text or key.
std::string knobs_text(const ScheduleParams& resolved);
// The knobs a database record stores (knobs_text), read back.
ScheduleParams knobs_from_text(const std::string& text);

// 64-bit FNV-1a, stable across runs and machines (shards partition by it).
uint64_t stable_hash(const std::string& text);

}  // namespace padfold
