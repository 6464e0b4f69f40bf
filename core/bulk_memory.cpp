// SPDX-License-Identifier: MIT
// bulk_allocate: large arrays in mappings of their own, advised as
// transparent huge pages. The one place core asks the OS for memory
// itself: the parser and discovery build the arrays, and they run in the
// agent, the CLI and embedders alike.
#include "core/bulk_memory.h"
#include "core/bulk_prefault.h"

#include <sys/mman.h>

#include <cstdint>

namespace ftjit {
namespace {

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kOwnMappings = false;  // ASan checks heap arrays, not mappings
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kOwnMappings = false;
#else
constexpr bool kOwnMappings = true;
#endif
#else
constexpr bool kOwnMappings = true;
#endif

constexpr size_t kHugePage = size_t{2} << 20;

size_t mapped_size(size_t bytes) { return (bytes + kHugePage - 1) & ~(kHugePage - 1); }

bool own_mapping(size_t bytes) { return kOwnMappings && bytes >= kBulkBytes; }

}  // namespace

void* bulk_allocate(size_t bytes) {
  if (!own_mapping(bytes)) return ::operator new(bytes);
  const size_t size = mapped_size(bytes);
  if (size < bytes) throw std::bad_alloc();
  // Map one huge page more than needed, then unmap the ends that are not
  // 2 MiB-aligned: only whole aligned 2 MiB ranges become huge pages.
  void* raw = ::mmap(nullptr, size + kHugePage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) throw std::bad_alloc();
  const auto start = reinterpret_cast<uintptr_t>(raw);
  const uintptr_t aligned = (start + kHugePage - 1) & ~(uintptr_t{kHugePage} - 1);
  if (aligned != start) ::munmap(raw, aligned - start);
  const uintptr_t tail = aligned + size;
  if (start + size + kHugePage != tail) ::munmap(reinterpret_cast<void*>(tail), start + size + kHugePage - tail);
  // Advice, not a requirement: without THP the pages stay 4 KiB.
  (void)::madvise(reinterpret_cast<void*>(aligned), size, MADV_HUGEPAGE);
  bulk_prefault_offer(reinterpret_cast<void*>(aligned), size);
  return reinterpret_cast<void*>(aligned);
}

void bulk_free(void* p, size_t bytes) noexcept {
  if (p == nullptr) return;
  if (!own_mapping(bytes)) {
    ::operator delete(p);
    return;
  }
  bulk_prefault_withdraw(p);
  ::munmap(p, mapped_size(bytes));
}

}  // namespace ftjit
