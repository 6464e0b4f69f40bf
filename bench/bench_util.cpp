// SPDX-License-Identifier: MIT
// Helpers shared by the ftjit-bench sections: strategy names, timing, the
// engine and counting-tracer RAII wrappers.
#include <time.h>

#include <algorithm>
#include <utility>

#include "bench/bench.h"
#include "bench/direct_tramp.h"
#include "bench/bench_target.h"

namespace ftjit_bench {

namespace {

struct StrategyName {
  ftjit_strategy strategy;
  const char *key;
};

constexpr StrategyName kStrategyNames[] = {
    {FTJIT_STRATEGY_AUTO, "auto"},         {FTJIT_STRATEGY_LIST, "list"},
    {FTJIT_STRATEGY_CALL_OPS, "call-ops"}, {FTJIT_STRATEGY_GENERATED, "generated"},
    {FTJIT_STRATEGY_DIRECT, "direct"},
};

// Reloaded on every iteration: through a volatile pointer the compiler can
// neither inline the callee nor hoist the call out of the loop.
LeafFn volatile g_leaf = &bench_leaf;

__attribute__((noinline)) int call_loop(long n) {
  int acc = 0;
  for (long i = 0; i < n; ++i) acc += g_leaf(static_cast<int>(i));
  return acc;
}

}  // namespace

volatile int g_sink;

double time_calls(LeafFn fn, long n, bool cpu_clock) {
  g_leaf = fn;
  const std::int64_t start = cpu_clock ? thread_cpu_ns() : now_ns();
  g_sink = call_loop(n);
  return static_cast<double>((cpu_clock ? thread_cpu_ns() : now_ns()) - start);
}

long warmup_calls(long n) { return n / 10 < 100'000 ? n / 10 : 100'000; }

std::vector<double> time_reps(const BenchOptions& opts, LeafFn fn) {
  time_calls(fn, warmup_calls(opts.calls), opts.cpu_clock);
  std::vector<double> per_call;
  for (int rep = 0; rep < opts.reps; ++rep) {
    per_call.push_back(time_calls(fn, opts.calls, opts.cpu_clock) / static_cast<double>(opts.calls));
  }
  return per_call;
}

const char *strategy_key(ftjit_strategy strategy) {
  for (const auto &s : kStrategyNames) {
    if (s.strategy == strategy) return s.key;
  }
  return "?";
}

std::optional<ftjit_strategy> parse_strategy(const std::string &key) {
  for (const auto &s : kStrategyNames) {
    if (key == s.key) return s.strategy;
  }
  return std::nullopt;
}

std::string status_text(ftjit_status status) {
  std::string text = ftjit_status_name(status);
  const char *message = ftjit_last_error();
  if (message != nullptr && *message != '\0') {
    text += ": ";
    text += message;
  }
  return text;
}

std::int64_t now_ns() {
  // CLOCK_MONOTONIC through the vDSO: ~20 ns, taken once per repetition.
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

std::int64_t thread_cpu_ns() {
  // A real syscall (~100 ns), taken once per repetition of >= 100k calls.
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

Summary summarize(std::vector<double> samples) {
  Summary s;
  if (samples.empty()) return s;
  std::sort(samples.begin(), samples.end());
  const size_t n = samples.size();
  s.median = n % 2 == 1 ? samples[n / 2] : (samples[n / 2 - 1] + samples[n / 2]) / 2;
  s.min = samples.front();
  s.max = samples.back();
  return s;
}

// ---------------------------------------------------------------------------
// Engine
// ---------------------------------------------------------------------------

std::unique_ptr<Engine> Engine::create(ftjit_strategy default_strategy, std::string *error) {
  ftjit_engine_options opts;
  ftjit_engine_options_init(&opts);
  opts.default_strategy = default_strategy;
  ftjit_engine *engine = ftjit_engine_create(&opts);
  if (engine == nullptr) {
    if (error != nullptr) *error = std::string("ftjit_engine_create: ") + ftjit_last_error();
    return nullptr;
  }
  return std::unique_ptr<Engine>(new Engine(engine));
}

Engine::~Engine() { ftjit_engine_destroy(engine_); }

ftjit_stats Engine::stats() const {
  ftjit_stats s{};
  ftjit_get_stats(engine_, &s);
  return s;
}

// ---------------------------------------------------------------------------
// Tracer
// ---------------------------------------------------------------------------

// Called by ftjit_bench_direct_tramp_c (direct_tramp.S): a C function with
// the least a tracer callback does, count.
extern "C" __attribute__((noinline)) void ftjit_bench_count_direct_hit() {
  ++ftjit_bench_direct_hits;
}

// The ops ftjit_bench_direct_tramp_abi passes its callback: it counts into
// ftjit_bench_direct_hits, which the direct cells check.
namespace {
ftjit_ops make_abi_ops() {
  ftjit_ops ops;
  ftjit_ops_init(&ops);
  ops.private_data = &ftjit_bench_direct_hits;
  return ops;
}
ftjit_ops g_abi_ops = make_abi_ops();
}  // namespace

extern "C" {
ftjit_ops* ftjit_bench_abi_ops = &g_abi_ops;
}

extern "C" __attribute__((noinline)) void ftjit_bench_count_entry(std::uint64_t, std::uint64_t,
                                                                  ftjit_ops *ops, ftjit_regs *) {
  ++*static_cast<std::uint64_t *>(ops->private_data);
}

Tracer::Tracer(std::string pattern_in, ftjit_strategy strategy, std::uint32_t flags)
    : pattern(std::move(pattern_in)) {
  ftjit_ops_init(&ops);
  ops.flags = flags;
  ops.func = &ftjit_bench_count_entry;
  ops.private_data = &hits;
  ops.strategy = strategy;
  include_[0] = pattern.c_str();
}

Tracer::~Tracer() {
  if (attached_to_ != nullptr) (void)detach();
}

ftjit_status Tracer::attach(Engine &engine) {
  const ftjit_filter filter{include_, 1, nullptr, 0};
  const ftjit_status status = ftjit_attach(engine.get(), &ops, &filter);
  if (status == FTJIT_OK) attached_to_ = &engine;
  return status;
}

ftjit_status Tracer::detach() {
  if (attached_to_ == nullptr) return FTJIT_E_NOT_ATTACHED;
  const ftjit_status status = ftjit_detach(attached_to_->get(), &ops);
  attached_to_ = nullptr;
  return status;
}

}  // namespace ftjit_bench
