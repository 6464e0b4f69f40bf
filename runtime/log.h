// SPDX-License-Identifier: MIT
// Where ftjit's own messages go: spdlog's default logger, unless the
// process ftjit serves gave another. The agent does: it lives in somebody
// else's program, whose stdout, stderr and spdlog settings (when the
// program uses spdlog too, the registry is shared) must stay its own.
#pragma once

#include <spdlog/logger.h>

#include <memory>

namespace ftjit {

spdlog::logger& log();

// Replaces the logger (nullptr: back to spdlog's default). Call it before
// anything logs; the logger lives as long as the process.
void set_logger(std::shared_ptr<spdlog::logger> logger);

}  // namespace ftjit
