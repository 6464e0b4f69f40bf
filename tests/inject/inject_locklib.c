// SPDX-License-Identifier: MIT
// An injected library whose constructor needs a lock a thread of the target
// holds (inject_target_lock): dlopen can only finish once that thread runs.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>

long ftjit_inject_lock_state = 0;

__attribute__((constructor)) static void on_load(void) {
  pthread_mutex_t* lock = (pthread_mutex_t*)dlsym(RTLD_DEFAULT, "inject_target_lock");
  if (!lock) {
    ftjit_inject_lock_state = 2;
    return;
  }
  pthread_mutex_lock(lock);
  pthread_mutex_unlock(lock);
  ftjit_inject_lock_state = 1;
}
