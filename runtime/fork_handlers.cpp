// SPDX-License-Identifier: MIT
// See fork_handlers.h.
#include "runtime/fork_handlers.h"

// glibc's (exported since 2.3.2): pthread_atfork is this call with the
// caller's __dso_handle; __cxa_finalize(d) runs d's exit functions and
// then unregisters d's fork handlers.
extern "C" int __register_atfork(void (*prepare)(), void (*parent)(), void (*child)(), void* dso_handle);
extern "C" void __cxa_finalize(void* dso_handle);

namespace ftjit {
namespace {
// Only its address matters: the key of our entries in glibc's list.
char g_fork_handle;
}  // namespace

int register_fork_handlers(void (*prepare)(), void (*parent)(), void (*child)()) {
  return __register_atfork(prepare, parent, child, &g_fork_handle);
}

void release_fork_handlers() { __cxa_finalize(&g_fork_handle); }

namespace {
__attribute__((destructor)) void release_at_unload() { release_fork_handlers(); }
}  // namespace

}  // namespace ftjit
