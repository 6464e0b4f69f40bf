// SPDX-License-Identifier: MIT
// compile_unit_producers on real builds (GCC's DWARF 5 and 4, clang's DWARF
// 5 with its string offsets table, no debug info at all) and on broken
// ones: a producer read right, or a clear FTJIT_E_ELF, never a crash.
#include "core/dwarf_producers.h"
#include "core/elf_image.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "discovery_fixtures.h"

namespace ftjit {
namespace {

using testing::read_file;

// Read from the file, and from its bytes in memory: the same units.
std::vector<CompileUnitProducer> producers_of(const std::string& name) {
  const std::string path = std::string(FTJIT_FIXTURE_DIR) + "/" + name;
  auto units = compile_unit_producers(path);
  EXPECT_TRUE(units) << name << ": " << units.error().message;
  if (!units) return {};
  auto from_memory = compile_unit_producers(read_file(path));
  EXPECT_TRUE(from_memory) << name << ": " << from_memory.error().message;
  if (from_memory) {
    EXPECT_EQ(from_memory->size(), units->size());
    for (size_t i = 0; i < units->size() && i < from_memory->size(); ++i) {
      EXPECT_EQ((*from_memory)[i].producer, (*units)[i].producer);
      EXPECT_EQ((*from_memory)[i].version, (*units)[i].version);
      EXPECT_EQ((*from_memory)[i].has_code, (*units)[i].has_code);
    }
  }
  return *units;
}

// The two translation units of the fixture library, each with the flag
// GCC records among its switches.
TEST(DwarfProducers, GccRecordsItsSwitches) {
  for (const char* name : {"libfx_gcc_p5_g.so", "libfx_gcc_p5_gdwarf4.so"}) {
    SCOPED_TRACE(name);
    const auto units = producers_of(name);
    int ours = 0;
    for (const CompileUnitProducer& u : units) {
      if (u.producer.find("GNU C") != 0) continue;  // crt files' assembler units
      ++ours;
      EXPECT_NE(u.producer.find("-fpatchable-function-entry=5"), std::string::npos) << u.producer;
      EXPECT_NE(u.producer.find("-O2"), std::string::npos) << u.producer;
      EXPECT_EQ(u.version, std::string(name).find("dwarf4") != std::string::npos ? 4 : 5);
    }
    EXPECT_EQ(ours, 2) << "fx_c.c and fx_cpp.cpp";
  }
}

TEST(DwarfProducers, ClangThroughItsStringOffsets) {
  if (!FTJIT_FIXTURE_HAVE_CLANG) GTEST_SKIP() << "no clang fixtures";
  const auto units = producers_of("libfx_clang_p5_g.so");
  int ours = 0;
  for (const CompileUnitProducer& u : units) {
    if (u.producer.find("clang version") == std::string::npos) continue;
    ++ours;
    EXPECT_EQ(u.version, 5);
  }
  EXPECT_EQ(ours, 2) << "fx_c.c and fx_cpp.cpp";
}

TEST(DwarfProducers, NoDebugInfoIsNoEvidence) {
  const auto units = producers_of("libfx_gcc_p5.so");
  EXPECT_TRUE(units.empty());
}

// Every byte of .debug_info and .debug_abbrev changed in turn (and each
// section cut short): a result or FTJIT_E_ELF, never a crash or a hang.
TEST(DwarfProducers, DamagedSectionsFailCleanly) {
  const auto original = read_file(std::string(FTJIT_FIXTURE_DIR) + "/libfx_gcc_p5_gdwarf4.so");
  auto image = ElfImage::parse(original);
  ASSERT_TRUE(image);
  int errors = 0;
  for (const ElfImage::DebugSection& d : image->debug_sections()) {
    if (d.name != ".debug_info" && d.name != ".debug_abbrev") continue;
    for (uint64_t i = 0; i < d.size && i < 4096; ++i) {
      for (uint8_t v : {uint8_t{0}, uint8_t{0xff}, uint8_t{0x80}}) {
        auto bytes = original;
        bytes[d.offset + i] = v;
        auto units = compile_unit_producers(bytes);
        if (!units) {
          EXPECT_EQ(units.error().code, FTJIT_E_ELF);
          ++errors;
        }
      }
    }
    // The file cut in the middle of the section (its section headers,
    // at the end, gone with the rest): no DWARF read, or FTJIT_E_ELF.
    std::vector<uint8_t> cut(original.begin(), original.begin() + static_cast<ptrdiff_t>(d.offset + d.size / 2));
    auto units = compile_unit_producers(cut);
    if (units) {
      EXPECT_TRUE(units->empty());
    } else {
      EXPECT_EQ(units.error().code, FTJIT_E_ELF);
    }
  }
  // Not ELF at all, and a file that is not there.
  const std::vector<uint8_t> not_elf = {'n', 'o', 't', ' ', 'e', 'l', 'f'};
  auto from_text = compile_unit_producers(not_elf);
  ASSERT_FALSE(from_text);
  EXPECT_EQ(from_text.error().code, FTJIT_E_ELF);
  auto missing = compile_unit_producers(std::string(FTJIT_FIXTURE_DIR) + "/no-such-file.so");
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().code, FTJIT_E_SYSTEM);
  EXPECT_NE(missing.error().message.find("no-such-file.so"), std::string::npos);
  EXPECT_GT(errors, 0) << "no damage was ever noticed";
}

}  // namespace
}  // namespace ftjit
