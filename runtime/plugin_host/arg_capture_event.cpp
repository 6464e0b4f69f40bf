// SPDX-License-Identifier: MIT
// ArgCapturer's event path: runs inside traced calls, under trampolines
// that may not have saved the FP/vector registers (a FTJIT_PLUGIN_F_NO_FP
// plugin's), so it is built with -mgeneral-regs-only and calls nothing of
// libc that could use them: copies are loops over bytes and words
// (-fno-tree-loop-distribute-patterns keeps GCC from making them memcpy
// calls again), and memory that may be gone is read with a system call.
#include <cstddef>

#include "runtime/arch/stack_scan.h"
#include "runtime/plugin_host/arg_capture_plan.h"
#include "runtime/plugin_host/host_internal.h"

namespace ftjit::plugins {
namespace {

using namespace capture;

inline void copy_bytes(uint8_t* to, const uint8_t* from, uint32_t n) {
  for (uint32_t i = 0; i < n; ++i) to[i] = from[i];
}

inline void zero_words(uint8_t* to, uint32_t n) {  // n: a multiple of 8
  for (uint32_t i = 0; i < n; i += 8) __builtin_memcpy(to + i, "\0\0\0\0\0\0\0\0", 8);
}

inline uint64_t word_at(const uint8_t* p) {
  uint64_t v;
  __builtin_memcpy(&v, p, 8);
  return v;
}

const uint8_t* source_bytes(const Op& op, const ftjit_regs* regs, const ftjit_ret_regs* ret) {
  switch (op.source) {
    case ArgSource::kIntReg: return reinterpret_cast<const uint8_t*>(&regs->arg[op.index & 7]);
    case ArgSource::kFpReg: return regs->fp[op.index & 7];
    case ArgSource::kStack: return reinterpret_cast<const uint8_t*>(regs->sp + op.index);
    case ArgSource::kRetInt: return reinterpret_cast<const uint8_t*>(&ret->ret[op.index & 1]);
    case ArgSource::kRetFp: return ret->fp[op.index & 1];
  }
  return nullptr;
}

void run_ops(const std::vector<Op>& ops, const ftjit_regs* regs, const ftjit_ret_regs* ret, uint8_t* out) {
  for (const Op& op : ops) {
    if (op.source == ArgSource::kStack && static_cast<uint32_t>(op.index) + op.size > kDirectStackBytes) {
      if (arch::detail::read_own_memory(regs->sp + op.index, out + op.dst, op.size) != op.size) {
        zero_words(out + op.dst, round8(op.size));
      }
      continue;
    }
    const uint8_t* from = source_bytes(op, regs, ret);
    switch (op.size) {
      case 8: __builtin_memcpy(out + op.dst, from, 8); break;
      case 4: __builtin_memcpy(out + op.dst, from, 4); break;
      case 16: __builtin_memcpy(out + op.dst, from, 16); break;
      case 2: __builtin_memcpy(out + op.dst, from, 2); break;
      case 1: out[op.dst] = from[0]; break;
      default: copy_bytes(out + op.dst, from, op.size);
    }
  }
}

void run_derefs(const std::vector<Deref>& derefs, uint8_t* out) {
  for (const Deref& d : derefs) {
    uint8_t* slot = out + d.slot;
    const uint64_t address = word_at(slot);
    uint8_t* bytes = slot + (d.mode == SlotMode::kString ? kStringHeader : kAddressHeader);
    uint8_t state = kStateRead;
    uint16_t length = 0;
    if (address == 0) {
      state = kStateNull;
    } else {
      const ssize_t got = arch::detail::read_own_memory(address, bytes, d.bytes);
      if (got <= 0) {
        state = kStateUnreadable;
      } else if (d.mode == SlotMode::kString) {
        while (length < got && bytes[length] != 0) ++length;
        // No NUL: the string goes on past the bound, or it ran into memory
        // that could not be read (fewer bytes than asked).
        if (length == got) state = static_cast<size_t>(got) < d.bytes ? kStateUnreadable : kStateLonger;
      } else if (static_cast<size_t>(got) < d.bytes) {
        state = kStateUnreadable;
      }
    }
    if (d.mode == SlotMode::kString) {
      __builtin_memcpy(slot + 8, &length, 2);
      slot[10] = state;
    } else {
      slot[8] = state;
    }
  }
}

// --when conditions: integers (of the parameter's signedness), enums,
// bools, chars and pointers by number; strings by equality and prefix.
bool holds(const Condition& c, const Slot& s, const uint8_t* record) {
  const uint8_t* p = record + s.offset;
  if (s.mode == SlotMode::kString) {
    uint16_t length;
    __builtin_memcpy(&length, p + 8, 2);
    const uint8_t state = p[10];
    const bool readable = state == kStateRead || state == kStateLonger;
    const size_t want = c.text.size();
    const char* text = c.text.data();
    bool prefix = readable && length >= want;
    for (size_t i = 0; prefix && i < want; ++i) prefix = p[kStringHeader + i] == static_cast<uint8_t>(text[i]);
    const bool equal = prefix && state == kStateRead && length == want;
    switch (c.op) {
      case ConditionOp::kEq: return equal;
      case ConditionOp::kNe: return !equal;
      case ConditionOp::kPrefix: return prefix;
      default: return false;
    }
  }
  if (s.mode != SlotMode::kValue) return false;
  const uint32_t size = s.type.size < 8 ? s.type.size : 8;
  uint64_t raw = 0;
  copy_bytes(reinterpret_cast<uint8_t*>(&raw), p, size);
  const ValueKind k = s.type.kind;
  const bool is_signed = k == ValueKind::kSigned || ((k == ValueKind::kEnum || k == ValueKind::kChar) && s.type.is_signed);
  if (k == ValueKind::kBool) raw = raw != 0;
  auto compare = [&](auto value, auto bound) {
    switch (c.op) {
      case ConditionOp::kEq: return value == bound;
      case ConditionOp::kNe: return value != bound;
      case ConditionOp::kLt: return value < bound;
      case ConditionOp::kLe: return value <= bound;
      case ConditionOp::kGt: return value > bound;
      case ConditionOp::kGe: return value >= bound;
      default: return false;
    }
  };
  if (!is_signed) return compare(raw, static_cast<uint64_t>(c.number));
  // Sign-extend from the value's width.
  const unsigned shift = 64 - 8 * size;
  const int64_t value = static_cast<int64_t>(raw << shift) >> shift;
  return compare(value, c.number);
}

}  // namespace

uint32_t ArgCapturer::capture_entry(uint64_t ip, const ftjit_regs* regs, void* out, uint32_t cap) const {
  const IpSlot* slot = table().find(ip);
  if (slot == nullptr || regs == nullptr || out == nullptr) return 0;
  return capture_entry_at(*this, slot, regs, out, cap);
}

uint32_t ArgCapturer::capture_exit(uint64_t ip, const ftjit_ret_regs* ret, void* out, uint32_t cap) const {
  const IpSlot* slot = table().find(ip);
  if (slot == nullptr || ret == nullptr || out == nullptr) return 0;
  return capture_exit_at(*this, slot, ret, out, cap);
}

uint32_t ArgCapturer::capture_entry_slow(const IpSlot* slot, const ftjit_regs* regs, void* out, uint32_t cap) const {
  const Plan* plan = table_.plan_of(slot);
  if (plan == nullptr || plan->entry_size == 0 || plan->entry_size > cap) return 0;
  auto* record = static_cast<uint8_t*>(out);
  // The header in one store: size, kind 1 (entry), zeros.
  const uint64_t header = plan->entry_size | uint64_t{1} << 16;
  __builtin_memcpy(record, &header, 8);
  for (const auto& [at, n] : plan->entry_zero) zero_words(record + at, n);
  run_ops(plan->entry_ops, regs, nullptr, record);
  if (!plan->entry_derefs.empty()) run_derefs(plan->entry_derefs, record);
  for (const Condition& c : plan->conditions) {
    if (!holds(c, plan->params[c.param], record)) return kArgsFiltered;
  }
  return plan->entry_size;
}

uint32_t ArgCapturer::capture_exit_slow(const IpSlot* slot, const ftjit_ret_regs* ret, void* out, uint32_t cap) const {
  const Plan* plan = table_.plan_of(slot);
  if (plan == nullptr || plan->exit_size == 0 || plan->exit_size > cap) return 0;
  auto* record = static_cast<uint8_t*>(out);
  const uint64_t header = plan->exit_size | uint64_t{2} << 16;
  __builtin_memcpy(record, &header, 8);
  for (const auto& [at, n] : plan->exit_zero) zero_words(record + at, n);
  run_ops(plan->exit_ops, nullptr, ret, record);
  if (!plan->exit_derefs.empty()) run_derefs(plan->exit_derefs, record);
  return plan->exit_size;
}

// A char * key: FNV-1a of its bytes up to the NUL (at most
// kStringKeyBytes), with whether it goes on; the first call of each
// distinct string keeps its bytes in the table key_value reads.
uint64_t ArgCapturer::string_key(uint64_t address) const {
  if (address == 0) return 0;
  // One byte more than the key keeps: whether the string goes on past it.
  uint8_t bytes[kStringKeyBytes + 1];
  const ssize_t got = arch::detail::read_own_memory(address, bytes, kStringKeyBytes + 1);
  if (got <= 0) return 1;
  const uint32_t n = static_cast<uint32_t>(got);
  uint32_t length = 0;
  while (length < n && length < kStringKeyBytes && bytes[length] != 0) ++length;
  uint8_t longer = 0;
  if (length == kStringKeyBytes) {
    longer = n > kStringKeyBytes ? (bytes[kStringKeyBytes] != 0 ? 1 : 0) : 1;
  } else if (length == n) {
    return 1;  // no NUL before memory that could not be read
  }
  uint64_t h = 0xcbf29ce484222325ull;
  for (uint32_t i = 0; i < length; ++i) h = (h ^ bytes[i]) * 0x100000001b3ull;
  h = (h ^ longer) * 0x100000001b3ull;
  if (h < 2) h += 2;
  if (!interned_) return h;
  for (uint32_t probe = 0, i = h & (kInternSlots - 1); probe < kInternSlots; ++probe, i = (i + 1) & (kInternSlots - 1)) {
    InternedString& slot = interned_[i];
    uint64_t seen = slot.hash.load(std::memory_order_acquire);
    if (seen == h) return h;
    if (seen != 0) continue;
    if (slot.hash.compare_exchange_strong(seen, h, std::memory_order_acq_rel)) {
      slot.length = static_cast<uint8_t>(length);
      slot.longer = longer;
      copy_bytes(slot.bytes, bytes, length);
      return h;
    }
    if (seen == h) return h;  // another thread kept the same string
  }
  return h;  // the table is full: grouped, shown by its hash
}

bool ArgCapturer::key_of(uint64_t ip, const ftjit_regs* regs, uint64_t* key) const {
  *key = 0;
  const KeyPlan* plan = find_key(ip);
  if (plan == nullptr || regs == nullptr) return false;
  uint64_t raw = 0;
  if (plan->source == ArgSource::kIntReg) {
    raw = regs->arg[plan->index & 7];
  } else if (static_cast<uint32_t>(plan->index) + plan->size <= kDirectStackBytes) {
    copy_bytes(reinterpret_cast<uint8_t*>(&raw), reinterpret_cast<const uint8_t*>(regs->sp + plan->index), plan->size);
  } else if (arch::detail::read_own_memory(regs->sp + plan->index, &raw, plan->size) != static_cast<ssize_t>(plan->size)) {
    raw = 0;
  }
  if (plan->size < 8) raw &= (uint64_t{1} << (8 * plan->size)) - 1;
  if (plan->kind == ValueKind::kBool) raw = (raw & 0xff) != 0;
  if (plan->kind == ValueKind::kString) raw = string_key(raw);
  *key = raw;
  return true;
}

}  // namespace ftjit::plugins

// The host services, here so that the capture inlines into them: one
// call from the plugin, none after it.
namespace ftjit::plugins::detail {

// The SDK's records are the engine's, field for field (the host hands the
// engine's to the plugin).
static_assert(sizeof(ftjit_plugin_regs) == sizeof(ftjit_regs));
static_assert(offsetof(ftjit_plugin_regs, sp) == offsetof(ftjit_regs, sp));
static_assert(offsetof(ftjit_plugin_regs, fp) == offsetof(ftjit_regs, fp));
static_assert(sizeof(ftjit_plugin_ret) == sizeof(ftjit_ret_regs));
static_assert(offsetof(ftjit_plugin_ret, fp) == offsetof(ftjit_ret_regs, fp));

// The context holds the table's view and the room (ftjit_plugin_ctx): the
// lookup is the slot's load, and the common capture calls nothing.
uint32_t svc_args_capture_hint(ftjit_plugin_ctx* ctx, uint64_t ip, const ftjit_plugin_regs* regs, void* out,
                               uint64_t* exit_hint) {
  uint64_t ignored;
  if (exit_hint == nullptr) exit_hint = &ignored;
  *exit_hint = kExitHintNone;
  if (ctx == nullptr || regs == nullptr || out == nullptr) return 0;
  const IpSlot* slot = ctx->args_table.find(ip);
  if (slot == nullptr) return 0;
  *exit_hint = ctx->args_table.handle_of(slot);
  return capture_entry_at(*ctx->instance->args, slot, reinterpret_cast<const ftjit_regs*>(regs), out,
                          ctx->args_room);
}

uint32_t svc_args_capture(ftjit_plugin_ctx* ctx, uint64_t ip, const ftjit_plugin_regs* regs, void* out) {
  return svc_args_capture_hint(ctx, ip, regs, out, nullptr);
}

int svc_arg_key(ftjit_plugin_ctx* ctx, uint64_t ip, const ftjit_plugin_regs* regs, uint64_t* key) {
  if (key == nullptr) return 0;
  *key = 0;
  const Instance* inst = ctx != nullptr ? ctx->instance : nullptr;
  if (inst == nullptr || inst->keys == nullptr) return 0;
  return inst->keys->key_of(ip, reinterpret_cast<const ftjit_regs*>(regs), key) ? 1 : 0;
}

// A hint from the entry skips the lookup: checked against `ip` (a
// plugin's stale or wrong one costs the lookup, never a wrong record).
uint32_t svc_retval_capture_hint(ftjit_plugin_ctx* ctx, uint64_t ip, uint64_t exit_hint,
                                 const ftjit_plugin_ret* ret, void* out) {
  if (ctx == nullptr || ret == nullptr || out == nullptr || exit_hint == kExitHintNone) return 0;
  const IpSlot* slot = ctx->args_table.at(exit_hint, ip);
  if (slot == nullptr) [[unlikely]] slot = ctx->args_table.find(ip);
  if (slot == nullptr) return 0;
  return capture_exit_at(*ctx->instance->args, slot, reinterpret_cast<const ftjit_ret_regs*>(ret), out,
                         ctx->args_room);
}

// The plugin's own common captures read the table the services read.
static_assert(sizeof(ftjit_args_fast_slot) == sizeof(IpSlot));
static_assert(offsetof(ftjit_args_fast_slot, ip) == offsetof(IpSlot, ip));
static_assert(offsetof(ftjit_args_fast_slot, word) == offsetof(IpSlot, word));

const ftjit_args_fast_table* svc_args_fast_table(ftjit_plugin_ctx* ctx) {
  if (ctx == nullptr || ctx->args_fast.slots == nullptr || ctx->args_fast.room == 0) return nullptr;
  return &ctx->args_fast;
}

// Hint 0 names no slot: the lookup.
uint32_t svc_retval_capture(ftjit_plugin_ctx* ctx, uint64_t ip, const ftjit_plugin_ret* ret, void* out) {
  return svc_retval_capture_hint(ctx, ip, 0, ret, out);
}

}  // namespace ftjit::plugins::detail
