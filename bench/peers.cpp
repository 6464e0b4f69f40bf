// SPDX-License-Identifier: MIT
// "peers" section: LLVM XRay on bench_leaf's body, measured in the same run
// as ftjit's rows, so that a user can check on their own machine how ftjit
// compares with the tracer its users would otherwise reach for. The XRay
// side is its own program (bench/xray/xray_peer.cpp), built with clang++-16
// and its XRay runtime where they are installed: XRay needs its sleds
// compiled in, and ftjit-bench is built with GCC. Its rows are set beside
// the matching ftjit rows of this run (plugins: count, latency; hooks:
// empty entry+exit), as ratios; a section of those that did not run leaves
// its ratio n/a.
#include <sys/wait.h>

#include <cstdio>
#include <map>
#include <sstream>
#include <string>

#include "bench/bench.h"

namespace ftjit_bench {
namespace {

struct PeerRow {
  double per_call = 0, overhead = 0, min = 0, max = 0;
};

// The overhead column of the first row of `table` whose `column` is
// `value`, or a negative number.
double overhead_of(const Report &report, const char *table, const char *column, const char *value,
                   const char *strategy = nullptr) {
  const Table *t = report.find(table);
  if (t == nullptr) return -1;
  for (const Row &r : t->rows) {
    bool match = false, strategy_ok = strategy == nullptr;
    double overhead = -1;
    for (const auto &[k, v] : r.fields()) {
      if (k == column && std::holds_alternative<std::string>(v)) match = std::get<std::string>(v) == value;
      if (strategy != nullptr && k == "strategy" && std::holds_alternative<std::string>(v)) {
        strategy_ok = std::get<std::string>(v) == strategy;
      }
      if (k == "overhead_ns" && std::holds_alternative<double>(v)) overhead = std::get<double>(v);
    }
    if (match && strategy_ok) return overhead;
  }
  return -1;
}

}  // namespace

void run_peers_section(const BenchOptions &opts, Report &report) {
  Table &table = report.table("peers", "peers: LLVM XRay on the same leaf, beside ftjit's rows of this run (ns per call)");
#ifndef FTJIT_BENCH_XRAY_PEER
  table.notes.push_back(
      "peer rows skipped: this ftjit-bench was built without clang++-16 and its XRay runtime "
      "(apt-get install clang-16 libclang-rt-16-dev, then rebuild)");
  std::fputs("ftjit-bench: peers section skipped: built without clang++-16's XRay runtime\n", stderr);
  (void)opts;
#else
  const std::string cmd = std::string(FTJIT_BENCH_XRAY_PEER) + " --calls " + std::to_string(opts.calls) +
                          " --reps " + std::to_string(opts.reps) + " 2>&1";
  FILE *p = popen(cmd.c_str(), "r");
  if (p == nullptr) {
    report.add_error("peers: cannot run " + std::string(FTJIT_BENCH_XRAY_PEER));
    return;
  }
  std::string out;
  char buf[256];
  while (std::fgets(buf, sizeof buf, p) != nullptr) out += buf;
  const int status = pclose(p);
  if (status != 0) {
    report.add_error("peers: " + std::string(FTJIT_BENCH_XRAY_PEER) + " failed: " + out);
    return;
  }
  std::map<std::string, PeerRow> rows;
  double base = 0;
  std::istringstream lines(out);
  std::string name;
  while (lines >> name) {
    if (name == "base") {
      lines >> base;
      continue;
    }
    PeerRow r;
    lines >> r.per_call >> r.overhead >> r.min >> r.max;
    rows[name] = r;
  }
  if (rows.size() != 3) {
    report.add_error("peers: unexpected output from the XRay peer: " + out);
    return;
  }
  struct Pairing {
    const char *peer;
    const char *handler;
    const char *ftjit;
    double ftjit_overhead;
  };
  const Pairing pairings[] = {
      {"count", "entry sled, counts per function (per-thread)", "count plugin",
       overhead_of(report, "plugins", "plugin", "count")},
      {"hist", "entry+exit sleds, rdtsc, log2 histogram per function", "latency plugin",
       overhead_of(report, "plugins", "plugin", "latency")},
      // XRay's trampolines keep the psABI's argument and return registers
      // (xmm0-7 at entry): the ftjit row that keeps the same.
      {"empty", "entry+exit sleds, empty handler", "hooks entry+exit saves_abi (generated)",
       overhead_of(report, "hooks", "hooks", "entry+exit saves_abi", "generated")},
  };
  for (const Pairing &pr : pairings) {
    const PeerRow &x = rows[pr.peer];
    Row &r = table.rows.emplace_back();
    r.set("xray_handler", pr.handler)
        .set("xray_per_call_ns", x.per_call)
        .set("xray_overhead_ns", x.overhead)
        .set("ftjit_row", pr.ftjit);
    if (pr.ftjit_overhead >= 0) {
      r.set("ftjit_overhead_ns", pr.ftjit_overhead);
      r.set("ftjit_over_xray", x.overhead > 0 ? pr.ftjit_overhead / x.overhead : 0.0);
    } else {
      r.set("ftjit_overhead_ns", Value()).set("ftjit_over_xray", Value());
    }
    r.set("xray_min_ns", x.min).set("xray_max_ns", x.max);
  }
  table.notes.push_back("XRay: clang-16's runtime (bench/xray/xray_peer.cpp), bench_leaf's body, untraced copy "
                        "of its own run: " + std::to_string(base).substr(0, 6) +
                        " ns; the same loop, clock and repetitions as ftjit's rows");
  table.notes.push_back(
      "ftjit_over_xray < 1: ftjit cheaper; n/a: that ftjit section did not run in this invocation "
      "(--section plugins,hooks,peers)");
#endif
}

}  // namespace ftjit_bench
