// SPDX-License-Identifier: MIT
// A recorded trace summarised, for `ftjit report`: the trace plugin's
// Chrome JSON (`--plugin trace --format chrome`), read back with
// nlohmann/json, each thread's B/E events matched into calls.
//
// Per function: its calls, total time (entry to exit or unwind; a
// recursive call's time counted once, in its outermost call), own time
// (total less its callees'), and the longest call. And the call graph:
// one tree per thread merged, each node a function under its caller's
// node, with calls, total and own time (what `--graph FUNC` prints).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "cli/report_file.h"
#include "core/error.h"

namespace ftjit::cli {

using CallFigures = FunctionFigures;

struct GraphNode {
  std::string name;
  CallFigures figures;
  std::map<std::string, std::unique_ptr<GraphNode>> callees;
};

struct TraceSummary {
  std::map<std::string, CallFigures> functions;
  GraphNode root;  // the threads' outermost calls are its callees
  uint64_t threads = 0;
  uint64_t unfinished = 0;  // calls whose exit the trace does not hold
};

// The summary of the Chrome JSON trace in `path`; an error names the file
// and what is wrong.
Result<TraceSummary> summarise_trace(const std::string& path);

}  // namespace ftjit::cli
