// SPDX-License-Identifier: MIT
// BulkVector, BulkString: containers for the arrays a module's sites size
// (a million sites make records, symbols, windows and names of tens of MB
// each), whose memory comes in transparent huge pages.
//
// Why: fresh memory costs one page fault per 4 KiB page, and in a virtual
// machine each fault is a trip to the hypervisor. On the 2-core VM this was
// measured on, 270 MB touched page by page took 700-1100 ms; the same
// range advised MADV_HUGEPAGE took 16 ms (a fault per 2 MiB). Discovering
// a million sites touched about 270 MB and spent nearly all its time so.
//
// Below kBulkBytes an array comes from the heap like any other; from it on
// it gets a mapping of its own, 2 MiB-aligned, advised as huge pages (a
// kernel with THP off or absent just keeps 4 KiB pages). 256 KiB, not
// 2 MiB: a module of 20,000 sites has no array of 2 MiB, and its ~1,000
// faults took 15-20 ms where 45 took 4.4-5.2 (bench --section attach
// --sites 20k). The price: such an array may hold up to 2 MiB of memory
// (8 times its size), and only while the module is known; MAP_POPULATE
// instead of huge pages took as long as the faults (11-15 ms). Under
// AddressSanitizer every array stays on the heap, where ASan sees it.
#pragma once

#include <cstddef>
#include <limits>
#include <new>
#include <string>
#include <vector>

namespace ftjit {

inline constexpr size_t kBulkBytes = size_t{256} << 10;

// Memory for `bytes` (aligned for any fundamental type); throws
// std::bad_alloc when there is none. bulk_free takes the same size back.
void* bulk_allocate(size_t bytes);
void bulk_free(void* p, size_t bytes) noexcept;

template <typename T>
struct BulkAllocator {
  static_assert(alignof(T) <= __STDCPP_DEFAULT_NEW_ALIGNMENT__, "bulk arrays hold plain records");
  using value_type = T;

  BulkAllocator() = default;
  template <typename U>
  BulkAllocator(const BulkAllocator<U>&) noexcept {}  // NOLINT: rebinding is implicit

  T* allocate(size_t n) {
    if (n > std::numeric_limits<size_t>::max() / sizeof(T)) throw std::bad_array_new_length();
    return static_cast<T*>(bulk_allocate(n * sizeof(T)));
  }
  void deallocate(T* p, size_t n) noexcept { bulk_free(p, n * sizeof(T)); }

  friend bool operator==(const BulkAllocator&, const BulkAllocator&) { return true; }
};

template <typename T>
using BulkVector = std::vector<T, BulkAllocator<T>>;
using BulkString = std::basic_string<char, std::char_traits<char>, BulkAllocator<char>>;

}  // namespace ftjit
