// SPDX-License-Identifier: MIT
// Makes C++ exceptions (and pthread_exit's forced unwind) work through
// frames whose return address the shadow stack replaced: the unwinder looks
// each return address up in the unwind tables, and the exit trampoline has
// none. So the entry points that start an unwind are redirected, in every
// loaded module's GOT, to wrappers that first put the real addresses back
// (shadow_unhook_all); __cxa_begin_catch is wrapped to hook the surviving
// frames again once a handler caught the exception.
//
// Redirected: _Unwind_RaiseException, _Unwind_Resume_or_Rethrow,
// _Unwind_ForcedUnwind, pthread_exit (which reaches libgcc through
// pointers glibc looked up itself), __cxa_begin_catch, and the words that
// point at __gxx_personality_v0 (so the cleanup phase can report frames as
// it leaves them). Only calls through a GOT or such a word are seen:
// pthread_cancel's unwind is not. Its unwinder stops at the first hooked
// frame (the exit trampoline has no unwind table), so destructors of the
// frames above it do not run; the thread still exits, and its hooked
// frames are reported unwound.
#pragma once

#include <span>

#include "core/error.h"

namespace ftjit {

// Redirects the entry points in every module loaded now; again for modules
// loaded since the last call. Idempotent; the redirections stay for the
// life of the process (frames hooked now may unwind much later).
Status install_unwind_hooks();

// Whether install_unwind_hooks() ran (modules loaded later need it too).
bool unwind_hooks_active();

// One GOT redirection: every JUMP_SLOT and GLOB_DAT relocation (and plain
// 64-bit data word without addend) naming `name` is pointed at `wrapper`.
// Nothing is done while `*real` (the function the wrapper calls) is null.
struct GotRedirect {
  const char* name;
  void* wrapper;
  void** real;
};

// Applies `redirects` in every module loaded now (slots already pointing at
// their wrapper are left alone, so calling it again only reaches modules
// loaded since). Serialised with install_unwind_hooks().
Status redirect_got_slots(std::span<const GotRedirect> redirects);

// Points every slot that holds one of `redirects`' wrappers back at its
// real function: before the code of the wrappers goes away (an agent
// being unloaded).
Status undo_got_redirects(std::span<const GotRedirect> redirects);

// undo_got_redirects of the unwinder's hooks; only once no frame is hooked
// (shadow_put_back_all) and nothing can hook one again.
Status uninstall_unwind_hooks();


}  // namespace ftjit
