// SPDX-License-Identifier: MIT
// ftjit-demo: a multi-threaded program that traces itself. Worker threads
// run the workload; while they run, the main thread attaches a counting
// tracer to every demo_* function, lets it count for a while, prints the top
// functions, detaches, and checks that the code is byte-for-byte restored
// and that the workers computed the same checksums as an untraced run.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "demo/workload.h"
#include "ftjit/ftjit.h"

namespace {

constexpr int kThreads = 4;
constexpr int kBatches = 400;
constexpr size_t kBatchSize = 2000;

// Per-function counters in a fixed open-addressing table keyed by entry
// address. The callback runs on the traced threads: it claims a slot with
// one compare-exchange the first time and then only increments. No locks.
struct Counts {
  static constexpr size_t kSlots = 1024;
  std::atomic<uint64_t> ip[kSlots] = {};
  std::atomic<uint64_t> calls[kSlots] = {};
};

void count_call(uint64_t ip, uint64_t, ftjit_ops* ops, ftjit_regs*) {
  auto* c = static_cast<Counts*>(ops->private_data);
  for (size_t i = (ip >> 4) % Counts::kSlots, n = 0; n < Counts::kSlots;
       i = (i + 1) % Counts::kSlots, ++n) {
    uint64_t cur = c->ip[i].load(std::memory_order_acquire);
    if (cur == 0 && c->ip[i].compare_exchange_strong(cur, ip)) cur = ip;
    if (cur == ip) {
      c->calls[i].fetch_add(1, std::memory_order_relaxed);
      return;
    }
  }
}

uint64_t run_workers(std::atomic<int>* done) {
  std::vector<std::thread> threads;
  std::vector<uint64_t> sums(kThreads);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([t, &sums, done] {
      uint64_t s = 0;
      for (int b = 0; b < kBatches; ++b) s += demo_process_batch(static_cast<uint32_t>(t * 100000 + b), kBatchSize);
      sums[t] = s;
      done->fetch_add(1);
    });
  }
  for (auto& th : threads) th.join();
  uint64_t total = 0;
  for (uint64_t s : sums) total ^= s;
  return total;
}

std::string name_of(ftjit_engine* engine, uint64_t ip) {
  if (const char* n = ftjit_site_name(engine, ip)) return n;
  char b[32];
  snprintf(b, sizeof b, "0x%llx", static_cast<unsigned long long>(ip));
  return b;
}

}  // namespace

int main() {
  std::atomic<int> done{0};
  printf("ftjit demo: %d threads x %d batches, untraced reference run...\n", kThreads, kBatches);
  uint64_t reference = run_workers(&done);

  ftjit_engine* engine = ftjit_engine_create(nullptr);
  if (!engine) {
    fprintf(stderr, "ftjit-demo: %s\n", ftjit_last_error());
    return 1;
  }
  ftjit_stats st;
  ftjit_get_stats(engine, &st);
  printf("discovered %llu patchable sites\n", static_cast<unsigned long long>(st.sites));

  Counts counts;
  ftjit_ops ops;
  ftjit_ops_init(&ops);
  ops.func = count_call;
  ops.private_data = &counts;
  const char* include[] = {"demo_*"};
  ftjit_filter filter{include, 1, nullptr, 0};

  done = 0;
  uint64_t traced_sum = 0;
  std::thread runner([&] { traced_sum = run_workers(&done); });
  // Attach while the workers run, count for a while, detach while they run.
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  auto t0 = std::chrono::steady_clock::now();
  if (ftjit_attach(engine, &ops, &filter) != FTJIT_OK) {
    fprintf(stderr, "ftjit-demo: attach: %s\n", ftjit_last_error());
    runner.join();
    return 1;
  }
  auto t1 = std::chrono::steady_clock::now();
  printf("attached 'count' to %ld functions in %.3f ms while %d threads ran\n",
         ftjit_ops_site_count(engine, &ops),
         std::chrono::duration<double, std::milli>(t1 - t0).count(), kThreads);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  if (ftjit_detach(engine, &ops) != FTJIT_OK) {
    fprintf(stderr, "ftjit-demo: detach: %s\n", ftjit_last_error());
    runner.join();
    return 1;
  }
  printf("detached; workers still running: %d of %d finished\n", done.load(), kThreads);
  runner.join();

  std::vector<std::pair<uint64_t, uint64_t>> top;
  for (size_t i = 0; i < Counts::kSlots; ++i) {
    if (counts.ip[i] != 0) top.push_back({counts.calls[i].load(), counts.ip[i].load()});
  }
  std::sort(top.rbegin(), top.rend());
  printf("\n%-28s %12s\n", "FUNCTION", "CALLS");
  for (auto& [n, ip] : top) {
    printf("%-28s %12llu\n", name_of(engine, ip).c_str(), static_cast<unsigned long long>(n));
  }
  ftjit_engine_destroy(engine);
  bool same = traced_sum == reference;
  printf("\nchecksum traced run %s untraced run (%016llx)\n", same ? "==" : "!=",
         static_cast<unsigned long long>(traced_sum));
  return same && !top.empty() ? 0 : 1;
}
