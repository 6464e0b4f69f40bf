// SPDX-License-Identifier: MIT
// What an ELF file's GNU property note (PT_GNU_PROPERTY, else a PT_NOTE
// holding NT_GNU_PROPERTY_TYPE_0) asks of the loader: on arm64, whether
// its code is to run on BTI-guarded pages. A loader guards a module's text
// (PROT_BTI) exactly when the file is marked and the CPU has BTI; ftjit
// needs to know when the kernel's own record (smaps' "bt") is unavailable,
// as under qemu-user, whose emulated smaps shows no real flags.
#pragma once

#include <cstdint>
#include <span>

namespace ftjit {

// Whether `head` (a file's first bytes: the program headers and the note
// they point to must lie within them) is a 64-bit little-endian aarch64
// ELF marked GNU_PROPERTY_AARCH64_FEATURE_1_BTI. false for anything else,
// truncated or malformed input included.
bool elf_marks_bti(std::span<const uint8_t> head);

}  // namespace ftjit
