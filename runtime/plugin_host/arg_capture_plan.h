// SPDX-License-Identifier: MIT
// ArgCapturer's compiled plans (arg_capture.h), shared by the planner and
// formatter (arg_capture.cpp) and the event path (arg_capture_event.cpp).
#pragma once

#include <atomic>
#include <cstring>
#include <string>
#include <vector>

#include "ftjit/plugin.h"
#include "runtime/plugin_host/arg_capture.h"

namespace ftjit::plugins {
namespace capture {

enum class SlotMode : uint8_t { kNone, kValue, kString, kByAddress };

// String and by-address slots: the pointer, then what was read.
constexpr uint32_t kStringHeader = 16;  // u64 pointer, u16 length, u8 state, pad
constexpr uint32_t kAddressHeader = 16;  // u64 pointer, u8 state, pad
enum : uint8_t { kStateRead = 0, kStateLonger = 1, kStateUnreadable = 2, kStateNull = 3 };

// Stack arguments this far above the entry's sp are read directly: the
// caller's frame holds them. Beyond, a wrong signature could reach past
// the stack's end, so they are read through the kernel.
constexpr uint32_t kDirectStackBytes = 512;

inline uint32_t round8(uint32_t n) { return (n + 7u) & ~7u; }

struct Op {
  ArgSource source;
  uint8_t size;
  uint16_t index;
  uint16_t dst;
};

struct Deref {
  uint16_t slot;   // the slot's offset: its pointer is there
  uint16_t bytes;  // at most this much is read
  SlotMode mode;   // kString or kByAddress
};

struct Slot {
  SlotMode mode = SlotMode::kNone;
  uint16_t offset = 0;
  uint16_t bytes = 0;  // value bytes kept (kValue, kByAddress) or the string bound
  std::string name;
  ValueType type;
  std::string why;  // kNone: how it is shown
  std::string place;
};

struct Condition {
  uint32_t param;
  ConditionOp op;
  int64_t number;
  std::string text;
};

}  // namespace capture

struct ArgCapturer::Plan {
  using Slot = capture::Slot;
  using Op = capture::Op;
  using Deref = capture::Deref;
  using Condition = capture::Condition;
  uint64_t ip = 0;
  std::string name;
  bool variadic = false;
  std::vector<Slot> params;
  Slot ret;
  bool has_ret = false;
  std::vector<Op> entry_ops, exit_ops;
  std::vector<Deref> entry_derefs, exit_derefs;
  uint32_t entry_size = 0, exit_size = 0;  // 0: nothing captured there
  std::vector<Condition> conditions;
  // Byte ranges of the record that no op writes and a reader may look at
  // (a struct's holes): zeroed at capture. Most records have none.
  std::vector<std::pair<uint16_t, uint16_t>> entry_zero, exit_zero;
  // The common case, integers and pointers in registers: the k-th value is
  // the whole word of integer register fast_regs[k], at header + 8k (a
  // narrower one is read back at its own size). Nothing else to do.
  static constexpr size_t kMaxFast = 8;
  uint8_t fast_entry = 0;  // how many: 0 = not this case
  uint8_t fast_regs[kMaxFast] = {};
  bool fast_exit = false;  // the return value is ret[0]'s word, at header
};

namespace capture {

// The table word of a plan (IpTable's): the common case, whole, so that
// the event path reads one slot of the table and nothing of the plan. Its
// layout is the SDK's (ftjit_args_fast_table in ftjit/plugin.h: plugins
// make the common capture themselves from it).
constexpr uint64_t kNoEntryRecord = FTJIT_ARGS_FAST_NO_ENTRY;
constexpr uint64_t kNoExitRecord = FTJIT_ARGS_FAST_NO_EXIT;
uint64_t fast_word(const ArgCapturer::Plan& plan);

}  // namespace capture

// Where one function's --by-arg parameter is at entry: a scalar of at
// most 8 bytes in one integer register or one stack slot.
struct ArgCapturer::KeyPlan {
  uint64_t ip = 0;
  ArgSource source = ArgSource::kIntReg;
  uint16_t index = 0;  // register number or stack offset
  uint8_t size = 0;    // bytes: 1, 2, 4 or 8
  ValueKind kind = ValueKind::kSigned;
  bool is_signed = false;
  std::string name;
  std::vector<Enumerator> enumerators;
};

// One distinct char * key's bytes: `hash` is 0 while the slot is free, and
// is claimed (compare-and-swap) before the bytes are written; they are read
// only after tracing stopped.
struct ArgCapturer::InternedString {
  std::atomic<uint64_t> hash{0};
  uint8_t length = 0;
  uint8_t longer = 0;  // no NUL in the first kStringKeyBytes bytes
  uint8_t bytes[kStringKeyBytes] = {};
};

// The event path's captures from a slot of the table (the common case
// from its word alone, no call; the rest by the plan, out of line), so
// that a host service finds the slot and writes the record in one frame.
[[gnu::always_inline]] inline uint32_t capture_entry_at(const ArgCapturer& capturer, const IpSlot* slot,
                                                       const ftjit_regs* regs, void* out, uint32_t cap) {
  // The common case is the SDK's: what a plugin makes itself.
  const uint32_t n =
      ftjit_args_fast_entry_word(slot->word, cap, reinterpret_cast<const ftjit_plugin_regs*>(regs), out);
  if (n != FTJIT_ARGS_ASK_HOST) [[likely]] return n;
  return capturer.capture_entry_slow(slot, regs, out, cap);
}

[[gnu::always_inline]] inline uint32_t capture_exit_at(const ArgCapturer& capturer, const IpSlot* slot,
                                                      const ftjit_ret_regs* ret, void* out, uint32_t cap) {
  const uint32_t n =
      ftjit_args_fast_exit_word(slot->word, cap, reinterpret_cast<const ftjit_plugin_ret*>(ret), out);
  if (n != FTJIT_ARGS_ASK_HOST) [[likely]] return n;
  return capturer.capture_exit_slow(slot, ret, out, cap);
}

// Inlined into the captures: the lookup is most of what they cost.
[[gnu::always_inline]] inline const ArgCapturer::Plan* ArgCapturer::find(uint64_t ip) const {
  return table_.find(ip);
}

[[gnu::always_inline]] inline const ArgCapturer::KeyPlan* ArgCapturer::find_key(uint64_t ip) const {
  return key_table_.find(ip);
}

}  // namespace ftjit::plugins
