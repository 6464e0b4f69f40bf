// SPDX-License-Identifier: MIT
// Arguments and return values of traced calls: the session's capture spec
// (core/arg_capture_spec.h) compiled into one plan per function, run on the
// event path to copy raw bytes into a plugin's event, and read back on the
// writer thread to show them by type.
//
// A record, as capture_entry / capture_exit write it:
//
//   +0   u16 size       the record's bytes, this header included
//   +2   u8  kind       1 entry, 2 return
//   +3   u8  reserved
//   +4   u32 reserved
//   +8   slots          one per parameter (or the return value) at the
//                       offset its plan gives; an unavailable value has none:
//
//     by value     its bytes (a struct's first kMaxValueBytes), 8-aligned
//     char *       u64 pointer, u16 length, u8 state, u8 pad[5], bytes
//                  (state: 0 ended by its NUL, 1 longer than the bound,
//                  2 unreadable, 3 NULL)
//     by address   u64 pointer, u8 state (0 read, 2 unreadable, 3 NULL),
//                  u8 pad[7], the value's first kMaxValueBytes
//
// The event path copies words and, for strings and values passed by
// address, reads memory that may be gone through the kernel
// (process_vm_readv, or a pipe under qemu-user): a bad pointer is a state,
// never a fault in the traced process.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/arg_capture_spec.h"
#include "runtime/plugin_host/ip_table.h"
#include "ftjit/ftjit.h"

namespace ftjit::plugins {

inline constexpr uint32_t kArgRecordHeader = 8;
inline constexpr uint32_t kMaxValueBytes = 64;
// The event path's answer for a call that --when conditions leave out.
inline constexpr uint32_t kArgsFiltered = 0xffffffffu;

// One value as the formatter reads it, for writers that keep types (JSON,
// Perfetto's debug annotations) rather than text.
struct ShownValue {
  enum class Type : uint8_t { kInt, kUint, kDouble, kBool, kString, kPointer, kText };
  std::string name;  // "fd", "pos.x"; "" for the return value
  Type type = Type::kText;
  int64_t i = 0;
  uint64_t u = 0;
  double d = 0;
  std::string text;  // kString: the bytes; kText: how it is shown ("<optimised out>", "RED")
};

class ArgCapturer {
 public:
  // Compiles `spec`; functions with nothing to capture are left out.
  explicit ArgCapturer(const ArgCaptureSpec& spec);
  ~ArgCapturer();
  ArgCapturer(const ArgCapturer&) = delete;
  ArgCapturer& operator=(const ArgCapturer&) = delete;

  // The largest record any function's entry or exit writes: what a plugin
  // reserves in its events.
  uint32_t max_record() const { return max_record_; }
  // Whether any captured value comes from an FP register at entry (the
  // trampolines must save them: FTJIT_OPS_F_NO_FP cannot hold).
  bool reads_fp_at_entry() const { return reads_fp_; }
  bool empty() const { return plans_.empty(); }

  // [event] The record of the call of `ip` with `regs`: its size, 0 when
  // nothing of `ip` is captured (or it does not fit in `cap`), or
  // kArgsFiltered when --when conditions leave the call out.
  uint32_t capture_entry(uint64_t ip, const ftjit_regs* regs, void* out, uint32_t cap) const;
  // [event] The record of its return with `ret`: size or 0.
  uint32_t capture_exit(uint64_t ip, const ftjit_ret_regs* ret, void* out, uint32_t cap) const;

  // The same from a slot of table() the caller found: the host services
  // inline capture_entry_at / capture_exit_at (arg_capture_plan.h), whose
  // common case reads the slot alone and calls nothing; the rest goes to
  // the plan, out of line.
  const IpView& table() const { return table_.view(); }
  uint32_t capture_entry_slow(const IpSlot* slot, const ftjit_regs* regs, void* out, uint32_t cap) const;
  uint32_t capture_exit_slow(const IpSlot* slot, const ftjit_ret_regs* ret, void* out, uint32_t cap) const;

  // Writer thread: the record's values, named, in order. Empty when the
  // record is not one of `ip`'s.
  std::vector<ShownValue> values(uint64_t ip, const void* record, uint32_t size) const;
  // "fd=3, buf=0x7ffd5a10, path=\"/etc/passwd\"" (entry) or "4096" (return).
  std::string text(uint64_t ip, const void* record, uint32_t size) const;
  // The parameters of `ip` as `ftjit params`-like lines: "int fd (rdi)".
  struct ParamInfo {
    std::string name, type, place;
    ValueKind kind = ValueKind::kUnsupported;
    uint32_t size = 0;
  };
  std::vector<ParamInfo> params(uint64_t ip) const;

  // --by-arg NAME (ArgCaptureSpec::by_arg): the functions that have a
  // parameter NAME that can be a key, each with where it is at entry.
  bool has_keys() const { return !key_plans_.empty(); }
  // NAME; "" when the session groups by nothing.
  const std::string& key_name() const { return key_name_; }
  // [event] The key of the call of `ip` with `regs`: true and *key set when
  // `ip` has the parameter; false (and *key 0) otherwise. Integers, chars,
  // enums and pointers: the value's bits, zero-extended from its size;
  // bools 0 or 1; char *: a hash of its first kStringKeyBytes bytes (0:
  // NULL, 1: unreadable), the bytes kept once per distinct string (a
  // fixed table filled lock-free) for key_value.
  bool key_of(uint64_t ip, const ftjit_regs* regs, uint64_t* key) const;
  // A key of `ip` shown by the parameter's type (name: the parameter's);
  // false when `ip` has no such parameter.
  bool key_value(uint64_t ip, uint64_t key, ShownValue* out) const;

 public:
  struct Plan;  // arg_capture_plan.h
  struct KeyPlan;
  struct InternedString;
  static constexpr uint32_t kInternSlots = 4096;

 private:
  const Plan* find(uint64_t ip) const;
  const KeyPlan* find_key(uint64_t ip) const;
  void plan_keys(const ArgCaptureSpec& spec);
  uint64_t string_key(uint64_t address) const;

  std::vector<std::unique_ptr<Plan>> plans_;
  IpTable<Plan> table_;
  uint32_t max_record_ = 0;
  uint32_t string_max_ = 0;
  bool reads_fp_ = false;

  std::string key_name_;
  std::vector<std::unique_ptr<KeyPlan>> key_plans_;
  IpTable<KeyPlan> key_table_;
  std::unique_ptr<InternedString[]> interned_;  // kInternSlots, when a key is a char *
};

}  // namespace ftjit::plugins
