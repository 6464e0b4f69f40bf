// SPDX-License-Identifier: MIT
// Concurrency: four threads call a thousand traced functions in loops while
// the main thread attaches, detaches and re-filters four ops (one per
// strategy) thousands of times. Whenever the attachment is stable for the
// whole of a batch of calls, every call must have reached exactly the ops
// that select its function; at the end the code must be byte-for-byte what
// the compiler emitted.
//
// Stability is a seqlock: the controller makes g_seq odd before it changes
// anything and even again after ftjit_* returned (the change is then fully
// applied and synced). A worker's batch is checked when it saw the same even
// value before and after it. Callbacks run on the calling thread, so each
// worker counts the hits of its own calls in thread-local counters.
//
// Two of the ops (generated and list) also hook exits: in a stable stretch
// every call they enter must also leave through their exit callback, and
// no frame may be reported unwound.
#include <fnmatch.h>
#include <sched.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "ftjit/ftjit.h"
#include "tests/e2e/traced.h"

namespace {

constexpr int kWorkers = 4;
constexpr int kOps = 4;
constexpr int kFns = TRACED_MANY;
constexpr int kBatch = 256;

const char* const kShapes[] = {"traced_many_%d*", "traced_many_*%d", "traced_many_1%d?",
                               "traced_many_[%d-9]*", "traced_many_*"};
constexpr int kGlobs = 5 * 10;

std::array<std::string, kGlobs> g_globs;
std::array<std::array<bool, kFns>, kGlobs> g_selects;  // oracle: fnmatch(3)

std::atomic<uint64_t> g_seq{0};
std::array<std::atomic<int>, kOps> g_glob_of;  // -1: detached
std::atomic<bool> g_stop{false};

constexpr bool kHooksExit[kOps] = {true, false, true, false};

thread_local std::array<uint64_t, kOps> t_hits{};
thread_local std::array<uint64_t, kOps> t_exits{};
thread_local uint64_t t_unwound = 0;

void count_hit(uint64_t, uint64_t, ftjit_ops* ops, ftjit_regs*) {
  ++t_hits[reinterpret_cast<uintptr_t>(ops->private_data)];
}

void count_exit(uint64_t, uint64_t, ftjit_ops* ops, ftjit_ret_regs* ret) {
  ++t_exits[reinterpret_cast<uintptr_t>(ops->private_data)];
  if (ret == nullptr) ++t_unwound;
}

struct WorkerResult {
  uint64_t calls = 0, checked = 0, wrong_results = 0, wrong_hits = 0, unwound = 0;
  uint32_t shadow_depth_at_end = 0;
  std::string first_error;
};

void worker_main(WorkerResult* r, int id) {
  uint64_t j = static_cast<uint64_t>(id) * 7919;
  std::array<int, kOps> globs;
  std::array<int, kBatch> fns;
  std::array<std::array<uint8_t, kOps>, kBatch> hits;
  std::array<std::array<uint8_t, kOps>, kBatch> exits;
  while (!g_stop.load(std::memory_order_relaxed)) {
    uint64_t s1 = g_seq.load(std::memory_order_acquire);
    for (int o = 0; o < kOps; ++o) globs[o] = g_glob_of[o].load(std::memory_order_acquire);
    for (int k = 0; k < kBatch; ++k, ++j) {
      int f = static_cast<int>((j * 13) % kFns);
      int arg = static_cast<int>(j & 0xffff);
      auto before = t_hits;
      auto exits_before = t_exits;
      if (traced_many[f](arg) != arg + 100 + f) ++r->wrong_results;
      fns[k] = f;
      for (int o = 0; o < kOps; ++o) {
        hits[k][o] = static_cast<uint8_t>(t_hits[o] - before[o]);
        exits[k][o] = static_cast<uint8_t>(t_exits[o] - exits_before[o]);
      }
    }
    r->calls += kBatch;
    uint64_t s2 = g_seq.load(std::memory_order_acquire);
#if defined(__SANITIZE_THREAD__)
    // TSan delivers asynchronous signals (ftjit's control signal) only when
    // a thread enters one of its interceptors: give it one per batch.
    sched_yield();
#endif
    if (s1 != s2 || (s1 & 1)) continue;  // the attachment changed meanwhile
    for (int k = 0; k < kBatch; ++k) {
      for (int o = 0; o < kOps; ++o) {
        int want = globs[o] >= 0 && g_selects[globs[o]][fns[k]] ? 1 : 0;
        int want_exit = kHooksExit[o] ? want : 0;
        if ((hits[k][o] != want || exits[k][o] != want_exit) && r->wrong_hits++ == 0) {
          r->first_error = "ops " + std::to_string(o) + " glob " +
                           (globs[o] >= 0 ? g_globs[globs[o]] : std::string("-")) +
                           " traced_many_" + std::to_string(fns[k] + 100) + ": " +
                           std::to_string(hits[k][o]) + " hits and " +
                           std::to_string(exits[k][o]) + " exits, want " +
                           std::to_string(want) + " and " + std::to_string(want_exit);
        }
      }
    }
    r->checked += kBatch;
  }
  r->unwound = t_unwound;
  r->shadow_depth_at_end = ftjit_shadow_depth();
}

std::vector<uint8_t> snapshot_code() {
  std::vector<uint8_t> out;
  for (int i = 0; i < kFns; ++i) {
    uintptr_t at = reinterpret_cast<uintptr_t>(traced_many[i]);
    asm("" : "+r"(at));
    // The slot (x86-64) or literal (arm64), 8 bytes before the entry, and
    // the sled after it (5 bytes; 8 on arm64).
    const auto* p = reinterpret_cast<const uint8_t*>(at - 8);
    out.insert(out.end(), p, p + 16);
  }
  return out;
}

TEST(Stress, AttachDetachRefilterWhileFourThreadsCall) {
  for (int s = 0; s < 5; ++s) {
    for (int d = 0; d < 10; ++d) {
      char buf[64];
      snprintf(buf, sizeof buf, kShapes[s], d);
      int g = s * 10 + d;
      g_globs[g] = buf;
      for (int f = 0; f < kFns; ++f) {
        std::string name = "traced_many_" + std::to_string(f + 100);
        g_selects[g][f] = fnmatch(buf, name.c_str(), 0) == 0;
      }
    }
  }
  for (auto& g : g_glob_of) g = -1;
  const auto original = snapshot_code();

  int iterations = 3000;
  if (const char* env = getenv("FTJIT_STRESS_ITERATIONS")) iterations = atoi(env);

  std::vector<WorkerResult> results(kWorkers);
  std::vector<std::thread> threads;
  for (int i = 0; i < kWorkers; ++i) threads.emplace_back(worker_main, &results[i], i);

  ftjit_engine* engine = ftjit_engine_create(nullptr);
  ASSERT_NE(engine, nullptr) << ftjit_last_error();

  const ftjit_strategy strategies[kOps] = {FTJIT_STRATEGY_GENERATED, FTJIT_STRATEGY_CALL_OPS,
                                           FTJIT_STRATEGY_LIST, FTJIT_STRATEGY_AUTO};
  std::array<ftjit_ops, kOps> ops;
  for (int i = 0; i < kOps; ++i) {
    ftjit_ops_init(&ops[i]);
    ops[i].func = count_hit;
    if (kHooksExit[i]) ops[i].exit_func = count_exit;
    ops[i].private_data = reinterpret_cast<void*>(static_cast<uintptr_t>(i));
    ops[i].strategy = strategies[i];
    if (i == 3) ops[i].flags = FTJIT_OPS_F_NO_FP;
  }

  std::mt19937 rng(12345);
  int attaches = 0, detaches = 0, refilters = 0;
  for (int it = 0; it < iterations; ++it) {
    int i = static_cast<int>(rng() % kOps);
    int g = static_cast<int>(rng() % kGlobs);
    const char* inc[] = {g_globs[g].c_str()};
    ftjit_filter f{inc, 1, nullptr, 0};
    bool attached = g_glob_of[i] >= 0;
    g_seq.fetch_add(1, std::memory_order_acq_rel);  // odd: changing
    ftjit_status st;
    if (!attached) {
      st = ftjit_attach(engine, &ops[i], &f);
      if (st == FTJIT_OK) g_glob_of[i] = g, ++attaches;
    } else if (rng() % 3 == 0) {
      st = ftjit_detach(engine, &ops[i]);
      if (st == FTJIT_OK) g_glob_of[i] = -1, ++detaches;
    } else {
      st = ftjit_set_filter(engine, &ops[i], &f);
      if (st == FTJIT_OK) g_glob_of[i] = g, ++refilters;
    }
    g_seq.fetch_add(1, std::memory_order_acq_rel);  // even: stable
    bool selects_any = std::find(g_selects[g].begin(), g_selects[g].end(), true) != g_selects[g].end();
    if (st == FTJIT_E_NO_MATCH && !attached) {
      ASSERT_FALSE(selects_any) << g_globs[g] << ": " << ftjit_last_error();
    } else if (st == FTJIT_E_NO_MATCH) {
      ASSERT_FALSE(selects_any) << g_globs[g] << ": " << ftjit_last_error();
    } else {
      ASSERT_EQ(st, FTJIT_OK) << ftjit_status_name(st) << ": " << ftjit_last_error();
    }
    // Let the workers run a stable stretch now and then.
    if (it % 8 == 0) std::this_thread::yield();
  }
  // A last stable stretch, long enough for every worker to check batches.
  std::this_thread::sleep_for(std::chrono::milliseconds(50));

  for (int i = 0; i < kOps; ++i) {
    if (g_glob_of[i] < 0) continue;
    g_seq.fetch_add(1, std::memory_order_acq_rel);
    ASSERT_EQ(ftjit_detach(engine, &ops[i]), FTJIT_OK) << ftjit_last_error();
    g_glob_of[i] = -1;
    g_seq.fetch_add(1, std::memory_order_acq_rel);
  }
  ftjit_stats stats;
  ftjit_get_stats(engine, &stats);
  EXPECT_EQ(stats.sites_enabled, 0u);
  ftjit_engine_destroy(engine);

  g_stop = true;
  for (auto& t : threads) t.join();
  WorkerResult total;
  for (const auto& r : results) {
    total.calls += r.calls;
    total.checked += r.checked;
    total.wrong_results += r.wrong_results;
    total.wrong_hits += r.wrong_hits;
    total.unwound += r.unwound;
    total.shadow_depth_at_end += r.shadow_depth_at_end;
    if (total.first_error.empty()) total.first_error = r.first_error;
  }
  EXPECT_EQ(total.wrong_results, 0u);
  EXPECT_EQ(total.wrong_hits, 0u) << total.first_error;
  EXPECT_EQ(total.unwound, 0u) << "frames reported unwound in a program that never unwinds";
  EXPECT_EQ(total.shadow_depth_at_end, 0u) << "hooked frames left on a shadow stack";
  EXPECT_GT(stats.exit_hooks, 0u);
  EXPECT_GT(total.checked, 0u);
  EXPECT_EQ(snapshot_code(), original) << "code differs from the compiler's after the last detach";
  printf("stress: %d changes (%d attach, %d detach, %d set_filter), %llu calls, %llu checked "
         "exactly in stable stretches, %llu traps emulated, %llu grace periods\n",
         iterations, attaches, detaches, refilters, static_cast<unsigned long long>(total.calls),
         static_cast<unsigned long long>(total.checked),
         static_cast<unsigned long long>(stats.traps_emulated),
         static_cast<unsigned long long>(stats.grace_periods));
}

}  // namespace
