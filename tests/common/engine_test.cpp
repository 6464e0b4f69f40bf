// SPDX-License-Identifier: MIT
// The engine on every cross leg's ISA, run as that ISA's code (under
// qemu-user on an x86-64 host): every strategy on every traced layout of
// the ISA (tests/<isa>/CMakeLists.txt), calling back with the right ip,
// parent_ip and arguments, exits with the right return registers, a direct
// trampoline sharing a site with other ops, detach giving the compiler's
// bytes back, written code reaching instruction fetch (qemu caches what it
// translated), and a grace period that waits for a thread inside a callback
// (qemu has no process_vm_readv). call-ops on a layout without a literal is
// refused, naming the flags of one that has it.
#include "tests/common/engine_test.h"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <thread>
#include <tuple>

#include "runtime/arch/arch.h"
#include "runtime/code_memory.h"
#include "tests/common/arena_traps.h"

extern "C" {
// The ISA's direct trampoline (tests/<isa>/direct_tramp_*.S): counts its
// calls here and goes on into the function.
void test_direct_trampoline();
uint64_t test_direct_calls = 0;
}

namespace engine_test {

namespace {

void record(uint64_t ip, uint64_t parent_ip, ftjit_ops* ops, ftjit_regs* regs) {
  auto* r = static_cast<Recorder*>(ops->private_data);
  Call c{ip, parent_ip, {}, regs->sp};
  std::memcpy(c.arg, regs->arg, sizeof c.arg);
  r->calls.push_back(c);
  // Use the vector registers the traced function's arguments came in, as
  // any callback compiled with FP code may.
  volatile double sink = 0;
  double a = 1.5, b = 2.25;
  for (int i = 0; i < 8; ++i) a = a * b + i, b = b * 0.5 + a;
  sink = a + b;
  (void)sink;
}

void record_exit(uint64_t ip, uint64_t parent_ip, ftjit_ops* ops, ftjit_ret_regs* ret) {
  auto* r = static_cast<Recorder*>(ops->private_data);
  Exit e{ip, parent_ip, ret == nullptr, {}, {}};
  if (ret != nullptr) {
    std::memcpy(e.ret, ret->ret, sizeof e.ret);
    std::memcpy(&e.fp[0], ret->fp[0], 8);
    std::memcpy(&e.fp[1], ret->fp[1], 8);
  }
  r->exits.push_back(e);
}

}  // namespace

void init_recorder(Recorder* r, ftjit_strategy s, bool exits) {
  ftjit_ops_init(&r->ops);
  r->ops.func = record;
  if (exits) r->ops.exit_func = record_exit;
  r->ops.private_data = r;
  r->ops.strategy = s;
}

std::vector<uint8_t> site_bytes(const void* fn) {
  uintptr_t at = reinterpret_cast<uintptr_t>(fn);
  asm("" : "+r"(at));
  std::vector<uint8_t> out(16);
  std::memcpy(out.data(), reinterpret_cast<const void*>(at - 8), out.size());
  return out;
}

__attribute__((noinline)) int64_t call_sum8(const Layout& l) {
  auto* volatile fn = l.sum8;
  int64_t r = fn(1, 2, 3, 4, 5, 6, 7, 8);
  asm volatile("" ::: "memory");
  return r;
}

}  // namespace engine_test

namespace {

using namespace engine_test;

class ISA_SUITE(Strategy)
    : public ISA_SUITE(Engine),
      public ::testing::WithParamInterface<std::tuple<ftjit_strategy, int>> {
 protected:
  ftjit_strategy strategy() const { return std::get<0>(GetParam()); }
  const Layout& layout() const { return kLayouts[std::get<1>(GetParam())]; }
  // call-ops needs the literal: on the other layouts the attach is refused
  // with the flags that make one, and nothing is patched.
  bool needs_missing_literal() const {
    return strategy() == FTJIT_STRATEGY_CALL_OPS && !layout().literal;
  }
  void expect_refusal(ftjit_status st, const void* fn, const std::vector<uint8_t>& before) {
    EXPECT_EQ(st, FTJIT_E_UNSUPPORTED);
    EXPECT_NE(std::string(ftjit_last_error()).find(FTJIT_TRACED_LITERAL_FLAGS), std::string::npos)
        << ftjit_last_error();
    EXPECT_EQ(site_bytes(fn), before) << "a refused attach patched the site";
  }
};

// Attaches, or checks the refusal of call-ops without a literal and ends
// the test.
#define ATTACH_OR_RETURN(ops, pattern, fn)                                        \
  do {                                                                            \
    const auto before_ = site_bytes(reinterpret_cast<const void*>(fn));            \
    const ftjit_status st_ = attach(ops, pattern);                                \
    if (needs_missing_literal()) {                                                \
      expect_refusal(st_, reinterpret_cast<const void*>(fn), before_);            \
      return;                                                                     \
    }                                                                             \
    ASSERT_EQ(st_, FTJIT_OK) << (pattern) << ": " << ftjit_last_error();          \
  } while (0)

TEST_P(ISA_SUITE(Strategy), EntrySeesIpParentArgumentsAndSp) {
  const Layout& l = layout();
  const auto before = site_bytes(reinterpret_cast<const void*>(l.sum8));
  Recorder r;
  init_recorder(&r, strategy(), false);
  ATTACH_OR_RETURN(&r.ops, std::string(l.prefix) + "_sum8", l.sum8);
  EXPECT_EQ(ftjit_ops_site_count(engine_, &r.ops), 1);
  EXPECT_NE(site_bytes(reinterpret_cast<const void*>(l.sum8)), before) << "nothing was patched";
  EXPECT_EQ(call_sum8(l), kSum8);
  ASSERT_EQ(r.calls.size(), 1u);
  const Call& c = r.calls[0];
  // The ip is the site's start: the entry, or past the landing pad.
  const auto fn = reinterpret_cast<uint64_t>(l.sum8);
  EXPECT_EQ(c.ip, fn + l.pad) << std::hex << c.ip << " vs " << fn;
  EXPECT_EQ(std::string(ftjit_site_name(engine_, c.ip)), std::string(l.prefix) + "_sum8");
  const auto caller = reinterpret_cast<uint64_t>(&call_sum8);
  EXPECT_GT(c.parent_ip, caller);
  EXPECT_LT(c.parent_ip, caller + 256);
  for (int i = 0; i < 8; ++i) EXPECT_EQ(c.arg[i], static_cast<uint64_t>(i + 1)) << "argument " << i;
  EXPECT_EQ(c.sp % 16, 0u);

  ASSERT_EQ(ftjit_detach(engine_, &r.ops), FTJIT_OK) << ftjit_last_error();
  EXPECT_EQ(call_sum8(l), kSum8);
  EXPECT_EQ(r.calls.size(), 1u) << "a callback after detach";
  EXPECT_EQ(site_bytes(reinterpret_cast<const void*>(l.sum8)), before);
}

TEST_P(ISA_SUITE(Strategy), CallbackMayChangeArguments) {
  const Layout& l = layout();
  ftjit_ops ops;
  ftjit_ops_init(&ops);
  ops.strategy = strategy();
  ops.func = [](uint64_t, uint64_t, ftjit_ops*, ftjit_regs* regs) { regs->arg[7] = 100; };
  ATTACH_OR_RETURN(&ops, std::string(l.prefix) + "_sum8", l.sum8);
  EXPECT_EQ(call_sum8(l), kSum8 - 64 + 800);
  ASSERT_EQ(ftjit_detach(engine_, &ops), FTJIT_OK);
  EXPECT_EQ(call_sum8(l), kSum8);
}

TEST_P(ISA_SUITE(Strategy), FloatingPointAndAggregatesSurviveTheTrampoline) {
  const Layout& l = layout();
  Recorder r;
  init_recorder(&r, strategy(), false);
  for (const char* f : {"_fsum8", "_pair", "_fpair", "_hfa4", "_big"}) {
    ATTACH_OR_RETURN(&r.ops, std::string(l.prefix) + f, l.fsum8);
    auto* volatile fsum8 = l.fsum8;
    auto* volatile pair = l.pair;
    auto* volatile fpair = l.fpair;
    auto* volatile hfa4 = l.hfa4;
    auto* volatile big = l.big;
    EXPECT_EQ(fsum8(0.5, 1, 2, 3, 4, 5, 6, 7), 0.5 + 2 + 6 + 12 + 20 + 30 + 42 + 56) << f;
    const traced_pair p = pair(7);
    EXPECT_EQ(p.lo, 21);
    EXPECT_EQ(p.hi, 36);
    const traced_fpair fp = fpair(3.0);
    EXPECT_EQ(fp.a, 3.5);
    EXPECT_EQ(fp.b, 6.0);
    const traced_hfa4 h = hfa4(3.0);
    EXPECT_EQ(h.a, 3.5);
    EXPECT_EQ(h.b, 6.0);
    EXPECT_EQ(h.c, -4.25);
    EXPECT_EQ(h.d, 9.0);
    const traced_big b = big(11);  // the result's address comes in a register
    for (int i = 0; i < 5; ++i) EXPECT_EQ(b.v[i], 11 * (i + 1)) << f;
    ASSERT_EQ(ftjit_detach(engine_, &r.ops), FTJIT_OK);
  }
  EXPECT_EQ(r.calls.size(), 5u);
}

TEST_P(ISA_SUITE(Strategy), ExitSeesReturnRegistersAndTheSameIps) {
  const Layout& l = layout();
  Recorder r;
  init_recorder(&r, strategy(), true);
  ftjit_stats before;  // the counters are the process's, over every engine
  ftjit_get_stats(engine_, &before);
  ATTACH_OR_RETURN(&r.ops, std::string(l.prefix) + "_*", l.sum8);
  auto* volatile pair = l.pair;
  auto* volatile fpair = l.fpair;
  auto* volatile hfa4 = l.hfa4;
  EXPECT_EQ(call_sum8(l), kSum8);
  const traced_pair p = pair(5);
  const traced_fpair fp = fpair(2.0);
  const traced_hfa4 h = hfa4(2.0);
  EXPECT_EQ(p.lo, 15);
  EXPECT_EQ(p.hi, 26);
  EXPECT_EQ(fp.a, 2.5);
  EXPECT_EQ(fp.b, 4.0);
  EXPECT_EQ(h.a, 2.5);
  EXPECT_EQ(h.d, 4.0);
  EXPECT_EQ(ftjit_shadow_depth(), 0u);
  ASSERT_EQ(r.calls.size(), 4u);
  ASSERT_EQ(r.exits.size(), 4u);
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(r.exits[i].ip, r.calls[i].ip) << i;
    EXPECT_EQ(r.exits[i].parent_ip, r.calls[i].parent_ip) << i;
    EXPECT_FALSE(r.exits[i].unwound);
  }
  EXPECT_EQ(r.exits[0].ret[0], static_cast<uint64_t>(kSum8));
  EXPECT_EQ(r.exits[1].ret[0], 15u);
  EXPECT_EQ(r.exits[1].ret[1], 26u);
  EXPECT_EQ(r.exits[2].fp[0], 2.5);
  EXPECT_EQ(r.exits[2].fp[1], 4.0);
  ASSERT_EQ(ftjit_detach(engine_, &r.ops), FTJIT_OK);
  ftjit_stats st;
  ftjit_get_stats(engine_, &st);
  EXPECT_EQ(st.exit_hooks - before.exit_hooks, 4u);
  EXPECT_EQ(st.frames_unwound - before.frames_unwound, 0u);
}

std::string strategy_param_name(
    const ::testing::TestParamInfo<std::tuple<ftjit_strategy, int>>& info) {
  std::string name = ftjit_strategy_name(std::get<0>(info.param));
  for (char& c : name) {
    if (c == '-') c = '_';
  }
  return name + "_" + kLayouts[std::get<1>(info.param)].name;
}

INSTANTIATE_FOR_ISA(
    AllStrategies, ISA_SUITE(Strategy),
    ::testing::Combine(::testing::Values(FTJIT_STRATEGY_LIST, FTJIT_STRATEGY_CALL_OPS,
                                         FTJIT_STRATEGY_GENERATED, FTJIT_STRATEGY_AUTO),
                       ::testing::Range(0, static_cast<int>(kLayouts.size()))),
    strategy_param_name);

// A direct trampoline alone on a site, then sharing it with a list ops
// (the site then calls the list trampoline, which goes on to the direct
// one as the site would have).
TEST_F(ISA_SUITE(Engine), DirectAloneAndSharingASite) {
  for (const Layout& l : kLayouts) {
    const auto before = site_bytes(reinterpret_cast<const void*>(l.sum8));
    test_direct_calls = 0;
    ftjit_ops direct;
    ftjit_ops_init(&direct);
    direct.strategy = FTJIT_STRATEGY_DIRECT;
    direct.direct_trampoline = reinterpret_cast<const void*>(test_direct_trampoline);
    ASSERT_EQ(attach(&direct, std::string(l.prefix) + "_sum8"), FTJIT_OK) << ftjit_last_error();
    EXPECT_EQ(call_sum8(l), kSum8);
    EXPECT_EQ(test_direct_calls, 1u) << l.name;
    Recorder r;
    init_recorder(&r, FTJIT_STRATEGY_LIST, false);
    ASSERT_EQ(attach(&r.ops, std::string(l.prefix) + "_sum8"), FTJIT_OK) << ftjit_last_error();
    EXPECT_EQ(call_sum8(l), kSum8);
    EXPECT_EQ(test_direct_calls, 2u) << l.name;
    ASSERT_EQ(r.calls.size(), 1u);
    EXPECT_EQ(r.calls[0].arg[7], 8u);
    ASSERT_EQ(ftjit_detach(engine_, &direct), FTJIT_OK);
    EXPECT_EQ(call_sum8(l), kSum8);
    EXPECT_EQ(test_direct_calls, 2u);
    EXPECT_EQ(r.calls.size(), 2u);
    ASSERT_EQ(ftjit_detach(engine_, &r.ops), FTJIT_OK);
    EXPECT_EQ(site_bytes(reinterpret_cast<const void*>(l.sum8)), before) << l.name;
  }
}

// Deep recursion through hooked frames is in the exit-hook programs; here,
// nesting: a callback that calls traced code runs it untraced (counted).
TEST_F(ISA_SUITE(Engine), TracedCallsInsideACallbackRunUntraced) {
  static std::atomic<int> inner{0};
  ftjit_ops ops;
  ftjit_ops_init(&ops);
  ops.func = [](uint64_t, uint64_t, ftjit_ops*, ftjit_regs*) {
    inner += static_cast<int>(kLayouts[0].leaf(1));  // traced too
  };
  ASSERT_EQ(attach(&ops, std::string(kLayouts[0].prefix) + "_leaf"), FTJIT_OK) << ftjit_last_error();
  auto* volatile leaf = kLayouts[0].leaf;
  EXPECT_EQ(leaf(2), 15);
  EXPECT_EQ(inner.load(), 8);
  ftjit_stats st;
  ftjit_get_stats(engine_, &st);
  EXPECT_EQ(st.recursion_drops, 1u);
  ASSERT_EQ(ftjit_detach(engine_, &ops), FTJIT_OK);
}

// qemu-user never sees a write through the writable alias in what it
// translated from the executable one: code memory must be remapped after
// each write there (runtime/code_memory.h). Whatever the model, code
// written three times runs as written each time (1 and 2: the values every
// ISA's write_return_constant has, the code-write probe's two functions).
TEST(ISA_SUITE(CodeMemory), WrittenCodeRunsAsWritten) {
  const ftjit::CodeWriteModel model = ftjit::code_write_model();
  std::printf("code writes: %s\n", ftjit::code_write_model_name(model));
  auto arena = ftjit::CodeArena::create_near(reinterpret_cast<uint64_t>(kLayouts[0].leaf),
                                             64ll << 20, 4096);
  ASSERT_TRUE(arena) << arena.error().message;
  const uint64_t at = (*arena)->allocate(16, 8);
  ASSERT_NE(at, 0u);
  using Fn = uint32_t (*)();
  for (uint16_t v : {1, 2, 1}) {
    ftjit::arch::write_return_constant((*arena)->rw(at), v);
    ASSERT_TRUE(ftjit::publish_code(at, 8));
    EXPECT_EQ(reinterpret_cast<Fn>(at)(), v);
  }
}

// Unused arena memory traps (tests/common/arena_traps.h).
TEST(ISA_SUITE(CodeMemory), UnusedArenaMemoryTraps) {
  ftjit::testing::expect_unused_arena_memory_traps(reinterpret_cast<uint64_t>(kLayouts[0].leaf), 64ll << 20);
}

// A detach must not free a trampoline a thread is still inside: its grace
// period reads other threads' counters, which under qemu cannot go through
// process_vm_readv.
TEST_F(ISA_SUITE(Engine), DetachWaitsForAThreadInsideACallback) {
  static std::atomic<int> inside{0};
  static std::atomic<bool> release{false};
  inside = 0;
  release = false;
  ASSERT_GE(kLayouts.size(), 2u);
  const Layout& l = kLayouts[1];  // the one TracedCallsInsideACallbackRunUntraced leaves alone
  ftjit_ops ops;
  ftjit_ops_init(&ops);
  ops.strategy = FTJIT_STRATEGY_GENERATED;
  ops.func = [](uint64_t, uint64_t, ftjit_ops*, ftjit_regs*) {
    inside = 1;
    while (!release.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  };
  ASSERT_EQ(attach(&ops, std::string(l.prefix) + "_leaf"), FTJIT_OK) << ftjit_last_error();
  int64_t result = 0;
  std::thread caller([&] {
    auto* volatile leaf = l.leaf;
    result = leaf(6);
  });
  while (inside.load() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  std::atomic<bool> detached{false};
  ftjit_status st = FTJIT_E_INTERNAL;
  std::thread detacher([&] {
    st = ftjit_detach(engine_, &ops);
    detached = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_FALSE(detached.load()) << "detach returned while a thread was inside the callback";
  release = true;
  caller.join();
  detacher.join();
  EXPECT_EQ(st, FTJIT_OK) << ftjit_last_error();
  EXPECT_EQ(result, 43);
}

}  // namespace
