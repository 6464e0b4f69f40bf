// SPDX-License-Identifier: MIT
// The library the tests inject: its constructor sets a global and appends
// "loaded" to /tmp/ftjit-inject-test-<pid>.marker, its destructor appends
// "unloaded".
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

long ftjit_inject_test_state = 0;

static void append_marker(const char* line) {
  char path[64];
  snprintf(path, sizeof path, "/tmp/ftjit-inject-test-%d.marker", (int)getpid());
  int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) return;
  ssize_t n = write(fd, line, strlen(line));
  (void)n;
  close(fd);
}

__attribute__((constructor)) static void on_load(void) {
  ftjit_inject_test_state = 0x1234;
  append_marker("loaded\n");
}

__attribute__((destructor)) static void on_unload(void) { append_marker("unloaded\n"); }
