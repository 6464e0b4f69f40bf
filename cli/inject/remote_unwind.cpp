// SPDX-License-Identifier: MIT
// The call chain of a stopped thread of another process, unwound with
// libunwind's ptrace accessors from the CFI of the target's own files:
// the real return addresses, not every word of the stack that happens to
// look like one (the main thread's stack keeps stale loader addresses from
// start-up in slots no frame ever rewrites).
#include <libunwind-ptrace.h>

#include "cli/inject/inject_internal.h"

namespace ftjit::inject::detail {

Result<std::vector<uint64_t>> call_chain(pid_t tid, size_t max_frames) {
  unw_addr_space_t space = unw_create_addr_space(&_UPT_accessors, 0);
  if (space == nullptr) return make_error(FTJIT_E_SYSTEM, "libunwind: no address space");
  void* upt = _UPT_create(tid);
  if (upt == nullptr) {
    unw_destroy_addr_space(space);
    return make_error(FTJIT_E_SYSTEM, "libunwind: cannot follow thread " + std::to_string(tid));
  }
  std::vector<uint64_t> chain;
  unw_cursor_t cursor;
  int rc = unw_init_remote(&cursor, space, upt);
  if (rc == 0) {
    do {
      unw_word_t ip = 0;
      if (unw_get_reg(&cursor, UNW_REG_IP, &ip) != 0 || ip == 0) break;
      chain.push_back(ip);
    } while (chain.size() < max_frames && unw_step(&cursor) > 0);
  }
  _UPT_destroy(upt);
  unw_destroy_addr_space(space);
  if (rc != 0) return make_error(FTJIT_E_SYSTEM, "libunwind cannot unwind thread " + std::to_string(tid));
  return chain;
}

}  // namespace ftjit::inject::detail
