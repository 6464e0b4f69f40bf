/* SPDX-License-Identifier: MIT */
/* The traced functions of the record-control fixture (record_fixture.c):
 * the only file built with patchable entries. Every call logs itself
 * (rc_log_enter/rc_log_leave, untraced) so that the test knows each
 * call's thread, depth, order and duration, whatever ftjit records.
 *
 *   rc_root            1 ms + what it calls
 *     rc_fast  x3      no sleep
 *     rc_slow          30 ms, then rc_leaf x2
 *       rc_leaf          rc_deep
 *     rc_mid           rc_leaf x4, rc_fast
 *       rc_leaf          rc_deep
 *         rc_deep          no sleep
 *   rc_start_marker, rc_stop_marker: main thread, between the phases */
#include "record_fixture.h"

#define TRACED __attribute__((noinline, noclone))

static volatile int sink;

TRACED void rc_deep(int t) {
  int h = rc_log_enter(RC_DEEP);
  sink += t;
  rc_log_leave(h);
}

TRACED void rc_leaf(int t) {
  int h = rc_log_enter(RC_LEAF);
  rc_deep(t);
  rc_log_leave(h);
}

TRACED void rc_fast(int t) {
  int h = rc_log_enter(RC_FAST);
  sink += t;
  rc_log_leave(h);
}

TRACED void rc_slow(int t) {
  int h = rc_log_enter(RC_SLOW);
  rc_sleep_ms(30);
  rc_leaf(t);
  rc_leaf(t);
  rc_log_leave(h);
}

TRACED void rc_mid(int t) {
  int h = rc_log_enter(RC_MID);
  for (int i = 0; i < 4; ++i) rc_leaf(t);
  rc_fast(t);
  rc_log_leave(h);
}

TRACED void rc_root(int t) {
  int h = rc_log_enter(RC_ROOT);
  rc_sleep_ms(1);
  rc_fast(t);
  rc_fast(t);
  rc_fast(t);
  rc_slow(t);
  rc_mid(t);
  rc_log_leave(h);
}

TRACED void rc_start_marker(void) {
  int h = rc_log_enter(RC_START);
  rc_log_leave(h);
}

TRACED void rc_stop_marker(void) {
  int h = rc_log_enter(RC_STOP);
  rc_log_leave(h);
}
