// SPDX-License-Identifier: MIT
// Where a function's parameters are at its first instruction, and its
// return value at its return, as each ISA's psABI puts them (LP64 Linux):
//
//   x86-64   System V AMD64 psABI          backends/x86_64/x86_64_calling_convention.cpp
//   arm64    AAPCS64 (Linux, not Darwin)   backends/arm64/arm64_calling_convention.cpp
//   riscv64  RISC-V LP64D                  backends/riscv64/riscv64_calling_convention.cpp
//
// Pure logic (no asmjit, no LLVM): the CLI runs it for any ISA, on any host,
// when it builds an Attach request (core/arg_types.h draws the data).
//
// Each placer walks the parameters in order, as the caller's compiler does,
// with the psABI's counters (next integer register, next FP register, next
// stack offset). A value that cannot be shown is still walked: it takes its
// registers or stack bytes, so that every later parameter lands where the
// compiler put it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/arg_types.h"
#include "core/site.h"

namespace ftjit {

// Where `isa`'s psABI (LP64 Linux: x86-64 System V, AAPCS64, RISC-V LP64D)
// puts each of sig's parameters at the function's first instruction, and
// its return value at the return. Never fails: a value that cannot be read
// is placed with unavailable=true and a short `why` ("returned in memory",
// "long double", "optimised out", "unknown ISA"). Every later parameter's
// place is still right (a parameter that cannot be shown still consumes
// its registers/stack).
PlacedSignature place_arguments(Isa isa, const FunctionSignature& sig);

// The per-ISA placers behind place_arguments, for sig.abi_changed == false.
namespace x86_64 {
PlacedSignature place_arguments(const FunctionSignature& sig);
}
namespace arm64 {
PlacedSignature place_arguments(const FunctionSignature& sig);
}
namespace riscv64 {
PlacedSignature place_arguments(const FunctionSignature& sig);
}

// ---- Shared by the placers (calling_convention.cpp).
namespace calling_convention {

// What a scalar of a value is to a calling convention.
enum class FieldClass : uint8_t {
  kInteger,     // integers, enums, bools, chars, pointers: general registers
  kFloat,       // float, double (any kFloat): FP registers where the psABI says
  kLongDouble,  // long double: x87 80-bit on x86-64, IEEE quad on arm64 and riscv64
  kUnknown,     // a member whose kind says nothing about its class (kUnsupported)
};

struct Field {
  uint32_t offset = 0;
  uint32_t size = 0;
  FieldClass cls = FieldClass::kInteger;
};

// A value as the placers see it, whatever its ValueKind: a scalar is one
// field at offset 0, a _Complex two (real, imaginary), a struct its flattened
// scalar members. `opaque`: its bytes are known, its fields are not (an
// opaque struct, a union): every psABI then places it by size and alignment.
struct Shape {
  uint32_t size = 0;
  uint32_t align = 1;  // the type's alignment: DWARF's, or the natural one
  std::vector<Field> fields;
  bool opaque = false;
  bool complex = false;  // a _Complex scalar (x86-64 returns complex long double in st0/st1)
  // Why its bytes cannot be shown (a long double, a _Complex, a union), ""
  // when they can: the value is then placed unavailable with that reason.
  std::string unshowable;
};

Shape shape_of(const ValueType& type);

// The natural alignment of a scalar field of `size` bytes (1, 2, 4, 8, 16).
uint32_t natural_align(uint32_t size);

uint32_t align_up(uint32_t value, uint32_t align);

ArgPlace unavailable(std::string why);

// `size` bytes at `stack_offset` (from the sp at entry), as pieces of at
// most 16 bytes; unavailable when an offset does not fit a piece's 16 bits.
ArgPlace on_stack(uint32_t stack_offset, uint32_t size);

// The value's address in an integer register or a stack slot: a value
// passed (or returned) by reference.
ArgPlace by_reference(ArgSource source, uint16_t index);

// A value that cannot be shown keeps its reason; the placement walked it
// for the registers and stack it takes.
ArgPlace finish(ArgPlace place, const Shape& shape);

}  // namespace calling_convention
}  // namespace ftjit
