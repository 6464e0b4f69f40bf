// SPDX-License-Identifier: MIT
// The control signal: park, snapshot or sync every other thread.
#include "runtime/thread_control.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>

#include "runtime/arch/arch.h"

extern "C" {
__thread ftjit::TrampolineCounts ftjit_trampoline_counts
    __attribute__((tls_model("initial-exec"))) = {0, 0};
__thread bool ftjit_own_thread __attribute__((tls_model("initial-exec"))) = false;
}

namespace ftjit {
namespace {

// ---------------------------------------------------------------------------
// Shared state between the initiator and the handlers
// ---------------------------------------------------------------------------
//
// Everything a handler touches is static: a late signal (one that arrives
// after its request timed out) must never reach freed memory. A handler
// checks the request generation and its own tid before writing its slot.

enum class Kind : int { kSnapshot = 1, kPark = 2, kSync = 3 };
enum SlotState : uint64_t { kSent = 0, kDone = 1, kParked = 2, kResumed = 3, kWriting = 4 };

// A slot's state carries the generation of its request: a handler claims
// the slot (kSent -> kWriting) only for its own generation, and the
// initiator reuses a slot only when no handler is writing it.
constexpr uint64_t tag(uint32_t gen, SlotState st) { return (uint64_t{gen} << 8) | st; }

constexpr size_t kMaxThreads = 4096;
constexpr int kWaitTimeoutMs = 3000;

struct Slot {
  std::atomic<uint64_t> state{0};
  std::atomic<pid_t> tid{0};
  uint64_t pc = 0;
  uint64_t entries = 0;
  uint64_t exits = 0;
  const TrampolineCounts* counts_addr = nullptr;
  bool own = false;
  uint64_t new_pc = 0;
  // Written by the thread before it parks: a signal frame it runs on top
  // of saved a pc that the request's fixup would move (frame_fixup).
  bool outer_frame_hit = false;
  bool gone = false;
  bool deferred = false;  // blocked the signal while running: not sent yet
};

struct Request {
  std::atomic<uint32_t> generation{0};
  std::atomic<int> kind{0};
  std::atomic<size_t> n{0};
  std::atomic<uint32_t> release{0};
  // Run by each parked thread on itself before it resumes (ResumeHook);
  // the failures it returns are counted here.
  std::atomic<ResumeHook> resume_hook{nullptr};
  std::atomic<uint32_t> hook_failures{0};
  // stop_the_world's fixup, which each thread about to park also asks of
  // the pcs saved in the signal frames it was running on top of.
  std::atomic<const std::function<uint64_t(uint64_t)>*> frame_fixup{nullptr};
  // snapshot_threads' outer_pc, asked the same way.
  std::atomic<const std::function<bool(uint64_t)>*> snapshot_outer_pc{nullptr};
  // The signals the program handles (bit sig-1), the control signal not
  // among them: a thread whose interrupted mask blocks none of them runs
  // no handler of the program's (a handler blocks its own signal), so its
  // stack is not searched for outer signal frames (might_run_a_handler).
  std::atomic<uint64_t> handled_signals{0};
  Slot slots[kMaxThreads];
};

Request g_request;
std::mutex g_initiator_mutex;  // one request at a time
int g_signal = 0;
std::once_flag g_install_once;
Status g_install_status;

pid_t sys_gettid() { return static_cast<pid_t>(syscall(SYS_gettid)); }

// The signals with a handler installed now (bit sig-1), ours excepted.
uint64_t signals_with_handlers() {
  uint64_t mask = 0;
  for (int sig = 1; sig <= 64; ++sig) {
    if (sig == SIGKILL || sig == SIGSTOP || sig == g_signal) continue;
    struct sigaction sa{};
    if (sigaction(sig, nullptr, &sa) != 0) continue;
    const bool handler = (sa.sa_flags & SA_SIGINFO) != 0
                             ? sa.sa_sigaction != nullptr
                             : sa.sa_handler != SIG_DFL && sa.sa_handler != SIG_IGN;
    if (handler) mask |= uint64_t{1} << (sig - 1);
  }
  return mask;
}

// Whether the interrupted context may be a handler of the program's, run
// on top of a signal frame: it blocks a signal the program handles (the
// kernel blocks a handler's own signal while it runs, unless SA_NODEFER,
// and its sa_mask). The outer-frame search reads up to 64 KiB of stack:
// asked only of such threads, it costs nothing to the others, and a stale
// copy of a frame met by chance in the live stack matters only there.
bool might_run_a_handler(const ucontext_t* uc) {
  uint64_t blocked = 0;
  std::memcpy(&blocked, &uc->uc_sigmask, sizeof blocked);  // the kernel's first 64 signals
  return (blocked & g_request.handled_signals.load(std::memory_order_acquire)) != 0;
}

void futex_wait(std::atomic<uint32_t>* addr, uint32_t expected, long timeout_ns) {
  struct timespec ts{0, timeout_ns};
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(addr), FUTEX_WAIT_PRIVATE, expected, &ts,
          nullptr, 0);
}

void futex_wake_all(std::atomic<uint32_t>* addr) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(addr), FUTEX_WAKE_PRIVATE, INT32_MAX, nullptr,
          nullptr, 0);
}

void control_handler(int, siginfo_t* si, void* ucv) {
  int saved_errno = errno;
  uint64_t v = reinterpret_cast<uint64_t>(si->si_value.sival_ptr);
  uint32_t gen = static_cast<uint32_t>(v >> 32);
  size_t idx = static_cast<uint32_t>(v);
  if (si->si_code != SI_QUEUE || gen != g_request.generation.load(std::memory_order_acquire) ||
      idx >= g_request.n.load(std::memory_order_acquire)) {
    errno = saved_errno;
    return;  // a late signal of an earlier request
  }
  Slot& s = g_request.slots[idx];
  uint64_t expect = tag(gen, kSent);
  if (s.tid.load(std::memory_order_relaxed) != sys_gettid() ||
      !s.state.compare_exchange_strong(expect, tag(gen, kWriting), std::memory_order_acquire)) {
    errno = saved_errno;
    return;
  }
  auto* uc = static_cast<ucontext_t*>(ucv);
  s.pc = arch::context_pc(uc);
  // Exits first: then entries >= exits holds between the two reads too.
  s.exits = ftjit_trampoline_counts.exits;
  s.entries = ftjit_trampoline_counts.entries;
  s.counts_addr = &ftjit_trampoline_counts;
  s.own = ftjit_own_thread;
  if (static_cast<Kind>(g_request.kind.load(std::memory_order_acquire)) == Kind::kSnapshot) {
    s.outer_frame_hit = false;
    if (const auto* outer = g_request.snapshot_outer_pc.load(std::memory_order_acquire); outer != nullptr) {
      s.outer_frame_hit = might_run_a_handler(uc) && arch::outer_signal_frame_pc_matches(uc, *outer);
    }
  }
  if (static_cast<Kind>(g_request.kind.load(std::memory_order_acquire)) == Kind::kPark) {
    s.new_pc = 0;
    // A thread parked inside a signal handler (a profiler's, say) returns
    // later to the pc its signal frame saved, which may lie inside code
    // the request rewrites, and cannot be moved from here with certainty
    // (a stale copy of a frame looks the same): the initiator is told, and
    // tries again once the handler has returned.
    s.outer_frame_hit = false;
    if (const auto* fix = g_request.frame_fixup.load(std::memory_order_acquire);
        fix != nullptr && might_run_a_handler(uc)) {
      s.outer_frame_hit =
          arch::outer_signal_frame_pc_matches(uc, [fix](uint64_t pc) { return (*fix)(pc) != 0; });
    }
    s.state.store(tag(gen, kParked), std::memory_order_release);
    while (g_request.release.load(std::memory_order_acquire) == 0) {
      futex_wait(&g_request.release, 0, 50 * 1000 * 1000);
    }
    if (s.new_pc != 0) arch::set_context_pc(uc, s.new_pc);
    if (ResumeHook hook = g_request.resume_hook.load(std::memory_order_acquire); hook != nullptr) {
      if (!hook(uc)) g_request.hook_failures.fetch_add(1, std::memory_order_relaxed);
    }
    s.state.store(tag(gen, kResumed), std::memory_order_release);
  } else {
    s.state.store(tag(gen, kDone), std::memory_order_release);
  }
  errno = saved_errno;
}

// ---------------------------------------------------------------------------
// Initiator side
// ---------------------------------------------------------------------------

// Lists the threads of this process into `out` without allocating (a parked
// thread may hold the allocator's lock). Returns the count, or -1.
long list_threads(pid_t* out, size_t cap) {
  int fd = static_cast<int>(syscall(SYS_openat, AT_FDCWD, "/proc/self/task",
                                    O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (fd < 0) return -1;
  alignas(8) char buf[4096];
  size_t n = 0;
  for (;;) {
    long got = syscall(SYS_getdents64, fd, buf, sizeof buf);
    if (got <= 0) break;
    for (long off = 0; off < got;) {
      auto* d = reinterpret_cast<struct dirent64*>(buf + off);
      off += d->d_reclen;
      if (d->d_name[0] < '0' || d->d_name[0] > '9') continue;
      if (n == cap) {
        close(fd);
        return -1;
      }
      out[n++] = static_cast<pid_t>(strtol(d->d_name, nullptr, 10));
    }
  }
  close(fd);
  return static_cast<long>(n);
}

// Reads a small /proc file into `buf` without allocating. Returns its
// length, or -1.
long read_small_file(const char* path, char* buf, size_t cap) {
  int fd = static_cast<int>(syscall(SYS_openat, AT_FDCWD, path, O_RDONLY | O_CLOEXEC));
  if (fd < 0) return -1;
  long n = read(fd, buf, cap - 1);
  close(fd);
  if (n < 0) return -1;
  buf[n] = 0;
  return n;
}

void append_number(char* out, long v) {
  char digits[24];
  int n = 0;
  do {
    digits[n++] = static_cast<char>('0' + v % 10);
    v /= 10;
  } while (v > 0);
  while (*out) ++out;
  while (n > 0) *out++ = digits[--n];
  *out = 0;
}

enum class BlockedState { kAnswers, kBlockedInKernel, kBlockedRunning };

// Whether thread `tid` blocks the control signal (a sigwait() thread, a
// sanitizer's own background thread), and if so whether it is inside the
// kernel. Reads /proc/self/task/TID/{status,stat} without allocating.
BlockedState signal_blocked_state(pid_t tid) {
  char path[64] = "/proc/self/task/";
  append_number(path, tid);
  size_t base = strlen(path);
  char buf[4096];
  strcpy(path + base, "/status");
  if (read_small_file(path, buf, sizeof buf) < 0) return BlockedState::kAnswers;
  const char* blk = strstr(buf, "SigBlk:");
  if (blk == nullptr) return BlockedState::kAnswers;
  uint64_t mask = strtoull(blk + 7, nullptr, 16);
  if (!(mask & (uint64_t{1} << (g_signal - 1)))) return BlockedState::kAnswers;
  strcpy(path + base, "/stat");
  if (read_small_file(path, buf, sizeof buf) < 0) return BlockedState::kBlockedInKernel;
  const char* close_paren = strrchr(buf, ')');  // the name may hold spaces
  char state = close_paren && close_paren[1] && close_paren[2] ? close_paren[2] : 'R';
  return state == 'R' ? BlockedState::kBlockedRunning : BlockedState::kBlockedInKernel;
}

bool send_control(pid_t tid, uint32_t gen, size_t idx) {
  siginfo_t si;
  std::memset(&si, 0, sizeof si);
  si.si_signo = g_signal;
  si.si_code = SI_QUEUE;
  si.si_pid = getpid();
  si.si_uid = getuid();
  si.si_value.sival_ptr = reinterpret_cast<void*>((uint64_t{gen} << 32) | idx);
  return syscall(SYS_rt_tgsigqueueinfo, getpid(), tid, g_signal, &si) == 0;
}

void sleep_us(long us) {
  struct timespec ts{0, us * 1000};
  nanosleep(&ts, nullptr);
}

void await_resumed();

// Starts a request of `kind`: signals every other thread, re-listing until
// no new thread appears, and waits for each to reach `want` (or exit).
// Caller holds g_initiator_mutex. Returns false on timeout/overflow.
// On failure it sets *why to a static string and *who to the thread at
// fault: no allocation while threads may be parked.
bool run_request(Kind kind, SlotState want, const char** why, pid_t* who) {
  await_resumed();
  uint32_t gen = g_request.generation.load(std::memory_order_relaxed) + 1;
  g_request.n.store(0, std::memory_order_relaxed);
  g_request.kind.store(static_cast<int>(kind), std::memory_order_relaxed);
  g_request.release.store(0, std::memory_order_relaxed);
  g_request.generation.store(gen, std::memory_order_release);

  pid_t self = sys_gettid();
  pid_t tids[512];
  size_t n = 0;
  for (int round = 0;; ++round) {
    long listed = list_threads(tids, sizeof tids / sizeof tids[0]);
    if (listed < 0) {
      *why = "cannot list /proc/self/task (or more than 512 threads)";
      *who = 0;
      return false;
    }
    bool added = false;
    for (long i = 0; i < listed; ++i) {
      pid_t t = tids[i];
      if (t == self) continue;
      bool known = false;
      for (size_t j = 0; j < n && !known; ++j) known = g_request.slots[j].tid.load() == t;
      if (known) continue;
      if (n == kMaxThreads) {
        *why = "too many threads";
        *who = 0;
        return false;
      }
      Slot& s = g_request.slots[n];
      // Claim the slot for this generation once no late handler writes it.
      for (uint64_t st = s.state.load(std::memory_order_acquire);;) {
        if ((st & 0xff) == kWriting) {
          st = s.state.load(std::memory_order_acquire);
          continue;
        }
        if (s.state.compare_exchange_weak(st, tag(gen, kSent), std::memory_order_acq_rel)) break;
      }
      s.tid.store(t, std::memory_order_relaxed);
      s.pc = 0;
      s.entries = 0;
      s.exits = 0;
      s.counts_addr = nullptr;
      s.new_pc = 0;
      s.gone = false;
      s.deferred = false;
      g_request.n.store(n + 1, std::memory_order_release);
      switch (signal_blocked_state(t)) {
        case BlockedState::kAnswers:
          if (!send_control(t, gen, n)) s.gone = true;  // exited meanwhile
          break;
        case BlockedState::kBlockedInKernel:
          // It cannot run user code before it returns from the kernel, and
          // cannot take our signal: count it as out of the way (see the
          // header for what this means for callbacks).
          s.gone = true;
          break;
        case BlockedState::kBlockedRunning:
          // Often for a moment only (inside a signal handler, or a
          // sanitizer's critical section): look again while waiting.
          s.deferred = true;
          break;
      }
      ++n;
      added = true;
    }
    if (!added && round > 0) break;
    // Wait for every signalled thread to respond before listing again: a
    // thread that is parked cannot create another.
    int waited_ms = 0;
    for (size_t j = 0; j < n; ++j) {
      Slot& s = g_request.slots[j];
      int spins = 0;
      while (!s.gone && s.state.load(std::memory_order_acquire) != tag(gen, want)) {
        if (++spins < 200) continue;
        sleep_us(100);
        if (s.deferred) {
          switch (signal_blocked_state(s.tid.load())) {
            case BlockedState::kAnswers:
              s.deferred = false;
              if (!send_control(s.tid.load(), gen, j)) s.gone = true;
              break;
            case BlockedState::kBlockedInKernel:
              s.gone = true;
              break;
            case BlockedState::kBlockedRunning:
              break;
          }
        }
        if (spins % 10 == 0) {
          waited_ms++;
          if (!thread_alive(s.tid.load())) s.gone = true;
          if (waited_ms > kWaitTimeoutMs) {
            *why = s.deferred ? "blocks the control signal while running"
                              : "did not answer the control signal (signal blocked?)";
            *who = s.tid.load();
            return false;
          }
        }
      }
    }
  }
  return true;
}

// Set by release_parked, cleared by await_resumed; under g_initiator_mutex.
bool g_resume_pending = false;

// Lets the parked threads go, without waiting for them to leave the
// handler: on a busy machine the last of them may wait a scheduler slice
// or two for a CPU (7 ms of a 7.5 ms stop-the-world with the demo's five
// busy threads on two cores), and nothing but the next request needs them
// gone. So the next request waits first (await_resumed), as does
// uninstall_thread_control, before the handler's code may go.
void release_parked() {
  g_request.release.store(1, std::memory_order_release);
  futex_wake_all(&g_request.release);
  g_resume_pending = true;
}

// Waits until every thread the last request parked has left the handler
// (it reads its slot and `release` until then: a new request must not
// reset them under it), then retires that request's generation. Caller
// holds g_initiator_mutex.
void await_resumed() {
  if (!g_resume_pending) return;
  g_resume_pending = false;
  size_t n = g_request.n.load();
  for (size_t j = 0; j < n; ++j) {
    Slot& s = g_request.slots[j];
    const uint32_t gen = g_request.generation.load(std::memory_order_relaxed);
    if (s.gone || s.state.load(std::memory_order_acquire) != tag(gen, kParked)) continue;
    while (s.state.load(std::memory_order_acquire) == tag(gen, kParked)) {
      if (!thread_alive(s.tid.load())) break;
      sleep_us(20);
    }
  }
  // Invalidate the generation so that a late handler ignores everything.
  g_request.generation.fetch_add(1, std::memory_order_release);
}

}  // namespace

int64_t trampoline_counts_tls_offset() {
  return static_cast<int64_t>(reinterpret_cast<uint64_t>(&ftjit_trampoline_counts.entries) -
                              arch::thread_pointer());
}

struct sigaction g_previous_control_action;

void uninstall_thread_control() {
  if (g_signal == 0) return;
  {
    std::lock_guard<std::mutex> lock(g_initiator_mutex);
    await_resumed();
  }
  sigaction(g_signal, &g_previous_control_action, nullptr);
}

Status install_thread_control() {
  std::call_once(g_install_once, [] {
    int sig = SIGRTMAX - 3;
    if (const char* env = getenv("FTJIT_SIGNAL")) sig = atoi(env);
    if (sig < SIGRTMIN || sig > SIGRTMAX) {
      g_install_status = make_error(FTJIT_E_INVALID_ARGUMENT,
                                    "FTJIT_SIGNAL must be a real-time signal number");
      return;
    }
    struct sigaction sa;
    std::memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = control_handler;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigfillset(&sa.sa_mask);
    if (sigaction(sig, &sa, &g_previous_control_action) != 0) {
      g_install_status = make_error(FTJIT_E_SYSTEM, std::string("sigaction: ") + strerror(errno));
      return;
    }
    g_signal = sig;
  });
  return g_install_status;
}

static Error request_failed(const char* what, const char* why, pid_t who) {
  std::string msg = std::string(what) + " failed: ";
  if (who != 0) msg += "thread " + std::to_string(who) + " ";
  return make_error(FTJIT_E_SYSTEM, msg + why);
}

namespace {
std::atomic<uint64_t> g_control_micros{0};
std::atomic<uint64_t> g_control_requests{0};

// Adds the lifetime of one request to g_control_micros.
class RequestTimer {
 public:
  RequestTimer() {
    clock_gettime(CLOCK_MONOTONIC, &start_);
    g_control_requests.fetch_add(1, std::memory_order_relaxed);
  }
  ~RequestTimer() {
    timespec end;
    clock_gettime(CLOCK_MONOTONIC, &end);
    const int64_t ns = (end.tv_sec - start_.tv_sec) * 1'000'000'000LL + (end.tv_nsec - start_.tv_nsec);
    g_control_micros.fetch_add(static_cast<uint64_t>(ns / 1000), std::memory_order_relaxed);
  }

 private:
  timespec start_;
};
}  // namespace

void mark_own_thread() {
  if (ftjit_own_thread) return;
  // The entry first: a snapshot that sees the flag sees the entry too.
  ftjit_trampoline_counts.entries += 1;
  std::atomic_signal_fence(std::memory_order_seq_cst);
  ftjit_own_thread = true;
}

OwnThreadScope::OwnThreadScope() {
  if (ftjit_own_thread) return;
  mark_own_thread();
  marked_ = true;
}

OwnThreadScope::~OwnThreadScope() {
  if (!marked_) return;
  // The flag first: a snapshot that sees it sees the entry too.
  ftjit_own_thread = false;
  std::atomic_signal_fence(std::memory_order_seq_cst);
  ftjit_trampoline_counts.entries -= 1;
}

uint64_t thread_control_micros() { return g_control_micros.load(std::memory_order_relaxed); }
uint64_t thread_control_requests() { return g_control_requests.load(std::memory_order_relaxed); }

namespace {

// One try of stop_the_world: false (nothing run) when a parked thread's
// signal frame saved a pc that `fixup` would move.
Result<bool> stop_the_world_once(const std::function<uint64_t(uint64_t pc)>& fixup,
                                 const std::function<void()>& body, bool check_frames) {
  RequestTimer timer;
  FTJIT_TRY(install_thread_control());
  std::lock_guard<std::mutex> lock(g_initiator_mutex);
  if (check_frames) g_request.handled_signals.store(signals_with_handlers(), std::memory_order_release);
  g_request.frame_fixup.store(check_frames ? &fixup : nullptr, std::memory_order_release);
  const char* why = "";
  pid_t who = 0;
  const bool parked = run_request(Kind::kPark, kParked, &why, &who);
  g_request.frame_fixup.store(nullptr, std::memory_order_release);
  if (!parked) {
    release_parked();
    return request_failed("stop-the-world", why, who);
  }
  size_t n = g_request.n.load();
  const uint32_t gen = g_request.generation.load(std::memory_order_relaxed);
  auto parked_slot = [&](size_t j) -> Slot* {
    Slot& s = g_request.slots[j];
    return !s.gone && s.state.load(std::memory_order_acquire) == tag(gen, kParked) ? &s : nullptr;
  };
  for (size_t j = 0; j < n; ++j) {
    if (Slot* s = parked_slot(j); s != nullptr && s->outer_frame_hit) {
      release_parked();
      return false;
    }
  }
  for (size_t j = 0; j < n; ++j) {
    if (Slot* s = parked_slot(j); s != nullptr) s->new_pc = fixup(s->pc);
  }
  body();
  release_parked();
  return true;
}

}  // namespace

Status stop_the_world(const std::function<uint64_t(uint64_t pc)>& fixup,
                      const std::function<void()>& body, bool strict) {
  // A signal handler ends in microseconds; one that does not (or a stale
  // frame that only looks like one) must not stop patching for ever: after
  // about a second the rewrite goes ahead, as it did before this check.
  constexpr int kTries = 500;
  for (int attempt = 0; attempt < kTries; ++attempt) {
    auto ran = stop_the_world_once(fixup, body, true);
    if (!ran) return ran.take_error();
    if (ran.value()) return {};
    sleep_us(2000);
  }
  if (strict) {
    return make_error(FTJIT_E_UNSUPPORTED,
                      "a thread's signal handler has stood for a second on top of a frame interrupted inside "
                      "the bytes to be rewritten");
  }
  auto ran = stop_the_world_once(fixup, body, false);
  if (!ran) return ran.take_error();
  return {};
}

Result<bool> stop_the_world_if(const std::function<bool(const ThreadSnapshot&)>& may_proceed,
                               const std::function<void()>& body, ResumeHook on_resume,
                               uint32_t* hook_failures) {
  RequestTimer timer;
  FTJIT_TRY(install_thread_control());
  std::lock_guard<std::mutex> lock(g_initiator_mutex);
  const char* why = "";
  pid_t who = 0;
  if (!run_request(Kind::kPark, kParked, &why, &who)) {
    release_parked();
    return request_failed("stop-the-world", why, who);
  }
  size_t n = g_request.n.load();
  const uint32_t gen = g_request.generation.load(std::memory_order_relaxed);
  bool proceed = true;
  for (size_t j = 0; j < n && proceed; ++j) {
    Slot& s = g_request.slots[j];
    if (s.gone || s.state.load(std::memory_order_acquire) != tag(gen, kParked)) continue;
    ThreadSnapshot t;
    t.tid = s.tid.load();
    t.pc = s.pc;
    t.entries = s.entries;
    t.exits = s.exits;
    t.counts_addr = s.counts_addr;
    t.own = s.own;
    t.responded = true;
    proceed = may_proceed(t);
  }
  if (proceed) {
    body();
    g_request.hook_failures.store(0, std::memory_order_relaxed);
    g_request.resume_hook.store(on_resume, std::memory_order_release);
  }
  // Every parked thread has resumed (run its hook) when this returns.
  release_parked();
  await_resumed();
  g_request.resume_hook.store(nullptr, std::memory_order_release);
  if (hook_failures != nullptr) *hook_failures = g_request.hook_failures.load(std::memory_order_relaxed);
  return proceed;
}

Result<std::vector<ThreadSnapshot>> snapshot_threads(const std::function<bool(uint64_t pc)>* outer_pc) {
  RequestTimer timer;
  FTJIT_TRY(install_thread_control());
  std::lock_guard<std::mutex> lock(g_initiator_mutex);
  const char* why = "";
  pid_t who = 0;
  if (outer_pc != nullptr) g_request.handled_signals.store(signals_with_handlers(), std::memory_order_release);
  g_request.snapshot_outer_pc.store(outer_pc, std::memory_order_release);
  const bool asked = run_request(Kind::kSnapshot, kDone, &why, &who);
  g_request.snapshot_outer_pc.store(nullptr, std::memory_order_release);
  if (!asked) {
    g_request.generation.fetch_add(1);
    return request_failed("thread snapshot", why, who);
  }
  size_t n = g_request.n.load();
  const uint32_t gen = g_request.generation.load(std::memory_order_relaxed);
  std::vector<ThreadSnapshot> out;
  out.reserve(n);
  for (size_t j = 0; j < n; ++j) {
    Slot& s = g_request.slots[j];
    ThreadSnapshot t;
    t.tid = s.tid.load();
    t.responded = !s.gone && s.state.load(std::memory_order_acquire) == tag(gen, kDone);
    if (t.responded) {
      t.pc = s.pc;
      t.entries = s.entries;
      t.exits = s.exits;
      t.counts_addr = s.counts_addr;
      t.own = s.own;
      t.outer_hit = outer_pc != nullptr && s.outer_frame_hit;
    }
    out.push_back(t);
  }
  g_request.generation.fetch_add(1);
  return out;
}

Status signal_sync_all_threads() {
  RequestTimer timer;
  FTJIT_TRY(install_thread_control());
  std::lock_guard<std::mutex> lock(g_initiator_mutex);
  const char* why = "";
  pid_t who = 0;
  bool ok = run_request(Kind::kSync, kDone, &why, &who);
  g_request.generation.fetch_add(1);
  if (!ok) return request_failed("signal sync", why, who);
  return {};
}

namespace {

// process_vm_readv is missing where qemu-user runs the process (ENOSYS) or
// where a seccomp filter refuses it: the word then goes through a pipe,
// which the kernel (or qemu, checking the guest address) also copies
// without faulting (EFAULT for memory that is gone).
std::atomic<bool> g_vm_readv_missing{false};

bool read_word_through_pipe(const uint64_t* addr, uint64_t* out) {
  int p[2];
  if (pipe2(p, O_CLOEXEC) != 0) return false;
  bool ok = write(p[1], addr, sizeof *out) == static_cast<ssize_t>(sizeof *out) &&
            read(p[0], out, sizeof *out) == static_cast<ssize_t>(sizeof *out);
  close(p[0]);
  close(p[1]);
  return ok;
}

}  // namespace

bool read_remote_word(const uint64_t* addr, uint64_t* out) {
  if (!g_vm_readv_missing.load(std::memory_order_relaxed)) {
    struct iovec local{out, sizeof *out};
    struct iovec remote{const_cast<uint64_t*>(addr), sizeof *out};
    if (process_vm_readv(getpid(), &local, 1, &remote, 1, 0) == sizeof *out) return true;
    // EFAULT (the thread and its memory are gone) is an answer; a call that
    // cannot work at all is not, or every grace period would end at once.
    if (errno != ENOSYS && errno != EPERM) return false;
    g_vm_readv_missing.store(true, std::memory_order_relaxed);
  }
  return read_word_through_pipe(addr, out);
}

bool thread_alive(pid_t tid) {
  return syscall(SYS_tgkill, getpid(), tid, 0) == 0 || errno != ESRCH;
}

}  // namespace ftjit
