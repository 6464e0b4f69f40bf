// SPDX-License-Identifier: MIT
// A traced function's parameters and return value: their types, as the CLI
// reads them from the module's DWARF (core/dwarf_signatures.h), and their
// places at entry and at return, as the ISA's calling convention puts them
// (backends/<isa>/<isa>_calling_convention.cpp). The agent's plugin host
// captures raw bytes from those places on the event path and formats them
// by type on the writer thread (runtime/plugin_host/arg_*.cpp); nothing
// here is looked at while a traced function runs.
//
//   FunctionSignature --place_arguments(isa)--> PlacedSignature
//        (DWARF: names, types)                     (registers, stack offsets)
//
// Both travel to the agent inside the Attach request (core/arg_table.h).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace ftjit {

// How a value's bytes are shown.
enum class ValueKind : uint8_t {
  kSigned = 1,    // int, long, short, signed char used as a number, ...
  kUnsigned = 2,  // unsigned ..., size_t
  kBool = 3,      // _Bool, bool
  kChar = 4,      // char (shown as 'c' and its code)
  kEnum = 5,      // by enumerator name (its number when none matches)
  kFloat = 6,     // float (size 4) or double (size 8)
  kPointer = 7,   // an address
  kString = 8,    // char * / const char *: a bounded copy of the string
  kStruct = 9,    // by its scalar members (ValueType::members)
  kUnsupported = 10,  // long double, unions, arrays, _Complex...: named, not shown
};

struct Enumerator {
  int64_t value = 0;
  std::string name;
};

// A scalar member of a struct passed or returned by value. Nested structs
// and fixed arrays are flattened: "pos.x", "v[1]".
struct Member {
  std::string name;
  uint32_t offset = 0;  // bytes from the struct's start
  ValueKind kind = ValueKind::kUnsupported;  // never kStruct
  uint8_t size = 0;
  std::vector<Enumerator> enumerators;  // kEnum
};

struct ValueType {
  ValueKind kind = ValueKind::kUnsupported;
  uint32_t size = 0;   // bytes (a pointer: 8)
  uint32_t align = 0;  // bytes; 0 when unknown
  std::string name;    // as C spells it: "const char *", "struct point", "enum color"
  bool is_signed = false;  // kEnum: the underlying type's signedness; kChar: char is signed
  std::vector<Enumerator> enumerators;  // kEnum
  std::vector<Member> members;          // kStruct
  // kStruct whose members could not all be laid out as scalars (a union
  // member, bitfields, a flexible array): its bytes are placed by the
  // calling convention but not shown member by member.
  bool opaque = false;
};

struct Param {
  std::string name;  // "" when DWARF gives none (shown as "argN")
  ValueType type;
  bool artificial = false;  // C++'s `this`
};

struct FunctionSignature {
  std::string name;      // the subprogram's name (DW_AT_name), for messages
  uint64_t entry = 0;    // its DW_AT_low_pc: the module's file address
  std::vector<Param> params;
  std::optional<ValueType> ret;  // nullopt: void
  bool variadic = false;  // `...`: the named parameters are shown
  // A compiler's clone with its own convention (GCC's .isra/.constprop
  // clones, DW_AT_calling_convention DW_CC_nocall): its parameters are not
  // where the psABI puts them, so they are shown as <optimised out>.
  bool abi_changed = false;
};

// Where a captured byte range comes from.
enum class ArgSource : uint8_t {
  kIntReg = 1,  // entry: ftjit_regs::arg[index] (the ISA's integer argument registers, in order)
  kFpReg = 2,   // entry: ftjit_regs::fp[index] (its FP/vector argument registers, in order)
  kStack = 3,   // entry: the bytes at (entry sp + index), ftjit_regs::sp being the sp at the first instruction
  kRetInt = 4,  // return: ftjit_ret_regs::ret[index]
  kRetFp = 5,   // return: ftjit_ret_regs::fp[index]
};

// `size` bytes from the low end of a register (or from the stack) that are
// the value's bytes [offset, offset + size).
struct ArgPiece {
  ArgSource source = ArgSource::kIntReg;
  uint16_t index = 0;   // register number, or stack byte offset
  uint8_t size = 0;     // 1..16
  uint16_t offset = 0;  // in the value
};

struct ArgPlace {
  std::vector<ArgPiece> pieces;
  // The pieces hold the value's address, not the value (a big struct passed
  // by reference, or returned in memory whose address comes back): the
  // host copies `size` bytes from there, safely.
  bool by_reference = false;
  // The convention puts it where it cannot be read at that moment (a struct
  // returned in memory whose address is not returned, a long double on the
  // x87 stack, an abi_changed clone): shown as `why`.
  bool unavailable = false;
  std::string why;
};

struct PlacedSignature {
  std::vector<ArgPlace> params;  // one per FunctionSignature::params
  std::optional<ArgPlace> ret;   // set when the function returns a value
};

}  // namespace ftjit
