// SPDX-License-Identifier: MIT
// List walking and site multiplexing.
#include "runtime/dispatch.h"

#include <bit>

#include "backends/shadow_layout.h"
#include "runtime/inline_blocks.h"
#include "runtime/shadow_stack.h"

namespace ftjit {

std::atomic<const ListTable*> g_list_table{nullptr};

#if defined(__SANITIZE_THREAD__)
extern "C" void __tsan_acquire(void* addr);
extern "C" void __tsan_release(void* addr);
namespace {
char g_publication;
char g_departure;
}  // namespace
void tsan_publish() { __tsan_release(&g_publication); }
void tsan_consume() { __tsan_acquire(&g_publication); }
void tsan_leave() { __tsan_release(&g_departure); }
void tsan_after_grace() { __tsan_acquire(&g_departure); }
#endif

extern "C" void ftjit_tsan_callback_shim(uint64_t ip, uint64_t parent_ip, ftjit_ops* ops,
                                         ftjit_regs* regs) {
  tsan_consume();
  ops->func(ip, parent_ip, ops, regs);
  tsan_leave();
}

extern "C" void ftjit_inline_first_call(uint64_t ip, uint64_t parent_ip, ftjit_ops* ops,
                                        ftjit_regs* regs) {
  tsan_consume();
  const bool block = ensure_inline_block();
  // A sampled latency site whose call found no block: this call is its
  // first turn on this thread, the next N-1 are not.
  if (const uint64_t pending = ftjit_inline_pending_record; pending != 0) {
    ftjit_inline_pending_record = 0;
    const auto* record = reinterpret_cast<const ExitRecord*>(pending);
    if (block && record->site == ip && record->sample_period > 1) {
      ftjit_inline_block[record->block_offset / 8 + shadow_layout::kHistCountdown] = record->sample_period - 1;
    }
  }
  ftjit_inline_fallback_call = 1;
  ops->func(ip, parent_ip, ops, regs);
  ftjit_inline_fallback_call = 0;
  tsan_leave();
}

IpSet::IpSet(std::span<const uint64_t> ips) {
  paged_ = ips.size() > kFlatMax;
  if (paged_) {
    build_paged(ips);
  } else {
    build_flat(ips);
  }
}

void IpSet::build_flat(std::span<const uint64_t> ips) {
  const size_t cap = std::bit_ceil(ips.size() * 2 + 2);
  flat_.assign(cap, 0);
  mask_ = cap - 1;
  shift_ = 64 - static_cast<unsigned>(std::countr_zero(cap));
  for (uint64_t ip : ips) {
    if (ip == 0) continue;  // the empty mark; never an entry
    size_t i = flat_slot(ip);
    while (flat_[i] != 0 && flat_[i] != ip) i = (i + 1) & mask_;
    flat_[i] = ip;
  }
}

void IpSet::build_paged(std::span<const uint64_t> ips) {
  // Page changes along the input bound the distinct pages (equal when the
  // input is sorted, as it is per module).
  size_t runs = 0;
  uint64_t last = 0;
  for (uint64_t ip : ips) {
    runs += page_key(ip) != last;
    last = page_key(ip);
  }
  const size_t cap = std::bit_ceil(runs * 2 + 2);
  pages_.assign(cap, Slot{0, 0});
  mask_ = cap - 1;
  shift_ = 64 - static_cast<unsigned>(std::countr_zero(cap));
  bits_.reserve(runs * kWordsPerPage);
  last = 0;
  size_t at = 0;  // the current page's bitmap
  for (uint64_t ip : ips) {
    const uint64_t page = page_key(ip);
    if (page != last) {
      size_t i = page_slot(page);
      while (pages_[i].page != 0 && pages_[i].page != page) i = (i + 1) & mask_;
      if (pages_[i].page == 0) {
        pages_[i] = Slot{page, bits_.size()};
        bits_.resize(bits_.size() + kWordsPerPage, 0);
      }
      at = pages_[i].bits;
      last = page;
    }
    bits_[at + ((ip & kPageMask) >> 6)] |= uint64_t{1} << (ip & 63);
  }
}

namespace {

// One ops on the way: a direct ops does not run code here, it names the
// trampoline the shared trampoline continues to after restoring registers.
inline void call_one(ftjit_ops* o, uint64_t ip, uint64_t parent_ip, ftjit_regs* regs) {
  if (o->strategy == FTJIT_STRATEGY_DIRECT) {
    regs->direct = reinterpret_cast<uint64_t>(o->direct_trampoline);
  } else {
    o->func(ip, parent_ip, o, regs);
  }
}

void mux_func(uint64_t ip, uint64_t parent_ip, ftjit_ops* ops, ftjit_regs* regs) {
  tsan_consume();
  auto* mux = static_cast<SiteMux*>(ops->private_data);
  for (ftjit_ops* o : mux->attached) call_one(o, ip, parent_ip, regs);
}

}  // namespace

extern "C" void ftjit_list_dispatch(uint64_t ip, uint64_t parent_ip, ftjit_ops*,
                                    ftjit_regs* regs) {
  tsan_consume();
  const ListTable* table = g_list_table.load(std::memory_order_acquire);
  if (table == nullptr) return;
  for (const ListTable::Entry& e : table->entries) {
    if (e.ips->contains(ip)) call_one(e.ops, ip, parent_ip, regs);
  }
  tsan_leave();
}

std::unique_ptr<SiteMux> make_site_mux(std::vector<ftjit_ops*> attached) {
  auto mux = std::make_unique<SiteMux>();
  ftjit_ops_init(&mux->ops);
  mux->ops.func = mux_func;
  mux->ops.private_data = mux.get();
  mux->attached = std::move(attached);
  return mux;
}

}  // namespace ftjit
