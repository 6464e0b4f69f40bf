// SPDX-License-Identifier: MIT
// Chrome JSON traces summarised (trace_summary.h).
#include "cli/trace_summary.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <fstream>
#include <sstream>
#include <unordered_map>
#include <vector>

namespace ftjit::cli {
namespace {

using nlohmann::json;

// One open call of a thread.
struct Open {
  std::string name;
  uint64_t start_ns;
  uint64_t callees_ns = 0;
  GraphNode* node;
};

struct ThreadState {
  std::vector<Open> stack;
};

uint64_t ts_ns(const json& e) {
  const auto it = e.find("ts");
  if (it == e.end() || !it->is_number()) throw std::runtime_error("an event without \"ts\"");
  // Microseconds with three decimals: the nanoseconds, rounded back.
  return static_cast<uint64_t>(std::llround(it->get<double>() * 1000.0));
}

GraphNode* callee(GraphNode* node, const std::string& name) {
  auto& child = node->callees[name];
  if (!child) {
    child = std::make_unique<GraphNode>();
    child->name = name;
  }
  return child.get();
}

void close_top(TraceSummary& s, ThreadState& t, uint64_t end_ns) {
  Open call = std::move(t.stack.back());
  t.stack.pop_back();
  const uint64_t total = end_ns > call.start_ns ? end_ns - call.start_ns : 0;
  const uint64_t self = total > call.callees_ns ? total - call.callees_ns : 0;
  bool outermost = true;
  for (const Open& o : t.stack) outermost = outermost && o.name != call.name;
  CallFigures& f = s.functions[call.name];
  ++f.calls;
  if (outermost) f.total_ns += total;
  f.self_ns += self;
  if (total > f.max_ns) f.max_ns = total;
  CallFigures& g = call.node->figures;
  ++g.calls;
  g.total_ns += total;
  g.self_ns += self;
  if (total > g.max_ns) g.max_ns = total;
  if (!t.stack.empty()) t.stack.back().callees_ns += total;
}

}  // namespace

Result<TraceSummary> summarise_trace(const std::string& path) {
  std::ifstream in(path);
  if (!in) return make_error(FTJIT_E_INVALID_ARGUMENT, path + ": cannot be read");
  std::stringstream text;
  text << in.rdbuf();
  TraceSummary s;
  s.root.name = "all";
  try {
    const json doc = json::parse(text.str());
    const json& events = doc.is_object() ? doc.at("traceEvents") : doc;
    if (!events.is_array()) throw std::runtime_error("\"traceEvents\" is not a list");
    std::unordered_map<int64_t, ThreadState> threads;
    for (const json& e : events) {
      const std::string ph = e.value("ph", std::string());
      if (ph != "B" && ph != "E") continue;  // metadata
      const int64_t tid = e.value("tid", int64_t{0});
      ThreadState& t = threads[tid];
      const uint64_t ts = ts_ns(e);
      const std::string name = e.value("name", std::string());
      if (ph == "B") {
        GraphNode* parent = t.stack.empty() ? &s.root : t.stack.back().node;
        t.stack.push_back(Open{name, ts, 0, callee(parent, name)});
        continue;
      }
      // An exit closes its call; calls above it whose exits are missing
      // end with it (as flame does).
      size_t depth = t.stack.size();
      while (depth > 0 && t.stack[depth - 1].name != name) --depth;
      if (depth == 0) continue;  // an exit whose entry came before the trace
      while (t.stack.size() >= depth) close_top(s, t, ts);
    }
    s.threads = threads.size();
    for (auto& [tid, t] : threads) s.unfinished += t.stack.size();
  } catch (const std::exception& e) {
    return make_error(FTJIT_E_INVALID_ARGUMENT,
                      path + ": not a Chrome JSON trace of ftjit (--plugin trace --format chrome): " + e.what());
  }
  for (const auto& [name, node] : s.root.callees) {
    s.root.figures.total_ns += node->figures.total_ns;
    s.root.figures.calls += node->figures.calls;
  }
  return s;
}

}  // namespace ftjit::cli
