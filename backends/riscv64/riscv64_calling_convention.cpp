// SPDX-License-Identifier: MIT
// RISC-V LP64D (riscv-cc.adoc, XLEN = FLEN = 64): where a function's
// parameters are at its first instruction and its return value at its
// return. Arguments take a0..a7 (ftjit_regs::arg[0..7]) and fa0..fa7
// (fp[0..7], the low 8 bytes; a float NaN-boxed in the low 4), then the
// stack from sp+0 at the first instruction (the return address is in ra).
//
// The hardware floating-point convention first, on the value flattened to
// its scalar fields (a lone float or double is a struct of one):
//
//   { float|double }                     one fa register
//   { float|double, float|double }       two fa registers (need not be a pair)
//   { float|double, integer <= 8 B }     one fa and one a register, in
//     (either order)                     field order within each file
//
// if enough registers of each file are left; otherwise, and for every other
// value, the integer convention: a float in an a register once the fa ones
// are gone (!), a value <= 8 bytes in one a register, <= 16 bytes in two
// (any two: the even-register rule is for variadic arguments only), split
// when only a7 is left:
//
//   a7          bytes 0..7
//   sp+NSAA     bytes 8..15
//
// on the stack when none is (8-byte slots; 16-aligned types from a
// 16-aligned offset); > 16 bytes by reference (the caller's copy's address
// is the argument). A value returned > 16 bytes goes where the caller's
// hidden first argument, in a0, points: every integer parameter moves one
// register on, and the address is not returned.
#include <algorithm>

#include "backends/calling_convention.h"

namespace ftjit::riscv64 {
namespace {

using namespace calling_convention;

constexpr int kArgRegs = 8;    // a0..a7, fa0..fa7
constexpr uint32_t kXlen = 8;  // bytes
constexpr uint32_t kFlen = 8;  // bytes: D, no Q

// The hardware floating-point convention's view of a value.
struct Flattened {
  enum Kind { kNone, kOneFp, kTwoFp, kFpAndInt } kind = kNone;
  Field fp;     // kOneFp, kFpAndInt: the FP field; kTwoFp: the first
  Field other;  // kTwoFp: the second FP field; kFpAndInt: the integer one
};

bool is_fp(const Field& f) { return f.cls == FieldClass::kFloat && (f.size == 4 || f.size == kFlen); }
bool is_int(const Field& f) { return f.cls == FieldClass::kInteger && f.size <= kXlen; }

Flattened flatten(const Shape& shape) {
  if (shape.opaque || shape.size > 2 * kXlen) return {};
  const std::vector<Field>& f = shape.fields;
  if (f.size() == 1 && is_fp(f[0])) return {Flattened::kOneFp, f[0], {}};
  if (f.size() != 2) return {};
  if (is_fp(f[0]) && is_fp(f[1])) return {Flattened::kTwoFp, f[0], f[1]};
  if (is_fp(f[0]) && is_int(f[1])) return {Flattened::kFpAndInt, f[0], f[1]};
  if (is_int(f[0]) && is_fp(f[1])) return {Flattened::kFpAndInt, f[1], f[0]};
  return {};
}

ArgPiece field_piece(ArgSource source, int reg, const Field& f) {
  return ArgPiece{source, static_cast<uint16_t>(reg), static_cast<uint8_t>(f.size), static_cast<uint16_t>(f.offset)};
}

// `size` (<= 16) bytes in consecutive integer registers, 8 bytes each.
ArgPlace gpr_pieces(uint32_t size, ArgSource source, int first_reg) {
  ArgPlace p;
  for (uint32_t at = 0; at < size; at += kXlen)
    p.pieces.push_back(ArgPiece{source, static_cast<uint16_t>(first_reg + at / kXlen),
                                static_cast<uint8_t>(std::min(kXlen, size - at)), static_cast<uint16_t>(at)});
  return p;
}

struct Counters {
  int next_int = 0;
  int next_fp = 0;
  uint32_t stack = 0;  // bytes of stack arguments so far
};

// The integer calling convention.
ArgPlace integer_convention(const Shape& shape, Counters& c) {
  if (shape.size > 2 * kXlen) {
    // The caller's copy, by its address: an integer argument.
    if (c.next_int < kArgRegs) return by_reference(ArgSource::kIntReg, static_cast<uint16_t>(c.next_int++));
    if (c.stack > 0xffff) return unavailable("beyond 64 KiB of stack arguments");
    ArgPlace p = by_reference(ArgSource::kStack, static_cast<uint16_t>(c.stack));
    c.stack += kXlen;
    return p;
  }
  const int words = static_cast<int>((shape.size + kXlen - 1) / kXlen);
  if (c.next_int + words <= kArgRegs) {
    ArgPlace p = gpr_pieces(shape.size, ArgSource::kIntReg, c.next_int);
    c.next_int += words;
    return p;
  }
  if (c.next_int < kArgRegs) {
    // Two words, one register left: the low word in a7, the high one on
    // the stack (no value is on the stack yet: nothing skips a register).
    ArgPlace p = gpr_pieces(kXlen, ArgSource::kIntReg, c.next_int);
    ArgPlace high = on_stack(c.stack, shape.size - kXlen);
    if (high.unavailable) return high;
    p.pieces.push_back(ArgPiece{ArgSource::kStack, high.pieces[0].index, high.pieces[0].size, kXlen});
    c.next_int = kArgRegs;
    c.stack += kXlen;
    return p;
  }
  c.stack = align_up(c.stack, std::clamp<uint32_t>(shape.align, kXlen, 16));
  ArgPlace p = on_stack(c.stack, shape.size);
  c.stack += align_up(shape.size, kXlen);
  return p;
}

ArgPlace place_one(const Shape& shape, Counters& c) {
  if (shape.size == 0) return ArgPlace{};  // GNU C's empty struct: passed in nothing
  const Flattened flat = flatten(shape);
  ArgPlace p;
  switch (flat.kind) {
    case Flattened::kOneFp:
      if (c.next_fp >= kArgRegs) break;
      p.pieces = {field_piece(ArgSource::kFpReg, c.next_fp++, flat.fp)};
      return p;
    case Flattened::kTwoFp:
      if (c.next_fp + 2 > kArgRegs) break;
      p.pieces = {field_piece(ArgSource::kFpReg, c.next_fp, flat.fp),
                  field_piece(ArgSource::kFpReg, c.next_fp + 1, flat.other)};
      c.next_fp += 2;
      return p;
    case Flattened::kFpAndInt:
      if (c.next_fp >= kArgRegs || c.next_int >= kArgRegs) break;
      p.pieces = {field_piece(ArgSource::kFpReg, c.next_fp++, flat.fp),
                  field_piece(ArgSource::kIntReg, c.next_int++, flat.other)};
      std::sort(p.pieces.begin(), p.pieces.end(),
                [](const ArgPiece& a, const ArgPiece& b) { return a.offset < b.offset; });
      return p;
    case Flattened::kNone: break;
  }
  return integer_convention(shape, c);
}

}  // namespace

PlacedSignature place_arguments(const FunctionSignature& sig) {
  PlacedSignature out;
  Counters counters;
  if (sig.ret) {
    const Shape shape = shape_of(*sig.ret);
    // Returned as the first argument would be passed, in the return
    // registers (a0/a1, fa0/fa1), or in memory where one passed by
    // reference would be.
    if (shape.size > 2 * kXlen) {
      counters.next_int = 1;  // the caller's buffer, in a0
      out.ret = finish(unavailable("returned in memory"), shape);
    } else {
      Counters ret;
      ArgPlace p = place_one(shape, ret);
      for (ArgPiece& piece : p.pieces)
        piece.source = piece.source == ArgSource::kFpReg ? ArgSource::kRetFp : ArgSource::kRetInt;
      out.ret = finish(std::move(p), shape);
    }
  }
  for (const Param& param : sig.params) {
    const Shape shape = shape_of(param.type);
    out.params.push_back(finish(place_one(shape, counters), shape));
  }
  return out;
}

}  // namespace ftjit::riscv64
