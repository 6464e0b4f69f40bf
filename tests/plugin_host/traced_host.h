/* SPDX-License-Identifier: MIT */
/* Traced functions of the plugin host e2e tests. */
#pragma once

#ifdef __cplusplus
extern "C" {
#endif

int host_traced_a(int x);
int host_traced_b(int x);
int host_traced_c(int x); /* calls host_traced_a */
int host_traced_add(int a, int b);

#ifdef __cplusplus
}
#endif
