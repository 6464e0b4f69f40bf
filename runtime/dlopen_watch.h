// SPDX-License-Identifier: MIT
// Watching the dynamic loader (ftjit_engine_options.watch_dlopen): dlopen,
// dlmopen and dlclose are redirected in every module's GOT (the machinery
// of unwind_hooks) to wrappers that call the real function and then, once
// it returned and the loader lock is free, tell the engine
// (Engine::loader_changed): a new library gets the sites every attached
// ops' filter selects before its handle is returned; an unloaded one is
// forgotten. The redirections stay for the life of the process; without an
// engine the wrappers only call through.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/error.h"

namespace ftjit {

class Engine;

// Makes `engine` the one the wrappers notify.
void dlopen_watch_start(Engine* engine);
// If `engine` is the one notified: no more, and returns once no
// notification is under way.
void dlopen_watch_stop(Engine* engine);
// Redirects the loader's entry points in every module loaded now
// (idempotent; again after each load, for the new modules).
Status install_dlopen_watch();
// Points the redirected slots back at the loader (an agent being unloaded;
// after dlopen_watch_stop of every engine).
Status uninstall_dlopen_watch();

// The objects the loader has mapped now: name ("" for the main executable)
// and load bias.
struct LoadedObjectRef {
  std::string name;
  uint64_t load_bias;
};
std::vector<LoadedObjectRef> loaded_objects();

// Ranges [lo, hi) mapped from ftjit's text memfds now (TextAlias): an alias
// missing here was unmapped by the loader (dlclose), even if a new copy of
// the library sits at the same address.
std::vector<std::pair<uint64_t, uint64_t>> text_alias_mappings();

}  // namespace ftjit
