// SPDX-License-Identifier: MIT
// "programs" section: whole multi-threaded programs traced whole, as a user
// would trace them: `ftjit run --plugin trace --format perfetto -o FILE`
// (the block policy, the default for a file: every event kept), the same
// with --buffer-policy drop, and uftrace's `record` on the same binary,
// beside the untraced run. Wall time of the whole command (the program
// and the writing of its trace), medians of the repetitions; events lost
// as ftjit reports them (every call is two events: the count plugin's run
// gives the total).
//
// The programs: the bundled demo service (C, GCC, =13,8: 4 threads) and
// ftjit-bench-logger (bench/programs/logger.cpp: spdlog's asynchronous
// logger and {fmt}, compiled in whole with clang++-16 and =5, 4 threads
// logging and spdlog's own writer thread). uftrace reads only the =5
// layout, so it runs on the logger alone.
#include <fcntl.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "bench/bench.h"

extern char** environ;

namespace ftjit_bench {
namespace {

struct Program {
  const char* name;
  std::string path;
  std::vector<std::string> args;
  bool uftrace;  // its layout is one uftrace patches (=5)
  std::string xray = "";  // its twin with XRay's sleds and latency handler; "" if none
  bool traces = true;     // the trace rows run on it (else only latency's)
};

struct Ran {
  double seconds = -1;  // < 0: could not run
  double cpu_seconds = 0;  // user + system, the command and what it waited for
  int status = -1;
  std::string err;  // its stderr
};

// Runs argv with stdout to /dev/null and stderr captured; wall time.
Ran run(const std::vector<std::string>& argv, const std::string& scratch) {
  Ran r;
  const std::string err_path = scratch + "/stderr";
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 2, err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const auto start = std::chrono::steady_clock::now();
  pid_t pid;
  rusage usage{};
  if (posix_spawnp(&pid, args[0], &fa, nullptr, args.data(), environ) == 0 &&
      wait4(pid, &r.status, 0, &usage) == pid) {
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    auto secs = [](const timeval& t) { return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) / 1e6; };
    r.cpu_seconds = secs(usage.ru_utime) + secs(usage.ru_stime);
  }
  posix_spawn_file_actions_destroy(&fa);
  std::ifstream f(err_path);
  std::stringstream ss;
  ss << f.rdbuf();
  r.err = ss.str();
  return r;
}

bool executable(const std::string& path) { return access(path.c_str(), X_OK) == 0; }

std::string find_uftrace() {
  for (const char* dir : {"/usr/bin", "/usr/local/bin"}) {
    const std::string p = std::string(dir) + "/uftrace";
    if (executable(p)) return p;
  }
  return "";
}

uint64_t bytes_under(const std::string& path) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) return 0;
  if (!S_ISDIR(st.st_mode)) return static_cast<uint64_t>(st.st_size);
  std::string cmd = "du -sb '" + path + "' 2>/dev/null";
  FILE* p = popen(cmd.c_str(), "r");
  unsigned long long n = 0;
  if (p != nullptr) {
    if (std::fscanf(p, "%llu", &n) != 1) n = 0;
    pclose(p);
  }
  return n;
}

// "dropped N nested calls (...), M events (full buffers...)" -> M.
uint64_t events_lost(const std::string& err) {
  static const std::regex re(R"(, ([0-9]+) events \(full buffers)");
  std::smatch m;
  return std::regex_search(err, m, re) ? std::stoull(m[1].str()) : 0;
}

// The program's calls of traced functions, from the count plugin (tsv).
uint64_t total_calls(const std::string& ftjit, const Program& p, const std::string& scratch) {
  const std::string out = scratch + "/count.tsv";
  std::vector<std::string> argv = {ftjit, "run", "--plugin", "count", "--format", "tsv", "-o", out,
                                   "--", p.path};
  argv.insert(argv.end(), p.args.begin(), p.args.end());
  if (run(argv, scratch).status != 0) return 0;
  std::ifstream f(out);
  std::string line;
  uint64_t total = 0;
  while (std::getline(f, line)) {
    const size_t tab = line.rfind('\t');
    if (tab != std::string::npos) total += std::strtoull(line.c_str() + tab + 1, nullptr, 10);
  }
  return total;
}

}  // namespace

void run_programs_section(const BenchOptions& opts, Report& report) {
  Table& table = report.table(
      "programs", "programs: multi-threaded programs traced whole (wall seconds of the command)");
  const std::string ftjit = FTJIT_BENCH_CLI;
  std::vector<Program> programs;
  programs.push_back({"demo service (C, 4 threads)", FTJIT_BENCH_DEMO_SERVICE, {"0.05"}, false});
#ifdef FTJIT_BENCH_LOGGER
  programs.push_back({"logger (spdlog+fmt, 5 threads)", FTJIT_BENCH_LOGGER, {"40000"}, true});
#ifdef FTJIT_BENCH_LOGGER_XRAY
  // Latency compares per-call costs: the logger's threads each with a
  // logger of their own (nothing shared, nothing that swings), 10 times
  // the messages.
  programs.push_back({"logger, own loggers (4 threads)", FTJIT_BENCH_LOGGER, {"400000", "own"}, false,
                      FTJIT_BENCH_LOGGER_XRAY, false});
#endif
#else
  table.notes.push_back("logger row skipped: this ftjit-bench was built without clang++-16");
#endif
  const std::string uftrace = find_uftrace();
  if (uftrace.empty()) {
    table.notes.push_back("uftrace rows skipped: uftrace is not installed (apt-get install uftrace)");
  }
  char dir_template[] = "/tmp/ftjit-bench-programs-XXXXXX";
  const char* dir = mkdtemp(dir_template);
  if (dir == nullptr || !executable(ftjit)) {
    report.add_error("programs: no scratch directory or no ftjit CLI at " + ftjit);
    return;
  }
  const std::string scratch = dir;
  const int reps = std::max(1, std::min(opts.reps, 5));
  for (const Program& p : programs) {
    if (!executable(p.path)) {
      report.add_error(std::string("programs: ") + p.name + ": " + p.path + " is missing");
      continue;
    }
    const uint64_t events = 2 * total_calls(ftjit, p, scratch);
    // What a mode adds is measured from a base: the program untraced, or
    // for XRay its twin with the sleds as compiled.
    enum class Base { kNone, kUntraced, kXrayUnpatched };
    struct Mode {
      const char* name;
      std::vector<std::string> prefix;
      std::string output;  // what it writes: its size is shown
      Base base = Base::kUntraced;
      std::string binary = "";     // the program run; "" for p.path
      const char* env = nullptr;   // set for the run
    };
    const std::string trace = scratch + "/trace.pftrace";
    const std::string uftrace_dir = scratch + "/uftrace.data";
    std::vector<Mode> modes = {
        {"untraced", {}, ""},
    };
    if (p.traces) {
      modes.insert(modes.end(), {
        {"ftjit trace, block (default with -o)",
         {ftjit, "run", "--plugin", "trace", "--format", "perfetto", "-o", trace, "--"},
         trace},
        {"ftjit trace, drop",
         {ftjit, "run", "--plugin", "trace", "--format", "perfetto", "--buffer-policy", "drop", "-o",
          trace, "--"},
         trace},
      });
    }
    if (p.uftrace && !uftrace.empty()) {
      modes.push_back({"uftrace record -P .", {uftrace, "record", "-P", ".", "-d", uftrace_dir}, uftrace_dir});
    }
    const std::string latency = scratch + "/latency.txt";
    if (!p.xray.empty()) {
      // Latency histograms of every function: ftjit's plugin, and XRay's
      // sleds with a handler that does the same (bench/programs/xray_latency.cpp).
      modes.push_back({"ftjit latency", {ftjit, "run", "--plugin", "latency", "-o", latency, "--"}, ""});
      // The same histograms of 1 call in 8 per function and thread: the
      // calls between turns pay no clock read and no hooked return.
      modes.push_back({"ftjit latency --sample 8",
                       {ftjit, "run", "--plugin", "latency", "--sample", "8", "-o", latency, "--"}, ""});
      modes.push_back({"XRay sleds, unpatched", {}, "", Base::kNone, p.xray, "FTJIT_BENCH_XRAY_OFF=1"});
      modes.push_back({"XRay latency handler", {}, "", Base::kXrayUnpatched, p.xray});
    }
    double untraced = 0, untraced_cpu = 0;
    const size_t first_row = table.rows.size();
    double uftrace_added = -1;  // uftrace record's wall time minus the untraced one
    double xray_unpatched = 0;  // the XRay twin's CPU time, its sleds unpatched
    double xray_added = -1;     // the XRay handler's run minus that
    for (const Mode& m : modes) {
      std::vector<std::string> argv = m.prefix;
      argv.push_back(m.binary.empty() ? p.path : m.binary);
      argv.insert(argv.end(), p.args.begin(), p.args.end());
      std::vector<double> seconds, cpu_seconds;
      uint64_t lost = 0, written = 0;
      bool ok = true;
      for (int rep = 0; rep < reps && ok; ++rep) {
        // Each run writes a new file, as uftrace a new directory: replacing
        // the last run's would make the kernel free its pages (and ext4
        // flush the new one at close, its guard against truncate-and-
        // rewrite) within the timed command.
        unlink(trace.c_str());
        if (m.env != nullptr) putenv(const_cast<char*>(m.env));
        Ran r = run(argv, scratch);
        if (m.env != nullptr) unsetenv(std::string(m.env).substr(0, std::string(m.env).find('=')).c_str());
        if (r.seconds < 0 || !WIFEXITED(r.status) || WEXITSTATUS(r.status) != 0) {
          report.add_error(std::string("programs: ") + p.name + ", " + m.name + ": failed: " +
                           r.err.substr(0, 300));
          ok = false;
          break;
        }
        seconds.push_back(r.seconds);
        cpu_seconds.push_back(r.cpu_seconds);
        lost = events_lost(r.err);
        if (!m.output.empty()) written = bytes_under(m.output);
        if (m.output == uftrace_dir) run({"rm", "-rf", uftrace_dir}, scratch);
      }
      unlink(trace.c_str());
      if (!ok) continue;
      const Summary s = summarize(seconds);
      const double cpu = summarize(cpu_seconds).median;
      const bool is_untraced = m.prefix.empty() && m.binary.empty();
      if (is_untraced) {
        untraced = s.median;
        untraced_cpu = cpu;
      }
      if (m.base == Base::kNone && !m.binary.empty()) xray_unpatched = cpu;
      const double base_cpu = m.base == Base::kXrayUnpatched ? xray_unpatched : untraced_cpu;
      const bool has_added = !is_untraced && m.base != Base::kNone;
      if (m.output == uftrace_dir) uftrace_added = cpu - untraced_cpu;
      if (m.base == Base::kXrayUnpatched) xray_added = cpu - xray_unpatched;
      Row& row = table.rows.emplace_back();
      row.set("program", p.name).set("mode", m.name).set("wall_s", s.median);
      row.set("x_untraced", untraced > 0 ? s.median / untraced : 0.0);
      row.set("events", m.prefix.empty() ? Value() : Value(static_cast<std::int64_t>(events)));
      if (m.prefix.empty() || m.output == uftrace_dir) {
        row.set("events_lost", Value());
      } else {
        row.set("events_lost", static_cast<unsigned long>(lost));
      }
      row.set("output_mb", m.output.empty() ? Value() : Value(static_cast<double>(written) / 1e6));
      row.set("min_s", s.min).set("max_s", s.max);
      row.set("cpu_s", cpu);
      row.set("added_cpu_s", has_added ? Value(cpu - base_cpu) : Value());
      if (!m.prefix.empty() && m.output == trace && std::string(m.name).find("block") != std::string::npos &&
          lost != 0) {
        report.add_error(std::string("programs: ") + p.name + ": the block policy lost " +
                         std::to_string(lost) + " events");
      }
    }
    // What each traced mode adds, as a fraction of what its peer adds:
    // traces against uftrace record's, latency against XRay's.
    for (size_t i = first_row; i < table.rows.size(); ++i) {
      Row& row = table.rows[i];
      const Value* added = row.get("added_cpu_s");
      const Value* mode = row.get("mode");
      const bool latency_row = mode != nullptr && std::holds_alternative<std::string>(*mode) &&
                               std::get<std::string>(*mode).find("latency") != std::string::npos;
      const double peer = latency_row ? xray_added : uftrace_added;
      Value ratio;
      if (peer > 0 && added != nullptr && std::holds_alternative<double>(*added)) {
        ratio = std::get<double>(*added) / peer;
      }
      row.set("added_vs_peer", ratio);
    }
  }
  table.notes.push_back(
      "wall_s: the whole command, writing the trace included (ftjit formats the block policy's "
      "spooled events after the program; uftrace record writes raw data, formatted later by "
      "`uftrace dump`); " +
      std::to_string(reps) + " runs each, median");
  table.notes.push_back("events: 2 per traced call, from `ftjit run --plugin count`");
  table.notes.push_back(
      "cpu_s: user + system time of the command and the processes it waited for (the logger's "
      "wall time is bimodal, 0.1 or 0.6 s untraced, by how its threads meet on spdlog's queue; "
      "its CPU time much less so); added_cpu_s: cpu_s minus the untraced run's (XRay's: minus its "
      "twin's with the sleds as compiled); added_vs_peer: that over the peer's added_cpu_s on the "
      "same program: a trace's over uftrace record's, ftjit latency's over the XRay latency "
      "handler's (the targets: <= 0.5)");
  table.notes.push_back(
      "latency: every function, log2 histograms of entry-to-exit time; XRay: the logger's twin "
      "built with -fxray-instrument -fxray-instruction-threshold=1 and a handler doing the same "
      "(TSC at entry on a per-thread stack, a log2 bucket per function at exit), patched before "
      "main; latency --sample 8: the same histograms of each thread's calls 1, 9, 17... of each "
      "function (the sites' own code takes the turns; the others cost a decrement)");
  // What the runs left: their stderr, the count run's report, latency's.
  for (const char* file : {"/stderr", "/count.tsv", "/latency.txt"}) unlink((scratch + file).c_str());
  rmdir(dir);
}

}  // namespace ftjit_bench
