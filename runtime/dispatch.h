// SPDX-License-Identifier: MIT
// The C++ side of the shared trampolines: the list walker (ftrace's
// ops_list_func) and the per-site multiplexer that a call-ops slot points to
// when several ops share a site. Both read immutable snapshots that the
// engine replaces and frees only after a grace period.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "ftjit/ftjit.h"

namespace ftjit {

// An immutable set of entry addresses, in one of two forms:
//  - small sets: an open-addressing table of the addresses themselves, one
//    load a lookup (the list walker asks every ops, relevant or not);
//  - large sets: the 4 KiB pages that hold at least one address, in an
//    open-addressing table (a million functions fill a few thousand
//    pages), each with a bitmap of its bytes. Built in address order, this
//    touches memory sequentially: a table of the addresses themselves is
//    written at random, a cache miss per address (10+ ms a million).
class IpSet {
 public:
  // `ips` in any order (sites come sorted per module: cheapest so).
  explicit IpSet(std::span<const uint64_t> ips);
  bool contains(uint64_t ip) const {
    if (!paged_) {
      size_t i = flat_slot(ip);
      for (;;) {
        const uint64_t v = flat_[i];
        if (v == ip) return ip != 0;  // 0 is the empty mark, never a member
        if (v == 0) return false;
        i = (i + 1) & mask_;
      }
    }
    const uint64_t page = page_key(ip);
    size_t i = page_slot(page);
    for (;;) {
      const Slot& s = pages_[i];
      if (s.page == page) {
        const uint64_t word = bits_[s.bits + ((ip & kPageMask) >> 6)];
        return (word >> (ip & 63)) & 1;
      }
      if (s.page == 0) return false;
      i = (i + 1) & mask_;
    }
  }

  // Sets of more addresses than this are paged.
  static constexpr size_t kFlatMax = size_t{1} << 16;

 private:
  static constexpr unsigned kPageShift = 12;
  static constexpr uint64_t kPageMask = (uint64_t{1} << kPageShift) - 1;
  static constexpr size_t kWordsPerPage = (size_t{1} << kPageShift) / 64;
  // The page number + 1: 0 marks an empty slot.
  static uint64_t page_key(uint64_t ip) { return (ip >> kPageShift) + 1; }
  struct Slot {
    uint64_t page;   // page_key; 0: empty
    uint64_t bits;   // its bitmap's first word in bits_
  };
  size_t flat_slot(uint64_t ip) const {
    return static_cast<size_t>((ip >> 2) * 0x9e3779b97f4a7c15ull >> shift_) & mask_;
  }
  size_t page_slot(uint64_t page) const {
    return static_cast<size_t>(page * 0x9e3779b97f4a7c15ull >> shift_) & mask_;
  }
  void build_flat(std::span<const uint64_t> ips);
  void build_paged(std::span<const uint64_t> ips);
  bool paged_ = false;
  std::vector<uint64_t> flat_;  // 0: empty (no entry lies at address 0)
  std::vector<Slot> pages_;
  std::vector<uint64_t> bits_;
  size_t mask_ = 0;
  unsigned shift_ = 0;
};

// Every ops the list trampoline walks, each with the ips it traces.
struct ListTable {
  struct Entry {
    ftjit_ops* ops;
    const IpSet* ips;
  };
  std::vector<Entry> entries;
};

// The published list table (nullptr: none).
extern std::atomic<const ListTable*> g_list_table;

// The list trampoline's callback: calls every ops whose set holds `ip`.
extern "C" void ftjit_list_dispatch(uint64_t ip, uint64_t parent_ip, ftjit_ops* ops,
                                    ftjit_regs* regs);

// A site's multiplexer: a real ftjit_ops (so the call-ops trampoline can
// call it like any other) whose func calls each attached ops in turn.
struct SiteMux {
  ftjit_ops ops;
  std::vector<ftjit_ops*> attached;
};

std::unique_ptr<SiteMux> make_site_mux(std::vector<ftjit_ops*> attached);

// ThreadSanitizer cannot see the happens-before edge that patching gives
// (a release store, then membarrier, then JIT code that loads what was
// published). In TSan builds the engine announces each publication and
// every dispatch path acquires it; elsewhere both are empty.
// Likewise the edge from a thread leaving a callback to the grace period
// that then frees what it read (the exit count is bumped by JIT code and
// read by the kernel for the waiter).
#if defined(__SANITIZE_THREAD__)
inline constexpr bool kTsanShim = true;
void tsan_publish();
void tsan_consume();
void tsan_leave();
void tsan_after_grace();
#else
inline constexpr bool kTsanShim = false;
inline void tsan_publish() {}
inline void tsan_consume() {}
inline void tsan_leave() {}
inline void tsan_after_grace() {}
#endif

// The callback of an inline trampoline's fallback (backends/backend.h,
// InlineRequest): a thread's first inline call gets its counter block
// (runtime/inline_blocks.h), then ops->func runs for this one call.
extern "C" void ftjit_inline_first_call(uint64_t ip, uint64_t parent_ip, ftjit_ops* ops,
                                        ftjit_regs* regs);

// In TSan builds, generated trampolines call this instead of ops->func.
extern "C" void ftjit_tsan_callback_shim(uint64_t ip, uint64_t parent_ip, ftjit_ops* ops,
                                         ftjit_regs* regs);

}  // namespace ftjit
