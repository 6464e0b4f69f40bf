// SPDX-License-Identifier: MIT
// `ftjit list FILE|-p PID --relocate`: per function without a sled,
// whether its entry can be relocated (core/relocation_plan.h) and if not
// why; then a count per reason, per module.
#pragma once

#include <sys/types.h>

#include <string>

#include "core/filter.h"

namespace ftjit::cli {

// Prints ADDRESS<TAB>relocate|refused:REASON<TAB>NAME<TAB>DETAIL lines,
// the summary on stderr; returns the exit status.
int list_relocation(const std::string& file, const Filter& filter);

// The same for every module of process `pid` (read through its root),
// at run-time addresses, each line ending <TAB>MODULE.
int list_process_relocation(pid_t pid, const Filter& filter);

}  // namespace ftjit::cli
