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
};

struct Ran {
  double seconds = -1;  // < 0: could not run
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
  if (posix_spawnp(&pid, args[0], &fa, nullptr, args.data(), environ) == 0 &&
      waitpid(pid, &r.status, 0) == pid) {
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
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
  const int reps = std::max(1, std::min(opts.reps, 3));
  for (const Program& p : programs) {
    if (!executable(p.path)) {
      report.add_error(std::string("programs: ") + p.name + ": " + p.path + " is missing");
      continue;
    }
    const uint64_t events = 2 * total_calls(ftjit, p, scratch);
    struct Mode {
      const char* name;
      std::vector<std::string> prefix;
      std::string output;  // what it writes: its size is shown
    };
    const std::string trace = scratch + "/trace.pftrace";
    const std::string uftrace_dir = scratch + "/uftrace.data";
    std::vector<Mode> modes = {
        {"untraced", {}, ""},
        {"ftjit trace, block (default with -o)",
         {ftjit, "run", "--plugin", "trace", "--format", "perfetto", "-o", trace, "--"},
         trace},
        {"ftjit trace, drop",
         {ftjit, "run", "--plugin", "trace", "--format", "perfetto", "--buffer-policy", "drop", "-o",
          trace, "--"},
         trace},
    };
    if (p.uftrace && !uftrace.empty()) {
      modes.push_back({"uftrace record -P .", {uftrace, "record", "-P", ".", "-d", uftrace_dir}, uftrace_dir});
    }
    double untraced = 0;
    const size_t first_row = table.rows.size();
    double uftrace_added = -1;  // uftrace record's wall time minus the untraced one
    for (const Mode& m : modes) {
      std::vector<std::string> argv = m.prefix;
      argv.push_back(p.path);
      argv.insert(argv.end(), p.args.begin(), p.args.end());
      std::vector<double> seconds;
      uint64_t lost = 0, written = 0;
      bool ok = true;
      for (int rep = 0; rep < reps && ok; ++rep) {
        // Each run writes a new file, as uftrace a new directory: replacing
        // the last run's would make the kernel free its pages (and ext4
        // flush the new one at close, its guard against truncate-and-
        // rewrite) within the timed command.
        unlink(trace.c_str());
        Ran r = run(argv, scratch);
        if (r.seconds < 0 || !WIFEXITED(r.status) || WEXITSTATUS(r.status) != 0) {
          report.add_error(std::string("programs: ") + p.name + ", " + m.name + ": failed: " +
                           r.err.substr(0, 300));
          ok = false;
          break;
        }
        seconds.push_back(r.seconds);
        lost = events_lost(r.err);
        if (!m.output.empty()) written = bytes_under(m.output);
        if (m.output == uftrace_dir) run({"rm", "-rf", uftrace_dir}, scratch);
      }
      unlink(trace.c_str());
      if (!ok) continue;
      const Summary s = summarize(seconds);
      if (m.prefix.empty()) untraced = s.median;
      if (m.output == uftrace_dir) uftrace_added = s.median - untraced;
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
      row.set("added_s", m.prefix.empty() ? Value() : Value(s.median - untraced));
      if (!m.prefix.empty() && m.output == trace && std::string(m.name).find("block") != std::string::npos &&
          lost != 0) {
        report.add_error(std::string("programs: ") + p.name + ": the block policy lost " +
                         std::to_string(lost) + " events");
      }
    }
    // What each traced mode adds, as a fraction of what uftrace adds.
    for (size_t i = first_row; i < table.rows.size(); ++i) {
      Row& row = table.rows[i];
      Value ratio;
      const Value* added = row.get("added_s");
      if (uftrace_added > 0 && added != nullptr && std::holds_alternative<double>(*added)) {
        ratio = std::get<double>(*added) / uftrace_added;
      }
      row.set("added_vs_uftrace", ratio);
    }
  }
  table.notes.push_back(
      "wall_s: the whole command, writing the trace included (ftjit formats the block policy's "
      "spooled events after the program; uftrace record writes raw data, formatted later by "
      "`uftrace dump`); " +
      std::to_string(reps) + " runs each, median");
  table.notes.push_back("events: 2 per traced call, from `ftjit run --plugin count`");
  table.notes.push_back(
      "added_s: wall_s minus the untraced run's; added_vs_uftrace: that over uftrace record's "
      "added_s on the same program (the target: ftjit's block-mode trace <= 0.5)");
  rmdir(dir);
}

}  // namespace ftjit_bench
