// SPDX-License-Identifier: MIT
// IpTable: a read-only map from a traced function's ip to its plan, for
// the event path: open addressing over ips, at most half full, built once
// before tracing and never written after (readers take no lock). The
// first of two plans of one ip wins.
#pragma once

#include <bit>
#include <cstdint>
#include <memory>
#include <vector>

namespace ftjit::plugins {

template <typename Plan>
class IpTable {
 public:
  // Every plan has a nonzero `ip` member; the table keeps pointers into
  // `plans`, which must outlive it unchanged.
  void build(const std::vector<std::unique_ptr<Plan>>& plans) {
    const size_t cap = std::bit_ceil(plans.size() * 2 + 2);
    ips_.assign(cap, 0);
    slots_.assign(cap, nullptr);
    mask_ = cap - 1;
    for (const auto& plan : plans) {
      uint64_t i = home(plan->ip);
      while (ips_[i] != 0 && ips_[i] != plan->ip) i = (i + 1) & mask_;
      if (ips_[i] == plan->ip) continue;
      ips_[i] = plan->ip;
      slots_[i] = plan.get();
    }
  }

  [[gnu::always_inline]] const Plan* find(uint64_t ip) const {
    if (ips_.empty()) return nullptr;
    for (uint64_t i = home(ip);; i = (i + 1) & mask_) {
      if (ips_[i] == ip) [[likely]] return slots_[i];
      if (ips_[i] == 0) return nullptr;
    }
  }

 private:
  uint64_t home(uint64_t ip) const { return (ip * 0x9e3779b97f4a7c15ull >> 20) & mask_; }

  std::vector<uint64_t> ips_;  // 0: empty
  std::vector<const Plan*> slots_;
  uint64_t mask_ = 0;
};

}  // namespace ftjit::plugins
