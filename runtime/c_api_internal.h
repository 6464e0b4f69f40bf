// SPDX-License-Identifier: MIT
// The C API's engine constructor with the backend chosen by the caller:
// ftjit_engine_create (c_api_native.cpp) gives the native one, with its
// in-process code generator; an agent gives one whose trampolines are
// generated in the CLI.
#pragma once

#include "backends/backend.h"
#include "core/error.h"
#include "ftjit/ftjit.h"

namespace ftjit {

// ftjit_engine_create with `backend`, relocating entries with `relocator`
// (may be null); NULL and ftjit_last_error() on failure.
ftjit_engine* create_engine_handle(const ftjit_engine_options* opts, const Backend& backend,
                                   const EntryRelocator* relocator);

// Records `e` as this thread's ftjit_last_error() and returns its code.
ftjit_status c_api_fail(const Error& e);

}  // namespace ftjit

namespace ftjit {
class Engine;
// The engine behind a C handle (status listings in the agent).
Engine* engine_of(ftjit_engine* engine);
}  // namespace ftjit
