// SPDX-License-Identifier: MIT
// The x86-64 backend (asmjit).
#pragma once

#include "backends/backend.h"

namespace ftjit {

const Backend& x86_64_backend();

}  // namespace ftjit
