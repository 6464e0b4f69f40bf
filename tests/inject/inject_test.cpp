// SPDX-License-Identifier: MIT
// The ptrace injector against live processes: load and unload a library,
// call functions, and the failures a user meets (no process, static
// program, a debugger attached, a target that dies, a lock held by a
// stopped thread).
#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/ptrace.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "cli/inject/ptrace_inject.h"
#include "cli/inject/target_libc.h"
#include "cli/inject/thread_call.h"
#include "tests/common/sched_attr.h"

extern char** environ;

namespace ftjit::inject {
namespace {

using namespace std::chrono_literals;
constexpr auto kTimeout = std::chrono::milliseconds(10000);

std::string basename_of(const std::string& path) { return path.substr(path.rfind('/') + 1); }

// The arm64 build runs these tests under qemu-aarch64 (the arm64 leg),
// whose guests cannot ptrace anything: ptrace is not among the system
// calls qemu-user emulates. Then every test skips, saying so; on a native
// machine the probe succeeds and they all run.
bool ptrace_available() {
  static const bool available = [] {
    const pid_t child = fork();
    if (child == 0) {
      pause();
      _exit(0);
    }
    const long rc = ptrace(PTRACE_SEIZE, child, nullptr, nullptr);
    const int err = errno;
    kill(child, SIGKILL);
    waitpid(child, nullptr, 0);
    return rc == 0 || err != ENOSYS;
  }();
  return available;
}

class Inject : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!ptrace_available()) {
      GTEST_SKIP() << "no ptrace here (ENOSYS: qemu-user does not emulate it): the injector "
                      "for this ISA runs on a native machine only";
    }
  }
};

std::string marker_path(pid_t pid) { return "/tmp/ftjit-inject-test-" + std::to_string(pid) + ".marker"; }

std::string slurp(const std::string& path) {
  std::string out;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return "<missing>";
  char buf[4096];
  ssize_t n;
  while ((n = ::read(fd, buf, sizeof buf)) > 0) out.append(buf, static_cast<size_t>(n));
  ::close(fd);
  return out;
}

// A target process with its stdin and stdout on pipes to us.
class Target {
 public:
  explicit Target(std::vector<std::string> argv) {
    int in[2], out[2];
    if (::pipe2(in, O_CLOEXEC) != 0 || ::pipe2(out, O_CLOEXEC) != 0) return;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, in[0], 0);
    posix_spawn_file_actions_adddup2(&fa, out[1], 1);
    std::vector<char*> args;
    for (std::string& a : argv) args.push_back(a.data());
    args.push_back(nullptr);
    if (posix_spawn(&pid_, args[0], &fa, nullptr, args.data(), environ) != 0) pid_ = 0;
    posix_spawn_file_actions_destroy(&fa);
    ::close(in[0]);
    ::close(out[1]);
    in_ = in[1];
    out_ = out[0];
  }
  Target(const Target&) = delete;
  Target& operator=(const Target&) = delete;
  ~Target() {
    if (pid_ > 0 && !reaped_) {
      ::kill(pid_, SIGKILL);
      int st;
      ::waitpid(pid_, &st, 0);
    }
    if (in_ >= 0) ::close(in_);
    if (out_ >= 0) ::close(out_);
    ::unlink(marker_path(pid_).c_str());
  }

  pid_t pid() const { return pid_; }

  // The next line of its stdout (without the newline); false on EOF or
  // after 10 s.
  bool read_line(std::string* line) {
    auto deadline = std::chrono::steady_clock::now() + 10s;
    for (;;) {
      if (size_t nl = buffer_.find('\n'); nl != std::string::npos) {
        *line = buffer_.substr(0, nl);
        all_ += buffer_.substr(0, nl + 1);
        buffer_.erase(0, nl + 1);
        return true;
      }
      if (!fill(deadline)) return false;
    }
  }

  // Lets it finish (a byte on stdin), collects the rest of its stdout and
  // its wait status. -1 if it did not end within 10 s.
  int finish(std::string* output) {
    if (in_ >= 0) {
      ssize_t n = ::write(in_, "q", 1);
      (void)n;
      ::close(in_);
      in_ = -1;
    }
    // A bound, not a wait: under TCG beside the test command's ASan build
    // the last 45 of 400 ticks once took longer than 10 s (the kernel
    // leg's kill sweep, whose re-run costs a whole boot).
    auto deadline = std::chrono::steady_clock::now() + 60s;
    while (fill(deadline)) {
    }
    all_ += buffer_;
    buffer_.clear();
    *output = all_;
    return wait_exit(deadline);
  }

  // Waits for the exit only.
  int wait_exit(std::chrono::steady_clock::time_point deadline) {
    int st = 0;
    while (std::chrono::steady_clock::now() < deadline) {
      pid_t w = ::waitpid(pid_, &st, WNOHANG);
      if (w == pid_) {
        reaped_ = true;
        return st;
      }
      std::this_thread::sleep_for(5ms);
    }
    return -1;
  }

  // The id of a thread other than the main one.
  pid_t other_thread() const {
    DIR* dir = ::opendir(("/proc/" + std::to_string(pid_) + "/task").c_str());
    pid_t found = 0;
    while (dir && !found) {
      dirent* de = ::readdir(dir);
      if (!de) break;
      pid_t tid = static_cast<pid_t>(std::atoi(de->d_name));
      if (tid > 0 && tid != pid_) found = tid;
    }
    if (dir) ::closedir(dir);
    return found;
  }

 private:
  bool fill(std::chrono::steady_clock::time_point deadline) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    pollfd pfd{out_, POLLIN, 0};
    if (::poll(&pfd, 1, static_cast<int>(left.count())) <= 0) return false;
    char buf[4096];
    ssize_t n = ::read(out_, buf, sizeof buf);
    if (n <= 0) return false;
    buffer_.append(buf, static_cast<size_t>(n));
    return true;
  }

  pid_t pid_ = 0;
  int in_ = -1;
  int out_ = -1;
  bool reaped_ = false;
  std::string buffer_;
  std::string all_;
};

// The stdout of an untraced run, which every traced run must reproduce.
const std::string& untraced_output() {
  static const std::string output = [] {
    Target t({FTJIT_INJECT_TARGET});
    std::string out;
    int st = t.finish(&out);
    EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << "untraced run: status " << st;
    return out;
  }();
  return output;
}

// Starts the target and waits until all its threads run.
void start(Target& t) {
  std::string line;
  ASSERT_GT(t.pid(), 0);
  ASSERT_TRUE(t.read_line(&line));
  ASSERT_EQ(line, "start");
}

void expect_clean_finish(Target& t) {
  std::string out;
  int st = t.finish(&out);
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << "status " << st;
  EXPECT_EQ(out, untraced_output());
}

long read_long(pid_t pid, uint64_t addr) {
  long v = -1;
  int fd = ::open(("/proc/" + std::to_string(pid) + "/mem").c_str(), O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    if (::pread(fd, &v, sizeof v, static_cast<off_t>(addr)) != sizeof v) v = -1;
    ::close(fd);
  }
  return v;
}

// Runs fn(args) on thread tid (0: one at a safe point) of pid and lets it
// go back to its own state.
Status call_on(pid_t pid, pid_t tid, uint64_t fn, std::span<const uint64_t> args,
               std::chrono::milliseconds timeout = kTimeout) {
  auto info = inspect_target(pid);
  FTJIT_TRY(info);
  auto libc = detail::read_target_libc(*info);
  FTJIT_TRY(libc);
  auto call = ThreadCall::seize(pid, *libc, tid, timeout);
  FTJIT_TRY(call);
  FTJIT_TRY(call->run(fn, args, timeout));
  return call->release();
}

// The state /proc shows of a thread that no injection may change.
std::string signal_state(pid_t pid, pid_t tid) {
  std::string status = slurp("/proc/" + std::to_string(pid) + "/task/" + std::to_string(tid) + "/status");
  std::string out;
  for (const char* key : {"SigBlk:", "SigIgn:", "SigCgt:"}) {
    size_t at = status.find(key);
    if (at != std::string::npos) out += status.substr(at, status.find('\n', at) - at) + ";";
  }
  return out;
}

// Every thread's scheduling attributes as sched_getattr(2) reports them
// (policy, nice, slice), which an injection gives a short slice to for the
// loader's call and must give back (runtime/control/latency_slice.h).
std::string sched_state(pid_t pid) {
  std::string out;
  DIR* dir = ::opendir(("/proc/" + std::to_string(pid) + "/task").c_str());
  if (dir == nullptr) return out;
  while (dirent* de = ::readdir(dir)) {
    const long tid = std::strtol(de->d_name, nullptr, 10);
    test::KernelSchedAttr attr;
    if (tid <= 0 || !test::read_sched_attr(static_cast<pid_t>(tid), &attr)) continue;
    out += std::to_string(tid) + ":" + std::to_string(attr.policy) + "," + std::to_string(attr.nice) + "," +
           std::to_string(attr.runtime) + ";";
  }
  ::closedir(dir);
  return out;
}

// ---------------------------------------------------------------------------
// Success paths
// ---------------------------------------------------------------------------

// Loads the test library into a started target and unloads it, each step
// seen by the library's marker file.
void load_and_unload_testlib(Target& t) {
  ::unlink(marker_path(t.pid()).c_str());
  auto info = inspect_target(t.pid());
  ASSERT_TRUE(info.ok()) << info.error().message;
  auto handle = inject_library(*info, FTJIT_INJECT_TESTLIB, kTimeout);
  ASSERT_TRUE(handle.ok()) << handle.error().message;
  EXPECT_EQ(slurp(marker_path(t.pid())), "loaded\n");
  Status unloaded = unload_library(*info, *handle, kTimeout);
  ASSERT_TRUE(unloaded.ok()) << unloaded.error().message;
  EXPECT_EQ(slurp(marker_path(t.pid())), "loaded\nunloaded\n");
}

TEST_F(Inject, LoadsAndUnloadsLibrary) {
  const std::string& expected = untraced_output();
  ASSERT_FALSE(expected.empty());
  Target t({FTJIT_INJECT_TARGET});
  start(t);
  ::unlink(marker_path(t.pid()).c_str());

  auto info = inspect_target(t.pid());
  ASSERT_TRUE(info.ok()) << info.error().message;
#if defined(__aarch64__)
  EXPECT_EQ(info->isa, Isa::kArm64);
#else
  EXPECT_EQ(info->isa, Isa::kX86_64);
#endif
  EXPECT_FALSE(info->static_linked);
  EXPECT_TRUE(info->same_mount_ns);
  EXPECT_EQ(info->uid, ::getuid());
  char real[PATH_MAX];
  ASSERT_NE(::realpath(FTJIT_INJECT_TARGET, real), nullptr);
  EXPECT_EQ(info->exe, real);
  ASSERT_TRUE(check_ptrace_permitted(*info).ok());

  auto staged = stage_library(*info, FTJIT_INJECT_TESTLIB);
  ASSERT_TRUE(staged.ok()) << staged.error().message;
  EXPECT_EQ(*staged, FTJIT_INJECT_TESTLIB);  // same root: no copy

  const std::string scheduling = sched_state(t.pid());
  auto handle = inject_library(*info, *staged, kTimeout);
  ASSERT_TRUE(handle.ok()) << handle.error().message;
  EXPECT_NE(*handle, 0u);
  EXPECT_EQ(slurp(marker_path(t.pid())), "loaded\n");
  EXPECT_EQ(sched_state(t.pid()), scheduling);  // the borrowed thread's slice given back

  const std::string lib = basename_of(FTJIT_INJECT_TESTLIB);
  auto state = symbol_in_target(t.pid(), lib, "ftjit_inject_test_state");
  ASSERT_TRUE(state.ok()) << state.error().message;
  EXPECT_EQ(read_long(t.pid(), *state), 0x1234);

  // Loading it again returns the same handle and runs no constructor.
  auto again = inject_library(*info, *staged, kTimeout);
  ASSERT_TRUE(again.ok()) << again.error().message;
  EXPECT_EQ(*again, *handle);
  ASSERT_TRUE(unload_library(*info, *again, kTimeout).ok());
  EXPECT_EQ(slurp(marker_path(t.pid())), "loaded\n");

  Status unloaded = unload_library(*info, *handle, kTimeout);
  ASSERT_TRUE(unloaded.ok()) << unloaded.error().message;
  EXPECT_EQ(slurp(marker_path(t.pid())), "loaded\nunloaded\n");
  EXPECT_FALSE(symbol_in_target(t.pid(), lib, "ftjit_inject_test_state").ok());

  expect_clean_finish(t);
}

// The same program linked by the other linker than the build's: GNU ld's
// page-aligned segments or lld's packed ones. libunwind 1.6 alone found no
// CFI in an lld-linked program's frames, so no thread of one stood at a
// safe point and every injection gave up (cli/inject/remote_unwind.cpp).
TEST_F(Inject, LoadsIntoAProgramOfTheOtherLinker) {
  const std::string other = FTJIT_INJECT_OTHER_LINKER_TARGET;
  if (other.empty()) GTEST_SKIP() << "the compiler links with one linker only";
  const std::string& expected = untraced_output();
  ASSERT_FALSE(expected.empty());
  Target t({other});
  start(t);
  ASSERT_NO_FATAL_FAILURE(load_and_unload_testlib(t));
  expect_clean_finish(t);
}

TEST_F(Inject, CallsFunctionsWithArgumentsRepeatedly) {
  Target t({FTJIT_INJECT_TARGET});
  start(t);
  auto info = inspect_target(t.pid());
  ASSERT_TRUE(info.ok()) << info.error().message;
  const std::string exe = basename_of(info->exe);
  auto sum6 = symbol_in_target(t.pid(), exe, "inject_target_sum6");
  auto clobber = symbol_in_target(t.pid(), exe, "inject_target_clobber_fp");
  auto result = symbol_in_target(t.pid(), exe, "inject_target_result");
  auto store_atol = symbol_in_target(t.pid(), exe, "inject_target_store_atol");
  ASSERT_TRUE(sum6.ok() && clobber.ok() && result.ok() && store_atol.ok());
  const std::string main_signals = signal_state(t.pid(), t.pid());
  const uint64_t args[] = {1, 2, 3, 4, 5, 6};
  // Spread over the target's run, so that main is caught both sleeping and
  // computing with live FP registers (which the target checks).
  for (int i = 0; i < 20; ++i) {
    ASSERT_TRUE(call_on(t.pid(), t.pid(), *sum6, args).ok());
    EXPECT_EQ(read_long(t.pid(), *result), 91);
    Status clobbered = call_on(t.pid(), t.pid(), *clobber, {});
    ASSERT_TRUE(clobbered.ok()) << clobbered.error().message;
    EXPECT_EQ(signal_state(t.pid(), t.pid()), main_signals);
    std::this_thread::sleep_for(3ms);
  }
  // A string on the thread's stack.
  {
    auto libc = detail::read_target_libc(*info);
    ASSERT_TRUE(libc.ok()) << libc.error().message;
    auto call = ThreadCall::seize(t.pid(), *libc, 0, kTimeout);
    ASSERT_TRUE(call.ok()) << call.error().message;
    auto str = call->push_string("-123456789012");
    ASSERT_TRUE(str.ok());
    const uint64_t one[] = {*str};
    ASSERT_TRUE(call->run(*store_atol, one, kTimeout).ok());
    EXPECT_EQ(read_long(t.pid(), *result), -123456789012);
    const uint64_t seven[7] = {};
    EXPECT_FALSE(call->run(*sum6, seven, kTimeout).ok());
    EXPECT_TRUE(call->release().ok());
  }
  expect_clean_finish(t);
}

// What the call changes of the thread beyond its registers comes back too:
// errno (which dlopen changes), the signal mask, the alternate signal
// stack (which rt_sigreturn would reset from the frame).
TEST_F(Inject, ThreadComesBackWithItsErrnoMaskAndAltStack) {
  Target t({FTJIT_INJECT_TARGET});
  start(t);
  auto info = inspect_target(t.pid());
  ASSERT_TRUE(info.ok()) << info.error().message;
  const std::string exe = basename_of(info->exe);
  auto set_errno = symbol_in_target(t.pid(), exe, "inject_target_set_errno");
  auto probe_errno = symbol_in_target(t.pid(), exe, "inject_target_probe_errno");
  auto probe_alt = symbol_in_target(t.pid(), exe, "inject_target_probe_altstack");
  auto result = symbol_in_target(t.pid(), exe, "inject_target_result");
  ASSERT_TRUE(set_errno.ok() && probe_errno.ok() && probe_alt.ok() && result.ok());
  const std::string main_signals = signal_state(t.pid(), t.pid());
  for (int i = 0; i < 10; ++i) {
    const uint64_t v[] = {5555};
    ASSERT_TRUE(call_on(t.pid(), t.pid(), *set_errno, v).ok());
    ASSERT_TRUE(call_on(t.pid(), t.pid(), *probe_errno, {}).ok());
    EXPECT_NE(read_long(t.pid(), *result), 5555) << "errno the call set was left to the thread";
    ASSERT_TRUE(call_on(t.pid(), t.pid(), *probe_alt, {}).ok());
    EXPECT_EQ(read_long(t.pid(), *result), 1) << "the alternate signal stack changed";
    EXPECT_EQ(signal_state(t.pid(), t.pid()), main_signals);
    std::this_thread::sleep_for(4ms);
  }
  expect_clean_finish(t);
}

// The injector killed at any instant of an injection: the thread it had
// borrowed comes back by itself (the kernel detaches it, its frame takes it
// home), nothing is left stopped or traced, the program's output is
// unchanged. Each round loads the library afresh (the one before is
// unloaded), so the kills land inside real loads, constructor included.
TEST_F(Inject, InjectorKilledAtAnyInstantHarmsNothing) {
  // An untraced run beside it, for the output every run must have.
  Target ref({FTJIT_INJECT_TARGET, "--ticks", "400"});
  Target t({FTJIT_INJECT_TARGET, "--ticks", "400"});
  start(t);
  auto info = inspect_target(t.pid());
  ASSERT_TRUE(info.ok()) << info.error().message;
  auto libc = detail::read_target_libc(*info);
  ASSERT_TRUE(libc.ok()) << libc.error().message;
  ::unlink(marker_path(t.pid()).c_str());
  auto inject_in_child = [&] {
    pid_t child = ::fork();
    if (child == 0) ::_exit(inject_library(*info, FTJIT_INJECT_TESTLIB, kTimeout).ok() ? 0 : 1);
    return child;
  };
  auto unload_if_loaded = [&] {
    auto handle = detail::loaded_object_handle(t.pid(), *libc, FTJIT_INJECT_TESTLIB);
    ASSERT_TRUE(handle.ok()) << handle.error().message;
    if (*handle != 0) {
      ASSERT_TRUE(unload_library(*info, *handle, kTimeout).ok());
    }
  };
  // How long one load takes here: the kills are spread over 1.5 times it.
  auto begin = std::chrono::steady_clock::now();
  {
    pid_t child = inject_in_child();
    int st;
    ASSERT_EQ(::waitpid(child, &st, 0), child);
    ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  }
  const auto span = std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - begin) * 3 / 2;
  unload_if_loaded();
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
  const int kKills = 30;  // a sanitized injector forks and loads slowly: a sample
#else
  // FTJIT_INJECT_KILLS: fewer under emulation (the arm64 kernel leg's 50).
  const int kKills = std::getenv("FTJIT_INJECT_KILLS") ? std::atoi(std::getenv("FTJIT_INJECT_KILLS")) : 120;
#endif
  int killed = 0;
  for (int i = 0; i < kKills; ++i) {
    pid_t child = inject_in_child();
    std::this_thread::sleep_for(span * i / kKills);
    ::kill(child, SIGKILL);
    int st;
    ASSERT_EQ(::waitpid(child, &st, 0), child);
    if (WIFSIGNALED(st)) ++killed;
    // Never left stopped, never traced by a dead injector.
    auto deadline = std::chrono::steady_clock::now() + 2s;
    std::string stat;
    do {
      stat = slurp("/proc/" + std::to_string(t.pid()) + "/status");
    } while (stat.find("TracerPid:\t0\n") == std::string::npos && std::chrono::steady_clock::now() < deadline);
    ASSERT_NE(stat.find("TracerPid:\t0\n"), std::string::npos) << stat;
    ASSERT_EQ(stat.find("State:\tT"), std::string::npos) << stat;
    // A load the kill did not stop finishes by itself: wait for its
    // constructor, then unload it for the next round.
    std::this_thread::sleep_for(2ms);
    unload_if_loaded();
  }
  // The last round's load, if a kill left it to finish by itself.
  std::this_thread::sleep_for(300ms);
  unload_if_loaded();
  std::printf("%d of %d injectors were killed before they finished\n", killed, kKills);
  EXPECT_GT(killed, 0);
  // Every load that happened was whole: its constructor ran, then its
  // destructor at the unload.
  std::string marker = slurp(marker_path(t.pid()));
  size_t loads = 0, pos = 0;
  while ((pos = marker.find("loaded\nunloaded\n", pos)) != std::string::npos) {
    ++loads;
    pos += 16;
  }
  EXPECT_EQ(marker.size(), loads * 16) << marker;
  std::string out;
  int st = t.finish(&out);
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << "status " << st;
  std::string ref_out;
  ref.finish(&ref_out);
  EXPECT_EQ(out, ref_out);
}

// A signal for the borrowed thread during the call neither interrupts the
// call nor gets lost: it is delivered once the thread is back.
TEST_F(Inject, SignalDuringTheCallIsDeliveredAfterIt) {
  Target t({FTJIT_INJECT_TARGET});
  start(t);
  auto exe = basename_of(FTJIT_INJECT_TARGET);
  auto wait_fn = symbol_in_target(t.pid(), exe, "inject_target_wait_ms");
  auto count = symbol_in_target(t.pid(), exe, "inject_target_usr1_count");
  auto result = symbol_in_target(t.pid(), exe, "inject_target_result");
  ASSERT_TRUE(wait_fn.ok() && count.ok() && result.ok());
  ASSERT_EQ(read_long(t.pid(), *count), 0);
  const pid_t pid = t.pid();
  // Whether it lands before or during the call, the outcome is the same.
  std::thread sender([pid] {
    std::this_thread::sleep_for(100ms);
    ::syscall(SYS_tgkill, pid, pid, SIGUSR1);
  });
  const uint64_t ms[] = {400};
  Status r = call_on(t.pid(), t.pid(), *wait_fn, ms);
  sender.join();
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(read_long(t.pid(), *result), 400);
  auto deadline = std::chrono::steady_clock::now() + 5s;
  while (read_long(t.pid(), *count) == 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(2ms);
  EXPECT_EQ(read_long(t.pid(), *count), 1);
  auto in_wait = symbol_in_target(t.pid(), exe, "inject_target_usr1_in_wait");
  ASSERT_TRUE(in_wait.ok());
  EXPECT_EQ(read_long(t.pid(), *in_wait), 0);
  expect_clean_finish(t);
}

// The injected library's constructor needs a lock that another thread
// holds: only the borrowed thread is stopped, so the holder lets go of it.
// An injected call's end is told by a signal the program neither handles
// nor blocks (thread_call.h): with SIGURG handled the injector takes
// another one; with SIGURG, SIGWINCH and SIGCHLD all handled it follows
// the call by its system calls. Either way the library is loaded and
// unloaded, and no handler of the program's ever sees a marker.
TEST_F(Inject, ReturnMarkerNeverReachesTheProgramsHandlers) {
  for (const char* handled : {"1", "3"}) {
    SCOPED_TRACE(std::string("signals handled: ") + handled);
    Target t({FTJIT_INJECT_TARGET, "--catch-markers", handled});
    start(t);
    ASSERT_NO_FATAL_FAILURE(load_and_unload_testlib(t));
    auto caught = symbol_in_target(t.pid(), basename_of(FTJIT_INJECT_TARGET), "inject_target_caught_markers");
    ASSERT_TRUE(caught.ok()) << caught.error().message;
    std::this_thread::sleep_for(50ms);  // a stray one would have landed by now
    EXPECT_EQ(read_long(t.pid(), *caught), 0);
    expect_clean_finish(t);
  }
}

// A call abandoned at its timeout keeps its marker pending: delivered when
// the call ends, with nobody tracing, it must be one the program ignores
// (SIGURG is handled here: another one is taken).
TEST_F(Inject, AbandonedCallsMarkerIsIgnoredByTheProgram) {
  Target t({FTJIT_INJECT_TARGET, "--catch-markers", "1"});
  start(t);
  auto exe = basename_of(FTJIT_INJECT_TARGET);
  auto wait_fn = symbol_in_target(t.pid(), exe, "inject_target_wait_ms");
  auto result = symbol_in_target(t.pid(), exe, "inject_target_result");
  auto caught = symbol_in_target(t.pid(), exe, "inject_target_caught_markers");
  ASSERT_TRUE(wait_fn.ok() && result.ok() && caught.ok());
  const uint64_t ms[] = {300};
  Status r = call_on(t.pid(), t.pid(), *wait_fn, ms, 50ms);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("did not return within"), std::string::npos) << r.error().message;
  auto deadline = std::chrono::steady_clock::now() + 5s;
  while (read_long(t.pid(), *result) != 300 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(2ms);
  EXPECT_EQ(read_long(t.pid(), *result), 300);  // the call ended, on its own
  std::this_thread::sleep_for(50ms);
  EXPECT_EQ(read_long(t.pid(), *caught), 0);
  expect_clean_finish(t);
}

TEST_F(Inject, LockHeldByAStoppedThreadIsReleased) {
  Target t({FTJIT_INJECT_TARGET, "--hold-lock-ms", "1500"});
  start(t);
  auto info = inspect_target(t.pid());
  ASSERT_TRUE(info.ok()) << info.error().message;
  auto handle = inject_library(*info, FTJIT_INJECT_LOCKLIB, kTimeout);
  ASSERT_TRUE(handle.ok()) << handle.error().message;
  auto state = symbol_in_target(t.pid(), basename_of(FTJIT_INJECT_LOCKLIB), "ftjit_inject_lock_state");
  ASSERT_TRUE(state.ok()) << state.error().message;
  EXPECT_EQ(read_long(t.pid(), *state), 1);
  expect_clean_finish(t);
}

// A target in another root (a container) gets a private copy of the library.
TEST_F(Inject, StagesACopyIntoAnotherRoot) {
  char root_template[] = "/tmp/ftjit-inject-root-XXXXXX";
  ASSERT_NE(::mkdtemp(root_template), nullptr);
  const std::string root = root_template;
  ASSERT_EQ(::mkdir((root + "/tmp").c_str(), 01777), 0);
  TargetInfo info;
  info.pid = ::getpid();
  info.root = root;
  info.uid = ::getuid();
  info.gid = ::getgid();
  const std::string dir = "/tmp/ftjit-" + std::to_string(info.uid);
  const std::string lib = basename_of(FTJIT_INJECT_TESTLIB);
  for (int round = 0; round < 2; ++round) {  // the second one replaces the first copy
    auto staged = stage_library(info, FTJIT_INJECT_TESTLIB);
    ASSERT_TRUE(staged.ok()) << staged.error().message;
    EXPECT_EQ(*staged, dir + "/" + lib);
    EXPECT_EQ(slurp(root + *staged), slurp(FTJIT_INJECT_TESTLIB));
    struct stat st;
    ASSERT_EQ(::lstat((root + dir).c_str(), &st), 0);
    EXPECT_TRUE(S_ISDIR(st.st_mode));
    EXPECT_EQ(st.st_mode & 0777, 0700u);
  }
  EXPECT_FALSE(stage_library(info, "/nonexistent/lib.so").ok());
  // The copy goes, and then its directory; a file that is not a copy stays.
  const std::string copy = dir + "/" + lib;
  EXPECT_TRUE(is_staged_copy(info, copy));
  EXPECT_FALSE(is_staged_copy(info, FTJIT_INJECT_TESTLIB));
  EXPECT_FALSE(is_staged_copy(info, dir + "/sub/" + lib));
  ASSERT_TRUE(remove_staged_copy(info, FTJIT_INJECT_TESTLIB).ok());
  EXPECT_EQ(::access(FTJIT_INJECT_TESTLIB, R_OK), 0);
  ASSERT_EQ(::close(::open((root + dir + "/other").c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0600)), 0);
  ASSERT_TRUE(remove_staged_copy(info, copy).ok());
  EXPECT_NE(::access((root + copy).c_str(), F_OK), 0);
  ASSERT_TRUE(remove_staged_copy(info, copy).ok());  // gone already: nothing to do
  remove_staging_dir_if_empty(info);
  EXPECT_EQ(::access((root + dir).c_str(), F_OK), 0);  // not empty: it stays
  ASSERT_EQ(::unlink((root + dir + "/other").c_str()), 0);
  remove_staging_dir_if_empty(info);
  EXPECT_NE(::access((root + dir).c_str(), F_OK), 0);
  // A symlink planted where the directory goes is not followed.
  ASSERT_EQ(std::system(("rm -rf " + root + dir).c_str()), 0);
  ASSERT_EQ(::symlink("/", (root + dir).c_str()), 0);
  EXPECT_FALSE(stage_library(info, FTJIT_INJECT_TESTLIB).ok());
  ASSERT_EQ(std::system(("rm -rf " + root).c_str()), 0);
}


// CAP_SYS_ADMIN (21) or CAP_CHECKPOINT_RESTORE (40) in our effective set.
bool may_read_map_files() {
  std::string status = slurp("/proc/self/status");
  size_t at = status.find("CapEff:");
  if (at == std::string::npos) return false;
  unsigned long long caps = std::strtoull(status.c_str() + at + 7, nullptr, 16);
  return ((caps >> 21) & 1) != 0 || ((caps >> 40) & 1) != 0;
}

// A library removed from its directory once loaded (the agent's copy in a
// container, which `ftjit attach` removes then): its symbols still resolve,
// read from the mapping itself (/proc/PID/map_files, CAP_SYS_ADMIN), and
// without that privilege the error says so.
TEST_F(Inject, SymbolsOfALibraryRemovedOnceLoaded) {
  char dir_template[] = "/tmp/ftjit-inject-removed-XXXXXX";
  ASSERT_NE(::mkdtemp(dir_template), nullptr);
  const std::string lib = basename_of(FTJIT_INJECT_TESTLIB);
  const std::string copy = std::string(dir_template) + "/" + lib;
  ASSERT_EQ(std::system(("cp " + std::string(FTJIT_INJECT_TESTLIB) + " " + copy).c_str()), 0);
  Target t({FTJIT_INJECT_TARGET});
  start(t);
  auto info = inspect_target(t.pid());
  ASSERT_TRUE(info.ok()) << info.error().message;
  auto handle = inject_library(*info, copy, kTimeout);
  ASSERT_TRUE(handle.ok()) << handle.error().message;
  auto before = symbol_in_target(t.pid(), lib, "ftjit_inject_test_state");
  ASSERT_TRUE(before.ok()) << before.error().message;
  const bool readable = mapping_outlives_its_file(t.pid(), copy);
  ASSERT_EQ(::unlink(copy.c_str()), 0);
  ASSERT_EQ(::rmdir(dir_template), 0);
  auto after = symbol_in_target(t.pid(), lib, "ftjit_inject_test_state");
  if (readable) {
    ASSERT_TRUE(after.ok()) << after.error().message;
    EXPECT_EQ(*after, *before);
    EXPECT_EQ(read_long(t.pid(), *after), 0x1234);
  } else {
    ASSERT_FALSE(after.ok());
    EXPECT_NE(after.error().message.find("CAP_SYS_ADMIN"), std::string::npos) << after.error().message;
  }
  EXPECT_EQ(readable, may_read_map_files()) << "/proc/PID/map_files opens with CAP_SYS_ADMIN or CAP_CHECKPOINT_RESTORE";
  ASSERT_TRUE(unload_library(*info, *handle, kTimeout).ok());
  ::unlink(marker_path(t.pid()).c_str());
  expect_clean_finish(t);
}

// A process stopped by SIGSTOP is refused with one line and left as it
// was: stopped, untouched; continued, it runs on as if never asked.
TEST_F(Inject, StoppedTargetIsRefusedAndLeftStopped) {
  Target t({FTJIT_INJECT_TARGET});
  start(t);
  auto info = inspect_target(t.pid());
  ASSERT_TRUE(info.ok()) << info.error().message;
  ASSERT_EQ(::kill(t.pid(), SIGSTOP), 0);
  auto deadline = std::chrono::steady_clock::now() + 5s;
  while (slurp("/proc/" + std::to_string(t.pid()) + "/status").find("State:\tT") == std::string::npos &&
         std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(1ms);
  auto handle = inject_library(*info, FTJIT_INJECT_TESTLIB, kTimeout);
  ASSERT_FALSE(handle.ok());
  EXPECT_EQ(handle.error().message, "process " + std::to_string(t.pid()) +
                                        " is stopped (Stopped (signal)): continue it (kill -CONT " +
                                        std::to_string(t.pid()) + ") and retry");
  // Let go, it goes back into the group-stop (a moment in "t" first).
  std::string status;
  deadline = std::chrono::steady_clock::now() + 5s;
  do {
    status = slurp("/proc/" + std::to_string(t.pid()) + "/status");
  } while (status.find("State:\tT (stopped)") == std::string::npos && std::chrono::steady_clock::now() < deadline);
  EXPECT_NE(status.find("State:\tT (stopped)"), std::string::npos) << status;
  EXPECT_NE(status.find("TracerPid:\t0\n"), std::string::npos) << status;
  EXPECT_EQ(slurp(marker_path(t.pid())), "<missing>");
  ASSERT_EQ(::kill(t.pid(), SIGCONT), 0);
  expect_clean_finish(t);
}

// A thread that holds the loader's lock (inside a dl_iterate_phdr
// callback) is never the one asked to run dlopen: asked for it by name,
// it is refused, saying why; left to choose, the injector takes another
// thread, whose dlopen waits for the lock like any dlopen would.
TEST_F(Inject, ThreadHoldingTheLoaderLockIsNotBorrowed) {
  Target t({FTJIT_INJECT_TARGET, "--hold-loader-ms", "1500"});
  start(t);
  auto info = inspect_target(t.pid());
  ASSERT_TRUE(info.ok()) << info.error().message;
  auto holder_at = symbol_in_target(t.pid(), basename_of(info->exe), "inject_target_loader_holder");
  ASSERT_TRUE(holder_at.ok());
  const pid_t holder = static_cast<pid_t>(read_long(t.pid(), *holder_at));
  ASSERT_GT(holder, 0);
  auto libc = detail::read_target_libc(*info);
  ASSERT_TRUE(libc.ok()) << libc.error().message;
  auto refused = ThreadCall::seize(t.pid(), *libc, holder, 200ms);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().message.find("thread " + std::to_string(holder) + " is called from dl_iterate_phdr"),
            std::string::npos)
      << refused.error().message;
  auto chosen = ThreadCall::seize(t.pid(), *libc, 0, kTimeout);
  ASSERT_TRUE(chosen.ok()) << chosen.error().message;
  EXPECT_NE(chosen->tid(), holder);
  ASSERT_TRUE(chosen->release().ok());
  auto handle = inject_library(*info, FTJIT_INJECT_TESTLIB, kTimeout);
  ASSERT_TRUE(handle.ok()) << handle.error().message;
  EXPECT_EQ(slurp(marker_path(t.pid())), "loaded\n");
  expect_clean_finish(t);
}

// Threads created and ending all the time do not disturb an injection.
TEST_F(Inject, ThreadsComingAndGoingDuringTheInjection) {
  Target t({FTJIT_INJECT_TARGET, "--churn", "1"});
  start(t);
  auto info = inspect_target(t.pid());
  ASSERT_TRUE(info.ok()) << info.error().message;
  auto libc = detail::read_target_libc(*info);
  ASSERT_TRUE(libc.ok()) << libc.error().message;
  for (int i = 0; i < 10; ++i) {
    auto handle = inject_library(*info, FTJIT_INJECT_TESTLIB, kTimeout);
    ASSERT_TRUE(handle.ok()) << handle.error().message;
    ASSERT_TRUE(unload_library(*info, *handle, kTimeout).ok());
  }
  EXPECT_EQ(slurp(marker_path(t.pid())).size(), 10 * std::string("loaded\nunloaded\n").size());
  expect_clean_finish(t);
}

// ---------------------------------------------------------------------------
// Failures
// ---------------------------------------------------------------------------

TEST_F(Inject, MissingLibraryReportsDlerror) {
  Target t({FTJIT_INJECT_TARGET});
  start(t);
  auto info = inspect_target(t.pid());
  ASSERT_TRUE(info.ok()) << info.error().message;
  auto handle = inject_library(*info, "/nonexistent/libftjit-nope.so", kTimeout);
  ASSERT_FALSE(handle.ok());
  EXPECT_NE(handle.error().message.find("libftjit-nope.so: cannot open shared object file"), std::string::npos)
      << handle.error().message;
  EXPECT_EQ(handle.error().message.find('\n'), std::string::npos);
  expect_clean_finish(t);
}

TEST_F(Inject, NoProcess) {
  pid_t pid = ::fork();
  if (pid == 0) ::_exit(0);
  int st;
  ASSERT_EQ(::waitpid(pid, &st, 0), pid);
  auto info = inspect_target(pid);
  ASSERT_FALSE(info.ok());
  EXPECT_EQ(info.error().message, "no process " + std::to_string(pid));
  const uint64_t none[1] = {0};
  Status r = call_on(pid, pid, 0x1000, none);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message, "no process " + std::to_string(pid));
  EXPECT_FALSE(inspect_target(0).ok());
}

TEST_F(Inject, ThreadIdIsNotAProcess) {
  Target t({FTJIT_INJECT_TARGET});
  start(t);
  pid_t tid = t.other_thread();
  ASSERT_GT(tid, 0);
  auto info = inspect_target(tid);
  ASSERT_FALSE(info.ok());
  EXPECT_EQ(info.error().message,
            std::to_string(tid) + " is a thread of process " + std::to_string(t.pid()) + ": use -p " + std::to_string(t.pid()));
  expect_clean_finish(t);
}

TEST_F(Inject, StaticTargetIsRejected) {
  if (std::string(FTJIT_INJECT_STATIC_TARGET).empty()) GTEST_SKIP() << "no static libc (libc.a) installed";
  Target t({FTJIT_INJECT_STATIC_TARGET});
  start(t);
  auto info = inspect_target(t.pid());
  ASSERT_FALSE(info.ok());
  EXPECT_NE(info.error().message.find("is statically linked: no dlopen to load the agent with"), std::string::npos)
      << info.error().message;
  EXPECT_EQ(info.error().code, FTJIT_E_UNSUPPORTED);
  std::string out;
  int st = t.finish(&out);
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

TEST_F(Inject, TargetExitingDuringTheCall) {
  Target t({FTJIT_INJECT_TARGET});
  start(t);
  auto exit_fn = symbol_in_target(t.pid(), "libc.so.6", "_exit");
  ASSERT_TRUE(exit_fn.ok()) << exit_fn.error().message;
  const uint64_t code[] = {7};
  Status r = call_on(t.pid(), t.pid(), *exit_fn, code);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message, "process " + std::to_string(t.pid()) + " exited during injection");
  // Its exit status is still ours (its parent's) to collect.
  int st = t.wait_exit(std::chrono::steady_clock::now() + 10s);
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 7) << "status " << st;
}

TEST_F(Inject, AlreadyTracedTargetIsRejected) {
  Target t({FTJIT_INJECT_TARGET});
  start(t);
  ASSERT_EQ(::ptrace(PTRACE_SEIZE, t.pid(), nullptr, nullptr), 0) << std::strerror(errno);
  const std::string expected =
      "process " + std::to_string(t.pid()) + " is already traced by PID " + std::to_string(::getpid()) + " (a debugger?)";
  auto info = inspect_target(t.pid());
  ASSERT_TRUE(info.ok()) << info.error().message;
  EXPECT_EQ(info->tracer_pid, ::getpid());
  Status permitted = check_ptrace_permitted(*info);
  ASSERT_FALSE(permitted.ok());
  EXPECT_EQ(permitted.error().message, expected);
  auto handle = inject_library(*info, FTJIT_INJECT_TESTLIB, kTimeout);
  ASSERT_FALSE(handle.ok());
  EXPECT_EQ(handle.error().message, expected);
  // The destructor kills and reaps it.
}

// The call cannot finish before the timeout: it is abandoned, the thread
// put back, and the target goes on.
TEST_F(Inject, CallTimeoutIsAbandonedAndTargetSurvives) {
  Target t({FTJIT_INJECT_TARGET, "--hold-lock-ms", "3000"});
  start(t);
  auto info = inspect_target(t.pid());
  ASSERT_TRUE(info.ok()) << info.error().message;
  auto begin = std::chrono::steady_clock::now();
  auto handle = inject_library(*info, FTJIT_INJECT_LOCKLIB, 1500ms);
  auto took = std::chrono::steady_clock::now() - begin;
  ASSERT_FALSE(handle.ok());
  EXPECT_NE(handle.error().message.find("did not return within"), std::string::npos) << handle.error().message;
  EXPECT_LT(took, 2900ms);
  expect_clean_finish(t);
}

}  // namespace
}  // namespace ftjit::inject
