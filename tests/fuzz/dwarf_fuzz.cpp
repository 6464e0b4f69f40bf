// SPDX-License-Identifier: MIT
// libFuzzer target: arbitrary bytes through read_debug_info_from_memory
// (core/dwarf_signatures.h), libdw reading the image's DWARF and the reader
// turning it into signatures: an error of the promised codes, or a result
// within the promised bounds, never a crash or a hang.
//
// Build and run (needs libdw-dev; seeds: files with DWARF, e.g. the
// fixtures in <build>/tests/dwarf_signatures):
//   clang++ -std=c++20 -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
//     -fno-omit-frame-pointer -I. -Iinclude tests/fuzz/dwarf_fuzz.cpp core/dwarf_signatures.cpp \
//     core/error.cpp -ldw -lelf -o dwarf_fuzz
//   ./dwarf_fuzz -max_total_time=60 -max_len=65536 corpus/
#include <cstddef>
#include <cstdint>

#include "core/dwarf_signatures.h"

namespace {

// The reader's caps (core/dwarf_signatures.cpp), with room for the
// "scope::" a function's name gains.
constexpr size_t kMaxMembers = 64;
constexpr size_t kMaxEnumerators = 4096;
constexpr size_t kMaxTypeName = 256;
constexpr size_t kMaxFunctionName = 1024 + 2 + 256;

void check(const ftjit::ValueType& t) {
  if (t.name.size() > kMaxTypeName) __builtin_trap();
  if (t.members.size() > kMaxMembers || t.enumerators.size() > kMaxEnumerators) __builtin_trap();
  if (t.kind != ftjit::ValueKind::kStruct && !t.members.empty()) __builtin_trap();
  if (t.opaque && !t.members.empty()) __builtin_trap();
  for (const ftjit::Member& m : t.members) {
    if (m.kind == ftjit::ValueKind::kStruct || m.size == 0 || m.size > 16) __builtin_trap();
    if (m.enumerators.size() > kMaxEnumerators) __builtin_trap();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto info = ftjit::read_debug_info_from_memory(data, size);
  if (!info.ok()) {
    const ftjit_status code = info.error().code;
    if (code != FTJIT_E_ELF && code != ftjit::kNoDebugInfo) __builtin_trap();
    if (info.error().message.empty()) __builtin_trap();
    return 0;
  }
  const auto& functions = info->functions;
  for (size_t i = 0; i < functions.size(); ++i) {
    const ftjit::FunctionSignature& f = functions[i];
    // Sorted and unique by entry.
    if (i > 0 && functions[i - 1].entry >= f.entry) __builtin_trap();
    if (f.name.size() > kMaxFunctionName) __builtin_trap();
    for (const ftjit::Param& p : f.params) check(p.type);
    if (f.ret) check(*f.ret);
  }
  return 0;
}
