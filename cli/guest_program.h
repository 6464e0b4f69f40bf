// SPDX-License-Identifier: MIT
// `ftjit run` of a program built for another ISA than this machine's: it
// runs under qemu-user (qemu-aarch64 for arm64), with the agent built for
// that ISA preloaded in the guest. The agent has no code generator of its
// own: it asks this CLI, which emits the guest ISA's trampolines with that
// ISA's backend (the generator service, agent_client.h), so one x86-64
// ftjit serves arm64 programs.
//
//   ftjit run --plugin count -- ./prog_arm64 ARGS
//     = qemu-aarch64 -L SYSROOT -E LD_LIBRARY_PATH=SYSROOT/lib
//                    -E LD_PRELOAD=<arm64 agent> -E FTJIT_AGENT_WAIT_MS=...
//                    ./prog_arm64 ARGS
//
// Everything is checked before the program starts, each failure one line
// that names the fix: an ISA with no backend in this build, qemu missing,
// a sysroot without the ISA's loader, no agent built for the ISA.
#pragma once

#include <string>
#include <vector>

#include "core/error.h"
#include "core/site.h"

namespace ftjit::cli {

// The ISA of the program `prog` names (looked up in PATH as execvp does
// when it holds no '/'), from its ELF header. FTJIT_E_INVALID_ARGUMENT for
// a missing or unreadable file; kUnknown for a file that is not a 64-bit
// little-endian ELF of an ISA ftjit knows (a script, say: it runs natively).
struct ProgramFile {
  std::string path;  // as resolved
  Isa isa = Isa::kUnknown;
  uint16_t e_machine = 0;
};
Result<ProgramFile> inspect_program(const std::string& prog);

// The ISA this ftjit runs on.
Isa host_isa();

// A file ftjit brings to a guest of `isa` (its agent, its bench):
// $<env_prefix>_<ISA> (FTJIT_AGENT_ARM64), else ../lib/ftjit/<isa>/<name>
// beside this executable (an installed prefix, or the build tree, where
// scripts/build_cross.sh links the cross build's), checked readable with
// `access_mode` and to be an ELF of that ISA. The errors name the variable;
// `missing_hint` says how to get one, `kind` what it is ("shared object").
Result<std::string> find_guest_file(Isa isa, const std::string& env_prefix, const std::string& name,
                                    int access_mode, const std::string& kind,
                                    const std::string& missing_hint);

// Whether this ftjit can serve a program of `isa` (argv0 names it in the
// message): it runs under qemu-user and needs a backend for the ISA.
Status check_guest_isa(Isa isa, const std::string& argv0);

// The command that starts `argv` (argv[0] being a program of `isa`) under
// qemu-user with `agent` preloaded in the guest and `env` (NAME=VALUE)
// set for it. `sysroot` is the guest's root for its loader and libc (empty:
// the default, /usr/<triple>).
Result<std::vector<std::string>> guest_command(Isa isa, const std::string& sysroot,
                                               const std::string& agent,
                                               const std::vector<std::string>& env,
                                               const std::vector<std::string>& argv);

}  // namespace ftjit::cli
