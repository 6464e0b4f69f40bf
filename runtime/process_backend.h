// SPDX-License-Identifier: MIT
// The backend of the engine this process runs, for the parts of the runtime
// that serve the whole process rather than one engine (the exit trampoline,
// the unwinder's GOT hooks). Set by Engine::create before it uses them.
#pragma once

#include "backends/backend.h"

namespace ftjit {

void set_process_backend(const Backend* backend);

// The backend set last; never called before an engine was created.
const Backend& process_backend();

}  // namespace ftjit
