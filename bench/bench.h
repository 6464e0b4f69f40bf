// SPDX-License-Identifier: MIT
// Shared pieces of ftjit-bench: options, the section entry points, and the
// small RAII helpers every section uses (engine, counting tracer, timing).
#pragma once

#include <ftjit/ftjit.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "bench/report.h"

namespace ftjit_bench {

struct BenchOptions {
  std::vector<std::string> sections;    // subset of {calls, hooks, plugins, peers, attach, sizes, programs}
  long calls = 1'000'000;               // calls per timed repetition
  int reps = 5;                         // repetitions; rows report the median
  bool cpu_clock = true;                // calls: thread CPU time, not wall time
  bool full = false;                    // calls: full R x I cross product
  std::vector<std::string> strategies;  // calls: subset of kCallStrategies
  std::string sites_dir;                // attach: where bench_sites_*.so are
  std::vector<std::string> site_sets;   // attach: subset of {20k, 100k, 1m, 1m-clang, 20k-clang14}
};

// Section entry points. Each creates and destroys its own engine (ftjit
// allows one per process), adds its tables to `report`, and records every
// correctness failure with report.add_error().
void run_calls_section(const BenchOptions &opts, Report &report);
void run_attach_section(const BenchOptions &opts, Report &report);
void run_sizes_section(const BenchOptions &opts, Report &report);
void run_hooks_section(const BenchOptions &opts, Report &report);
void run_plugins_section(const BenchOptions &opts, Report &report);
void run_writer_section(const BenchOptions &opts, Report &report);
// After plugins and hooks: the peers (LLVM XRay) on the same leaf, and
// ftjit's matching rows of this run beside them as ratios.
void run_peers_section(const BenchOptions &opts, Report &report);
// Whole programs traced whole (x86-64): ftjit's trace plugin (block, drop)
// and uftrace, beside the untraced run.
void run_programs_section(const BenchOptions &opts, Report &report);
// `ftjit attach` into the running demo service, phase by phase (x86-64).
void run_cli_section(const BenchOptions &opts, Report &report);
// A relocated entry against a sled on the same body (relocated.cpp).
void run_relocated_section(const BenchOptions &opts, Report &report);

// ---------------------------------------------------------------------------
// Strategies
// ---------------------------------------------------------------------------

// Bench spelling of a strategy ("list", "call-ops", "generated", "direct",
// "auto"); the same spelling the options and JSON use.
const char *strategy_key(ftjit_strategy strategy);
std::optional<ftjit_strategy> parse_strategy(const std::string &key);

// "FTJIT_E_UNSUPPORTED: <ftjit_last_error()>" for a failed call. Call it
// right after the failing call: the message is per thread and overwritten.
std::string status_text(ftjit_status status);

// ---------------------------------------------------------------------------
// Timing
// ---------------------------------------------------------------------------

// CLOCK_MONOTONIC, in ns.
std::int64_t now_ns();
// CLOCK_THREAD_CPUTIME_ID, in ns: time the calling thread actually ran, so
// a timed loop preempted by another process is not charged for the wait.
std::int64_t thread_cpu_ns();

// The traced leaf's shape, and a timing loop over it that the compiler can
// neither inline nor hoist (it calls through a volatile pointer).
using LeafFn = int (*)(int);
// Time of n calls of fn, in ns, on the clock the options chose.
double time_calls(LeafFn fn, long n, bool cpu_clock);
// Warm-up calls before a timed measurement (caches, predictors).
long warmup_calls(long n);
// ns per call of opts.calls calls of fn, once per repetition, after a
// warm-up.
std::vector<double> time_reps(const BenchOptions& opts, LeafFn fn);
// A sink the bench stores results into, so calls are never dead code.
extern volatile int g_sink;

// Median, min and max of the repetitions of one measurement.
struct Summary {
  double median = 0;
  double min = 0;
  double max = 0;
};

Summary summarize(std::vector<double> samples);

// clocks.cpp: one clock read each, over `base` (the untraced bench_leaf of
// the plugins section's run); printed with the plugins section.
void run_clock_rows(const BenchOptions &opts, Report &report, const Summary &base);

// ---------------------------------------------------------------------------
// Engine and tracers
// ---------------------------------------------------------------------------

// The process's engine, destroyed (all ops detached, sites restored) when
// this goes out of scope.
class Engine {
 public:
  // Null engine and a message in *error when ftjit_engine_create fails.
  static std::unique_ptr<Engine> create(ftjit_strategy default_strategy, std::string *error);
  ~Engine();
  Engine(const Engine &) = delete;
  Engine &operator=(const Engine &) = delete;

  ftjit_engine *get() const { return engine_; }
  ftjit_stats stats() const;

 private:
  explicit Engine(ftjit_engine *engine) : engine_(engine) {}
  ftjit_engine *engine_;
};

// One tracer registration whose entry callback counts its calls in `hits`.
// Pinned in memory (the engine keeps &ops, the callback writes &hits), so
// it is neither copyable nor movable: hold it through unique_ptr.
class Tracer {
 public:
  Tracer(std::string pattern, ftjit_strategy strategy, std::uint32_t flags = 0);
  Tracer(const Tracer &) = delete;
  Tracer &operator=(const Tracer &) = delete;
  ~Tracer();

  // Attaches with the one-pattern include filter; detaches on destruction
  // if the caller did not.
  ftjit_status attach(Engine &engine);
  ftjit_status detach();

  ftjit_ops ops{};
  // On a cache line of its own. The call-ops trampoline loads ops.func at
  // every call; with this counter, which the callback increments, on the
  // same line, call-ops measured 33 ns a call instead of 5 (same binary,
  // FP-saving trampoline, this Xeon VM). A tracer's own data belongs apart
  // from its ftjit_ops; ftjit.h says so.
  alignas(64) std::uint64_t hits = 0;
  const std::string pattern;

 private:
  const char *include_[1];
  Engine *attached_to_ = nullptr;
};

// The entry callback of every Tracer: ++*(uint64_t *)ops->private_data.
// noinline so the measured cost is a real call, never folded into the
// trampoline by some future LTO.
extern "C" void ftjit_bench_count_entry(std::uint64_t ip, std::uint64_t parent_ip, ftjit_ops *ops,
                                        ftjit_regs *regs);

}  // namespace ftjit_bench
