// SPDX-License-Identifier: MIT
#include "cli/record_options.h"

#include <CLI/CLI.hpp>
#include <signal.h>
#include <string.h>

#include <cmath>
#include <cstdlib>
#include <tuple>

#include "cli/option_values.h"

namespace ftjit::cli {

namespace {

Error bad_record_option(const std::string& message) { return make_error(FTJIT_E_INVALID_ARGUMENT, message); }

constexpr double kYearNs = 365.0 * 24 * 3600 * 1e9;

}  // namespace

void add_record_options(CLI::App* cmd, RecordOptions* o) {
  cmd->add_option("--depth", o->depth,
                  "Record only calls at most N traced frames deep (per thread; 1: the outermost)")
      ->type_name("N");
  cmd->add_option("--min-duration", o->min_duration,
                  "Record only calls that took at least TIME (ns, us, ms, s: 10us), with the calls "
                  "they made that did too; trace, flame and latency (count counts every call)")
      ->type_name("TIME");
  cmd->add_option("--sample", o->sample,
                  "Record 1 call in N of each function, per thread (calls 1, N+1, 2N+1...), with "
                  "its return; count still counts every call")
      ->type_name("N|1/N");
  cmd->add_option("--start-at", o->start_at,
                  "Start recording when FUNC is entered (@return: when it returns), from its Kth "
                  "call on (#K); until then nothing is recorded. Repeatable")
      ->type_name("FUNC[@return][#K]");
  cmd->add_option("--stop-at", o->stop_at,
                  "Stop recording when FUNC is entered (@return: when it returns), from its Kth "
                  "call on (#K). Repeatable")
      ->type_name("FUNC[@return][#K]");
  cmd->add_option("--dump-at", o->dump_at,
                  "With --buffer-policy overwrite: write what the buffers hold (each thread's "
                  "last events) when FUNC is entered (@return: returns), from its Kth call on "
                  "(#K), and go on recording. Repeatable")
      ->type_name("FUNC[@return][#K]");
  cmd->add_option("--on-signal", o->on_signal,
                  "When the traced process gets signal SIG (kill -USR2 PID): start, stop or toggle "
                  "(the default) recording, or dump the buffers; its own handler of SIG is "
                  "replaced while attached")
      ->type_name("SIG[:start|stop|toggle|dump]");
  cmd->add_option("--start-after", o->start_after, "Start recording TIME after the attach")
      ->type_name("TIME");
  cmd->add_option("--stop-after", o->stop_after,
                  "Stop recording TIME after the attach (the session goes on: see --duration)")
      ->type_name("TIME");
}

int parse_signal(const std::string& text) {
  std::string name = text;
  if (name.rfind("SIG", 0) == 0) name = name.substr(3);
  long long n = 0;
  int sig = 0;
  if (detail::parse_whole_number(name, &n)) {
    sig = n > 0 && n < 65 ? static_cast<int>(n) : 0;
  } else if (name.rfind("RTMIN", 0) == 0 || name.rfind("RTMAX", 0) == 0) {
    long long off = 0;
    const std::string rest = name.substr(5);
    if (rest.empty() || (rest.size() > 1 && (rest[0] == '+' || rest[0] == '-') &&
                         detail::parse_whole_number(rest.substr(1), &off))) {
      if (rest.size() > 1 && rest[0] == '-') off = -off;
      sig = static_cast<int>((name[2] == 'M' && name[3] == 'I' ? SIGRTMIN : SIGRTMAX) + off);
    }
  } else {
    for (int s = 1; s < 65; ++s) {
      const char* abbrev = sigabbrev_np(s);
      if (abbrev != nullptr && name == abbrev) sig = s;
    }
  }
  // What cannot be caught, or what ftjit's own stop-the-world and the
  // faults of the program need.
  if (sig == SIGKILL || sig == SIGSTOP || sig == SIGSEGV || sig == SIGBUS || sig == SIGILL ||
      sig == SIGFPE || sig == SIGTRAP || sig < 1 || sig > SIGRTMAX) {
    return 0;
  }
  return sig;
}

bool parse_time_ns(const std::string& text, uint64_t* ns) {
  static const struct {
    const char* unit;
    double ns;
  } kUnits[] = {{"ns", 1}, {"us", 1e3}, {"ms", 1e6}, {"s", 1e9}};
  for (const auto& u : kUnits) {
    const std::string unit = u.unit;
    if (text.size() <= unit.size() || text.compare(text.size() - unit.size(), unit.size(), unit) != 0) continue;
    // "10ms" also ends in "s": the two-letter units come first.
    const std::string number = text.substr(0, text.size() - unit.size());
    double v = 0;
    if (!detail::parse_finite_number(number, &v) || !(v > 0)) return false;
    const double total = v * u.ns;
    if (total > kYearNs || total < 1) return false;
    *ns = static_cast<uint64_t>(std::llround(total));
    return true;
  }
  return false;
}

Result<RecordTrigger> parse_trigger(const std::string& option, const std::string& text) {
  RecordTrigger t;
  std::string rest = text;
  const std::string where = option + " " + detail::shown_value(text);
  if (const size_t hash = rest.rfind('#'); hash != std::string::npos) {
    long long k = 0;
    if (!detail::parse_whole_number(rest.substr(hash + 1), &k) || k < 1) {
      return bad_record_option(where + ": #K must be a call number from 1 (#3: from the third call on)");
    }
    t.from_call = static_cast<uint64_t>(k);
    rest.resize(hash);
  }
  if (const size_t at = rest.rfind('@'); at != std::string::npos) {
    const std::string point = rest.substr(at + 1);
    if (point == "return") {
      t.at_return = true;
    } else if (point != "entry") {
      return bad_record_option(where + ": '@" + point + "' is not a point of a call (@entry or @return)");
    }
    rest.resize(at);
  }
  if (rest.empty()) return bad_record_option(where + ": no function named (FUNC[@return][#K])");
  t.function = rest;
  return t;
}

Result<RecordControl> parse_record_options(const RecordOptions& o) {
  RecordControl r;
  if (!o.depth.empty()) {
    long long n = 0;
    if (!detail::parse_whole_number(o.depth, &n) || n < 1 || n > 1'000'000) {
      return bad_record_option("--depth " + detail::shown_value(o.depth) +
                     ": must be a number of frames from 1 (the outermost traced calls only)");
    }
    r.max_depth = static_cast<uint32_t>(n);
  }
  // A time option, given or not: false (and `error` set) when given wrong.
  Error error = bad_record_option("");
  auto time_option = [&error](const char* option, const std::string& text, uint64_t* ns) {
    if (text.empty() || parse_time_ns(text, ns)) return true;
    error = bad_record_option(std::string(option) + " " + detail::shown_value(text) +
                              ": must be a time with its unit, ns, us, ms or s (e.g. 10us), up to a year");
    return false;
  };
  if (!time_option("--min-duration", o.min_duration, &r.min_duration_ns)) return error;
  if (!o.sample.empty()) {
    std::string n_text = o.sample;
    if (n_text.rfind("1/", 0) == 0) n_text = n_text.substr(2);
    long long n = 0;
    if (!detail::parse_whole_number(n_text, &n) || n < 1 || n > 1'000'000'000) {
      return bad_record_option("--sample " + detail::shown_value(o.sample) +
                     ": must be N or 1/N, a whole number from 1 (every call) to 1000000000");
    }
    r.sample_period = static_cast<uint32_t>(n);
  }
  for (const auto& [option, list, action] :
       {std::tuple{"--start-at", &o.start_at, RecordTrigger::Action::kStart},
        std::tuple{"--stop-at", &o.stop_at, RecordTrigger::Action::kStop},
        std::tuple{"--dump-at", &o.dump_at, RecordTrigger::Action::kDump}}) {
    for (const std::string& text : *list) {
      auto t = parse_trigger(option, text);
      if (!t) return t.take_error();
      t.value().action = action;
      r.triggers.push_back(std::move(t.value()));
    }
  }
  if (!time_option("--start-after", o.start_after, &r.start_after_ns)) return error;
  if (!time_option("--stop-after", o.stop_after, &r.stop_after_ns)) return error;
  if (!o.on_signal.empty()) {
    const size_t colon = o.on_signal.rfind(':');
    const std::string sig = o.on_signal.substr(0, colon);
    const std::string action = colon == std::string::npos ? "toggle" : o.on_signal.substr(colon + 1);
    r.signal = parse_signal(sig);
    if (r.signal == 0) {
      return bad_record_option("--on-signal " + detail::shown_value(o.on_signal) + ": '" + sig +
                               "' is not a signal a program can catch (USR1, USR2, SIGRTMIN+3, 40...)");
    }
    if (action == "start") {
      r.signal_action = TriggerAction::kStart;
    } else if (action == "stop") {
      r.signal_action = TriggerAction::kStop;
    } else if (action == "toggle") {
      r.signal_action = TriggerAction::kToggle;
    } else if (action == "dump") {
      r.signal_action = TriggerAction::kDump;
    } else {
      return bad_record_option("--on-signal " + detail::shown_value(o.on_signal) + ": '" + action +
                               "' is not an action (start, stop, toggle or dump)");
    }
  }
  if (std::string why = check_record_control(r); !why.empty()) return bad_record_option(why);
  return r;
}

}  // namespace ftjit::cli
