// SPDX-License-Identifier: MIT
// A recorded run's figures per function, read back from one of ftjit's
// JSON reports, for `ftjit diff`:
//
//   count    {"functions": [{"name", "calls"}...]}                 calls
//   latency  {"unit": "ns", "functions": [{"name", "count",
//             "total_ns"}...]}                                     calls, total
//   flame    {"unit": "ns" | "calls", "stacks": [{"frames",
//             "calls", ["total_ns", "self_ns"]}...]}               calls, total, self
//   trace    {"traceEvents": [...]} (--format chrome), summarised
//             as `ftjit report` does (trace_summary.h)              calls, total, self
//
// A flame report is folded back onto functions: a function's calls and
// own time are those of every stack it ends, its total time that of the
// stacks it ends and appears in only once (a recursive call's time is
// already in its outer call's).
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "core/error.h"

namespace ftjit::cli {

// One function's figures in a run (also ftjit report's, trace_summary.h).
struct FunctionFigures {
  uint64_t calls = 0;
  uint64_t total_ns = 0;
  uint64_t self_ns = 0;
  uint64_t max_ns = 0;  // the longest call (traces only)
};

struct RunReport {
  std::string kind;  // "count", "latency", "flame" or "trace"
  bool has_total = false;
  bool has_self = false;
  std::map<std::string, FunctionFigures> functions;
};

// The report in `path`; an error names the file and what is wrong with it.
Result<RunReport> load_report(const std::string& path);

}  // namespace ftjit::cli
