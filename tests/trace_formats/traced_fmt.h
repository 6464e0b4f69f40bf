/* SPDX-License-Identifier: MIT */
/* The functions gen_trace traces (traced_fmt.c, -fpatchable-function-entry=5). */
#ifndef FTJIT_TESTS_TRACE_FORMATS_TRACED_FMT_H
#define FTJIT_TESTS_TRACE_FORMATS_TRACED_FMT_H

#ifdef __cplusplus
extern "C" {
#endif

int trfmt_leaf(int x);
int trfmt_middle(int x);    /* calls trfmt_leaf twice */
int trfmt_outer(int x);     /* calls trfmt_middle, then trfmt_leaf */
int trfmt_recurse(int depth); /* depth + 1 nested calls of itself */

#ifdef __cplusplus
}
#endif

#endif
