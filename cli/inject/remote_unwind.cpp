// SPDX-License-Identifier: MIT
// The call chain of a stopped thread of another process, unwound with
// libunwind's ptrace accessors from the CFI of the target's own files:
// the real return addresses, not every word of the stack that happens to
// look like one (the main thread's stack keeps stale loader addresses from
// start-up in slots no frame ever rewrites).
#include <libunwind-ptrace.h>

#include "cli/inject/inject_internal.h"

namespace ftjit::inject::detail {

Result<std::vector<StackFrame>> call_frames(pid_t tid, size_t max_frames) {
  unw_addr_space_t space = unw_create_addr_space(&_UPT_accessors, 0);
  if (space == nullptr) return make_error(FTJIT_E_SYSTEM, "libunwind: no address space");
  void* upt = _UPT_create(tid);
  if (upt == nullptr) {
    unw_destroy_addr_space(space);
    return make_error(FTJIT_E_SYSTEM, "libunwind: cannot follow thread " + std::to_string(tid));
  }
  std::vector<StackFrame> frames;
  unw_cursor_t cursor;
  int rc = unw_init_remote(&cursor, space, upt);
  if (rc == 0) {
    do {
      unw_word_t ip = 0, sp = 0;
      if (unw_get_reg(&cursor, UNW_REG_IP, &ip) != 0 || ip == 0) break;
      if (unw_get_reg(&cursor, UNW_REG_SP, &sp) != 0) break;
      frames.push_back({ip, sp});
    } while (frames.size() < max_frames && unw_step(&cursor) > 0);
  }
  _UPT_destroy(upt);
  unw_destroy_addr_space(space);
  if (rc != 0) return make_error(FTJIT_E_SYSTEM, "libunwind cannot unwind thread " + std::to_string(tid));
  return frames;
}

Result<std::vector<uint64_t>> call_chain(pid_t tid, size_t max_frames) {
  auto frames = call_frames(tid, max_frames);
  if (!frames) return frames.take_error();
  std::vector<uint64_t> chain;
  chain.reserve(frames->size());
  for (const StackFrame& f : *frames) chain.push_back(f.ip);
  return chain;
}

}  // namespace ftjit::inject::detail
