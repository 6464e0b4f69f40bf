// SPDX-License-Identifier: MIT
// `ftjit list FILE --relocate`: per function without a sled, whether its
// entry can be relocated (core/relocation_plan.h) and if not why; then a
// count per reason.
#pragma once

#include <string>

#include "core/filter.h"

namespace ftjit::cli {

// Prints ADDRESS<TAB>relocate|refused:REASON<TAB>NAME<TAB>DETAIL lines,
// the summary on stderr; returns the exit status.
int list_relocation(const std::string& file, const Filter& filter);

}  // namespace ftjit::cli
