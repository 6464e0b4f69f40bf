// SPDX-License-Identifier: MIT
// Both compilers, both layouts: dlopen each fixture library after the engine
// exists, attach to one of its functions with every strategy its layout
// allows, call it, detach, and check the bytes are the compiler's again.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "ftjit/ftjit.h"

namespace {

struct Param {
  const char* compiler;
  const char* layout;
};

class FixtureLibTest : public ::testing::TestWithParam<Param> {};

int g_calls;
uint64_t g_ip;
void on_entry(uint64_t ip, uint64_t, ftjit_ops*, ftjit_regs* regs) {
  ++g_calls;
  g_ip = ip;
  EXPECT_EQ(regs->arg[0], 19u);
  EXPECT_EQ(regs->arg[1], 23u);
}

TEST_P(FixtureLibTest, AttachCallDetachRestoresBytes) {
  const Param p = GetParam();
  if (std::string(p.compiler) == "clang" && !FTJIT_FIXTURE_HAVE_CLANG) GTEST_SKIP() << "no clang";
  ftjit_engine* engine = ftjit_engine_create(nullptr);
  ASSERT_NE(engine, nullptr) << ftjit_last_error();
  std::string lib = std::string("libfx_") + p.compiler + "_" + p.layout + ".so";
  void* h = dlopen((std::string(FTJIT_FIXTURE_DIR) + "/" + lib).c_str(), RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(h, nullptr) << dlerror();
  auto fx_add = reinterpret_cast<int (*)(int, int)>(dlsym(h, "fx_add"));
  ASSERT_NE(fx_add, nullptr);
  bool slot = std::string(p.layout) == "p13_8";
  const size_t before = slot ? 8 : 0;
  std::vector<uint8_t> original(before + 5);
  std::memcpy(original.data(), reinterpret_cast<const uint8_t*>(fx_add) - before, original.size());

  std::string pattern = lib + "!fx_add";
  const char* inc[] = {pattern.c_str()};
  ftjit_filter filter{inc, 1, nullptr, 0};
  for (ftjit_strategy s : {FTJIT_STRATEGY_AUTO, FTJIT_STRATEGY_LIST, FTJIT_STRATEGY_GENERATED,
                           FTJIT_STRATEGY_CALL_OPS}) {
    ftjit_ops ops;
    ftjit_ops_init(&ops);
    ops.func = on_entry;
    ops.strategy = s;
    ftjit_status st = ftjit_attach(engine, &ops, &filter);  // finds the new library itself
    if (s == FTJIT_STRATEGY_CALL_OPS && !slot) {
      EXPECT_EQ(st, FTJIT_E_UNSUPPORTED);
      continue;
    }
    ASSERT_EQ(st, FTJIT_OK) << ftjit_strategy_name(s) << ": " << ftjit_last_error();
    g_calls = 0;
    int (*volatile fn)(int, int) = fx_add;
    EXPECT_EQ(fn(19, 23), 42);
    EXPECT_EQ(g_calls, 1) << ftjit_strategy_name(s);
    EXPECT_EQ(g_ip, reinterpret_cast<uint64_t>(fx_add));
    ASSERT_EQ(ftjit_detach(engine, &ops), FTJIT_OK) << ftjit_last_error();
    EXPECT_EQ(fn(19, 23), 42);
    EXPECT_EQ(g_calls, 1);
    EXPECT_EQ(std::memcmp(original.data(), reinterpret_cast<const uint8_t*>(fx_add) - before,
                          original.size()),
              0)
        << ftjit_strategy_name(s);
  }
  ftjit_engine_destroy(engine);
  dlclose(h);
}

INSTANTIATE_TEST_SUITE_P(CompilersAndLayouts, FixtureLibTest,
                         ::testing::Values(Param{"gcc", "p5"}, Param{"gcc", "p13_8"},
                                           Param{"clang", "p5"}, Param{"clang", "p13_8"}),
                         [](const auto& info) {
                           return std::string(info.param.compiler) + "_" + info.param.layout;
                         });

}  // namespace
