// SPDX-License-Identifier: MIT
// place_arguments (backends/calling_convention.h), two ways:
//
// (a) Hand-written cases, one per rule of each psABI, as the places the
//     rule gives: "rdi:4@0" is 4 bytes from the low end of rdi holding the
//     value's bytes 0..3, "sp+8:16@0" 16 bytes at sp+8 at entry, "&x0:8@0"
//     the value's address in x0, "<long double>" a value placed unavailable.
//
// (b) The compilers' word, which a misreading of a psABI cannot fool: each
//     ISA's GCC and Clang compiled calling_convention/signatures.c to
//     assembly (calling_convention.cmake), where every function stores each
//     of its parameters to a volatile global and returns a global. A small
//     interpreter per ISA follows every byte the code moves, from the
//     registers and stack at entry (or through a pointer that came in one)
//     to the stores into the globals, and from the globals into the
//     registers at `ret`:
//
//       movq 8(%rsp), %rax ; movq %rax, 8+g_f_2(%rip)
//         => bytes 8..15 of f's parameter 2 are at sp+8..sp+15 at entry
//
//     and the test checks that place_arguments put each byte of each
//     parameter (and of the return value) exactly there. The signatures
//     are read from signatures.c itself, the struct layouts from types.h
//     compiled into this test: nothing is written twice. An instruction an
//     interpreter does not know fails the test (it does not guess); where a
//     compiler departs from its psABI (known_deviations), its disagreement
//     is printed, not failed.
#include "backends/calling_convention.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cstddef>
#include <cstdio>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "tests/unit/calling_convention/types.h"

namespace ftjit {
namespace {

// ---- Types, as core/dwarf_signatures.h gives them.

ValueType scalar(ValueKind kind, uint32_t size, std::string name) {
  ValueType t;
  t.kind = kind;
  t.size = size;
  t.align = std::min<uint32_t>(size, 16);
  t.name = std::move(name);
  return t;
}

ValueType unsupported(uint32_t size, uint32_t align, std::string name) {
  ValueType t = scalar(ValueKind::kUnsupported, size, std::move(name));
  t.align = align;
  return t;
}

const ValueType kChar = scalar(ValueKind::kChar, 1, "char");
const ValueType kBool = scalar(ValueKind::kBool, 1, "_Bool");
const ValueType kShort = scalar(ValueKind::kSigned, 2, "short");
const ValueType kInt = scalar(ValueKind::kSigned, 4, "int");
const ValueType kLong = scalar(ValueKind::kSigned, 8, "long");
const ValueType kFloat = scalar(ValueKind::kFloat, 4, "float");
const ValueType kDouble = scalar(ValueKind::kFloat, 8, "double");
const ValueType kPtr = scalar(ValueKind::kPointer, 8, "void *");
const ValueType kStr = scalar(ValueKind::kString, 8, "const char *");
const ValueType kEnum = scalar(ValueKind::kEnum, 4, "enum color");
const ValueType kInt128 = scalar(ValueKind::kSigned, 16, "__int128");
const ValueType kLongDouble = unsupported(16, 16, "long double");
const ValueType kComplexDouble = unsupported(16, 8, "complex double");
const ValueType kComplexFloat = unsupported(8, 4, "complex float");

Member member(const char* name, size_t offset, ValueKind kind, size_t size) {
  Member m;
  m.name = name;
  m.offset = static_cast<uint32_t>(offset);
  m.kind = kind;
  m.size = static_cast<uint8_t>(size);
  return m;
}
#define FTJIT_MEMBER(S, field, kind) member(#field, offsetof(S, field), ValueKind::kind, sizeof(S::field))

template <class S>
ValueType struct_type(std::string name, std::vector<Member> members) {
  ValueType t;
  t.kind = ValueKind::kStruct;
  t.size = sizeof(S);
  t.align = alignof(S);
  t.name = std::move(name);
  t.members = std::move(members);
  return t;
}

// Every type signatures.c uses, by the name it spells.
const std::map<std::string, ValueType>& fixture_types() {
  static const std::map<std::string, ValueType> types = [] {
    std::map<std::string, ValueType> m;
    auto add = [&](ValueType t) { m[t.name] = t; };
    add(kChar);
    add(kBool);
    add(kShort);
    add(kInt);
    add(kLong);
    add(kFloat);
    add(kDouble);
    add(kPtr);
    add(kEnum);
    add(kInt128);
    add(kLongDouble);
    add(scalar(ValueKind::kUnsigned, 1, "unsigned char"));
    add(scalar(ValueKind::kUnsigned, 2, "unsigned short"));
    add(scalar(ValueKind::kUnsigned, 4, "unsigned int"));
    add(scalar(ValueKind::kUnsigned, 8, "unsigned long"));
    add(scalar(ValueKind::kString, 8, "char *"));
    add(scalar(ValueKind::kString, 8, "const char *"));
    m["_Complex double"] = kComplexDouble;
    m["_Complex float"] = kComplexFloat;
    add(struct_type<ii>("struct ii", {FTJIT_MEMBER(ii, a, kSigned), FTJIT_MEMBER(ii, b, kSigned)}));
    add(struct_type<dd>("struct dd", {FTJIT_MEMBER(dd, a, kFloat), FTJIT_MEMBER(dd, b, kFloat)}));
    add(struct_type<fi>("struct fi", {FTJIT_MEMBER(fi, a, kFloat), FTJIT_MEMBER(fi, b, kSigned)}));
    add(struct_type<if_>("struct if_", {FTJIT_MEMBER(if_, a, kSigned), FTJIT_MEMBER(if_, b, kFloat)}));
    add(struct_type<dl>("struct dl", {FTJIT_MEMBER(dl, a, kFloat), FTJIT_MEMBER(dl, b, kSigned)}));
    add(struct_type<ld_>("struct ld_", {FTJIT_MEMBER(ld_, a, kSigned), FTJIT_MEMBER(ld_, b, kFloat)}));
    add(struct_type<ff>("struct ff", {FTJIT_MEMBER(ff, a, kFloat), FTJIT_MEMBER(ff, b, kFloat)}));
    add(struct_type<f3>("struct f3",
                        {FTJIT_MEMBER(f3, a, kFloat), FTJIT_MEMBER(f3, b, kFloat), FTJIT_MEMBER(f3, c, kFloat)}));
    add(struct_type<f4>("struct f4", {FTJIT_MEMBER(f4, a, kFloat), FTJIT_MEMBER(f4, b, kFloat),
                                      FTJIT_MEMBER(f4, c, kFloat), FTJIT_MEMBER(f4, d, kFloat)}));
    add(struct_type<d3>("struct d3",
                        {FTJIT_MEMBER(d3, a, kFloat), FTJIT_MEMBER(d3, b, kFloat), FTJIT_MEMBER(d3, c, kFloat)}));
    add(struct_type<fd>("struct fd", {FTJIT_MEMBER(fd, a, kFloat), FTJIT_MEMBER(fd, b, kFloat)}));
    add(struct_type<cf>("struct cf", {FTJIT_MEMBER(cf, c, kChar), FTJIT_MEMBER(cf, f, kFloat)}));
    add(struct_type<ci>("struct ci", {FTJIT_MEMBER(ci, c, kChar), FTJIT_MEMBER(ci, i, kSigned)}));
    add(struct_type<c3>("struct c3",
                        {FTJIT_MEMBER(c3, a, kChar), FTJIT_MEMBER(c3, b, kChar), FTJIT_MEMBER(c3, c, kChar)}));
    add(struct_type<s12>(
        "struct s12", {FTJIT_MEMBER(s12, a, kSigned), FTJIT_MEMBER(s12, b, kSigned), FTJIT_MEMBER(s12, c, kSigned)}));
    add(struct_type<l2>("struct l2", {FTJIT_MEMBER(l2, a, kSigned), FTJIT_MEMBER(l2, b, kSigned)}));
    add(struct_type<il>("struct il", {FTJIT_MEMBER(il, a, kSigned), FTJIT_MEMBER(il, b, kSigned)}));
    add(struct_type<one_d>("struct one_d", {FTJIT_MEMBER(one_d, d, kFloat)}));
    add(struct_type<one_f>("struct one_f", {FTJIT_MEMBER(one_f, f, kFloat)}));
    add(struct_type<big>(
        "struct big", {FTJIT_MEMBER(big, a, kSigned), FTJIT_MEMBER(big, b, kSigned), FTJIT_MEMBER(big, c, kSigned)}));
    add(struct_type<big40>("struct big40", {FTJIT_MEMBER(big40, a, kSigned), FTJIT_MEMBER(big40, b, kSigned),
                                            FTJIT_MEMBER(big40, c, kSigned), FTJIT_MEMBER(big40, d, kSigned),
                                            FTJIT_MEMBER(big40, e, kSigned)}));
    add(struct_type<bigmix>("struct bigmix", {FTJIT_MEMBER(bigmix, a, kFloat), FTJIT_MEMBER(bigmix, b, kSigned),
                                              FTJIT_MEMBER(bigmix, c, kFloat), FTJIT_MEMBER(bigmix, d, kSigned)}));
    add(struct_type<q>("struct q", {FTJIT_MEMBER(q, x, kSigned)}));
    add(struct_type<al16>("struct al16", {FTJIT_MEMBER(al16, a, kSigned), FTJIT_MEMBER(al16, b, kSigned)}));
    add(struct_type<a32>("struct a32", {FTJIT_MEMBER(a32, a, kSigned), FTJIT_MEMBER(a32, b, kSigned),
                                        FTJIT_MEMBER(a32, c, kSigned), FTJIT_MEMBER(a32, d, kSigned)}));
    add(struct_type<pk>("struct pk", {FTJIT_MEMBER(pk, c, kChar), FTJIT_MEMBER(pk, i, kSigned)}));
    // As core/dwarf_signatures.cpp gives them: a union is kUnsupported,
    // placed by size and alignment; a struct with one is opaque.
    add(unsupported(sizeof(uf), alignof(uf), "union uf"));
    ValueType opaque = struct_type<opq>("struct opq", {});
    opaque.opaque = true;
    add(opaque);
    return m;
  }();
  return types;
}

const ValueType& type(const std::string& name) { return fixture_types().at(name); }

FunctionSignature signature(std::vector<ValueType> params, std::optional<ValueType> ret = std::nullopt) {
  FunctionSignature sig;
  sig.name = "f";
  for (size_t i = 0; i < params.size(); ++i) sig.params.push_back(Param{"p" + std::to_string(i), params[i], false});
  sig.ret = std::move(ret);
  return sig;
}

// ---- Places, as text.

struct RegisterNames {
  std::vector<std::string> int_args, fp_args, ret_int, ret_fp;
  std::string hidden_ret;  // where the caller puts a memory return value's address
};

const RegisterNames& names_of(Isa isa) {
  static const RegisterNames x86{{"rdi", "rsi", "rdx", "rcx", "r8", "r9", "rax", "r10"},
                                 {"xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7"},
                                 {"rax", "rdx"},
                                 {"xmm0", "xmm1"},
                                 "rdi"};
  static const RegisterNames arm{{"x0", "x1", "x2", "x3", "x4", "x5", "x6", "x7"},
                                 {"v0", "v1", "v2", "v3", "v4", "v5", "v6", "v7"},
                                 {"x0", "x1"},
                                 {"v0", "v1"},
                                 "x8"};
  static const RegisterNames rv{{"a0", "a1", "a2", "a3", "a4", "a5", "a6", "a7"},
                                {"fa0", "fa1", "fa2", "fa3", "fa4", "fa5", "fa6", "fa7"},
                                {"a0", "a1"},
                                {"fa0", "fa1"},
                                "a0"};
  return isa == Isa::kX86_64 ? x86 : isa == Isa::kArm64 ? arm : rv;
}

std::string where(Isa isa, const ArgPiece& p) {
  const RegisterNames& n = names_of(isa);
  auto pick = [&](const std::vector<std::string>& v) {
    return p.index < v.size() ? v[p.index] : "?" + std::to_string(p.index);
  };
  switch (p.source) {
    case ArgSource::kIntReg: return pick(n.int_args);
    case ArgSource::kFpReg: return pick(n.fp_args);
    case ArgSource::kStack: return "sp+" + std::to_string(p.index);
    case ArgSource::kRetInt: return "ret:" + pick(n.ret_int);
    case ArgSource::kRetFp: return "ret:" + pick(n.ret_fp);
  }
  return "?";
}

std::string show(Isa isa, const ArgPlace& place) {
  if (place.unavailable) return "<" + place.why + ">";
  std::string out;
  for (const ArgPiece& p : place.pieces) {
    if (!out.empty()) out += " ";
    out +=
        (place.by_reference ? "&" : "") + where(isa, p) + ":" + std::to_string(p.size) + "@" + std::to_string(p.offset);
  }
  return out.empty() ? "-" : out;
}

// "p0 | p1 | ... -> ret"
std::string show(Isa isa, const PlacedSignature& placed) {
  std::string out;
  for (size_t i = 0; i < placed.params.size(); ++i) out += (i ? " | " : "") + show(isa, placed.params[i]);
  return out + " -> " + (placed.ret ? show(isa, *placed.ret) : "void");
}

std::string place(Isa isa, std::vector<ValueType> params, std::optional<ValueType> ret = std::nullopt) {
  return show(isa, place_arguments(isa, signature(std::move(params), std::move(ret))));
}

// ---- (a) Every ISA.

TEST(CallingConvention, AbiChangedAndUnknownIsaPlaceNothing) {
  FunctionSignature sig = signature({kInt, kDouble}, kLong);
  sig.abi_changed = true;
  for (Isa isa : {Isa::kX86_64, Isa::kArm64, Isa::kRiscv64})
    EXPECT_EQ(show(isa, place_arguments(isa, sig)), "<optimised out> | <optimised out> -> <optimised out>");
  sig.abi_changed = false;
  EXPECT_EQ(show(Isa::kX86_64, place_arguments(Isa::kUnknown, sig)), "<unknown ISA> | <unknown ISA> -> <unknown ISA>");
  sig.ret.reset();
  EXPECT_EQ(show(Isa::kArm64, place_arguments(Isa::kArm64, sig)), "x0:4@0 | v0:8@0 -> void");
}

TEST(CallingConvention, NarrowScalarsAreTheirSizeFromTheLowEnd) {
  EXPECT_EQ(place(Isa::kX86_64, {kBool, kChar, kShort, kEnum, kStr, kPtr}, kChar),
            "rdi:1@0 | rsi:1@0 | rdx:2@0 | rcx:4@0 | r8:8@0 | r9:8@0 -> ret:rax:1@0");
  EXPECT_EQ(place(Isa::kArm64, {kBool, kChar, kShort, kEnum, kStr, kPtr}, kBool),
            "x0:1@0 | x1:1@0 | x2:2@0 | x3:4@0 | x4:8@0 | x5:8@0 -> ret:x0:1@0");
  EXPECT_EQ(place(Isa::kRiscv64, {kBool, kChar, kShort, kEnum, kStr, kPtr}, kShort),
            "a0:1@0 | a1:1@0 | a2:2@0 | a3:4@0 | a4:8@0 | a5:8@0 -> ret:a0:2@0");
}

TEST(CallingConvention, OpaqueStructsAndUnionsArePlacedBySize) {
  ValueType opaque = type("struct dd");  // a struct with a bitfield, say: its members unknown
  opaque.opaque = true;
  ValueType u = unsupported(8, 8, "union u");
  // x86-64: INTEGER eightbytes; arm64: not an HFA; riscv64: not flattened.
  EXPECT_EQ(place(Isa::kX86_64, {opaque, u, kDouble}), "rdi:8@0 rsi:8@8 | <union u> | xmm0:8@0 -> void");
  EXPECT_EQ(place(Isa::kArm64, {opaque, u, kDouble}), "x0:8@0 x1:8@8 | <union u> | v0:8@0 -> void");
  EXPECT_EQ(place(Isa::kRiscv64, {opaque, u, kDouble}), "a0:8@0 a1:8@8 | <union u> | fa0:8@0 -> void");
  EXPECT_EQ(place(Isa::kX86_64, {kInt}, u), "rdi:4@0 -> <union u>");
}

TEST(CallingConvention, UnshownTypesStillTakeTheirPlaces) {
  // As the DWARF reader gives an __int128: kUnsupported, placed by size and
  // alignment like the struct of two longs it is to every psABI.
  const ValueType int128 = unsupported(16, 16, "__int128");
  EXPECT_EQ(place(Isa::kX86_64, {kInt, int128, kLong}), "rdi:4@0 | <__int128> | rcx:8@0 -> void");
  EXPECT_EQ(place(Isa::kArm64, {kInt, int128, kLong}), "x0:4@0 | <__int128> | x4:8@0 -> void");
  EXPECT_EQ(place(Isa::kRiscv64, {kInt, int128, kLong}), "a0:4@0 | <__int128> | a3:8@0 -> void");
  // An opaque struct's alignment (a member's, kept by the reader) still
  // picks arm64's even register.
  ValueType aligned = type("struct q");
  aligned.opaque = true;
  aligned.members.clear();
  EXPECT_EQ(place(Isa::kArm64, {kInt, aligned, kLong}), "x0:4@0 | x2:8@0 x3:8@8 | x4:8@0 -> void");
  // __float128 is an SSE value on x86-64 (one xmm), a q register on arm64,
  // an integer pair on riscv64.
  const ValueType f128 = unsupported(16, 16, "__float128");
  EXPECT_EQ(place(Isa::kX86_64, {f128, kDouble, kInt}), "<__float128> | xmm1:8@0 | rdi:4@0 -> void");
  EXPECT_EQ(place(Isa::kArm64, {f128, kDouble, kInt}), "<__float128> | v1:8@0 | x0:4@0 -> void");
  EXPECT_EQ(place(Isa::kRiscv64, {f128, kDouble, kInt}), "<__float128> | fa0:8@0 | a2:4@0 -> void");
}

TEST(CallingConvention, EmptyAndHugeStructs) {
  ValueType empty = struct_type<ii>("struct empty", {});
  empty.size = 0;
  empty.align = 1;
  // Passed in nothing: the int takes the first register.
  EXPECT_EQ(place(Isa::kX86_64, {empty, kInt}), "- | rdi:4@0 -> void");
  EXPECT_EQ(place(Isa::kArm64, {empty, kInt}), "- | x0:4@0 -> void");
  EXPECT_EQ(place(Isa::kRiscv64, {empty, kInt}), "- | a0:4@0 -> void");
  // By value on x86-64's stack, past what a piece's 16 bits can say.
  ValueType huge = type("struct big40");
  huge.size = 70000;
  EXPECT_EQ(place(Isa::kX86_64, {huge, kInt, kLong}), "<beyond 64 KiB of stack arguments> | rdi:4@0 | rsi:8@0 -> void");
  EXPECT_EQ(place(Isa::kArm64, {huge, kInt}), "&x0:8@0 | x1:4@0 -> void");
}

// ---- (a) x86-64 System V.

TEST(X86_64CallingConvention, SixIntegerRegistersThenTheStackAboveTheReturnAddress) {
  EXPECT_EQ(place(Isa::kX86_64, {kLong, kLong, kLong, kLong, kLong, kLong, kInt, kChar, kLong}),
            "rdi:8@0 | rsi:8@0 | rdx:8@0 | rcx:8@0 | r8:8@0 | r9:8@0 | sp+8:4@0 | sp+16:1@0 | sp+24:8@0 -> void");
}

TEST(X86_64CallingConvention, EightSseRegistersThenTheStack) {
  std::vector<ValueType> params(9, kDouble);
  params.push_back(kFloat);
  params.push_back(kInt);
  EXPECT_EQ(place(Isa::kX86_64, params),
            "xmm0:8@0 | xmm1:8@0 | xmm2:8@0 | xmm3:8@0 | xmm4:8@0 | xmm5:8@0 | xmm6:8@0 | xmm7:8@0 | sp+8:8@0 | "
            "sp+16:4@0 | rdi:4@0 -> void");
}

TEST(X86_64CallingConvention, StructsAreClassifiedByEightbyte) {
  EXPECT_EQ(place(Isa::kX86_64, {type("struct ii"), type("struct dd"), type("struct fi"), type("struct dl"),
                                 type("struct ff"), type("struct ld_")}),
            "rdi:8@0 | xmm0:8@0 xmm1:8@8 | rsi:8@0 | xmm2:8@0 rdx:8@8 | xmm3:8@0 | rcx:8@0 xmm4:8@8 -> void");
  // 12 and 3 bytes: the last eightbyte is as long as the struct is.
  EXPECT_EQ(place(Isa::kX86_64, {type("struct s12"), type("struct c3"), type("struct f3")}),
            "rdi:8@0 rsi:4@8 | rdx:3@0 | xmm0:8@0 xmm1:4@8 -> void");
}

TEST(X86_64CallingConvention, BigAndMisalignedStructsAreCopiedToTheStack) {
  EXPECT_EQ(place(Isa::kX86_64, {type("struct big"), kInt, type("struct big40"), type("struct pk"), kLong}),
            "sp+8:16@0 sp+24:8@16 | rdi:4@0 | sp+32:16@0 sp+48:16@16 sp+64:8@32 | sp+72:5@0 | rsi:8@0 -> void");
}

TEST(X86_64CallingConvention, AStructThatDoesNotFitGoesWholeOnTheStackAndLeavesTheRegisters) {
  EXPECT_EQ(place(Isa::kX86_64, {kLong, kLong, kLong, kLong, kLong, type("struct l2"), kLong, type("struct ii")}),
            "rdi:8@0 | rsi:8@0 | rdx:8@0 | rcx:8@0 | r8:8@0 | sp+8:16@0 | r9:8@0 | sp+24:8@0 -> void");
  // {double, long} with no integer register left: the xmm stays free too.
  EXPECT_EQ(place(Isa::kX86_64, {kLong, kLong, kLong, kLong, kLong, kLong, type("struct dl"), kDouble}),
            "rdi:8@0 | rsi:8@0 | rdx:8@0 | rcx:8@0 | r8:8@0 | r9:8@0 | sp+8:16@0 | xmm0:8@0 -> void");
}

TEST(X86_64CallingConvention, SixteenByteAlignedValuesOnTheStackStartSixteenAligned) {
  std::vector<ValueType> params(6, kLong);
  params.insert(params.end(), {kInt, kInt128, kInt, type("struct al16"), kLongDouble, kInt});
  EXPECT_EQ(place(Isa::kX86_64, params),
            "rdi:8@0 | rsi:8@0 | rdx:8@0 | rcx:8@0 | r8:8@0 | r9:8@0 | sp+8:4@0 | sp+24:16@0 | sp+40:4@0 | "
            "sp+56:16@0 | <long double> | sp+88:4@0 -> void");
  // 32-aligned: from a 32-aligned offset above sp+8.
  EXPECT_EQ(place(Isa::kX86_64, {kLong, kLong, kLong, kLong, kLong, kLong, kLong, type("struct a32"), kLong}),
            "rdi:8@0 | rsi:8@0 | rdx:8@0 | rcx:8@0 | r8:8@0 | r9:8@0 | sp+8:8@0 | sp+40:16@0 sp+56:16@16 | sp+72:8@0 "
            "-> void");
  // In registers, an __int128 takes any two.
  EXPECT_EQ(place(Isa::kX86_64, {kInt, kInt128, kLong}), "rdi:4@0 | rsi:8@0 rdx:8@8 | rcx:8@0 -> void");
}

TEST(X86_64CallingConvention, LongDoubleIsOnTheStackAndNotShown) {
  EXPECT_EQ(place(Isa::kX86_64, {kLongDouble, kInt, kDouble, kLongDouble, kLong}, kLongDouble),
            "<long double> | rdi:4@0 | xmm0:8@0 | <long double> | rsi:8@0 -> <long double>");
}

TEST(X86_64CallingConvention, ComplexTakesSseRegisters) {
  EXPECT_EQ(place(Isa::kX86_64, {kComplexDouble, kInt, kComplexFloat, kDouble}, kComplexDouble),
            "<complex double> | rdi:4@0 | <complex float> | xmm3:8@0 -> <complex double>");
  // complex long double: COMPLEX_X87, on the stack; returned in st0/st1, not in memory.
  EXPECT_EQ(place(Isa::kX86_64, {unsupported(32, 16, "complex long double"), kInt},
                  unsupported(32, 16, "complex long double")),
            "<complex long double> | rdi:4@0 -> <long double>");
}

TEST(X86_64CallingConvention, ReturnsInRaxRdxXmm0Xmm1) {
  EXPECT_EQ(place(Isa::kX86_64, {}, type("struct dl")), " -> ret:xmm0:8@0 ret:rax:8@8");
  EXPECT_EQ(place(Isa::kX86_64, {}, type("struct ld_")), " -> ret:rax:8@0 ret:xmm0:8@8");
  EXPECT_EQ(place(Isa::kX86_64, {}, type("struct dd")), " -> ret:xmm0:8@0 ret:xmm1:8@8");
  EXPECT_EQ(place(Isa::kX86_64, {}, type("struct l2")), " -> ret:rax:8@0 ret:rdx:8@8");
  EXPECT_EQ(place(Isa::kX86_64, {}, kInt128), " -> ret:rax:8@0 ret:rdx:8@8");
  EXPECT_EQ(place(Isa::kX86_64, {}, kFloat), " -> ret:xmm0:4@0");
}

TEST(X86_64CallingConvention, AMemoryReturnTakesRdiAndComesBackInRax) {
  EXPECT_EQ(place(Isa::kX86_64, {kInt, kLong, kDouble}, type("struct big")),
            "rsi:4@0 | rdx:8@0 | xmm0:8@0 -> &ret:rax:8@0");
  std::vector<ValueType> params(6, kLong);
  EXPECT_EQ(place(Isa::kX86_64, params, type("struct pk")),
            "rsi:8@0 | rdx:8@0 | rcx:8@0 | r8:8@0 | r9:8@0 | sp+8:8@0 -> &ret:rax:8@0");
}

// ---- (a) AAPCS64.

TEST(Arm64CallingConvention, EightRegistersOfEachFileThenEightByteStackSlots) {
  std::vector<ValueType> params(8, kLong);
  params.insert(params.end(), {kChar, kInt, kDouble});
  EXPECT_EQ(
      place(Isa::kArm64, params),
      "x0:8@0 | x1:8@0 | x2:8@0 | x3:8@0 | x4:8@0 | x5:8@0 | x6:8@0 | x7:8@0 | sp+0:1@0 | sp+8:4@0 | v0:8@0 -> void");
  std::vector<ValueType> fps(8, kDouble);
  fps.insert(fps.end(), {kFloat, kDouble, kInt});
  EXPECT_EQ(
      place(Isa::kArm64, fps),
      "v0:8@0 | v1:8@0 | v2:8@0 | v3:8@0 | v4:8@0 | v5:8@0 | v6:8@0 | v7:8@0 | sp+0:4@0 | sp+8:8@0 | x0:4@0 -> void");
}

TEST(Arm64CallingConvention, HfasTakeOneVRegisterPerMember) {
  EXPECT_EQ(place(Isa::kArm64, {type("struct f3"), type("struct dd"), type("struct one_f"), kFloat}),
            "v0:4@0 v1:4@4 v2:4@8 | v3:8@0 v4:8@8 | v5:4@0 | v6:4@0 -> void");
  // {float, double} is no HFA: x registers.
  EXPECT_EQ(place(Isa::kArm64, {type("struct fd"), type("struct fi"), type("struct dl")}),
            "x0:8@0 x1:8@8 | x2:8@0 | x3:8@0 x4:8@8 -> void");
}

TEST(Arm64CallingConvention, AnHfaThatDoesNotFitGoesOnTheStackAndUsesUpTheVRegisters) {
  std::vector<ValueType> params(6, kDouble);
  params.insert(params.end(), {type("struct f3"), kDouble, kFloat, kInt});
  EXPECT_EQ(place(Isa::kArm64, params),
            "v0:8@0 | v1:8@0 | v2:8@0 | v3:8@0 | v4:8@0 | v5:8@0 | sp+0:12@0 | sp+16:8@0 | sp+24:4@0 | x0:4@0 -> void");
}

TEST(Arm64CallingConvention, CompositesOverSixteenBytesAreByReferenceUnlessHfas) {
  EXPECT_EQ(place(Isa::kArm64, {type("struct big"), kInt, type("struct d3"), type("struct big40")}),
            "&x0:8@0 | x1:4@0 | v0:8@0 v1:8@8 v2:8@16 | &x2:8@0 -> void");
  std::vector<ValueType> params(8, kLong);
  params.insert(params.end(), {type("struct big"), kInt});
  EXPECT_EQ(place(Isa::kArm64, params),
            "x0:8@0 | x1:8@0 | x2:8@0 | x3:8@0 | x4:8@0 | x5:8@0 | x6:8@0 | x7:8@0 | &sp+0:8@0 | sp+8:4@0 -> void");
}

TEST(Arm64CallingConvention, SixteenAlignedValuesStartAtAnEvenRegister) {
  EXPECT_EQ(place(Isa::kArm64, {kInt, kInt128, kLong}), "x0:4@0 | x2:8@0 x3:8@8 | x4:8@0 -> void");
  EXPECT_EQ(place(Isa::kArm64, {kInt, type("struct q"), kLong}), "x0:4@0 | x2:8@0 x3:8@8 | x4:8@0 -> void");
  // aligned(16) on the struct, not on a member: GCC 9 on ignores it.
  EXPECT_EQ(place(Isa::kArm64, {kInt, type("struct al16"), kLong}), "x0:4@0 | x1:8@0 x2:8@8 | x3:8@0 -> void");
}

TEST(Arm64CallingConvention, ACompositeThatDoesNotFitUsesUpTheXRegisters) {
  std::vector<ValueType> params(7, kLong);
  params.insert(params.end(), {type("struct l2"), kLong});
  EXPECT_EQ(place(Isa::kArm64, params),
            "x0:8@0 | x1:8@0 | x2:8@0 | x3:8@0 | x4:8@0 | x5:8@0 | x6:8@0 | sp+0:16@0 | sp+16:8@0 -> void");
  params[7] = kInt128;
  params.insert(params.begin() + 7, kInt);
  params.erase(params.begin());  // x0..x5 longs, x6 int, then __int128: x7 skipped
  EXPECT_EQ(place(Isa::kArm64, params),
            "x0:8@0 | x1:8@0 | x2:8@0 | x3:8@0 | x4:8@0 | x5:8@0 | x6:4@0 | sp+0:16@0 | sp+16:8@0 -> void");
  std::vector<ValueType> stack(8, kLong);
  stack.insert(stack.end(), {kInt, kInt128, kInt});
  EXPECT_EQ(place(Isa::kArm64, stack),
            "x0:8@0 | x1:8@0 | x2:8@0 | x3:8@0 | x4:8@0 | x5:8@0 | x6:8@0 | x7:8@0 | sp+0:4@0 | sp+16:16@0 | sp+32:4@0 "
            "-> void");
}

TEST(Arm64CallingConvention, LongDoubleIsAQRegister) {
  EXPECT_EQ(place(Isa::kArm64, {kLongDouble, kInt, kDouble, kLongDouble}, kLongDouble),
            "<long double> | x0:4@0 | v1:8@0 | <long double> -> <long double>");
  // ... taking v0 and v2: the double is in v1.
}

TEST(Arm64CallingConvention, Returns) {
  EXPECT_EQ(place(Isa::kArm64, {}, type("struct dd")), " -> ret:v0:8@0 ret:v1:8@8");
  EXPECT_EQ(place(Isa::kArm64, {}, type("struct ff")), " -> ret:v0:4@0 ret:v1:4@4");
  EXPECT_EQ(place(Isa::kArm64, {}, type("struct f3")), " -> <returned in v0-v3>");
  EXPECT_EQ(place(Isa::kArm64, {}, type("struct f4")), " -> <returned in v0-v3>");
  EXPECT_EQ(place(Isa::kArm64, {}, type("struct dl")), " -> ret:x0:8@0 ret:x1:8@8");
  EXPECT_EQ(place(Isa::kArm64, {}, type("struct s12")), " -> ret:x0:8@0 ret:x1:4@8");
  // In memory at x8's address: no parameter moves.
  EXPECT_EQ(place(Isa::kArm64, {kInt, kDouble}, type("struct big")), "x0:4@0 | v0:8@0 -> <returned in memory>");
}

TEST(Arm64CallingConvention, VariadicNamedParametersAreAsUsual) {
  FunctionSignature sig = signature({kInt, kDouble, type("struct ii")}, kInt);
  sig.variadic = true;
  EXPECT_EQ(show(Isa::kArm64, place_arguments(Isa::kArm64, sig)), "x0:4@0 | v0:8@0 | x1:8@0 -> ret:x0:4@0");
}

// ---- (a) RISC-V LP64D.

TEST(Riscv64CallingConvention, FloatsGoToIntegerRegistersWhenTheFaRegistersAreGone) {
  std::vector<ValueType> params(9, kDouble);
  params.insert(params.end(), {kInt, kFloat, kLong});
  EXPECT_EQ(
      place(Isa::kRiscv64, params),
      "fa0:8@0 | fa1:8@0 | fa2:8@0 | fa3:8@0 | fa4:8@0 | fa5:8@0 | fa6:8@0 | fa7:8@0 | a0:8@0 | a1:4@0 | a2:4@0 | "
      "a3:8@0 -> void");
  std::vector<ValueType> all(16, kDouble);
  all.push_back(kDouble);
  all.push_back(kFloat);
  EXPECT_EQ(
      place(Isa::kRiscv64, all),
      "fa0:8@0 | fa1:8@0 | fa2:8@0 | fa3:8@0 | fa4:8@0 | fa5:8@0 | fa6:8@0 | fa7:8@0 | a0:8@0 | a1:8@0 | a2:8@0 | "
      "a3:8@0 | a4:8@0 | a5:8@0 | a6:8@0 | a7:8@0 | sp+0:8@0 | sp+8:4@0 -> void");
}

TEST(Riscv64CallingConvention, SmallStructsAreFlattenedIntoFaAndARegisters) {
  EXPECT_EQ(place(Isa::kRiscv64, {type("struct dd"), type("struct fi"), type("struct if_"), type("struct cf"),
                                  type("struct ff"), type("struct one_f")}),
            "fa0:8@0 fa1:8@8 | fa2:4@0 a0:4@4 | a1:4@0 fa3:4@4 | a2:1@0 fa4:4@4 | fa5:4@0 fa6:4@4 | fa7:4@0 -> void");
  // Three members, or two integers: the integer convention.
  EXPECT_EQ(place(Isa::kRiscv64, {type("struct f3"), type("struct ii"), type("struct s12")}),
            "a0:8@0 a1:4@8 | a2:8@0 | a3:8@0 a4:4@8 -> void");
}

TEST(Riscv64CallingConvention, AFlattenedStructWithoutItsRegistersIsAnIntegerStruct) {
  std::vector<ValueType> params(7, kDouble);
  params.insert(params.end(), {type("struct dd"), type("struct dl"), kDouble, type("struct one_d")});
  EXPECT_EQ(place(Isa::kRiscv64, params),
            "fa0:8@0 | fa1:8@0 | fa2:8@0 | fa3:8@0 | fa4:8@0 | fa5:8@0 | fa6:8@0 | a0:8@0 a1:8@8 | fa7:8@0 a2:8@8 | "
            "a3:8@0 | a4:8@0 -> void");
  std::vector<ValueType> ints(8, kLong);
  ints.insert(ints.end(), {type("struct fi"), type("struct ff"), kDouble});
  EXPECT_EQ(place(Isa::kRiscv64, ints),
            "a0:8@0 | a1:8@0 | a2:8@0 | a3:8@0 | a4:8@0 | a5:8@0 | a6:8@0 | a7:8@0 | sp+0:8@0 | fa0:4@0 fa1:4@4 | "
            "fa2:8@0 -> void");
}

TEST(Riscv64CallingConvention, TwoWordValuesTakeAnyTwoRegistersOrSplitAtA7) {
  // Named arguments: no even-register rule (that is for variadic ones).
  EXPECT_EQ(place(Isa::kRiscv64, {kInt, kInt128, type("struct q"), type("struct al16")}),
            "a0:4@0 | a1:8@0 a2:8@8 | a3:8@0 a4:8@8 | a5:8@0 a6:8@8 -> void");
  std::vector<ValueType> params(7, kLong);
  params.insert(params.end(), {kInt128, kLong, type("struct l2")});
  EXPECT_EQ(
      place(Isa::kRiscv64, params),
      "a0:8@0 | a1:8@0 | a2:8@0 | a3:8@0 | a4:8@0 | a5:8@0 | a6:8@0 | a7:8@0 sp+0:8@8 | sp+8:8@0 | sp+16:16@0 -> void");
  std::vector<ValueType> stack(8, kLong);
  stack.insert(stack.end(), {kInt, kInt128, kInt});
  EXPECT_EQ(place(Isa::kRiscv64, stack),
            "a0:8@0 | a1:8@0 | a2:8@0 | a3:8@0 | a4:8@0 | a5:8@0 | a6:8@0 | a7:8@0 | sp+0:4@0 | sp+16:16@0 | sp+32:4@0 "
            "-> void");
}

TEST(Riscv64CallingConvention, BigStructsAreByReference) {
  EXPECT_EQ(place(Isa::kRiscv64, {type("struct big"), kInt, type("struct d3")}), "&a0:8@0 | a1:4@0 | &a2:8@0 -> void");
}

TEST(Riscv64CallingConvention, LongDoubleIsAnIntegerPair) {
  EXPECT_EQ(place(Isa::kRiscv64, {kLongDouble, kInt, kDouble, kLongDouble, kLong}),
            "<long double> | a2:4@0 | fa0:8@0 | <long double> | a5:8@0 -> void");
}

TEST(Riscv64CallingConvention, Returns) {
  EXPECT_EQ(place(Isa::kRiscv64, {}, type("struct dl")), " -> ret:fa0:8@0 ret:a0:8@8");
  EXPECT_EQ(place(Isa::kRiscv64, {}, type("struct if_")), " -> ret:a0:4@0 ret:fa0:4@4");
  EXPECT_EQ(place(Isa::kRiscv64, {}, type("struct dd")), " -> ret:fa0:8@0 ret:fa1:8@8");
  EXPECT_EQ(place(Isa::kRiscv64, {}, type("struct f3")), " -> ret:a0:8@0 ret:a1:4@8");
  EXPECT_EQ(place(Isa::kRiscv64, {}, kFloat), " -> ret:fa0:4@0");
  // In memory at a0's address: every integer parameter moves one on.
  EXPECT_EQ(place(Isa::kRiscv64, {kInt, kDouble, kLong}, type("struct big")),
            "a1:4@0 | fa0:8@0 | a2:8@0 -> <returned in memory>");
}

// ---- (b) The compilers' word: where a byte came from.

struct Origin {
  enum Kind : uint8_t { kUnknown, kZero, kReg, kStack, kThrough, kGlobal };
  Kind kind = kUnknown;
  std::string base;  // kReg: the register at entry; kThrough: where the pointer came; kGlobal: the symbol
  int64_t at = 0;    // the byte's index in it (kStack: from the sp at entry)
  bool operator==(const Origin&) const = default;
};

std::string str(const Origin& o) {
  switch (o.kind) {
    case Origin::kUnknown: return "?";
    case Origin::kZero: return "0";
    case Origin::kReg: return o.base + "[" + std::to_string(o.at) + "]";
    case Origin::kStack: return "sp+" + std::to_string(o.at);
    case Origin::kThrough: return "*(" + o.base + ")+" + std::to_string(o.at);
    case Origin::kGlobal: return o.base + "+" + std::to_string(o.at);
  }
  return "";
}

using Bytes = std::array<Origin, 16>;

struct Address {
  enum Kind : uint8_t { kNone, kSp, kGlobal, kPage, kPointer };
  Kind kind = kNone;
  std::string base;  // kGlobal, kPage: the symbol; kPointer: where the pointer came ("x0", "sp+16")
  int64_t offset = 0;
};

struct Value {
  Bytes bytes;
  Address addr;
  std::optional<int64_t> constant;
};

Value constant(int64_t c) {
  Value v;
  v.constant = c;
  for (int i = 0; i < 8; ++i)
    if (((static_cast<uint64_t>(c) >> (8 * i)) & 0xff) == 0) v.bytes[i].kind = Origin::kZero;
  return v;
}

Bytes zeros() {
  Bytes b;
  for (Origin& o : b) o.kind = Origin::kZero;
  return b;
}

[[noreturn]] void fail(const std::string& what) { throw std::runtime_error(what); }

int64_t number(const std::string& s) {
  size_t used = 0;
  int64_t v = 0;
  try {
    v = std::stoll(s, &used, 0);
  } catch (...) {
    fail("not a number: '" + s + "'");
  }
  if (used != s.size()) fail("not a number: '" + s + "'");
  return v;
}

bool is_number(const std::string& s) {
  return !s.empty() && (std::isdigit(static_cast<unsigned char>(s[0])) || (s[0] == '-' && s.size() > 1));
}

// A register file and memory, at a function's entry, followed forward.
class Machine {
 public:
  Machine(std::string sp, std::set<std::string> zero_regs, std::function<int(const std::string&)> width)
      : sp_(std::move(sp)), zero_regs_(std::move(zero_regs)), width_(std::move(width)) {}

  Value& reg(const std::string& r) {
    auto it = regs_.find(r);
    if (it == regs_.end()) {
      Value v;
      if (r == sp_) {
        v.addr = Address{Address::kSp, "", 0};
      } else if (zero_regs_.count(r)) {
        v = constant(0);
      } else {
        for (int i = 0; i < width_(r); ++i) v.bytes[i] = Origin{Origin::kReg, r, i};
      }
      it = regs_.emplace(r, v).first;
    }
    return it->second;
  }
  void set(const std::string& r, const Value& v) {
    if (zero_regs_.count(r)) return;
    regs_[r] = v;
  }

  // The address a register holds: one it computed, or a pointer that
  // arrived in a register or on the stack (eight bytes in order).
  Address address_in(const std::string& r) {
    const Value& v = reg(r);
    if (v.addr.kind != Address::kNone) return v.addr;
    const Origin& first = v.bytes[0];
    if (first.kind == Origin::kReg || first.kind == Origin::kStack) {
      bool whole = true;
      for (int i = 1; i < 8; ++i)
        whole &= v.bytes[i].kind == first.kind && v.bytes[i].base == first.base && v.bytes[i].at == first.at + i;
      if (whole && (first.kind == Origin::kStack || first.at == 0))
        return Address{Address::kPointer, first.kind == Origin::kReg ? first.base : "sp+" + std::to_string(first.at),
                       0};
    }
    fail("no address in " + r);
  }

  Bytes load(const Address& a, int64_t disp, int n) {
    Bytes b;
    for (int i = 0; i < n; ++i) {
      const int64_t at = a.offset + disp + i;
      auto it = memory_.find({key(a), at});
      if (it != memory_.end()) {
        b[i] = it->second;
      } else if (a.kind == Address::kSp) {
        if (at >= 0) b[i] = Origin{Origin::kStack, "", at};
      } else if (a.kind == Address::kGlobal) {
        b[i] = Origin{Origin::kGlobal, a.base, at};
      } else {
        b[i] = Origin{Origin::kThrough, a.base, at};
      }
    }
    return b;
  }

  void store(const Address& a, int64_t disp, const Bytes& b, int n) {
    for (int i = 0; i < n; ++i) {
      const int64_t at = a.offset + disp + i;
      memory_[{key(a), at}] = b[i];
      if (a.kind == Address::kGlobal) global_stores[a.base][at] = b[i];
    }
    if (a.kind == Address::kPointer) written_through.insert(a.base);
  }

  void move_sp(int64_t by) {
    Value& v = reg(sp_);
    if (v.addr.kind == Address::kNone) fail("sp lost");
    v.addr.offset += by;
  }

  std::map<std::string, std::map<int64_t, Origin>> global_stores;  // symbol -> byte -> origin
  std::set<std::string> written_through;                           // pointers stored through

 private:
  static std::string key(const Address& a) {
    switch (a.kind) {
      case Address::kSp: return "sp";
      case Address::kGlobal: return "g:" + a.base;
      case Address::kPointer: return "p:" + a.base;
      default: fail("not an address");
    }
  }

  std::string sp_;
  std::set<std::string> zero_regs_;
  std::function<int(const std::string&)> width_;
  std::map<std::string, Value> regs_;
  std::map<std::pair<std::string, int64_t>, Origin> memory_;
};

// Bytes moved within a register: right by `k` bytes (>> 8k), the top
// `fill`; left (<< 8k), the bottom zero; over `width` bytes.
Bytes shift_right(const Bytes& b, int k, int width, Origin::Kind fill) {
  Bytes out;
  for (int i = 0; i < width; ++i) out[i] = i + k < width ? b[i + k] : Origin{fill, "", 0};
  return out;
}
Bytes shift_left(const Bytes& b, int k, int width) {
  Bytes out;
  for (int i = 0; i < width; ++i) out[i] = i >= k ? b[i - k] : Origin{Origin::kZero, "", 0};
  return out;
}

// `from`'s first n bytes, the rest of `width` bytes zero (a zero-extending
// write) or unknown (sign-extending), or `into`'s (a partial write).
Bytes low(const Bytes& from, int n, int width, Origin::Kind rest) {
  Bytes out;
  for (int i = 0; i < width; ++i) out[i] = i < n ? from[i] : Origin{rest, "", 0};
  return out;
}
Bytes merge_low(const Bytes& into, const Bytes& from, int n) {
  Bytes out = into;
  for (int i = 0; i < n; ++i) out[i] = from[i];
  return out;
}

std::vector<std::string> split_operands(const std::string& s) {
  std::vector<std::string> out;
  std::string cur;
  int depth = 0;
  for (char c : s) {
    if (c == '(' || c == '[') ++depth;
    if (c == ')' || c == ']') --depth;
    if (c == ',' && depth == 0) {
      out.push_back(cur);
      cur.clear();
      continue;
    }
    if (c == ' ' && cur.empty()) continue;
    cur += c;
  }
  while (!cur.empty() && cur.back() == ' ') cur.pop_back();
  if (!cur.empty()) out.push_back(cur);
  return out;
}

// "8+g_x", "g_x+8", "g_x", "-24", "": the symbol and the number.
std::pair<std::string, int64_t> symbol_and_offset(const std::string& s) {
  std::string sym;
  int64_t off = 0;
  size_t i = 0;
  while (i < s.size()) {
    size_t j = i + 1;
    while (j < s.size() && s[j] != '+' && s[j] != '-') ++j;
    std::string term = s.substr(i, j - i);
    if (term[0] == '+') term = term.substr(1);
    if (is_number(term))
      off += number(term);
    else if (!term.empty())
      sym = term;
    i = j;
  }
  return {sym, off};
}

// One ISA's instructions, as effects on a Machine.
class Interpreter {
 public:
  virtual ~Interpreter() = default;
  virtual Machine machine() const = 0;
  // false at the return.
  virtual bool step(Machine& m, const std::string& mnemonic, const std::vector<std::string>& ops) = 0;
};

// ---- x86-64 (AT&T syntax, as GCC writes it).

class X86Interpreter : public Interpreter {
 public:
  Machine machine() const override {
    return Machine("rsp", {}, [](const std::string& r) { return r.rfind("xmm", 0) == 0 ? 16 : 8; });
  }

  bool step(Machine& m, const std::string& mn, const std::vector<std::string>& ops) override {
    if (mn == "ret" || mn == "retq") return false;
    if (mn == "endbr64" || mn == "nop") return true;
    if (mn == "pushq") {
      const Bytes b = read(m, ops.at(0), 8);
      m.move_sp(-8);
      m.store(m.address_in("rsp"), 0, b, 8);
      return true;
    }
    if (mn == "popq") {
      const Bytes b = m.load(m.address_in("rsp"), 0, 8);
      m.move_sp(8);
      write(m, ops.at(0), b, 8, Origin::kUnknown);
      return true;
    }
    if (mn == "andq" && ops.size() == 2 && ops[1] == "%rsp") {  // a realigned frame: sp no longer entry-relative
      Value v;
      v.addr = Address{Address::kPointer, "realigned sp", 0};
      m.set("rsp", v);
      return true;
    }
    if (mn == "leave") {  // movq %rbp, %rsp; popq %rbp
      m.set("rsp", m.reg("rbp"));
      m.set("rbp", Value{m.load(m.address_in("rsp"), 0, 8), {}, {}});
      m.move_sp(8);
      return true;
    }
    if ((mn == "subq" || mn == "addq") && ops.size() == 2 && ops[1] == "%rsp") {
      m.move_sp((mn == "subq" ? -1 : 1) * number(ops[0].substr(1)));
      return true;
    }
    if (mn == "leaq") {
      Value v;
      v.addr = address(m, ops.at(0));
      m.set(reg(ops.at(1)).name, v);
      return true;
    }
    if ((mn == "xorl" || mn == "xorq" || mn == "pxor" || mn == "xorps" || mn == "xorpd") && ops.at(0) == ops.at(1)) {
      Value v = constant(0);
      v.bytes = zeros();
      m.set(reg(ops[1]).name, v);
      return true;
    }
    // Moves: mov{b,w,l,q}, and the SSE ones.
    static const std::map<std::string, int> plain = {{"movb", 1}, {"movw", 2}, {"movl", 4}, {"movq", 8}};
    if (auto it = plain.find(mn); it != plain.end()) {
      const int n = it->second;
      if (n == 8 && is_reg(ops.at(0)) && is_reg(ops.at(1)) && !reg(ops[0]).xmm && !reg(ops[1]).xmm) {
        m.set(reg(ops[1]).name, m.reg(reg(ops[0]).name));  // keeps an address
        return true;
      }
      if (ops.at(0)[0] == '$') {
        Value v = constant(number(ops[0].substr(1)));
        write(m, ops.at(1), v.bytes, n, Origin::kZero);
        return true;
      }
      write(m, ops.at(1), read(m, ops.at(0), n), n, Origin::kZero);
      return true;
    }
    if (mn == "movd") {
      write(m, ops.at(1), read(m, ops.at(0), 4), 4, Origin::kZero);
      return true;
    }
    if (mn == "movss" || mn == "movsd") {
      const int n = mn == "movss" ? 4 : 8;
      const Bytes b = read(m, ops.at(0), n);
      if (is_reg(ops[0]) && is_reg(ops.at(1))) {  // xmm to xmm: the low lane only
        Value& dst = m.reg(reg(ops[1]).name);
        Value v;
        v.bytes = merge_low(dst.bytes, b, n);
        m.set(reg(ops[1]).name, v);
      } else {
        write(m, ops.at(1), b, n, Origin::kZero);
      }
      return true;
    }
    if (mn == "movlps" || mn == "movlpd") {  // the low 8 bytes, to or from memory
      const Bytes b = read(m, ops.at(0), 8);
      if (is_reg(ops.at(1))) {
        Value v;
        v.bytes = merge_low(m.reg(reg(ops[1]).name).bytes, b, 8);
        m.set(reg(ops[1]).name, v);
      } else {
        write(m, ops[1], b, 8, Origin::kZero);
      }
      return true;
    }
    if (mn == "shufps" && ops.size() == 3) {  // dst = {dst[i0], dst[i1], src[i2], src[i3]}
      const int k = static_cast<int>(number(ops[0].substr(1)));
      const Bytes src = read(m, ops[1], 16), dst = read(m, ops.at(2), 16);
      Value v;
      for (int lane = 0; lane < 4; ++lane) {
        const Bytes& from = lane < 2 ? dst : src;
        const int pick = (k >> (2 * lane)) & 3;
        for (int i = 0; i < 4; ++i) v.bytes[4 * lane + i] = from[4 * pick + i];
      }
      m.set(reg(ops[2]).name, v);
      return true;
    }
    static const std::set<std::string> whole = {"movaps", "movups", "movdqa", "movdqu", "movapd", "movupd"};
    if (whole.count(mn)) {
      write(m, ops.at(1), read(m, ops.at(0), 16), 16, Origin::kZero);
      return true;
    }
    // Extending loads: movzbl, movsbq, movslq, ...
    if (mn.size() == 6 && (mn.rfind("movz", 0) == 0 || mn.rfind("movs", 0) == 0) &&
        std::string("bwl").find(mn[4]) != std::string::npos) {
      const int n = mn[4] == 'b' ? 1 : mn[4] == 'w' ? 2 : 4;
      const Origin::Kind rest = mn[3] == 'z' ? Origin::kZero : Origin::kUnknown;
      write(m, ops.at(1), low(read(m, ops.at(0), n), n, 16, rest), 8, Origin::kZero);
      return true;
    }
    if (mn == "fldt") {
      x87_.push_back(low(read(m, ops.at(0), 10), 10, 16, Origin::kUnknown));
      return true;
    }
    if (mn == "fstpt") {
      if (x87_.empty()) fail("fstpt with an empty x87 stack");
      write(m, ops.at(0), x87_.back(), 10, Origin::kZero);
      x87_.pop_back();
      return true;
    }
    // Shifts by whole bytes: shr/sar/shl/sal {l,q}.
    static const std::set<std::string> shifts = {"shrq", "sarq", "shlq", "salq", "shrl", "sarl", "shll", "sall"};
    if (shifts.count(mn) && ops.size() == 2 && ops[0][0] == '$') {
      const int bits = static_cast<int>(number(ops[0].substr(1)));
      if (bits % 8) fail("a shift by " + std::to_string(bits) + " bits");
      const int width = mn.back() == 'q' ? 8 : 4;
      const X86Reg r = reg(ops[1]);
      const Bytes& b = m.reg(r.name).bytes;
      Bytes out = mn[1] == 'h' && mn[2] == 'r' ? shift_right(b, bits / 8, width, Origin::kZero)
                  : mn.rfind("sar", 0) == 0    ? shift_right(b, bits / 8, width, Origin::kUnknown)
                                               : shift_left(b, bits / 8, width);
      Value v;
      v.bytes = low(out, width, 8, Origin::kZero);
      m.set(r.name, v);
      return true;
    }
    fail("unhandled instruction " + mn);
  }

 private:
  struct X86Reg {
    std::string name;  // the 64-bit (or xmm) register
    int width = 8;
    bool xmm = false;
  };

  static bool is_reg(const std::string& op) { return !op.empty() && op[0] == '%'; }

  static X86Reg reg(const std::string& op) {
    if (!is_reg(op)) fail("not a register: " + op);
    const std::string r = op.substr(1);
    if (r.rfind("xmm", 0) == 0) return {r, 16, true};
    static const char* const legacy[][4] = {{"rax", "eax", "ax", "al"},  {"rbx", "ebx", "bx", "bl"},
                                            {"rcx", "ecx", "cx", "cl"},  {"rdx", "edx", "dx", "dl"},
                                            {"rsi", "esi", "si", "sil"}, {"rdi", "edi", "di", "dil"},
                                            {"rbp", "ebp", "bp", "bpl"}, {"rsp", "esp", "sp", "spl"}};
    for (const auto& row : legacy)
      for (int w = 0; w < 4; ++w)
        if (r == row[w]) return {row[0], 8 >> w, false};
    if (r.size() >= 2 && r[0] == 'r' && std::isdigit(static_cast<unsigned char>(r[1]))) {
      size_t end = 1;
      while (end < r.size() && std::isdigit(static_cast<unsigned char>(r[end]))) ++end;
      const std::string base = r.substr(0, end), suffix = r.substr(end);
      const int width = suffix.empty() ? 8 : suffix == "d" ? 4 : suffix == "w" ? 2 : suffix == "b" ? 1 : 0;
      if (width) return {base, width, false};
    }
    fail("unknown register " + op);
  }

  // "disp(%base)" or "sym+disp(%rip)".
  static Address address(Machine& m, const std::string& op) {
    const size_t paren = op.find('(');
    if (paren == std::string::npos || op.back() != ')') fail("not a memory operand: " + op);
    const std::string inside = op.substr(paren + 1, op.size() - paren - 2);
    if (inside.find(',') != std::string::npos) fail("indexed addressing: " + op);
    auto [sym, off] = symbol_and_offset(op.substr(0, paren));
    if (inside == "%rip") {
      if (sym.empty()) fail("rip-relative without a symbol: " + op);
      return Address{Address::kGlobal, sym, off};
    }
    if (!sym.empty()) fail("a symbol off a register: " + op);
    Address a = m.address_in(reg(inside).name);
    a.offset += off;
    return a;
  }

  Bytes read(Machine& m, const std::string& op, int n) {
    if (op[0] == '$') return constant(number(op.substr(1))).bytes;
    if (is_reg(op)) return m.reg(reg(op).name).bytes;
    return m.load(address(m, op), 0, n);
  }

  // n bytes to a register or memory; a register's bytes above n: `rest`
  // for a 32-bit, xmm-from-GPR/memory write, kept for 8- and 16-bit ones.
  void write(Machine& m, const std::string& op, const Bytes& b, int n, Origin::Kind rest) {
    if (!is_reg(op)) {
      m.store(address(m, op), 0, b, n);
      return;
    }
    const X86Reg r = reg(op);
    Value v;
    if (r.xmm || n >= 4)
      v.bytes = low(b, n, 16, rest);
    else
      v.bytes = merge_low(m.reg(r.name).bytes, b, n);
    m.set(r.name, v);
  }

  std::vector<Bytes> x87_;
};

// ---- arm64 (GCC's syntax).

class Arm64Interpreter : public Interpreter {
 public:
  Machine machine() const override {
    return Machine("sp", {"xzr"}, [](const std::string& r) { return r[0] == 'v' ? 16 : 8; });
  }

  bool step(Machine& m, const std::string& mn, const std::vector<std::string>& ops) override {
    if (mn == "ret") return false;
    if (mn == "nop" || mn == "bti" || mn == "hint") return true;
    if (mn == "adrp") {
      Value v;
      v.addr = Address{Address::kPage, ops.at(1), 0};
      m.set(reg(ops.at(0)).name, v);
      return true;
    }
    if (mn == "add" || mn == "sub") {
      const Reg d = reg(ops.at(0)), n = reg(ops.at(1));
      Value v;
      const std::string& k = ops.at(2);
      if (k.rfind(":lo12:", 0) == 0) {
        auto [sym, off] = symbol_and_offset(k.substr(6));
        v.addr = Address{Address::kGlobal, sym, off};
      } else {
        const int64_t by = imm(k) * (mn == "sub" ? -1 : 1);
        Value& src = m.reg(n.name);
        if (src.addr.kind == Address::kNone) fail(mn + " on a value that is no address");
        v.addr = src.addr;
        v.addr.offset += by;
      }
      m.set(d.name, v);
      return true;
    }
    if (mn == "mov" || mn == "fmov") {
      const Reg d = reg(ops.at(0));
      const std::string& s = ops.at(1);
      if (s[0] == '#' || is_number(s)) {
        const Value c = constant(imm(s));
        set(m, d, c.bytes, 8);
        return true;
      }
      const Reg r = reg(s);
      if (d.width == 8 && r.width == 8 && !d.vector && !r.vector) {
        m.set(d.name, m.reg(r.name));  // keeps an address
        return true;
      }
      set(m, d, m.reg(r.name).bytes, std::min(d.width, r.width));
      return true;
    }
    static const std::set<std::string> loads = {"ldr",   "ldrb", "ldrh",  "ldrsb", "ldrsh",
                                                "ldrsw", "ldur", "ldurb", "ldurh", "ldp"};
    static const std::set<std::string> stores = {"str", "strb", "strh", "stur", "sturb", "sturh", "stp"};
    if (loads.count(mn) || stores.count(mn)) {
      const bool pair = mn == "ldp" || mn == "stp";
      const size_t nregs = pair ? 2 : 1;
      std::vector<Reg> rs;
      for (size_t i = 0; i < nregs; ++i) rs.push_back(reg(ops.at(i)));
      int width = rs[0].width;
      if (mn.back() == 'b' || mn == "ldrsb") width = 1;
      if (mn.back() == 'h' || mn == "ldrsh") width = 2;
      if (mn == "ldrsw") width = 4;
      const bool sign = mn.rfind("ldrs", 0) == 0;
      auto [addr, writeback] = address(m, ops, nregs);
      for (size_t i = 0; i < nregs; ++i) {
        const int64_t at = static_cast<int64_t>(i) * width;
        if (loads.count(mn)) {
          Bytes b = m.load(addr, at, width);
          set(m, rs[i], low(b, width, 16, sign ? Origin::kUnknown : Origin::kZero), 16);
        } else {
          m.store(addr, at, m.reg(rs[i].name).bytes, width);
        }
      }
      if (writeback) {
        Value v;
        v.addr = writeback->first;
        v.addr.offset += writeback->second;
        m.set(writeback_reg_, v);
      }
      return true;
    }
    if (mn == "lsr" || mn == "asr" || mn == "lsl") {
      const Reg d = reg(ops.at(0)), n = reg(ops.at(1));
      const int bits = static_cast<int>(imm(ops.at(2)));
      if (bits % 8) fail("a shift by " + std::to_string(bits) + " bits");
      const Bytes& b = m.reg(n.name).bytes;
      const Bytes out = mn == "lsl"   ? shift_left(b, bits / 8, n.width)
                        : mn == "lsr" ? shift_right(b, bits / 8, n.width, Origin::kZero)
                                      : shift_right(b, bits / 8, n.width, Origin::kUnknown);
      set(m, d, out, d.width);
      return true;
    }
    if (mn == "and") {
      const Reg d = reg(ops.at(0)), n = reg(ops.at(1));
      const std::string& k = ops.at(2);
      const uint64_t mask = static_cast<uint64_t>(imm(k));
      int keep = 0;
      while (keep < 8 && ((mask >> (8 * keep)) & 0xff) == 0xff) ++keep;
      if (keep == 0 || (keep < 8 && (mask >> (8 * keep)) != 0)) fail("a mask that is not whole low bytes");
      set(m, d, low(m.reg(n.name).bytes, keep, 8, Origin::kZero), d.width);
      return true;
    }
    if (mn == "ubfx" || mn == "sbfx" || mn == "bfi" || mn == "bfxil") {
      const Reg d = reg(ops.at(0)), n = reg(ops.at(1));
      const int lsb = static_cast<int>(imm(ops.at(2))), bits = static_cast<int>(imm(ops.at(3)));
      if (lsb % 8 || bits % 8) fail("a bitfield of whole bytes only");
      const Bytes& src = m.reg(n.name).bytes;
      Bytes out;
      if (mn == "bfi") {  // dst[lsb..] = src[0..]
        out = m.reg(d.name).bytes;
        for (int i = 0; i < bits / 8; ++i) out[lsb / 8 + i] = src[i];
      } else if (mn == "bfxil") {  // dst[0..] = src[lsb..]
        out = m.reg(d.name).bytes;
        for (int i = 0; i < bits / 8; ++i) out[i] = src[lsb / 8 + i];
      } else {
        out = low(shift_right(src, lsb / 8, 8, Origin::kUnknown), bits / 8, 8,
                  mn == "ubfx" ? Origin::kZero : Origin::kUnknown);
      }
      set(m, d, out, d.width);
      return true;
    }
    static const std::map<std::string, std::pair<int, Origin::Kind>> extends = {{"sxtb", {1, Origin::kUnknown}},
                                                                                {"sxth", {2, Origin::kUnknown}},
                                                                                {"sxtw", {4, Origin::kUnknown}},
                                                                                {"uxtb", {1, Origin::kZero}},
                                                                                {"uxth", {2, Origin::kZero}}};
    if (auto it = extends.find(mn); it != extends.end()) {
      const Reg d = reg(ops.at(0)), n = reg(ops.at(1));
      set(m, d, low(m.reg(n.name).bytes, it->second.first, 8, it->second.second), d.width);
      return true;
    }
    fail("unhandled instruction " + mn);
  }

 private:
  static int64_t imm(const std::string& op) { return number(!op.empty() && op[0] == '#' ? op.substr(1) : op); }

  struct Reg {
    std::string name;  // x0..x30, sp, xzr, v0..v31
    int width = 8;
    bool vector = false;
  };

  static Reg reg(const std::string& op) {
    if (op == "sp" || op == "wsp") return {"sp", 8, false};
    if (op == "xzr" || op == "wzr") return {"xzr", op[0] == 'x' ? 8 : 4, false};
    if (op.size() >= 2 && std::isdigit(static_cast<unsigned char>(op[1])) && op.find('.') == std::string::npos) {
      const std::string n = op.substr(1);
      if (!is_number(n)) fail("unknown register " + op);
      switch (op[0]) {
        case 'x': return {"x" + n, 8, false};
        case 'w': return {"x" + n, 4, false};
        case 'b': return {"v" + n, 1, true};
        case 'h': return {"v" + n, 2, true};
        case 's': return {"v" + n, 4, true};
        case 'd': return {"v" + n, 8, true};
        case 'q': return {"v" + n, 16, true};
      }
    }
    fail("unknown register " + op);
  }

  // A write of n bytes to d: a w register's upper half and an FP
  // register's bytes above its size are zeroed.
  static void set(Machine& m, const Reg& d, const Bytes& b, int n) {
    Value v;
    v.bytes = low(b, std::min(n, d.width), 16, Origin::kZero);
    m.set(d.name, v);
  }

  // "[xN]", "[xN, #imm]", "[xN, #:lo12:sym+K]", "[sp, -16]!" (pre-index),
  // "[sp], 16" (post-index, the operand after the bracket).
  std::pair<Address, std::optional<std::pair<Address, int64_t>>> address(Machine& m,
                                                                         const std::vector<std::string>& ops,
                                                                         size_t first) {
    const std::string& op = ops.at(first);
    if (op.empty() || op[0] != '[') fail("not a memory operand: " + op);
    const bool pre = op.back() == '!';
    const size_t close = op.find(']');
    const std::vector<std::string> parts = split_operands(op.substr(1, close - 1));
    const Reg base = reg(parts.at(0));
    Address a = m.address_in(base.name);
    int64_t disp = 0;
    if (parts.size() > 1) {
      std::string k = parts[1];
      if (k[0] == '#') k = k.substr(1);
      if (k.rfind(":lo12:", 0) == 0) {
        auto [sym, off] = symbol_and_offset(k.substr(6));
        if (a.kind != Address::kPage || a.base != sym) fail("a :lo12: off another page: " + op);
        a = Address{Address::kGlobal, sym, 0};
        disp = off;
      } else {
        disp = number(k);
      }
    }
    if (a.kind == Address::kPage) fail("a page address used whole: " + op);
    writeback_reg_ = base.name;
    if (pre) {
      a.offset += disp;
      return {a, std::make_pair(a, 0)};
    }
    if (ops.size() > first + 1) {  // post-index
      const std::string& k = ops[first + 1];
      return {a, std::make_pair(a, imm(k))};
    }
    a.offset += disp;
    return {a, std::nullopt};
  }

  std::string writeback_reg_;
};

// ---- riscv64 (GCC's syntax, with its pseudo-instructions).

class Riscv64Interpreter : public Interpreter {
 public:
  Machine machine() const override {
    return Machine("sp", {"zero"}, [](const std::string&) { return 8; });
  }

  bool step(Machine& m, const std::string& mn, const std::vector<std::string>& ops) override {
    if (mn == "ret" || (mn == "jr" && ops.at(0) == "ra")) return false;
    if (mn == "nop") return true;
    if (mn == "lla" || mn == "la") {
      auto [sym, off] = symbol_and_offset(ops.at(1));
      Value v;
      v.addr = Address{Address::kGlobal, sym, off};
      m.set(ops.at(0), v);
      return true;
    }
    if (mn == "auipc" && ops.at(1).rfind("%pcrel_hi(", 0) == 0) {  // Clang's: %pcrel_lo(its label) follows
      Value v;
      v.addr = Address{Address::kPage, symbol_and_offset(ops[1].substr(10, ops[1].size() - 11)).first, 0};
      m.set(ops.at(0), v);
      return true;
    }
    if (mn == "lui" && ops.at(1).rfind("%hi(", 0) == 0) {
      Value v;
      v.addr = Address{Address::kPage, symbol_and_offset(ops[1].substr(4, ops[1].size() - 5)).first, 0};
      m.set(ops.at(0), v);
      return true;
    }
    if (mn == "addi") {
      Value& src = m.reg(ops.at(1));
      Value v;
      const std::string& k = ops.at(2);
      if (k.rfind("%lo(", 0) == 0) {
        auto [sym, off] = symbol_and_offset(k.substr(4, k.size() - 5));
        v.addr = Address{Address::kGlobal, sym, off};
      } else if (k.rfind("%pcrel_lo(", 0) == 0) {
        if (src.addr.kind != Address::kPage) fail("a %pcrel_lo off no auipc");
        v.addr = Address{Address::kGlobal, src.addr.base, 0};
      } else if (src.constant) {
        v = constant(*src.constant + number(k));
      } else if (src.addr.kind == Address::kSp || src.addr.kind == Address::kGlobal ||
                 src.addr.kind == Address::kPointer) {
        v.addr = src.addr;
        v.addr.offset += number(k);
      } else {
        fail("addi on a value that is no address");
      }
      m.set(ops[0], v);
      return true;
    }
    if (mn == "li") {
      m.set(ops.at(0), constant(number(ops.at(1))));
      return true;
    }
    if (mn == "mv") {
      m.set(ops.at(0), m.reg(ops.at(1)));
      return true;
    }
    static const std::map<std::string, std::pair<int, Origin::Kind>> loads = {
        {"ld", {8, Origin::kZero}},    {"lw", {4, Origin::kUnknown}},
        {"lwu", {4, Origin::kZero}},   {"lh", {2, Origin::kUnknown}},
        {"lhu", {2, Origin::kZero}},   {"lb", {1, Origin::kUnknown}},
        {"lbu", {1, Origin::kZero}},   {"fld", {8, Origin::kZero}},
        {"flw", {4, Origin::kUnknown}}};  // a flw NaN-boxes: ones above
    static const std::map<std::string, int> stores = {{"sd", 8}, {"sw", 4},  {"sh", 2},
                                                      {"sb", 1}, {"fsd", 8}, {"fsw", 4}};
    if (auto it = loads.find(mn); it != loads.end()) {
      auto [a, disp] = address(m, ops, 1);
      Value v;
      v.bytes = low(m.load(a, disp, it->second.first), it->second.first, 8, it->second.second);
      m.set(ops.at(0), v);
      return true;
    }
    if (auto it = stores.find(mn); it != stores.end()) {
      auto [a, disp] = address(m, ops, 1);
      m.store(a, disp, m.reg(ops.at(0)).bytes, it->second);
      if (ops.size() == 3) m.set(ops[2], Value{});  // `sw a0,sym,tmp`: tmp held the address's high part
      return true;
    }
    static const std::map<std::string, std::pair<int, Origin::Kind>> fmoves = {
        {"fmv.x.d", {8, Origin::kZero}},    {"fmv.d.x", {8, Origin::kZero}},    {"fmv.d", {8, Origin::kZero}},
        {"fmv.x.w", {4, Origin::kUnknown}}, {"fmv.w.x", {4, Origin::kUnknown}}, {"fmv.s", {4, Origin::kUnknown}}};
    if (auto it = fmoves.find(mn); it != fmoves.end()) {
      Value v;
      v.bytes = low(m.reg(ops.at(1)).bytes, it->second.first, 8, it->second.second);
      m.set(ops.at(0), v);
      return true;
    }
    if (mn == "slli" || mn == "srli" || mn == "srai" || mn == "slliw" || mn == "srliw" || mn == "sraiw") {
      const int bits = static_cast<int>(number(ops.at(2)));
      const bool word = mn.back() == 'w';
      Value& src = m.reg(ops.at(1));
      Value v;
      if (src.constant && !word) {
        const uint64_t c = static_cast<uint64_t>(*src.constant);
        v = constant(static_cast<int64_t>(mn == "slli"   ? c << bits
                                          : mn == "srli" ? c >> bits
                                                         : static_cast<uint64_t>(*src.constant >> bits)));
      } else {
        if (bits % 8) fail("a shift by " + std::to_string(bits) + " bits");
        const int width = word ? 4 : 8;
        const Bytes out = mn[1] == 'l' && mn[2] == 'l' ? shift_left(src.bytes, bits / 8, width)
                          : mn[2] == 'l'               ? shift_right(src.bytes, bits / 8, width, Origin::kZero)
                                                       : shift_right(src.bytes, bits / 8, width, Origin::kUnknown);
        v.bytes = low(out, width, 8, Origin::kUnknown);  // a w result is sign-extended
      }
      m.set(ops[0], v);
      return true;
    }
    if (mn == "sext.w") {
      Value v;
      v.bytes = low(m.reg(ops.at(1)).bytes, 4, 8, Origin::kUnknown);
      m.set(ops.at(0), v);
      return true;
    }
    if (mn == "andi" || mn == "and") {
      const Value& a = m.reg(ops.at(1));
      const std::optional<int64_t> k =
          mn == "andi" ? std::optional<int64_t>(number(ops.at(2))) : m.reg(ops.at(2)).constant;
      if (!k) fail("and with a mask that is no constant");
      const uint64_t mask = static_cast<uint64_t>(*k);
      int keep = 0;
      while (keep < 8 && ((mask >> (8 * keep)) & 0xff) == 0xff) ++keep;
      if (keep == 0 || (keep < 8 && (mask >> (8 * keep)) != 0)) fail("a mask that is not whole low bytes");
      Value v;
      v.bytes = low(a.bytes, keep, 8, Origin::kZero);
      m.set(ops[0], v);
      return true;
    }
    if (mn == "or") {  // two values whose bytes do not overlap (the other side zero)
      const Bytes a = m.reg(ops.at(1)).bytes, b = m.reg(ops.at(2)).bytes;
      Value v;
      for (int i = 0; i < 8; ++i) {
        if (a[i].kind == Origin::kZero)
          v.bytes[i] = b[i];
        else if (b[i].kind == Origin::kZero)
          v.bytes[i] = a[i];
      }
      m.set(ops[0], v);
      return true;
    }
    fail("unhandled instruction " + mn);
  }

 private:
  // "off(base)", "%lo(sym+K)(base)", "%pcrel_lo(label)(base)", or a
  // symbol ("sw a0,sym,tmp": the assembler's auipc pair).
  static std::pair<Address, int64_t> address(Machine& m, const std::vector<std::string>& ops, size_t at) {
    const std::string& op = ops.at(at);
    if (op.back() != ')') {
      auto [sym, off] = symbol_and_offset(op);
      return {Address{Address::kGlobal, sym, 0}, off};
    }
    const size_t open = op.rfind('(');
    const std::string base = op.substr(open + 1, op.size() - open - 2);
    const std::string disp = op.substr(0, open);
    Address a = m.address_in(base);
    if (disp.rfind("%lo(", 0) == 0) {
      auto [sym, off] = symbol_and_offset(disp.substr(4, disp.size() - 5));
      if (a.kind != Address::kPage || a.base != sym) fail("a %lo off another %hi: " + op);
      return {Address{Address::kGlobal, sym, 0}, off};
    }
    if (disp.rfind("%pcrel_lo(", 0) == 0) {  // off the auipc at its label: the symbol's address
      if (a.kind != Address::kPage) fail("a %pcrel_lo off no auipc: " + op);
      return {Address{Address::kGlobal, a.base, 0}, 0};
    }
    if (a.kind == Address::kPage) fail("a %hi address used whole: " + op);
    return {a, disp.empty() ? 0 : number(disp)};
  }
};

// ---- (b) signatures.c and its assembly.

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string trim(std::string s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
  size_t i = 0;
  while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
  return s.substr(i);
}

// Every `R name(T0 p0, ...) {` line of signatures.c.
std::vector<FunctionSignature> fixture_signatures() {
  std::vector<FunctionSignature> out;
  std::istringstream in(read_file(std::string(FTJIT_CC_FIXTURE_DIR) + "/signatures.c"));
  for (std::string line; std::getline(in, line);) {
    const size_t open = line.find('('), brace = line.find(") {");
    if (line.rfind("//", 0) == 0 || open == std::string::npos || brace == std::string::npos) continue;
    std::string head = trim(line.substr(0, open));
    size_t name_at = head.size();
    while (name_at > 0 && (std::isalnum(static_cast<unsigned char>(head[name_at - 1])) || head[name_at - 1] == '_'))
      --name_at;
    FunctionSignature sig;
    sig.name = head.substr(name_at);
    const std::string ret = trim(head.substr(0, name_at));
    if (ret != "void") sig.ret = type(ret);
    for (const std::string& p : split_operands(line.substr(open + 1, brace - open - 1))) {
      if (p == "void") continue;
      if (p == "...") {
        sig.variadic = true;
        continue;
      }
      size_t at = p.size();
      while (at > 0 && std::isalnum(static_cast<unsigned char>(p[at - 1]))) --at;  // "p3"
      const std::string t = trim(p.substr(0, at));
      if (!fixture_types().count(t)) throw std::runtime_error("signatures.c: unknown type '" + t + "' in " + sig.name);
      sig.params.push_back(Param{p.substr(at), type(t), false});
    }
    out.push_back(std::move(sig));
  }
  return out;
}

// The instructions of each function, by its label; `comment` starts a
// comment ("#" in x86-64 and riscv64 assembly, "//" in arm64's, where "#"
// is an immediate's).
std::map<std::string, std::vector<std::string>> assembly_functions(const std::string& path,
                                                                   const std::string& comment) {
  std::map<std::string, std::vector<std::string>> out;
  std::istringstream in(read_file(path));
  std::string current;
  for (std::string line; std::getline(in, line);) {
    if (const size_t c = line.find(comment); c != std::string::npos) line.erase(c);
    while (!line.empty() && std::isspace(static_cast<unsigned char>(line.back()))) line.pop_back();
    if (line.empty()) continue;
    if (!std::isspace(static_cast<unsigned char>(line[0])) && line.back() == ':') {
      // A local label (.LFB0, Clang's .Lpcrel_hi3) does not end a function;
      // a branch to one is an instruction no interpreter knows.
      const std::string label = line.substr(0, line.size() - 1);
      if (label.rfind(".L", 0) != 0) current = label;
      continue;
    }
    const std::string insn = trim(line);
    if (current.empty() || insn.empty() || insn[0] == '.') continue;
    out[current].push_back(insn);
  }
  return out;
}

// What one function's code did: its stores to globals, the pointers it
// wrote through, its registers at `ret`.
struct Trace {
  std::map<std::string, std::map<int64_t, Origin>> stores;
  std::set<std::string> written_through;
  Machine at_return{"", {}, [](const std::string&) { return 0; }};
};

Trace run(Interpreter& interp, const std::vector<std::string>& code) {
  Machine m = interp.machine();
  for (const std::string& insn : code) {
    const size_t space = insn.find_first_of(" \t");
    const std::string mnemonic = insn.substr(0, space);
    const std::vector<std::string> ops =
        space == std::string::npos ? std::vector<std::string>{} : split_operands(trim(insn.substr(space)));
    try {
      if (!interp.step(m, mnemonic, ops)) return Trace{m.global_stores, m.written_through, m};
    } catch (const std::exception& e) {
      fail("'" + insn + "': " + e.what());
    }
  }
  fail("no return");
}

// The bytes of a value that hold data: its members' (a struct's padding
// is copied or not, as the compiler likes).
std::vector<int64_t> data_bytes(const ValueType& t) {
  std::set<int64_t> bytes;
  if (t.kind == ValueKind::kStruct && !t.opaque) {
    for (const Member& m : t.members)
      for (int64_t i = 0; i < m.size; ++i) bytes.insert(m.offset + i);
  } else {
    for (int64_t i = 0; i < t.size; ++i) bytes.insert(i);
  }
  return {bytes.begin(), bytes.end()};
}

// Where the placement says value byte `b` of a parameter is at entry.
std::optional<Origin> expected_at_entry(Isa isa, const ArgPlace& place, int64_t b) {
  const RegisterNames& names = names_of(isa);
  if (place.by_reference) {
    const ArgPiece& p = place.pieces.at(0);
    const std::string pointer =
        p.source == ArgSource::kStack ? "sp+" + std::to_string(p.index) : names.int_args.at(p.index);
    return Origin{Origin::kThrough, pointer, b};
  }
  for (const ArgPiece& p : place.pieces) {
    if (b < p.offset || b >= p.offset + p.size) continue;
    const int64_t k = b - p.offset;
    switch (p.source) {
      case ArgSource::kIntReg: return Origin{Origin::kReg, names.int_args.at(p.index), k};
      case ArgSource::kFpReg: return Origin{Origin::kReg, names.fp_args.at(p.index), k};
      case ArgSource::kStack: return Origin{Origin::kStack, "", p.index + k};
      default: return std::nullopt;
    }
  }
  return std::nullopt;
}

std::string return_register_name(Isa isa, ArgSource s, uint16_t i) {
  const RegisterNames& n = names_of(isa);
  return s == ArgSource::kRetInt ? n.ret_int.at(i) : n.ret_fp.at(i);
}

// Where a compiler departs from its psABI, and from GCC: that compiler's
// failures in that function are notes, not failures.
const std::map<std::pair<std::string, std::string>, std::string>& known_deviations() {
  static const std::map<std::pair<std::string, std::string>, std::string> known = [] {
    const std::string int128 =
        "Clang before 18 puts an __int128 argument on the stack 8-aligned, or split between r9 and the stack "
        "(llvm-project#41784, D158169, D86310); the psABI and GCC: 16-aligned, never split";
    std::map<std::pair<std::string, std::string>, std::string> m;
    for (const char* f : {"int128_split", "int128_stack", "int128_one_reg_left"}) m[{"x86_64-clang.s", f}] = int128;
    return m;
  }();
  return known;
}

// Checks every function of signatures.c on `isa`: returns the failures.
std::vector<std::string> check_against_compiler(Isa isa, Interpreter& interp, const std::string& asm_path,
                                                int* checked) {
  std::vector<std::string> failures;
  const std::string asm_name = asm_path.substr(asm_path.rfind('/') + 1);
  const auto functions = assembly_functions(asm_path, isa == Isa::kArm64 ? "//" : "#");
  for (const FunctionSignature& sig : fixture_signatures()) {
    const auto known = known_deviations().find({asm_name, sig.name});
    bool noted = false;
    auto say = [&](const std::string& what) {
      if (known == known_deviations().end()) {
        failures.push_back(sig.name + ": " + what);
      } else if (!noted) {
        noted = true;
        std::printf("%s: %s: a known deviation: %s\n  (%s)\n", asm_name.c_str(), sig.name.c_str(), what.c_str(),
                    known->second.c_str());
      }
    };
    auto it = functions.find(sig.name);
    if (it == functions.end()) {
      say("not in " + asm_path);
      continue;
    }
    Trace trace;
    try {
      trace = run(interp, it->second);
    } catch (const std::exception& e) {
      say(e.what());
      continue;
    }
    const PlacedSignature placed = place_arguments(isa, sig);
    const std::string placed_text = " (placed: " + show(isa, placed) + ")";
    for (size_t i = 0; i < sig.params.size(); ++i) {
      const ValueType& t = sig.params[i].type;
      const ArgPlace& place = placed.params[i];
      const std::string global = "g_" + sig.name + "_" + std::to_string(i);
      const auto& stored = trace.stores[global];
      if (stored.empty()) {
        say("nothing stored to " + global);
        continue;
      }
      if (place.unavailable) {
        // Only what cannot be shown may be unavailable: a misplaced value
        // cannot hide as unavailable.
        if (t.kind != ValueKind::kUnsupported) say("p" + std::to_string(i) + " placed unavailable: " + place.why);
        continue;
      }
      for (int64_t b : data_bytes(t)) {
        auto s = stored.find(b);
        const std::optional<Origin> want = expected_at_entry(isa, place, b);
        if (s == stored.end()) {
          say("p" + std::to_string(i) + " byte " + std::to_string(b) + " never stored");
        } else if (!want || !(*want == s->second)) {
          say("p" + std::to_string(i) + " byte " + std::to_string(b) + ": the code reads " + str(s->second) +
              ", placed at " + (want ? str(*want) : "nowhere") + placed_text);
        }
      }
      ++*checked;
    }
    if (!sig.ret) continue;
    const ArgPlace& ret = *placed.ret;
    const std::string global = "r_" + sig.name;
    const RegisterNames& names = names_of(isa);
    if (ret.unavailable) {
      if (ret.why == "returned in memory") {
        if (!trace.written_through.count(names.hidden_ret))
          say("returned in memory, but not written through " + names.hidden_ret);
      } else if (ret.why == "returned in v0-v3") {
        // Its third member in v2.
        const Origin o = trace.at_return.reg("v2").bytes[0];
        if (sig.ret->members.size() < 3 || !(o == Origin{Origin::kGlobal, global, sig.ret->members[2].offset}))
          say("returned in v0-v3, but v2 holds " + str(o));
      } else if (sig.ret->kind != ValueKind::kUnsupported) {
        say("return placed unavailable: " + ret.why);
      }
      continue;
    }
    if (ret.by_reference) {
      // x86-64: rax gives back the buffer's address, which came in rdi.
      const Bytes& rax = trace.at_return.reg("rax").bytes;
      for (int i = 0; i < 8; ++i)
        if (!(rax[i] == Origin{Origin::kReg, names.hidden_ret, i}))
          say("rax at ret is not the rdi at entry: " + str(rax[i]));
      if (!trace.written_through.count(names.hidden_ret)) say("returned by reference, but not written through rdi");
      ++*checked;
      continue;
    }
    // Every data byte where a piece says. (Not the other way: the code may
    // leave a copy of some bytes in a register it used on the way.)
    std::map<std::pair<std::string, int64_t>, int64_t> placed_bytes;  // (register, byte) -> value byte
    for (const ArgPiece& p : ret.pieces)
      for (int k = 0; k < p.size; ++k) placed_bytes[{return_register_name(isa, p.source, p.index), k}] = p.offset + k;
    for (int64_t b : data_bytes(*sig.ret)) {
      bool found = false;
      for (const auto& [where, value_byte] : placed_bytes) {
        if (value_byte != b) continue;
        found = true;
        const Origin o = trace.at_return.reg(where.first).bytes[where.second];
        if (!(o == Origin{Origin::kGlobal, global, b}))
          say("return byte " + std::to_string(b) + " placed in " + where.first + "[" + std::to_string(where.second) +
              "], which holds " + str(o) + placed_text);
      }
      if (!found) say("return byte " + std::to_string(b) + " placed nowhere" + placed_text);
    }
    ++*checked;
  }
  return failures;
}

void expect_compiler_agrees(Isa isa, Interpreter& interp, const std::string& asm_name) {
  int checked = 0;
  const std::vector<std::string> failures =
      check_against_compiler(isa, interp, std::string(FTJIT_CC_ASM_DIR) + "/" + asm_name, &checked);
  for (const std::string& f : failures) ADD_FAILURE() << asm_name << ": " << f;
  std::printf("%s: %d parameters and return values checked\n", asm_name.c_str(), checked);
  // Every function of signatures.c, every parameter and return value: a
  // checker that checks nothing fails here.
  EXPECT_GT(checked, 250);
}

// Each compiler that calling_convention.cmake found (FTJIT_CC_HAVE_<name>).
#ifndef FTJIT_CC_HAVE_X86_64_GCC
#define FTJIT_CC_HAVE_X86_64_GCC 0
#endif
#ifndef FTJIT_CC_HAVE_X86_64_CLANG
#define FTJIT_CC_HAVE_X86_64_CLANG 0
#endif
#ifndef FTJIT_CC_HAVE_ARM64_GCC
#define FTJIT_CC_HAVE_ARM64_GCC 0
#endif
#ifndef FTJIT_CC_HAVE_ARM64_CLANG
#define FTJIT_CC_HAVE_ARM64_CLANG 0
#endif
#ifndef FTJIT_CC_HAVE_RISCV64_GCC
#define FTJIT_CC_HAVE_RISCV64_GCC 0
#endif
#ifndef FTJIT_CC_HAVE_RISCV64_CLANG
#define FTJIT_CC_HAVE_RISCV64_CLANG 0
#endif

#define FTJIT_VS_COMPILER(test, have, isa, Interp, name)       \
  TEST(CallingConventionVsCompiler, test) {                    \
    if (!(have)) GTEST_SKIP() << "no compiler for " << (name); \
    Interp interp;                                             \
    expect_compiler_agrees(isa, interp, name);                 \
  }

FTJIT_VS_COMPILER(X86_64Gcc, FTJIT_CC_HAVE_X86_64_GCC, Isa::kX86_64, X86Interpreter, "x86_64-gcc.s")
FTJIT_VS_COMPILER(X86_64Clang, FTJIT_CC_HAVE_X86_64_CLANG, Isa::kX86_64, X86Interpreter, "x86_64-clang.s")
FTJIT_VS_COMPILER(Arm64Gcc, FTJIT_CC_HAVE_ARM64_GCC, Isa::kArm64, Arm64Interpreter, "arm64-gcc.s")
FTJIT_VS_COMPILER(Arm64Clang, FTJIT_CC_HAVE_ARM64_CLANG, Isa::kArm64, Arm64Interpreter, "arm64-clang.s")
FTJIT_VS_COMPILER(Riscv64Gcc, FTJIT_CC_HAVE_RISCV64_GCC, Isa::kRiscv64, Riscv64Interpreter, "riscv64-gcc.s")
FTJIT_VS_COMPILER(Riscv64Clang, FTJIT_CC_HAVE_RISCV64_CLANG, Isa::kRiscv64, Riscv64Interpreter, "riscv64-clang.s")

// The interpreters themselves, on code whose answer is known: a checker
// that misreads a move would pass a misplacement.
TEST(CallingConventionVsCompiler, InterpretersFollowBytes) {
  auto trace_of = [](Interpreter& interp, std::vector<std::string> code) { return run(interp, code); };
  X86Interpreter x86;
  Trace t =
      trace_of(x86, {"movq %rdi, %rax", "sarq $32, %rax", "movl %eax, 4+g(%rip)", "pushq %rbx", "movq 16(%rsp), %rdx",
                     "movq %rdx, 8+g(%rip)", "movq %xmm1, %rcx", "movd %ecx, %xmm0", "movss %xmm0, g(%rip)", "ret"});
  EXPECT_EQ(str(t.stores["g"][4]), "rdi[4]");
  EXPECT_EQ(str(t.stores["g"][8]), "sp+8");
  EXPECT_EQ(str(t.stores["g"][3]), "xmm1[3]");
  Arm64Interpreter arm;
  t = trace_of(arm, {"adrp x2, g", "add x3, x2, :lo12:g", "fmov w4, s1", "bfi x0, x4, 32, 32",
                     "str x0, [x2, #:lo12:g+8]", "ldp x5, x6, [x7]", "stp x5, x6, [x3, 16]", "ret"});
  EXPECT_EQ(str(t.stores["g"][8]), "x0[0]");
  EXPECT_EQ(str(t.stores["g"][12]), "v1[0]");
  EXPECT_EQ(str(t.stores["g"][24]), "*(x7)+8");
  Riscv64Interpreter rv;
  t = trace_of(rv,
               {"srai a0,a0,32", "sw a0,g+4,a5", "addi sp,sp,-16", "ld a4,16(sp)", "lla a5,g", "sd a4,8(a5)", "jr ra"});
  EXPECT_EQ(str(t.stores["g"][4]), "a0[4]");
  EXPECT_EQ(str(t.stores["g"][8]), "sp+0");
}

}  // namespace
}  // namespace ftjit
