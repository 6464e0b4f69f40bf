// SPDX-License-Identifier: MIT
// The arm64 backend: site encodings (arm64_backend.cpp, no asmjit) and
// trampoline emission (arm64_emitter.cpp, asmjit's a64 Assembler).
#pragma once

#include <cstdint>
#include <memory>
#include <span>

#include "backends/backend.h"

namespace ftjit {

// Sites encoded here, trampolines emitted by `emitter` (which must outlive
// the backend). What an agent builds around a remote emitter.
std::unique_ptr<Backend> make_arm64_backend(const TrampolineEmitter& emitter);

// The asmjit emitter, and the in-process backend that uses it. Both exist
// on every host: the CLI on x86-64 emits a64 trampolines for an arm64 agent.
const TrampolineEmitter& arm64_emitter();
const Backend& arm64_backend();

// Where a function's sled starts, read from the words at its symbol. A
// function built with -mbranch-protection=standard (or =bti) begins with a
// landing pad (`bti c`, or `paciasp`, which is one too) and the compiler's
// NOPs follow it: the site then starts 4 bytes after the symbol, and that
// site start is the `ip` the trampolines report (they compute it from the
// return address, which cannot tell whether a pad precedes the sled).
struct Arm64SledStart {
  bool found = false;         // a sled, in any state, at the site start
  uint32_t offset = 0;        // site start - symbol: 0, or 4 after a pad
  uint32_t landing_pad = 0;   // the pad's word (arm64_encoding.h), 0: none
};
// `at_symbol`: at least 12 bytes from the symbol (8 without a pad). Never
// fails; found = false when no sled is there.
Arm64SledStart find_arm64_sled(std::span<const uint8_t> at_symbol);

// The one-time rewrite of a site's first word, done with every thread
// stopped (a thread may stand between the two words, and a nop -> mov is
// not one of the architecture's permitted live changes): init writes
// `mov x9, x30` over the compiler's first nop, de-init puts the nop back.
// Both are 4 bytes at the site start.
Insn arm64_init_word();
Insn arm64_deinit_word();

}  // namespace ftjit
