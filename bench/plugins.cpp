// SPDX-License-Identifier: MIT
// "plugins" section: the per-call cost of each built-in tracer plugin on
// bench_leaf, loaded through the plugin host exactly as the CLI loads it.
//
// Method: one engine; baseline = bench_leaf with no ops (same run, before
// and after, pooled); per plugin: start a session (generated strategy,
// filter bench_leaf, output to a scratch file), warm up, K timed
// repetitions of N calls, stop, report. The count plugin's report is read
// back and must say exactly how many calls were made; events the trace
// plugin's buffers had to drop are shown, never hidden.
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "bench/bench.h"
#include "bench/bench_target.h"
#include "backends/calling_convention.h"
#include "runtime/plugin_host/plugin_host.h"

namespace ftjit_bench {
namespace {

// Which function a row traces: bench_leaf, or bench_args4 (four integer
// arguments), without or with its arguments and return value captured.
enum class Traced { kLeaf, kArgs4, kArgs4Captured };

// What the session records (record control): everything; through the
// live record gate; paused (the sites unpatched); the site filtered out
// live (unpatched); before a start trigger (patched, the gate drops each
// call); 1 call in 10; only calls of 1 ms or more (none of bench_leaf's:
// each is held back, then dropped).
enum class Recording { kAll, kLive, kLivePaused, kLiveFilteredOut, kBeforeStart, kSample10, kMinDuration1ms };

struct PluginRow {
  const char* spec;
  const char* format;
  int events_per_call;  // buffered events a call produces (0: none)
  Traced traced = Traced::kLeaf;
  Recording recording = Recording::kAll;
};

const char* recording_label(Recording r) {
  switch (r) {
    case Recording::kAll: return "";
    case Recording::kLive: return " --live";
    case Recording::kLivePaused: return " --live, paused";
    case Recording::kLiveFilteredOut: return " --live, filtered out";
    case Recording::kBeforeStart: return " --start-at, before it";
    case Recording::kSample10: return " --sample 10";
    case Recording::kMinDuration1ms: return " --min-duration 1ms";
  }
  return "";
}

// A tracer with events gets a buffer that stays in cache (256 KiB of trace
// events) and is timed in chunks that half fill it; between chunks, untimed,
// the writer thread empties it. So every timed event is recorded, as when a
// writer keeps up: on two shared cores it does not, and a dropped event
// costs less than a recorded one (no clock read).
constexpr uint32_t kEventBuffer = 8192;
constexpr long kEventCallsPerRep = 250'000;

constexpr PluginRow kPlugins[] = {
    {"count", "tsv", 0},
    {"latency", "text", 0},
    {"flame", "folded", 0},
    {"flame:weight=calls", "folded", 0},
    {"trace", "perfetto", 2},
    {"trace", "text", 2},
    {"trace", "text", 2, Traced::kArgs4},
    {"trace", "text", 2, Traced::kArgs4Captured},
    {"count", "tsv", 0, Traced::kLeaf, Recording::kLive},
    {"count", "tsv", 0, Traced::kLeaf, Recording::kLivePaused},
    {"count", "tsv", 0, Traced::kLeaf, Recording::kLiveFilteredOut},
    {"count", "tsv", 0, Traced::kLeaf, Recording::kBeforeStart},
    {"trace", "text", 2, Traced::kLeaf, Recording::kLive},
    {"trace", "text", 2, Traced::kLeaf, Recording::kSample10},
    {"trace", "text", 2, Traced::kLeaf, Recording::kMinDuration1ms},
};

// What `ftjit run --args` sends for bench_args4 (its DWARF says four longs
// and a long): placed by this ISA's calling convention.
ftjit::ArgCaptureSpec args4_capture(long (*fn)(long, long, long, long) = &bench_args4,
                                    const char* name = "bench_args4") {
  using namespace ftjit;
  CapturedFunction f;
  f.ip = reinterpret_cast<uint64_t>(fn);
  f.signature.name = name;
  ValueType word;
  word.kind = ValueKind::kSigned;
  word.size = 8;
  word.align = 8;
  word.name = "long";
  word.is_signed = true;
  for (const char* name : {"a", "b", "c", "d"}) f.signature.params.push_back({name, word, false});
  f.signature.ret = word;
#if defined(__x86_64__)
  f.placed = place_arguments(Isa::kX86_64, f.signature);
#elif defined(__aarch64__)
  f.placed = place_arguments(Isa::kArm64, f.signature);
#else
  f.placed = place_arguments(Isa::kRiscv64, f.signature);
#endif
  ArgCaptureSpec spec;
  spec.functions.push_back(std::move(f));
  return spec;
}

// ns per call of `calls` calls of bench_leaf, `chunk` at a time, waiting
// (untimed) after each chunk until the writer consumed every event.
double time_recorded(const BenchOptions& opts, ftjit::plugins::TraceSession& session,
                     long calls, long chunk, LeafFn fn) {
  double total = 0;
  for (long done = 0; done < calls; done += chunk) {
    const long n = std::min(chunk, calls - done);
    total += time_calls(fn, n, opts.cpu_clock);
    while (session.totals().events_pending != 0) usleep(200);
  }
  return total / static_cast<double>(calls);
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// What --args adds to trace on bench_args4, measured in pairs: two
// sessions at once, one tracing a function with --args, the other its
// twin without, and the calls alternate between the two a chunk at a
// time (which one goes first alternates too). Both rings and both writers
// live through the same moments, so whatever drifts (the other core's
// load, the clock's speed, where a session's ring landed) moves both
// halves of a pair alike.
//
// A crossover: the twins are not alike to the machine (their addresses,
// what they share a cache line or a predictor entry with), and with
// neither captured, bench_args4 traced cost 10-12 ns more than its twin,
// more than --args itself. So every other pair of sessions swaps them
// (--args on bench_args4, then on bench_args4_twin), and one sample is
// the mean of the two pairs' differences: the twins' own difference
// cancels. Empty on a failure.
// The timed thread on one CPU, the sessions' writer threads on the
// others. The writers are created by the thread that starts a session and
// take its CPU mask: started from the other CPUs, they stay there. Left
// free, a writer woken while the timed thread sleeps between chunks
// (drained) ran on its CPU, and the next chunk paid for the caches it
// filled: on this machine trace --args measured 12-14 ns (text) and
// 17-20 ns (perfetto) that way, its own work 4-6 ns. A traced program
// whose threads are busy leaves the writer another core just the same.
// Nothing changes on a machine with one CPU.
class WriterCpus {
 public:
  WriterCpus() {
    if (sched_getaffinity(0, sizeof all_, &all_) != 0 || CPU_COUNT(&all_) < 2) return;
    int cpu = 0;
    while (!CPU_ISSET(cpu, &all_)) ++cpu;  // the first one allowed
    CPU_ZERO(&timed_);
    CPU_SET(cpu, &timed_);
    others_ = all_;
    CPU_CLR(cpu, &others_);
    split_ = true;
  }
  ~WriterCpus() {
    if (split_) sched_setaffinity(0, sizeof all_, &all_);
  }
  // Around starting sessions: on the writers' CPUs, then on the timed one.
  void starting() {
    if (split_) sched_setaffinity(0, sizeof others_, &others_);
  }
  void started() {
    if (split_) sched_setaffinity(0, sizeof timed_, &timed_);
  }

 private:
  cpu_set_t all_{}, timed_{}, others_{};
  bool split_ = false;
};

std::vector<double> paired_args_cost(const BenchOptions& opts, ftjit_engine* engine,
                                     const std::string& dir, std::string* error) {
  using namespace ftjit::plugins;
  auto spec = parse_plugin_spec("trace");
  if (!spec) {
    *error = spec.error().message;
    return {};
  }
  struct Twin {
    const char* name;
    long (*fn)(long, long, long, long);
    int (*caller)(int);
  };
  const Twin twins[2] = {{"bench_args4", &bench_args4, &bench_args4_caller},
                         {"bench_args4_twin", &bench_args4_twin, &bench_args4_twin_caller}};
  auto start = [&](const Twin& twin, bool with_args) -> std::unique_ptr<TraceSession> {
    SessionConfig config;
    config.plugins.push_back(spec.value());
    config.include = {twin.name};
    if (with_args) config.args = args4_capture(twin.fn, twin.name);
    config.strategy = FTJIT_STRATEGY_GENERATED;
    config.format = "text";
    config.output = dir + (with_args ? "/paired_args.text" : "/paired.text");
    config.buffer_events = kEventBuffer;
    auto session = TraceSession::start(engine, config);
    if (!session) {
      *error = session.error().message;
      return nullptr;
    }
    return std::move(session.value());
  };
  auto finish = [&](std::unique_ptr<TraceSession> session, const char* file) {
    auto stopped = session->stop();
    if (stopped) stopped = session->report();
    session.reset();
    unlink((dir + file).c_str());
    if (!stopped) *error = stopped.error().message;
    return static_cast<bool>(stopped);
  };
  const long n = std::min(opts.calls, kEventCallsPerRep);
  const long chunk = kEventBuffer / 2 / 2;
  // One pair of sessions, --args on twins[captured]: ns per call with
  // --args minus ns per call without; NaN on a failure.
  auto pair_difference = [&](int rep, int captured, bool args_first) {
    const Twin& with = twins[captured];
    const Twin& without = twins[1 - captured];
    std::unique_ptr<TraceSession> with_args, plain;
    WriterCpus cpus;
    cpus.starting();
    if (args_first) {
      with_args = start(with, true);
      if (with_args) plain = start(without, false);
    } else {
      plain = start(without, false);
      if (plain) with_args = start(with, true);
    }
    cpus.started();
    if (!plain || !with_args) return std::nan("");
    double ns[2] = {0, 0};  // [0] plain, [1] with --args
    auto drained = [&] {
      while (plain->totals().events_pending != 0 || with_args->totals().events_pending != 0)
        usleep(200);
    };
    const long warmup = warmup_calls(n);
    long timed = 0;  // calls of each half
    for (long done = 0; done < warmup + n; done += chunk) {
      for (int half = 0; half < 2; ++half) {
        const int which = (half + rep) % 2;
        const double t = time_calls(which == 1 ? with.caller : without.caller, chunk, opts.cpu_clock);
        if (done >= warmup) ns[which] += t;
        drained();
      }
      if (done >= warmup) timed += chunk;
    }
    if (!finish(std::move(plain), "/paired.text") || !finish(std::move(with_args), "/paired_args.text"))
      return std::nan("");
    return (ns[1] - ns[0]) / static_cast<double>(timed);
  };
  // Three samples a repetition: one moves by 2 ns either way from the
  // next on a 2-core VM, and the median of 3 x --reps moves less.
  std::vector<double> samples;
  for (int rep = 0; rep < 3 * opts.reps; ++rep) {
    double sum = 0;
    for (int k = 0; k < 4; ++k) {
      const double d = pair_difference(rep + k, (rep + k) % 2, ((rep + k) / 2) % 2 == 0);
      if (std::isnan(d)) return {};
      sum += d;
    }
    samples.push_back(sum / 4);
  }
  return samples;
}

}  // namespace

void run_plugins_section(const BenchOptions& opts, Report& report) {
  using namespace ftjit::plugins;
  std::string error;
  auto engine = Engine::create(FTJIT_STRATEGY_AUTO, &error);
  if (!engine) {
    report.add_error("plugins: " + error);
    return;
  }
  Table& table =
      report.table("plugins", "plugins: built-in tracers on bench_leaf (ns per call)");
  table.notes.push_back(
      "loaded through the plugin host as `ftjit --plugin NAME` would; generated strategy; "
      "overhead = per-call minus the untraced bench_leaf of the same run");
  table.notes.push_back(
      "record control: --live puts the record gate in front of the plugin (a frame per call, the "
      "exit hooked, no inline work); paused (ftjit control --pause) or filtered out (--filter), the "
      "site is unpatched and costs what an untraced one does; before a --start-at trigger, the site "
      "stays patched and the gate drops each call; --sample 10 records 1 call in 10; "
      "--min-duration 1ms holds every call back and drops it at its return");
  table.notes.push_back(
      "trace: two events per call (entry, exit) into per-thread buffers, streamed to a file by "
      "the writer thread (on another CPU than the timed thread); per_event_ns = overhead / 2; repetitions of at most 250,000 calls "
      "timed 2,048 at a time into a buffer of 8,192 events that the writer empties between "
      "chunks, untimed: every event recorded (a dropped one costs less, no clock read)");

  char dir_template[] = "/tmp/ftjit-bench-plugins-XXXXXX";
  const char* dir = mkdtemp(dir_template);
  if (dir == nullptr) {
    report.add_error("plugins: cannot create a scratch directory");
    return;
  }
  std::vector<double> untraced = time_reps(opts, &bench_leaf);
  struct Measured {
    const PluginRow* row;
    Summary s;
    uint64_t dropped;
  };
  std::vector<Measured> measured;
  std::vector<double> untraced_args4 = time_reps(opts, &bench_args4_caller);
  for (const PluginRow& row : kPlugins) {
    const bool args4 = row.traced != Traced::kLeaf;
    const LeafFn fn = args4 ? &bench_args4_caller : &bench_leaf;
    const std::string label = std::string("plugins/") + row.spec + " " + row.format +
                              (args4 ? row.traced == Traced::kArgs4Captured ? " args4 --args" : " args4" : "") +
                              recording_label(row.recording);
    auto spec = parse_plugin_spec(row.spec);
    if (!spec) {
      report.add_error(label + ": " + spec.error().message);
      continue;
    }
    SessionConfig config;
    config.plugins.push_back(spec.value());
    config.include = {args4 ? "bench_args4" : "bench_leaf"};
    if (row.traced == Traced::kArgs4Captured) config.args = args4_capture();
    config.strategy = FTJIT_STRATEGY_GENERATED;
    config.format = row.format;
    config.output = std::string(dir) + "/" + row.spec + (args4 ? "_args4." : ".") + row.format;
    if (row.events_per_call > 0) config.buffer_events = kEventBuffer;
    config.live = row.recording == Recording::kLive || row.recording == Recording::kLivePaused ||
                  row.recording == Recording::kLiveFilteredOut;
    if (row.recording == Recording::kSample10) config.record.sample_period = 10;
    // A start trigger on a function these calls never reach.
    if (row.recording == Recording::kBeforeStart) {
      config.record.triggers.push_back({ftjit::TriggerAction::kStart, "bench_args4", false, 1});
    }
    if (row.recording == Recording::kMinDuration1ms) config.record.min_duration_ns = 1'000'000;
    WriterCpus cpus;
    cpus.starting();
    auto session = TraceSession::start(engine->get(), config);
    cpus.started();
    if (!session) {
      report.add_error(label + ": " + session.error().message);
      continue;
    }
    TraceSession::Control change;
    if (row.recording == Recording::kLivePaused) change.paused = true;
    if (row.recording == Recording::kLiveFilteredOut) {
      change.filter = std::make_pair(std::vector<std::string>{"bench_args4"}, std::vector<std::string>{});
    }
    if (auto st = session.value()->control(change); !st) report.add_error(label + ": " + st.error().message);
    uint64_t calls = 0;
    std::vector<double> per_call;
    if (row.events_per_call > 0) {
      const long n = std::min(opts.calls, kEventCallsPerRep);
      const long chunk = kEventBuffer / 2 / row.events_per_call;
      time_recorded(opts, *session.value(), warmup_calls(n), chunk, fn);
      for (int rep = 0; rep < opts.reps; ++rep) {
        per_call.push_back(time_recorded(opts, *session.value(), n, chunk, fn));
      }
      calls = static_cast<uint64_t>(n) * static_cast<uint64_t>(opts.reps) +
              static_cast<uint64_t>(warmup_calls(n));
    } else {
      per_call = time_reps(opts, &bench_leaf);
      calls = static_cast<uint64_t>(opts.calls) * static_cast<uint64_t>(opts.reps) +
              static_cast<uint64_t>(warmup_calls(opts.calls));
    }
    if (auto st = session.value()->stop(); !st) report.add_error(label + ": " + st.error().message);
    const uint64_t dropped = session.value()->totals().events_dropped;
    if (auto st = session.value()->report(); !st) {
      report.add_error(label + ": " + st.error().message);
    }
    session.value().reset();
    if (row.traced == Traced::kArgs4Captured) {
      // The trace shows what the calls passed: the first is (x, x+1, ...).
      const std::string got = read_file(config.output);
      if (got.find("bench_args4(a=") == std::string::npos) {
        report.add_error(label + ": the trace shows no arguments");
      }
    }
    if (std::string(row.spec) == "count") {
      // Paused or filtered out, bench_leaf is not counted at all.
      const bool counted = row.recording == Recording::kAll || row.recording == Recording::kLive;
      const std::string want = counted ? "bench_leaf\t" + std::to_string(calls) + "\n" : "";
      const std::string got = read_file(config.output);
      if (got != want) report.add_error(label + ": report says '" + got + "', want '" + want + "'");
    }
    unlink(config.output.c_str());
    measured.push_back({&row, summarize(per_call), dropped});
  }
  std::string paired_error;
  const std::vector<double> paired_diffs = paired_args_cost(opts, engine->get(), dir, &paired_error);
  if (paired_diffs.empty()) report.add_error("plugins: trace --args paired: " + paired_error);
  const Summary paired = summarize(paired_diffs);
  const size_t paired_samples = paired_diffs.size();
  rmdir(dir);
  std::vector<double> after = time_reps(opts, &bench_leaf);
  untraced.insert(untraced.end(), after.begin(), after.end());
  const Summary base = summarize(untraced);
  after = time_reps(opts, &bench_args4_caller);
  untraced_args4.insert(untraced_args4.end(), after.begin(), after.end());
  const Summary base_args4 = summarize(untraced_args4);
  const Summary* args4_plain = nullptr;
  table.rows.push_back(Row()
                           .set("plugin", "none (untraced)")
                           .set("format", "-")
                           .set("per_call_ns", base.median)
                           .set("overhead_ns", 0.0)
                           .set("per_event_ns", Value())
                           .set("events_dropped", 0L)
                           .set("min_ns", base.min)
                           .set("max_ns", base.max));
  table.rows.push_back(Row()
                           .set("plugin", "none (untraced), bench_args4")
                           .set("format", "-")
                           .set("per_call_ns", base_args4.median)
                           .set("overhead_ns", 0.0)
                           .set("per_event_ns", Value())
                           .set("events_dropped", 0L)
                           .set("min_ns", base_args4.min)
                           .set("max_ns", base_args4.max));
  for (const Measured& m : measured) {
    const bool args4 = m.row->traced != Traced::kLeaf;
    const double overhead = m.s.median - (args4 ? base_args4.median : base.median);
    Row& r = table.rows.emplace_back();
    std::string plugin = m.row->spec;
    if (m.row->traced == Traced::kArgs4) {
      plugin += ", bench_args4";
      args4_plain = &m.s;
    } else if (m.row->traced == Traced::kArgs4Captured) {
      plugin += " --args, bench_args4";
      if (args4_plain != nullptr) {
        table.notes.push_back([&] {
          char b[64];
          std::snprintf(b, sizeof b, "%.2f ns (rows: %.2f)", paired.median, m.s.median - args4_plain->median);
          return std::string(b);
        }() + " per call: what trace --args adds on bench_args4 (four integer arguments and a return "
              "value captured), median of " + std::to_string(paired_samples) + " crossover samples, "
              "each the mean of two pairs of live sessions (--args on bench_args4 and its twin "
              "plain, then the other way round; the timed thread on one CPU, the writers on the "
              "others; rows: the difference of the two rows' medians)");
      }
    }
    plugin += recording_label(m.row->recording);
    r.set("plugin", plugin).set("format", m.row->format).set("per_call_ns", m.s.median);
    r.set("overhead_ns", overhead);
    if (m.row->events_per_call > 0 && m.row->recording != Recording::kSample10 &&
        m.row->recording != Recording::kMinDuration1ms) {
      r.set("per_event_ns", overhead / m.row->events_per_call);
    } else {
      r.set("per_event_ns", Value());
    }
    r.set("events_dropped", static_cast<unsigned long>(m.dropped))
        .set("min_ns", m.s.min)
        .set("max_ns", m.s.max);
  }
  run_clock_rows(opts, report, base);
}

}  // namespace ftjit_bench
