// SPDX-License-Identifier: MIT
// "sizes" section: code bytes per trampoline, per strategy, with and without
// FTJIT_OPS_F_NO_FP.
//
// Each variant attaches kTracers ops, one per bench_other_<k>, and divides
// the growth of ftjit_stats.trampoline_bytes by the growth of
// ftjit_stats.trampolines, in a fresh engine. Generated trampolines grow by
// one per ops; a shared one (list, call-ops) by one at most, and when the
// engine made it at create time, the row shows the engine's totals.
#include <spdlog/spdlog.h>

#include <memory>
#include <string>
#include <vector>

#include "bench/bench.h"

namespace ftjit_bench {

namespace {

constexpr int kTracers = 10;

struct Variant {
  ftjit_strategy strategy;
  std::uint32_t flags;
};

constexpr Variant kVariants[] = {
    {FTJIT_STRATEGY_GENERATED, 0}, {FTJIT_STRATEGY_GENERATED, FTJIT_OPS_F_NO_FP},
    {FTJIT_STRATEGY_CALL_OPS, 0},  {FTJIT_STRATEGY_CALL_OPS, FTJIT_OPS_F_NO_FP},
    {FTJIT_STRATEGY_LIST, 0},      {FTJIT_STRATEGY_LIST, FTJIT_OPS_F_NO_FP},
};

void measure_variant(Engine &engine, const Variant &v, const ftjit_stats &at_create,
                     Report &report) {
  Table &table = report.table("sizes", "sizes: code bytes per trampoline");
  const std::string name = std::string("sizes/") + strategy_key(v.strategy) +
                           ((v.flags & FTJIT_OPS_F_NO_FP) ? " no_fp" : "");
  Row row;
  row.set("strategy", strategy_key(v.strategy))
      .set("flags", (v.flags & FTJIT_OPS_F_NO_FP) ? "no_fp" : "")
      .set("ops", kTracers);

  const ftjit_stats before = engine.stats();
  std::vector<std::unique_ptr<Tracer>> tracers;
  for (int k = 0; k < kTracers; ++k) {
    auto t = std::make_unique<Tracer>("bench_other_" + std::to_string(k), v.strategy, v.flags);
    if (const ftjit_status st = t->attach(engine); st != FTJIT_OK) {
      const std::string text = status_text(st);
      if (st != FTJIT_E_UNSUPPORTED) report.add_error(name + ": attach failed: " + text);
      row.set("trampolines", Value())
          .set("bytes", Value())
          .set("bytes_per_trampoline", Value())
          .set("status", text);
      table.rows.push_back(std::move(row));
      return;
    }
    tracers.push_back(std::move(t));
  }
  const ftjit_stats after = engine.stats();
  const auto new_tramps = static_cast<long>(after.trampolines - before.trampolines);
  const auto new_bytes = static_cast<long>(after.trampoline_bytes - before.trampoline_bytes);
  if (new_tramps > 0) {
    row.set("trampolines", new_tramps)
        .set("bytes", new_bytes)
        .set("bytes_per_trampoline",
             static_cast<double>(new_bytes) / static_cast<double>(new_tramps))
        .set("status", "ok");
  } else if (at_create.trampolines > 0) {
    // Nothing new: the ops reuse a trampoline that existed from the start.
    row.set("trampolines", static_cast<long>(at_create.trampolines))
        .set("bytes", static_cast<long>(at_create.trampoline_bytes))
        .set("bytes_per_trampoline", static_cast<double>(at_create.trampoline_bytes) /
                                         static_cast<double>(at_create.trampolines))
        .set("status", "shared, made at engine create (average of those)");
  } else {
    row.set("trampolines", 0)
        .set("bytes", 0)
        .set("bytes_per_trampoline", Value())
        .set("status", "no trampoline accounted");
  }
  for (auto &t : tracers) {
    if (const ftjit_status st = t->detach(); st != FTJIT_OK) {
      report.add_error(name + ": detach failed: " + status_text(st));
    }
  }
  spdlog::info("{}: {} trampolines, {} bytes", name, new_tramps, new_bytes);
  table.rows.push_back(std::move(row));
}

}  // namespace

void run_sizes_section(const BenchOptions &, Report &report) {
  Table &table = report.table("sizes", "sizes: code bytes per trampoline");
  for (const Variant &v : kVariants) {
    // A fresh engine per variant: a shared trampoline left over from an
    // earlier variant would otherwise hide this one's cost.
    std::string error;
    auto engine = Engine::create(FTJIT_STRATEGY_AUTO, &error);
    if (!engine) {
      report.add_error("sizes: " + error);
      return;
    }
    measure_variant(*engine, v, engine->stats(), report);
  }
  table.notes.push_back(
      "each variant: a fresh engine, then " + std::to_string(kTracers) +
      " ops (one per bench_other_<k>); bytes = growth of ftjit_stats.trampoline_bytes");
}

}  // namespace ftjit_bench
