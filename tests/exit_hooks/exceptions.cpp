// SPDX-License-Identifier: MIT
// C++ exceptions through traced frames. With exit hooks the return
// addresses of those frames point at the exit trampoline, which the
// unwinder cannot walk through; every way a C++ program leaves frames by
// exception must still unwind correctly, run the right handlers and
// destructors, and give each traced frame exactly one exit.
#include <pthread.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <stdexcept>
#include <thread>
#include <vector>

#include "tests/exit_hooks/selftrace.h"
#include "tests/exit_hooks/workload.h"

namespace {

struct Boom {
  unsigned v;
};

// A running hash of what destructors and handlers did, in order: proves
// they ran, and in the same order traced and untraced.
thread_local unsigned t_log = 17;

TRACED unsigned note(unsigned v) {
  t_log = t_log * 31u + v;
  return t_log;
}

TRACED void throw_boom(unsigned v) { throw Boom{v}; }
TRACED void throw_logic(unsigned v) { throw std::logic_error(v % 2 ? "odd logic" : "even"); }

TRACED unsigned chain3(unsigned v) {
  unsigned r = v * 3u;
  if (v != 0xffffffffu) throw_boom(v);
  return r;
}
TRACED unsigned chain2(unsigned v) {
  unsigned r = chain3(v + 1u);
  EH_OPAQUE(r);
  return r + 1u;
}
TRACED unsigned chain1(unsigned v) {
  unsigned r = chain2(v + 1u);
  EH_OPAQUE(r);
  return r + 1u;
}

// Destructors that call traced code while the exception passes.
struct Guard {
  unsigned id;
  TRACED ~Guard() { note(id); }
};
TRACED unsigned guarded3(unsigned v) {
  Guard g{3};
  throw_boom(v);
  return note(v);
}
TRACED unsigned guarded2(unsigned v) {
  Guard g{2};
  unsigned r = guarded3(v);
  EH_OPAQUE(r);
  return r + note(20);
}
TRACED unsigned guarded1(unsigned v) {
  Guard g{1};
  unsigned r = guarded2(v);
  EH_OPAQUE(r);
  return r + 1u;
}

// 1: thrown three traced frames deep, caught by an untraced caller.
UNTRACED unsigned scenario_plain(unsigned n) {
  unsigned sum = 0;
  for (unsigned i = 0; i < n; ++i) {
    try {
      sum += chain1(i);
    } catch (const Boom& b) {
      sum += b.v;
    }
  }
  return sum;
}

// 2: destructors calling traced functions during unwinding; caught in a
// traced frame that then returns normally.
TRACED unsigned catch_guarded(unsigned v) {
  try {
    return guarded1(v);
  } catch (const Boom& b) {
    return b.v + note(99);
  }
}
TRACED unsigned scenario_destructors(unsigned n) {
  unsigned sum = 0;
  for (unsigned i = 0; i < n; ++i) sum += catch_guarded(i);
  return sum + t_log;
}

// 3: `throw;` from a catch block of a traced frame.
TRACED unsigned rethrower(unsigned v) {
  try {
    return chain1(v);
  } catch (const Boom& b) {
    note(b.v);
    throw;
  }
}
TRACED unsigned rethrow_outer(unsigned v) {
  try {
    unsigned r = rethrower(v);
    EH_OPAQUE(r);
    return r;
  } catch (const Boom& b) {
    return b.v * 2u;
  }
}
TRACED unsigned scenario_rethrow(unsigned n) {
  unsigned sum = 0;
  for (unsigned i = 0; i < n; ++i) sum += rethrow_outer(i);
  return sum + t_log;
}

// 4: std::current_exception captured in one traced chain, rethrown
// (twice) from another with std::rethrow_exception.
TRACED std::exception_ptr capture(unsigned v) {
  try {
    chain1(v);
  } catch (...) {
    return std::current_exception();
  }
  return nullptr;
}
TRACED void rethrow_it(std::exception_ptr p) { std::rethrow_exception(p); }
TRACED unsigned rethrow_deep(std::exception_ptr p, unsigned d) {
  if (d == 0) rethrow_it(p);
  unsigned r = rethrow_deep(p, d - 1);
  EH_OPAQUE(r);
  return r + 1u;
}
TRACED unsigned scenario_exception_ptr(unsigned n) {
  unsigned sum = 0;
  for (unsigned i = 0; i < n; ++i) {
    std::exception_ptr p = capture(i);
    for (unsigned k = 0; k < 2; ++k) {
      try {
        sum += rethrow_deep(p, i % 5);
      } catch (const Boom& b) {
        sum += b.v + k;
      }
    }
  }
  return sum;
}

// 5: nested try blocks in one traced frame: the inner handler does not
// match, the outer does; then a throw from a catch block caught by the
// frame's outer try.
TRACED unsigned nested(unsigned v) {
  unsigned r = 0;
  try {
    try {
      chain1(v);
    } catch (const std::logic_error&) {
      r = 1000000u;
    }
  } catch (const Boom& b) {
    r = b.v;
  }
  try {
    try {
      throw_logic(v);
    } catch (const std::logic_error& e) {
      r += static_cast<unsigned>(std::strlen(e.what()));
      throw Boom{r};
    }
  } catch (const Boom& b) {
    r += b.v;
  }
  return r;
}
TRACED unsigned scenario_nested(unsigned n) {
  unsigned sum = 0;
  for (unsigned i = 0; i < n; ++i) sum += nested(i);
  return sum;
}

// 6: catch (...) in a traced frame, for a library-thrown exception too.
TRACED unsigned vector_at(const std::vector<unsigned>& vec, unsigned i) {
  unsigned r = vec.at(i);
  EH_OPAQUE(r);
  return r;
}
TRACED unsigned catch_all(unsigned v) {
  static const std::vector<unsigned> small{5, 6, 7};
  unsigned r = 0;
  try {
    chain1(v);
  } catch (...) {
    r = note(v);
  }
  try {
    r += vector_at(small, v % 6);
  } catch (...) {
    r += 11u;
  }
  return r;
}
TRACED unsigned scenario_catch_all(unsigned n) {
  unsigned sum = 0;
  for (unsigned i = 0; i < n; ++i) sum += catch_all(i);
  return sum;
}

// 7: through a traced recursive chain: thrown at the bottom, caught half
// way and replaced by another exception, which an untraced caller catches.
TRACED unsigned rec_throw(unsigned n, unsigned catch_at) {
  if (n == 0) throw_boom(7);
  if (n == catch_at) {
    try {
      unsigned r = rec_throw(n - 1, catch_at);
      EH_OPAQUE(r);
      return r + 1u;
    } catch (const Boom& b) {
      throw Boom{b.v + n};
    }
  }
  Guard g{n};
  unsigned r = rec_throw(n - 1, catch_at);
  EH_OPAQUE(r);
  return r + 1u;
}
UNTRACED unsigned scenario_recursive(unsigned n) {
  unsigned sum = 0;
  for (unsigned i = 0; i < n; ++i) {
    try {
      sum += rec_throw(60 + i % 40, 30);
    } catch (const Boom& b) {
      sum += b.v;
    }
  }
  return sum + t_log;
}

// 8: thrown and caught in the same traced frame, which then returns
// normally (its exit must not be reported as unwound) to a traced caller.
TRACED unsigned same_frame(unsigned v) {
  try {
    if (v != 0xffffffffu) throw Boom{v};
  } catch (const Boom& b) {
    return b.v + 1u;
  }
  return 0;
}
TRACED unsigned same_frame_caller(unsigned v) {
  unsigned r = same_frame(v);
  EH_OPAQUE(r);
  return r * 2u;
}
TRACED unsigned scenario_same_frame(unsigned n) {
  unsigned sum = 0;
  for (unsigned i = 0; i < n; ++i) sum += same_frame_caller(i);
  return sum;
}

// 9: function-try-blocks: a function's, which returns from its handler,
// and a constructor's, which rethrows implicitly.
TRACED unsigned ftb(unsigned v) try {
  return chain1(v);
} catch (const Boom& b) {
  return b.v * 5u;
}
TRACED unsigned make_member(unsigned v) {
  if (v % 2) throw_boom(v);
  return v;
}
struct Widget {
  unsigned m;
  TRACED explicit Widget(unsigned v) try : m(make_member(v)) {
    note(m);
  } catch (...) {
    note(1234);
  }
};
TRACED unsigned build(unsigned v) {
  try {
    Widget w(v);
    return w.m;
  } catch (const Boom& b) {
    return b.v + 3u;
  }
}
TRACED unsigned scenario_function_try(unsigned n) {
  unsigned sum = 0;
  for (unsigned i = 0; i < n; ++i) sum += ftb(i) + build(i);
  return sum + t_log;
}

// 10: while one exception unwinds, a destructor throws and catches
// another through traced frames (two exceptions in flight on one thread).
struct Careful {
  unsigned id;
  TRACED ~Careful() {
    try {
      if (std::uncaught_exceptions() > 0) chain1(id);
    } catch (const Boom& b) {
      note(b.v + 100u);
    }
  }
};
TRACED unsigned careful_chain(unsigned v) {
  Careful c{v};
  unsigned r = chain1(v);
  EH_OPAQUE(r);
  return r;
}
UNTRACED unsigned scenario_in_flight(unsigned n) {
  unsigned sum = 0;
  for (unsigned i = 0; i < n; ++i) {
    try {
      sum += careful_chain(i);
    } catch (const Boom& b) {
      sum += b.v;
    }
  }
  return sum + t_log;
}

// 11: the same on two threads at once.
TRACED unsigned thread_body(unsigned seed, unsigned n) {
  unsigned sum = 0;
  for (unsigned i = 0; i < n; ++i) sum += catch_guarded(seed + i) + nested(seed + i);
  return sum + t_log;
}

// 12: a thread leaving traced C++ frames by pthread_exit and by
// cancellation: glibc's forced unwind must run the destructors of every
// frame on the way (it is an exception too, abi::__forced_unwind).
thread_local unsigned t_guards_run;
struct CountingGuard {
  TRACED ~CountingGuard() { ++t_guards_run; }
};
unsigned g_forced_guards[2];
TRACED void forced_bottom(unsigned how) {
  CountingGuard g;
  if (how == 0) pthread_exit(nullptr);
  for (;;) pthread_testcancel();
}
TRACED void forced_middle(unsigned how) {
  CountingGuard g;
  forced_bottom(how);
}
TRACED void forced_top(unsigned how) {
  struct Report {
    unsigned how;
    TRACED ~Report() { g_forced_guards[how] = t_guards_run; }
  } report{how};
  CountingGuard g;
  forced_middle(how);
}
TRACED void* forced_thread(void* how) {
  forced_top(static_cast<unsigned>(reinterpret_cast<uintptr_t>(how)));
  return nullptr;
}
// how 0: pthread_exit; 1: cancellation (see the cancel test in
// CMakeLists.txt for what ftjit does and does not promise there).
UNTRACED void scenario_forced_unwind(uintptr_t how) {
  {
    pthread_t t;
    pthread_create(&t, nullptr, forced_thread, reinterpret_cast<void*>(how));
    if (how == 1) pthread_cancel(t);  // acted on at the testcancel loop
    void* ret = nullptr;
    pthread_join(t, &ret);
    std::printf("forced_unwind %s: %u destructors ran, %s\n", how == 0 ? "pthread_exit" : "cancel",
                g_forced_guards[how], ret == PTHREAD_CANCELED ? "cancelled" : "exited");
  }
}

}  // namespace

// Runs every scenario, or with an argument only the one of that name (to
// reproduce a failure in isolation).
UNTRACED int main(int argc, char** argv) {
  selftrace_begin();
  const char* only = argc > 1 ? argv[1] : nullptr;
  auto want = [only](const char* name) { return only == nullptr || std::strcmp(only, name) == 0; };
  // Only on request: cancellation is the one case where tracing changes
  // what the program sees (destructors above a hooked frame do not run).
  auto asked = [only](const char* name) { return only != nullptr && std::strcmp(only, name) == 0; };
  const unsigned n = EH_SCALE(3000u, 600u);
  if (want("plain")) std::printf("plain: %u\n", scenario_plain(n));
  if (want("destructors")) std::printf("destructors: %u\n", scenario_destructors(n));
  if (want("rethrow")) std::printf("rethrow: %u\n", scenario_rethrow(n));
  if (want("exception_ptr")) std::printf("exception_ptr: %u\n", scenario_exception_ptr(n));
  if (want("nested")) std::printf("nested: %u\n", scenario_nested(n));
  if (want("catch_all")) std::printf("catch_all: %u\n", scenario_catch_all(n));
  if (want("recursive")) std::printf("recursive: %u\n", scenario_recursive(n / 10));
  if (want("same_frame")) std::printf("same_frame: %u\n", scenario_same_frame(n));
  if (want("function_try")) std::printf("function_try: %u\n", scenario_function_try(n));
  if (want("in_flight")) std::printf("in_flight: %u\n", scenario_in_flight(n));
  if (want("threads")) {
    unsigned results[2] = {0, 0};
    std::thread a([&] { results[0] = thread_body(1, n); });
    std::thread b([&] { results[1] = thread_body(2, n); });
    a.join();
    b.join();
    std::printf("threads: %u %u\n", results[0], results[1]);
  }
  if (want("forced_unwind")) scenario_forced_unwind(0);
  if (asked("cancel")) scenario_forced_unwind(1);
  std::printf("log: %u\n", t_log);
  return 0;
}
