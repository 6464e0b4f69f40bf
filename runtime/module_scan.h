// SPDX-License-Identifier: MIT
// Module scanning: the patchable sites of ELF files and of every object loaded in this process.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/dwarf_producers.h"
#include "core/error.h"
#include "core/module_file.h"
#include "core/site.h"

namespace ftjit {

// Reads and parses the ELF file at path and returns its sites shifted by
// load_bias. Fails with FTJIT_E_SYSTEM if the file cannot be opened or
// mapped (errno text in the message) and FTJIT_E_ELF if it does not parse;
// both messages start with the path.
[[nodiscard]] Result<DiscoveredModule> discover_file(const std::string& path,
                                                     uint64_t load_bias = 0);

// The main executable and every shared object with a file name that the
// dynamic loader has mapped into this process right now, in loader order,
// with load_bias = dlpi_addr. The main executable is read through
// /proc/self/exe but reported under its resolved path. The vDSO is skipped.
// An object whose file cannot be read or parsed is still listed, with
// has_patchable_section = false and no sites, so callers can tell it
// exists. Nothing is cached: each call rescans. Currently never fails.
[[nodiscard]] Result<std::vector<DiscoveredModule>> discover_loaded_modules();

// Who reads the compile-unit producers (core/dwarf_producers.h) of a
// module with sites and DWARF: its saves evidence and its sled-recovery
// evidence. A process never reads DWARF itself: an agent asks its
// generator (the CLI, which has libdw), an embedder its libdw build's
// reader or its FTJIT_GENERATOR. `file` names the module as this process
// does, `read_path` is where this process reads it (/proc/self/exe for
// the main executable). Unset (the default), a module has no evidence: its
// trampolines keep every register, as for a module without DWARF.
using ProducerReader =
    std::function<Result<std::vector<CompileUnitProducer>>(const ModuleFile& file, const std::string& read_path)>;
void set_producer_reader(ProducerReader reader);

// Count of objects the loader has ever added plus removed. It changes
// whenever dlopen/dlclose changes the set of modules, and is cheap enough
// to poll before deciding to call discover_loaded_modules() again.
uint64_t loaded_modules_generation();

// The main executable's path (readlink of /proc/self/exe), as modules
// report it.
std::string self_exe_path();

// Microseconds spent so far in discover_file and discover_loaded_modules
// (an attach's "where the time went" subtracts two readings).
uint64_t module_scan_micros();

}  // namespace ftjit
