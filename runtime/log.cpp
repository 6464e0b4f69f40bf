// SPDX-License-Identifier: MIT
#include "runtime/log.h"

#include <spdlog/spdlog.h>

#include <atomic>

namespace ftjit {
namespace {
// Owned here for good: loggers are set once, read from any thread.
std::atomic<spdlog::logger*> g_logger{nullptr};
}  // namespace

spdlog::logger& log() {
  spdlog::logger* l = g_logger.load(std::memory_order_acquire);
  return l != nullptr ? *l : *spdlog::default_logger_raw();
}

void set_logger(std::shared_ptr<spdlog::logger> logger) {
  // Leaked on purpose: a thread may be logging through the old one.
  if (logger) new std::shared_ptr<spdlog::logger>(logger);
  g_logger.store(logger.get(), std::memory_order_release);
}

}  // namespace ftjit
