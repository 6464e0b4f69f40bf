// SPDX-License-Identifier: MIT
// compile_unit_producers on real builds (GCC's DWARF 5 and 4, clang's DWARF
// 5 with its string offsets table, no debug info at all) and on broken
// ones: a producer read right, or a clear FTJIT_E_ELF, never a crash.
#include "core/dwarf_producers.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "discovery_fixtures.h"

namespace ftjit {
namespace {

using testing::read_file;

std::vector<CompileUnitProducer> producers_of(const std::string& name) {
  const auto bytes = read_file(std::string(FTJIT_FIXTURE_DIR) + "/" + name);
  auto image = ElfImage::parse(bytes);
  EXPECT_TRUE(image) << name << ": " << image.error().message;
  if (!image) return {};
  auto units = compile_unit_producers(bytes, *image);
  EXPECT_TRUE(units) << name << ": " << units.error().message;
  return units ? *units : std::vector<CompileUnitProducer>{};
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
        auto units = compile_unit_producers(bytes, *image);
        if (!units) {
          EXPECT_EQ(units.error().code, FTJIT_E_ELF);
          ++errors;
        }
      }
    }
    // A section shorter than it says: its place points past the bytes.
    std::vector<uint8_t> cut(original.begin(), original.begin() + static_cast<ptrdiff_t>(d.offset + d.size / 2));
    auto units = compile_unit_producers(cut, *image);
    ASSERT_FALSE(units);
    EXPECT_EQ(units.error().code, FTJIT_E_ELF);
  }
  EXPECT_GT(errors, 0) << "no damage was ever noticed";
}

}  // namespace
}  // namespace ftjit
