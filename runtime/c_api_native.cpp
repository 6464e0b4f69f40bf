// SPDX-License-Identifier: MIT
// ftjit_engine_create: an engine with this machine's backend, trampolines
// generated in this process. Kept apart so that an agent, which links the
// runtime without any code generator, never pulls one in.
#include <mutex>

#include "backends/backend.h"
#include "core/dwarf_producers.h"
#include "ftjit/ftjit.h"
#include "runtime/agent/generator_process.h"
#include "runtime/c_api_internal.h"
#include "runtime/module_scan.h"

extern "C" ftjit_engine* ftjit_engine_create(const ftjit_engine_options* opts) {
  const ftjit::Backend* backend = ftjit::native_backend();
  if (backend == nullptr) {
    ftjit::c_api_fail(
        ftjit::make_error(FTJIT_E_UNSUPPORTED, "ftjit has no backend for this machine's ISA"));
    return nullptr;
  }
  // Entries are relocated here where this build has a decoder (LLVM MC: the
  // host's), else by the generator FTJIT_GENERATOR names, if ever asked.
  const ftjit::EntryRelocator* relocator = ftjit::local_entry_relocator();
  if (relocator == nullptr) relocator = ftjit::agent::generator_entry_relocator();
  // The modules' DWARF producers (what trampolines must keep) alike: libdw
  // here where this build has it, else the generator, if ever asked.
  static std::once_flag reader_set;
  std::call_once(reader_set, [] {
#if FTJIT_HAVE_LIBDW
    ftjit::set_producer_reader(
        [](const ftjit::ModuleFile&, const std::string& read_path) { return ftjit::compile_unit_producers(read_path); });
#else
    ftjit::set_producer_reader(ftjit::agent::generator_module_producers);
#endif
  });
  return ftjit::create_engine_handle(opts, *backend, relocator);
}
