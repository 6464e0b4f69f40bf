// SPDX-License-Identifier: MIT
// Whether a function without a sled can be traced by relocating its first
// instructions, and if so what moves: ISA-neutral, over any ISA's
// InstructionDecoder (core/instruction_decoder.h).
//
//   entry    [ landing pad ][ i1 ][ i2 ][ i3 ... ]
//                          ^patch_at
//                          `-- overwritten: whole instructions covering
//                              the decoder's entry_branch_bytes --'
//
// The proof that no thread can arrive inside the overwritten bytes except
// through the entry:
//  - the entry is a symbol with a size and an FDE starts there (so it is a
//    function's start, not a label in another's code);
//  - a sweep of the module's whole executable code finds no direct branch,
//    call or PC-relative address that lands strictly inside
//    (patch_at, patch_at + overwritten);
//  - every overwritten instruction can run from the stub (no call, no
//    system call, no exclusive, nothing the decoder cannot classify), and
//    the function's flow cannot leave before the last of them.
// What the sweep cannot see (an indirect branch computed at run time into
// those bytes) costs a trap, never a crash: the runtime fills the leftover
// bytes with traps that send a thread to the same instruction in the copy.
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/eh_frame_index.h"
#include "core/elf_image.h"
#include "core/instruction_decoder.h"

namespace ftjit {

enum class RelocationRefusal : uint8_t {
  kNone,
  kNoSize,            // the symbol has no size
  kNotFunctionStart,  // no FDE starts at the symbol
  kIfunc,             // an IFUNC symbol: the value is a resolver (a process
                      // is traced at the implementation it resolved to)
  kTooShort,          // shorter than the branch, or its flow leaves first
  kBranchInside,      // a branch or PC-relative address lands inside
  kCallInside,        // a call among the overwritten instructions
  kSyscallInside,     // a system call among them
  kExclusive,         // an exclusive pair
  kUnhandled,         // an instruction the relocator does not handle
  kUndecodable,       // bytes the decoder does not know
};
constexpr int kRelocationRefusalCount = static_cast<int>(RelocationRefusal::kUndecodable) + 1;

// A short name for listings ("branch-inside").
const char* relocation_refusal_name(RelocationRefusal r);

// Where a direct branch, call or PC-relative reference points, and from
// which instruction.
struct CodeReference {
  uint64_t target = 0;
  uint64_t from = 0;
};

// Every direct branch, call and PC-relative reference of a module's
// executable code that lands in it, by target: the sweep of the proof.
class CodeReferences {
 public:
  // Decodes every executable PT_LOAD segment of `image` (link-time
  // addresses) from `file`, linearly, starting again at every function
  // symbol and every FDE's start in `fdes` (data or padding between
  // functions cannot carry a decode past a function's start; a stripped
  // file's local functions, an IFUNC's implementations among them, have
  // an FDE and no symbol).
  static CodeReferences sweep(std::span<const uint8_t> file, const ElfImage& image, const InstructionDecoder& decoder,
                              std::span<const FdeRange> fdes = {});

  // The first reference whose target lies in [lo, hi), or nullptr.
  const CodeReference* first_into(uint64_t lo, uint64_t hi) const;

  size_t size() const { return refs_.size(); }
  uint64_t instructions() const { return instructions_; }

  // Whether the code just before `start` (a function symbol's or an FDE's)
  // may run on into it: its last instruction before any padding does not
  // leave (return, jump, trap, or a direct call: a call whose return
  // address is another function's start is a compiler's call of a function
  // that never returns, __stack_chk_fail or __assert_fail), or the decode
  // could not tell.
  bool may_fall_into(uint64_t start) const {
    return std::binary_search(falls_into_.begin(), falls_into_.end(), start);
  }

 private:
  std::vector<CodeReference> refs_;  // sorted by target
  std::vector<uint64_t> falls_into_;  // sorted starts the flow may run into
  uint64_t instructions_ = 0;
};

struct RelocationPlan {
  uint64_t entry = 0;      // the symbol's (link-time) address
  uint64_t patch_at = 0;   // where the branch goes: after a landing pad
  uint32_t overwritten = 0;  // bytes from patch_at that move (whole instructions)
  std::vector<DecodedInsn> moved;  // those instructions
  RelocationRefusal refusal = RelocationRefusal::kNone;
  std::string why;         // for a refusal: the detail ("a branch from 0x4f1c lands at +2")

  bool ok() const { return refusal == RelocationRefusal::kNone; }
};

// The plan for `fn`, a function of `image` (link-time addresses) without a
// sled. `fde_starts`: eh_frame_function_starts(), sorted (empty: no
// function has a known start, every one is refused). `branch_bytes`: the
// entry's branch, when its stub is known (InstructionDecoder::
// branch_bytes); 0 plans for the farthest (entry_branch_bytes).
RelocationPlan plan_relocation(const ElfSymbol& fn, std::span<const uint8_t> file, const ElfImage& image,
                               const InstructionDecoder& decoder, const CodeReferences& refs,
                               std::span<const uint64_t> fde_starts, uint32_t branch_bytes = 0);

// The copy of a plan's moved instructions, to run at `copy_at`: each
// relocated, then a branch back to patch_at + overwritten (unless the last
// one leaves the function by itself). `code` holds the function's bytes
// from plan.entry. Also where each moved instruction went, for moving a
// thread's pc from the original into the copy.
struct RelocatedCopy {
  std::vector<uint8_t> bytes;
  // {original address, address in the copy}, in order.
  std::vector<std::pair<uint64_t, uint64_t>> moved_to;
};
Result<RelocatedCopy> relocated_copy(const RelocationPlan& plan, std::span<const uint8_t> code, uint64_t copy_at,
                                     const InstructionDecoder& decoder);

}  // namespace ftjit
