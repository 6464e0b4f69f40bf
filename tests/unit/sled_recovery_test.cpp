// SPDX-License-Identifier: MIT
// Sled recovery tests: functions whose records GCC 12 dropped are found by their sleds, and
// nothing else ever is (NOPs of other counts, encodings or places; modules without evidence).
#include "core/sled_recovery.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "core/site_discovery.h"
#include "core/sled_layout.h"
#include "discovery_fixtures.h"
#include "runtime/module_scan.h"

namespace ftjit {
namespace {

DiscoveredModule discover(const char* name) {
  const std::string path = testing::fixture_path(name);
  if (!testing::file_exists(path)) {
    ADD_FAILURE() << "fixture missing: " << path;
    return {};
  }
  // The producers from libdw, in this process, as an embedder's engine
  // reads them (runtime/c_api_native.cpp); unset, a scan has none.
  set_producer_reader([](const ModuleFile& file, const std::string& read_path) {
    EXPECT_EQ(file.path, read_path);
    return compile_unit_producers(read_path);
  });
  auto module = discover_file(path);
  set_producer_reader(nullptr);
  EXPECT_TRUE(module.ok()) << module.error().message;
  return module.ok() ? std::move(module.value()) : DiscoveredModule{};
}

std::set<std::string> names(const DiscoveredModule& m, bool recovered) {
  std::set<std::string> out;
  for (const DiscoveredSite& s : m.sites) {
    if (s.recovered == recovered) out.emplace(s.shown_name());
  }
  return out;
}

// ============================================================================
// NOP encodings
// ============================================================================

uint32_t x86(std::vector<uint8_t> bytes) { return nop_length(Isa::kX86_64, bytes); }

TEST(NopLengthTest, X86TakesEveryNopEncodingAtItsLength) {
  EXPECT_EQ(x86({0x90, 0x90}), 1u);
  EXPECT_EQ(x86({0x66, 0x90}), 2u);
  EXPECT_EQ(x86({0x0f, 0x1f, 0x00}), 3u);
  EXPECT_EQ(x86({0x0f, 0x1f, 0x40, 0x00}), 4u);
  EXPECT_EQ(x86({0x0f, 0x1f, 0x44, 0x00, 0x00}), 5u);
  EXPECT_EQ(x86({0x0f, 0x1f, 0x44, 0x00, 0x08}), 5u);  // clang's =5 sled
  EXPECT_EQ(x86({0x66, 0x0f, 0x1f, 0x44, 0x00, 0x00}), 6u);
  EXPECT_EQ(x86({0x0f, 0x1f, 0x80, 0, 0, 0, 0}), 7u);
  EXPECT_EQ(x86({0x0f, 0x1f, 0x84, 0x00, 0, 0, 0, 0}), 8u);
  EXPECT_EQ(x86({0x66, 0x0f, 0x1f, 0x84, 0x00, 0, 0, 0, 0}), 9u);
  EXPECT_EQ(x86({0x66, 0x2e, 0x0f, 0x1f, 0x84, 0x00, 0, 0, 0, 0}), 10u);
  EXPECT_EQ(x86({0x66, 0x66, 0x2e, 0x0f, 0x1f, 0x84, 0x00, 0, 0, 0, 0}), 11u);
}

TEST(NopLengthTest, X86RefusesWhatIsNoNop) {
  EXPECT_EQ(x86({}), 0u);
  EXPECT_EQ(x86({0xc3}), 0u);                     // ret
  EXPECT_EQ(x86({0xf3, 0x90}), 0u);               // pause
  EXPECT_EQ(x86({0x2e, 0x90}), 0u);               // no cs-prefixed nop
  EXPECT_EQ(x86({0xf3, 0x0f, 0x1e, 0xfa}), 0u);   // endbr64
  EXPECT_EQ(x86({0x0f, 0x1f, 0x44, 0x00}), 0u);   // cut short
  EXPECT_EQ(x86(std::vector<uint8_t>(16, 0x66)), 0u);
}

TEST(NopLengthTest, Arm64AndRiscv64) {
  const std::vector<uint8_t> a64_nop = {0x1f, 0x20, 0x03, 0xd5};
  const std::vector<uint8_t> bti_c = {0x5f, 0x24, 0x03, 0xd5};
  EXPECT_EQ(nop_length(Isa::kArm64, a64_nop), 4u);
  EXPECT_EQ(nop_length(Isa::kArm64, bti_c), 0u);
  const std::vector<uint8_t> c_nop = {0x01, 0x00}, rv_nop = {0x13, 0x00, 0x00, 0x00};
  const std::vector<uint8_t> addi_sp = {0x13, 0x01, 0x01, 0xff}, c_addi = {0x05, 0x04};
  EXPECT_EQ(nop_length(Isa::kRiscv64, c_nop), 2u);
  EXPECT_EQ(nop_length(Isa::kRiscv64, rv_nop), 4u);
  EXPECT_EQ(nop_length(Isa::kRiscv64, addi_sp), 0u);
  EXPECT_EQ(nop_length(Isa::kRiscv64, c_addi), 0u);
}

// ============================================================================
// (a) GCC 12 dropped the records of a whole file
// ============================================================================

// Every function of dropped_a.cc and dropped_b.cc, by hand: each has a sled.
const std::set<std::string> kDroppedProgram = {"main", "dr_first(int)", "dr_shared(int)",
                                               "dr_second(int)"};

TEST(SledRecoveryTest, DroppedRecordsAreRecoveredExactly) {
  for (const char* name : {"rc_dropped_p5", "rc_dropped_p5_g", "rc_dropped_p13_8"}) {
    SCOPED_TRACE(name);
    const DiscoveredModule m = discover(name);
    const std::set<std::string> recovered = names(m, true);
    // The fixture is what the test is about only if GCC dropped records.
    ASSERT_FALSE(recovered.empty()) << "this GCC kept every record";
    std::set<std::string> all = names(m, false);
    all.insert(recovered.begin(), recovered.end());
    EXPECT_EQ(all, kDroppedProgram);
    EXPECT_EQ(recovered, std::set<std::string>{"dr_second(int)"});
    EXPECT_EQ(m.recovered_sites, recovered.size());
    EXPECT_EQ(m.sites.size(), kDroppedProgram.size());
  }
}

TEST(SledRecoveryTest, RecoveredSitesAreWhatARecordWouldGive) {
  const DiscoveredModule slot = discover("rc_dropped_p13_8");
  for (const DiscoveredSite& s : slot.sites) {
    SCOPED_TRACE(s.shown_name());
    EXPECT_EQ(s.entry, s.symbol());
    EXPECT_EQ(s.record(), s.symbol() - 8);
    EXPECT_EQ(s.prefix_bytes, 8u);
    EXPECT_EQ(s.slot, s.symbol() - 8);
    EXPECT_EQ(s.slot_state, OpsSlot::kAligned);  // -falign-functions=16
  }
  const DiscoveredModule entry = discover("rc_dropped_p5");
  for (const DiscoveredSite& s : entry.sites) {
    SCOPED_TRACE(s.shown_name());
    EXPECT_EQ(s.entry, s.symbol());
    EXPECT_EQ(s.record(), s.symbol());
    EXPECT_EQ(s.prefix_bytes, 0u);
    EXPECT_EQ(s.slot_state, OpsSlot::kNone);
  }
  EXPECT_TRUE(std::is_sorted(entry.sites.begin(), entry.sites.end(),
                             [](const auto& a, const auto& b) { return a.entry < b.entry; }));
}

TEST(SledRecoveryTest, TheReasonNamesTheLayoutAndTheEvidence) {
  EXPECT_EQ(discover("rc_dropped_p5").recovery_why,
            "1 site recovered without a record: its entry is the =5 sled and the module was "
            "built with -fpatchable-function-entry=5 (records of 3 other functions)");
  EXPECT_EQ(discover("rc_dropped_p13_8").recovery_why,
            "1 site recovered without a record: its entry is the =13,8 sled and the module was "
            "built with -fpatchable-function-entry=13,8 (records of 3 other functions)");
  EXPECT_EQ(discover("rc_dropped_p5_g").recovery_why,
            "1 site recovered without a record: its entry is the =5 sled and the module was "
            "built with -fpatchable-function-entry=5 (records of 3 other functions; "
            "DW_AT_producer of 2 compile units)");
}

// No record is left, but the section is there and the producers name the
// flag: the layout is GCC's, from the producers.
TEST(SledRecoveryTest, ProducersAloneGiveTheLayoutWhenNoRecordIsLeft) {
  if (!testing::file_exists(testing::fixture_path("rc_dropped_p5_g_norecords"))) GTEST_SKIP() << "no objcopy";
  const DiscoveredModule m = discover("rc_dropped_p5_g_norecords");
  EXPECT_EQ(names(m, false), std::set<std::string>{});
  EXPECT_EQ(names(m, true), kDroppedProgram);
  EXPECT_EQ(m.recovery_why,
            "4 sites recovered without a record: their entries are the =5 sled and the module "
            "was built with -fpatchable-function-entry=5 (DW_AT_producer of 2 compile units)");
}

// ============================================================================
// (b) functions that merely start with NOPs
// ============================================================================

TEST(SledRecoveryTest, OnlyTheExactSledIsTaken) {
  const DiscoveredModule m = discover("librc_decoys_p5.so");
  EXPECT_EQ(names(m, false), (std::set<std::string>{"dc_one", "dc_two", "dc_three"}));
  // Not rd_nop4, rd_nop6, rd_nop5_then_xchg, rd_nop5_then_nopl,
  // rd_xchg_pair_nop, rd_nopl5, rd_nopl4_nop, rd_notype, rd_nosize,
  // rd_only_sled (decoys_x86_64.S).
  EXPECT_EQ(names(m, true), std::set<std::string>{"rd_sled_exact"});
}

TEST(SledRecoveryTest, OnlyTheExactPrefixIsTaken) {
  const DiscoveredModule m = discover("librc_decoys_p13_8.so");
  EXPECT_EQ(names(m, false), (std::set<std::string>{"dc_one", "dc_two", "dc_three"}));
  // Not rd_slot_other_prefix, rd_slot_short_prefix, rd_slot_nop6.
  EXPECT_EQ(names(m, true), std::set<std::string>{"rd_slot_sled_exact"});
  for (const DiscoveredSite& s : m.sites) {
    if (!s.recovered) continue;
    EXPECT_EQ(s.prefix_bytes, 8u);
    EXPECT_EQ(s.slot, s.symbol() - 8);
  }
}

// ============================================================================
// (c) modules without evidence, or whose evidence disagrees
// ============================================================================

TEST(SledRecoveryTest, NothingWithoutEvidence) {
  // No flag, no section: not even the exact sled is taken.
  const DiscoveredModule noflag = discover("librc_decoys_noflag.so");
  EXPECT_TRUE(noflag.sites.empty());
  EXPECT_EQ(noflag.recovered_sites, 0u);
  // A section without records, and no DWARF to say how it was built.
  if (testing::file_exists(testing::fixture_path("rc_dropped_p5_norecords"))) {
    const DiscoveredModule bare = discover("rc_dropped_p5_norecords");
    EXPECT_TRUE(bare.has_patchable_section);
    EXPECT_TRUE(bare.sites.empty());
    EXPECT_TRUE(bare.recovery_why.empty());
  }
}

TEST(SledRecoveryTest, NothingWhenRecordsDisagreeOnTheLayout) {
  const DiscoveredModule m = discover("librc_decoys_disagree.so");
  EXPECT_EQ(names(m, false), (std::set<std::string>{"dc_short", "dc_one", "dc_two", "dc_three"}));
  EXPECT_EQ(names(m, true), std::set<std::string>{});
  EXPECT_EQ(m.recovered_sites, 0u);
}

// recover_unrecorded_sites itself, as `ftjit list FILE` calls it: without
// producers the same module recovers the same, with the reason its own.
TEST(SledRecoveryTest, FileParsePathAgrees) {
  const std::vector<uint8_t> bytes = testing::read_file(testing::fixture_path("rc_dropped_p5"));
  auto image = ElfImage::parse(bytes);
  ASSERT_TRUE(image.ok()) << image.error().message;
  auto module = discover_sites(*image, "rc_dropped_p5", 0);
  ASSERT_TRUE(module.ok());
  EXPECT_EQ(module->sites.size(), 3u);
  recover_unrecorded_sites(bytes, *image, {}, *module);
  EXPECT_EQ(names(*module, true), std::set<std::string>{"dr_second(int)"});
  // A second pass finds every function owned: nothing more.
  recover_unrecorded_sites(bytes, *image, {}, *module);
  EXPECT_EQ(module->sites.size(), 4u);
}

}  // namespace
}  // namespace ftjit
