// SPDX-License-Identifier: MIT
// place_arguments' dispatch to the ISA's placer, and what the placers share:
// a value's Shape (its scalar fields, whatever its ValueKind) and the
// ArgPlace builders.
#include "backends/calling_convention.h"

#include <algorithm>
#include <cctype>

namespace ftjit {
namespace calling_convention {
namespace {

std::string lowercase(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

FieldClass class_of(ValueKind kind) {
  switch (kind) {
    case ValueKind::kFloat: return FieldClass::kFloat;
    case ValueKind::kUnsupported:
    case ValueKind::kStruct: return FieldClass::kUnknown;
    default: return FieldClass::kInteger;  // signed, unsigned, bool, char, enum, pointer, string
  }
}

// The alignment a field asks of its struct: its natural one, except for a
// member whose kind says nothing (a _Complex double is 16 bytes aligned to
// 8): 8 at most, what most such members are.
uint32_t field_align(const Field& f) {
  uint32_t a = natural_align(f.size);
  return f.cls == FieldClass::kUnknown ? std::min<uint32_t>(a, 8) : a;
}

}  // namespace

uint32_t natural_align(uint32_t size) {
  if (size >= 16) return 16;
  if (size >= 8) return 8;
  if (size >= 4) return 4;
  if (size >= 2) return 2;
  return 1;
}

uint32_t align_up(uint32_t value, uint32_t align) { return align <= 1 ? value : (value + align - 1) / align * align; }

// A kUnsupported type is known by its name only (DWARF's base type name,
// "long double", "complex double", or "union u"): the names GCC and Clang
// give decide how it is placed, its kind that it is not shown.
//
//   long double          one field, kLongDouble (16 bytes; a 64-bit long double is a double)
//   complex T            two fields of T: {re @0, im @size/2} (T: float, double, long double, an integer)
//   _Float128, _Float16  one kFloat field of that size
//   anything else        opaque bytes (a union, an __int128, an array), placed as a struct of that size
Shape shape_of(const ValueType& type) {
  Shape s;
  s.size = type.size;
  switch (type.kind) {
    case ValueKind::kStruct: {
      uint32_t align = 1;
      if (type.opaque || type.members.empty()) {
        s.opaque = true;
        align = std::min<uint32_t>(natural_align(type.size), 8);
      }
      for (const Member& m : type.members) {
        if (s.opaque) break;
        Field f{m.offset, m.size, class_of(m.kind)};
        s.fields.push_back(f);
        align = std::max(align, field_align(f));
      }
      s.align = type.align ? type.align : align;
      return s;
    }
    case ValueKind::kUnsupported: {
      const std::string name = lowercase(type.name);
      s.unshowable = type.name.empty() ? "unsupported type" : type.name;
      const bool long_double = name.find("long double") != std::string::npos;
      if (name.find("complex") != std::string::npos && type.size >= 2) {
        const uint32_t part = type.size / 2;
        FieldClass cls = FieldClass::kInteger;
        if (long_double && part == 16)
          cls = FieldClass::kLongDouble;
        else if (name.find("float") != std::string::npos || name.find("double") != std::string::npos)
          cls = FieldClass::kFloat;
        s.complex = true;
        s.fields = {{0, part, cls}, {part, part, cls}};
        s.align = type.align ? type.align : natural_align(part);
        return s;
      }
      // _Float128, __float128, _Float16: FP scalars the DWARF reader does not
      // show (only float and double are kFloat).
      if (!long_double && (name.find("float128") != std::string::npos || name.find("_float16") != std::string::npos)) {
        s.fields = {{0, type.size, FieldClass::kFloat}};
        s.align = type.align ? type.align : natural_align(type.size);
        return s;
      }
      if (long_double) {
        s.unshowable = "long double";
        s.fields = {{0, type.size, type.size == 16 ? FieldClass::kLongDouble : FieldClass::kFloat}};
        s.align = type.align ? type.align : natural_align(type.size);
        return s;
      }
      s.opaque = true;
      s.align = type.align ? type.align : std::min<uint32_t>(natural_align(type.size), 8);
      return s;
    }
    case ValueKind::kFloat:
      // float and double are shown; a _Float16 or __float128 is placed as
      // the FP scalar it is, and not shown.
      if (type.size != 4 && type.size != 8)
        s.unshowable = type.name.empty() ? "float of " + std::to_string(type.size) + " bytes" : type.name;
      [[fallthrough]];
    default:
      s.fields = {{0, type.size, class_of(type.kind)}};
      s.align = type.align ? type.align : natural_align(type.size);
      return s;
  }
}

ArgPlace unavailable(std::string why) {
  ArgPlace p;
  p.unavailable = true;
  p.why = std::move(why);
  return p;
}

ArgPlace on_stack(uint32_t stack_offset, uint32_t size) {
  // A piece's index and offset are 16 bits: a value that far up the stack
  // (or that large) has no place a piece can name.
  if (uint64_t{stack_offset} + size > 0xffff) return unavailable("beyond 64 KiB of stack arguments");
  ArgPlace p;
  for (uint32_t at = 0; at < size; at += 16)
    p.pieces.push_back(ArgPiece{ArgSource::kStack, static_cast<uint16_t>(stack_offset + at),
                                static_cast<uint8_t>(std::min<uint32_t>(16, size - at)), static_cast<uint16_t>(at)});
  return p;
}

ArgPlace by_reference(ArgSource source, uint16_t index) {
  ArgPlace p;
  p.pieces.push_back(ArgPiece{source, index, 8, 0});
  p.by_reference = true;
  return p;
}

ArgPlace finish(ArgPlace place, const Shape& shape) {
  if (place.unavailable || shape.unshowable.empty()) return place;
  return unavailable(shape.unshowable);
}

}  // namespace calling_convention

namespace {

PlacedSignature all_unavailable(const FunctionSignature& sig, const char* why) {
  PlacedSignature out;
  out.params.assign(sig.params.size(), calling_convention::unavailable(why));
  if (sig.ret) out.ret = calling_convention::unavailable(why);
  return out;
}

}  // namespace

PlacedSignature place_arguments(Isa isa, const FunctionSignature& sig) {
  // A clone with its own convention (GCC's .isra/.constprop, DW_CC_nocall):
  // nothing is where the psABI says, so nothing is shown.
  if (sig.abi_changed) return all_unavailable(sig, "optimised out");
  switch (isa) {
    case Isa::kX86_64: return x86_64::place_arguments(sig);
    case Isa::kArm64: return arm64::place_arguments(sig);
    case Isa::kRiscv64: return riscv64::place_arguments(sig);
    case Isa::kUnknown: break;
  }
  return all_unavailable(sig, "unknown ISA");
}

}  // namespace ftjit
