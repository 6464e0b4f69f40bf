// SPDX-License-Identifier: MIT
// Live control of a trace session (TraceSession::control): pause, resume,
// the record limits and the filter, changed while the threads go on.
#include <algorithm>
#include <string>

#include "runtime/plugin_host/host_internal.h"
#include "runtime/plugin_host/record_triggers.h"

namespace ftjit::plugins {

using detail::Instance;

namespace {

Error control_error(const std::string& message) { return make_error(FTJIT_E_INVALID_ARGUMENT, message); }

std::string time_text(uint64_t ns) {
  if (ns % 1'000'000'000 == 0) return std::to_string(ns / 1'000'000'000) + "s";
  if (ns % 1'000'000 == 0) return std::to_string(ns / 1'000'000) + "ms";
  if (ns % 1'000 == 0) return std::to_string(ns / 1'000) + "us";
  return std::to_string(ns) + "ns";
}

}  // namespace

namespace detail {

void apply_record_limits(Gate& gate, const RecordControl& record) {
  gate.max_depth.store(record.max_depth, std::memory_order_relaxed);
  gate.sample_period.store(gate.every_call || record.sample_period <= 1 ? 0 : record.sample_period,
                           std::memory_order_relaxed);
  gate.min_duration_ns.store(gate.every_call ? 0 : record.min_duration_ns, std::memory_order_relaxed);
  gate.info.struct_size = sizeof(ftjit_record_info);
  gate.info.max_depth = record.max_depth;
  gate.info.sample_period = record.sample_period <= 1 ? 1 : record.sample_period;
  gate.info.min_duration_ns = record.min_duration_ns;
  gate.info.triggers = static_cast<uint32_t>(record.triggers.size()) + (record.start_after_ns != 0) +
                       (record.stop_after_ns != 0) + (record.signal != 0);
  gate.info.applies = gate.every_call ? 0 : 1;
}

std::string unnarrowed(const std::vector<std::unique_ptr<Instance>>& instances, const char* option) {
  const bool none = std::all_of(instances.begin(), instances.end(),
                                [](const auto& inst) { return inst->gate.every_call; });
  if (!none || instances.empty()) return {};
  return std::string(option) + ": no plugin of this session is narrowed by it (" + instances.front()->name() +
         " counts every call); use it with trace, flame or latency";
}

}  // namespace detail

bool TraceSession::live() const {
  return !instances_.empty() &&
         std::all_of(instances_.begin(), instances_.end(), [](const auto& inst) { return inst->gated; });
}

Status TraceSession::control(const Control& change) {
  if (stopped_) return control_error("the session has stopped");
  const bool limits = change.max_depth || change.sample_period || change.min_duration_ns;
  if (limits && !live()) {
    return control_error(
        "this session records without a record gate: attach with --live (or any of --depth, --sample, "
        "--min-duration, the triggers) to change its depth, sampling or minimum duration");
  }
  if (change.max_depth && *change.max_depth > 1'000'000) return control_error("--depth: at most 1000000 frames");
  if (change.sample_period && *change.sample_period > 1'000'000'000) {
    return control_error("--sample: at most 1 call in 1000000000");
  }
  const bool narrows = (change.sample_period && *change.sample_period > 1) ||
                       (change.min_duration_ns && *change.min_duration_ns != 0);
  if (narrows) {
    const std::string why = detail::unnarrowed(instances_, change.sample_period ? "--sample" : "--min-duration");
    if (!why.empty()) return control_error(why);
  }

  // The filter first: the only change that can fail half-way.
  if (change.filter) {
    const auto& [include, exclude] = *change.filter;
    std::vector<const char*> inc, exc;
    for (const std::string& g : include) inc.push_back(g.c_str());
    for (const std::string& g : exclude) exc.push_back(g.c_str());
    const ftjit_filter filter{inc.data(), inc.size(), exc.data(), exc.size()};
    const ftjit_filter old{include_.data(), include_.size(), exclude_.data(), exclude_.size()};
    for (size_t i = 0; i < instances_.size(); ++i) {
      const ftjit_status st = ftjit_set_filter(engine_, &instances_[i]->ctx.ops, &filter);
      if (st == FTJIT_OK) continue;
      std::string why = st == FTJIT_E_NO_MATCH ? std::string("the filter selects no patchable function")
                                               : std::string(ftjit_status_name(st)) + ": " + ftjit_last_error();
      // Back to the old filter for those already changed.
      for (size_t j = 0; j < i; ++j) (void)ftjit_set_filter(engine_, &instances_[j]->ctx.ops, &old);
      return make_error(st, "--filter: " + why + "; nothing changed");
    }
    config_.include = include;
    config_.exclude = exclude;
    include_.clear();
    exclude_.clear();
    for (const std::string& g : config_.include) include_.push_back(g.c_str());
    for (const std::string& g : config_.exclude) exclude_.push_back(g.c_str());
  }

  RecordControl& record = config_.record;
  if (change.max_depth) record.max_depth = *change.max_depth;
  if (change.sample_period) record.sample_period = *change.sample_period;
  if (change.min_duration_ns) record.min_duration_ns = *change.min_duration_ns;
  for (auto& inst : instances_) detail::apply_record_limits(inst->gate, record);
  // Paused, the plugins' sites are unpatched (each plugin in one batch):
  // a paused function costs what an untraced one does. The trigger ops
  // stay: a trigger still fires while paused.
  if (change.paused && *change.paused != paused()) {
    const int want = *change.paused ? 1 : 0;
    for (size_t i = 0; i < instances_.size(); ++i) {
      const ftjit_status st = ftjit_set_paused(engine_, &instances_[i]->ctx.ops, want);
      if (st == FTJIT_OK) continue;
      const std::string why = std::string(ftjit_status_name(st)) + ": " + ftjit_last_error();
      for (size_t j = 0; j < i; ++j) (void)ftjit_set_paused(engine_, &instances_[j]->ctx.ops, 1 - want);
      return make_error(st, std::string(want ? "--pause: " : "--resume: ") + why);
    }
    paused_.store(want, std::memory_order_relaxed);
  }
  return {};
}

std::string TraceSession::describe_recording() const {
  std::string s;
  auto add = [&s](const std::string& part) { s += (s.empty() ? "" : ", ") + part; };
  const RecordControl& r = config_.record;
  add(paused() ? "paused" : "recording");
  if (triggers_ != nullptr) {
    add(std::string("triggers: recording ") +
        (triggers_->recording()->load(std::memory_order_relaxed) != 0 ? "on" : "off"));
  }
  if (r.max_depth != 0) add("depth <= " + std::to_string(r.max_depth));
  if (r.sample_period > 1) add("1 call in " + std::to_string(r.sample_period));
  if (r.min_duration_ns != 0) add("calls >= " + time_text(r.min_duration_ns));
  std::string filter;
  for (const std::string& g : config_.include) filter += (filter.empty() ? "'" : " '") + g + "'";
  if (filter.empty()) filter = "every function";
  for (const std::string& g : config_.exclude) filter += " but not '" + g + "'";
  add("filter " + filter);
  add(live() ? "live" : "limits fixed (attached without --live)");
  return s;
}

}  // namespace ftjit::plugins
