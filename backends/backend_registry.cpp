// SPDX-License-Identifier: MIT
// Maps an ISA to its backend; the one place that knows which ones are built.
#include <cstring>

#include "backends/backend.h"
#include "backends/x86_64/x86_64_backend.h"

namespace ftjit {

const Backend* backend_for(Isa isa) {
  switch (isa) {
    case Isa::kX86_64: return &x86_64_backend();
    default: return nullptr;
  }
}

const TrampolineEmitter* emitter_for(Isa isa) {
  switch (isa) {
    case Isa::kX86_64: return &x86_64_emitter();
    default: return nullptr;
  }
}

const Backend* native_backend() {
#if defined(__x86_64__)
  return backend_for(Isa::kX86_64);
#else
  return nullptr;
#endif
}

}  // namespace ftjit
