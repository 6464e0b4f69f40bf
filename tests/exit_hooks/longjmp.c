/* SPDX-License-Identifier: MIT */
/* setjmp/longjmp and sigsetjmp/siglongjmp out of traced frames, many times
 * over: nothing tells the engine that those frames are gone, so it has to
 * notice by itself, report each exactly once as unwound, and not let the
 * shadow stack grow with every jump (run.sh bounds the depth). Includes
 * jumps to a setjmp inside a traced frame, which must then return normally,
 * and a siglongjmp out of a signal handler raised inside traced code. */
#define _GNU_SOURCE
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "tests/exit_hooks/selftrace.h"
#include "tests/exit_hooks/workload.h"

static jmp_buf g_jb;
static sigjmp_buf g_sjb;
static unsigned g_trail; /* where control went, as a running hash */

TRACED static void trail(unsigned v) { g_trail = g_trail * 33u + v; }

/* Recurses `levels` traced frames, then jumps to g_jb with `code`. */
TRACED static unsigned dive_longjmp(unsigned levels, int code) {
  if (levels == 0) longjmp(g_jb, code);
  unsigned r = dive_longjmp(levels - 1, code);
  EH_OPAQUE(r);
  return r + 1u;
}

TRACED static unsigned dive_siglongjmp(unsigned levels, int code) {
  if (levels == 0) siglongjmp(g_sjb, code);
  unsigned r = dive_siglongjmp(levels - 1, code);
  EH_OPAQUE(r);
  return r + 1u;
}

/* 1: from up to 8 traced frames back to an untraced setjmp. */
UNTRACED static unsigned to_untraced(unsigned n) {
  volatile unsigned sum = 0;
  for (volatile unsigned i = 0; i < n; ++i) {
    int code = setjmp(g_jb);
    if (code == 0) {
      sum += dive_longjmp(1 + i % 8, (int)(i % 100) + 1);
    } else {
      sum += (unsigned)code;
    }
  }
  return sum;
}

/* 2: the setjmp is in a traced frame: the frames above it are gone, the
 * frame itself continues and returns normally. */
TRACED static unsigned catcher(unsigned i) {
  volatile unsigned local = i * 7u;
  int code = setjmp(g_jb);
  if (code == 0) {
    trail(1);
    local += dive_longjmp(2 + i % 5, (int)(i % 50) + 1);
    trail(2); /* never reached */
  }
  trail((unsigned)code);
  return local + (unsigned)code;
}

TRACED static unsigned catcher_caller(unsigned i) {
  unsigned r = catcher(i);
  EH_OPAQUE(r);
  return r + 3u;
}

TRACED static unsigned to_traced(unsigned n) {
  unsigned sum = 0;
  for (unsigned i = 0; i < n; ++i) sum += catcher_caller(i);
  return sum + g_trail;
}

/* 3: sigsetjmp/siglongjmp with the signal mask saved, from a traced frame
 * that blocked a signal: the mask must come back. */
TRACED static unsigned block_and_dive(unsigned levels, int code) {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGUSR2);
  sigprocmask(SIG_BLOCK, &set, NULL);
  unsigned r = dive_siglongjmp(levels, code);
  EH_OPAQUE(r);
  return r;
}

TRACED static unsigned sig_catcher(unsigned i) {
  volatile unsigned local = i;
  int code = sigsetjmp(g_sjb, 1);
  if (code == 0) local += block_and_dive(1 + i % 6, (int)(i % 30) + 1);
  sigset_t now;
  sigprocmask(SIG_BLOCK, NULL, &now);
  return local + (unsigned)code + (sigismember(&now, SIGUSR2) ? 1000000u : 0u);
}

TRACED static unsigned with_sigjmp(unsigned n) {
  unsigned sum = 0;
  for (unsigned i = 0; i < n; ++i) sum += sig_catcher(i);
  return sum;
}

/* 4: nested setjmp levels: the innermost frames jump past a traced frame
 * that has its own (newer) jmp_buf, to the outer one. */
static jmp_buf g_outer;
TRACED static unsigned inner_level(unsigned i) {
  jmp_buf saved;
  memcpy(saved, g_jb, sizeof saved);
  volatile unsigned r = 0;
  if (setjmp(g_jb) == 0) {
    if (i % 3 == 0) longjmp(g_outer, (int)(i % 7) + 1); /* skips our own */
    r = dive_longjmp(3, 5);
  } else {
    r = 5;
  }
  memcpy(g_jb, saved, sizeof saved);
  return r;
}

TRACED static unsigned outer_level(unsigned i) {
  volatile unsigned r = 0;
  int code = setjmp(g_outer);
  if (code == 0) {
    unsigned a = inner_level(i);
    EH_OPAQUE(a);
    r = a * 2u;
  } else {
    r = 100u + (unsigned)code;
  }
  return r;
}

TRACED static unsigned nested_levels(unsigned n) {
  unsigned sum = 0;
  for (unsigned i = 0; i < n; ++i) sum += outer_level(i);
  return sum;
}

/* 5: SIGUSR1 raised inside traced code; the handler (traced, as is what
 * it calls) siglongjmps out of itself and the traced frames below the
 * signal frame. */
static sigjmp_buf g_handler_jb;
static volatile sig_atomic_t g_handled;

TRACED static unsigned handler_work(unsigned v) { return v * 2654435761u; }

TRACED static void on_usr1(int sig) {
  (void)sig;
  g_handled = g_handled + 1;
  unsigned w = handler_work((unsigned)g_handled);
  EH_OPAQUE(w);
  siglongjmp(g_handler_jb, (int)(w % 1000u) + 1);
}

TRACED static unsigned raise_deep(unsigned levels) {
  if (levels == 0) {
    raise(SIGUSR1);
    return 0; /* not reached */
  }
  unsigned r = raise_deep(levels - 1);
  EH_OPAQUE(r);
  return r + 1u;
}

TRACED static unsigned from_handler(unsigned n) {
  volatile unsigned sum = 0;
  for (volatile unsigned i = 0; i < n; ++i) {
    volatile unsigned v = 0;
    int code = sigsetjmp(g_handler_jb, 1);
    if (code == 0) {
      v = raise_deep(1 + i % 6);
    } else {
      v = (unsigned)code;
    }
    sum += v;
  }
  return sum;
}

/* After all the jumps, ordinary calls still pair up. */
TRACED static unsigned plain(unsigned v) { return v + 1u; }
TRACED static unsigned plain_chain(unsigned v) {
  unsigned r = plain(v);
  EH_OPAQUE(r);
  return r * 2u;
}

/* Runs every scenario, or with an argument only the one of that name (to
 * reproduce a failure in isolation). */
UNTRACED int main(int argc, char **argv) {
  selftrace_begin();
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_usr1;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGUSR1, &sa, NULL);

  const char *only = argc > 1 ? argv[1] : NULL;
#define WANT(name) (only == NULL || strcmp(only, name) == 0)
  const unsigned n = EH_SCALE(100000u, 20000u);
  if (WANT("to_untraced")) printf("to_untraced: %u\n", to_untraced(n));
  if (WANT("to_traced")) printf("to_traced: %u\n", to_traced(n));
  if (WANT("sigjmp")) printf("sigjmp: %u\n", with_sigjmp(n));
  if (WANT("nested")) printf("nested: %u\n", nested_levels(n / 4));
  if (WANT("from_handler")) {
    unsigned fh = from_handler(n / 10);
    printf("from_handler: %u handled=%d\n", fh, (int)g_handled);
  }
  printf("plain: %u\n", plain_chain(41));
  return 0;
}
