// SPDX-License-Identifier: MIT
// "calls" section: seed 000's table (relevant x irrelevant tracers, ns per
// call, overhead over an untraced call) for each dispatch strategy.
//
// Method, per strategy:
//   1. one engine with that default strategy;
//   2. prime: attach one tracer on bench_leaf, call once, detach: proves the
//      strategy works at all (one hit, then none) before anything is timed;
//   3. baselines: bench_leaf_untraced (no sled) and bench_leaf with no ops
//      (whatever sled the engine leaves when a site loses its last ops:
//      today GCC's original five 1-byte NOPs);
//   4. per cell: attach I irrelevant tracers (bench_other_<k>), then R
//      relevant ones (bench_leaf), warm up, then K timed repetitions of N
//      calls; after each repetition every counter is checked (relevant: N,
//      irrelevant: 0); detach all.
// "Overhead" is per-call time minus the untraced per-call time of the same
// engine run (bench_leaf with no ops: step 3 pooled with the R=0,I=0 cell).
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "bench/bench.h"
#include "bench/bench_target.h"
#include "bench/direct_tramp.h"
#include "bench_isa.h"  // bench/<isa>/: what the direct trampolines keep

namespace ftjit_bench {

namespace {

constexpr int kTracerCounts[] = {0, 1, 2, 10, 100, 200};

struct Cell {
  int relevant;
  int irrelevant;
  std::uint32_t flags;  // FTJIT_OPS_F_* of every tracer of the cell
  // Direct only: which caller-supplied trampoline (bench/<isa>/direct_tramp.S).
  // kCallsC: one call to a C function that counts, the floor of every
  // trampoline that calls C; kAbi: the callback ABI and nothing more.
  enum class Tramp { kCounts, kCallsC, kAbi } tramp = Tramp::kCounts;
  // What the trampolines keep: the engine's own decision for bench_leaf's
  // module (auto) or forced (ftjit_saves).
  ftjit_saves saves = FTJIT_SAVES_AUTO;
};

// Seed 000's shape: R=0 with every I, R=1 with every I, then I=0 with the
// larger R (the seed lists R=1,I=0 twice; we measure it once). `full` gives
// the whole 6x6 cross product instead.
std::vector<Cell> cell_plan(ftjit_strategy strategy, bool full) {
  std::vector<Cell> cells;
  for (const int r : kTracerCounts) {
    for (const int i : kTracerCounts) {
      if (full || r <= 1 || i == 0) cells.push_back({r, i, 0});
    }
  }
  // Skipping the xmm0-7 save is a separate cost: one extra row where the
  // strategy has a NO_FP variant of its trampoline.
  // And keeping xmm0-7 only (saves abi) beside all sixteen (the rows
  // above: the bench binary's other units show no flag, so auto = all).
  if (strategy == FTJIT_STRATEGY_GENERATED || strategy == FTJIT_STRATEGY_CALL_OPS) {
    cells.push_back({1, 0, FTJIT_OPS_F_NO_FP});
    cells.push_back({1, 0, 0, Cell::Tramp::kCounts, FTJIT_SAVES_ABI});
    cells.push_back({1, 0, 0, Cell::Tramp::kCounts, FTJIT_SAVES_ALL});
  }
  if (strategy == FTJIT_STRATEGY_DIRECT) {
    cells.push_back({1, 0, 0, Cell::Tramp::kCallsC});
    cells.push_back({1, 0, 0, Cell::Tramp::kAbi});
  }
  return cells;
}

// The tracers of one cell. Destroyed (and so detached) before the engine.
struct CellTracers {
  std::vector<std::unique_ptr<Tracer>> relevant;
  std::vector<std::unique_ptr<Tracer>> irrelevant;
  bool direct_relevant = false;  // relevant[0] is the caller-supplied tramp
};

class CallsRun {
 public:
  CallsRun(const BenchOptions &opts, Report &report, ftjit_strategy strategy)
      : opts_(opts), report_(report), strategy_(strategy) {}

  void run();

 private:
  bool prime();
  void measure_baselines();
  void run_cell(const Cell &cell);
  ftjit_status attach_cell(const Cell &cell, CellTracers &tracers);
  bool check_counters(const Cell &cell, const CellTracers &tracers, long calls);
  void reset_counters(CellTracers &tracers);
  std::string cell_name(const Cell &cell) const;

  const BenchOptions &opts_;
  Report &report_;
  const ftjit_strategy strategy_;
  std::unique_ptr<Engine> engine_;
  // Per-call samples of bench_leaf with no ops: the bench_leaf baseline's
  // repetitions pooled with the R=0,I=0 cell's; their median is the
  // "untraced" every overhead is taken against (one cell alone swings by
  // a few tenths of a ns on a shared machine).
  std::vector<double> untraced_samples_;
  double baseline_per_call_ = 0;
};

std::string tramp_flag(const Cell &cell) {
  if (cell.saves == FTJIT_SAVES_ABI) return "saves_abi";
  if (cell.saves == FTJIT_SAVES_ALL) return "saves_all";
  switch (cell.tramp) {
    case Cell::Tramp::kCallsC: return "c_call";
    case Cell::Tramp::kAbi: return "abi";
    case Cell::Tramp::kCounts: break;
  }
  return "";
}

std::string CallsRun::cell_name(const Cell &cell) const {
  std::string name = std::string("calls/") + strategy_key(strategy_) +
                     " R=" + std::to_string(cell.relevant) +
                     " I=" + std::to_string(cell.irrelevant);
  if (cell.flags & FTJIT_OPS_F_NO_FP) name += " no_fp";
  name += tramp_flag(cell).empty() ? "" : " " + tramp_flag(cell);
  return name;
}

void CallsRun::run() {
  // Direct ops carry their own trampoline; what they coexist with is
  // whatever the engine picks by itself.
  const ftjit_strategy engine_default =
      strategy_ == FTJIT_STRATEGY_DIRECT ? FTJIT_STRATEGY_AUTO : strategy_;
  std::string error;
  engine_ = Engine::create(engine_default, &error);
  if (!engine_) {
    report_.add_error(std::string("calls/") + strategy_key(strategy_) + ": " + error);
    return;
  }
  if (!prime()) return;
  measure_baselines();
  for (const Cell &cell : cell_plan(strategy_, opts_.full)) run_cell(cell);
  engine_.reset();
}

bool CallsRun::prime() {
  Tracer tracer("bench_leaf", strategy_ == FTJIT_STRATEGY_DIRECT ? FTJIT_STRATEGY_AUTO : strategy_);
  if (const ftjit_status st = tracer.attach(*engine_); st != FTJIT_OK) {
    report_.add_error(std::string("calls/") + strategy_key(strategy_) +
                      ": priming attach to bench_leaf failed: " + status_text(st));
    return false;
  }
  g_sink = bench_leaf(1);
  if (const ftjit_status st = tracer.detach(); st != FTJIT_OK) {
    report_.add_error(std::string("calls/") + strategy_key(strategy_) +
                      ": priming detach failed: " + status_text(st));
    return false;
  }
  g_sink = bench_leaf(2);  // detached: must not count
  if (tracer.hits != 1) {
    report_.add_error(std::string("calls/") + strategy_key(strategy_) + ": priming call counted " +
                      std::to_string(tracer.hits) +
                      " hits (one call attached, one detached), expected 1");
    return false;
  }
  return true;
}

void CallsRun::measure_baselines() {
  Table &table = report_.table("call_baselines", "calls: untraced baselines (ns per call)");
  const struct {
    const char *function;
    LeafFn fn;
    const char *what;
  } baselines[] = {
      {"bench_leaf_untraced", &bench_leaf_untraced, "no sled compiled in"},
      {"bench_leaf", &bench_leaf, "sled present, no ops attached"},
  };
  untraced_samples_.clear();
  for (const auto &b : baselines) {
    time_calls(b.fn, warmup_calls(opts_.calls), opts_.cpu_clock);
    std::vector<double> per_call;
    for (int rep = 0; rep < opts_.reps; ++rep) {
      per_call.push_back(time_calls(b.fn, opts_.calls, opts_.cpu_clock) /
                         static_cast<double>(opts_.calls));
    }
    if (b.fn == &bench_leaf) {
      untraced_samples_.insert(untraced_samples_.end(), per_call.begin(), per_call.end());
    }
    const Summary s = summarize(per_call);
    table.rows.push_back(Row()
                             .set("run", strategy_key(strategy_))
                             .set("function", b.function)
                             .set("what", b.what)
                             .set("per_call_ns", s.median)
                             .set("min_ns", s.min)
                             .set("max_ns", s.max));
  }
}

ftjit_status CallsRun::attach_cell(const Cell &cell, CellTracers &tracers) {
  const bool direct = strategy_ == FTJIT_STRATEGY_DIRECT;
  if (const ftjit_status st = ftjit_engine_set_saves(engine_->get(), cell.saves); st != FTJIT_OK) return st;
  // Irrelevant first: a list walk then meets them before the relevant ones,
  // the worst case the seed's table is about.
  for (int k = 0; k < cell.irrelevant; ++k) {
    auto t = std::make_unique<Tracer>("bench_other_" + std::to_string(k), strategy_, cell.flags);
    if (direct) {
      t->ops.direct_trampoline =
          reinterpret_cast<const void *>(&ftjit_bench_direct_tramp_irrelevant);
    }
    if (const ftjit_status st = t->attach(*engine_); st != FTJIT_OK) return st;
    tracers.irrelevant.push_back(std::move(t));
  }
  for (int j = 0; j < cell.relevant; ++j) {
    // Direct: one caller-supplied trampoline, and R-1 ordinary tracers that
    // must coexist with it on the same site.
    const bool this_direct = direct && j == 0;
    auto t = std::make_unique<Tracer>(
        "bench_leaf", direct && !this_direct ? FTJIT_STRATEGY_AUTO : strategy_, cell.flags);
    if (this_direct) {
      void (*tramp)() = cell.tramp == Cell::Tramp::kCallsC ? &ftjit_bench_direct_tramp_c
                        : cell.tramp == Cell::Tramp::kAbi  ? &ftjit_bench_direct_tramp_abi
                                                           : &ftjit_bench_direct_tramp;
      t->ops.direct_trampoline = reinterpret_cast<const void *>(tramp);
    }
    if (const ftjit_status st = t->attach(*engine_); st != FTJIT_OK) return st;
    tracers.relevant.push_back(std::move(t));
    tracers.direct_relevant = tracers.direct_relevant || this_direct;
  }
  return FTJIT_OK;
}

void CallsRun::reset_counters(CellTracers &tracers) {
  for (auto &t : tracers.relevant) t->hits = 0;
  for (auto &t : tracers.irrelevant) t->hits = 0;
  ftjit_bench_direct_hits = 0;
  ftjit_bench_direct_irrelevant_hits = 0;
}

bool CallsRun::check_counters(const Cell &cell, const CellTracers &tracers, long calls) {
  std::string problems;
  auto expect = [&](const char *what, size_t index, std::uint64_t got, std::uint64_t want) {
    if (got == want) return;
    char line[160];
    std::snprintf(line, sizeof line, "%s%s %zu counted %" PRIu64 ", expected %" PRIu64,
                  problems.empty() ? "" : "; ", what, index, got, want);
    problems += line;
  };
  for (size_t j = 0; j < tracers.relevant.size(); ++j) {
    // The direct tracer's func must never run: its site calls our asm.
    const bool direct = tracers.direct_relevant && j == 0;
    expect(direct ? "direct relevant tracer (func)" : "relevant tracer", j,
           tracers.relevant[j]->hits, direct ? 0 : static_cast<std::uint64_t>(calls));
  }
  if (tracers.direct_relevant) {
    expect("direct trampoline", 0, ftjit_bench_direct_hits, static_cast<std::uint64_t>(calls));
  }
  for (size_t k = 0; k < tracers.irrelevant.size(); ++k) {
    expect("irrelevant tracer", k, tracers.irrelevant[k]->hits, 0);
  }
  expect("irrelevant direct trampoline", 0, ftjit_bench_direct_irrelevant_hits, 0);
  if (problems.empty()) return true;
  report_.add_error(cell_name(cell) + ": " + problems);
  return false;
}

void CallsRun::run_cell(const Cell &cell) {
  Row row;
  row.set("strategy", strategy_key(strategy_))
      .set("R", cell.relevant)
      .set("I", cell.irrelevant)
      .set("flags", (cell.flags & FTJIT_OPS_F_NO_FP) ? "no_fp" : tramp_flag(cell));
  Table &table = report_.table(
      "calls", "calls: ns per call of bench_leaf with R relevant and I irrelevant tracers");

  CellTracers tracers;
  if (const ftjit_status st = attach_cell(cell, tracers); st != FTJIT_OK) {
    const std::string text = status_text(st);
    // UNSUPPORTED is an answer ("this combination cannot be built"); so is
    // any refusal of a direct trampoline sharing its site. Anything else on
    // a strategy the design promises is a failure.
    const bool expected_refusal =
        st == FTJIT_E_UNSUPPORTED || (strategy_ == FTJIT_STRATEGY_DIRECT && cell.relevant > 1);
    if (!expected_refusal) report_.add_error(cell_name(cell) + ": attach failed: " + text);
    spdlog::info("{}: n/a ({})", cell_name(cell), text);
    row.set("calls", opts_.calls)
        .set("total_ns", Value())
        .set("per_call_ns", Value())
        .set("overhead_ns", Value())
        .set("min_ns", Value())
        .set("max_ns", Value())
        .set("status", text);
    table.rows.push_back(std::move(row));
    return;
  }

  time_calls(&bench_leaf, warmup_calls(opts_.calls), opts_.cpu_clock);
  std::vector<double> totals;
  bool counters_ok = true;
  for (int rep = 0; rep < opts_.reps && counters_ok; ++rep) {
    reset_counters(tracers);
    totals.push_back(time_calls(&bench_leaf, opts_.calls, opts_.cpu_clock));
    counters_ok = check_counters(cell, tracers, opts_.calls);
  }

  std::string status = counters_ok ? "ok" : "counter mismatch";
  for (auto *list : {&tracers.relevant, &tracers.irrelevant}) {
    for (auto &t : *list) {
      if (const ftjit_status st = t->detach(); st != FTJIT_OK) {
        report_.add_error(cell_name(cell) + ": detach of " + t->pattern +
                          " failed: " + status_text(st));
        status = "detach failed";
      }
    }
  }

  const Summary total = summarize(totals);
  const double n = static_cast<double>(opts_.calls);
  const double per_call = total.median / n;
  const bool untraced_cell = cell.relevant == 0 && cell.irrelevant == 0 && cell.flags == 0;
  if (untraced_cell) {
    for (const double t : totals) untraced_samples_.push_back(t / n);
    baseline_per_call_ = summarize(untraced_samples_).median;
  }
  row.set("calls", opts_.calls)
      .set("total_ns", total.median)
      .set("per_call_ns", per_call)
      .set("overhead_ns", untraced_cell ? Value() : Value(per_call - baseline_per_call_))
      .set("min_ns", total.min / n)
      .set("max_ns", total.max / n)
      .set("status", status);
  table.rows.push_back(std::move(row));
  spdlog::info("{}: {:.2f} ns/call", cell_name(cell), per_call);
}

constexpr const char *kDefaultCallStrategies[] = {"list", "call-ops", "generated", "direct"};

}  // namespace

void run_calls_section(const BenchOptions &opts, Report &report) {
  std::vector<std::string> keys = opts.strategies;
  if (keys.empty()) {
    keys.assign(std::begin(kDefaultCallStrategies), std::end(kDefaultCallStrategies));
  }
  for (const std::string &key : keys) {
    const auto strategy = parse_strategy(key);
    if (!strategy || *strategy == FTJIT_STRATEGY_AUTO) {
      report.add_error("calls: unknown strategy " + key);
      continue;
    }
    CallsRun(opts, report, *strategy).run();
  }
  Table &table = report.table(
      "calls", "calls: ns per call of bench_leaf with R relevant and I irrelevant tracers");
  table.notes.push_back(std::string(opts.full ? "full R x I cross product"
                                              : "seed 000 shape: R=0 x all I, R=1 x all I, I=0 x "
                                                "all R (--full for the cross product)") +
                        "; median of " + std::to_string(opts.reps) + " repetitions of " +
                        std::to_string(opts.calls) + " calls; min/max per call; clock: " +
                        (opts.cpu_clock ? "thread CPU time (--clock wall for wall time)" : "wall"));
  table.text_columns = {"strategy",    "R",           "I",      "flags",  "total_ns",
                        "per_call_ns", "overhead_ns", "min_ns", "max_ns", "status"};
  table.notes.push_back(
      "overhead = per-call time minus the untraced baseline of the same strategy's run: median of "
      "the R=0,I=0 cell's repetitions pooled with those of bench_leaf before any cell");
  table.notes.push_back(
      "flags: no_fp = the callback leaves FP registers alone (none kept); saves_abi / saves_all = "
      "an FP callback with the FP argument registers kept / every FP register (--saves; unmarked "
      "rows: the engine's decision for bench_leaf's module); saves_abi over no_fp is the price of "
      "an FP callback");
  if (std::find(keys.begin(), keys.end(), "direct") != keys.end()) {
    table.notes.push_back(
        std::string("direct: R=1 is the caller-supplied trampoline (") + isa::kDirectTrampFile +
        "); R>1 adds R-1 AUTO tracers on the same site; irrelevant tracers are direct too; "
        "c_call: that trampoline calls a C function that counts, keeping only " +
        isa::kCCallKeeps +
        ": the floor of any trampoline that calls C; abi: that trampoline does what the callback "
        "ABI asks and nothing more (" +
        isa::kAbiKeeps +
        " kept, ftjit_regs filled, the generated rows' callback called), without the reentrancy "
        "guard and grace counts: generated no_fp minus abi is their price");
  }
}

}  // namespace ftjit_bench
