// SPDX-License-Identifier: MIT
// The control channel: messages survive the round trip, a decoder refuses
// what is malformed, and frames cross a real socket pair, with an fd.
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "runtime/control/latency_slice.h"
#include "tests/common/sched_attr.h"
#include "runtime/control/protocol.h"

namespace ftjit::control {
namespace {

using test::KernelSchedAttr;
using test::read_sched_attr;

TEST(Control, AttachRoundTrip) {
  Attach a;
  a.plugins.push_back({"/x/ftjit-plugin-count.so", {{"top", "10"}, {"k", "a,b"}}, "", 0});
  a.plugins.push_back({"/y.so", {}, "json", 1});
  a.include = {"demo_*", "libm.so.6!sin*"};
  a.exclude = {"*_cold"};
  a.strategy = FTJIT_STRATEGY_CALL_OPS;
  a.format = "tsv";
  a.tids = {12, 34};
  a.thread_glob = "worker-*";
  a.main_thread = 1;
  a.output_fd = 1;
  a.owner_pid = 777;
  auto d = decode_attach(encode(a));
  ASSERT_TRUE(d.ok()) << d.error().message;
  EXPECT_EQ(d->plugins.size(), 2u);
  EXPECT_EQ(d->plugins[0].options[1].second, "a,b");
  EXPECT_EQ(d->plugins[0].format, "");
  EXPECT_EQ(d->plugins[0].output_fd, 0);
  EXPECT_EQ(d->plugins[1].format, "json");
  EXPECT_EQ(d->plugins[1].output_fd, 1);
  EXPECT_EQ(d->include, a.include);
  EXPECT_EQ(d->exclude, a.exclude);
  EXPECT_EQ(d->strategy, FTJIT_STRATEGY_CALL_OPS);
  EXPECT_EQ(d->tids, a.tids);
  EXPECT_EQ(d->thread_glob, "worker-*");
  EXPECT_EQ(d->owner_pid, 777);
  EXPECT_EQ(encode(*d), encode(a));
}

// The producers the CLI sends ahead (Attach::producers): each module's
// identity and units come back as they went, and a malformed list of
// units is refused as the whole message.
TEST(Control, AttachCarriesModuleProducers) {
  Attach a;
  a.plugins.push_back({"/x/ftjit-plugin-count.so", {}, "", 0});
  ModuleProducers m;
  m.file = {"/usr/bin/demo", 22344, 0x1234'5678'9abc'def0};
  m.units = {{"GNU C17 12.2.0 -fpatchable-function-entry=13,8", 5, true},
             {"GNU C17 12.2.0 -fpatchable-function-entry=13,8", 5, true},
             {"GNU AS 2.40", 5, false}};
  a.producers.push_back(m);
  a.producers.push_back({{"/lib/libx.so", 1, 2}, {}});
  auto d = decode_attach(encode(a));
  ASSERT_TRUE(d.ok()) << d.error().message;
  ASSERT_EQ(d->producers.size(), 2u);
  EXPECT_EQ(d->producers[0].file.path, "/usr/bin/demo");
  EXPECT_EQ(d->producers[0].file.size, 22344u);
  EXPECT_EQ(d->producers[0].file.fingerprint, 0x1234'5678'9abc'def0u);
  ASSERT_EQ(d->producers[0].units.size(), 3u);
  EXPECT_EQ(d->producers[0].units[1].producer, m.units[1].producer);
  EXPECT_FALSE(d->producers[0].units[2].has_code);
  EXPECT_TRUE(d->producers[1].units.empty());
  EXPECT_EQ(encode(*d), encode(a));

  // The units' count of the first module's first producer set to zero:
  // not a list the CLI writes.
  std::string bytes = encode(a);
  const std::string units = encode_producers(m.units);
  const size_t at = bytes.find(units);
  ASSERT_NE(at, std::string::npos);
  const size_t count_at = at + 4 + 4 + m.units[0].producer.size() + 2 + 1;
  bytes.replace(count_at, 4, std::string(4, '\0'));
  EXPECT_FALSE(decode_attach(bytes).ok());
}

TEST(Control, RecordControlAndLiveControlRoundTrip) {
  Attach a;
  a.plugins.push_back({"/x/ftjit-plugin-trace.so", {}, "", 0});
  a.record.max_depth = 3;
  a.record.min_duration_ns = 10'000;
  a.record.sample_period = 7;
  a.record.start_after_ns = 5;
  a.record.stop_after_ns = 9;
  a.record.signal = 12;
  a.record.signal_action = TriggerAction::kDump;
  a.record.triggers.push_back({TriggerAction::kStart, "handle_*", true, 3});
  a.record.triggers.push_back({TriggerAction::kDump, "lib.so!slow", false, 1});
  a.live = 1;
  auto d = decode_attach(encode(a));
  ASSERT_TRUE(d.ok()) << d.error().message;
  EXPECT_EQ(d->record.max_depth, 3u);
  EXPECT_EQ(d->record.min_duration_ns, 10'000u);
  EXPECT_EQ(d->record.sample_period, 7u);
  EXPECT_EQ(d->record.signal, 12);
  EXPECT_EQ(d->record.signal_action, TriggerAction::kDump);
  ASSERT_EQ(d->record.triggers.size(), 2u);
  EXPECT_EQ(d->record.triggers[0].function, "handle_*");
  EXPECT_TRUE(d->record.triggers[0].at_return);
  EXPECT_EQ(d->record.triggers[0].from_call, 3u);
  EXPECT_EQ(d->record.triggers[1].action, TriggerAction::kDump);
  EXPECT_EQ(d->live, 1);
  EXPECT_EQ(encode(*d), encode(a));

  Control c;
  c.has_paused = 1;
  c.paused = 1;
  c.has_sample = 1;
  c.sample = 10;
  c.has_filter = 1;
  c.include = {"lt_[ac]"};
  c.exclude = {"lt_c"};
  c.flush = 1;
  auto dc = decode_control(encode(c));
  ASSERT_TRUE(dc.ok()) << dc.error().message;
  EXPECT_EQ(dc->paused, 1);
  EXPECT_EQ(dc->sample, 10u);
  EXPECT_EQ(dc->include, c.include);
  EXPECT_EQ(dc->exclude, c.exclude);
  EXPECT_EQ(encode(*dc), encode(c));
  // A flag that is not 0 or 1, a trigger action out of range: refused.
  std::string bad = encode(c);
  bad[0] = 2;
  EXPECT_FALSE(decode_control(bad).ok());
  Attach t;
  t.plugins.push_back({"/x.so", {}, "", 0});
  t.record.triggers.push_back({TriggerAction::kToggle, "f", false, 1});
  EXPECT_FALSE(decode_attach(encode(t)).ok());
}

TEST(Control, GenerateRoundTrip) {
  Generate g;
  g.trampoline.source = OpsSource::kSiteSlot;
  g.trampoline.ops = 0x1234;
  g.trampoline.func = 0x5678;
  g.trampoline.save_fp = false;
  g.trampoline.honour_direct = true;
  g.trampoline.counts_tls_offset = -4096;
  g.trampoline.exit_trampoline = 0x9000;
  g.place = 0x7f0000001000;
  auto d = decode_generate(encode(g));
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->trampoline.source, OpsSource::kSiteSlot);
  EXPECT_EQ(d->trampoline.counts_tls_offset, -4096);
  EXPECT_FALSE(d->trampoline.save_fp);
  EXPECT_TRUE(d->trampoline.honour_direct);
  EXPECT_EQ(d->place, g.place);
}

// The agent asks for a module's producers by name, size and fingerprint;
// the answer keeps each distinct unit once, with its count, and decodes to
// the same list (what saves evidence counts: units).
TEST(Control, ProducersRoundTrip) {
  Generate g;
  g.kind = GenerateKind::kProducers;
  g.module = {"/usr/lib/libx.so", 123456, 0xfeedfacecafebeefull};
  auto d = decode_generate(encode(g));
  ASSERT_TRUE(d.ok()) << d.error().message;
  EXPECT_EQ(d->kind, GenerateKind::kProducers);
  EXPECT_EQ(d->module.path, g.module.path);
  EXPECT_EQ(d->module.size, g.module.size);
  EXPECT_EQ(d->module.fingerprint, g.module.fingerprint);

  const CompileUnitProducer a{"GNU C17 12.2.0 -O2 -fpatchable-function-entry=5", 5, true};
  const CompileUnitProducer b{"GNU AS 2.40", 5, true};
  const CompileUnitProducer c{"", 4, false};
  const std::vector<CompileUnitProducer> units = {a, b, a, c, a};
  const std::string bytes = encode_producers(units);
  auto back = decode_producers(bytes);
  ASSERT_TRUE(back.ok()) << back.error().message;
  ASSERT_EQ(back->size(), units.size());
  size_t as = 0;
  for (const CompileUnitProducer& u : *back) as += u.producer == a.producer && u.version == 5 && u.has_code;
  EXPECT_EQ(as, 3u);
  EXPECT_LT(bytes.size(), 2 * a.producer.size() + b.producer.size() + 64) << "a's text is sent once";
  EXPECT_TRUE(decode_producers(encode_producers({})).ok());
  // Cut anywhere: refused, never a crash.
  for (size_t n = 0; n < bytes.size(); ++n) EXPECT_FALSE(decode_producers(bytes.substr(0, n)).ok()) << n;
}

TEST(Control, RefusesMalformed) {
  Attach a;
  a.plugins.push_back({"/p.so", {}});
  std::string ok = encode(a);
  ASSERT_TRUE(decode_attach(ok).ok());
  // Every truncation, and one trailing byte, is refused.
  for (size_t n = 0; n < ok.size(); ++n) EXPECT_FALSE(decode_attach(ok.substr(0, n)).ok()) << n;
  EXPECT_FALSE(decode_attach(ok + "x").ok());
  // A count that lies about what follows.
  std::string lying = ok;
  lying[0] = '\xff';
  lying[1] = '\xff';
  EXPECT_FALSE(decode_attach(lying).ok());
  // No plugin; a strategy out of range; a flag that is not 0/1.
  Attach none;
  EXPECT_FALSE(decode_attach(encode(none)).ok());
  Attach bad = a;
  bad.strategy = 99;
  EXPECT_FALSE(decode_attach(encode(bad)).ok());
  Detach det;
  std::string flags = encode(det);
  flags[0] = 2;
  EXPECT_FALSE(decode_detach(flags).ok());
  auto err = decode_detach(flags);
  EXPECT_NE(err.error().message.find("malformed detach"), std::string::npos);
}

TEST(Control, FramesRefuseBadLengthAndType) {
  std::string f = frame_bytes(MsgType::kStatus, encode(StatusQuery{}));
  auto s = split_frame(f);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->used, f.size());
  EXPECT_EQ(s->frame.type, MsgType::kStatus);
  EXPECT_EQ(split_frame(f.substr(0, f.size() - 1))->used, 0u);  // partial: wait
  std::string bad_type = f;
  bad_type[4] = 99;
  EXPECT_FALSE(split_frame(bad_type).ok());
  std::string huge = f;
  huge[3] = '\x7f';
  EXPECT_FALSE(split_frame(huge).ok());
}

TEST(Control, RequestBoundRefusesBigFrames) {
  int sv[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
  Reply r;
  r.text = std::string(kMaxRequest, 'x');  // fine as a reply, not as a request
  std::thread sender([&] { (void)send_frame(sv[0], MsgType::kReply, encode(r)); });
  auto frame = recv_frame(sv[1], 5000, nullptr, kMaxRequest);
  EXPECT_FALSE(frame.ok());
  close(sv[1]);  // the sender, blocked on a full buffer, gets an error
  sender.join();
  close(sv[0]);
}

// An Attach with plugins of their own files passes several fds: they must
// arrive all, in the order sent.
TEST(Control, FdsInOrderOverASocket) {
  int sv[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
  int pipes[3][2];
  for (auto& p : pipes) ASSERT_EQ(pipe(p), 0);
  ASSERT_TRUE(send_frame_fds(sv[0], MsgType::kStatus, "abc", {pipes[0][1], pipes[1][1], pipes[2][1]}).ok());
  std::vector<int> got;
  auto frame = recv_frame_fds(sv[1], 5000, &got, kMaxRequest);
  ASSERT_TRUE(frame.ok()) << frame.error().message;
  EXPECT_EQ(frame->payload, "abc");
  ASSERT_EQ(got.size(), 3u);
  for (int i = 0; i < 3; ++i) {
    const char c = static_cast<char>('a' + i);
    EXPECT_EQ(write(got[i], &c, 1), 1);
    char back = 0;
    EXPECT_EQ(read(pipes[i][0], &back, 1), 1);
    EXPECT_EQ(back, c) << "fd " << i << " arrived out of order";
    close(got[i]);
  }
  std::vector<int> too_many(kMaxPassedFds + 1, pipes[0][1]);
  EXPECT_FALSE(send_frame_fds(sv[0], MsgType::kStatus, "", too_many).ok());
  for (auto& p : pipes) {
    close(p[0]);
    close(p[1]);
  }
  close(sv[0]);
  close(sv[1]);
}

TEST(Control, FramesAndFdOverASocket) {
  int sv[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
  int pipefd[2];
  ASSERT_EQ(pipe(pipefd), 0);
  Reply r;
  r.message = "hello";
  r.text = std::string(200000, 'x');  // more than one socket buffer
  std::thread sender([&] {
    ASSERT_TRUE(send_frame(sv[0], MsgType::kReply, encode(r), pipefd[1]).ok());
  });
  int got_fd = -1;
  auto frame = recv_frame(sv[1], 5000, &got_fd);
  sender.join();
  ASSERT_TRUE(frame.ok()) << frame.error().message;
  ASSERT_GE(got_fd, 0);
  EXPECT_EQ(write(got_fd, "z", 1), 1);  // the passed fd is the pipe's write end
  char c = 0;
  EXPECT_EQ(read(pipefd[0], &c, 1), 1);
  EXPECT_EQ(c, 'z');
  auto d = decode_reply(frame->payload);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->text.size(), 200000u);
  close(got_fd);
  // The peer gone: a clear error, not a signal.
  close(sv[0]);
  EXPECT_FALSE(recv_frame(sv[1], 1000).ok());
  EXPECT_FALSE(send_frame(sv[1], MsgType::kStatus, "").ok());
  close(sv[1]);
  close(pipefd[0]);
  close(pipefd[1]);
}

// The short slice changes the calling thread's slice only: its policy and
// nice value stay, and the other threads keep theirs.
TEST(Control, ShortSliceKeepsPolicyAndNice) {
  KernelSchedAttr before_main{};
  ASSERT_TRUE(read_sched_attr(0, &before_main));
  std::thread([&] {
    const pid_t tid = static_cast<pid_t>(syscall(SYS_gettid));
    // A nice value of its own, which a careless sched_setattr (nice 0)
    // would reset when run as root and fail with EPERM otherwise.
    ASSERT_EQ(setpriority(PRIO_PROCESS, static_cast<id_t>(tid), 7), 0);
    const bool granted = request_short_slice();
    KernelSchedAttr after{};
    ASSERT_TRUE(read_sched_attr(0, &after));
    EXPECT_EQ(after.policy, 0u);  // SCHED_OTHER
    EXPECT_EQ(after.nice, 7);
    // A kernel with EEVDF's slice requests (6.12+) reports it; an older one
    // accepts the call and keeps no slice (0), or refuses it (ENOSYS under
    // an old qemu-user), which changes nothing.
    if (granted) {
      EXPECT_TRUE(after.runtime == 100'000 || after.runtime == 0) << after.runtime;
    }
  }).join();
  KernelSchedAttr after_main{};
  ASSERT_TRUE(read_sched_attr(0, &after_main));
  EXPECT_EQ(after_main.runtime, before_main.runtime);
  EXPECT_EQ(after_main.nice, before_main.nice);
}

// A thread that waits, at nice value `nice`, until the object goes: the
// other thread a guard acts on.
class WaitingThread {
 public:
  explicit WaitingThread(int nice)
      : worker_([this, nice] {
          tid_ = static_cast<pid_t>(syscall(SYS_gettid));
          (void)setpriority(PRIO_PROCESS, static_cast<id_t>(tid_.load()), nice);
          ready_ = true;
          while (!done_) std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }) {
    while (!ready_) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ~WaitingThread() {
    done_ = true;
    worker_.join();
  }
  pid_t tid() const { return tid_; }

 private:
  std::atomic<pid_t> tid_{0};
  std::atomic<bool> ready_{false}, done_{false};
  std::thread worker_;
};

// Another thread's short slice lasts as long as the guard, then its own
// attributes are back: the default slice as the default, a nice value kept.
TEST(Control, ShortSliceForAnotherThreadIsGivenBack) {
  WaitingThread worker(5);
  const pid_t tid = worker.tid();
  KernelSchedAttr before{};
  ASSERT_TRUE(read_sched_attr(tid, &before));
  {
    ShortSliceFor guard(tid);
    KernelSchedAttr during{};
    ASSERT_TRUE(read_sched_attr(tid, &during));
    EXPECT_EQ(during.policy, 0u);
    EXPECT_EQ(during.nice, before.nice);
    if (guard.changed() && before.runtime != 0) {
      EXPECT_EQ(during.runtime, 100'000u);  // a kernel that reports slices
    }
  }
  KernelSchedAttr after{};
  ASSERT_TRUE(read_sched_attr(tid, &after));
  EXPECT_EQ(after.runtime, before.runtime);
  EXPECT_EQ(after.nice, before.nice);
  EXPECT_EQ(after.policy, before.policy);
}

// Where this process may raise a priority (root in the test command), a
// thread of the agent's kind runs at nice -10 for as long as the guard
// lives, then has its own nice value back; one that gave its own back
// already is left alone; without the privilege nothing changes.
TEST(Control, RaisedPriorityForAnotherThreadIsGivenBack) {
  WaitingThread worker(3);
  const pid_t tid = worker.tid();
  KernelSchedAttr before{};
  ASSERT_TRUE(read_sched_attr(tid, &before));
  ASSERT_EQ(before.nice, 3);
  {
    RaisedPriorityFor guard(tid);
    KernelSchedAttr during{};
    ASSERT_TRUE(read_sched_attr(tid, &during));
    EXPECT_EQ(during.nice, guard.changed() ? -10 : 3);
    EXPECT_EQ(during.policy, before.policy);
    EXPECT_EQ(during.runtime, before.runtime);
    if (geteuid() == 0) EXPECT_TRUE(guard.changed());
  }
  KernelSchedAttr after{};
  ASSERT_TRUE(read_sched_attr(tid, &after));
  EXPECT_EQ(after.nice, 3);
  {
    RaisedPriorityFor guard(tid);
    // The thread put a value of its own meanwhile: the guard keeps off it.
    ASSERT_EQ(setpriority(PRIO_PROCESS, static_cast<id_t>(tid), 4), 0);
  }
  ASSERT_TRUE(read_sched_attr(tid, &after));
  EXPECT_EQ(after.nice, 4);
  RaisedPriorityFor gone(0);
  EXPECT_FALSE(gone.changed());
}

// The calling thread's own raise and its way back, and keep_nice: what
// the agent's thread does after a request whose CLI did not give its
// priority back.
TEST(Control, OwnPriorityRaisedAndLoweredAndKept) {
  std::thread([] {
    ASSERT_EQ(setpriority(PRIO_PROCESS, 0, 2), 0);
    EXPECT_FALSE(lower_own_priority());  // not raised: nothing to do
    const bool raised = raise_own_priority();
    if (geteuid() == 0) EXPECT_TRUE(raised);
    EXPECT_EQ(own_nice(), raised ? -10 : 2);
    EXPECT_EQ(lower_own_priority(), raised);
    EXPECT_EQ(own_nice(), 2);
    if (raised) {
      ASSERT_EQ(setpriority(PRIO_PROCESS, 0, -10), 0);  // left by a killed CLI
      keep_nice(2);
      EXPECT_EQ(own_nice(), 2);
    }
    keep_nice(1);  // only ever gives a raised priority back, never raises one
    EXPECT_EQ(own_nice(), 2);
  }).join();
}

}  // namespace
}  // namespace ftjit::control
