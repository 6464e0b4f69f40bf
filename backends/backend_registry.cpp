// SPDX-License-Identifier: MIT
// Maps an ISA to its backend; the one place that knows which ones are built.
#include <cstring>
#include <map>
#include <mutex>

#include "backends/backend.h"
#include "backends/x86_64/x86_64_backend.h"
#if FTJIT_HAVE_ARM64
#include "backends/arm64/arm64_backend.h"
#endif
#if FTJIT_HAVE_RISCV64
#include "backends/riscv64/riscv64_backend.h"
#endif
#if FTJIT_HAVE_X86_64_DECODER
#include "backends/x86_64/x86_64_decoder.h"
#endif
#if FTJIT_HAVE_ARM64_DECODER
#include "backends/arm64/arm64_decoder.h"
#endif
#if FTJIT_HAVE_RISCV64_DECODER
#include "backends/riscv64/riscv64_decoder.h"
#endif

namespace ftjit {

const Backend* backend_for(Isa isa) {
  switch (isa) {
    case Isa::kX86_64: return &x86_64_backend();
#if FTJIT_HAVE_ARM64
    case Isa::kArm64: return &arm64_backend();
#endif
#if FTJIT_HAVE_RISCV64
    case Isa::kRiscv64: return &riscv64_backend();
#endif
    default: return nullptr;
  }
}

const TrampolineEmitter* emitter_for(Isa isa) {
  switch (isa) {
    case Isa::kX86_64: return &x86_64_emitter();
#if FTJIT_HAVE_ARM64
    case Isa::kArm64: return &arm64_emitter();
#endif
#if FTJIT_HAVE_RISCV64
    case Isa::kRiscv64: return &riscv64_emitter();
#endif
    default: return nullptr;
  }
}

const InstructionDecoder* decoder_for(Isa isa) {
  switch (isa) {
#if FTJIT_HAVE_X86_64_DECODER
    case Isa::kX86_64: return x86_64::x86_64_decoder_error().empty() ? &x86_64::x86_64_decoder() : nullptr;
#endif
#if FTJIT_HAVE_ARM64_DECODER
    case Isa::kArm64: return arm64::arm64_decoder_error().empty() ? &arm64::arm64_decoder() : nullptr;
#endif
#if FTJIT_HAVE_RISCV64_DECODER
    case Isa::kRiscv64: return riscv64::riscv64_decoder_error().empty() ? &riscv64::riscv64_decoder() : nullptr;
#endif
    default: return nullptr;
  }
}

namespace {

// Each module file opened (read and swept) once, kept for later requests:
// an attach relocates many functions of few modules.
class CachingRelocator final : public EntryRelocator {
 public:
  Result<RelocatedEntry> relocate_entry(const RelocationRequest& request) const override {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = modules_.find(request.path);
    if (it == modules_.end()) {
      auto opened = ModuleRelocator::open(request.path, decoder_for);
      if (!opened) return opened.take_error();
      it = modules_.emplace(request.path, std::move(opened.value())).first;
    }
    return it->second->relocate(request.entry, request.load_bias, request.place, request.max_bytes,
                                request.stub);
  }

 private:
  mutable std::mutex mu_;
  mutable std::map<std::string, std::unique_ptr<ModuleRelocator>> modules_;
};

}  // namespace

const EntryRelocator* local_entry_relocator() {
#if FTJIT_HAVE_X86_64_DECODER || FTJIT_HAVE_ARM64_DECODER || FTJIT_HAVE_RISCV64_DECODER
  static const CachingRelocator relocator;
  return &relocator;
#else
  return nullptr;
#endif
}

// Where the native backend is picked (native_isa() is the sites library's,
// which an embedder's link need not include).
const Backend* native_backend() {
#if defined(__x86_64__)
  return backend_for(Isa::kX86_64);
#elif defined(__aarch64__)
  return backend_for(Isa::kArm64);
#elif defined(__riscv) && __riscv_xlen == 64
  return backend_for(Isa::kRiscv64);
#else
  return nullptr;
#endif
}

}  // namespace ftjit
