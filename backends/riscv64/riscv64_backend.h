// SPDX-License-Identifier: MIT
// The riscv64 backend: site encodings read and checked here
// (riscv64_backend.cpp: no LLVM, what an agent in a riscv64 process
// needs), every instruction written assembled by LLVM MC on the host
// (riscv64_emitter.cpp, riscv64_assembler.cpp).
//
// (a) The site, -fpatchable-function-entry=8,4 (rv64gc: c.nop sleds) or
//     =4,2 (rv64g: nop sleds), functions aligned to 8 (-falign-functions=8):
//
//     entry-8   [ ops literal, 8 B, 8-aligned ]   4 c.nop | 2 nop
//     entry+0   auipc t0, hi(D)                   once, all threads stopped
//     entry+4   nop <-> jalr t0, lo(D)(t0)        live, one aligned word
//     entry+8   body ...
//
//     state      entry+0           entry+4            written
//     compiled   c.nop c.nop | nop c.nop c.nop | nop  by the compiler
//     disabled   auipc t0, hi(D)   nop                init, all stopped
//     enabled    auipc t0, hi(D)   jalr t0, lo(D)(t0) live: one 4-byte store
//
//     After the jalr: t0 = entry+8 (where the trampoline returns), ra = the
//     caller's return address, untouched; the literal is at t0-16 (Linux's
//     riscv CALL_OPS layout, seed 000).
//
// (b) Why a stub per site. The auipc is not live-patchable (a thread may
//     have run it and not yet the jalr), so once written it fixes the 4 KiB
//     window the jalr's 12 bits can reach; and those windows are not the
//     same for two sites at different offsets within a page. A site can
//     therefore reach one address of ftjit's choosing, chosen at init:
//     its stub (backend.h, StubUse::kEverySite). Stubs mirror the module's
//     text at one distance D per module (in reach of auipc+jalr: +-2 GiB),
//     so that the auipc and the jalr are the same two words at every site
//     of the module and come from the emitter once:
//
//     module text                         stub mirror (module's, RX)
//     entry-8  [ literal ]                entry+D-8  [ trampoline address ]
//     entry+0  auipc t0, hi(D)   --.      entry+D+0  auipc t1, 0
//     entry+4  jalr t0, lo(D)(t0) -'-->   entry+D+4  ld t1, -8(t1)
//     entry+8  body                       entry+D+8  jr t1   --> trampoline
//
//     A trampoline is reached from its stub by an absolute address, from
//     anywhere; changing a site's trampoline is an aligned 8-byte store into
//     its stub's word (data: no instruction-cache maintenance), enabling
//     or disabling it the one jalr <-> nop store. The stub clobbers t1 only,
//     a temporary no caller keeps across a call (seed 003 uses the same
//     register for a direct trampoline's address). Sites need 8-byte
//     aligned entries (the stub's word); two sites' stubs never overlap,
//     since with the literal layouts entries are at least 24 bytes apart
//     and a stub takes 20.
//
// (c) Registers at the live word (RISC-V psABI, TOOLCHAIN.md Q6): a0-a7
//     and fa0-fa7 arguments, t2 the static chain: live; t0 is the sled's
//     own (the auipc wrote it before any call), t1 the stub's; ra the
//     return address; sp 16-aligned. The trampolines' frame:
//     riscv64_emitter.cpp.
#pragma once

#include <memory>

#include "backends/backend.h"

namespace ftjit {

// Sites encoded here, trampolines and site instructions emitted by
// `emitter` (which must outlive the backend). What an agent builds around
// a remote emitter.
std::unique_ptr<Backend> make_riscv64_backend(const TrampolineEmitter& emitter);

// The LLVM MC emitter, and the in-process backend that uses it (hosts with
// LLVM: the CLI on x86-64 serves a riscv64 agent).
// Trampolines use 4-byte instructions only (riscv64_emitter) and run on
// rv64g and rv64gc harts alike; riscv64_compressed_emitter's use the C
// extension's 2-byte ones where the assembler finds one.
const TrampolineEmitter& riscv64_emitter();
const TrampolineEmitter& riscv64_compressed_emitter();
const Backend& riscv64_backend();

}  // namespace ftjit
