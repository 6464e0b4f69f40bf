// SPDX-License-Identifier: MIT
// The relocated section: what a relocated entry costs against a sled, on
// one body compiled twice (bench_body_sled with a sled, bench_body_relocated
// without: FTJIT_OPS_F_RELOCATE moves its prologue into a stub). Per
// tracer kind: a counting callback (generated trampoline), inline count
// and inline latency. Each row: ns per traced call (median of the
// repetitions) and that over the same function's untraced call; the ratio
// column is relocated over sled, traced, measured in the same run.
#include <cinttypes>
#include <string>

#include "bench/bench.h"
#include "bench/bench_target.h"

namespace ftjit_bench {
namespace {

struct Kind {
  const char* name;
  std::uint32_t inline_entry;
  bool exit_hook;
};

void count_inline(std::uint64_t, std::uint64_t count, void* arg) { *static_cast<std::uint64_t*>(arg) += count; }
void sum_histograms(const ftjit_inline_histogram* h, void* arg) { *static_cast<std::uint64_t*>(arg) += h->calls; }
extern "C" void bench_reloc_exit(std::uint64_t, std::uint64_t, ftjit_ops*, ftjit_ret_regs*) {}

Summary time_fn(const BenchOptions& opts, LeafFn fn) {
  time_calls(fn, warmup_calls(opts.calls), opts.cpu_clock);
  std::vector<double> per_call;
  for (int rep = 0; rep < opts.reps; ++rep)
    per_call.push_back(time_calls(fn, opts.calls, opts.cpu_clock) / static_cast<double>(opts.calls));
  return summarize(per_call);
}

}  // namespace

void run_relocated_section(const BenchOptions& opts, Report& report) {
  Table& table = report.table("relocated", "relocated entry vs sled, same body (ns/call)");
  table.notes.push_back(
      "bench_body_relocated has no sled: its prologue runs from a stub (ftjit list --relocate); "
      "bench_body_sled is the same body with one. ratio = traced relocated / traced sled, same run");
  std::string error;
  auto engine = Engine::create(FTJIT_STRATEGY_GENERATED, &error);
  if (!engine) {
    report.add_error("relocated: " + error);
    return;
  }
  const Summary base_sled = time_fn(opts, &bench_body_sled);
  const Summary base_reloc = time_fn(opts, &bench_body_relocated);
  const Kind kinds[] = {{"callback count", FTJIT_INLINE_NONE, false},
                        {"inline count", FTJIT_INLINE_COUNT, false},
                        {"inline latency", FTJIT_INLINE_LATENCY, true}};
  for (const Kind& k : kinds) {
    double traced[2] = {0, 0};
    for (int relocated = 0; relocated < 2; ++relocated) {
      Tracer tracer(relocated ? "bench_body_relocated" : "bench_body_sled", FTJIT_STRATEGY_GENERATED,
                    relocated ? FTJIT_OPS_F_RELOCATE : 0);
      tracer.ops.inline_entry = k.inline_entry;
      if (k.exit_hook) tracer.ops.exit_func = &bench_reloc_exit;
      const ftjit_status st = tracer.attach(*engine);
      if (st != FTJIT_OK) {
        report.add_error(std::string("relocated: ") + k.name + ": attach: " + status_text(st));
        return;
      }
      LeafFn fn = relocated ? &bench_body_relocated : &bench_body_sled;
      const Summary s = time_fn(opts, fn);
      // Every call was seen: warm-up and repetitions.
      const long expect = warmup_calls(opts.calls) + opts.calls * opts.reps;
      std::uint64_t seen = tracer.hits;
      if (k.inline_entry == FTJIT_INLINE_COUNT) {
        ftjit_inline_read(engine->get(), &tracer.ops, &count_inline, &seen);
      } else if (k.inline_entry == FTJIT_INLINE_LATENCY) {
        ftjit_inline_read_histograms(engine->get(), &tracer.ops, &sum_histograms, &seen);
      }
      (void)tracer.detach();
      if (seen < static_cast<std::uint64_t>(expect)) {
        report.add_error(std::string("relocated: ") + k.name + (relocated ? " (relocated)" : " (sled)") + ": saw " +
                         std::to_string(seen) + " of " + std::to_string(expect) + " calls");
      }
      const Summary& base = relocated ? base_reloc : base_sled;
      traced[relocated] = s.median;
      table.rows.push_back(Row()
                               .set("tracer", k.name)
                               .set("entry", relocated ? "relocated" : "sled")
                               .set("traced_ns", s.median)
                               .set("min_ns", s.min)
                               .set("max_ns", s.max)
                               .set("untraced_ns", base.median)
                               .set("over_untraced_ns", s.median - base.median));
    }
    table.rows.back().set("ratio", traced[0] > 0 ? traced[1] / traced[0] : 0.0);
  }
}

}  // namespace ftjit_bench
