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

// An immutable set of entry addresses (open addressing).
class IpSet {
 public:
  explicit IpSet(std::span<const uint64_t> ips);
  bool contains(uint64_t ip) const {
    size_t i = slot_of(ip);
    for (;;) {
      uint64_t v = table_[i];
      if (v == ip) return true;
      if (v == 0) return false;
      i = (i + 1) & mask_;
    }
  }

 private:
  size_t slot_of(uint64_t ip) const {
    return static_cast<size_t>((ip >> 2) * 0x9e3779b97f4a7c15ull >> shift_) & mask_;
  }
  std::vector<uint64_t> table_;
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

// In TSan builds, generated trampolines call this instead of ops->func.
extern "C" void ftjit_tsan_callback_shim(uint64_t ip, uint64_t parent_ip, ftjit_ops* ops,
                                         ftjit_regs* regs);

}  // namespace ftjit
