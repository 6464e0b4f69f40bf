// SPDX-License-Identifier: MIT
// What discovery knows about a patchable function entry and its module.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/bulk_memory.h"

namespace ftjit {

enum class Isa : uint8_t { kX86_64, kArm64, kRiscv64, kUnknown };

const char* isa_name(Isa isa);

// Whether the layout left an 8-byte ops slot (call-ops' literal) before
// the function's symbol, and whether it can be stored atomically.
enum class OpsSlot : uint8_t {
  kNone,        // fewer than 8 bytes of NOPs before the symbol (=N, or unnamed)
  kAligned,     // 8 bytes at symbol - 8, 8-aligned: one atomic store
  kMisaligned,  // 8 bytes at symbol - 8, not 8-aligned: no atomic store can
                // replace them, so call-ops cannot use them
};

// Why a site has no usable ops slot, for messages (names the build flag
// that gives one); nullptr for OpsSlot::kAligned.
const char* ops_slot_refusal(OpsSlot slot);

// One record of __patchable_function_entries, resolved to run-time addresses.
//
//   record                     entry
//   |<-- prefix_bytes -------->|<-- sled at entry ... -->
//   [ M nops: ops slot (8 B)  ][ N-M nops             ][ function body
//                              ^ symbol
//
// prefix_bytes is 0 for -fpatchable-function-entry=N (M=0).
//
// entry is the site start: where the sled's first NOP after the symbol
// is, the address the engine patches from (x86-64: the call; arm64: `mov
// x9, x30`, the live word at entry + IsaTraits::live_offset) and the ip the
// trampolines report. It is the symbol itself, except after a landing pad
// that the compiler put at the symbol (arm64 -mbranch-protection, see
// core/sled_layout.h), where the record may lie before or after the symbol:
//
//   arm64 =4,2 + bti   record = symbol - 8   entry = symbol + 4
//     symbol-8 [ nop nop: ops slot ] symbol [ bti c ][ nop ][ nop ] body
//   arm64 =2 + bti     record = symbol + 4   entry = symbol + 4
//                                    symbol [ bti c ][ nop ][ nop ] body
//
// so prefix_bytes (entry - record) is 12 and 0 there, and the ops slot,
// always just before the symbol, is found through `slot`, not entry - 8.
struct DiscoveredSite {
  uint64_t entry = 0;         // run-time address of the site start
  uint64_t slot = 0;          // run-time address of the ops slot (0: OpsSlot::kNone)
  // Both view text their DiscoveredModule keeps (names_): a million sites
  // are not a million heap strings.
  std::string_view name;       // symbol as in the symbol table (mangled)
  // The demangled C++ name; empty when it is the name itself (a C symbol:
  // a million of them need not carry two copies). shown_name() is either.
  std::string_view demangled;
  uint32_t prefix_bytes = 0;  // entry - record
  uint8_t pad_bytes = 0;      // entry - symbol: the landing pad's size (named sites)
  OpsSlot slot_state = OpsSlot::kNone;
  // Found by its sled's bytes, not by a record: the toolchain dropped the
  // record (core/sled_recovery.h). record is then where the record would
  // point; everything else reads as for a recorded site.
  bool recovered = false;
  // A function symbol owns it (symbol() is not 0).
  bool named = false;

  // Derived, not stored (a million sites are 56 MB instead of 80, and
  // fresh memory costs a page fault a page):
  // run-time address of the first NOP
  uint64_t record() const { return entry - prefix_bytes; }
  // run-time address of the function symbol (0: unnamed)
  uint64_t symbol() const { return named ? entry - pad_bytes : 0; }

  std::string_view shown_name() const { return demangled.empty() ? name : demangled; }
};
static_assert(sizeof(DiscoveredSite) == 56, "a million sites: every 8 bytes is 8 MB of fresh memory");

// The text sites' names view: the symbol table's strings (in the module
// file's bytes, kept readable by what the ElfImage shares), and names made
// here (demangled, or given). Copies share it; whoever keeps sites keeps
// one.
class SiteNames {
 public:
  void share_symbol_table(std::shared_ptr<const void> strings) { symbol_table_ = std::move(strings); }
  // Keeps `text`; the view stays valid as long as this (or a copy) lives.
  std::string_view keep(std::string text) {
    if (!made_) made_ = std::make_shared<std::deque<std::string>>();
    return made_->emplace_back(std::move(text));  // a deque never moves its elements
  }

 private:
  std::shared_ptr<const void> symbol_table_;
  std::shared_ptr<std::deque<std::string>> made_;
};

// One loaded ELF object (executable or shared library) and its sites.
struct DiscoveredModule {
  std::string path;            // file path as the loader knows it
  uint64_t load_bias = 0;      // run-time address - link-time address
  Isa isa = Isa::kUnknown;
  bool has_patchable_section = false;
  BulkVector<DiscoveredSite> sites;  // sorted by entry
  SiteNames names;                    // what the sites' names view
  // What its trampolines must keep (core/register_evidence.h): the psABI's
  // registers are enough, by the module's own evidence; and why (or why
  // not), one line.
  bool saves_abi_is_enough = false;
  std::string saves_why;
  // How many sites were recovered without a record, and why they were
  // taken (one line, for `ftjit list` and -v); empty when none were.
  size_t recovered_sites = 0;
  std::string recovery_why;
};

}  // namespace ftjit
