// SPDX-License-Identifier: MIT
// The x86-64 backend: site encodings (x86_64_backend.cpp, no asmjit) and
// trampoline emission (x86_64_emitter.cpp, asmjit).
#pragma once

#include <memory>

#include "backends/backend.h"

namespace ftjit {

// Sites encoded here, trampolines emitted by `emitter` (which must outlive
// the backend). What an agent builds around a remote emitter.
std::unique_ptr<Backend> make_x86_64_backend(const TrampolineEmitter& emitter);

// The asmjit emitter, and the in-process backend that uses it.
const TrampolineEmitter& x86_64_emitter();
const Backend& x86_64_backend();

}  // namespace ftjit
