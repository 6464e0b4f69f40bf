// SPDX-License-Identifier: MIT
// The modules mapped in another process and their patchable functions, read
// from /proc/PID/maps and the files themselves (through /proc/PID/root, so
// a process in a container is read as it sees its files).
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "cli/mapped_file.h"
#include "core/elf_image.h"
#include "core/error.h"
#include "core/site_discovery.h"
#include "runtime/control/protocol.h"

namespace ftjit::cli {

struct ProcessModule {
  std::string path;       // as the process sees it
  uint64_t load_bias = 0;
  std::shared_ptr<const MappedFile> file;  // found's names view it
  DiscoveredModule found;  // sites at run-time addresses
};

// Every ELF module of `pid` with an executable mapping, with the sites the
// agent would find in it: those of its records and those recovered
// without one (core/sled_recovery.h). Modules whose file cannot be read or
// parsed are skipped; fails only if /proc/PID/maps cannot be read.
//
// `guest_code`: modules mapped without PROT_EXEC too. qemu-user maps a
// program of another ISA (and its libraries) that way and runs its
// translations: their guest addresses are the mappings' own (qemu's
// guest_base is 0 for a 64-bit guest on a 64-bit host).
Result<std::vector<ProcessModule>> process_modules(pid_t pid, bool guest_code = false);

// One line per module of `pid` with sites recovered without a record:
// "MODULE: N sites recovered without a record: ...", what -v of run and
// attach prints, as `ftjit list -p` does (core/sled_recovery.h). Empty
// when there are none or /proc/PID/maps cannot be read.
std::vector<std::string> recovered_site_notes(pid_t pid);

// Whether any module of `pid` has a patchable entry: what `ftjit attach`
// checks before injecting. Reads each file's headers and stops at the
// first module with records; no symbol is read or demangled (the agent
// finds the sites itself). Only when no module has a record are they
// discovered in full, for sites recovered without one. Fails only if
// /proc/PID/maps cannot be read.
Result<bool> process_has_patchable_entries(pid_t pid);

// The compile-unit producers of `pid`'s modules with records and DWARF,
// named as its agent's scan names them (the path the process sees, its
// size and fingerprint): what `ftjit attach` sends with its request,
// read while the agent is injected, so that the agent's scan does not
// ask for them one round trip each. A module that cannot be read is left
// out (the agent asks for it as before).
std::vector<control::ModuleProducers> module_producers_ahead(pid_t pid);

}  // namespace ftjit::cli
