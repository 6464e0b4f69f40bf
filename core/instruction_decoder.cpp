// SPDX-License-Identifier: MIT
#include "core/instruction_decoder.h"

namespace ftjit {

const char* insn_class_name(InsnClass c) {
  switch (c) {
    case InsnClass::kPlain: return "plain";
    case InsnClass::kPcRelative: return "pc-relative";
    case InsnClass::kCondBranch: return "conditional branch";
    case InsnClass::kJump: return "jump";
    case InsnClass::kCall: return "call";
    case InsnClass::kIndirectCall: return "indirect call";
    case InsnClass::kReturn: return "return";
    case InsnClass::kIndirectJump: return "indirect jump";
    case InsnClass::kSyscall: return "system call";
    case InsnClass::kExclusive: return "exclusive";
    case InsnClass::kLandingPad: return "landing pad";
    case InsnClass::kTrap: return "trap";
    case InsnClass::kUnknown: return "unknown";
    case InsnClass::kInvalid: return "invalid";
  }
  return "?";
}

}  // namespace ftjit
