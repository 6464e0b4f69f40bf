// SPDX-License-Identifier: MIT
// What trampolines keep, decided from the producers of a module's units
// (core/register_evidence.h): only units with code count, GCC's with the
// flag on their command line are the only evidence for the psABI's set.
#include "core/register_evidence.h"

#include <gtest/gtest.h>

namespace ftjit {
namespace {

CompileUnitProducer unit(std::string producer, bool has_code = true) {
  CompileUnitProducer u;
  u.producer = std::move(producer);
  u.version = 5;
  u.has_code = has_code;
  return u;
}

const char* kFlagUnit = "GNU C17 12.2.0 -mtune=generic -march=x86-64 -g -O2 -fpatchable-function-entry=5";

TEST(RegisterEvidence, GccUnitsWithTheFlagAreEnough) {
  const SavesEvidence e = saves_evidence({unit(kFlagUnit), unit("GNU C++17 12.2.0 -O2 -fpatchable-function-entry=13,8")});
  EXPECT_TRUE(e.abi_is_enough);
  EXPECT_NE(e.why.find("2 compile units"), std::string::npos) << e.why;
}

TEST(RegisterEvidence, UnitsWithoutCodeAndAssemblyDoNotCount) {
  // A sanitizer's preinit unit (no DW_AT_low_pc nor DW_AT_ranges), GNU as.
  const SavesEvidence e = saves_evidence(
      {unit("GNU C++14 12.2.0 -O2 -fno-builtin", false), unit("GNU AS 2.40"), unit(kFlagUnit)});
  EXPECT_TRUE(e.abi_is_enough) << e.why;
}

TEST(RegisterEvidence, AnythingElseKeepsEveryRegister) {
  struct Case {
    std::vector<CompileUnitProducer> units;
    const char* why;
  };
  const Case cases[] = {
      {{}, "no DW_AT_producer"},
      {{unit("GNU AS 2.40")}, "no DW_AT_producer"},
      {{unit(kFlagUnit), unit("GNU C17 12.2.0 -O2 -g")}, "without -fpatchable-function-entry"},
      // The option must be one: not a substring of another.
      {{unit("GNU C17 12.2.0 -O2 -Wno-fpatchable-function-entry=5")}, "without -fpatchable-function-entry"},
      {{unit(kFlagUnit), unit("Debian clang version 16.0.6")}, "options are not recorded"},
      {{unit("")}, "no DW_AT_producer"},
  };
  for (const Case& c : cases) {
    const SavesEvidence e = saves_evidence(c.units);
    EXPECT_FALSE(e.abi_is_enough) << e.why;
    EXPECT_NE(e.why.find(c.why), std::string::npos) << e.why;
  }
}

}  // namespace
}  // namespace ftjit
