// SPDX-License-Identifier: MIT
// ElfImage tests: fixture binaries from gcc and clang, synthetic files, and malformed input.
#include "core/elf_image.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <functional>
#include <memory>
#include <random>
#include <set>

#include "discovery_fixtures.h"

namespace ftjit {
namespace {

using testing::ElfWriter;
using testing::Fixture;
using testing::FixtureKind;
using testing::TrustedElf;
using testing::poke;
using testing::as_span;
using testing::read_file;

constexpr uint8_t kNop1 = 0x90;  // nop
// clang emits the part of the sled at the entry as one 5-byte NOP,
// nopl disp8(%rax,%rax,1). clang-14 writes disp8 = 8, newer releases 0.
constexpr uint8_t kNopl5Prefix[] = {0x0f, 0x1f, 0x44, 0x00};

// ============================================================================
// Fixture binaries
// ============================================================================

class ElfImageFixtureTest : public ::testing::TestWithParam<Fixture> {
 protected:
  void SetUp() override {
    if (!testing::file_exists(GetParam().path())) {
      if (GetParam().kind == FixtureKind::kStripped) GTEST_SKIP() << "no strip tool";
      FAIL() << "fixture missing: " << GetParam().path();
    }
    bytes_ = read_file(GetParam().path());
    auto img = ElfImage::parse(as_span(bytes_));
    ASSERT_TRUE(img.ok()) << img.error().message;
    img_ = std::move(img.value());
  }

  const ElfSymbol* symbol_named(const std::string& name) const {
    for (const auto& s : img_.functions()) {
      if (s.name == name) return &s;
    }
    return nullptr;
  }

  std::vector<uint8_t> bytes_;
  ElfImage img_;
};

TEST_P(ElfImageFixtureTest, HeadersDescribeAnX86PieOrSharedObject) {
  EXPECT_EQ(img_.isa(), Isa::kX86_64);
  EXPECT_TRUE(img_.is_dynamic());
  EXPECT_TRUE(img_.has_patchable_section());
  ASSERT_FALSE(img_.load_segments().empty());
  EXPECT_TRUE(std::any_of(img_.load_segments().begin(), img_.load_segments().end(),
                          [](const ElfImage::Segment& s) { return (s.flags & PF_X) != 0; }));
}

TEST_P(ElfImageFixtureTest, OneRecordPerPatchableFunctionOfTheSource) {
  const auto& records = img_.patchable_records();
  EXPECT_EQ(records.size(), testing::expected_functions(GetParam()).size());
  EXPECT_TRUE(std::is_sorted(records.begin(), records.end()));
  EXPECT_EQ(std::adjacent_find(records.begin(), records.end()), records.end());
}

TEST_P(ElfImageFixtureTest, EveryNamedFunctionHasItsRecordBeforeTheEntry) {
  const auto& records = img_.patchable_records();
  for (const auto& fn : testing::expected_functions(GetParam())) {
    if (GetParam().kind == FixtureKind::kStripped && !fn.exported) {
      EXPECT_EQ(symbol_named(fn.name), nullptr) << fn.name << " survived --strip-all";
      continue;
    }
    const ElfSymbol* sym = symbol_named(fn.name);
    ASSERT_NE(sym, nullptr) << fn.name;
    EXPECT_TRUE(std::binary_search(records.begin(), records.end(),
                                   sym->value - GetParam().prefix_bytes))
        << fn.name << " at " << std::hex << sym->value;
  }
  const ElfSymbol* opted_out = symbol_named(testing::kOptedOut);
  if (opted_out != nullptr) {
    for (uint64_t r : records) {
      EXPECT_FALSE(r <= opted_out->value && opted_out->value - r <= 16)
          << "record " << std::hex << r << " belongs to " << testing::kOptedOut;
    }
  }
}

TEST_P(ElfImageFixtureTest, FunctionsAreSortedAndAliasTiesPreferTheGlobal) {
  const auto& fns = img_.functions();
  EXPECT_TRUE(std::is_sorted(fns.begin(), fns.end(), [](const ElfSymbol& a, const ElfSymbol& b) {
    return a.value < b.value;
  }));
  const ElfSymbol* alias = symbol_named("fx_add_alias");  // WEAK, same address as fx_add
  ASSERT_NE(alias, nullptr);
  const ElfSymbol* at = img_.function_at(alias->value);
  ASSERT_NE(at, nullptr);
  EXPECT_EQ(at->name, "fx_add");
  EXPECT_EQ(img_.function_at(alias->value + 1), nullptr);
}

// TOOLCHAIN.md Q4: GCC fills the whole sled with 1-byte NOPs; clang emits
// 1-byte NOPs before the entry and one multi-byte NOP at it.
TEST_P(ElfImageFixtureTest, SledBytesAreWhatTheCompilerEmits) {
  TrustedElf elf(bytes_);
  const Fixture& f = GetParam();
  for (uint64_t record : img_.patchable_records()) {
    auto off = elf.file_offset(record);
    ASSERT_TRUE(off.has_value()) << std::hex << record;
    ASSERT_LE(*off + f.sled_bytes, bytes_.size());
    const uint8_t* sled = bytes_.data() + *off;
    SCOPED_TRACE(::testing::Message() << f.compiler << " record 0x" << std::hex << record);
    if (!f.is_clang()) {
      for (uint32_t i = 0; i < f.sled_bytes; ++i) EXPECT_EQ(sled[i], kNop1) << "byte " << i;
      continue;
    }
    for (uint32_t i = 0; i < f.prefix_bytes; ++i) EXPECT_EQ(sled[i], kNop1) << "byte " << i;
    const uint8_t* entry = sled + f.prefix_bytes;
    EXPECT_TRUE(std::equal(std::begin(kNopl5Prefix), std::end(kNopl5Prefix), entry));
    EXPECT_TRUE(entry[4] == 0x00 || entry[4] == 0x08) << "disp8 " << int{entry[4]};
  }
}

// In a PIE or .so every record word has an R_X86_64_RELATIVE whose addend
// is the address. GNU ld on x86-64 also writes that value into the word,
// but lld and GNU ld on arm64 leave 0 there: records must survive zeroed
// words, which proves they are read from .rela.dyn.
TEST_P(ElfImageFixtureTest, RecordsComeFromRelocationsWhenWordsAreZero) {
  TrustedElf elf(bytes_);
  auto index = elf.find_section("__patchable_function_entries");
  ASSERT_TRUE(index.has_value());
  const auto sh = elf.section(*index);
  auto zeroed = bytes_;
  std::fill(zeroed.begin() + static_cast<ptrdiff_t>(sh.sh_offset),
            zeroed.begin() + static_cast<ptrdiff_t>(sh.sh_offset + sh.sh_size), 0);
  auto img = ElfImage::parse(as_span(zeroed));
  ASSERT_TRUE(img.ok()) << img.error().message;
  EXPECT_EQ(img->patchable_records(), img_.patchable_records());

  // Without the relocations too, every record is a 0 word and is dropped.
  auto rela = elf.find_section(".rela.dyn");
  ASSERT_TRUE(rela.has_value());
  poke<uint32_t>(zeroed, elf.section_header_offset(*rela) + offsetof(Elf64_Shdr, sh_type),
                 SHT_PROGBITS);
  auto bare = ElfImage::parse(as_span(zeroed));
  ASSERT_TRUE(bare.ok()) << bare.error().message;
  EXPECT_TRUE(bare->has_patchable_section());
  EXPECT_TRUE(bare->patchable_records().empty());
}

INSTANTIATE_TEST_SUITE_P(Fixtures, ElfImageFixtureTest,
                         ::testing::ValuesIn(testing::sled_fixtures()),
                         [](const auto& p) { return testing::fixture_test_name(p.param); });

TEST(ElfImageTest, LibraryWithoutTheFlagHasNoSection) {
  auto bytes = read_file(std::string(FTJIT_FIXTURE_DIR) + "/libfx_noflag.so");
  ASSERT_FALSE(bytes.empty());
  auto img = ElfImage::parse(as_span(bytes));
  ASSERT_TRUE(img.ok()) << img.error().message;
  EXPECT_FALSE(img->has_patchable_section());
  EXPECT_TRUE(img->patchable_records().empty());
  EXPECT_FALSE(img->functions().empty());
}

TEST(ElfImageTest, OptedOutFunctionHasNoRecord) {
  std::vector<std::string> compilers = {"gcc"};
  if (FTJIT_FIXTURE_HAVE_CLANG) compilers.push_back("clang");
  for (const auto& cc : compilers) {
    SCOPED_TRACE(cc);
    auto bytes = read_file(std::string(FTJIT_FIXTURE_DIR) + "/libfx_optout_" + cc + ".so");
    ASSERT_FALSE(bytes.empty());
    auto img = ElfImage::parse(as_span(bytes));
    ASSERT_TRUE(img.ok()) << img.error().message;
    std::set<std::string> named;
    for (uint64_t r : img->patchable_records()) {
      const ElfSymbol* s = img->function_at(r);
      named.insert(s != nullptr ? std::string(s->name) : "?");
    }
    EXPECT_EQ(named, (std::set<std::string>{"fx_before", "fx_after"}));
  }
}

// ============================================================================
// Synthetic files: paths compilers do not take on this host
// ============================================================================

struct SyntheticLib {
  std::vector<uint8_t> bytes;
  uint64_t text = 0;  // address of the .text contents
};

// .text of NOPs, two record sections, .dynsym/.dynstr, .rela.dyn.
// Records: text+32 (plain word), text+64 (RELATIVE), sym(text+96)+0 (ABS64
// against a symbol), a 0 word with no relocation, text+32 again (in the
// second section), and an address outside every segment.
SyntheticLib synthetic_lib(uint16_t machine, uint32_t relative, uint32_t abs64,
                           bool extended_numbering = false) {
  ElfWriter w;
  const uint64_t text = ElfWriter::kFirstSectionOffset;
  const uint32_t text_index =
      w.add_section({".text", SHT_PROGBITS, SHF_ALLOC | SHF_EXECINSTR, 0, 0, 0, 0,
                     std::vector<uint8_t>(256, 0x90)});
  const uint32_t dynstr = text_index + 4;  // after the two record sections and .dynsym
  const uint64_t patch1 = text + 256;      // laid out right after .text
  w.add_section({"__patchable_function_entries", SHT_PROGBITS, SHF_ALLOC | SHF_WRITE, 0,
                 text_index, 0, 8, ElfWriter::words({text + 32, 0, 0, 0, 0x7fff0000})});
  w.add_section({"__patchable_function_entries", SHT_PROGBITS, SHF_ALLOC | SHF_WRITE, 0,
                 text_index, 0, 8, ElfWriter::words({text + 32})});
  const uint32_t dynsym = w.add_section(
      {".dynsym", SHT_DYNSYM, SHF_ALLOC, 0, dynstr, 1, sizeof(Elf64_Sym),
       ElfWriter::symbols({testing::function_symbol(1, text + 96, text_index),
                           testing::function_symbol(5, 0, SHN_UNDEF)})});
  w.add_section({".dynstr", SHT_STRTAB, SHF_ALLOC, 0, 0, 0, 0,
                 {'\0', 'f', 'o', 'o', '\0', 'e', 'x', 't', '\0'}});
  w.add_section({".rela.dyn", SHT_RELA, SHF_ALLOC, 0, dynsym, 0, sizeof(Elf64_Rela),
                 ElfWriter::relas({
                     {patch1 + 8, ELF64_R_INFO(0, relative), static_cast<int64_t>(text + 64)},
                     {patch1 + 16, ELF64_R_INFO(1, abs64), 0},
                     // Undefined symbol: resolves elsewhere, the 0 word stays.
                     {patch1 + 24, ELF64_R_INFO(2, abs64), 0},
                 })});
  auto bytes = w.build(extended_numbering);
  poke<uint16_t>(bytes, offsetof(Elf64_Ehdr, e_machine), machine);
  return {bytes, text};
}

TEST(ElfImageSyntheticTest, RecordsResolveWordsRelocationsAndSymbolsForEveryIsa) {
  struct Case { uint16_t machine; Isa isa; uint32_t relative, abs64; };
  for (const auto& c : {Case{EM_X86_64, Isa::kX86_64, R_X86_64_RELATIVE, R_X86_64_64},
                        Case{EM_AARCH64, Isa::kArm64, R_AARCH64_RELATIVE, R_AARCH64_ABS64},
                        Case{EM_RISCV, Isa::kRiscv64, R_RISCV_RELATIVE, R_RISCV_64}}) {
    SCOPED_TRACE(isa_name(c.isa));
    auto lib = synthetic_lib(c.machine, c.relative, c.abs64);
    auto img = ElfImage::parse(as_span(lib.bytes));
    ASSERT_TRUE(img.ok()) << img.error().message;
    EXPECT_EQ(img->isa(), c.isa);
    EXPECT_TRUE(img->has_patchable_section());
    EXPECT_EQ(std::vector<uint64_t>(img->patchable_records().begin(), img->patchable_records().end()),
              (std::vector<uint64_t>{lib.text + 32, lib.text + 64, lib.text + 96}));
  }
}

TEST(ElfImageSyntheticTest, ExtendedSectionNumberingIsFollowed) {
  auto lib = synthetic_lib(EM_X86_64, R_X86_64_RELATIVE, R_X86_64_64, true);
  auto img = ElfImage::parse(as_span(lib.bytes));
  ASSERT_TRUE(img.ok()) << img.error().message;
  EXPECT_EQ(img->patchable_records().size(), 3u);
}

TEST(ElfImageSyntheticTest, UnknownMachineParsesWithoutApplyingRelocations) {
  auto lib = synthetic_lib(EM_S390, R_X86_64_RELATIVE, R_X86_64_64);
  auto img = ElfImage::parse(as_span(lib.bytes));
  ASSERT_TRUE(img.ok()) << img.error().message;
  EXPECT_EQ(img->isa(), Isa::kUnknown);
  EXPECT_EQ(std::vector<uint64_t>(img->patchable_records().begin(), img->patchable_records().end()),
            (std::vector<uint64_t>{lib.text + 32}));
}

TEST(ElfImageSyntheticTest, SymbolSelectionAndTieOrder) {
  ElfWriter w;
  const uint64_t text = ElfWriter::kFirstSectionOffset;
  w.add_section({".text", SHT_PROGBITS, SHF_ALLOC | SHF_EXECINSTR, 0, 0, 0, 0,
                 std::vector<uint8_t>(64, 0x90)});
  auto sym = [](uint32_t name, uint64_t value, unsigned char bind, unsigned char type,
                uint16_t shndx) {
    Elf64_Sym s = testing::function_symbol(name, value, shndx, bind);
    s.st_info = ELF64_ST_INFO(bind, type);
    return s;
  };
  // .symtab (index 2) wins over .dynsym (index 4); strings in index 3.
  // name offsets: 1 "local", 7 "global", 14 "weak", 19 "ifunc", 25 "object",
  // 32 "undef", 38 "dyn"
  const std::string strings =
      std::string("\0local\0global\0weak\0ifunc\0object\0undef\0dyn\0", 42);
  w.add_section({".symtab", SHT_SYMTAB, 0, 0, 3, 0, sizeof(Elf64_Sym),
                 ElfWriter::symbols({sym(1, text, STB_LOCAL, STT_FUNC, 1),
                                     sym(14, text, STB_WEAK, STT_FUNC, 1),
                                     sym(7, text, STB_GLOBAL, STT_FUNC, 1),
                                     sym(19, text + 16, STB_GLOBAL, STT_GNU_IFUNC, 1),
                                     sym(25, text + 32, STB_GLOBAL, STT_OBJECT, 1),
                                     sym(32, 0, STB_GLOBAL, STT_FUNC, SHN_UNDEF)})});
  w.add_section({".strtab", SHT_STRTAB, 0, 0, 0, 0, 0,
                 std::vector<uint8_t>(strings.begin(), strings.end())});
  w.add_section({".dynsym", SHT_DYNSYM, SHF_ALLOC, 0, 3, 0, sizeof(Elf64_Sym),
                 ElfWriter::symbols({sym(38, text + 48, STB_GLOBAL, STT_FUNC, 1)})});
  auto bytes = w.build();
  auto img = ElfImage::parse(as_span(bytes));
  ASSERT_TRUE(img.ok()) << img.error().message;
  EXPECT_FALSE(img->has_patchable_section());
  std::vector<std::string> names;
  for (const auto& f : img->functions()) names.emplace_back(f.name);
  EXPECT_EQ(names, (std::vector<std::string>{"global", "weak", "local", "ifunc"}));
  ASSERT_NE(img->function_at(text), nullptr);
  EXPECT_EQ(img->function_at(text)->name, "global");
  EXPECT_EQ(img->function_at(text)->size, 16u);
}

TEST(ElfImageSyntheticTest, ManySymbolsSharingOneHugeNameAreRefused) {
  ElfWriter w;
  const uint64_t text = ElfWriter::kFirstSectionOffset;
  w.add_section({".text", SHT_PROGBITS, SHF_ALLOC | SHF_EXECINSTR, 0, 0, 0, 0,
                 std::vector<uint8_t>(16, 0x90)});
  std::vector<uint8_t> symbols(sizeof(Elf64_Sym));
  for (int i = 0; i < 20000; ++i) {
    Elf64_Sym s = testing::function_symbol(1, text, 1);
    const auto* p = reinterpret_cast<const uint8_t*>(&s);
    symbols.insert(symbols.end(), p, p + sizeof s);
  }
  w.add_section({".symtab", SHT_SYMTAB, 0, 0, 3, 0, sizeof(Elf64_Sym), symbols});
  std::vector<uint8_t> strings(1 << 16, 'a');
  strings.front() = 0;
  strings.back() = 0;
  w.add_section({".strtab", SHT_STRTAB, 0, 0, 0, 0, 0, strings});
  auto bytes = w.build();
  auto img = ElfImage::parse(as_span(bytes));
  ASSERT_FALSE(img.ok());
  EXPECT_EQ(img.error().code, FTJIT_E_ELF);
  EXPECT_NE(img.error().message.find("function names total"), std::string::npos)
      << img.error().message;
}

// The names and code windows an image keeps view the bytes it was parsed
// from, which its owner keeps readable; without an owner, a copy of them.
TEST(ElfImageSyntheticTest, NamesViewTheOwnersBytesOrTheImagesCopy) {
  ElfWriter w;
  const uint64_t text = ElfWriter::kFirstSectionOffset;
  w.add_section({".text", SHT_PROGBITS, SHF_ALLOC | SHF_EXECINSTR, 0, 0, 0, 0,
                 std::vector<uint8_t>(64, 0x90)});
  w.add_section({".symtab", SHT_SYMTAB, 0, 0, 3, 0, sizeof(Elf64_Sym),
                 ElfWriter::symbols({testing::function_symbol(1, text, 1),
                                     testing::function_symbol(5, text + 16, 1)})});
  const std::string strings("\0foo\0_Z3barv\0", 13);
  w.add_section({".strtab", SHT_STRTAB, 0, 0, 0, 0, 0, std::vector<uint8_t>(strings.begin(), strings.end())});
  auto owner = std::make_shared<const std::vector<uint8_t>>(w.build());
  const auto* first = owner->data();
  const auto* end = first + owner->size();
  auto inside = [&](std::string_view name) {
    const auto* p = reinterpret_cast<const uint8_t*>(name.data());
    return p >= first && p < end;
  };

  auto viewing = ElfImage::parse(as_span(*owner), owner);
  ASSERT_TRUE(viewing.ok()) << viewing.error().message;
  ASSERT_EQ(viewing->functions().size(), 2u);
  EXPECT_EQ(viewing->functions()[0].name, "foo");
  EXPECT_FALSE(viewing->functions()[0].mangled);
  EXPECT_EQ(viewing->functions()[1].name, "_Z3barv");
  EXPECT_TRUE(viewing->functions()[1].mangled);
  for (const ElfSymbol& f : viewing->functions()) EXPECT_TRUE(inside(f.name)) << f.name;
  EXPECT_EQ(viewing->function_names().get(), owner.get());

  // No owner: the image copies, and outlives the caller's bytes.
  auto bytes = std::make_unique<std::vector<uint8_t>>(*owner);
  auto copying = ElfImage::parse(as_span(*bytes));
  ASSERT_TRUE(copying.ok()) << copying.error().message;
  const auto* caller = bytes->data();
  for (const ElfSymbol& f : copying->functions()) {
    const auto* p = reinterpret_cast<const uint8_t*>(f.name.data());
    EXPECT_TRUE(p < caller || p >= caller + bytes->size()) << f.name << " views the caller's bytes";
  }
  bytes.reset();  // under ASan, a view of them would be a use after free below
  std::vector<std::string> names;
  for (const ElfSymbol& f : copying->functions()) names.emplace_back(f.name);
  EXPECT_EQ(names, (std::vector<std::string>{"foo", "_Z3barv"}));
}

// A record's code window is a view of the file where the file holds all
// of it, and a copy padded with zeros where it does not: past the end of
// its segment's file-backed part, below address 0.
TEST(ElfImageSyntheticTest, CodeWindowsViewTheFileAndPadWhatItDoesNotHold) {
  ElfWriter w;
  const uint64_t text = ElfWriter::kFirstSectionOffset;
  w.add_section({".text", SHT_PROGBITS, SHF_ALLOC | SHF_EXECINSTR, 0, 0, 0, 0,
                 std::vector<uint8_t>(256, 0x90)});
  w.add_section({"__patchable_function_entries", SHT_PROGBITS, SHF_ALLOC | SHF_WRITE, 0, 1, 0, 8,
                 ElfWriter::words({text + 200, 4, text + 64})});
  auto built = w.build();
  // The one PT_LOAD (vaddr 0, offset 0) holds the file up to text + 210 only.
  poke<uint64_t>(built, sizeof(Elf64_Ehdr) + offsetof(Elf64_Phdr, p_filesz), text + 210);
  auto owner = std::make_shared<const std::vector<uint8_t>>(std::move(built));
  auto img = ElfImage::parse(as_span(*owner), owner);
  ASSERT_TRUE(img.ok()) << img.error().message;
  ASSERT_EQ(std::vector<uint64_t>(img->patchable_records().begin(), img->patchable_records().end()),
            (std::vector<uint64_t>{4, text + 64, text + 200}));
  constexpr size_t kWindow = ElfImage::kCodeWindowBytes;
  constexpr size_t kBefore = ElfImage::kCodeBeforeRecord;
  const std::vector<uint8_t>& file = *owner;

  // Record 4: the window starts 4 bytes below address 0.
  auto low = img->code_near_record(0);
  ASSERT_EQ(low.size(), kWindow);
  std::vector<uint8_t> want(kBefore - 4, 0);
  want.insert(want.end(), file.begin(), file.begin() + (kWindow - want.size()));
  EXPECT_EQ(std::vector<uint8_t>(low.begin(), low.end()), want);

  // Held whole: the file's own bytes.
  auto whole = img->code_near_record(1);
  ASSERT_EQ(whole.size(), kWindow);
  EXPECT_EQ(whole.data(), file.data() + text + 64 - kBefore);

  // Past text + 210: zeros.
  auto tail = img->code_near_record(2);
  ASSERT_EQ(tail.size(), kWindow);
  want.assign(18, 0x90);  // [text + 192, text + 210)
  want.resize(kWindow, 0);
  EXPECT_EQ(std::vector<uint8_t>(tail.begin(), tail.end()), want);
}

// ============================================================================
// Malformed input
// ============================================================================

void expect_elf_error(std::span<const uint8_t> bytes, const std::string& needle) {
  auto img = ElfImage::parse(bytes);
  ASSERT_FALSE(img.ok()) << "parsed; expected an error containing '" << needle << "'";
  EXPECT_EQ(img.error().code, FTJIT_E_ELF);
  EXPECT_NE(img.error().message.find(needle), std::string::npos) << img.error().message;
}

class ElfImageErrorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    bytes_ = read_file(std::string(FTJIT_FIXTURE_DIR) + "/libfx_gcc_p5.so");
    ASSERT_FALSE(bytes_.empty());
  }
  std::vector<uint8_t> bytes_;
};

TEST_F(ElfImageErrorTest, EmptyShortAndForeignFiles) {
  expect_elf_error({}, "too short");
  expect_elf_error(std::span(bytes_).first(40), "truncated inside the ELF header");
  const std::string text = "#!/bin/sh\necho this is not an ELF file\n";
  expect_elf_error({reinterpret_cast<const uint8_t*>(text.data()), text.size()}, "not an ELF");

  auto elf32 = bytes_;
  elf32[EI_CLASS] = ELFCLASS32;
  expect_elf_error(as_span(elf32), "ELF32");
  auto big = bytes_;
  big[EI_DATA] = ELFDATA2MSB;
  expect_elf_error(as_span(big), "big-endian");
  auto rel = bytes_;
  poke<uint16_t>(rel, offsetof(Elf64_Ehdr, e_type), ET_REL);
  expect_elf_error(as_span(rel), "not an executable or shared object");
}

// The section header table is the last thing in a linked file, so every
// proper prefix of it must be refused.
TEST_F(ElfImageErrorTest, EveryTruncationIsAnError) {
  std::vector<size_t> lengths;
  for (size_t n = 0; n < 512; ++n) lengths.push_back(n);
  for (size_t n = 512; n < bytes_.size(); n += 61) lengths.push_back(n);
  for (size_t back : {1, 7, 8, 63, 64, 65}) lengths.push_back(bytes_.size() - back);
  for (size_t n : lengths) {
    auto img = ElfImage::parse(std::span(bytes_).first(n));
    ASSERT_FALSE(img.ok()) << "truncated to " << n << " of " << bytes_.size();
    EXPECT_EQ(img.error().code, FTJIT_E_ELF);
  }
}

TEST_F(ElfImageErrorTest, LyingHeadersAreErrors) {
  TrustedElf elf(bytes_);
  const auto patch = *elf.find_section("__patchable_function_entries");
  const auto symtab = *elf.find_section(".symtab");
  const auto rela = *elf.find_section(".rela.dyn");
  const auto names = elf.ehdr.e_shstrndx;
  auto shdr_field = [&](size_t index, size_t field) {
    return elf.section_header_offset(index) + field;
  };
  struct Case {
    const char* what;
    std::function<void(std::vector<uint8_t>&)> corrupt;
    const char* needle;
  };
  const std::vector<Case> cases = {
      {"sh_offset past EOF",
       [&](auto& b) { poke<uint64_t>(b, shdr_field(patch, offsetof(Elf64_Shdr, sh_offset)),
                                     b.size() - 4); },
       "extends past the end"},
      {"sh_offset + sh_size wraps",
       [&](auto& b) { poke<uint64_t>(b, shdr_field(patch, offsetof(Elf64_Shdr, sh_offset)),
                                     UINT64_MAX - 3); },
       "extends past the end"},
      {"sh_size huge",
       [&](auto& b) { poke<uint64_t>(b, shdr_field(symtab, offsetof(Elf64_Shdr, sh_size)),
                                     UINT64_MAX); },
       "extends past the end"},
      // Found by the fuzzer: SHT_NULL headers are not bounds-checked, so
      // their contents must never be read.
      {"record section of type SHT_NULL pointing past EOF",
       [&](auto& b) {
         poke<uint32_t>(b, shdr_field(patch, offsetof(Elf64_Shdr, sh_type)), SHT_NULL);
         poke<uint64_t>(b, shdr_field(patch, offsetof(Elf64_Shdr, sh_offset)), b.size());
       },
       "has no contents"},
      {"record section size not a multiple of 8",
       [&](auto& b) { poke<uint64_t>(b, shdr_field(patch, offsetof(Elf64_Shdr, sh_size)), 12); },
       "multiple of 8"},
      {"e_shentsize wrong",
       [&](auto& b) { poke<uint16_t>(b, offsetof(Elf64_Ehdr, e_shentsize), 40); },
       "e_shentsize"},
      {"e_shnum huge",
       [&](auto& b) { poke<uint16_t>(b, offsetof(Elf64_Ehdr, e_shnum), 0xfff0); },
       "section header table"},
      {"e_shoff inside the ELF header",
       [&](auto& b) { poke<uint64_t>(b, offsetof(Elf64_Ehdr, e_shoff), 8); },
       "overlaps the ELF header"},
      {"e_shstrndx out of range",
       [&](auto& b) { poke<uint16_t>(b, offsetof(Elf64_Ehdr, e_shstrndx), 0x7fff); },
       "out of range"},
      {"e_phnum huge",
       [&](auto& b) { poke<uint16_t>(b, offsetof(Elf64_Ehdr, e_phnum), 0xfffe); },
       "program header table"},
      {"e_phentsize wrong",
       [&](auto& b) { poke<uint16_t>(b, offsetof(Elf64_Ehdr, e_phentsize), 32); },
       "e_phentsize"},
      {"sh_link out of range",
       [&](auto& b) { poke<uint32_t>(b, shdr_field(symtab, offsetof(Elf64_Shdr, sh_link)),
                                     9999); },
       "sh_link"},
      {"symtab linked to a non-string table",
       [&](auto& b) { poke<uint32_t>(b, shdr_field(symtab, offsetof(Elf64_Shdr, sh_link)),
                                     static_cast<uint32_t>(patch)); },
       "not a string table"},
      {"symtab entsize wrong",
       [&](auto& b) { poke<uint64_t>(b, shdr_field(symtab, offsetof(Elf64_Shdr, sh_entsize)),
                                     16); },
       "sh_entsize"},
      {"rela entsize wrong",
       [&](auto& b) { poke<uint64_t>(b, shdr_field(rela, offsetof(Elf64_Shdr, sh_entsize)),
                                     16); },
       "sh_entsize"},
      {"section name index out of range",
       [&](auto& b) { poke<uint32_t>(b, shdr_field(1, offsetof(Elf64_Shdr, sh_name)),
                                     0x7fffffff); },
       "outside its string table"},
      {"section names not terminated",
       [&](auto& b) {
         const auto sh = elf.section(names);
         b[sh.sh_offset + sh.sh_size - 1] = 'x';
       },
       "not terminated"},
      {"section over the section header table",
       [&](auto& b) { poke<uint64_t>(b, shdr_field(patch, offsetof(Elf64_Shdr, sh_offset)),
                                     elf.ehdr.e_shoff); },
       "overlaps the section header table"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.what);
    auto corrupt = bytes_;
    c.corrupt(corrupt);
    expect_elf_error(as_span(corrupt), c.needle);
  }
}

TEST_F(ElfImageErrorTest, SymbolNameIndexOutOfRange) {
  TrustedElf elf(bytes_);
  const auto symtab = elf.section(*elf.find_section(".symtab"));
  auto corrupt = bytes_;
  for (uint64_t off = symtab.sh_offset + sizeof(Elf64_Sym);
       off < symtab.sh_offset + symtab.sh_size; off += sizeof(Elf64_Sym)) {
    Elf64_Sym s;
    std::memcpy(&s, bytes_.data() + off, sizeof s);
    if (ELF64_ST_TYPE(s.st_info) == STT_FUNC && s.st_shndx != SHN_UNDEF) {
      poke<uint32_t>(corrupt, off + offsetof(Elf64_Sym, st_name), 0xfffffff0);
      break;
    }
  }
  expect_elf_error(as_span(corrupt), "string index");
}

TEST_F(ElfImageErrorTest, LoadSegmentPastEndOfFile) {
  TrustedElf elf(bytes_);
  auto corrupt = bytes_;
  for (size_t i = 0; i < elf.ehdr.e_phnum; ++i) {
    const uint64_t off = elf.ehdr.e_phoff + i * sizeof(Elf64_Phdr);
    Elf64_Phdr ph;
    std::memcpy(&ph, bytes_.data() + off, sizeof ph);
    if (ph.p_type == PT_LOAD) {
      poke<uint64_t>(corrupt, off + offsetof(Elf64_Phdr, p_filesz), bytes_.size() + 1);
      break;
    }
  }
  expect_elf_error(as_span(corrupt), "PT_LOAD");
}

// sstrip-style files drop the section headers; e_shstrndx may be stale.
// (Found by the fuzzer: the stale index was once used on an empty table.)
TEST_F(ElfImageErrorTest, FileWithoutSectionHeadersParsesToNothing) {
  auto stripped = bytes_;
  poke<uint64_t>(stripped, offsetof(Elf64_Ehdr, e_shoff), 0);
  poke<uint16_t>(stripped, offsetof(Elf64_Ehdr, e_shnum), 0);
  auto img = ElfImage::parse(as_span(stripped));
  ASSERT_TRUE(img.ok()) << img.error().message;
  EXPECT_FALSE(img->has_patchable_section());
  EXPECT_TRUE(img->functions().empty());
  EXPECT_FALSE(img->load_segments().empty());

  poke<uint16_t>(stripped, offsetof(Elf64_Ehdr, e_shnum), 3);
  expect_elf_error(as_span(stripped), "e_shoff is 0");
}

// A cheap in-test fuzzer: random byte damage to the headers and tables
// must never crash (run the suite under ASan/UBSan to make that strict).
TEST_F(ElfImageErrorTest, RandomHeaderDamageNeverCrashes) {
  TrustedElf elf(bytes_);
  std::vector<std::pair<uint64_t, uint64_t>> regions = {
      {0, sizeof(Elf64_Ehdr)},
      {elf.ehdr.e_phoff, elf.ehdr.e_phnum * sizeof(Elf64_Phdr)},
      {elf.ehdr.e_shoff, elf.ehdr.e_shnum * sizeof(Elf64_Shdr)},
  };
  for (const char* name : {"__patchable_function_entries", ".symtab", ".rela.dyn", ".dynsym"}) {
    const auto sh = elf.section(*elf.find_section(name));
    if (sh.sh_size != 0) regions.push_back({sh.sh_offset, sh.sh_size});
  }
  std::mt19937_64 rng(20261101);
  int parsed = 0;
  for (int iteration = 0; iteration < 3000; ++iteration) {
    auto damaged = bytes_;
    const int flips = 1 + static_cast<int>(rng() % 4);
    for (int k = 0; k < flips; ++k) {
      const auto& [start, size] = regions[rng() % regions.size()];
      damaged[start + rng() % size] = static_cast<uint8_t>(rng());
    }
    auto img = ElfImage::parse(as_span(damaged));
    if (img.ok()) {
      ++parsed;
      for (uint64_t r : img->patchable_records()) (void)img->function_at(r);
    } else {
      EXPECT_EQ(img.error().code, FTJIT_E_ELF);
    }
  }
  EXPECT_GT(parsed, 0);  // most single-byte damage leaves a parsable file
}

}  // namespace
}  // namespace ftjit
