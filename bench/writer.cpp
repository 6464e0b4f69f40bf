// SPDX-License-Identifier: MIT
// "writer" section: how many events a second the writer thread turns into
// a trace file, on one core.
//
// Method: a trace session as `ftjit run --plugin trace -o FILE` starts
// one (the block policy: nothing lost, raw events spooled as they come),
// on the 200 bench_other_* functions, called in turn 2,000,000 times by
// one thread: 4 M events naming 200 functions. The spool defers all
// formatting to stop(), which hands every event to the plugin's consume()
// on the writer thread while the calling thread waits: the wall time of
// stop() is one core's work of reading the spool back, formatting and
// writing. Into a file in $TMPDIR (the page cache: what a user gets) and
// into /dev/null (the formatting alone). Every event must reach the file:
// a dropped one is an error.
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <string>
#include <vector>

#include "bench/bench.h"
#include "bench/bench_target.h"
#include "runtime/plugin_host/plugin_host.h"

namespace ftjit_bench {
namespace {

constexpr long kCalls = 2'000'000;

double file_size(const std::string& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0 ? static_cast<double>(st.st_size) : 0;
}

struct Target {
  const char* label;
  bool to_file;
};

}  // namespace

void run_writer_section(const BenchOptions& opts, Report& report) {
  using namespace ftjit::plugins;
  std::string error;
  auto engine = Engine::create(FTJIT_STRATEGY_AUTO, &error);
  if (!engine) {
    report.add_error("writer: " + error);
    return;
  }
  Table& table = report.table(
      "writer", "writer: the trace plugin's writer thread, events written per second on one core");
  table.notes.push_back(
      "2,000,000 calls of 200 traced functions in turn (4 M events), block policy (the spool): "
      "every event is formatted at stop(), whose wall time is timed; file: $TMPDIR (page cache)");
  auto spec = parse_plugin_spec("trace");
  if (!spec) {
    report.add_error("writer: " + spec.error().message);
    return;
  }
  const char* tmp = std::getenv("TMPDIR");
  std::string dir_template = std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") +
                             "/ftjit-bench-writer-XXXXXX";
  if (mkdtemp(dir_template.data()) == nullptr) {
    report.add_error("writer: cannot create a scratch directory");
    return;
  }
  const std::string dir = dir_template;
  const int reps = std::max(1, std::min(opts.reps, 5));
  for (const char* format : {"perfetto", "text", "chrome"}) {
    for (const Target& target : {Target{"file", true}, Target{"/dev/null", false}}) {
      const std::string label = std::string("writer: ") + format + " to " + target.label;
      std::vector<double> rates;
      double bytes = 0;
      for (int rep = 0; rep < reps; ++rep) {
        SessionConfig config;
        config.plugins.push_back(spec.value());
        config.include = {"bench_other_*"};
        config.strategy = FTJIT_STRATEGY_GENERATED;
        config.format = format;
        config.output = target.to_file ? dir + "/trace." + format : "/dev/null";
        config.buffer_policy = BufferPolicy::kBlock;
        config.spool = true;
        auto session = TraceSession::start(engine->get(), config);
        if (!session) {
          report.add_error(label + ": " + session.error().message);
          break;
        }
        for (long i = 0; i < kCalls; ++i) bench_others[i % BENCH_OTHER_COUNT](static_cast<int>(i));
        const auto start = std::chrono::steady_clock::now();
        auto stopped = session.value()->stop();
        const double seconds =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        const TraceSession::Totals totals = session.value()->totals();
        if (stopped) stopped = session.value()->report();
        if (!stopped) {
          report.add_error(label + ": " + stopped.error().message);
          break;
        }
        if (totals.events_dropped != 0) {
          report.add_error(label + ": " + std::to_string(totals.events_dropped) + " events lost");
          break;
        }
        session.value().reset();
        if (target.to_file) {
          bytes = file_size(config.output);
          unlink(config.output.c_str());
        }
        rates.push_back(2.0 * kCalls / seconds);
      }
      if (rates.size() != static_cast<size_t>(reps)) continue;
      const Summary s = summarize(rates);
      Row& row = table.rows.emplace_back();
      row.set("format", format).set("output", target.label);
      row.set("M_events_per_s", s.median / 1e6).set("ns_per_event", 1e9 / s.median);
      row.set("bytes_per_event", target.to_file ? Value(bytes / (2.0 * kCalls)) : Value());
      row.set("min_M", s.min / 1e6).set("max_M", s.max / 1e6);
    }
  }
  rmdir(dir.c_str());
}

}  // namespace ftjit_bench
