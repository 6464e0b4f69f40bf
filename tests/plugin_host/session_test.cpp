// SPDX-License-Identifier: MIT
// Plugin host with the real engine: sessions load test plugins into this
// process, trace host_traced_* (traced_host.c), and the plugins' tsv reports
// tell what they saw. Every refusal must leave nothing attached.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "runtime/plugin_host/plugin_host.h"
#include "tests/e2e/register_keeping_call.h"
#include "tests/plugin_host/traced_host.h"

namespace {

using ftjit::plugins::buffer_policy_name;
using ftjit::plugins::BufferPolicy;
using ftjit::plugins::PluginSpec;
using ftjit::plugins::SessionConfig;
using ftjit::plugins::TraceSession;
using ::testing::HasSubstr;

const std::string kDir = HOST_TEST_PLUGIN_DIR;
const std::string kGood = kDir + "/ftjit-plugin-hostgood.so";
const std::string kExit = kDir + "/ftjit-plugin-hostexit.so";
const std::string kRun = kDir + "/ftjit-plugin-hostrun.so";

int32_t gettid_now() { return static_cast<int32_t>(syscall(SYS_gettid)); }

// Calls through a volatile pointer so the compiler cannot skip the entry.
void call_many(int (*fn)(int), int n) {
  int (*volatile f)(int) = fn;
  for (int i = 0; i < n; ++i) f(i);
}

// ---------------------------------------------------------------------------
// The test plugin's tsv report, parsed
// ---------------------------------------------------------------------------

struct ThreadLine {
  std::string name;
  uint64_t entries = 0, exits = 0, unwound = 0, dropped = 0;
};

struct Report {
  std::map<std::string, uint64_t> fn;
  std::map<int32_t, uint64_t> consumed;
  std::map<int32_t, uint64_t> mismatched;
  std::map<int32_t, uint64_t> disordered;          // consumed out of commit order
  std::map<int32_t, std::pair<uint64_t, uint64_t>> seqs;  // first, last consumed
  std::map<int32_t, ThreadLine> threads;
  uint64_t recursion_drops = 0, events_dropped = 0;
  std::string options, wrongtype;
  // hostrun only: consume_run's calls, the events they brought, the bad
  // ones, and the events consume() brought one at a time.
  uint64_t runs = 0, run_events = 0, run_bad = 0, single = 0;
};

// One Report per plugin instance, in output order (each ends with its
// "wrongtype" line).
std::vector<Report> parse_reports(const std::string& text) {
  std::vector<Report> out(1);
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream f(line);
    std::string kind;
    std::getline(f, kind, '\t');
    Report& r = out.back();
    if (kind == "fn") {
      std::string name;
      uint64_t n;
      std::getline(f, name, '\t');
      f >> n;
      r.fn[name] = n;
    } else if (kind == "consumed") {
      int32_t tid;
      uint64_t n, bad, disordered, first, last;
      f >> tid >> n >> bad >> disordered >> first >> last;
      r.consumed[tid] = n;
      r.mismatched[tid] = bad;
      r.disordered[tid] = disordered;
      r.seqs[tid] = {first, last};
    } else if (kind == "thread") {
      int32_t tid;
      ThreadLine t;
      f >> tid;
      f.ignore(1);
      std::getline(f, t.name, '\t');
      f >> t.entries >> t.exits >> t.unwound >> t.dropped;
      r.threads[tid] = t;
    } else if (kind == "runs") {
      f >> r.runs >> r.run_events >> r.run_bad >> r.single;
    } else if (kind == "drops") {
      f >> r.recursion_drops >> r.events_dropped;
    } else if (kind == "opt") {
      std::getline(f, r.options);
    } else if (kind == "wrongtype") {
      std::getline(f, r.wrongtype);
      out.emplace_back();
    } else {
      ADD_FAILURE() << "unexpected report line: " << line;
    }
  }
  out.pop_back();
  return out;
}

std::string read_file(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// ---------------------------------------------------------------------------
// Fixture
// ---------------------------------------------------------------------------

class SessionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    engine_ = ftjit_engine_create(nullptr);
    ASSERT_NE(engine_, nullptr) << ftjit_last_error();
    out_ = ::testing::TempDir() + "ftjit-host-" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name() + ".tsv";
    std::remove(out_.c_str());
  }
  void TearDown() override {
    ftjit_engine_destroy(engine_);
    std::remove(out_.c_str());
    std::remove((out_ + ".marker").c_str());
  }

  uint64_t sites_enabled() {
    ftjit_stats st{};
    ftjit_get_stats(engine_, &st);
    return st.sites_enabled;
  }

  SessionConfig config(std::vector<std::string> specs = {kGood}) {
    SessionConfig c;
    for (const std::string& text : specs) {
      auto spec = ftjit::plugins::parse_plugin_spec(text);
      EXPECT_TRUE(spec) << spec.error().message;
      if (spec) c.plugins.push_back(spec.value());
    }
    c.include = {"host_traced_*"};
    c.format = "tsv";
    c.output = out_;
    c.buffer_events = 1u << 16;
    return c;
  }

  std::unique_ptr<TraceSession> start(const SessionConfig& c) {
    auto s = TraceSession::start(engine_, c);
    EXPECT_TRUE(s) << s.error().message;
    return s ? std::move(s.value()) : nullptr;
  }

  // Stops, reports, and parses the output file.
  std::vector<Report> finish(TraceSession& s) {
    auto st = s.report();
    EXPECT_TRUE(st) << st.error().message;
    EXPECT_EQ(sites_enabled(), 0u);
    return parse_reports(read_file(out_));
  }

  // A good session right after a refusal must trace exactly.
  void expect_good_session_works() {
    auto s = start(config());
    ASSERT_TRUE(s);
    call_many(host_traced_a, 3);
    auto reports = finish(*s);
    ASSERT_EQ(reports.size(), 1u);
    EXPECT_EQ(reports[0].fn["host_traced_a"], 3u);
  }

  ftjit_engine* engine_ = nullptr;
  std::string out_;
};

// ---------------------------------------------------------------------------
// Counting
// ---------------------------------------------------------------------------

TEST_F(SessionTest, CountsExactlyFromTwoThreads) {
  constexpr int kA = 5000, kB = 3000;
  auto s = start(config());
  ASSERT_TRUE(s);
  EXPECT_GE(sites_enabled(), 3u);

  int32_t worker_tid = 0;
  std::thread worker([&] {
    worker_tid = gettid_now();
    call_many(host_traced_a, kA);
    call_many(host_traced_b, kB);
  });
  call_many(host_traced_a, kA);
  call_many(host_traced_b, kB);
  worker.join();

  auto reports = finish(*s);
  ASSERT_EQ(reports.size(), 1u);
  Report& r = reports[0];
  EXPECT_EQ(r.fn["host_traced_a"], 2u * kA);
  EXPECT_EQ(r.fn["host_traced_b"], 2u * kB);
  EXPECT_EQ(r.fn.count("host_traced_c"), 0u);
  for (int32_t tid : {gettid_now(), worker_tid}) {
    EXPECT_EQ(r.threads[tid].entries, uint64_t{kA + kB}) << tid;
    EXPECT_EQ(r.consumed[tid], uint64_t{kA + kB}) << tid;
    EXPECT_EQ(r.mismatched[tid], 0u) << tid;
    EXPECT_EQ(r.threads[tid].dropped, 0u);
  }
  EXPECT_EQ(r.threads.size(), 2u);
  EXPECT_EQ(r.events_dropped, 0u);
  EXPECT_EQ(s->totals().events_dropped, 0u);
}

TEST_F(SessionTest, NestedCallsCountBoth) {
  auto s = start(config());
  ASSERT_TRUE(s);
  call_many(host_traced_c, 700);
  auto reports = finish(*s);
  ASSERT_EQ(reports.size(), 1u);
  EXPECT_EQ(reports[0].fn["host_traced_c"], 700u);
  EXPECT_EQ(reports[0].fn["host_traced_a"], 700u);
}

TEST_F(SessionTest, ThreadStorageOutlivesItsThread) {
  constexpr int kN = 1234;
  auto s = start(config());
  ASSERT_TRUE(s);
  std::vector<int32_t> tids(3);
  for (int i = 0; i < 3; ++i) {
    // One after the other: each thread is gone before the next starts.
    std::thread t([&, i] {
      std::string name = "hostworker-" + std::to_string(i);
      pthread_setname_np(pthread_self(), name.c_str());
      tids[i] = gettid_now();
      call_many(host_traced_b, kN * (i + 1));
    });
    t.join();
  }
  auto reports = finish(*s);
  ASSERT_EQ(reports.size(), 1u);
  Report& r = reports[0];
  ASSERT_EQ(r.threads.size(), 3u);
  for (int i = 0; i < 3; ++i) {
    SCOPED_TRACE(i);
    ASSERT_EQ(r.threads.count(tids[i]), 1u);
    EXPECT_EQ(r.threads[tids[i]].entries, uint64_t(kN) * (i + 1));
    EXPECT_EQ(r.threads[tids[i]].name, "hostworker-" + std::to_string(i));
    EXPECT_EQ(r.consumed[tids[i]], uint64_t(kN) * (i + 1));
  }
}

TEST_F(SessionTest, FullBufferDropsAreCountedNotLost) {
  constexpr int kN = 200000;
  SessionConfig c = config();
  c.buffer_events = 3;  // rounded up to 4
  auto s = start(c);
  ASSERT_TRUE(s);
  call_many(host_traced_a, kN);
  const uint64_t dropped_before_report = s->totals().events_dropped;
  auto reports = finish(*s);
  ASSERT_EQ(reports.size(), 1u);
  Report& r = reports[0];
  int32_t me = gettid_now();
  // Every entry was either consumed or counted as dropped, never both.
  EXPECT_EQ(r.threads[me].entries, uint64_t{kN});
  EXPECT_GT(r.threads[me].dropped, 0u);
  EXPECT_EQ(r.consumed[me] + r.threads[me].dropped, uint64_t{kN});
  EXPECT_EQ(r.events_dropped, r.threads[me].dropped);
  EXPECT_EQ(dropped_before_report, r.threads[me].dropped);
  EXPECT_EQ(s->totals().events_dropped, r.threads[me].dropped);
}

TEST_F(SessionTest, PendingEventsDrainToZero) {
  constexpr int kN = 1000;
  SessionConfig c = config();
  c.buffer_events = 1u << 16;  // room for every event: none dropped
  auto s = start(c);
  ASSERT_TRUE(s);
  call_many(host_traced_a, kN);
  // The writer empties the buffers every few ms while tracing goes on.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (s->totals().events_pending != 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_EQ(s->totals().events_pending, 0u);
  EXPECT_EQ(s->totals().events_dropped, 0u);
  auto reports = finish(*s);
  ASSERT_EQ(reports.size(), 1u);
  EXPECT_EQ(reports[0].consumed[gettid_now()], uint64_t{kN});
}

// ---------------------------------------------------------------------------
// Buffer policies
// ---------------------------------------------------------------------------

// Calls host_traced_a `n` times on each of `threads` threads (this one
// included); returns their tids.
std::vector<int32_t> call_on_threads(int threads, int n) {
  std::vector<int32_t> tids(threads);
  std::vector<std::thread> workers;
  for (int i = 1; i < threads; ++i) {
    workers.emplace_back([&, i] {
      tids[i] = gettid_now();
      call_many(host_traced_a, n);
    });
  }
  tids[0] = gettid_now();
  call_many(host_traced_a, n);
  for (auto& w : workers) w.join();
  return tids;
}

TEST_F(SessionTest, BlockPolicyLosesNothingThroughTinyBuffers) {
  constexpr int kThreads = 4, kN = 50000;
  SessionConfig c = config();
  c.buffer_events = 16;  // full all the time: the threads wait for the writer
  c.buffer_policy = BufferPolicy::kBlock;
  auto s = start(c);
  ASSERT_TRUE(s);
  EXPECT_STREQ(s->writer_mode(), "spool");
  auto tids = call_on_threads(kThreads, kN);
  const auto totals = s->totals();
  auto reports = finish(*s);
  ASSERT_EQ(reports.size(), 1u);
  Report& r = reports[0];
  for (int32_t tid : tids) {
    EXPECT_EQ(r.consumed[tid], uint64_t{kN}) << tid;
    EXPECT_EQ(r.disordered[tid], 0u) << tid;
    EXPECT_EQ(r.mismatched[tid], 0u) << tid;
    EXPECT_EQ(r.threads[tid].dropped, 0u) << tid;
  }
  EXPECT_EQ(r.fn["host_traced_a"], uint64_t{kThreads} * kN);
  EXPECT_EQ(r.events_dropped, 0u);
  EXPECT_EQ(totals.buffer_timeouts, 0u);
  EXPECT_GT(totals.buffer_waits, 0u) << "16-event buffers never filled: the test proves nothing";
}

TEST_F(SessionTest, BlockPolicyWithoutSpoolWaitsForTheFormattingWriter) {
  constexpr int kN = 3000;
  SessionConfig c = config({kGood + ":consume_us=20"});
  c.buffer_events = 16;
  c.buffer_policy = BufferPolicy::kBlock;
  c.spool = false;
  auto s = start(c);
  ASSERT_TRUE(s);
  EXPECT_STREQ(s->writer_mode(), "stream");
  auto tids = call_on_threads(2, kN);
  auto reports = finish(*s);
  ASSERT_EQ(reports.size(), 1u);
  for (int32_t tid : tids) {
    EXPECT_EQ(reports[0].consumed[tid], uint64_t{kN}) << tid;
    EXPECT_EQ(reports[0].disordered[tid], 0u) << tid;
  }
  EXPECT_EQ(reports[0].events_dropped, 0u);
}

TEST_F(SessionTest, BlockPolicyGivesUpOnAStuckWriterAndCounts) {
  constexpr int kN = 2000;
  SessionConfig c = config({kGood + ":stall_ms=1500"});
  c.buffer_events = 16;
  c.buffer_policy = BufferPolicy::kBlock;
  c.buffer_wait_ms = 50;
  c.spool = false;  // the writer formats as it goes, and its first consume() sleeps
  auto s = start(c);
  ASSERT_TRUE(s);
  const auto started = std::chrono::steady_clock::now();
  call_many(host_traced_a, kN);
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  // One bounded wait, then drops without waiting until the writer is back:
  // far less than a wait per event (2000 x 50 ms).
  EXPECT_LT(took, 1.0);
  const auto totals = s->totals();
  EXPECT_GE(totals.buffer_timeouts, 1u);
  EXPECT_GT(totals.events_dropped, 0u);
  auto reports = finish(*s);
  ASSERT_EQ(reports.size(), 1u);
  Report& r = reports[0];
  const int32_t me = gettid_now();
  // Nothing lost uncounted.
  EXPECT_EQ(r.consumed[me] + r.threads[me].dropped, uint64_t{kN});
  EXPECT_EQ(r.disordered[me], 0u);
}

TEST_F(SessionTest, BlockPolicyInAForkedChildNeverWaits) {
  SessionConfig c = config();
  c.buffer_events = 16;
  c.buffer_policy = BufferPolicy::kBlock;
  c.buffer_wait_ms = 10000;
  auto s = start(c);
  ASSERT_TRUE(s);
  call_many(host_traced_a, 10);
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // No writer here: a wait would be 10 s per full buffer.
    const auto started = std::chrono::steady_clock::now();
    call_many(host_traced_a, 5000);
    _exit(std::chrono::steady_clock::now() - started < std::chrono::seconds(3) ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  auto reports = finish(*s);
  ASSERT_EQ(reports.size(), 1u);
  EXPECT_EQ(reports[0].consumed[gettid_now()], 10u);
}

TEST_F(SessionTest, OverwritePolicyKeepsTheLastEventsOfEachThread) {
  constexpr int kN = 1000, kKept = 64;
  SessionConfig c = config();
  c.buffer_events = kKept;
  c.buffer_policy = BufferPolicy::kOverwrite;
  auto s = start(c);
  ASSERT_TRUE(s);
  EXPECT_STREQ(s->writer_mode(), "recorder");
  auto tids = call_on_threads(2, kN);
  // Nothing is written while the program runs.
  EXPECT_EQ(s->totals().events_pending, 2u * kN);
  auto reports = finish(*s);
  ASSERT_EQ(reports.size(), 1u);
  Report& r = reports[0];
  for (int32_t tid : tids) {
    EXPECT_EQ(r.consumed[tid], uint64_t{kKept}) << tid;
    EXPECT_EQ(r.seqs[tid], std::make_pair(uint64_t{kN - kKept}, uint64_t{kN - 1})) << tid;
    EXPECT_EQ(r.disordered[tid], 0u) << tid;
    EXPECT_EQ(r.threads[tid].dropped, 0u) << tid;
  }
  EXPECT_EQ(s->totals().events_overwritten, 2u * (kN - kKept));
}

TEST_F(SessionTest, OverwritePolicyFlushWritesNowAndRecordingGoesOn) {
  constexpr int kKept = 64;
  SessionConfig c = config();
  c.buffer_events = kKept;
  c.buffer_policy = BufferPolicy::kOverwrite;
  auto s = start(c);
  ASSERT_TRUE(s);
  // A thread keeps calling while the flush reads the rings: it drops (and
  // counts) what would overwrite them, never tears them.
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> worker_calls{0};
  int32_t worker_tid = 0;
  std::thread worker([&] {
    worker_tid = gettid_now();
    while (!stop.load()) {
      call_many(host_traced_a, 1);
      worker_calls.fetch_add(1);
    }
  });
  call_many(host_traced_a, 100);
  ASSERT_TRUE(s->flush());
  call_many(host_traced_a, 100);
  stop = true;
  worker.join();
  auto reports = finish(*s);
  ASSERT_EQ(reports.size(), 1u);
  Report& r = reports[0];
  const int32_t me = gettid_now();
  // Twice the last 64 of this thread: at the flush, then at the stop.
  EXPECT_EQ(r.consumed[me], 2u * kKept);
  EXPECT_EQ(r.seqs[me], std::make_pair(uint64_t{100 - kKept}, uint64_t{199}));
  EXPECT_EQ(r.disordered[me], 0u);
  EXPECT_EQ(r.disordered[worker_tid], 0u);
  // Every worker call was kept, overwritten or dropped: counted once.
  const auto totals = s->totals();
  EXPECT_EQ(r.consumed[worker_tid] + r.threads[worker_tid].dropped, r.threads[worker_tid].entries -
                (totals.events_overwritten - 2u * (100 - kKept)));
}

TEST_F(SessionTest, FlushDrainsEveryPolicyWhileTracingGoesOn) {
  for (BufferPolicy policy : {BufferPolicy::kDrop, BufferPolicy::kBlock}) {
    SessionConfig c = config();
    c.buffer_policy = policy;
    auto s = start(c);
    ASSERT_TRUE(s);
    call_many(host_traced_a, 500);
    ASSERT_TRUE(s->flush());
    EXPECT_EQ(s->totals().events_pending, 0u) << buffer_policy_name(policy);
    call_many(host_traced_a, 500);
    auto reports = finish(*s);
    ASSERT_EQ(reports.size(), 1u);
    EXPECT_EQ(reports[0].consumed[gettid_now()], 1000u) << buffer_policy_name(policy);
    EXPECT_EQ(reports[0].disordered[gettid_now()], 0u);
  }
}

// A plugin with consume_run gets every event through it, once, in commit
// order per thread, in runs (a ring of 128 events wraps: runs stop at its
// end), under every policy and with the writer streaming or spooling.
TEST_F(SessionTest, ConsumeRunGetsEveryEventOnceInOrder) {
  constexpr int kN = 5000;
  struct Case {
    BufferPolicy policy;
    bool spool;
  };
  for (const Case& k : {Case{BufferPolicy::kBlock, true}, Case{BufferPolicy::kBlock, false},
                        Case{BufferPolicy::kDrop, false}, Case{BufferPolicy::kOverwrite, false}}) {
    const std::string label = std::string(buffer_policy_name(k.policy)) + (k.spool ? " spool" : "");
    SessionConfig c = config({kRun});
    c.buffer_policy = k.policy;
    c.spool = k.spool;
    c.buffer_events = 128;
    auto s = start(c);
    ASSERT_TRUE(s) << label;
    int32_t worker_tid = 0;
    std::thread worker([&] {
      worker_tid = gettid_now();
      call_many(host_traced_a, kN);
    });
    call_many(host_traced_b, kN);
    worker.join();
    auto reports = finish(*s);
    ASSERT_EQ(reports.size(), 1u) << label;
    Report& r = reports[0];
    uint64_t consumed = 0;
    for (int32_t tid : {gettid_now(), worker_tid}) {
      consumed += r.consumed[tid];
      EXPECT_EQ(r.disordered[tid], 0u) << label;
      EXPECT_EQ(r.mismatched[tid], 0u) << label;
      // What each policy keeps of a thread's kN events.
      uint64_t kept = r.consumed[tid];
      if (k.policy == BufferPolicy::kDrop) kept += r.threads[tid].dropped;
      const uint64_t want = k.policy == BufferPolicy::kOverwrite ? 128u : uint64_t{kN};
      EXPECT_EQ(kept, want) << label;
    }
    EXPECT_EQ(r.single, 0u) << label;
    EXPECT_EQ(r.run_bad, 0u) << label;
    EXPECT_EQ(r.run_events, consumed) << label;
    EXPECT_GE(r.runs, 1u) << label;
    EXPECT_LT(r.runs, consumed) << label << ": one event per run";
  }
}

TEST_F(SessionTest, BufferOptionsOutOfRangeAreRefused) {
  SessionConfig c = config();
  c.buffer_bytes = (1ull << 30) + 1;
  auto s = TraceSession::start(engine_, c);
  ASSERT_FALSE(s);
  EXPECT_THAT(s.error().message, ::testing::HasSubstr("over the limit of 1 GiB"));
  c = config();
  c.buffer_policy = BufferPolicy::kBlock;
  c.buffer_wait_ms = 0;
  s = TraceSession::start(engine_, c);
  ASSERT_FALSE(s);
  EXPECT_THAT(s.error().message, ::testing::HasSubstr("out of range"));
  c = config();
  c.buffer_policy = static_cast<BufferPolicy>(7);
  s = TraceSession::start(engine_, c);
  ASSERT_FALSE(s);
  EXPECT_THAT(s.error().message, ::testing::HasSubstr("unknown buffer policy"));
  EXPECT_FALSE(ftjit::plugins::parse_buffer_policy("ring"));
  EXPECT_THAT(ftjit::plugins::parse_buffer_policy("ring").error().message,
              ::testing::HasSubstr("drop"));
  expect_good_session_works();
}

TEST_F(SessionTest, BufferBytesSizeTheRing) {
  constexpr int kN = 1000;
  SessionConfig c = config();
  c.buffer_events = 0;
  c.buffer_bytes = 64 * 24;  // 64 events of the test plugin's 24 bytes
  c.buffer_policy = BufferPolicy::kOverwrite;
  auto s = start(c);
  ASSERT_TRUE(s);
  call_many(host_traced_a, kN);
  auto reports = finish(*s);
  ASSERT_EQ(reports.size(), 1u);
  EXPECT_EQ(reports[0].consumed[gettid_now()], 64u);
}

TEST_F(SessionTest, TwoInstancesOfOnePluginCountIndependently) {
  auto s = start(config({kGood + ":label=first", kGood + ":label=second"}));
  ASSERT_TRUE(s);
  call_many(host_traced_a, 10);
  call_many(host_traced_b, 20);
  auto reports = finish(*s);
  ASSERT_EQ(reports.size(), 2u);
  for (Report& r : reports) {
    EXPECT_EQ(r.fn["host_traced_a"], 10u);
    EXPECT_EQ(r.fn["host_traced_b"], 20u);
    EXPECT_EQ(r.threads[gettid_now()].entries, 30u);
  }
  EXPECT_THAT(reports[0].options, HasSubstr("first"));
  EXPECT_THAT(reports[1].options, HasSubstr("second"));
}

// format= and output= of a spec: that plugin's report goes to its own
// file in its own format, the others' to the session's output.
TEST_F(SessionTest, APluginsOwnFormatAndFile) {
  const std::string own = out_ + ".own";
  auto s = start(config({kGood + ":label=first", kGood + ":label=second,format=text,output=" + own}));
  ASSERT_TRUE(s);
  call_many(host_traced_a, 2);
  auto reports = finish(*s);
  const std::string own_text = read_file(own);
  ::unlink(own.c_str());
  ASSERT_EQ(reports.size(), 1u);  // the first's alone
  EXPECT_EQ(reports[0].fn["host_traced_a"], 2u);
  EXPECT_THAT(reports[0].options, HasSubstr("first"));
  EXPECT_THAT(own_text, HasSubstr("host_traced_a called 2 times\n"));

  // One file is one report's: the session's output is not a plugin's.
  auto refused = TraceSession::start(engine_, config({kGood + ":output=" + out_}));
  ASSERT_FALSE(refused);
  EXPECT_THAT(refused.error().message, HasSubstr("is another report's file"));
  expect_good_session_works();
}

TEST_F(SessionTest, ThreadFilterByTidCountsOnlyThatThread) {
  // Needs the engine to honour ftjit_ops.threads.
  SessionConfig c = config();
  c.tids = {gettid_now()};
  auto s = start(c);
  ASSERT_TRUE(s);
  int32_t worker_tid = 0;
  std::thread worker([&] {
    worker_tid = gettid_now();
    call_many(host_traced_a, 500);
  });
  worker.join();
  call_many(host_traced_a, 300);
  auto reports = finish(*s);
  ASSERT_EQ(reports.size(), 1u);
  EXPECT_EQ(reports[0].fn["host_traced_a"], 300u);
  EXPECT_EQ(reports[0].threads[gettid_now()].entries, 300u);
  EXPECT_EQ(reports[0].threads.count(worker_tid), 0u);
}

TEST_F(SessionTest, ThreadFilterByNameGlob) {
  SessionConfig c = config();
  c.thread_glob = "hostglob-*";
  auto s = start(c);
  ASSERT_TRUE(s);
  int32_t worker_tid = 0;
  std::thread worker([&] {
    pthread_setname_np(pthread_self(), "hostglob-1");
    worker_tid = gettid_now();
    call_many(host_traced_b, 70);
  });
  worker.join();
  call_many(host_traced_b, 30);
  auto reports = finish(*s);
  ASSERT_EQ(reports.size(), 1u);
  EXPECT_EQ(reports[0].fn["host_traced_b"], 70u);
  EXPECT_EQ(reports[0].threads[worker_tid].entries, 70u);
  EXPECT_EQ(reports[0].threads.count(gettid_now()), 0u);
}

// Counts this process's threads named `name`.
int threads_named(const std::string& name) {
  int n = 0;
  for (const auto& e : std::filesystem::directory_iterator("/proc/self/task")) {
    std::string comm = read_file(e.path().string() + "/comm");
    if (comm == name + "\n") ++n;
  }
  return n;
}

TEST_F(SessionTest, WriterThreadIsNamedAndJoinedAtStop) {
  auto s = start(config());
  ASSERT_TRUE(s);
  // The writer names itself once it runs.
  for (int i = 0; i < 200 && threads_named("ftjit-writer") == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_EQ(threads_named("ftjit-writer"), 1);
  ASSERT_TRUE(s->stop());
  EXPECT_EQ(threads_named("ftjit-writer"), 0);
}

TEST_F(SessionTest, ExitCallbacksPairWithEntries) {
  // Needs the engine's exit hooks (ftjit_ops.exit_func).
  auto s = start(config({kExit}));
  ASSERT_TRUE(s);
  call_many(host_traced_a, 400);
  call_many(host_traced_c, 100);  // c calls a: 200 frames
  auto reports = finish(*s);
  ASSERT_EQ(reports.size(), 1u);
  ThreadLine& t = reports[0].threads[gettid_now()];
  EXPECT_EQ(t.entries, 600u);
  EXPECT_EQ(t.exits, 600u);
  EXPECT_EQ(t.unwound, 0u);
}

// ---------------------------------------------------------------------------
// Options, formats, output
// ---------------------------------------------------------------------------

TEST_F(SessionTest, OptionsReachThePluginTyped) {
  auto s = start(config({kGood + ":top=0x10,ratio=2.25,verbose=yes,label=a\\,b"}));
  ASSERT_TRUE(s);
  auto reports = finish(*s);
  ASSERT_EQ(reports.size(), 1u);
  EXPECT_EQ(reports[0].options, "16\t2.250\t1\ta,b");
  // Undeclared names and wrong types read as zero values.
  EXPECT_EQ(reports[0].wrongtype, "0\t0\t|");
}

TEST_F(SessionTest, DefaultsApplyWhenNotGiven) {
  auto s = start(config());
  ASSERT_TRUE(s);
  auto reports = finish(*s);
  ASSERT_EQ(reports.size(), 1u);
  EXPECT_EQ(reports[0].options, "10\t0.500\t0\tnone");
}

TEST_F(SessionTest, DefaultFormatIsThePluginsFirst) {
  SessionConfig c = config();
  c.format.clear();
  auto s = start(c);
  ASSERT_TRUE(s);
  call_many(host_traced_a, 2);
  ASSERT_TRUE(s->report());
  EXPECT_THAT(read_file(out_), HasSubstr("host_traced_a called 2 times\n"));
}

TEST_F(SessionTest, BuiltinPluginsGiveTheCallerEveryRegisterBack) {
#if defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "ThreadSanitizer's hooks in host_traced_add clobber registers themselves";
#endif
  // The built-in plugins promise FTJIT_PLUGIN_F_NO_FP, so their trampolines
  // and the exit landing keep no vector register around their callbacks
  // (but xmm0-1 at exits). A caller that keeps values in call-clobbered
  // registers across a traced call (GCC's -fipa-ra) must still get every
  // one back: the plugins' event paths and the host's [event] services
  // must really leave them alone.
  const uint64_t* want = kKeptRegisters;
  for (const ftjit_strategy strategy : {FTJIT_STRATEGY_AUTO, FTJIT_STRATEGY_LIST}) {
    for (const char* plugin : {"count", "trace", "latency", "flame"}) {
      SessionConfig c = config({plugin});
      c.format.clear();
      c.include = {"host_traced_add"};
      c.strategy = strategy;
      auto s = start(c);
      ASSERT_TRUE(s) << plugin;
      for (int round = 0; round < 3; ++round) {
        uint64_t out[16] = {};
        ASSERT_EQ(test_call_keeping_registers(host_traced_add, out), 5) << plugin;
        for (int i = 0; i < 16; ++i) {
          EXPECT_EQ(out[i], want[i]) << plugin << ", strategy " << strategy << ", register " << i;
        }
      }
      ASSERT_TRUE(s->report()) << plugin;
      EXPECT_EQ(sites_enabled(), 0u);
      EXPECT_THAT(read_file(out_), HasSubstr("host_traced_add")) << plugin;
    }
  }
}

TEST_F(SessionTest, TsvOnStdoutIsExactlyThePluginsLines) {
  SessionConfig c = config();
  c.output = "-";
  auto s = start(c);
  ASSERT_TRUE(s);
  call_many(host_traced_b, 5);
  ::testing::internal::CaptureStdout();
  auto st = s->report();
  std::string text = ::testing::internal::GetCapturedStdout();
  ASSERT_TRUE(st) << st.error().message;
  auto reports = parse_reports(text);  // fails on any line it does not know
  ASSERT_EQ(reports.size(), 1u);
  EXPECT_EQ(reports[0].fn["host_traced_b"], 5u);
}

TEST_F(SessionTest, StopIsIdempotentAndReportOnlyOnce) {
  auto s = start(config());
  ASSERT_TRUE(s);
  EXPECT_GT(sites_enabled(), 0u);
  ASSERT_TRUE(s->stop());
  EXPECT_EQ(sites_enabled(), 0u);
  call_many(host_traced_a, 50);  // not traced any more
  ASSERT_TRUE(s->stop());
  auto reports = finish(*s);
  ASSERT_EQ(reports.size(), 1u);
  EXPECT_EQ(reports[0].fn.count("host_traced_a"), 0u);
  auto again = s->report();
  ASSERT_FALSE(again);
  EXPECT_THAT(again.error().message, HasSubstr("twice"));
}

TEST_F(SessionTest, ReportFailureNamesThePluginAndItsMessage) {
  auto s = start(config({kGood + ":fail_report=on"}));
  ASSERT_TRUE(s);
  auto st = s->report();
  ASSERT_FALSE(st);
  EXPECT_THAT(st.error().message, HasSubstr("plugin 'hostgood' (" + kGood + "): report failed"));
  EXPECT_THAT(st.error().message, HasSubstr("asked to fail (fail_report)"));
}

TEST_F(SessionTest, ShutdownRunsOnceAfterInit) {
  std::string marker = out_ + ".marker";
  std::remove(marker.c_str());
  {
    auto s = start(config({kGood + ":marker=" + marker}));
    ASSERT_TRUE(s);
    EXPECT_EQ(read_file(marker), "init\n");
    ASSERT_TRUE(s->report());
  }
  EXPECT_EQ(read_file(marker), "init\nshutdown\n");
}

// ---------------------------------------------------------------------------
// Refusals: each names the plugin and the cause, and leaves nothing attached
// ---------------------------------------------------------------------------

struct Refusal {
  const char* title;
  std::function<void(SessionConfig&)> change;
  std::vector<std::string> causes;
};

std::vector<Refusal> session_refusals(const std::string& marker) {
  auto plugin = [](std::string text) {
    return [text](SessionConfig& c) {
      c.plugins.push_back(ftjit::plugins::parse_plugin_spec(text).value());
    };
  };
  return {
      {"abi", plugin(kDir + "/bad-abi.so"), {kDir + "/bad-abi.so", "built for plugin ABI 99"}},
      {"no symbol", plugin(kDir + "/bad-no-symbol.so"), {"bad-no-symbol.so", "not an ftjit plugin"}},
      {"null", plugin(kDir + "/bad-null.so"), {"bad-null.so", "returned NULL"}},
      {"small", plugin(kDir + "/bad-small.so"), {"bad-small.so", "struct_size"}},
      {"no callbacks", plugin(kDir + "/bad-no-callbacks.so"), {"bad-no-callbacks.so", "neither"}},
      {"bad default", plugin(kDir + "/bad-bad-default.so"), {"bad-bad-default.so", "got 'ten'"}},
      {"inline version", plugin(kDir + "/bad-inline-version.so"),
       {"bad-inline-version.so", "inline work of struct_size", "version 2", "this host reads version 1"}},
      {"inline action", plugin(kDir + "/bad-inline-action.so"),
       {"bad-inline-action.so", "entry action 9, which this host does not know"}},
      {"inline exit action", plugin(kDir + "/bad-inline-exit.so"),
       {"bad-inline-exit.so", "exit action 1", "which this host does not know"}},
      {"inline without entry", plugin(kDir + "/bad-inline-no-entry.so"),
       {"bad-inline-no-entry.so", "needs an entry callback too"}},
      {"inline with exit", plugin(kDir + "/bad-inline-with-exit.so"),
       {"bad-inline-with-exit.so", "conflicts with its exit callback"}},
      {"inline latency at one end", plugin(kDir + "/bad-inline-latency-one-end.so"),
       {"bad-inline-latency-one-end.so", "one action at both ends"}},
      {"inline latency without exit", plugin(kDir + "/bad-inline-latency-no-exit.so"),
       {"bad-inline-latency-no-exit.so", "needs an exit callback too"}},
      {"missing", plugin(kDir + "/missing.so"), {"missing.so", "no such file"}},
      {"unknown option", plugin(kGood + ":depth=3"),
       {"plugin 'hostgood' (" + kGood + "): unknown option 'depth'",
        "known: top, ratio, verbose, label, marker, fail_report"}},
      {"wrong type", plugin(kGood + ":top=x"),
       {"option 'top' of plugin 'hostgood' wants an integer, got 'x'"}},
      {"format", [](SessionConfig& c) { c.format = "xml"; },
       {"plugin 'hostgood' does not support format 'xml' (it writes text, tsv)"}},
      {"output", [](SessionConfig& c) { c.output = "/nonexistent/dir/out"; },
       {"cannot open output '/nonexistent/dir/out'", "No such file or directory"}},
      {"init fails", plugin(kDir + "/bad-init-fails.so"),
       {"plugin 'bad' (" + kDir + "/bad-init-fails.so): init failed: cannot size the table: -3 buckets"}},
      {"init refuses option", plugin(kGood + ":top=-1"),
       {"plugin 'hostgood'", "init failed: top must be >= 0, got -1"}},
      {"no match", [](SessionConfig& c) { c.include = {"no_function_is_called_this"}; },
       {"plugin 'hostgood'", "attach failed (", "no_function_is_called_this"}},
      {"direct", [](SessionConfig& c) { c.strategy = FTJIT_STRATEGY_DIRECT; }, {"direct"}},
      {"too many instances",
       [](SessionConfig& c) {
         // 17 in all, no plugin more than 8 times (the test plugin's own limit).
         auto add = [&c](const std::string& text, int times) {
           for (int i = 0; i < times; ++i) {
             c.plugins.push_back(ftjit::plugins::parse_plugin_spec(text).value());
           }
         };
         add(kGood, 7);
         add(kExit, 8);
         add(kDir + "/ftjit-plugin-test-hidden.so", 1);
       },
       {"more than 16 plugin instances loaded at once"}},
      {"marker then bad", [marker](SessionConfig& c) {
         c.plugins.clear();
         c.plugins.push_back(ftjit::plugins::parse_plugin_spec(kGood + ":marker=" + marker).value());
         c.plugins.push_back(ftjit::plugins::parse_plugin_spec(kDir + "/bad-init-fails.so").value());
       }, {"init failed"}},
  };
}

TEST_F(SessionTest, EveryRefusalUndoesEverything) {
  std::string marker = out_ + ".marker";
  for (const Refusal& r : session_refusals(marker)) {
    SCOPED_TRACE(r.title);
    std::remove(marker.c_str());
    SessionConfig c = config();
    r.change(c);
    auto s = TraceSession::start(engine_, c);
    ASSERT_FALSE(s);
    for (const std::string& cause : r.causes) EXPECT_THAT(s.error().message, HasSubstr(cause));
    EXPECT_EQ(sites_enabled(), 0u);
    expect_good_session_works();
  }
  // The good plugin before the failing one was inited, then shut down.
  EXPECT_EQ(read_file(marker), "init\nshutdown\n");
}

}  // namespace
