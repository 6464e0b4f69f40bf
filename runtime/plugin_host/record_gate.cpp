// SPDX-License-Identifier: MIT
// The record gate's event path (record_gate.h). Built with
// -mgeneral-regs-only and without memcpy (loops), like the services: it
// runs under trampolines that may not have saved the vector registers.
#include "runtime/plugin_host/record_gate.h"

#include "runtime/cycle_clock.h"
#include "runtime/inline_blocks.h"
#include "runtime/plugin_host/host_internal.h"

namespace ftjit::plugins::detail {

thread_local uint64_t t_replay_now_ns __attribute__((tls_model("initial-exec")));

namespace {

enum GateState : uint32_t { kSkipped = 0, kDelivered = 1, kPending = 2 };

inline ftjit_plugin_ctx* ctx_of(ftjit_ops* ops) { return reinterpret_cast<ftjit_plugin_ctx*>(ops); }

// Whether this call of `ip` is the function's turn on this thread: calls
// 1, N+1, 2N+1... A function that finds no slot left is recorded.
bool sample_turn(GateThread* g, uint64_t ip, uint32_t period) {
  constexpr uint32_t kMask = kSampleSlots - 1;
  uint32_t i = static_cast<uint32_t>((ip >> 2) * 0x9E3779B97F4A7C15ull >> 52) & kMask;
  for (uint32_t probes = 0; probes < kSampleSlots; ++probes, i = (i + 1) & kMask) {
    SampleSlot& s = g->samples[i];
    if (s.ip == ip) return s.calls++ % period == 0;
    if (s.ip == 0) {
      // Kept below 3/4 full: probe sequences stay short.
      if (g->used_samples >= kSampleSlots / 4 * 3) break;
      ++g->used_samples;
      s.ip = ip;
      s.calls = 1;
      return true;
    }
  }
  ++g->sample_overflow;
  return true;
}

// Word by word: no memcpy (vector registers).
inline void copy_words(void* to, const void* from, uint32_t bytes) {
  auto* d = static_cast<uint64_t*>(to);
  const auto* s = static_cast<const uint64_t*>(from);
  for (uint32_t i = 0; i < bytes / 8; ++i) d[i] = s[i];
}

// The late entries of every pending frame up to `top`, outermost first.
void deliver_pending(ftjit_plugin_ctx* ctx, const Gate& gate, GateThread* g, uint32_t top) {
  for (uint32_t d = 0; d <= top; ++d) {
    GateFrame& f = g->frames[d];
    if (f.state != kPending) continue;
    f.state = kDelivered;
    if (gate.entry == nullptr) continue;
    t_replay_now_ns = f.entry_ns;
    gate.entry(f.ip, f.parent_ip, ctx, &f.regs);
    t_replay_now_ns = 0;
  }
}

}  // namespace

void gate_entry(uint64_t ip, uint64_t parent_ip, ftjit_ops* ops, ftjit_regs* regs) {
  ftjit_plugin_ctx* ctx = ctx_of(ops);
  ThreadBlock* b = svc_thread_block(ctx);
  // No block (out of memory): no frame either, and the exit finds none.
  if (b == nullptr || b->gate == nullptr) return;
  GateThread* g = b->gate;
  const Gate& gate = *ctx->gate;
  const uint32_t depth = g->depth++;
  if (depth >= kGateFrames) [[unlikely]] {
    ++g->too_deep;
    return;
  }
  GateFrame& f = g->frames[depth];
  f.ip = ip;
  f.parent_ip = parent_ip;
  f.state = kSkipped;
  if (gate.recording != nullptr && gate.recording->load(std::memory_order_relaxed) == 0) return;
  const uint32_t max_depth = gate.max_depth.load(std::memory_order_relaxed);
  if (max_depth != 0 && depth >= max_depth) return;
  // A call from a sampled inline latency site's fallback is its turn
  // already (the site's code counted it): not counted again here.
  const uint32_t period = gate.sample_period.load(std::memory_order_relaxed);
  if (period > 1 && ftjit_inline_fallback_call == 0 && !sample_turn(g, ip, period)) return;
  auto* pregs = reinterpret_cast<ftjit_plugin_regs*>(regs);
  if (gate.min_duration_ns.load(std::memory_order_relaxed) == 0) {
    f.state = kDelivered;
    if (gate.entry != nullptr) gate.entry(ip, parent_ip, ctx, pregs);
    return;
  }
  f.state = kPending;
  copy_words(&f.regs, pregs, gate.regs_bytes);
  f.entry_ns = monotonic_ns();
}

void gate_exit(uint64_t ip, uint64_t parent_ip, ftjit_ops* ops, ftjit_ret_regs* ret) {
  ftjit_plugin_ctx* ctx = ctx_of(ops);
  ThreadBlock* b = svc_thread_block(ctx);
  if (b == nullptr || b->gate == nullptr) return;
  GateThread* g = b->gate;
  if (g->depth == 0) [[unlikely]] return;  // an exit whose entry had no block
  const uint32_t depth = --g->depth;
  if (depth >= kGateFrames) [[unlikely]] return;
  const Gate& gate = *ctx->gate;
  GateFrame& f = g->frames[depth];
  const auto* pret = reinterpret_cast<const ftjit_plugin_ret*>(ret);
  if (f.state == kSkipped) return;
  if (f.state == kPending) {
    if (monotonic_ns() - f.entry_ns < gate.min_duration_ns.load(std::memory_order_relaxed)) {
      f.state = kSkipped;
      return;
    }
    deliver_pending(ctx, gate, g, depth);
  }
  f.state = kSkipped;
  if (gate.exit != nullptr) gate.exit(ip, parent_ip, ctx, pret);
}

namespace {

void fire(ftjit_ops* ops) {
  auto* t = reinterpret_cast<TriggerOps*>(ops);
  if (t->calls.fetch_add(1, std::memory_order_relaxed) + 1 < t->from_call) return;
  if (t->value == kDumpValue) {
    request_dump(t->dumps, t->freeze);
  } else {
    t->recording->store(t->value, std::memory_order_relaxed);
  }
}

}  // namespace

void request_dump(std::atomic<uint32_t>* dumps, const DumpFreeze* freeze) {
  if (freeze != nullptr) {
    for (std::atomic<uint32_t>* word : *freeze) word->store(1, std::memory_order_seq_cst);
  }
  dumps->fetch_add(1, std::memory_order_release);
  futex_wake_all(dumps);
}

void trigger_at_entry(uint64_t, uint64_t, ftjit_ops* ops, ftjit_regs*) { fire(ops); }
void trigger_at_exit(uint64_t, uint64_t, ftjit_ops* ops, ftjit_ret_regs*) { fire(ops); }
void trigger_no_entry(uint64_t, uint64_t, ftjit_ops*, ftjit_regs*) {}

}  // namespace ftjit::plugins::detail
