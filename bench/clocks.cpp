// SPDX-License-Identifier: MIT
// What one clock read costs: the floor under every timestamped event (the
// trace and latency plugins read the host's clock at each entry and exit).
// Printed with the plugins section.
#include <time.h>

#include <string>
#include <vector>

#include "bench/bench.h"
#include "bench_isa.h"  // bench/<isa>/: the cycle counter
#include "runtime/cycle_clock.h"

namespace ftjit_bench {
namespace {

// One clock read each, behind the same call as bench_leaf's: what a
// timestamp adds to an event is the per-call time minus the untraced leaf's.
__attribute__((noinline)) int read_cycle_counter(int) {
  return static_cast<int>(isa::read_cycle_counter());
}
__attribute__((noinline)) int read_host_clock(int) {
  return static_cast<int>(ftjit::monotonic_ns());
}
__attribute__((noinline)) int read_clock_gettime(int) {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int>(ts.tv_nsec);
}

}  // namespace

void run_clock_rows(const BenchOptions& opts, Report& report, const Summary& base) {
  ftjit::calibrate_cycle_clock();  // a no-op after a session started
  Table& table = report.table("clocks", "plugins: one clock read (ns)");
  table.notes.push_back(
      std::string("per read, over the untraced bench_leaf call of the same run; the host clock is "
                  "CLOCK_MONOTONIC from ") +
      isa::kCycleCounterSource + " (else clock_gettime)");
  const struct {
    const char* name;
    LeafFn fn;
  } clocks[] = {
      {isa::kCycleCounterName, &read_cycle_counter},
      {"host now_ns (what plugins read)", &read_host_clock},
      {"clock_gettime(CLOCK_MONOTONIC)", &read_clock_gettime},
  };
  for (const auto& c : clocks) {
    time_calls(c.fn, warmup_calls(opts.calls), opts.cpu_clock);
    std::vector<double> per_call;
    for (int rep = 0; rep < opts.reps; ++rep) {
      per_call.push_back(time_calls(c.fn, opts.calls, opts.cpu_clock) /
                         static_cast<double>(opts.calls));
    }
    const Summary s = summarize(per_call);
    table.rows.push_back(Row()
                             .set("clock", c.name)
                             .set("ns_per_read", s.median - base.median)
                             .set("min_ns", s.min - base.median)
                             .set("max_ns", s.max - base.median));
  }
}

}  // namespace ftjit_bench
