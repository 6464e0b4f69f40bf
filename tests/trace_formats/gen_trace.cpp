// SPDX-License-Identifier: MIT
// gen_trace FORMAT OUTPUT: traces trfmt_* (traced_fmt.c) with the built-in
// `trace` plugin in FORMAT ("perfetto" or "chrome") into OUTPUT, while two
// named threads call them concurrently with nesting and recursion, then in
// strict alternation (ping-pong). Prints on
// stdout, as JSON, what the trace must contain (pid, process name, each
// thread's tid, name and calls per function), for check_trace.py. Exits
// non-zero if the session fails or drops an event.
#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "ftjit/ftjit.h"
#include "runtime/plugin_host/plugin_host.h"
#include "tests/trace_formats/traced_fmt.h"

namespace {

using ftjit::plugins::SessionConfig;
using ftjit::plugins::TraceSession;

struct Worker {
  Worker(const char *n, int i, int d) : name(n), iterations(i), depth(d) {}
  const char *name;  // at most 15 characters (the kernel's comm)
  int iterations;
  int depth;
  int32_t tid = 0;
  std::map<std::string, long> calls;  // what it made, per function
};

// Strict turns between the threads, for the ping-pong phase.
struct Turns {
  std::mutex mu;
  std::condition_variable cv;
  int next = 0;  // index of the worker whose turn it is
};

// Rounds of the ping-pong phase: the threads call trfmt_leaf in strict
// alternation, so each of the writer's drains (every few milliseconds)
// sees events of both threads interleaved in time.
constexpr int kPingPongRounds = 200;

void run(Worker &w, int index, int count, pthread_barrier_t *barrier, Turns *turns) {
  pthread_setname_np(pthread_self(), w.name);
  w.tid = static_cast<int32_t>(syscall(SYS_gettid));
  pthread_barrier_wait(barrier);  // both threads trace at the same time
  // Through volatile pointers: the compiler cannot skip an entry.
  int (*volatile outer)(int) = trfmt_outer;
  int (*volatile recurse)(int) = trfmt_recurse;
  int sink = 0;
  for (int i = 0; i < w.iterations; ++i) {
    sink += outer(i);
    sink += recurse(w.depth);
  }
  int (*volatile leaf)(int) = trfmt_leaf;
  for (int round = 0; round < kPingPongRounds; ++round) {
    std::unique_lock<std::mutex> lock(turns->mu);
    turns->cv.wait(lock, [&] { return turns->next == index; });
    sink += leaf(round);
    turns->next = (index + 1) % count;
    turns->cv.notify_all();
  }
  if (sink == 42) std::puts("");  // keeps the results alive
  w.calls["trfmt_outer"] = w.iterations;
  w.calls["trfmt_middle"] = w.iterations;
  w.calls["trfmt_leaf"] = 3L * w.iterations + kPingPongRounds;
  w.calls["trfmt_recurse"] = long(w.depth + 1) * w.iterations;
}

std::string json_string(const std::string &s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += char(c);
    } else if (c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += char(c);
    }
  }
  return out + "\"";
}

std::string own_comm() {
  std::ifstream in("/proc/self/comm");
  std::string name;
  std::getline(in, name);
  return name;
}

}  // namespace

int main(int argc, char **argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s perfetto|chrome OUTPUT\n", argv[0]);
    return 2;
  }
  ftjit_engine *engine = ftjit_engine_create(nullptr);
  if (engine == nullptr) {
    std::fprintf(stderr, "gen_trace: engine: %s\n", ftjit_last_error());
    return 1;
  }
  auto spec = ftjit::plugins::parse_plugin_spec("trace");
  if (!spec) {
    std::fprintf(stderr, "gen_trace: spec: %s\n", spec.error().message.c_str());
    return 1;
  }
  SessionConfig config;
  config.plugins = {spec.value()};
  config.include = {"trfmt_*"};
  config.format = argv[1];
  config.output = argv[2];
  auto session = TraceSession::start(engine, config);
  if (!session) {
    std::fprintf(stderr, "gen_trace: start: %s\n", session.error().message.c_str());
    return 1;
  }

  std::vector<Worker> workers = {{"trfmt-alpha", 300, 5}, {"trfmt-beta", 200, 9}};
  pthread_barrier_t barrier;
  pthread_barrier_init(&barrier, nullptr, unsigned(workers.size()));
  Turns turns;
  std::vector<std::thread> threads;
  for (size_t i = 0; i < workers.size(); ++i)
    threads.emplace_back(run, std::ref(workers[i]), int(i), int(workers.size()), &barrier,
                         &turns);
  for (std::thread &t : threads) t.join();
  pthread_barrier_destroy(&barrier);

  auto stopped = session.value()->stop();
  if (!stopped) {
    std::fprintf(stderr, "gen_trace: stop: %s\n", stopped.error().message.c_str());
    return 1;
  }
  auto reported = session.value()->report();
  if (!reported) {
    std::fprintf(stderr, "gen_trace: report: %s\n", reported.error().message.c_str());
    return 1;
  }
  const TraceSession::Totals totals = session.value()->totals();
  session.value().reset();
  ftjit_engine_destroy(engine);
  if (totals.events_dropped != 0 || totals.recursion_drops != 0) {
    std::fprintf(stderr, "gen_trace: dropped %llu events, %llu recursion drops\n",
                 (unsigned long long)totals.events_dropped,
                 (unsigned long long)totals.recursion_drops);
    return 1;
  }

  std::printf("{\"format\": %s, \"pid\": %d, \"process_name\": %s, \"threads\": [",
              json_string(argv[1]).c_str(), int(getpid()), json_string(own_comm()).c_str());
  for (size_t i = 0; i < workers.size(); ++i) {
    const Worker &w = workers[i];
    std::printf("%s\n  {\"name\": %s, \"tid\": %d, \"calls\": {", i ? "," : "",
                json_string(w.name).c_str(), int(w.tid));
    const char *sep = "";
    for (const auto &[fn, n] : w.calls) {
      std::printf("%s%s: %ld", sep, json_string(fn).c_str(), n);
      sep = ", ";
    }
    std::printf("}}");
  }
  std::printf("]}\n");
  return 0;
}
