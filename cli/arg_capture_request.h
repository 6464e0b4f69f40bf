// SPDX-License-Identifier: MIT
// --args, --retval and --when of `ftjit run` and `ftjit attach`: the
// capture spec (core/arg_capture_spec.h) for a process, built here, in the
// CLI, from each module's DWARF (core/dwarf_signatures.h, elfutils'
// libdw) and its ISA's calling convention (backends/calling_convention.h),
// once per attach: the agent only copies bytes and formats them.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "core/arg_capture_spec.h"
#include "core/error.h"

namespace ftjit::cli {

struct ArgOptions {
  bool args = false;    // --args: parameters (and return values)
  std::vector<std::string> globs;  // --args GLOB: only these functions
  bool retval = false;  // --retval: return values (alone: only those)
  uint32_t string_max = 32;  // --args-string-max
  std::vector<std::string> when;  // --when 'FUNC: PARAM OP VALUE [&& ...]'
  std::string by_arg;  // --by-arg NAME: count and latency group by it

  bool any() const { return args || retval || !when.empty() || !by_arg.empty(); }
};

// The spec for the functions of `pid` that `include`/`exclude` select (and
// --args GLOB, when given). Modules without DWARF get raw integer
// registers (`arg1=0x...`), each named once in `notes`. Fails on a --when
// that names no traced function, an unknown parameter (the function's are
// listed), a value of the wrong kind, or no DWARF for its function; on a
// --by-arg NAME that no traced function has (the parameters they have are
// listed), or one that is a floating-point value, a struct or of a type
// not shown (what can be a key: integers, bools, chars, enums, pointers,
// char * by content).
Result<ArgCaptureSpec> build_arg_capture(pid_t pid, const ArgOptions& options,
                                         const std::vector<std::string>& include,
                                         const std::vector<std::string>& exclude,
                                         std::vector<std::string>* notes);

// One --when text parsed: "FUNCGLOB: PARAM OP VALUE [&& PARAM OP VALUE]...",
// OP one of == != < <= > >= ^= (^=: the string starts with). VALUE is an
// integer (decimal, 0x hex, negative), true/false, 'c', "text", or an
// enumerator's name.
struct WhenTerm {
  std::string param;
  ConditionOp op = ConditionOp::kEq;
  std::string value;  // as written (quotes kept: they tell a string)
};
struct WhenClause {
  std::string function;  // glob
  std::vector<WhenTerm> terms;
};
Result<WhenClause> parse_when(const std::string& text);

}  // namespace ftjit::cli
