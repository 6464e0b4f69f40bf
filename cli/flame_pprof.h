// SPDX-License-Identifier: MIT
// `--format pprof` of the flame plugin: its JSON report (weights per stack)
// converted on the host into pprof's gzipped profile.proto, so that the
// traced process never links libprotobuf.
#pragma once

#include <string>
#include <string_view>

#include "core/error.h"

namespace ftjit::cli {

// Converts `flame_json` (flame's `--format json` report) into a gzipped
// profile written to `fd` (which it closes; `path` names it in messages): sample types samples/count (calls) and, by
// time, time/nanoseconds (own time), one Sample per stack with its leaf
// first. Fails with FTJIT_E_INVALID_ARGUMENT naming what is wrong with the
// report, or FTJIT_E_SYSTEM naming `path` when it cannot be written.
Status write_flame_pprof(std::string_view flame_json, int fd, const std::string& path);

}  // namespace ftjit::cli
