// SPDX-License-Identifier: MIT
// Which registers a module's callers may expect to survive a call into a
// traced function, decided from what the module says about its build
// (TOOLCHAIN.md Q6):
//
//   abi  every compile unit was built by GCC with -fpatchable-function-entry
//        on its command line, which turns -fipa-ra off for the unit: no
//        caller keeps a value in a call-clobbered register across a call,
//        so a trampoline keeps the psABI's argument registers (entry) and
//        return registers (exit) only;
//   all  anything else: no debug info, a unit whose options are not
//        recorded (clang: -mllvm -enable-ipra would not show), a GCC unit
//        built without the flag (the patchable_function_entry attribute
//        alone leaves -fipa-ra on). Every call-clobbered register is kept.
//
// What no binary shows: an `optimize` attribute or `#pragma GCC optimize`
// in a unit built with the flag turns -fipa-ra back on for the functions it
// covers. A module built that way must be traced with saves = all.
#pragma once

#include <string>
#include <vector>

#include "core/dwarf_producers.h"

namespace ftjit {

struct SavesEvidence {
  bool abi_is_enough = false;  // the evidence says the psABI set suffices
  std::string why;             // one line, for `ftjit list` and warnings
};

SavesEvidence saves_evidence(const std::vector<CompileUnitProducer>& units);

// The same when the producers may not have been read: no producers is no
// evidence (all), and says why.
SavesEvidence saves_evidence(const Result<std::vector<CompileUnitProducer>>& units);

}  // namespace ftjit
