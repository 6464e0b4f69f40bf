// SPDX-License-Identifier: MIT
// membarrier(PRIVATE_EXPEDITED_SYNC_CORE), with a signal-based fallback.
#include "runtime/sync.h"

#include <linux/membarrier.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>

#include "runtime/thread_control.h"

namespace ftjit {
namespace {

long membarrier(int cmd, unsigned flags) { return syscall(SYS_membarrier, cmd, flags, 0); }

}  // namespace

CoreSync::CoreSync() {
  // FTJIT_NO_MEMBARRIER=1 forces the fallback (tests exercise it).
  const char* off = getenv("FTJIT_NO_MEMBARRIER");
  if (off != nullptr && off[0] == '1') return;
  long cmds = membarrier(MEMBARRIER_CMD_QUERY, 0);
  if (cmds < 0 || !(cmds & MEMBARRIER_CMD_PRIVATE_EXPEDITED_SYNC_CORE)) return;
  membarrier_ = membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED_SYNC_CORE, 0) == 0;
}

Status CoreSync::sync() {
  count_.fetch_add(1, std::memory_order_relaxed);
  if (membarrier_) {
    if (membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED_SYNC_CORE, 0) == 0) return {};
    return make_error(FTJIT_E_SYSTEM, std::string("membarrier: ") + strerror(errno));
  }
  fallbacks_.fetch_add(1, std::memory_order_relaxed);
  return signal_sync_all_threads();
}

}  // namespace ftjit
