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

}  // namespace ftjit
