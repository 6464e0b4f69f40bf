// SPDX-License-Identifier: MIT
// ftjit_engine_create in a build that has no code generator for its own
// ISA (the riscv64 build: Debian has neither asmjit nor LLVM for riscv64).
// Another ftjit generates its code: the one named by FTJIT_GENERATOR
// (runtime/agent/generator_process.h).
#include <memory>
#include <mutex>
#include <string>

#include "backends/backend.h"
#include "ftjit/ftjit.h"
#include "runtime/agent/generator_process.h"
#include "runtime/c_api_internal.h"
#include "runtime/module_scan.h"

namespace ftjit {
namespace {

struct RemoteGenerator {
  agent::RemoteEmitter* emitter = nullptr;
  std::unique_ptr<Backend> backend;
};

Result<RemoteGenerator*> start_generator() {
  auto emitter = agent::process_generator();
  if (!emitter) return emitter.take_error();
  auto* g = new RemoteGenerator();  // for the life of the process: engines keep its backend
  g->emitter = *emitter;
  g->backend = make_backend(native_isa(), *g->emitter);
  if (g->backend == nullptr) {
    return make_error(FTJIT_E_UNSUPPORTED, std::string("ftjit was built without the ") + isa_name(native_isa()) +
                                               " backend");
  }
  return g;
}

}  // namespace
}  // namespace ftjit

extern "C" ftjit_engine* ftjit_engine_create(const ftjit_engine_options* opts) {
  static std::mutex mu;
  static ftjit::RemoteGenerator* generator = nullptr;
  std::lock_guard<std::mutex> lock(mu);
  if (generator == nullptr) {
    auto g = ftjit::start_generator();
    if (!g) {
      ftjit::c_api_fail(g.error());
      return nullptr;
    }
    generator = *g;
    // The modules' DWARF producers come from the same generator.
    ftjit::set_producer_reader(ftjit::agent::generator_module_producers);
  }
  return ftjit::create_engine_handle(opts, *generator->backend, generator->emitter);
}
