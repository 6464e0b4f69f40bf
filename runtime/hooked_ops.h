// SPDX-License-Identifier: MIT
// An ops with an exit callback or a thread filter is not handed to the
// trampolines as it is: the engine wraps it in a HookedOps, a real
// ftjit_ops (like a SiteMux) whose func checks the thread, calls the user's
// entry callback, then hooks the return. Every strategy then serves it
// unchanged: generated trampolines bake the wrapper in, call-ops slots and
// list tables point at it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/error.h"
#include "ftjit/ftjit.h"
#include "runtime/shadow_stack.h"

namespace ftjit {

// Whether a caller's ftjit_ops, struct_size bytes long (an older caller's
// is shorter), holds `field`.
#define FTJIT_OPS_HAS(ops, field) \
  ((ops)->struct_size >= offsetof(ftjit_ops, field) + sizeof((ops)->field))

// Which threads an ops serves, decided once per thread and cached.
class ThreadFilter {
 public:
  static Result<std::unique_ptr<ThreadFilter>> compile(const ftjit_thread_filter& f);
  // Whether the calling thread passes (cheap after its first call).
  bool passes() const;

 private:
  bool decide() const;
  uint64_t id_ = 0;  // unique per filter: the per-thread cache's key
  std::vector<int32_t> tids_;
  std::string name_glob_;
  bool has_name_ = false;
  bool main_thread_ = false;
};

struct HookedOps {
  ftjit_ops ops;           // what trampolines see: func = hooked entry
  ftjit_ops* user = nullptr;
  ftjit_func_t func = nullptr;
  ExitRecord* exit = nullptr;  // null: no exit hook
  std::unique_ptr<ThreadFilter> threads;
};

// Whether `ops` needs a wrapper (it has an exit callback or a thread
// filter; fields past API v1 are read only if struct_size has them).
bool needs_hooks(const ftjit_ops* ops);
Result<std::unique_ptr<HookedOps>> make_hooked_ops(ftjit_ops* ops);

}  // namespace ftjit
