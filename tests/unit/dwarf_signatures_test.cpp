// SPDX-License-Identifier: MIT
// read_debug_info on the fixtures of tests/unit/dwarf_signatures/ built by
// GCC and clang for x86-64 and by GCC for aarch64 and riscv64: each
// parameter's kind, size and name, structs flattened, GCC's clones and
// clang's DW_CC_nocall, C++ methods; the separate debug files libdwfl
// finds (debuglink, .debug/, build-id under a root); and broken DWARF in
// memory, which must give an error or a sane result, never a crash.
#include "core/dwarf_signatures.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "core/elf_image.h"

namespace ftjit {
namespace {

namespace fs = std::filesystem;

std::string fixture(const std::string& name) { return std::string(FTJIT_SIG_DIR) + "/" + name; }

std::vector<uint8_t> read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

DebugInfo must_read(const std::string& path, const std::string& root = "") {
  auto info = read_debug_info(path, root);
  EXPECT_TRUE(info.ok()) << path << ": " << (info.ok() ? "" : info.error().message);
  return info.ok() ? std::move(info.value()) : DebugInfo{};
}

const FunctionSignature* find(const DebugInfo& info, const std::string& name) {
  for (const FunctionSignature& f : info.functions) {
    if (f.name == name) return &f;
  }
  return nullptr;
}

// The function, or a test failure naming it.
const FunctionSignature& fn(const DebugInfo& info, const std::string& name) {
  static const FunctionSignature kMissing;
  const FunctionSignature* f = find(info, name);
  EXPECT_NE(f, nullptr) << name << " not read";
  return f != nullptr ? *f : kMissing;
}

// Runs a shell command of the test's own making (fixture paths only).
void run(const std::string& command) { ASSERT_EQ(std::system(command.c_str()), 0) << command; }

void expect_scalar(const ValueType& t, ValueKind kind, uint32_t size, const std::string& name) {
  EXPECT_EQ(t.kind, kind) << name;
  EXPECT_EQ(t.size, size) << name;
  EXPECT_EQ(t.name, name);
}

void expect_member(const Member& m, const std::string& name, uint32_t offset, ValueKind kind, uint8_t size) {
  EXPECT_EQ(m.name, name);
  EXPECT_EQ(m.offset, offset) << name;
  EXPECT_EQ(m.kind, kind) << name;
  EXPECT_EQ(m.size, size) << name;
}

// Every function read is at one of the file's function symbols (st_value),
// and the list is sorted and unique by entry.
void expect_entries_are_symbols(const std::string& path, const DebugInfo& info) {
  const std::vector<uint8_t> bytes = read_bytes(path);
  auto image = ElfImage::parse(bytes);
  ASSERT_TRUE(image.ok()) << path << ": " << image.error().message;
  for (size_t i = 0; i < info.functions.size(); ++i) {
    const FunctionSignature& f = info.functions[i];
    const ElfSymbol* sym = image->function_at(f.entry);
    ASSERT_NE(sym, nullptr) << path << ": no symbol at " << std::hex << f.entry << " (" << f.name << ")";
    if (i > 0) {
      EXPECT_LT(info.functions[i - 1].entry, f.entry);
    }
  }
}

bool has_symbol(const std::string& path, const std::string& name) {
  const std::vector<uint8_t> bytes = read_bytes(path);
  auto image = ElfImage::parse(bytes);
  if (!image.ok()) return false;
  for (const ElfSymbol& s : image->functions()) {
    if (s.name == name) return true;
  }
  return false;
}

// ============================================================================
// C, for every compiler and machine
// ============================================================================

struct CFixture {
  std::string file;
  bool char_is_signed;
  bool gcc;
};

void PrintTo(const CFixture& f, std::ostream* os) { *os << f.file; }

std::vector<CFixture> c_fixtures() {
  std::vector<CFixture> out = {{"libsig_gcc.so", true, true}, {"sig_gcc_exe", true, true}};
  if (FTJIT_SIG_HAVE_CLANG) out.push_back({"libsig_clang.so", true, false});
  // arm64 and riscv64 make plain char unsigned.
  if (FTJIT_SIG_HAVE_AARCH64) out.push_back({"libsig_aarch64.so", false, true});
  if (FTJIT_SIG_HAVE_RISCV64) out.push_back({"libsig_riscv64.so", false, true});
  return out;
}

class CSignatures : public ::testing::TestWithParam<CFixture> {
 protected:
  void SetUp() override {
    path_ = fixture(GetParam().file);
    info_ = must_read(path_);
  }
  std::string path_;
  DebugInfo info_;
};

TEST_P(CSignatures, DwarfFromTheFileItselfAtTheSymbolsEntries) {
  EXPECT_EQ(info_.source, "the file itself");
  EXPECT_GE(info_.functions.size(), 35u);
  expect_entries_are_symbols(path_, info_);
  for (const FunctionSignature& f : info_.functions) {
    if (f.name.rfind("sig_", 0) == 0) {
      EXPECT_FALSE(f.abi_changed) << f.name << ": an exported function keeps the psABI's convention";
    }
  }
}

TEST_P(CSignatures, Integers) {
  const FunctionSignature& i8 = fn(info_, "sig_i8");
  ASSERT_EQ(i8.params.size(), 2u);
  EXPECT_EQ(i8.params[0].name, "a");
  expect_scalar(i8.params[0].type, ValueKind::kSigned, 1, "int8_t");
  expect_scalar(i8.params[1].type, ValueKind::kUnsigned, 1, "uint8_t");
  ASSERT_TRUE(i8.ret.has_value());
  expect_scalar(*i8.ret, ValueKind::kSigned, 1, "int8_t");
  EXPECT_TRUE(i8.ret->is_signed);

  const FunctionSignature& i16 = fn(info_, "sig_i16");
  ASSERT_EQ(i16.params.size(), 2u);
  expect_scalar(i16.params[0].type, ValueKind::kSigned, 2, "int16_t");
  expect_scalar(i16.params[1].type, ValueKind::kUnsigned, 2, "uint16_t");
  const FunctionSignature& i32 = fn(info_, "sig_i32");
  ASSERT_EQ(i32.params.size(), 2u);
  expect_scalar(i32.params[0].type, ValueKind::kSigned, 4, "int32_t");
  expect_scalar(i32.params[1].type, ValueKind::kUnsigned, 4, "uint32_t");
  const FunctionSignature& u64 = fn(info_, "sig_u64");
  ASSERT_EQ(u64.params.size(), 2u);
  expect_scalar(u64.params[0].type, ValueKind::kSigned, 8, "int64_t");
  expect_scalar(u64.params[1].type, ValueKind::kUnsigned, 8, "uint64_t");
  expect_scalar(*u64.ret, ValueKind::kUnsigned, 8, "uint64_t");

  // signed char and unsigned char are numbers; plain char is a character.
  const FunctionSignature& schar = fn(info_, "sig_schar");
  ASSERT_EQ(schar.params.size(), 2u);
  expect_scalar(schar.params[0].type, ValueKind::kSigned, 1, "signed char");
  expect_scalar(schar.params[1].type, ValueKind::kUnsigned, 1, "unsigned char");
  const FunctionSignature& ch = fn(info_, "sig_char");
  ASSERT_EQ(ch.params.size(), 1u);
  expect_scalar(ch.params[0].type, ValueKind::kChar, 1, "char");
  EXPECT_EQ(ch.params[0].type.is_signed, GetParam().char_is_signed);

  const FunctionSignature& b = fn(info_, "sig_bool");
  ASSERT_EQ(b.params.size(), 2u);
  EXPECT_EQ(b.params[0].type.kind, ValueKind::kBool);
  EXPECT_EQ(b.params[0].type.size, 1u);
  EXPECT_EQ(b.ret->kind, ValueKind::kBool);

  const FunctionSignature& size = fn(info_, "sig_size");
  ASSERT_EQ(size.params.size(), 2u);
  expect_scalar(size.params[0].type, ValueKind::kUnsigned, 8, "size_t");
  expect_scalar(size.params[1].type, ValueKind::kSigned, 8, "ptrdiff_t");
}

TEST_P(CSignatures, Enums) {
  const FunctionSignature& e = fn(info_, "sig_enum");
  ASSERT_EQ(e.params.size(), 2u);
  const ValueType& color = e.params[0].type;
  expect_scalar(color, ValueKind::kEnum, 4, "enum color");
  EXPECT_TRUE(color.is_signed);
  ASSERT_EQ(color.enumerators.size(), 3u);
  EXPECT_EQ(color.enumerators[0].name, "RED");
  EXPECT_EQ(color.enumerators[0].value, 1);
  EXPECT_EQ(color.enumerators[2].name, "BLUE");
  EXPECT_EQ(color.enumerators[2].value, -3);
  const ValueType& mask = e.params[1].type;
  expect_scalar(mask, ValueKind::kEnum, 4, "enum mask");
  EXPECT_FALSE(mask.is_signed);
  ASSERT_EQ(mask.enumerators.size(), 2u);
  EXPECT_EQ(mask.enumerators[1].value, 0x80000000);
  ASSERT_TRUE(e.ret.has_value());
  EXPECT_EQ(e.ret->enumerators.size(), 3u);
}

TEST_P(CSignatures, FloatingPoint) {
  const FunctionSignature& f = fn(info_, "sig_float");
  ASSERT_EQ(f.params.size(), 1u);
  expect_scalar(f.params[0].type, ValueKind::kFloat, 4, "float");
  const FunctionSignature& d = fn(info_, "sig_double");
  ASSERT_EQ(d.params.size(), 2u);
  expect_scalar(d.params[0].type, ValueKind::kFloat, 8, "double");
  expect_scalar(d.params[1].type, ValueKind::kFloat, 4, "float");
  // Shown by name only, but placed by size and alignment.
  const FunctionSignature& ld = fn(info_, "sig_long_double");
  ASSERT_EQ(ld.params.size(), 1u);
  EXPECT_EQ(ld.params[0].type.kind, ValueKind::kUnsupported);
  EXPECT_EQ(ld.params[0].type.name, "long double");
  EXPECT_EQ(ld.params[0].type.size, 16u);
  EXPECT_EQ(ld.params[0].type.align, 16u);
  const FunctionSignature& z = fn(info_, "sig_complex");
  ASSERT_EQ(z.params.size(), 1u);
  EXPECT_EQ(z.params[0].type.kind, ValueKind::kUnsupported);
  EXPECT_EQ(z.params[0].type.size, 16u);
  EXPECT_EQ(z.params[0].type.align, 8u);
}

TEST_P(CSignatures, PointersAndStrings) {
  const FunctionSignature& p = fn(info_, "sig_ptr");
  ASSERT_EQ(p.params.size(), 3u);
  expect_scalar(p.params[0].type, ValueKind::kPointer, 8, "void *");
  expect_scalar(p.params[1].type, ValueKind::kPointer, 8, "int *");
  expect_scalar(p.params[2].type, ValueKind::kPointer, 8, "const volatile int *");
  expect_scalar(*p.ret, ValueKind::kPointer, 8, "void *");

  const FunctionSignature& s = fn(info_, "sig_str");
  ASSERT_EQ(s.params.size(), 5u);
  expect_scalar(s.params[0].type, ValueKind::kString, 8, "const char *");
  expect_scalar(s.params[1].type, ValueKind::kString, 8, "char *");
  expect_scalar(s.params[2].type, ValueKind::kString, 8, "unsigned char *");
  expect_scalar(s.params[3].type, ValueKind::kString, 8, "cstr");
  expect_scalar(s.params[4].type, ValueKind::kString, 8, "const char *const");
  expect_scalar(*s.ret, ValueKind::kString, 8, "const char *");

  const FunctionSignature& cb = fn(info_, "sig_fnptr");
  ASSERT_EQ(cb.params.size(), 2u);
  expect_scalar(cb.params[0].type, ValueKind::kPointer, 8, "int (*)(int)");
}

TEST_P(CSignatures, SmallStructsByValue) {
  const FunctionSignature& point = fn(info_, "sig_point");
  ASSERT_EQ(point.params.size(), 1u);
  const ValueType& pt = point.params[0].type;
  expect_scalar(pt, ValueKind::kStruct, 8, "struct point");
  EXPECT_EQ(pt.align, 4u);
  EXPECT_FALSE(pt.opaque);
  ASSERT_EQ(pt.members.size(), 2u);
  expect_member(pt.members[0], "x", 0, ValueKind::kSigned, 4);
  expect_member(pt.members[1], "y", 4, ValueKind::kSigned, 4);
  ASSERT_TRUE(point.ret.has_value());
  EXPECT_EQ(point.ret->members.size(), 2u);

  const FunctionSignature& pair = fn(info_, "sig_pair");
  ASSERT_EQ(pair.params.size(), 1u);
  const ValueType& pr = pair.params[0].type;
  expect_scalar(pr, ValueKind::kStruct, 16, "struct pair");
  EXPECT_EQ(pr.align, 8u);
  ASSERT_EQ(pr.members.size(), 2u);
  expect_member(pr.members[0], "a", 0, ValueKind::kFloat, 8);
  expect_member(pr.members[1], "b", 8, ValueKind::kFloat, 8);

  const FunctionSignature& anon = fn(info_, "sig_anon");
  ASSERT_EQ(anon.params.size(), 1u);
  expect_scalar(anon.params[0].type, ValueKind::kStruct, 4, "anon_t");
  ASSERT_EQ(anon.params[0].type.members.size(), 2u);
  expect_member(anon.params[0].type.members[1], "c", 2, ValueKind::kChar, 1);
}

TEST_P(CSignatures, BigNestedAndArrayStructsAreFlattened) {
  const FunctionSignature& big = fn(info_, "sig_big");
  ASSERT_EQ(big.params.size(), 1u);
  const ValueType& b = big.params[0].type;
  expect_scalar(b, ValueKind::kStruct, 32, "struct big");
  ASSERT_EQ(b.members.size(), 11u);  // a, b, c and tag[0..7]
  expect_member(b.members[2], "c", 16, ValueKind::kSigned, 8);
  expect_member(b.members[3], "tag[0]", 24, ValueKind::kChar, 1);
  expect_member(b.members[10], "tag[7]", 31, ValueKind::kChar, 1);
  EXPECT_EQ(big.ret->size, 32u);

  const FunctionSignature& rect = fn(info_, "sig_rect");
  ASSERT_EQ(rect.params.size(), 1u);
  const ValueType& r = rect.params[0].type;
  ASSERT_EQ(r.members.size(), 4u);
  expect_member(r.members[0], "lo.x", 0, ValueKind::kSigned, 4);
  expect_member(r.members[3], "hi.y", 12, ValueKind::kSigned, 4);

  const FunctionSignature& mixed = fn(info_, "sig_mixed");
  ASSERT_EQ(mixed.params.size(), 1u);
  const ValueType& m = mixed.params[0].type;
  expect_scalar(m, ValueKind::kStruct, 32, "struct mixed");
  EXPECT_EQ(m.align, 8u);
  ASSERT_EQ(m.members.size(), 6u);
  expect_member(m.members[0], "u8", 0, ValueKind::kUnsigned, 1);
  expect_member(m.members[1], "i16", 2, ValueKind::kSigned, 2);
  expect_member(m.members[2], "c", 4, ValueKind::kEnum, 4);
  EXPECT_EQ(m.members[2].enumerators.size(), 3u);
  expect_member(m.members[3], "label", 8, ValueKind::kString, 8);
  expect_member(m.members[4], "f", 16, ValueKind::kFloat, 4);
  expect_member(m.members[5], "p", 24, ValueKind::kPointer, 8);

  const FunctionSignature& arrays = fn(info_, "sig_arrays");
  ASSERT_EQ(arrays.params.size(), 1u);
  const ValueType& a = arrays.params[0].type;
  ASSERT_EQ(a.members.size(), 11u);  // v[3], pts[2] of two ints, name[4]
  expect_member(a.members[2], "v[2]", 8, ValueKind::kSigned, 4);
  expect_member(a.members[3], "pts[0].x", 12, ValueKind::kSigned, 4);
  expect_member(a.members[6], "pts[1].y", 24, ValueKind::kSigned, 4);
  expect_member(a.members[10], "name[3]", 31, ValueKind::kChar, 1);

  const FunctionSignature& aligned = fn(info_, "sig_aligned");
  ASSERT_EQ(aligned.params.size(), 1u);
  EXPECT_EQ(aligned.params[0].type.size, 32u);
  EXPECT_EQ(aligned.params[0].type.align, 32u);
}

TEST_P(CSignatures, UnionsBitfieldsFlexibleAndHugeStructsAreOpaque) {
  const FunctionSignature& o = fn(info_, "sig_opaque");
  ASSERT_EQ(o.params.size(), 2u);
  for (const Param& p : o.params) {
    EXPECT_EQ(p.type.kind, ValueKind::kStruct) << p.name;
    EXPECT_TRUE(p.type.opaque) << p.name;
    EXPECT_TRUE(p.type.members.empty()) << p.name;
    EXPECT_EQ(p.type.size, 8u) << p.name;
    EXPECT_EQ(p.type.align, 4u) << p.name;
  }
  const FunctionSignature& flex = fn(info_, "sig_flex");
  ASSERT_EQ(flex.params.size(), 1u);
  EXPECT_TRUE(flex.params[0].type.opaque);
  EXPECT_EQ(flex.params[0].type.size, 8u);
  const FunctionSignature& huge = fn(info_, "sig_huge");
  ASSERT_EQ(huge.params.size(), 1u);
  EXPECT_TRUE(huge.params[0].type.opaque);
  EXPECT_EQ(huge.params[0].type.size, 400u);
  // A union parameter: named, placed by size, not shown.
  const FunctionSignature& u = fn(info_, "sig_union");
  ASSERT_EQ(u.params.size(), 1u);
  expect_scalar(u.params[0].type, ValueKind::kUnsupported, 4, "union number");
  EXPECT_EQ(u.params[0].type.align, 4u);
}

TEST_P(CSignatures, ManyParametersVariadicAndVoid) {
  const FunctionSignature& many = fn(info_, "sig_many");
  ASSERT_EQ(many.params.size(), 10u);
  EXPECT_EQ(many.params[0].name, "a");
  EXPECT_EQ(many.params[9].name, "j");
  EXPECT_EQ(many.params[9].type.kind, ValueKind::kSigned);
  EXPECT_EQ(many.params[9].type.size, 8u);
  EXPECT_EQ(many.params[9].type.name, GetParam().gcc ? "long int" : "long");
  EXPECT_FALSE(many.variadic);

  const FunctionSignature& v = fn(info_, "sig_variadic");
  EXPECT_TRUE(v.variadic);
  ASSERT_EQ(v.params.size(), 1u);
  EXPECT_EQ(v.params[0].name, "fmt");
  EXPECT_EQ(v.params[0].type.kind, ValueKind::kString);

  const FunctionSignature& vd = fn(info_, "sig_void");
  EXPECT_TRUE(vd.params.empty());
  EXPECT_FALSE(vd.ret.has_value());
}

TEST_P(CSignatures, ClonesWithTheirOwnConventionAreMarked) {
  if (GetParam().gcc) {
    // The fixture is only a test of this if GCC did clone them.
    ASSERT_TRUE(has_symbol(path_, "scale.constprop.0")) << "GCC did not clone scale()";
    ASSERT_TRUE(has_symbol(path_, "read_field.isra.0")) << "GCC did not clone read_field()";
    EXPECT_TRUE(fn(info_, "scale").abi_changed) << "scale.constprop.0";
    EXPECT_TRUE(fn(info_, "read_field").abi_changed) << "read_field.isra.0";
  } else {
    // clang keeps the name and says DW_CC_nocall when it drops arguments.
    EXPECT_TRUE(fn(info_, "scale").abi_changed) << "DW_AT_calling_convention DW_CC_nocall";
  }
  EXPECT_FALSE(fn(info_, "sig_scale_a").abi_changed);
}

TEST_P(CSignatures, HotColdSplitFunctionsAtTheirHotEntry) {
  if (GetParam().gcc && GetParam().char_is_signed) {
    ASSERT_TRUE(has_symbol(path_, "sig_cold.cold")) << "GCC did not split sig_cold";
  }
  const FunctionSignature& cold = fn(info_, "sig_cold");
  const std::vector<uint8_t> bytes = read_bytes(path_);
  auto image = ElfImage::parse(bytes);
  ASSERT_TRUE(image.ok());
  const ElfSymbol* sym = image->function_at(cold.entry);
  ASSERT_NE(sym, nullptr);
  EXPECT_EQ(sym->name, "sig_cold");
  ASSERT_EQ(cold.params.size(), 1u);
  EXPECT_FALSE(cold.abi_changed);
}

TEST_P(CSignatures, TheSameFromMemory) {
  const std::vector<uint8_t> bytes = read_bytes(path_);
  auto mem = read_debug_info_from_memory(bytes.data(), bytes.size());
  ASSERT_TRUE(mem.ok()) << mem.error().message;
  ASSERT_EQ(mem->functions.size(), info_.functions.size());
  for (size_t i = 0; i < info_.functions.size(); ++i) {
    EXPECT_EQ(mem->functions[i].name, info_.functions[i].name);
    EXPECT_EQ(mem->functions[i].entry, info_.functions[i].entry);
    EXPECT_EQ(mem->functions[i].params.size(), info_.functions[i].params.size());
    EXPECT_EQ(mem->functions[i].abi_changed, info_.functions[i].abi_changed);
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, CSignatures, ::testing::ValuesIn(c_fixtures()),
                         [](const ::testing::TestParamInfo<CFixture>& info) {
                           std::string name = info.param.file;
                           for (char& c : name) {
                             if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
                           }
                           return name;
                         });

// ============================================================================
// C++
// ============================================================================

std::vector<std::string> cpp_fixtures() {
  std::vector<std::string> out = {"libsigpp_gcc.so", "libsigpp_gcc_types.so"};
  if (FTJIT_SIG_HAVE_CLANG) out.push_back("libsigpp_clang.so");
  return out;
}

class CppSignatures : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    path_ = fixture(GetParam());
    info_ = must_read(path_);
  }
  std::string path_;
  DebugInfo info_;
};

TEST_P(CppSignatures, MethodsHaveAnArtificialThisAndTheirClassInTheName) {
  expect_entries_are_symbols(path_, info_);
  const FunctionSignature& add = fn(info_, "sig::Counter::add");
  ASSERT_EQ(add.params.size(), 2u);
  EXPECT_TRUE(add.params[0].artificial);
  EXPECT_EQ(add.params[0].name, "this");
  EXPECT_EQ(add.params[0].type.kind, ValueKind::kPointer);
  EXPECT_FALSE(add.params[1].artificial);
  EXPECT_EQ(add.params[1].name, "delta");

  const FunctionSignature& twice = fn(info_, "sig::Counter::twice");
  ASSERT_EQ(twice.params.size(), 1u);
  EXPECT_FALSE(twice.params[0].artificial);

  const FunctionSignature& scaled = fn(info_, "sig::Counter::scaled");
  ASSERT_EQ(scaled.params.size(), 3u);
  EXPECT_TRUE(scaled.params[0].artificial);
  expect_scalar(scaled.params[1].type, ValueKind::kPointer, 8, "const Vec2 &");
  ASSERT_TRUE(scaled.ret.has_value());
  expect_scalar(*scaled.ret, ValueKind::kStruct, 8, "Vec2");
  ASSERT_EQ(scaled.ret->members.size(), 2u);
  expect_member(scaled.ret->members[1], "y", 4, ValueKind::kFloat, 4);

  EXPECT_NE(find(info_, "sig_cpp_entry"), nullptr) << "extern \"C\" at the top: no scope";
}

TEST_P(CppSignatures, ReferencesAndUnnamedParameters) {
  const FunctionSignature& r = fn(info_, "sig::by_ref");
  ASSERT_EQ(r.params.size(), 3u);
  expect_scalar(r.params[0].type, ValueKind::kPointer, 8, "int &");
  expect_scalar(r.params[1].type, ValueKind::kPointer, 8, "const Vec2 &");
  expect_scalar(r.params[2].type, ValueKind::kPointer, 8, "Vec2 &&");

  const FunctionSignature& u = fn(info_, "sig::unnamed");
  ASSERT_EQ(u.params.size(), 2u);
  EXPECT_EQ(u.params[0].name, "");
  EXPECT_EQ(u.params[1].name, "b");
}

TEST_P(CppSignatures, ANonTrivialClassIsPassedByReference) {
  const FunctionSignature& t = fn(info_, "sig::tracked_id");
  ASSERT_EQ(t.params.size(), 1u);
  EXPECT_EQ(t.params[0].type.kind, ValueKind::kPointer);
  EXPECT_EQ(t.params[0].type.size, 8u);
  EXPECT_EQ(t.params[0].type.name, "Tracked");
}

TEST_P(CppSignatures, LibraryAndLanguageTypes) {
  // A pointer to member function is two words (Itanium C++ ABI).
  const FunctionSignature& m = fn(info_, "sig::method_ptr");
  ASSERT_EQ(m.params.size(), 2u);
  const ValueType& pmf = m.params[0].type;
  expect_scalar(pmf, ValueKind::kStruct, 16, "int (Counter::*)(int)");
  ASSERT_EQ(pmf.members.size(), 2u);
  expect_member(pmf.members[0], "ptr", 0, ValueKind::kPointer, 8);
  expect_member(pmf.members[1], "adj", 8, ValueKind::kSigned, 8);

  const FunctionSignature& v = fn(info_, "sig::view_size");
  ASSERT_EQ(v.params.size(), 1u);
  const ValueType& view = v.params[0].type;
  EXPECT_EQ(view.kind, ValueKind::kStruct);
  EXPECT_EQ(view.size, 16u);
  ASSERT_EQ(view.members.size(), 2u);
  expect_member(view.members[0], "_M_len", 0, ValueKind::kUnsigned, 8);
  expect_member(view.members[1], "_M_str", 8, ValueKind::kString, 8);

  const FunctionSignature& c = fn(info_, "sig::utf16");
  ASSERT_EQ(c.params.size(), 2u);
  expect_scalar(c.params[0].type, ValueKind::kUnsigned, 2, "char16_t");
  expect_scalar(c.params[1].type, ValueKind::kSigned, 4, "wchar_t");
}

INSTANTIATE_TEST_SUITE_P(Fixtures, CppSignatures, ::testing::ValuesIn(cpp_fixtures()),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           std::string name = info.param;
                           for (char& c : name) {
                             if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
                           }
                           return name;
                         });

// ============================================================================
// Separate debug files
// ============================================================================

// A fresh directory for one test, removed after it.
class SeparateDebugInfo : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "ftjit-dwarf-XXXXXX").string();
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    original_ = fixture("libsig_gcc.so");
    expected_ = must_read(original_);
  }
  void TearDown() override {
    std::error_code ec;
    if (!dir_.empty()) fs::remove_all(dir_, ec);
  }

  // `dir`/libsig.so without its DWARF (symbols kept), and the DWARF alone
  // in `debug`; from `from` (default: the GCC fixture).
  void split(const fs::path& dir, const fs::path& debug, bool debuglink, std::string from = "") {
    if (from.empty()) from = original_;
    fs::create_directories(dir);
    fs::create_directories(debug.parent_path());
    const fs::path lib = dir / "libsig.so";
    run(std::string(FTJIT_SIG_OBJCOPY) + " --only-keep-debug " + from + " " + debug.string());
    run(std::string(FTJIT_SIG_STRIP) + " --strip-debug -o " + lib.string() + " " + from);
    if (debuglink) {
      // objcopy reads the debug file for its CRC and records its base name.
      run(std::string(FTJIT_SIG_OBJCOPY) + " --add-gnu-debuglink=" + debug.string() + " " + lib.string());
    }
  }

  // The build-id of the original, in hex.
  std::string build_id() {
    const fs::path note = dir_ / "build-id.note";
    run(std::string(FTJIT_SIG_OBJCOPY) + " -O binary --only-section=.note.gnu.build-id " + original_ + " " +
        note.string());
    const std::vector<uint8_t> b = read_bytes(note.string());
    EXPECT_GT(b.size(), 16u);
    std::string hex;
    char buf[3];
    for (size_t i = 16; i < b.size(); ++i) {
      std::snprintf(buf, sizeof buf, "%02x", b[i]);
      hex += buf;
    }
    return hex;
  }

  void expect_same_functions(const DebugInfo& got) {
    ASSERT_EQ(got.functions.size(), expected_.functions.size());
    for (size_t i = 0; i < got.functions.size(); ++i) {
      EXPECT_EQ(got.functions[i].name, expected_.functions[i].name);
      EXPECT_EQ(got.functions[i].entry, expected_.functions[i].entry);
      EXPECT_EQ(got.functions[i].params.size(), expected_.functions[i].params.size());
    }
  }

  fs::path dir_;
  std::string original_;
  DebugInfo expected_;
};

TEST_F(SeparateDebugInfo, DebuglinkBesideTheFile) {
  split(dir_ / "lib", dir_ / "lib" / "libsig.so.debug", true);
  const std::string lib = (dir_ / "lib" / "libsig.so").string();
  const DebugInfo info = must_read(lib);
  EXPECT_EQ(info.source, "debuglink: " + (dir_ / "lib" / "libsig.so.debug").string());
  expect_same_functions(info);
  expect_entries_are_symbols(lib, info);
}

TEST_F(SeparateDebugInfo, DebuglinkInDotDebug) {
  split(dir_ / "lib", dir_ / "lib" / ".debug" / "libsig.so.debug", true);
  const DebugInfo info = must_read((dir_ / "lib" / "libsig.so").string());
  EXPECT_EQ(info.source, "debuglink: " + (dir_ / "lib" / ".debug" / "libsig.so.debug").string());
  expect_same_functions(info);
}

TEST_F(SeparateDebugInfo, WithoutBuildIdTheDebuglinkCrcMustMatch) {
  const std::string noid = fixture("libsig_gcc_noid.so");
  split(dir_ / "lib", dir_ / "lib" / "libsig.so.debug", true, noid);
  const std::string lib = (dir_ / "lib" / "libsig.so").string();
  const DebugInfo info = must_read(lib);
  EXPECT_EQ(info.source, "debuglink: " + (dir_ / "lib" / "libsig.so.debug").string());
  EXPECT_EQ(info.functions.size(), must_read(noid).functions.size());

  // A stale debug file under the same name (another build's) is refused.
  run(std::string(FTJIT_SIG_OBJCOPY) + " --only-keep-debug " + fixture("libsigpp_gcc.so") + " " +
      (dir_ / "lib" / "libsig.so.debug").string());
  auto stale = read_debug_info(lib);
  ASSERT_FALSE(stale.ok());
  EXPECT_EQ(stale.error().code, kNoDebugInfo);
  EXPECT_NE(stale.error().message.find("it has no build-id"), std::string::npos) << stale.error().message;
  EXPECT_NE(stale.error().message.find("libsig.so.debug in " + (dir_ / "lib").string()), std::string::npos)
      << stale.error().message;
}

TEST_F(SeparateDebugInfo, DebuglinkUnderTheRootsDebugDirectory) {
  // ROOT/usr/lib/libsig.so -> ROOT/usr/lib/debug/usr/lib/libsig.so.debug
  const fs::path root = dir_ / "root";
  split(root / "usr" / "lib", root / "usr" / "lib" / "debug" / "usr" / "lib" / "libsig.so.debug", true);
  const DebugInfo info = must_read((root / "usr" / "lib" / "libsig.so").string(), root.string());
  EXPECT_EQ(info.source,
            "debuglink: " + (root / "usr" / "lib" / "debug" / "usr" / "lib" / "libsig.so.debug").string());
  expect_same_functions(info);
}

TEST_F(SeparateDebugInfo, BuildIdUnderTheRoot) {
  const std::string id = build_id();
  ASSERT_GE(id.size(), 4u);
  const fs::path root = dir_ / "root";
  const fs::path debug = root / "usr" / "lib" / "debug" / ".build-id" / id.substr(0, 2) / (id.substr(2) + ".debug");
  split(dir_ / "elsewhere", debug, false);  // no debuglink: found by build-id only
  const std::string lib = (dir_ / "elsewhere" / "libsig.so").string();

  const DebugInfo info = must_read(lib, root.string() + "/");
  EXPECT_EQ(info.source, "build-id: " + debug.string());
  expect_same_functions(info);
  expect_entries_are_symbols(lib, info);

  // Without the root the debug file is out of reach; the message says
  // what was looked for.
  auto none = read_debug_info(lib);
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.error().code, kNoDebugInfo);
  EXPECT_NE(none.error().message.find("no DWARF in " + lib), std::string::npos) << none.error().message;
  EXPECT_NE(none.error().message.find("/usr/lib/debug/.build-id/" + id.substr(0, 2) + "/" + id.substr(2) + ".debug"),
            std::string::npos)
      << none.error().message;
}

TEST_F(SeparateDebugInfo, NoDwarfAnywhere) {
  fs::create_directories(dir_ / "lib");
  const std::string lib = (dir_ / "lib" / "libsig.so").string();
  run(std::string(FTJIT_SIG_STRIP) + " --strip-debug -o " + lib + " " + original_);
  auto info = read_debug_info(lib, dir_.string());
  ASSERT_FALSE(info.ok());
  EXPECT_EQ(info.error().code, kNoDebugInfo);
  EXPECT_NE(info.error().message.find("nor in a debug file found by build-id or .gnu_debuglink"), std::string::npos)
      << info.error().message;
  const std::vector<uint8_t> bytes = read_bytes(lib);
  auto mem = read_debug_info_from_memory(bytes.data(), bytes.size());
  ASSERT_FALSE(mem.ok());
  EXPECT_EQ(mem.error().code, kNoDebugInfo);
}

TEST_F(SeparateDebugInfo, UnreadableAndForeignFiles) {
  auto missing = read_debug_info((dir_ / "missing.so").string());
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().code, FTJIT_E_SYSTEM);
  EXPECT_NE(missing.error().message.find("missing.so"), std::string::npos);

  const fs::path text = dir_ / "notes.txt";
  std::ofstream(text) << "not an ELF file\n";
  auto not_elf = read_debug_info(text.string());
  ASSERT_FALSE(not_elf.ok());
  EXPECT_EQ(not_elf.error().code, FTJIT_E_ELF);
  EXPECT_NE(not_elf.error().message.find("is not an ELF file"), std::string::npos) << not_elf.error().message;

  auto directory = read_debug_info(dir_.string());
  ASSERT_FALSE(directory.ok());
  EXPECT_EQ(directory.error().code, FTJIT_E_ELF);

  auto colon = read_debug_info(original_, "/some:root");
  ASSERT_FALSE(colon.ok());
  EXPECT_EQ(colon.error().code, FTJIT_E_INVALID_ARGUMENT);

  const std::string junk = "\x7f" "ELF and then nothing an ELF reader can use";
  auto mem = read_debug_info_from_memory(reinterpret_cast<const uint8_t*>(junk.data()), junk.size());
  EXPECT_FALSE(mem.ok());
  auto empty = read_debug_info_from_memory(nullptr, 0);
  EXPECT_FALSE(empty.ok());
}

// This machine's libc: its debug file when installed (libc6-dbg), else the
// no-DWARF error; either way quickly.
TEST(SystemLibc, ReadOrNoDwarf) {
  const std::string libc = "/lib/x86_64-linux-gnu/libc.so.6";
  if (!fs::exists(libc)) GTEST_SKIP() << libc << " not here";
  const auto start = std::chrono::steady_clock::now();
  auto info = read_debug_info(libc);
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  if (info.ok()) {
    std::printf("libc: %zu functions from %s in %.0f ms\n", info->functions.size(), info->source.c_str(), ms);
    EXPECT_NE(find(*info, "setlocale"), nullptr);
    EXPECT_NE(info->source, "the file itself");
  } else {
    std::printf("libc: %s (%.0f ms)\n", info.error().message.c_str(), ms);
    EXPECT_EQ(info.error().code, kNoDebugInfo) << info.error().message;
  }
  EXPECT_LT(ms, 5000);
}

// ============================================================================
// Broken DWARF, in memory
// ============================================================================

class CorruptDwarf : public ::testing::Test {
 protected:
  void SetUp() override {
    bytes_ = read_bytes(fixture("libsig_gcc.so"));
    auto image = ElfImage::parse(bytes_);
    ASSERT_TRUE(image.ok());
    for (const ElfImage::DebugSection& s : image->debug_sections()) {
      if (s.name == ".debug_info") info_ = s;
      if (s.name == ".debug_abbrev") abbrev_ = s;
      if (s.name == ".debug_str") str_ = s;
    }
    ASSERT_GT(info_.size, 0u);
    ASSERT_GT(abbrev_.size, 0u);
  }

  // What a result may hold, whatever the input: the bounds the reader
  // promises.
  static void expect_sane(const Result<DebugInfo>& r) {
    if (!r.ok()) {
      EXPECT_FALSE(r.error().message.empty());
      return;
    }
    for (size_t i = 0; i < r->functions.size(); ++i) {
      const FunctionSignature& f = r->functions[i];
      if (i > 0) {
        ASSERT_LT(r->functions[i - 1].entry, f.entry);
      }
      ASSERT_LE(f.name.size(), 2048u);
      for (const Param& p : f.params) {
        ASSERT_LE(p.type.members.size(), 64u);
        ASSERT_LE(p.type.enumerators.size(), 4096u);
        ASSERT_LE(p.type.name.size(), 256u);
        ASSERT_NE(p.type.kind, ValueKind{0});
        for (const Member& m : p.type.members) {
          ASSERT_NE(m.kind, ValueKind::kStruct);
          ASSERT_LE(m.offset + uint64_t{m.size}, uint64_t{1} << 32);
        }
      }
    }
  }

  std::vector<uint8_t> bytes_;
  ElfImage::DebugSection info_, abbrev_, str_;
};

TEST_F(CorruptDwarf, RandomBytesInTheDebugSections) {
  std::mt19937 rng(11);
  int ok = 0;
  for (int round = 0; round < 3000; ++round) {
    std::vector<uint8_t> b = bytes_;
    // Mostly .debug_info; now and then the abbreviations and strings it uses.
    const ElfImage::DebugSection& s = round % 5 == 3 ? abbrev_ : round % 7 == 5 && str_.size ? str_ : info_;
    for (int k = 0; k < 1 + round % 8; ++k) b[s.offset + rng() % s.size] = static_cast<uint8_t>(rng());
    auto r = read_debug_info_from_memory(b.data(), b.size());
    expect_sane(r);
    ok += r.ok();
  }
  // Most flips hit bytes whose change leaves the DWARF readable.
  EXPECT_GT(ok, 100);
}

TEST_F(CorruptDwarf, CutAnywhere) {
  // The file ends inside .debug_info, at every few bytes of it, and at
  // random places elsewhere.
  std::mt19937 rng(5);
  std::vector<uint64_t> cuts;
  for (uint64_t at = info_.offset; at < info_.offset + info_.size; at += 1 + info_.size / 400) cuts.push_back(at);
  for (int i = 0; i < 300; ++i) cuts.push_back(rng() % bytes_.size());
  for (uint64_t cut : cuts) {
    auto r = read_debug_info_from_memory(bytes_.data(), cut);
    expect_sane(r);
  }
  // A .debug_info whose length fields say more than there is.
  std::vector<uint8_t> b = bytes_;
  b[info_.offset] = 0xf0;
  b[info_.offset + 1] = 0xff;
  b[info_.offset + 2] = 0xff;
  b[info_.offset + 3] = 0x7f;
  expect_sane(read_debug_info_from_memory(b.data(), b.size()));
}

}  // namespace
}  // namespace ftjit
