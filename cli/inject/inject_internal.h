// SPDX-License-Identifier: MIT
// Helpers shared by the files of cli/inject: /proc parsing and ELF symbol lookup.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"

namespace ftjit::inject::detail {

// "what: strerror(err)".
std::string errno_message(std::string_view what, int err);

// The whole of a (small, /proc) file. FTJIT_E_SYSTEM with errno on failure;
// *err_out receives errno when given.
Result<std::string> read_text_file(const std::string& path, int* err_out = nullptr);

// The value after "Key:" in /proc/PID/status (trimmed), or nullopt.
std::optional<std::string> status_field(const std::string& status_text, std::string_view key);

// TracerPid of a process, 0 if none or unreadable.
pid_t tracer_of(pid_t pid);

// True if the process no longer exists or is a zombie.
bool process_gone(pid_t pid);

// One line of /proc/PID/maps.
struct Mapping {
  uint64_t start = 0;
  uint64_t end = 0;
  uint64_t offset = 0;
  uint64_t inode = 0;
  std::string perms;
  std::string path;  // as the target sees it; may end in " (deleted)"
};

Result<std::vector<Mapping>> read_maps(pid_t pid);

// A module mapped in the target: the path and its lowest mapping with
// file offset 0 (from which the load bias follows).
struct MappedModule {
  std::string path;
  uint64_t offset0_start = 0;
};

// The first module whose path's basename equals basename, or, if
// prefix_match, starts with it. nullopt if none.
std::optional<MappedModule> find_module(const std::vector<Mapping>& maps, std::string_view basename,
                                        bool prefix_match = false);

// Looks a symbol up in an ELF64 little-endian file: .dynsym first (the
// default version when several versions share a name), then .symtab.
// Returns the run-time address, given where the file's offset 0 is mapped.
// FTJIT_E_NO_MATCH if the symbol is not defined there, FTJIT_E_ELF if the
// file is malformed, FTJIT_E_SYSTEM if it cannot be read.
Result<uint64_t> elf_symbol_address(const std::string& file_path, uint64_t offset0_start,
                                    std::string_view symbol);

// A symbol's run-time address and size; for a thread-local one (tls) the
// address is its offset in the module's TLS block.
struct SymbolRange {
  uint64_t address = 0;
  uint64_t size = 0;
  bool tls = false;
};

// elf_symbol_address for several names at once (one read of the tables);
// a name the file does not define (or defines as an IFUNC) gives nullopt.
Result<std::vector<std::optional<SymbolRange>>> elf_symbol_ranges(const std::string& file_path,
                                                                  uint64_t offset0_start,
                                                                  std::span<const std::string_view> names);

// The error for a PTRACE_SEIZE of thread tid of pid that failed with err:
// another tracer, Yama, missing privileges, a thread that is gone.
Error seize_refused(pid_t pid, pid_t tid, int err);

// The program counter of a ptrace-stopped thread, then the return address
// of each frame below it, at most max_frames, as far as the CFI of the
// target's modules goes (a frame without CFI ends the chain).
Result<std::vector<uint64_t>> call_chain(pid_t tid, size_t max_frames);

// The same walk, with each frame's stack pointer: frame i's own stack
// words lie in [sp, the next frame's sp).
struct StackFrame {
  uint64_t ip = 0;
  uint64_t sp = 0;
};
Result<std::vector<StackFrame>> call_frames(pid_t tid, size_t max_frames);

// The bits of a code address that hold a pointer-authentication code in
// thread tid (arm64 with PAC: a signed return address); 0 where there are
// none. Clearing them gives the plain address. call_frames' ips are plain.
uint64_t code_signature_mask(pid_t tid);

// file path as seen from us for a path inside the target's root.
std::string path_in_root(pid_t pid, const std::string& target_path);

// The file mapped at [start, end) in pid, readable even after it was
// removed from its directory: /proc/PID/map_files/START-END. Opening it
// needs CAP_SYS_ADMIN (or CAP_CHECKPOINT_RESTORE).
std::string map_files_path(pid_t pid, uint64_t start, uint64_t end);

// The mapping of maps that starts at start, or nullptr.
const Mapping* mapping_at(const std::vector<Mapping>& maps, uint64_t start);

}  // namespace ftjit::inject::detail
