// SPDX-License-Identifier: MIT
// The wrapper ops: thread check, user entry, return hook.
#include "runtime/hooked_ops.h"

#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstddef>

#include "core/glob.h"

namespace ftjit {
namespace {

std::atomic<uint64_t> g_next_filter_id{1};

// A few (filter, verdict) pairs per thread: an ops rarely has company.
struct VerdictCache {
  uint64_t id[4];
  bool pass[4];
  unsigned next;
};
thread_local VerdictCache t_verdicts{};
thread_local pid_t t_tid = 0;

pid_t current_tid() {
  if (t_tid == 0) t_tid = static_cast<pid_t>(syscall(SYS_gettid));
  return t_tid;
}

void hooked_entry(uint64_t ip, uint64_t parent_ip, ftjit_ops* ops, ftjit_regs* regs) {
  auto* h = static_cast<HookedOps*>(ops->private_data);
  if (h->threads && !h->threads->passes()) return;
  if (h->exit != nullptr) {
    shadow_hooked_entry(h->func, h->user, h->exit, ip, parent_ip, regs);
  } else {
    h->func(ip, parent_ip, h->user, regs);
  }
}

}  // namespace

Result<std::unique_ptr<ThreadFilter>> ThreadFilter::compile(const ftjit_thread_filter& f) {
  if (f.n_tids != 0 && f.tids == nullptr) {
    return make_error(FTJIT_E_INVALID_ARGUMENT, "thread filter has a tid count but no array");
  }
  auto tf = std::make_unique<ThreadFilter>();
  tf->id_ = g_next_filter_id.fetch_add(1);
  tf->tids_.assign(f.tids, f.tids + f.n_tids);
  std::sort(tf->tids_.begin(), tf->tids_.end());
  if (f.name_glob != nullptr) {
    tf->name_glob_ = f.name_glob;
    tf->has_name_ = true;
  }
  tf->main_thread_ = f.main_thread != 0;
  if (tf->tids_.empty() && !tf->has_name_ && !tf->main_thread_) {
    return make_error(FTJIT_E_INVALID_ARGUMENT, "thread filter selects no thread");
  }
  return tf;
}

bool ThreadFilter::decide() const {
  pid_t tid = current_tid();
  if (main_thread_ && tid == getpid()) return true;
  if (std::binary_search(tids_.begin(), tids_.end(), tid)) return true;
  if (has_name_) {
    char name[17] = {};
    if (prctl(PR_GET_NAME, name) == 0 && glob_match(name_glob_, name)) return true;
  }
  return false;
}

bool ThreadFilter::passes() const {
  VerdictCache& c = t_verdicts;
  for (unsigned i = 0; i < 4; ++i) {
    if (c.id[i] == id_) return c.pass[i];
  }
  bool pass = decide();
  unsigned k = c.next++ & 3;
  c.id[k] = id_;
  c.pass[k] = pass;
  return pass;
}

bool needs_hooks(const ftjit_ops* ops) {
  if (!FTJIT_OPS_HAS(ops, threads)) return false;
  return ops->exit_func != nullptr || ops->threads != nullptr;
}

Result<std::unique_ptr<HookedOps>> make_hooked_ops(ftjit_ops* ops) {
  auto h = std::make_unique<HookedOps>();
  ftjit_ops_init(&h->ops);
  h->ops.func = hooked_entry;
  h->ops.private_data = h.get();
  h->ops.flags = ops->flags;
  // A thread's first call decides its filter through prctl and the glob
  // matcher, which may use vector registers: the trampoline must save them.
  if (ops->threads != nullptr) h->ops.flags &= ~FTJIT_OPS_F_NO_FP;
  h->ops.strategy = ops->strategy;
  h->user = ops;
  h->func = ops->func;
  if (ops->threads != nullptr) {
    auto tf = ThreadFilter::compile(*ops->threads);
    if (!tf) return tf.take_error();
    h->threads = std::move(tf.value());
  }
  if (ops->exit_func != nullptr) h->exit = make_exit_record(ops->exit_func, ops);
  return h;
}

}  // namespace ftjit
