// SPDX-License-Identifier: MIT
// "hooks" section: what an exit hook costs per call, next to the entry-only
// tracer it extends, on bench_leaf, for each strategy that can carry one.
//
// Method: one engine; baseline = bench_leaf with no ops, measured in the
// same run before and after the hooked rows (pooled); per row: attach, warm
// up, K timed repetitions of N calls, each checked exactly (N entries, and
// N exits for exit rows, none unwound, shadow stack empty afterwards),
// detach. "overhead" = per-call median minus the baseline median.
#include <algorithm>
#include <atomic>
#include <string>
#include <vector>

#include "bench/bench.h"
#include "bench/bench_target.h"

extern "C" int ftjit_bench_ra_floor(int x);  // ra_floor.S

namespace ftjit_bench {
namespace {

struct HookCounts {
  std::uint64_t entries = 0;
  std::uint64_t exits = 0;
  std::uint64_t unwound = 0;
};

// Empty apart from counting, like the seed's "empty handler": the cost
// measured is the hook machinery's.
__attribute__((noinline)) void count_entry(std::uint64_t, std::uint64_t, ftjit_ops *ops,
                                           ftjit_regs *) {
  ++static_cast<HookCounts *>(ops->private_data)->entries;
}
__attribute__((noinline)) void count_exit(std::uint64_t, std::uint64_t, ftjit_ops *ops,
                                          ftjit_ret_regs *ret) {
  auto *c = static_cast<HookCounts *>(ops->private_data);
  ++c->exits;
  if (ret == nullptr) ++c->unwound;
}

struct HookRow {
  const char *name;
  ftjit_strategy strategy;
  bool exit;
  std::uint32_t flags;
  ftjit_saves saves = FTJIT_SAVES_AUTO;  // auto: all for bench_leaf's module
};

// The saves_abi row first: its trampolines are the only ones in a fresh
// arena, and after the other rows it measured 1-3 ns more in some runs
// (what ran before it in the process, not what it runs: the README's
// layout note).
constexpr HookRow kRows[] = {
    {"entry+exit saves_abi", FTJIT_STRATEGY_GENERATED, true, 0, FTJIT_SAVES_ABI},
    {"entry", FTJIT_STRATEGY_GENERATED, false, 0},
    {"entry+exit", FTJIT_STRATEGY_GENERATED, true, 0},
    {"entry+exit saves_all", FTJIT_STRATEGY_GENERATED, true, 0, FTJIT_SAVES_ALL},
    {"entry+exit no_fp", FTJIT_STRATEGY_GENERATED, true, FTJIT_OPS_F_NO_FP},
    {"entry+exit", FTJIT_STRATEGY_CALL_OPS, true, 0},
    {"entry+exit", FTJIT_STRATEGY_LIST, true, 0},
};

}  // namespace

void run_hooks_section(const BenchOptions &opts, Report &report) {
  std::string error;
  auto engine = Engine::create(FTJIT_STRATEGY_AUTO, &error);
  if (!engine) {
    report.add_error("hooks: " + error);
    return;
  }
  Table &table = report.table("hooks", "hooks: entry and exit hooks on bench_leaf (ns per call)");
  table.notes.push_back(
      "exit hooks replace the return address (shadow stack); the site jumps to a stub and the "
      "trampoline calls the body, so the return is predicted; overhead = per-call minus the "
      "untraced bench_leaf of the same run");
  table.notes.push_back(
      "floor: a leaf that replaces its own return address and jumps back, no callback: the "
      "CPU's price for a return its return-stack predictor did not expect, which an exit hook "
      "that only replaces the return address would pay once per call (ftjit's do not)");

  std::vector<double> untraced = time_reps(opts, &bench_leaf);
  if (ftjit_bench_ra_floor(4) != 13) report.add_error("hooks: ra_floor leaf computes wrongly");
  const Summary floor = summarize(time_reps(opts, &ftjit_bench_ra_floor));
  struct Measured {
    const HookRow *row;
    Summary s;
  };
  std::vector<Measured> measured;
  for (const HookRow &row : kRows) {
    HookCounts counts;
    ftjit_ops ops;
    ftjit_ops_init(&ops);
    ops.func = count_entry;
    ops.exit_func = row.exit ? count_exit : nullptr;
    ops.private_data = &counts;
    ops.strategy = row.strategy;
    ops.flags = row.flags;
    const char *pattern = "bench_leaf";
    ftjit_filter filter{&pattern, 1, nullptr, 0};
    const std::string label = std::string("hooks/") + strategy_key(row.strategy) + " " + row.name;
    if (const ftjit_status st = ftjit_engine_set_saves(engine->get(), row.saves); st != FTJIT_OK) {
      report.add_error(label + ": saves: " + status_text(st));
      continue;
    }
    if (const ftjit_status st = ftjit_attach(engine->get(), &ops, &filter); st != FTJIT_OK) {
      report.add_error(label + ": attach failed: " + status_text(st));
      continue;
    }
    std::vector<double> per_call = time_reps(opts, &bench_leaf);
    const ftjit_status st = ftjit_detach(engine->get(), &ops);
    const std::uint64_t calls =
        static_cast<std::uint64_t>(opts.calls) * static_cast<std::uint64_t>(opts.reps) +
        static_cast<std::uint64_t>(warmup_calls(opts.calls));
    if (st != FTJIT_OK) report.add_error(label + ": detach failed: " + status_text(st));
    if (counts.entries != calls || counts.exits != (row.exit ? calls : 0) || counts.unwound != 0 ||
        ftjit_shadow_depth() != 0) {
      report.add_error(label + ": counted " + std::to_string(counts.entries) + " entries, " +
                       std::to_string(counts.exits) + " exits (" + std::to_string(counts.unwound) +
                       " unwound) for " + std::to_string(calls) + " calls");
    }
    measured.push_back({&row, summarize(per_call)});
  }
  // Pooled with a second baseline after the rows: a drift in machine speed
  // during the section shows as a wider untraced min..max.
  std::vector<double> after = time_reps(opts, &bench_leaf);
  untraced.insert(untraced.end(), after.begin(), after.end());
  const Summary base = summarize(untraced);
  table.rows.push_back(Row()
                           .set("strategy", "-")
                           .set("hooks", "none (untraced)")
                           .set("per_call_ns", base.median)
                           .set("overhead_ns", 0.0)
                           .set("min_ns", base.min)
                           .set("max_ns", base.max));
  table.rows.push_back(Row()
                           .set("strategy", "-")
                           .set("hooks", "replaced return address alone (floor)")
                           .set("per_call_ns", floor.median)
                           .set("overhead_ns", floor.median - base.median)
                           .set("min_ns", floor.min)
                           .set("max_ns", floor.max));
  for (const Measured &m : measured) {
    table.rows.push_back(Row()
                             .set("strategy", strategy_key(m.row->strategy))
                             .set("hooks", m.row->name)
                             .set("per_call_ns", m.s.median)
                             .set("overhead_ns", m.s.median - base.median)
                             .set("min_ns", m.s.min)
                             .set("max_ns", m.s.max));
  }
}

}  // namespace ftjit_bench
