// SPDX-License-Identifier: MIT
// Names of ISAs for messages.
#include "core/site.h"

namespace ftjit {

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::kX86_64: return "x86-64";
    case Isa::kArm64: return "arm64";
    case Isa::kRiscv64: return "riscv64";
    case Isa::kUnknown: break;
  }
  return "unknown";
}

const char* ops_slot_refusal(OpsSlot slot) {
  switch (slot) {
    case OpsSlot::kAligned: return nullptr;
    case OpsSlot::kMisaligned:
      return "its 8-byte ops slot is not 8-byte aligned, so it cannot be stored atomically "
             "(build with -falign-functions=8)";
    case OpsSlot::kNone: break;
  }
  return "it has no ops slot before its entry (build with -fpatchable-function-entry=13,8 "
         "on x86-64, =4,2 on arm64)";
}

}  // namespace ftjit
