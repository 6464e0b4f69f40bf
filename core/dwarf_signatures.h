// SPDX-License-Identifier: MIT
// The signatures of a module's functions, read from its DWARF with
// elfutils' libdw: what `ftjit trace --args/--retval` shows of a call
// (core/arg_types.h). The DWARF may be in the file itself or in a separate
// debug file that libdwfl finds by build-id or .gnu_debuglink, the way
// gdb and perf find it.
//
// In the CLI only (the ftjit_dwarf library, host builds): the agent, which
// is cross-built for riscv64, where Debian has no libdw, never links it.
//
// What it makes of the DWARF, beyond core/arg_types.h's own comments:
//  - names: "ns::Class::method" for C++ (from the namespaces and classes
//    that declare it), the plain name for C; types unqualified, as C
//    spells them ("struct point", "const char *", "int (*)(int)").
//  - a C++ class that is not trivial for the purpose of calls (a
//    user-provided copy/move constructor or destructor, virtual functions
//    or bases, or such a member or base; clang's DW_AT_calling_convention
//    when given) is passed by invisible reference: such a parameter is a
//    kPointer (named as the class). Returned, it takes a hidden first
//    argument register that the signature cannot express, so a function
//    returning one of 16 bytes or less is abi_changed (a bigger one is
//    returned in memory anyway, by size).
//  - a pointer to member function is a kStruct {ptr, adj} of two words
//    (Itanium C++ ABI); a pointer to data member a kPointer.
//  - an opaque struct has no members; __int128 and other integers of an
//    odd size are kUnsupported (size and alignment kept for placement).
//  - functions of assembler units (GNU as: DW_LANG_Mips_Assembler) are
//    left out: their DWARF says nothing of their parameters.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/arg_types.h"
#include "core/error.h"

namespace ftjit {

struct DebugInfo {
  // Sorted by entry, one per concrete out-of-line function (a subprogram
  // DIE with DW_AT_low_pc, or DW_AT_ranges: GCC's hot/cold split), whose
  // entry is the address of its ELF symbol in the file (st_value).
  std::vector<FunctionSignature> functions;
  // Where the DWARF came from, for messages: "the file itself",
  // "build-id: /usr/lib/debug/.build-id/ab/cdef.debug" or
  // "debuglink: /path/x.debug".
  std::string source;
};

// The code of the error when neither the file nor a separate debug file
// has DWARF: callers trace without arguments then, rather than fail.
inline constexpr ftjit_status kNoDebugInfo = FTJIT_E_UNSUPPORTED;

// Reads the ELF file at `path` (taken as given) and the DWARF libdwfl finds
// for it: its own .debug_info, else a debug file by build-id under
// ROOT/usr/lib/debug/.build-id/, else the file named by its
// .gnu_debuglink in the file's directory, its .debug/ subdirectory or
// ROOT/usr/lib/debug/<the file's directory>. `root` is "" or the
// traced process's root as this process sees it ("/proc/1234/root").
//
// Errors: FTJIT_E_SYSTEM when `path` cannot be read, FTJIT_E_ELF when it
// is not ELF or its DWARF cannot be read at all, kNoDebugInfo when there
// is no DWARF anywhere, FTJIT_E_INVALID_ARGUMENT for a root that holds a
// ':' (libdwfl's path separator). DWARF broken part way through gives the
// functions read before the break. A hostile file gives an error or a
// partial result, never a crash, a hang or an allocation out of
// proportion to its size.
//
// With DEBUGINFOD_URLS set in the environment, libdwfl also asks those
// servers for a debug file it did not find on disk.
[[nodiscard]] Result<DebugInfo> read_debug_info(const std::string& path, const std::string& root = "");

// The same from an ELF image in memory, which is copied (for the fuzzer and
// tests): only the image's own DWARF, no file is opened.
[[nodiscard]] Result<DebugInfo> read_debug_info_from_memory(const uint8_t* data, size_t size);

}  // namespace ftjit
