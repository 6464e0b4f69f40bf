// SPDX-License-Identifier: MIT
// List walking and site multiplexing.
#include "runtime/dispatch.h"

#include <bit>

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

IpSet::IpSet(std::span<const uint64_t> ips) {
  size_t cap = std::bit_ceil(ips.size() * 2 + 2);
  table_.assign(cap, 0);
  mask_ = cap - 1;
  shift_ = 64 - static_cast<unsigned>(std::countr_zero(cap));
  for (uint64_t ip : ips) {
    size_t i = slot_of(ip);
    while (table_[i] != 0 && table_[i] != ip) i = (i + 1) & mask_;
    table_[i] = ip;
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
