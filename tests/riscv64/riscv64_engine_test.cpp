// SPDX-License-Identifier: MIT
// What only riscv64's engine has to get right, beside the tests every
// cross leg runs (tests/common/engine_test.cpp): a sled off the 8-byte grid
// is refused, and the host's code generator (FTJIT_GENERATOR: riscv64 has
// none of its own) going away in the middle of an attach.
#include <cstdlib>

#include "tests/common/engine_test.h"

extern "C" int64_t rv_misaligned(int64_t);  // misaligned_site.S

namespace {

using namespace engine_test;

// A sled that is not 8-byte aligned (misaligned_site.S): refused in one
// line naming the flags, every strategy, nothing patched.
TEST_F(Riscv64Engine, MisalignedSiteIsRefused) {
  const auto before = site_bytes(reinterpret_cast<const void*>(rv_misaligned));
  for (ftjit_strategy s : {FTJIT_STRATEGY_GENERATED, FTJIT_STRATEGY_LIST, FTJIT_STRATEGY_CALL_OPS}) {
    Recorder r;
    init_recorder(&r, s, false);
    EXPECT_EQ(attach(&r.ops, "rv_misaligned"), FTJIT_E_UNSUPPORTED) << ftjit_strategy_name(s);
    const std::string error = ftjit_last_error();
    EXPECT_NE(error.find("not 8-byte aligned"), std::string::npos) << error;
    EXPECT_NE(error.find("-falign-functions=8"), std::string::npos) << error;
    EXPECT_NE(error.find("nothing was patched"), std::string::npos) << error;
    EXPECT_EQ(site_bytes(reinterpret_cast<const void*>(rv_misaligned)), before);
    auto* volatile fn = rv_misaligned;
    EXPECT_EQ(fn(6), 43);
  }
}

// The code generator goes away in the middle of an attach (a killed CLI):
// run by the riscv64.generator_drops.* tests with FTJIT_GENERATOR set to
// tests/riscv64/dropping_generator.py, which answers FTJIT_DROP_AFTER
// requests and then closes the connection. The attach fails with one clear
// error, nothing stays patched (the trampoline placed before the drop is
// rolled back with the rest), the functions run as before, and the next
// attach says there is no generator.
TEST(Riscv64GeneratorDrops, AttachFailsCleanlyAndPatchesNothing) {
  if (std::getenv("FTJIT_DROP_AFTER") == nullptr) {
    GTEST_SKIP() << "run by riscv64.generator_drops.* (FTJIT_DROP_AFTER, a dropping generator)";
  }
  ftjit_engine* engine = ftjit_engine_create(nullptr);
  ASSERT_NE(engine, nullptr) << ftjit_last_error();
  std::vector<std::vector<uint8_t>> before;
  for (const Layout& l : kLayouts) before.push_back(site_bytes(reinterpret_cast<const void*>(l.sum8)));
  Recorder r;
  init_recorder(&r, FTJIT_STRATEGY_GENERATED, false);
  const char* inc[] = {"rv_*_sum8"};
  ftjit_filter f{inc, 1, nullptr, 0};
  EXPECT_NE(ftjit_attach(engine, &r.ops, &f), FTJIT_OK);
  const std::string error = ftjit_last_error();
  EXPECT_NE(error.find("code generator"), std::string::npos) << error;
  EXPECT_EQ(error.find('\n'), std::string::npos) << error;
  for (size_t i = 0; i < kLayouts.size(); ++i) {
    EXPECT_EQ(site_bytes(reinterpret_cast<const void*>(kLayouts[i].sum8)), before[i]) << kLayouts[i].name;
    EXPECT_EQ(call_sum8(kLayouts[i]), kSum8) << kLayouts[i].name;
  }
  EXPECT_TRUE(r.calls.empty());
  EXPECT_NE(ftjit_attach(engine, &r.ops, &f), FTJIT_OK);
  EXPECT_NE(std::string(ftjit_last_error()).find("no code generator"), std::string::npos) << ftjit_last_error();
  EXPECT_EQ(site_bytes(reinterpret_cast<const void*>(kLayouts[0].sum8)), before[0]);
  ftjit_engine_destroy(engine);
}

}  // namespace
