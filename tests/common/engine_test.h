// SPDX-License-Identifier: MIT
// What the engine tests every cross leg runs (engine_test.cpp) share with
// an ISA's own (tests/riscv64/riscv64_engine_test.cpp): the traced layouts
// as a table, a recording ops, the site's bytes, a caller of known extent,
// and the fixture.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "ftjit/ftjit.h"
#include "tests/common/isa_suite.h"
#include "tests/common/traced.h"

namespace engine_test {

struct Layout {
  const char* name;    // for test names
  const char* prefix;  // the functions' name prefix
  uint64_t pad;        // bytes between the symbol and the site (a landing pad)
  bool literal;        // an ops literal before the site: call-ops can use it
  int64_t (*sum8)(int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t);
  double (*fsum8)(double, double, double, double, double, double, double, double);
  traced_pair (*pair)(int64_t);
  traced_fpair (*fpair)(double);
  traced_hfa4 (*hfa4)(double);
  traced_big (*big)(int64_t);
  int64_t (*leaf)(int64_t);
};

#define ENGINE_TEST_LAYOUT(name, P, pad, literal) \
  Layout{#name, #P, pad, literal, P##_sum8, P##_fsum8, P##_pair, P##_fpair, P##_hfa4, P##_big, P##_leaf},
inline const std::vector<Layout> kLayouts = {FTJIT_TRACED_LAYOUTS(ENGINE_TEST_LAYOUT)};
#undef ENGINE_TEST_LAYOUT

struct Call {
  uint64_t ip, parent_ip;
  uint64_t arg[8];
  uint64_t sp;
};
struct Exit {
  uint64_t ip, parent_ip;
  bool unwound;
  uint64_t ret[2];
  double fp[2];
};

struct Recorder {
  ftjit_ops ops;
  std::vector<Call> calls;
  std::vector<Exit> exits;
};

void init_recorder(Recorder* r, ftjit_strategy s, bool exits);

// The bytes of a site: the literal (8 before the entry) and the sled.
std::vector<uint8_t> site_bytes(const void* fn);

// Calls sum8 from a function of known extent, so that parent_ip can be checked.
int64_t call_sum8(const Layout& l);
constexpr int64_t kSum8 = 1 + 4 + 9 + 16 + 25 + 36 + 49 + 64;

}  // namespace engine_test

class ISA_SUITE(Engine) : public ::testing::Test {
 protected:
  void SetUp() override {
    engine_ = ftjit_engine_create(nullptr);
    ASSERT_NE(engine_, nullptr) << ftjit_last_error();
  }
  void TearDown() override { ftjit_engine_destroy(engine_); }
  ftjit_status attach(ftjit_ops* ops, const std::string& pattern) {
    const char* inc[] = {pattern.c_str()};
    ftjit_filter f{inc, 1, nullptr, 0};
    return ftjit_attach(engine_, ops, &f);
  }
  ftjit_engine* engine_ = nullptr;
};
