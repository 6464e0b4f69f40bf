// SPDX-License-Identifier: MIT
// Maps an ISA to its site encodings, paired with an emitter of the caller's
// (an agent's proxy to the generator in the CLI). Links no code generator.
#include "backends/backend.h"
#include "backends/x86_64/x86_64_backend.h"
#if FTJIT_HAVE_ARM64
#include "backends/arm64/arm64_backend.h"
#endif
#if FTJIT_HAVE_RISCV64
#include "backends/riscv64/riscv64_backend.h"
#endif

namespace ftjit {

std::unique_ptr<Backend> make_backend(Isa isa, const TrampolineEmitter& emitter) {
  switch (isa) {
    case Isa::kX86_64: return make_x86_64_backend(emitter);
#if FTJIT_HAVE_ARM64
    case Isa::kArm64: return make_arm64_backend(emitter);
#endif
#if FTJIT_HAVE_RISCV64
    case Isa::kRiscv64: return make_riscv64_backend(emitter);
#endif
    default: return nullptr;
  }
}

Isa native_isa() {
#if defined(__x86_64__)
  return Isa::kX86_64;
#elif defined(__aarch64__)
  return Isa::kArm64;
#elif defined(__riscv) && __riscv_xlen == 64
  return Isa::kRiscv64;
#else
  return Isa::kUnknown;
#endif
}

}  // namespace ftjit
