// SPDX-License-Identifier: MIT
// Behaviour: attach a recording tracer with each strategy, call, check what
// the callback saw, detach, call again, and check the code is as it was.
#include <gtest/gtest.h>
#include <signal.h>

#include <atomic>
#include <cstring>
#include <vector>

#include "ftjit/ftjit.h"
#include "tests/e2e/traced.h"

extern "C" {
void test_direct_trampoline();
extern uint64_t test_direct_calls;
}

namespace {

struct Call {
  uint64_t ip, parent_ip;
  uint64_t arg[6];
};

struct Recorder {
  ftjit_ops ops;
  std::vector<Call> calls;
};

void record(uint64_t ip, uint64_t parent_ip, ftjit_ops* ops, ftjit_regs* regs) {
  auto* r = static_cast<Recorder*>(ops->private_data);
  Call c{ip, parent_ip, {}};
  std::memcpy(c.arg, regs->arg, sizeof c.arg);
  r->calls.push_back(c);
}

// Returns the bytes of a site's patch area (slot + entry).
template <typename Fn>
std::vector<uint8_t> code_of(Fn* fn, size_t before, size_t after) {
  uintptr_t at = reinterpret_cast<uintptr_t>(fn);
  asm("" : "+r"(at));  // hide the function's provenance from the optimiser
  std::vector<uint8_t> out(before + after);
  std::memcpy(out.data(), reinterpret_cast<const void*>(at - before), out.size());
  return out;
}

// Calls through a volatile pointer from a function of known extent, so the
// test can check parent_ip.
__attribute__((noinline)) int call_add(int a, int b) {
  int (*volatile fn)(int, int) = traced_add;
  int r = fn(a, b);
  asm volatile("" ::: "memory");
  return r;
}

class EngineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    engine_ = ftjit_engine_create(nullptr);
    ASSERT_NE(engine_, nullptr) << ftjit_last_error();
  }
  void TearDown() override { ftjit_engine_destroy(engine_); }

  ftjit_status attach(ftjit_ops* ops, std::vector<const char*> include,
                      std::vector<const char*> exclude = {}) {
    ftjit_filter f{include.data(), include.size(), exclude.data(), exclude.size()};
    return ftjit_attach(engine_, ops, &f);
  }

  ftjit_engine* engine_ = nullptr;
};

void init_recorder(Recorder* r, ftjit_strategy s) {
  ftjit_ops_init(&r->ops);
  r->ops.func = record;
  r->ops.private_data = r;
  r->ops.strategy = s;
}

class StrategyTest : public EngineTest, public ::testing::WithParamInterface<ftjit_strategy> {};

TEST_P(StrategyTest, CallbackSeesIpParentAndArguments) {
  auto before = code_of(traced_add, 8, 5);
  Recorder r;
  init_recorder(&r, GetParam());
  ASSERT_EQ(attach(&r.ops, {"traced_add"}), FTJIT_OK) << ftjit_last_error();
  EXPECT_EQ(ftjit_ops_site_count(engine_, &r.ops), 1);
  EXPECT_EQ(call_add(20, 22), 42);
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_EQ(r.calls[0].ip, reinterpret_cast<uint64_t>(traced_add));
  auto call_add_at = reinterpret_cast<uint64_t>(call_add);
  EXPECT_GT(r.calls[0].parent_ip, call_add_at);
  EXPECT_LT(r.calls[0].parent_ip, call_add_at + 256);
  EXPECT_EQ(r.calls[0].arg[0], 20u);
  EXPECT_EQ(r.calls[0].arg[1], 22u);

  ASSERT_EQ(ftjit_detach(engine_, &r.ops), FTJIT_OK) << ftjit_last_error();
  EXPECT_EQ(call_add(1, 2), 3);
  EXPECT_EQ(r.calls.size(), 1u);
  EXPECT_EQ(code_of(traced_add, 8, 5), before);
}

TEST_P(StrategyTest, SixIntegerArgumentsArePassedAndPreserved) {
  Recorder r;
  init_recorder(&r, GetParam());
  ASSERT_EQ(attach(&r.ops, {"traced_six"}), FTJIT_OK) << ftjit_last_error();
  long (*volatile fn)(long, long, long, long, long, long) = traced_six;
  EXPECT_EQ(fn(1, 2, 3, 4, 5, 6), 1 + 4 + 9 + 16 + 25 + 36);
  ASSERT_EQ(r.calls.size(), 1u);
  for (int i = 0; i < 6; ++i) EXPECT_EQ(r.calls[0].arg[i], static_cast<uint64_t>(i + 1));
  ASSERT_EQ(ftjit_detach(engine_, &r.ops), FTJIT_OK);
}

// A callback that uses every FP argument register for itself.
void clobber_fp(uint64_t, uint64_t, ftjit_ops* ops, ftjit_regs*) {
  volatile double sink = 0;
  double a = 1.25, b = 2.5, c = 3.75, d = 4.0, e = 5.5, f = 6.25, g = 7.0, h = 8.5;
  for (int i = 0; i < 4; ++i) {
    a = a * b + c; b = c * d - e; c = e * f + g; d = g * h - a;
    e = a + h; f = b + g; g = c * 0.5; h = d * 0.25;
  }
  sink = a + b + c + d + e + f + g + h;
  (void)sink;
  ++*static_cast<int*>(ops->private_data);
}

TEST_P(StrategyTest, FloatingPointArgumentsSurviveTheCallback) {
  if (GetParam() == FTJIT_STRATEGY_DIRECT) GTEST_SKIP();
  int calls = 0;
  ftjit_ops ops;
  ftjit_ops_init(&ops);
  ops.func = clobber_fp;
  ops.private_data = &calls;
  ops.strategy = GetParam();
  ASSERT_EQ(attach(&ops, {"traced_fp"}), FTJIT_OK) << ftjit_last_error();
  double (*volatile fn)(double, double) = traced_fp;
  EXPECT_EQ(fn(3.0, 4.0), 12.5);
  EXPECT_EQ(calls, 1);
  ASSERT_EQ(ftjit_detach(engine_, &ops), FTJIT_OK);
}

TEST_P(StrategyTest, CallbackCanRewriteArguments) {
  ftjit_ops ops;
  ftjit_ops_init(&ops);
  ops.func = [](uint64_t, uint64_t, ftjit_ops*, ftjit_regs* regs) { regs->arg[1] = 100; };
  ops.strategy = GetParam();
  ASSERT_EQ(attach(&ops, {"traced_add"}), FTJIT_OK) << ftjit_last_error();
  EXPECT_EQ(call_add(1, 2), 101);
  ASSERT_EQ(ftjit_detach(engine_, &ops), FTJIT_OK);
  EXPECT_EQ(call_add(1, 2), 3);
}

TEST_P(StrategyTest, RecursionTracesEveryLevel) {
  Recorder r;
  init_recorder(&r, GetParam());
  ASSERT_EQ(attach(&r.ops, {"traced_recurse"}), FTJIT_OK) << ftjit_last_error();
  int (*volatile fn)(int) = traced_recurse;
  EXPECT_EQ(fn(50), 50);
  EXPECT_EQ(r.calls.size(), 51u);
  ASSERT_EQ(ftjit_detach(engine_, &r.ops), FTJIT_OK);
}

INSTANTIATE_TEST_SUITE_P(Strategies, StrategyTest,
                         ::testing::Values(FTJIT_STRATEGY_AUTO, FTJIT_STRATEGY_LIST,
                                           FTJIT_STRATEGY_CALL_OPS, FTJIT_STRATEGY_GENERATED),
                         [](const auto& info) {
                           std::string n = ftjit_strategy_name(info.param);
                           for (char& c : n) c = c == '-' ? '_' : c;
                           return n;
                         });

TEST_F(EngineTest, SiteWithoutSlotWorksExceptForCallOps) {
  for (ftjit_strategy s : {FTJIT_STRATEGY_LIST, FTJIT_STRATEGY_GENERATED, FTJIT_STRATEGY_AUTO}) {
    Recorder r;
    init_recorder(&r, s);
    ASSERT_EQ(attach(&r.ops, {"traced_noslot_mul"}), FTJIT_OK) << ftjit_last_error();
    int (*volatile fn)(int, int) = traced_noslot_mul;
    EXPECT_EQ(fn(6, 7), 42);
    EXPECT_EQ(r.calls.size(), 1u) << ftjit_strategy_name(s);
    ASSERT_EQ(ftjit_detach(engine_, &r.ops), FTJIT_OK);
  }
  auto before = code_of(traced_noslot_mul, 0, 5);
  Recorder r;
  init_recorder(&r, FTJIT_STRATEGY_CALL_OPS);
  EXPECT_EQ(attach(&r.ops, {"traced_noslot_mul"}), FTJIT_E_UNSUPPORTED);
  EXPECT_NE(std::string(ftjit_last_error()).find("13,8"), std::string::npos) << ftjit_last_error();
  EXPECT_EQ(ftjit_ops_site_count(engine_, &r.ops), -1);
  EXPECT_EQ(code_of(traced_noslot_mul, 0, 5), before);
}

TEST_F(EngineTest, SeveralOpsOnOneSiteAreAllCalled) {
  // With a slot (call-ops multiplexer) and without (list walk).
  for (const char* fn_name : {"traced_add", "traced_noslot_mul"}) {
    Recorder a, b, c;
    init_recorder(&a, FTJIT_STRATEGY_GENERATED);
    init_recorder(&b, FTJIT_STRATEGY_CALL_OPS);
    init_recorder(&c, FTJIT_STRATEGY_LIST);
    bool slot = std::string(fn_name) == "traced_add";
    ASSERT_EQ(attach(&a.ops, {fn_name}), FTJIT_OK) << ftjit_last_error();
    if (slot) {
      ASSERT_EQ(attach(&b.ops, {fn_name}), FTJIT_OK) << ftjit_last_error();
    }
    ASSERT_EQ(attach(&c.ops, {fn_name}), FTJIT_OK) << ftjit_last_error();
    if (slot) {
      EXPECT_EQ(call_add(2, 3), 5);
    } else {
      int (*volatile fn)(int, int) = traced_noslot_mul;
      EXPECT_EQ(fn(2, 3), 6);
    }
    EXPECT_EQ(a.calls.size(), 1u) << fn_name;
    EXPECT_EQ(b.calls.size(), slot ? 1u : 0u) << fn_name;
    EXPECT_EQ(c.calls.size(), 1u) << fn_name;
    // Removing one keeps the others.
    ASSERT_EQ(ftjit_detach(engine_, &a.ops), FTJIT_OK);
    if (slot) {
      EXPECT_EQ(call_add(2, 3), 5);
    } else {
      int (*volatile fn)(int, int) = traced_noslot_mul;
      EXPECT_EQ(fn(2, 3), 6);
    }
    EXPECT_EQ(a.calls.size(), 1u);
    EXPECT_EQ(c.calls.size(), 2u);
    if (slot) {
      ASSERT_EQ(ftjit_detach(engine_, &b.ops), FTJIT_OK);
    }
    ASSERT_EQ(ftjit_detach(engine_, &c.ops), FTJIT_OK);
  }
}

TEST_F(EngineTest, DirectTrampolineAloneAndAlongsideOtherOps) {
  for (const char* fn_name : {"traced_add", "traced_noslot_mul"}) {
    test_direct_calls = 0;
    ftjit_ops direct;
    ftjit_ops_init(&direct);
    direct.strategy = FTJIT_STRATEGY_DIRECT;
    direct.direct_trampoline = reinterpret_cast<const void*>(test_direct_trampoline);
    ASSERT_EQ(attach(&direct, {fn_name}), FTJIT_OK) << ftjit_last_error();
    int (*volatile fn)(int, int) = std::string(fn_name) == "traced_add" ? traced_add
                                                                         : traced_noslot_mul;
    int expect = fn == traced_add ? 7 : 12;
    EXPECT_EQ(fn(3, 4), expect);
    EXPECT_EQ(test_direct_calls, 1u);
    Recorder r;
    init_recorder(&r, FTJIT_STRATEGY_AUTO);
    ASSERT_EQ(attach(&r.ops, {fn_name}), FTJIT_OK) << ftjit_last_error();
    EXPECT_EQ(fn(3, 4), expect);
    EXPECT_EQ(test_direct_calls, 2u) << fn_name;
    EXPECT_EQ(r.calls.size(), 1u) << fn_name;
    ASSERT_EQ(ftjit_detach(engine_, &direct), FTJIT_OK);
    EXPECT_EQ(fn(3, 4), expect);
    EXPECT_EQ(test_direct_calls, 2u);
    EXPECT_EQ(r.calls.size(), 2u);
    ASSERT_EQ(ftjit_detach(engine_, &r.ops), FTJIT_OK);
  }
}

TEST_F(EngineTest, SetFilterMovesAnAttachedOps) {
  Recorder r;
  init_recorder(&r, FTJIT_STRATEGY_AUTO);
  ASSERT_EQ(attach(&r.ops, {"traced_add"}), FTJIT_OK) << ftjit_last_error();
  const char* inc[] = {"traced_noslot_*"};
  ftjit_filter f{inc, 1, nullptr, 0};
  ASSERT_EQ(ftjit_set_filter(engine_, &r.ops, &f), FTJIT_OK) << ftjit_last_error();
  EXPECT_EQ(call_add(1, 1), 2);
  int (*volatile fn)(int, int) = traced_noslot_mul;
  EXPECT_EQ(fn(2, 2), 4);
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_EQ(r.calls[0].ip, reinterpret_cast<uint64_t>(traced_noslot_mul));
  ASSERT_EQ(ftjit_detach(engine_, &r.ops), FTJIT_OK);
}

TEST_F(EngineTest, FilterGlobsIncludeExcludeAndModule) {
  Recorder r;
  init_recorder(&r, FTJIT_STRATEGY_AUTO);
  ASSERT_EQ(attach(&r.ops, {"traced_many_1[0-9][0-9]"}, {"traced_many_15?"}), FTJIT_OK)
      << ftjit_last_error();
  EXPECT_EQ(ftjit_ops_site_count(engine_, &r.ops), 90);
  ASSERT_EQ(ftjit_detach(engine_, &r.ops), FTJIT_OK);
  ASSERT_EQ(attach(&r.ops, {"ftjit_e2e_tests!traced_many_2*"}), FTJIT_OK) << ftjit_last_error();
  EXPECT_EQ(ftjit_ops_site_count(engine_, &r.ops), 100);
  ASSERT_EQ(ftjit_detach(engine_, &r.ops), FTJIT_OK);
  EXPECT_EQ(attach(&r.ops, {"libc.so*!traced_many_2*"}), FTJIT_E_NO_SITES);
  EXPECT_NE(std::string(ftjit_last_error()).find("module libc.so.6 has no patchable entries"),
            std::string::npos)
      << ftjit_last_error();
  EXPECT_EQ(attach(&r.ops, {"libnothere.so!x"}), FTJIT_E_NO_MATCH);
  EXPECT_NE(std::string(ftjit_last_error()).find("no loaded module matches 'libnothere.so'"),
            std::string::npos)
      << ftjit_last_error();
}

TEST_F(EngineTest, BadInputGetsClearErrorsAndChangesNothing) {
  auto before = code_of(traced_add, 8, 5);
  Recorder r;
  init_recorder(&r, FTJIT_STRATEGY_AUTO);
  EXPECT_EQ(attach(&r.ops, {"no_such_function_*"}), FTJIT_E_NO_MATCH);
  EXPECT_NE(std::string(ftjit_last_error()).find("no_such_function_*"), std::string::npos);
  EXPECT_EQ(attach(&r.ops, {"untraced_function"}), FTJIT_E_NOT_PATCHABLE) << ftjit_last_error();
  EXPECT_EQ(attach(&r.ops, {"!x"}), FTJIT_E_INVALID_ARGUMENT);
  EXPECT_EQ(ftjit_detach(engine_, &r.ops), FTJIT_E_NOT_ATTACHED);
  EXPECT_EQ(ftjit_set_filter(engine_, &r.ops, nullptr), FTJIT_E_NOT_ATTACHED);
  ftjit_ops no_func;
  ftjit_ops_init(&no_func);
  EXPECT_EQ(attach(&no_func, {"traced_add"}), FTJIT_E_INVALID_ARGUMENT);
  ftjit_ops not_init{};
  EXPECT_EQ(attach(&not_init, {"traced_add"}), FTJIT_E_INVALID_ARGUMENT);
  ASSERT_EQ(attach(&r.ops, {"traced_add"}), FTJIT_OK);
  EXPECT_EQ(attach(&r.ops, {"traced_add"}), FTJIT_E_ALREADY_ATTACHED);
  EXPECT_EQ(call_add(1, 2), 3);
  EXPECT_EQ(r.calls.size(), 1u);
  ASSERT_EQ(ftjit_detach(engine_, &r.ops), FTJIT_OK);
  EXPECT_EQ(code_of(traced_add, 8, 5), before);
  EXPECT_EQ(ftjit_engine_create(nullptr), nullptr);  // one per process
}

TEST_F(EngineTest, StatsCountThreeSyncsPerBatch) {
  Recorder r;
  init_recorder(&r, FTJIT_STRATEGY_GENERATED);
  ASSERT_EQ(attach(&r.ops, {"traced_many_*"}), FTJIT_OK) << ftjit_last_error();
  ftjit_stats st;
  ftjit_get_stats(engine_, &st);
  EXPECT_EQ(st.last_batch_sites, 1000u);
  EXPECT_EQ(st.last_batch_syncs, 3u);
  EXPECT_EQ(st.sites_enabled, 1000u);
  EXPECT_GE(st.trampolines, 1u);
  for (int i = 0; i < TRACED_MANY; ++i) EXPECT_EQ(traced_many[i](1), 1 + 100 + i);
  EXPECT_EQ(r.calls.size(), 1000u);
  ASSERT_EQ(ftjit_detach(engine_, &r.ops), FTJIT_OK);
  ftjit_get_stats(engine_, &st);
  EXPECT_EQ(st.last_batch_syncs, 3u);
  EXPECT_EQ(st.sites_enabled, 0u);
}

}  // namespace
