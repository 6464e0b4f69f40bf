// SPDX-License-Identifier: MIT
// The compile-unit producers of a module's file (core/dwarf_producers.h),
// as the CLI reads them: for `ftjit list`, and for an agent, which asks
// over its generator connection (a traced process reads no DWARF).
#pragma once

#include <string>
#include <vector>

#include "core/dwarf_producers.h"
#include "core/error.h"
#include "core/module_file.h"

namespace ftjit::cli {

// The producers of the file at `path`; FTJIT_E_UNSUPPORTED from an ftjit
// built without libdw (a cross-built one).
Result<std::vector<CompileUnitProducer>> read_producers(const std::string& path);

// The producers of `file`, which a process names, read under `root` (its
// /proc/PID/root, or "" for this process's own view): only if the file
// found there has the size and fingerprint the process gave, else
// FTJIT_E_ELF saying so (a qemu-user guest's /lib is not the
// host's; a file replaced since it was mapped).
Result<std::vector<CompileUnitProducer>> read_producers(const ModuleFile& file, const std::string& root);

}  // namespace ftjit::cli
