/* SPDX-License-Identifier: MIT */
/* fork() from inside traced frames. The child inherits the hooked return
 * addresses on its stack and the forking thread's shadow stack, with an
 * engine that has gone inert (it may not patch the child's code) but whose
 * trampolines still call the callbacks: the child must return through
 * every inherited frame with the right exits. Children leave by returning
 * from main (summary from atexit), by _exit after returning to main (the
 * harness is asked for its summary first), and by _exit from deep inside
 * traced frames (no summary: those frames never end). One child execs
 * /bin/true from a traced frame. The parent waits before it returns
 * through its own frames, so the output order is fixed. */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/exit_hooks/selftrace.h"
#include "tests/exit_hooks/workload.h"

enum child_end { RETURN_FROM_MAIN, EXIT_FROM_MAIN, EXIT_DEEP, EXEC_TRUE };

static int g_is_child;
static unsigned g_trail = 5;

TRACED static unsigned mark(unsigned v) {
  g_trail = g_trail * 31u + v;
  return g_trail;
}

TRACED static void report_child(pid_t pid) {
  int status = 0;
  if (waitpid(pid, &status, 0) != pid) {
    perror("waitpid");
    exit(1);
  }
  if (WIFEXITED(status)) {
    printf("parent: child exited with %d\n", WEXITSTATUS(status));
  } else {
    printf("parent: child ended otherwise (status %#x)\n", status);
  }
}

/* The bottom of the traced chain: forks here. */
TRACED static unsigned fork_here(enum child_end how, unsigned v) {
  fflush(stdout); /* or the child would print the parent's buffer again */
  pid_t pid = fork();
  if (pid < 0) {
    perror("fork");
    exit(1);
  }
  if (pid == 0) {
    g_is_child = 1;
    if (how == EXIT_DEEP) {
      printf("child: _exit from %u traced frames deep\n", 4u);
      fflush(stdout);
      _exit(3);
    }
    if (how == EXEC_TRUE) {
      execl("/bin/true", "true", (char *)NULL);
      _exit(127);
    }
    return mark(v + 100u);
  }
  report_child(pid);
  return mark(v);
}

TRACED static unsigned level3(enum child_end how, unsigned v) {
  unsigned r = fork_here(how, v + 3u);
  EH_OPAQUE(r);
  return r + mark(3);
}
TRACED static unsigned level2(enum child_end how, unsigned v) {
  unsigned r = level3(how, v + 2u);
  EH_OPAQUE(r);
  return r + mark(2);
}
TRACED static unsigned level1(enum child_end how, unsigned v) {
  unsigned r = level2(how, v + 1u);
  EH_OPAQUE(r);
  return r + mark(1);
}

/* Traced work after the frames from before the fork have returned. */
TRACED static unsigned afterwards(unsigned n) {
  unsigned r = 0;
  for (unsigned i = 0; i < n; ++i) r += mark(i);
  return r;
}

UNTRACED int main(void) {
  selftrace_begin();
  static const enum child_end ends[] = {RETURN_FROM_MAIN, EXIT_FROM_MAIN, EXIT_DEEP, EXEC_TRUE};
  static const char *const names[] = {"return from main", "_exit from main", "_exit deep",
                                      "exec /bin/true"};
  for (unsigned k = 0; k < 4; ++k) {
    unsigned r = level1(ends[k], k * 10u);
    unsigned a = afterwards(1000);
    if (g_is_child) {
      printf("child (%s): %u %u\n", names[k], r, a);
      fflush(stdout);
      if (ends[k] == EXIT_FROM_MAIN) {
        selftrace_end();
        _exit(2);
      }
      return 0;
    }
    printf("parent after child (%s): %u %u\n", names[k], r, a);
  }
  return 0;
}
