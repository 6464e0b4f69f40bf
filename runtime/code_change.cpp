// SPDX-License-Identifier: MIT
// Code-change scopes: fork exclusion plus the loader's load-write lock
// (see code_change.h for why each).
#include "runtime/code_change.h"
#include "runtime/fork_handlers.h"

#include <fcntl.h>
#include <link.h>
#include <pthread.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstddef>
#include <mutex>

namespace ftjit {
namespace {

// Held by a scope and by fork() from prepare to parent (or child).
std::mutex g_fork_exclusion;
thread_local int t_depth = 0;
thread_local uint64_t t_generation = 0;  // the outermost scope's
// fork() called on a thread that is inside a scope (a signal handler that
// interrupted one): it cannot wait for itself; the child gets what is there.
thread_local bool t_fork_without_lock = false;

void (*g_privatize)() = nullptr;
std::once_flag g_handlers_once;
// The child's "done privatizing": [0] read by the parent, [1] written by
// the child. Only touched with g_fork_exclusion held (prepare to parent).
int g_child_done[2] = {-1, -1};

struct ScopeCall {
  const std::function<Status(uint64_t)>* body;
  Status result;
  bool ran = false;
};

int run_in_callback(dl_phdr_info* info, size_t size, void* data) {
  auto* call = static_cast<ScopeCall*>(data);
  uint64_t generation = 0;
  if (size >= offsetof(dl_phdr_info, dlpi_subs) + sizeof info->dlpi_subs) {
    generation = info->dlpi_adds + info->dlpi_subs;
  }
  t_generation = generation;
  call->result = (*call->body)(generation);
  call->ran = true;
  return 1;  // one object is enough: the lock is what matters
}

// Set once the agent is about to be unloaded: a fork then passes through
// these handlers at once, so that the unload (which waits for no thread to
// be in fork) leaves the narrowest gap for one to enter agent code.
std::atomic<bool> g_handlers_inert{false};
// What this thread's prepare did, for its parent and child handlers.
thread_local bool t_fork_locked = false;

void fork_prepare() {
  if (g_handlers_inert.load(std::memory_order_acquire)) return;
  if (t_depth > 0) {
    t_fork_without_lock = true;
    return;
  }
  g_fork_exclusion.lock();
  t_fork_locked = true;
  if (g_privatize != nullptr && pipe2(g_child_done, O_CLOEXEC) != 0) {
    g_child_done[0] = g_child_done[1] = -1;
  }
}

void fork_parent() {
  if (t_fork_without_lock) {
    t_fork_without_lock = false;
    return;
  }
  if (!t_fork_locked) return;  // inert when prepare ran
  t_fork_locked = false;
  if (g_child_done[1] >= 0) {
    // Our copy of the write end goes first: the read then ends with the
    // child's byte, or with end-of-file if the child died or fork failed.
    const int saved_errno = errno;
    close(g_child_done[1]);
    char c;
    while (read(g_child_done[0], &c, 1) < 0 && errno == EINTR) {
    }
    close(g_child_done[0]);
    g_child_done[0] = g_child_done[1] = -1;
    errno = saved_errno;
  }
  g_fork_exclusion.unlock();
}

void fork_child() {
  if (t_fork_without_lock) {
    t_fork_without_lock = false;
    if (g_privatize != nullptr) g_privatize();
    return;
  }
  if (!t_fork_locked) return;  // inert when prepare ran
  t_fork_locked = false;
  const int saved_errno = errno;
  if (g_privatize != nullptr) g_privatize();
  if (g_child_done[1] >= 0) {
    const char done = 1;
    while (write(g_child_done[1], &done, 1) < 0 && errno == EINTR) {
    }
    close(g_child_done[1]);
    close(g_child_done[0]);
    g_child_done[0] = g_child_done[1] = -1;
  }
  errno = saved_errno;
  // The forking thread locked it in prepare and is this thread now.
  g_fork_exclusion.unlock();
}

}  // namespace

Status with_code_change(const std::function<Status(uint64_t)>& body) {
  // Nested: the outer scope holds both locks already and saw this generation.
  if (t_depth > 0) return body(t_generation);
  std::lock_guard<std::mutex> no_fork(g_fork_exclusion);
  ++t_depth;
  ScopeCall call{&body, {}, false};
  dl_iterate_phdr(run_in_callback, &call);
  --t_depth;
  // The loader always lists the executable; never reached in practice.
  if (!call.ran) return make_error(FTJIT_E_INTERNAL, "the loader lists no object");
  return std::move(call.result);
}

bool in_code_change() { return t_depth > 0; }

void make_fork_handlers_inert() { g_handlers_inert.store(true, std::memory_order_release); }

void install_code_change_fork_handlers(void (*privatize)()) {
  std::call_once(g_handlers_once, [&] {
    g_privatize = privatize;
    register_fork_handlers(fork_prepare, fork_parent, fork_child);
  });
}

}  // namespace ftjit
