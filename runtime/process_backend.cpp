// SPDX-License-Identifier: MIT
#include "runtime/process_backend.h"

#include <atomic>
#include <cstdlib>

namespace ftjit {
namespace {
std::atomic<const Backend*> g_backend{nullptr};
}  // namespace

void set_process_backend(const Backend* backend) {
  g_backend.store(backend, std::memory_order_release);
}

const Backend& process_backend() {
  const Backend* b = g_backend.load(std::memory_order_acquire);
  if (b == nullptr) std::abort();  // a runtime bug: no engine was created
  return *b;
}

}  // namespace ftjit
