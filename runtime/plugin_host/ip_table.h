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

struct IpSlot {
  uint64_t ip;  // 0: empty
  uint64_t word;
};

// The slots alone, for the event path: what a plugin's context holds so
// that a lookup is two loads (the slots' address, the slot) and no more.
struct IpView {
  const IpSlot* slots = nullptr;
  uint64_t mask = 0;

  // ftjit_args_fast_find (ftjit/plugin.h) walks ArgCapturer's table with
  // the same hash and probe: a test holds the two together.
  static uint64_t home(uint64_t ip, uint64_t mask) { return (ip * 0x9e3779b97f4a7c15ull >> 20) & mask; }

  // The slot of `ip`, or nullptr.
  [[gnu::always_inline]] const IpSlot* find(uint64_t ip) const {
    const IpSlot* s = slots;
    if (s == nullptr) return nullptr;
    for (uint64_t i = home(ip, mask);; i = (i + 1) & mask) {
      if (s[i].ip == ip) [[likely]] return &s[i];
      if (s[i].ip == 0) return nullptr;
    }
  }
  // A slot's number + 1 (never 0), and back: a handle the event path can
  // give out and take back checked (at(), nullptr when it is not one of
  // `ip`'s), where a pointer could not be.
  uint64_t handle_of(const IpSlot* s) const { return static_cast<uint64_t>(s - slots) + 1; }
  [[gnu::always_inline]] const IpSlot* at(uint64_t handle, uint64_t ip) const {
    const uint64_t i = handle - 1;
    return i <= mask && slots != nullptr && slots[i].ip == ip ? &slots[i] : nullptr;
  }
};

template <typename Plan>
class IpTable {
 public:
  using Slot = IpSlot;

  // Every plan has a nonzero `ip` member; the table keeps pointers into
  // `plans`, which must outlive it unchanged. word_of(const Plan&): the
  // slot's word.
  template <typename WordOf>
  void build(const std::vector<std::unique_ptr<Plan>>& plans, WordOf word_of) {
    const size_t cap = std::bit_ceil(plans.size() * 2 + 2);
    slots_.assign(cap, Slot{0, 0});
    plans_.assign(cap, nullptr);
    const uint64_t mask = cap - 1;
    for (const auto& plan : plans) {
      uint64_t i = IpView::home(plan->ip, mask);
      while (slots_[i].ip != 0 && slots_[i].ip != plan->ip) i = (i + 1) & mask;
      if (slots_[i].ip == plan->ip) continue;
      slots_[i] = Slot{plan->ip, word_of(*plan)};
      plans_[i] = plan.get();
    }
    view_ = IpView{slots_.data(), mask};
  }
  void build(const std::vector<std::unique_ptr<Plan>>& plans) {
    build(plans, [](const Plan&) { return uint64_t{0}; });
  }

  const IpView& view() const { return view_; }

  // The slot of `ip`, or nullptr.
  [[gnu::always_inline]] const Slot* slot(uint64_t ip) const { return view_.find(ip); }

  // The plan of a slot slot() (or the view) returned.
  const Plan* plan_of(const Slot* s) const { return plans_[static_cast<size_t>(s - slots_.data())]; }

  [[gnu::always_inline]] const Plan* find(uint64_t ip) const {
    const Slot* s = slot(ip);
    return s != nullptr ? plan_of(s) : nullptr;
  }

 private:
  std::vector<Slot> slots_;
  std::vector<const Plan*> plans_;
  IpView view_;
};

}  // namespace ftjit::plugins
