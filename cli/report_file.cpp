// SPDX-License-Identifier: MIT
// JSON reports and traces read back (report_file.h), with nlohmann/json.
#include "cli/report_file.h"

#include <nlohmann/json.hpp>

#include <fstream>
#include <set>
#include <sstream>

#include "cli/trace_summary.h"

namespace ftjit::cli {
namespace {

using nlohmann::json;

uint64_t count_of(const json& j, const char* key) {
  const auto it = j.find(key);
  if (it == j.end() || !it->is_number()) throw std::runtime_error(std::string("no number \"") + key + "\"");
  const double v = it->get<double>();
  if (v < 0) throw std::runtime_error(std::string("\"") + key + "\" is negative");
  return static_cast<uint64_t>(v);
}

std::string name_of(const json& j) {
  const auto it = j.find("name");
  if (it == j.end() || !it->is_string()) throw std::runtime_error("a function without a \"name\"");
  return it->get<std::string>();
}

RunReport from_functions(const json& doc) {
  RunReport r;
  const bool latency = doc.contains("unit");
  r.kind = latency ? "latency" : "count";
  r.has_total = latency;
  for (const json& f : doc.at("functions")) {
    FunctionFigures& figures = r.functions[name_of(f)];
    figures.calls += count_of(f, latency ? "count" : "calls");
    if (latency) figures.total_ns += count_of(f, "total_ns");
  }
  return r;
}

RunReport from_stacks(const json& doc) {
  RunReport r;
  r.kind = "flame";
  r.has_total = r.has_self = doc.value("unit", std::string()) == "ns";
  for (const json& s : doc.at("stacks")) {
    const json& frames = s.at("frames");
    if (!frames.is_array() || frames.empty()) throw std::runtime_error("a stack without frames");
    const std::string leaf = frames.back().get<std::string>();
    if (leaf.size() > 1 && leaf.front() == '[' && leaf.back() == ']') continue;  // [truncated], [table full]
    FunctionFigures& figures = r.functions[leaf];
    figures.calls += count_of(s, "calls");
    if (!r.has_total) continue;
    figures.self_ns += count_of(s, "self_ns");
    bool outermost = true;
    for (size_t i = 0; i + 1 < frames.size() && outermost; ++i) outermost = frames[i].get<std::string>() != leaf;
    if (outermost) figures.total_ns += count_of(s, "total_ns");
  }
  return r;
}

// A recorded trace: its calls matched as `ftjit report` matches them.
Result<RunReport> from_trace(const std::string& path) {
  auto summary = summarise_trace(path);
  if (!summary) return summary.take_error();
  RunReport r;
  r.kind = "trace";
  r.has_total = r.has_self = true;
  r.functions = std::move(summary->functions);
  return r;
}

}  // namespace

Result<RunReport> load_report(const std::string& path) {
  std::ifstream in(path);
  if (!in) return make_error(FTJIT_E_INVALID_ARGUMENT, path + ": cannot be read");
  std::stringstream text;
  text << in.rdbuf();
  try {
    const json doc = json::parse(text.str());
    if (!doc.is_object()) throw std::runtime_error("not a JSON object");
    if (doc.contains("traceEvents")) return from_trace(path);
    if (doc.contains("stacks")) return from_stacks(doc);
    if (doc.contains("functions")) return from_functions(doc);
    throw std::runtime_error(
        "neither \"functions\" (count, latency), \"stacks\" (flame) nor \"traceEvents\" (trace)");
  } catch (const std::exception& e) {
    return make_error(FTJIT_E_INVALID_ARGUMENT,
                      path + ": not a JSON report of count, latency or flame (--format json), nor a trace "
                             "(--plugin trace --format chrome): " + e.what());
  }
}

}  // namespace ftjit::cli
