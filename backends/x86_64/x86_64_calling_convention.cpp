// SPDX-License-Identifier: MIT
// x86-64 System V (psABI 3.2.3): where a function's parameters are at its
// first instruction and its return value at its return.
//
// Every value is classified by eightbyte: each 8 bytes of it take the class
// of the fields they hold, merged (INTEGER wins over SSE; x87 mixed with
// anything is MEMORY):
//
//   struct { double d; long l; }    [ SSE     | INTEGER ]  -> xmm, general register
//   struct { float f; int i; }      [ INTEGER ]            -> one general register
//   struct { float a, b, c; }       [ SSE     | SSE     ]  -> two xmm (a, b in the first)
//   long double                     [ X87     | X87UP   ]  -> stack (returned in st0)
//   > 16 bytes, or a misaligned field (packed)             -> MEMORY: stack, by value
//
// Arguments take rdi rsi rdx rcx r8 r9 (ftjit_regs::arg[0..5]) and
// xmm0..xmm7 (fp[0..7]) in order; a value that needs more registers than
// are left goes whole on the stack, and the registers stay for later
// arguments. The stack at the first instruction:
//
//   sp+0   return address
//   sp+8   first stack argument, 16-aligned (every argument takes a multiple
//          of 8 bytes; one aligned to 16 or more starts at an offset from
//          here so aligned, as GCC and Clang put it)
//
// A value returned in MEMORY is written by the callee where the caller's
// hidden first argument points, in rdi: every integer parameter moves one
// register on, and rax returns that address.
#include <algorithm>

#include "backends/calling_convention.h"

namespace ftjit::x86_64 {
namespace {

using namespace calling_convention;

enum class Class : uint8_t { kNone, kInteger, kSse, kSseUp, kX87, kX87Up, kComplexX87, kMemory };

constexpr int kIntArgRegs = 6;          // rdi rsi rdx rcx r8 r9
constexpr int kSseArgRegs = 8;          // xmm0..xmm7
constexpr uint32_t kFirstStackArg = 8;  // above the return address

bool is_x87(Class c) { return c == Class::kX87 || c == Class::kX87Up || c == Class::kComplexX87; }

// Two classes meeting in one eightbyte (psABI 3.2.3, step 4 of the
// classification of aggregates).
Class merge(Class a, Class b) {
  if (a == b || b == Class::kNone) return a;
  if (a == Class::kNone) return b;
  if (a == Class::kMemory || b == Class::kMemory) return Class::kMemory;
  if (a == Class::kInteger || b == Class::kInteger) return Class::kInteger;
  if (is_x87(a) || is_x87(b)) return Class::kMemory;
  return Class::kSse;
}

// One class per eightbyte, or {kMemory}.
std::vector<Class> classify(const Shape& shape) {
  const std::vector<Class> memory{Class::kMemory};
  // complex long double: its own class, for the return (st0, st1).
  if (shape.complex && !shape.fields.empty() && shape.fields[0].cls == FieldClass::kLongDouble)
    return {Class::kComplexX87};
  if (shape.size > 16) return memory;
  std::vector<Class> eightbytes((shape.size + 7) / 8, Class::kNone);
  if (shape.opaque) {
    std::fill(eightbytes.begin(), eightbytes.end(), Class::kInteger);
    return eightbytes;
  }
  for (const Field& f : shape.fields) {
    if (f.size == 0) continue;
    if (f.cls != FieldClass::kUnknown && f.offset % natural_align(f.size) != 0) return memory;  // packed
    const uint32_t first = f.offset / 8, last = (f.offset + f.size - 1) / 8;
    if (last >= eightbytes.size()) return memory;  // a field past the end: not a layout the psABI knows
    for (uint32_t e = first; e <= last; ++e) {
      Class c = Class::kInteger;
      if (f.cls == FieldClass::kFloat)
        c = e == first ? Class::kSse : Class::kSseUp;  // __float128: one xmm
      else if (f.cls == FieldClass::kLongDouble)
        c = e == first ? Class::kX87 : Class::kX87Up;
      eightbytes[e] = merge(eightbytes[e], c);
    }
  }
  // Post-merger cleanup (step 5).
  for (size_t e = 0; e < eightbytes.size(); ++e) {
    if (eightbytes[e] == Class::kMemory) return memory;
    if (eightbytes[e] == Class::kX87Up && (e == 0 || eightbytes[e - 1] != Class::kX87)) return memory;
    if (eightbytes[e] == Class::kSseUp &&
        (e == 0 || (eightbytes[e - 1] != Class::kSse && eightbytes[e - 1] != Class::kSseUp)))
      eightbytes[e] = Class::kSse;
  }
  return eightbytes;
}

bool has(const std::vector<Class>& classes, bool (*pred)(Class)) {
  return std::any_of(classes.begin(), classes.end(), pred);
}

// The pieces of a value classified into registers: INTEGER eightbytes in
// the next general registers, SSE ones in the next xmm registers (an SSEUP
// eightbyte is the high half of its SSE one's xmm).
ArgPlace in_registers(const std::vector<Class>& classes, uint32_t size, ArgSource int_source, int* next_int,
                      ArgSource sse_source, int* next_sse) {
  ArgPlace p;
  for (size_t e = 0; e < classes.size(); ++e) {
    const uint32_t at = static_cast<uint32_t>(e) * 8;
    if (classes[e] == Class::kInteger) {
      p.pieces.push_back(ArgPiece{int_source, static_cast<uint16_t>((*next_int)++),
                                  static_cast<uint8_t>(std::min<uint32_t>(8, size - at)), static_cast<uint16_t>(at)});
    } else if (classes[e] == Class::kSse) {
      const bool up = e + 1 < classes.size() && classes[e + 1] == Class::kSseUp;
      p.pieces.push_back(ArgPiece{sse_source, static_cast<uint16_t>((*next_sse)++),
                                  static_cast<uint8_t>(std::min<uint32_t>(up ? 16 : 8, size - at)),
                                  static_cast<uint16_t>(at)});
    }
  }
  return p;
}

}  // namespace

PlacedSignature place_arguments(const FunctionSignature& sig) {
  PlacedSignature out;
  int next_int = 0, next_sse = 0;
  uint32_t stack = 0;  // bytes of stack arguments so far

  if (sig.ret) {
    const Shape shape = shape_of(*sig.ret);
    const std::vector<Class> classes = classify(shape);
    int ret_int = 0, ret_sse = 0;
    if (classes.size() == 1 && classes[0] == Class::kMemory) {
      // The caller's buffer: its address came in rdi and goes back in rax.
      next_int = 1;
      out.ret = finish(by_reference(ArgSource::kRetInt, 0), shape);
    } else if (has(classes, is_x87)) {
      out.ret = unavailable("long double");  // st0 (and st1): not captured
    } else {
      out.ret =
          finish(in_registers(classes, shape.size, ArgSource::kRetInt, &ret_int, ArgSource::kRetFp, &ret_sse), shape);
    }
  }

  for (const Param& param : sig.params) {
    const Shape shape = shape_of(param.type);
    if (shape.size == 0) {  // GNU C's empty struct: passed in nothing
      out.params.push_back(finish(ArgPlace{}, shape));
      continue;
    }
    const std::vector<Class> classes = classify(shape);
    const bool memory = has(classes, [](Class c) { return c == Class::kMemory || is_x87(c); });
    if (!memory) {
      const int ints = static_cast<int>(std::count(classes.begin(), classes.end(), Class::kInteger));
      const int sses = static_cast<int>(std::count(classes.begin(), classes.end(), Class::kSse));
      if (next_int + ints <= kIntArgRegs && next_sse + sses <= kSseArgRegs) {
        out.params.push_back(finish(
            in_registers(classes, shape.size, ArgSource::kIntReg, &next_int, ArgSource::kFpReg, &next_sse), shape));
        continue;
      }
    }
    // On the stack, by value: MEMORY and x87 classes, and what did not fit.
    stack = align_up(stack, std::max<uint32_t>(shape.align, 8));
    out.params.push_back(finish(on_stack(kFirstStackArg + stack, shape.size), shape));
    stack += align_up(shape.size, 8);
  }
  return out;
}

}  // namespace ftjit::x86_64
