/* SPDX-License-Identifier: MIT */
/* Traced functions of the plugin host e2e tests. */
#pragma once

#ifdef __cplusplus
extern "C" {
#endif

int host_traced_a(int x);
int host_traced_b(int x);
int host_traced_c(int x); /* calls host_traced_a */

#ifdef __cplusplus
}
#endif
