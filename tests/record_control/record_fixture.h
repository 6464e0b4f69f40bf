/* SPDX-License-Identifier: MIT */
/* The record-control fixture's two halves: the traced tree
 * (record_tree.c) and the untraced driver and log (record_fixture.c). */
#ifndef FTJIT_RECORD_FIXTURE_H
#define FTJIT_RECORD_FIXTURE_H

enum { RC_ROOT, RC_FAST, RC_SLOW, RC_MID, RC_LEAF, RC_DEEP, RC_START, RC_STOP, RC_FUNCS };

/* A call begins (its handle) and ends. */
int rc_log_enter(int fn);
void rc_log_leave(int handle);
void rc_sleep_ms(int ms);

void rc_root(int t);
void rc_mid(int t);
void rc_start_marker(void);
void rc_stop_marker(void);

#endif
