// SPDX-License-Identifier: MIT
// What a session captures of traced calls' arguments and return values:
// the functions (at run-time addresses) with their signatures and places,
// and the conditions a call must meet to be recorded. The CLI builds it
// from DWARF (--args, --retval, --when) and sends it with the Attach
// request; the plugin host compiles it into capture plans
// (runtime/plugin_host/arg_capture.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/arg_types.h"

namespace ftjit {

struct CapturedFunction {
  uint64_t ip = 0;  // the traced entry, as the process runs it
  FunctionSignature signature;
  PlacedSignature placed;
  bool args = true;    // capture the parameters at entry
  bool retval = true;  // capture the return value at exit
};

// One --when condition on a parameter of one function. A call of a
// function with conditions is recorded only if all of its conditions hold.
enum class ConditionOp : uint8_t {
  kEq = 1, kNe = 2, kLt = 3, kLe = 4, kGt = 5, kGe = 6,
  kPrefix = 7,  // strings: starts with `text`
};

struct ArgCondition {
  uint64_t ip = 0;      // the function's entry
  uint32_t param = 0;   // index in its signature's params
  ConditionOp op = ConditionOp::kEq;
  int64_t number = 0;   // integers, bools, chars, enums (an enumerator's value), pointers
  std::string text;     // strings (kEq, kNe, kPrefix)
};

struct ArgCaptureSpec {
  uint32_t string_max = 32;  // bytes of a char * copied at entry
  std::vector<CapturedFunction> functions;
  std::vector<ArgCondition> conditions;
  // --by-arg NAME: count and latency group each function's calls by the
  // value of its parameter NAME at entry (functions without one: one group).
  // Empty: no grouping. Only integers, bools, chars, enums, pointers and
  // char * (by content) are keys; the CLI refuses the others.
  std::string by_arg;

  bool empty() const { return functions.empty(); }
};

// Limits the agent holds a request to (control/messages.cpp checks them).
inline constexpr uint32_t kMaxCapturedFunctions = 1u << 20;
inline constexpr uint32_t kMaxCapturedParams = 64;
inline constexpr uint32_t kMaxStringCapture = 1024;
// A char * key (--by-arg) is its first this many bytes.
inline constexpr uint32_t kStringKeyBytes = 64;

}  // namespace ftjit
