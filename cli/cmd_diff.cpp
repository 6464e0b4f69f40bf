// SPDX-License-Identifier: MIT
// `ftjit diff A B`: two recorded runs compared per function, from their
// traces or JSON reports (count, latency or flame; report_file.h): calls, and time
// when both have it (a flame report's own time, else latency's total),
// with the change and its ratio, the largest change first. Functions of
// only one run are named; small changes are counted, not listed, unless
// --all.
#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/report_file.h"

namespace ftjit::cli {
namespace {

struct DiffOptions {
  std::string a, b;
  double threshold_pct = 10;
  double min_ms = 1;
  bool all = false;
};

enum class Measure { kSelf, kTotal, kCalls };

std::string ms(uint64_t ns) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f ms", static_cast<double>(ns) / 1e6);
  return buf;
}

std::string signed_ms(double ns) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%+.3f ms", ns / 1e6);
  return buf;
}

std::string ratio_text(double a, double b) {
  if (a == 0) return b == 0 ? "1.00x" : "new";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2fx", b / a);
  return buf;
}

struct Row {
  std::string name;
  FunctionFigures a, b;
  double change;  // in the measure's unit: ns or calls
  bool changed;
};

uint64_t measure_of(const FunctionFigures& f, Measure m) {
  return m == Measure::kSelf ? f.self_ns : m == Measure::kTotal ? f.total_ns : f.calls;
}

int run_diff(const DiffOptions& o) {
  auto fail = [](const std::string& message) {
    std::fprintf(stderr, "ftjit diff: %s\n", message.c_str());
    return 1;
  };
  auto a = load_report(o.a);
  if (!a) return fail(a.error().message);
  auto b = load_report(o.b);
  if (!b) return fail(b.error().message);
  const Measure m = a->has_self && b->has_self     ? Measure::kSelf
                    : a->has_total && b->has_total ? Measure::kTotal
                                                   : Measure::kCalls;
  const char* measure_name = m == Measure::kSelf ? "own time" : m == Measure::kTotal ? "total time" : "calls";
  std::vector<Row> rows;
  std::vector<std::pair<std::string, FunctionFigures>> only_a, only_b;
  for (const auto& [name, fa] : a->functions) {
    const auto it = b->functions.find(name);
    if (it == b->functions.end()) {
      only_a.emplace_back(name, fa);
      continue;
    }
    const FunctionFigures& fb = it->second;
    const double va = static_cast<double>(measure_of(fa, m)), vb = static_cast<double>(measure_of(fb, m));
    Row r{name, fa, fb, vb - va, fa.calls != fb.calls};
    if (m != Measure::kCalls) {
      const double rel = 100.0 * std::fabs(vb - va) / std::max(va, 1.0);
      r.changed = r.changed || (std::fabs(vb - va) >= o.min_ms * 1e6 && rel >= o.threshold_pct);
    }
    rows.push_back(std::move(r));
  }
  for (const auto& [name, fb] : b->functions)
    if (!a->functions.count(name)) only_b.emplace_back(name, fb);
  std::stable_sort(rows.begin(), rows.end(),
                   [](const Row& x, const Row& y) { return std::fabs(x.change) > std::fabs(y.change); });

  std::printf("ftjit diff: %s (%s) -> %s (%s), by %s", o.a.c_str(), a->kind.c_str(), o.b.c_str(),
              b->kind.c_str(), measure_name);
  if (m != Measure::kCalls)
    std::printf("; listed: a change in calls, or of %g%% and %g ms or more", o.threshold_pct, o.min_ms);
  std::printf("\n");
  size_t width = 8;
  for (const Row& r : rows) width = std::max(width, r.name.size());
  const bool timed = m != Measure::kCalls;
  std::printf("%-*s %10s %10s", static_cast<int>(width), "function", "calls A", "calls B");
  if (timed) std::printf(" %14s %14s %14s %8s", m == Measure::kSelf ? "own A" : "total A",
                         m == Measure::kSelf ? "own B" : "total B", "change", "ratio");
  else std::printf(" %10s %8s", "change", "ratio");
  std::printf("\n");
  size_t unchanged = 0;
  for (const Row& r : rows) {
    if (!r.changed && !o.all) {
      ++unchanged;
      continue;
    }
    std::printf("%-*s %10" PRIu64 " %10" PRIu64, static_cast<int>(width), r.name.c_str(), r.a.calls, r.b.calls);
    if (timed) {
      std::printf(" %14s %14s %14s %8s", ms(measure_of(r.a, m)).c_str(), ms(measure_of(r.b, m)).c_str(),
                  signed_ms(r.change).c_str(),
                  ratio_text(static_cast<double>(measure_of(r.a, m)), static_cast<double>(measure_of(r.b, m))).c_str());
    } else {
      std::printf(" %+10.0f %8s", r.change, ratio_text(static_cast<double>(r.a.calls), static_cast<double>(r.b.calls)).c_str());
    }
    std::printf("\n");
  }
  auto list_only = [&](const char* which, const std::vector<std::pair<std::string, FunctionFigures>>& only) {
    for (const auto& [name, f] : only) {
      std::printf("only in %s: %s (%" PRIu64 " calls", which, name.c_str(), f.calls);
      if (timed) std::printf(", %s", ms(measure_of(f, m)).c_str());
      std::printf(")\n");
    }
  };
  list_only("A", only_a);
  list_only("B", only_b);
  if (unchanged != 0) std::printf("unchanged: %zu functions (--all lists them)\n", unchanged);
  return 0;
}

}  // namespace

void add_diff_command(CLI::App& app, std::function<int()>* run) {
  auto o = std::make_shared<DiffOptions>();
  CLI::App* cmd = app.add_subcommand(
      "diff", "Compare two recorded runs per function (their traces, or their count, latency or flame "
              "JSON reports)");
  cmd->add_option("A", o->a, "The first run's trace (trace --format chrome) or report (--format json)")
      ->required();
  cmd->add_option("B", o->b, "The second run's trace or report")->required();
  cmd->add_option("--threshold", o->threshold_pct,
                  "Percent of change in time below which a function counts as unchanged")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1e9));
  cmd->add_option("--min-ms", o->min_ms, "Change in time, in ms, below which a function counts as unchanged")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1e12));
  cmd->add_flag("--all", o->all, "List the unchanged functions too");
  cmd->callback([run, o] { *run = [o] { return run_diff(*o); }; });
}

}  // namespace ftjit::cli
