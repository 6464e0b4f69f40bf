// SPDX-License-Identifier: MIT
// A program that does at once what real programs do to a tracer, for the
// CLI-level tests that attach, detach and unload ftjit around it:
//   - two threads throw C++ exceptions through several traced frames and
//     catch them;
//   - one thread dlopen()s the hazard library, calls into it, dlclose()s it;
//   - a 2 kHz timer raising SIGPROF, whose handler runs traced code;
//   - one thread forks children that run traced code and _exit(0); the
//     parent checks every child's status;
//   - one thread longjmp()s out of traced frames.
// Every function here is patchable (the whole file is built with
// -fpatchable-function-entry); no ftjit inside.
//
// Usage: ftjit_hazard_target [--duration SECONDS] [--lib PATH] [--pace US]
//   Runs until stdin reaches end-of-file, or for SECONDS when given (stdin
//   is then ignored). PATH: the library to dlopen (default: the one built
//   with it, compiled in). US: each thread sleeps that long after each
//   round of its hazard (default 0: none), so that on an emulated CPU
//   (the arm64 kernel leg, under TCG) the hazards leave the tracer some.
// Output (stdout, deterministic): "pid <pid> ready" once every hazard has
// run at least once, then at the end "hazard ok" and exit status 0 if every
// invariant held (caught == thrown, every value right, every child exited
// 0, every longjmp landed, the timer's handler ran), else one
// "hazard FAILED: ..." line per broken invariant and exit status 1. The
// counts go to stderr ("hazard counts: ...").
#include <dlfcn.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <sys/time.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {

std::atomic<bool> g_stop{false};

// What every hazard counts, and what went wrong.
std::atomic<long> g_thrown{0}, g_caught{0}, g_wrong_catch{0};
std::atomic<long> g_loads{0}, g_load_failures{0}, g_lib_wrong{0};
std::atomic<long> g_signals{0}, g_signal_wrong{0};
std::atomic<long> g_children{0}, g_bad_children{0}, g_fork_failures{0};
std::atomic<long> g_jumps{0}, g_landings{0}, g_jump_wrong{0};
std::atomic<long> g_work_wrong{0};

// ---------------------------------------------------------------------------
// Traced code (noinline: each is a frame of its own; no tail calls: each
// does work after its call, so the frames really nest)
// ---------------------------------------------------------------------------

extern "C" {

__attribute__((noinline)) int hazard_leaf(int x) { return x * 2 + 1; }

__attribute__((noinline)) int hazard_middle(int x) {
  int r = hazard_leaf(x + 1);
  return r + 1;
}

__attribute__((noinline)) int hazard_work(int x) {
  int r = hazard_middle(x);
  return r - 2;  // = 2x + 2
}

}  // extern "C"

int expected_work(int x) { return 2 * x + 2; }

struct HazardError {
  int value;
};

__attribute__((noinline)) int hazard_throw_3(int v) {
  if (v >= 0) {
    g_thrown.fetch_add(1, std::memory_order_relaxed);
    throw HazardError{v};
  }
  return v;
}

__attribute__((noinline)) int hazard_throw_2(int v) {
  int r = hazard_throw_3(v + 1);
  return r + 1;
}

__attribute__((noinline)) int hazard_throw_1(int v) {
  int r = hazard_throw_2(v + 1);
  return r + hazard_leaf(v);
}

jmp_buf* thread_jump_buffer() {
  static thread_local jmp_buf buf;
  return &buf;
}

__attribute__((noinline)) int hazard_jump_2(int v) {
  g_jumps.fetch_add(1, std::memory_order_relaxed);
  longjmp(*thread_jump_buffer(), v);
}

__attribute__((noinline)) int hazard_jump_1(int v) {
  int r = hazard_jump_2(v + 1);
  return r + hazard_leaf(v);
}

// ---------------------------------------------------------------------------
// The hazards
// ---------------------------------------------------------------------------

// Each thread says once that it has run its hazard once, and then rests
// --pace microseconds after each round.
std::atomic<int> g_started{0};
long g_pace_us = 0;
void started(bool* once) {
  if (!*once) {
    *once = true;
    g_started.fetch_add(1, std::memory_order_release);
  }
  if (g_pace_us > 0) std::this_thread::sleep_for(std::chrono::microseconds(g_pace_us));
}

void thrower(int id) {
  bool once = false;
  for (int i = 0; !g_stop.load(std::memory_order_relaxed); ++i) {
    const int v = (i + id) & 0xffff;
    try {
      hazard_throw_1(v);
      g_wrong_catch.fetch_add(1);  // it always throws
    } catch (const HazardError& e) {
      g_caught.fetch_add(1, std::memory_order_relaxed);
      if (e.value != v + 2) g_wrong_catch.fetch_add(1);
    }
    if (hazard_work(v) != expected_work(v)) g_work_wrong.fetch_add(1);
    started(&once);
  }
}

void loader(const char* lib) {
  bool once = false;
  using AddFn = int (*)(int, int);
  for (int i = 0; !g_stop.load(std::memory_order_relaxed); ++i) {
    void* h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
    if (h == nullptr) {
      if (g_load_failures.fetch_add(1) == 0) std::fprintf(stderr, "hazard: dlopen: %s\n", dlerror());
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      continue;
    }
    auto add = reinterpret_cast<AddFn>(dlsym(h, "hazard_lib_add"));
    const int a = i & 0xff;
    if (add == nullptr || add(a, 5) != a * 3 + 1 + 5 - 1) g_lib_wrong.fetch_add(1);
    if (dlclose(h) != 0) g_load_failures.fetch_add(1);
    g_loads.fetch_add(1, std::memory_order_relaxed);
    started(&once);
  }
}

// The SIGPROF handler: traced code, async-signal-safe.
void on_sigprof(int) {
  const int saved_errno = errno;
  static std::atomic<int> n{0};
  const int v = n.fetch_add(1, std::memory_order_relaxed) & 0xff;
  if (hazard_work(v) != expected_work(v)) g_signal_wrong.fetch_add(1, std::memory_order_relaxed);
  g_signals.fetch_add(1, std::memory_order_relaxed);
  errno = saved_errno;
}

// A 2 kHz timer on the monotonic clock (a high-resolution timer: an
// ITIMER_PROF would fire at most once a scheduler tick) raising SIGPROF in
// the process, whichever thread runs.
timer_t g_timer;

bool start_timer() {
  struct sigaction sa;
  std::memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_sigprof;
  sa.sa_flags = SA_RESTART;
  sigemptyset(&sa.sa_mask);
  if (sigaction(SIGPROF, &sa, nullptr) != 0) return false;
  sigevent ev{};
  ev.sigev_notify = SIGEV_SIGNAL;
  ev.sigev_signo = SIGPROF;
  if (timer_create(CLOCK_MONOTONIC, &ev, &g_timer) != 0) return false;
  itimerspec t{};
  t.it_interval.tv_nsec = 500 * 1000;
  t.it_value.tv_nsec = 500 * 1000;
  return timer_settime(g_timer, 0, &t, nullptr) == 0;
}

void stop_timer() { timer_delete(g_timer); }

void forker() {
  bool once = false;
  for (int i = 0; !g_stop.load(std::memory_order_relaxed); ++i) {
    pid_t pid = fork();
    if (pid < 0) {
      g_fork_failures.fetch_add(1);
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      continue;
    }
    if (pid == 0) {
      int code = 0;
      for (int v = 0; v < 64; ++v) {
        if (hazard_work(v + i) != expected_work(v + i)) code = 1;
      }
      _exit(code);
    }
    int status = 0;
    pid_t r;
    do {
      r = waitpid(pid, &status, 0);
    } while (r < 0 && errno == EINTR);
    if (r != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      if (g_bad_children.fetch_add(1) == 0) {
        if (r == pid && WIFSIGNALED(status)) {
          std::fprintf(stderr, "hazard: child %d killed by signal %d\n", pid, WTERMSIG(status));
        } else {
          std::fprintf(stderr, "hazard: child %d: status %d\n", pid, status);
        }
      }
    }
    g_children.fetch_add(1, std::memory_order_relaxed);
    started(&once);
    // A few hundred children a second at most: the point is forking at
    // every moment of a tracer's work, not filling the process table.
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

// One setjmp, one longjmp out of two traced frames; the value it landed with.
__attribute__((noinline)) int jump_once(int v) {
  volatile int landed_with = 0;
  const int r = setjmp(*thread_jump_buffer());
  if (r != 0) {
    landed_with = r;
  } else {
    hazard_jump_1(v);
    g_jump_wrong.fetch_add(1);  // it never returns
  }
  g_landings.fetch_add(1, std::memory_order_relaxed);
  return landed_with;
}

void jumper() {
  bool once = false;
  for (int i = 0; !g_stop.load(std::memory_order_relaxed); ++i) {
    const int v = (i & 0xff) + 1;
    if (jump_once(v) != v + 1) g_jump_wrong.fetch_add(1);
    if (hazard_work(v) != expected_work(v)) g_work_wrong.fetch_add(1);
    started(&once);
  }
}

// Waits until stdin ends, or for `seconds` when positive.
void wait_for_end(double seconds) {
  if (seconds > 0) {
    const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    while (std::chrono::steady_clock::now() < end) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return;
  }
  char buf[256];
  for (;;) {
    ssize_t n = read(0, buf, sizeof buf);
    if (n == 0) return;
    if (n < 0 && errno != EINTR) return;
  }
}

}  // namespace

int main(int argc, char** argv) {
  double duration = 0;
  const char* lib = FTJIT_HAZARD_LIB;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--duration") == 0 && i + 1 < argc) {
      char* end = nullptr;
      duration = std::strtod(argv[++i], &end);
      if (end == argv[i] || *end != '\0' || !(duration > 0) || duration > 86400) {
        std::fprintf(stderr, "hazard_target: --duration takes seconds, more than 0 and at most 86400\n");
        return 2;
      }
    } else if (std::strcmp(argv[i], "--lib") == 0 && i + 1 < argc) {
      lib = argv[++i];
    } else if (std::strcmp(argv[i], "--pace") == 0 && i + 1 < argc) {
      char* end = nullptr;
      g_pace_us = std::strtol(argv[++i], &end, 10);
      if (end == argv[i] || *end != '\0' || g_pace_us < 0 || g_pace_us > 1000000) {
        std::fprintf(stderr, "hazard_target: --pace takes microseconds, 0 to 1000000\n");
        return 2;
      }
    } else {
      std::fprintf(stderr, "usage: %s [--duration SECONDS] [--lib PATH] [--pace US]\n", argv[0]);
      return 2;
    }
  }
  // One library load before anything runs, so that a missing library is a
  // clear error rather than a hazard.
  if (void* h = dlopen(lib, RTLD_NOW | RTLD_LOCAL)) {
    dlclose(h);
  } else {
    std::fprintf(stderr, "hazard_target: cannot load %s: %s\n", lib, dlerror());
    return 2;
  }

  std::vector<std::thread> threads;
  threads.emplace_back(thrower, 0);
  threads.emplace_back(thrower, 1);
  threads.emplace_back(loader, lib);
  threads.emplace_back(forker);
  threads.emplace_back(jumper);
  const int n_started = static_cast<int>(threads.size());
  const bool timer = start_timer();
  while (g_started.load(std::memory_order_acquire) < n_started || (timer && g_signals.load() == 0)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  std::printf("pid %d ready\n", static_cast<int>(getpid()));
  std::fflush(stdout);

  wait_for_end(duration);

  g_stop.store(true);
  stop_timer();
  for (auto& t : threads) t.join();

  std::fprintf(stderr,
               "hazard counts: thrown=%ld caught=%ld loads=%ld signals=%ld children=%ld "
               "jumps=%ld landings=%ld\n",
               g_thrown.load(), g_caught.load(), g_loads.load(), g_signals.load(),
               g_children.load(), g_jumps.load(), g_landings.load());
  std::vector<std::string> broken;
  auto check = [&](bool ok, const char* what) {
    if (!ok) broken.push_back(what);
  };
  check(timer, "the SIGPROF timer could not be started");
  check(g_thrown.load() == g_caught.load() && g_thrown.load() > 0, "caught != thrown");
  check(g_wrong_catch.load() == 0, "an exception arrived wrong or not at all");
  check(g_loads.load() > 0 && g_load_failures.load() == 0, "dlopen/dlclose failed");
  check(g_lib_wrong.load() == 0, "the library computed a wrong value");
  check(g_signals.load() > 0 && g_signal_wrong.load() == 0, "the signal handler's traced code went wrong");
  check(g_children.load() > 0 && g_bad_children.load() == 0 && g_fork_failures.load() == 0,
        "a child did not exit 0 (or fork failed)");
  check(g_jumps.load() == g_landings.load() && g_jumps.load() > 0 && g_jump_wrong.load() == 0,
        "a longjmp did not land where it should");
  check(g_work_wrong.load() == 0, "traced code computed a wrong value");
  if (broken.empty()) {
    std::printf("hazard ok\n");
    return 0;
  }
  for (const std::string& b : broken) std::printf("hazard FAILED: %s\n", b.c_str());
  return 1;
}
