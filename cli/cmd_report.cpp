// SPDX-License-Identifier: MIT
// `ftjit report FILE`: a recorded trace (the trace plugin's Chrome JSON)
// summarised per function, like uftrace's report: calls, total, own,
// average and longest time, sorted, optionally filtered; and with
// --graph FUNC, the calls under FUNC as a tree with their times (uftrace's
// graph), every call of FUNC merged.
#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/trace_summary.h"
#include "core/glob.h"

namespace ftjit::cli {
namespace {

struct ReportOptions {
  std::string file;
  std::string sort = "total";
  std::vector<std::string> filters;
  std::string graph;
};

// "12.345 ms": three decimals in the largest unit that is at least 1.
std::string time_text(uint64_t ns) {
  char buf[32];
  if (ns >= 1'000'000'000) std::snprintf(buf, sizeof buf, "%.3f s", static_cast<double>(ns) / 1e9);
  else if (ns >= 1'000'000) std::snprintf(buf, sizeof buf, "%.3f ms", static_cast<double>(ns) / 1e6);
  else if (ns >= 1'000) std::snprintf(buf, sizeof buf, "%.3f us", static_cast<double>(ns) / 1e3);
  else std::snprintf(buf, sizeof buf, "%" PRIu64 " ns", ns);
  return buf;
}

bool selected(const ReportOptions& o, const std::string& name) {
  if (o.filters.empty()) return true;
  for (const std::string& g : o.filters)
    if (glob_match(g, name)) return true;
  return false;
}

// `from`, with its callees, added into `into` (same names merge).
void merge_into(GraphNode& into, const GraphNode& from) {
  into.figures.calls += from.figures.calls;
  into.figures.total_ns += from.figures.total_ns;
  into.figures.self_ns += from.figures.self_ns;
  into.figures.max_ns = std::max(into.figures.max_ns, from.figures.max_ns);
  for (const auto& [name, child] : from.callees) {
    auto& mine = into.callees[name];
    if (!mine) {
      mine = std::make_unique<GraphNode>();
      mine->name = name;
    }
    merge_into(*mine, *child);
  }
}

// Calls of `pattern` inside other calls of it are already in their tree.
void collect(const GraphNode& node, const std::string& pattern, GraphNode& merged) {
  for (const auto& [name, child] : node.callees) {
    if (glob_match(pattern, name)) {
      merge_into(merged, *child);
    } else {
      collect(*child, pattern, merged);
    }
  }
}

void print_tree(const GraphNode& node, const std::string& prefix, bool last, bool top) {
  std::printf("%9" PRIu64 "  %12s  %12s  %s%s%s\n", node.figures.calls, time_text(node.figures.total_ns).c_str(),
              time_text(node.figures.self_ns).c_str(), prefix.c_str(), top ? "" : (last ? "└─ " : "├─ "),
              node.name.c_str());
  std::vector<const GraphNode*> children;
  for (const auto& [name, child] : node.callees) children.push_back(child.get());
  std::stable_sort(children.begin(), children.end(), [](const GraphNode* a, const GraphNode* b) {
    return a->figures.total_ns > b->figures.total_ns;
  });
  const std::string next = top ? prefix : prefix + (last ? "   " : "│  ");
  for (size_t i = 0; i < children.size(); ++i) print_tree(*children[i], next, i + 1 == children.size(), false);
}

int run_report(const ReportOptions& o) {
  auto fail = [](const std::string& message) {
    std::fprintf(stderr, "ftjit report: %s\n", message.c_str());
    return 1;
  };
  auto summary = summarise_trace(o.file);
  if (!summary) return fail(summary.error().message);
  const TraceSummary& s = *summary;

  if (!o.graph.empty()) {
    GraphNode merged;
    merged.name = o.graph;
    collect(s.root, o.graph, merged);
    if (merged.figures.calls == 0) return fail("no call of '" + o.graph + "' in " + o.file);
    std::printf("ftjit report: %s: the calls under %s (%" PRIu64 " calls of it, merged)\n", o.file.c_str(),
                o.graph.c_str(), merged.figures.calls);
    std::printf("%9s  %12s  %12s  %s\n", "calls", "total", "self", "function");
    print_tree(merged, "", true, true);
    return 0;
  }

  std::vector<std::pair<std::string, CallFigures>> rows;
  uint64_t calls = 0;
  for (const auto& [name, f] : s.functions) {
    calls += f.calls;
    if (selected(o, name)) rows.emplace_back(name, f);
  }
  if (rows.empty() && !o.filters.empty()) return fail("no function of " + o.file + " matches the filters");
  auto avg = [](const CallFigures& f) { return f.calls != 0 ? f.total_ns / f.calls : 0; };
  std::stable_sort(rows.begin(), rows.end(), [&](const auto& a, const auto& b) {
    const CallFigures &x = a.second, &y = b.second;
    if (o.sort == "name") return a.first < b.first;
    if (o.sort == "calls") return x.calls > y.calls;
    if (o.sort == "self") return x.self_ns > y.self_ns;
    if (o.sort == "avg") return avg(x) > avg(y);
    if (o.sort == "max") return x.max_ns > y.max_ns;
    return x.total_ns > y.total_ns;
  });
  std::printf("ftjit report: %s: %" PRIu64 " calls of %zu functions on %" PRIu64 " threads", o.file.c_str(), calls,
              s.functions.size(), s.threads);
  if (s.unfinished != 0) std::printf(" (%" PRIu64 " calls without their exit, not counted)", s.unfinished);
  std::printf("\n%9s  %12s  %12s  %12s  %12s  %s\n", "calls", "total", "self", "avg", "max", "function");
  for (const auto& [name, f] : rows) {
    std::printf("%9" PRIu64 "  %12s  %12s  %12s  %12s  %s\n", f.calls, time_text(f.total_ns).c_str(),
                time_text(f.self_ns).c_str(), time_text(avg(f)).c_str(), time_text(f.max_ns).c_str(), name.c_str());
  }
  return 0;
}

}  // namespace

void add_report_command(CLI::App& app, std::function<int()>* run) {
  auto o = std::make_shared<ReportOptions>();
  CLI::App* cmd = app.add_subcommand(
      "report", "Summarise a recorded trace (--plugin trace --format chrome) per function, or as a call graph");
  cmd->add_option("FILE", o->file, "The trace")->required();
  cmd->add_option("-s,--sort", o->sort, "Order of the functions")
      ->capture_default_str()
      ->check(CLI::IsMember({"total", "self", "calls", "avg", "max", "name"}));
  cmd->add_option("--filter", o->filters, "Only functions matching GLOB. Repeatable");
  cmd->add_option("--graph", o->graph, "The calls under FUNC (a glob), as a tree with their times");
  cmd->callback([run, o] { *run = [o] { return run_report(*o); }; });
}

}  // namespace ftjit::cli
