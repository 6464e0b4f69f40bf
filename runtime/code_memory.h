// SPDX-License-Identifier: MIT
// Code memory without ever being writable and executable in one mapping:
// every piece of code ftjit writes is a memfd mapped twice, once read+exec
// where it runs and once read+write where ftjit writes it. Writes then need
// no system call per site, and no page is ever W+X.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/error.h"

namespace ftjit {

// A module's executable mapping, moved onto a memfd so that it gains a
// writable alias. Same bytes, same address, same protection where it runs.
class TextAlias {
 public:
  // Aliases the executable mapping [lo, hi) (page-aligned, as listed in
  // /proc/self/maps). `path`/`offset` name its file, to map back later.
  static Result<std::unique_ptr<TextAlias>> create(uint64_t lo, uint64_t hi, std::string path,
                                                   uint64_t file_offset);
  ~TextAlias();
  TextAlias(const TextAlias&) = delete;
  TextAlias& operator=(const TextAlias&) = delete;

  uint64_t lo() const { return lo_; }
  uint64_t hi() const { return hi_; }
  bool contains(uint64_t addr, size_t n) const { return addr >= lo_ && addr + n <= hi_; }
  // The writable alias of code address `addr`.
  uint8_t* rw(uint64_t addr) const { return rw_ + (addr - lo_); }

  // Maps the original file back over the range if the bytes are identical
  // to the file's (they are once every site is restored). Otherwise keeps
  // the memfd mapping, which holds the same bytes. Called at teardown.
  void restore_file_mapping();
  // The memfd's inode (as /proc/self/maps shows it), 0 if unknown.
  uint64_t inode() const { return inode_; }

 private:
  TextAlias() = default;
  uint64_t lo_ = 0, hi_ = 0, inode_ = 0;
  uint8_t* rw_ = nullptr;
  std::string path_;
  uint64_t file_offset_ = 0;
};

// In a child after fork(): replaces the shared mapping [lo, lo+size) by a
// private copy of its bytes (same address, read+exec), so that the parent's
// later patching no longer reaches the child. Only where the range is still
// the executable mapping of the memfd `inode` (a library dlclosed since its
// alias was made is not). Async-signal-safe; the child is single-threaded
// when it runs.
void privatize_after_fork(uint64_t lo, size_t size, uint64_t inode);

// Finds the executable mapping of /proc/self/maps that contains `addr`.
struct ExecMapping {
  uint64_t lo = 0, hi = 0, offset = 0;
  std::string path;
};
Result<ExecMapping> find_exec_mapping(uint64_t addr);

// Trampoline memory near some code: one memfd, mapped read+exec within
// branch reach of `near` and read+write elsewhere. First-fit allocation.
class CodeArena {
 public:
  static Result<std::unique_ptr<CodeArena>> create_near(uint64_t near, int64_t reach,
                                                        size_t size);
  ~CodeArena();
  CodeArena(const CodeArena&) = delete;
  CodeArena& operator=(const CodeArena&) = delete;

  uint64_t lo() const { return rx_; }
  uint64_t hi() const { return rx_ + size_; }
  bool contains(uint64_t addr) const { return addr >= rx_ && addr < rx_ + size_; }
  // True if every byte of the arena is within `reach` of `addr`.
  bool reaches(uint64_t addr, int64_t reach) const;

  // Reserves `n` bytes (rounded up to `align`); 0 if full.
  uint64_t allocate(size_t n, size_t align);
  void free(uint64_t addr);
  uint8_t* rw(uint64_t addr) const { return rw_ + (addr - rx_); }
  // Keeps the code mapped when this object goes (a forked child's copy:
  // its patched sites still call into it).
  void keep_code_mapped() { keep_code_ = true; }
  // The memfd's inode (as /proc/self/maps shows it), 0 if unknown.
  uint64_t inode() const { return inode_; }

 private:
  CodeArena() = default;
  bool keep_code_ = false;
  uint64_t inode_ = 0;
  struct Block { uint64_t addr; size_t size; };
  uint64_t rx_ = 0;
  uint8_t* rw_ = nullptr;
  size_t size_ = 0;
  std::vector<Block> free_;   // sorted by addr
  std::vector<Block> used_;
};

}  // namespace ftjit
