// SPDX-License-Identifier: MIT
// AAPCS64 (Linux, not Darwin: stack arguments take 8-byte slots): where a
// function's parameters are at its first instruction and its return value
// at its return. The procedure of AAPCS64 6.8.2, with its three counters:
//
//   NGRN  next general register    x0..x7  (ftjit_regs::arg[0..7])
//   NSRN  next SIMD/FP register    v0..v7  (fp[0..7], 16 bytes each)
//   NSAA  next stack argument      sp+0 at the first instruction (no return
//                                  address on the stack: it is in x30)
//
// What goes where:
//
//   float, double, long double     next v register (its low 4, 8, 16 bytes)
//   HFA: 1..4 members, all float,  one member per v register, from NSRN, if
//     all double (all the same)    all fit; else on the stack, and NSRN = 8
//   integers, pointers, other      next 1-2 x registers (a 16-aligned one
//     composites <= 16 bytes       from an even NGRN) if all fit; else on
//                                  the stack, and NGRN = 8
//   composites > 16 bytes          copied by the caller; the copy's address
//                                  is the argument (an integer one)
//
// On the stack every argument takes a multiple of 8 bytes (a float: its
// first 4 of 8), from an offset aligned to 8, or 16 for a 16-aligned type.
// A composite's alignment is its fields' (GCC 9 on: an aligned attribute
// on the struct itself does not count).
//
// Returns: x0/x1, v0..v3 for an HFA (ftjit_ret_regs has v0 and v1 only),
// and > 16 bytes in memory at the address the caller put in x8, which the
// callee does not give back: no argument moves (unlike x86-64 and riscv64).
#include <algorithm>
#include <optional>

#include "backends/calling_convention.h"

namespace ftjit::arm64 {
namespace {

using namespace calling_convention;

constexpr int kArgRegs = 8;    // x0..x7, v0..v7
constexpr int kRetFpRegs = 2;  // v0, v1 captured at return

// A homogeneous floating-point aggregate (or a lone FP scalar, or a
// _Complex: an HFA of two): how many members and how big each.
struct Hfa {
  int members = 0;
  uint32_t member_size = 0;
};

std::optional<Hfa> hfa_of(const Shape& shape) {
  if (shape.opaque || shape.fields.empty() || shape.fields.size() > 4) return std::nullopt;
  const Field& first = shape.fields.front();
  if (first.cls != FieldClass::kFloat && first.cls != FieldClass::kLongDouble) return std::nullopt;
  for (const Field& f : shape.fields)
    if (f.cls != first.cls || f.size != first.size) return std::nullopt;
  return Hfa{static_cast<int>(shape.fields.size()), first.size};
}

// A composite's alignment for NGRN and NSAA: its fields' largest (the
// type's own alignment for an opaque one, whose fields are unknown).
uint32_t argument_align(const Shape& shape) {
  if (shape.opaque || shape.fields.empty()) return shape.align;
  uint32_t align = 1;
  for (const Field& f : shape.fields) align = std::max(align, natural_align(f.size));
  return std::min<uint32_t>(align, 16);
}

ArgPlace hfa_pieces(const Shape& shape, ArgSource source, int first_reg) {
  ArgPlace p;
  int reg = first_reg;
  for (const Field& f : shape.fields)
    p.pieces.push_back(
        ArgPiece{source, static_cast<uint16_t>(reg++), static_cast<uint8_t>(f.size), static_cast<uint16_t>(f.offset)});
  return p;
}

// `size` (<= 16) bytes in consecutive general registers, 8 bytes each.
ArgPlace gpr_pieces(uint32_t size, ArgSource source, int first_reg) {
  ArgPlace p;
  for (uint32_t at = 0; at < size; at += 8)
    p.pieces.push_back(ArgPiece{source, static_cast<uint16_t>(first_reg + at / 8),
                                static_cast<uint8_t>(std::min<uint32_t>(8, size - at)), static_cast<uint16_t>(at)});
  return p;
}

struct Counters {
  int ngrn = 0;
  int nsrn = 0;
  uint32_t nsaa = 0;

  // `size` bytes on the stack, from an offset aligned to `align` (8 or 16).
  ArgPlace stack(uint32_t size, uint32_t align) {
    nsaa = align_up(nsaa, align);
    ArgPlace p = on_stack(nsaa, size);
    nsaa += align_up(size, 8);
    return p;
  }
};

ArgPlace place_one(const Shape& shape, Counters& c) {
  if (shape.size == 0) return ArgPlace{};  // GNU C's empty struct: passed in nothing
  if (const std::optional<Hfa> hfa = hfa_of(shape)) {
    if (c.nsrn + hfa->members <= kArgRegs) {
      ArgPlace p = hfa_pieces(shape, ArgSource::kFpReg, c.nsrn);
      c.nsrn += hfa->members;
      return p;
    }
    c.nsrn = kArgRegs;  // all or nothing: later FP arguments go on the stack too
    return c.stack(shape.size, hfa->member_size >= 16 ? 16 : 8);
  }
  if (shape.size > 16) {
    // The caller's copy, by its address: an integer argument.
    if (c.ngrn < kArgRegs) return by_reference(ArgSource::kIntReg, static_cast<uint16_t>(c.ngrn++));
    c.nsaa = align_up(c.nsaa, 8);
    if (c.nsaa > 0xffff) return unavailable("beyond 64 KiB of stack arguments");
    ArgPlace p = by_reference(ArgSource::kStack, static_cast<uint16_t>(c.nsaa));
    c.nsaa += 8;
    return p;
  }
  const uint32_t align = argument_align(shape);
  const int words = static_cast<int>((shape.size + 7) / 8);
  if (align >= 16) c.ngrn = align_up(static_cast<uint32_t>(c.ngrn), 2);
  if (c.ngrn + words <= kArgRegs) {
    ArgPlace p = gpr_pieces(shape.size, ArgSource::kIntReg, c.ngrn);
    c.ngrn += words;
    return p;
  }
  c.ngrn = kArgRegs;  // never split between x7 and the stack
  return c.stack(shape.size, align >= 16 ? 16 : 8);
}

ArgPlace place_return(const Shape& shape) {
  if (const std::optional<Hfa> hfa = hfa_of(shape)) {
    if (hfa->members > kRetFpRegs) return unavailable("returned in v0-v3");
    return hfa_pieces(shape, ArgSource::kRetFp, 0);
  }
  if (shape.size > 16) return unavailable("returned in memory");  // at x8's address, not returned
  return gpr_pieces(shape.size, ArgSource::kRetInt, 0);
}

}  // namespace

PlacedSignature place_arguments(const FunctionSignature& sig) {
  PlacedSignature out;
  if (sig.ret) {
    const Shape shape = shape_of(*sig.ret);
    out.ret = finish(place_return(shape), shape);
  }
  Counters counters;
  for (const Param& param : sig.params) {
    const Shape shape = shape_of(param.type);
    out.params.push_back(finish(place_one(shape, counters), shape));
  }
  return out;
}

}  // namespace ftjit::arm64
