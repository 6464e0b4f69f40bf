// SPDX-License-Identifier: MIT
// A code generator in another process, for an embedder whose own build
// lacks one: the ftjit named by FTJIT_GENERATOR (an ftjit of any ISA whose
// build has this ISA's emitter and decoder: the x86-64 host's, when the
// process runs under qemu-user), started once per process as
//
//     $FTJIT_GENERATOR generator --isa <this ISA> --fd 3
//
// on one end of a socket pair. Its requests and bytes are the agent's
// (remote_emitter.h); it ends when the process does (its end closes).
#pragma once

#include "core/error.h"
#include "runtime/agent/remote_emitter.h"

namespace ftjit::agent {

// The process's generator, started on the first call (later calls return
// the same one, or the same error's text again).
Result<RemoteEmitter*> process_generator();

// The producers of a module's file, read by the process's generator
// (started if need be): the reader of a build without libdw
// (runtime/module_scan.h, set_producer_reader).
Result<std::vector<CompileUnitProducer>> generator_module_producers(const ModuleFile& file, const std::string& read_path);

// An EntryRelocator that starts the process's generator when first asked
// (an embedder that never relocates starts none).
const EntryRelocator* generator_entry_relocator();

}  // namespace ftjit::agent
