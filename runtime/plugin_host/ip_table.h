// SPDX-License-Identifier: MIT
// IpTable: a read-only map from a traced function's ip to its plan, for
// the event path: open addressing over ips, at most half full, built once
// before tracing and never written after (readers take no lock). The
// first of two plans of one ip wins.
//
// Each ip's slot also holds one word its owner computes from the plan at
// build time (ArgCapturer: the common capture, whole), so that the event
// path's common case reads one 16-byte slot and nothing else:
//
//   slots_[i]   u64 ip (0: empty) | u64 word
//   plans_[i]   the plan, for whatever the word does not say
#pragma once

#include <bit>
#include <cstdint>
#include <memory>
#include <vector>

namespace ftjit::plugins {

template <typename Plan>
class IpTable {
 public:
  struct Slot {
    uint64_t ip;
    uint64_t word;
  };

  // Every plan has a nonzero `ip` member; the table keeps pointers into
  // `plans`, which must outlive it unchanged. word_of(const Plan&): the
  // slot's word.
  template <typename WordOf>
  void build(const std::vector<std::unique_ptr<Plan>>& plans, WordOf word_of) {
    const size_t cap = std::bit_ceil(plans.size() * 2 + 2);
    slots_.assign(cap, Slot{0, 0});
    plans_.assign(cap, nullptr);
    mask_ = cap - 1;
    for (const auto& plan : plans) {
      uint64_t i = home(plan->ip);
      while (slots_[i].ip != 0 && slots_[i].ip != plan->ip) i = (i + 1) & mask_;
      if (slots_[i].ip == plan->ip) continue;
      slots_[i] = Slot{plan->ip, word_of(*plan)};
      plans_[i] = plan.get();
    }
  }
  void build(const std::vector<std::unique_ptr<Plan>>& plans) {
    build(plans, [](const Plan&) { return uint64_t{0}; });
  }

  // The slot of `ip`, or nullptr.
  [[gnu::always_inline]] const Slot* slot(uint64_t ip) const {
    const Slot* s = slots_.data();
    if (s == nullptr) return nullptr;
    for (uint64_t i = home(ip);; i = (i + 1) & mask_) {
      if (s[i].ip == ip) [[likely]] return &s[i];
      if (s[i].ip == 0) return nullptr;
    }
  }

  // The plan of a slot slot() returned.
  const Plan* plan_of(const Slot* s) const { return plans_[static_cast<size_t>(s - slots_.data())]; }

  [[gnu::always_inline]] const Plan* find(uint64_t ip) const {
    const Slot* s = slot(ip);
    return s != nullptr ? plan_of(s) : nullptr;
  }

 private:
  uint64_t home(uint64_t ip) const { return (ip * 0x9e3779b97f4a7c15ull >> 20) & mask_; }

  std::vector<Slot> slots_;
  std::vector<const Plan*> plans_;
  uint64_t mask_ = 0;
};

}  // namespace ftjit::plugins
