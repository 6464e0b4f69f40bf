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

// How written code reaches instruction fetch. Code is written through a
// writable alias (below) and runs through another mapping of the same
// memfd pages, so the question is whether a write through one mapping is
// seen through the other:
//
//   kCoherentAlias  hardware (x86-64, arm64, riscv64 machines): the bytes
//                   are the same physical memory; the ISA's cache
//                   maintenance (arch::flush_icache) and the batch's sync
//                   are all it takes.
//   kRemapAfterWrite  a binary translator (qemu-user) that caches what it
//                   translated from a page, and drops that only when the
//                   page is written through the mapping it runs from, or
//                   when that mapping changes (TOOLCHAIN.md Q7). After a
//                   write the executable pages are mapped again over
//                   themselves, read+exec, from the same memfd: one system
//                   call that drops every translation of them, while the
//                   bytes never go missing and the pages are never
//                   writable (W^X kept; a protection flip RX->RW->RX would
//                   need two calls, and every other thread parked between
//                   them, as the page may hold the code that flips it).
//
// Which one holds is probed once per process, by running a 4-instruction
// function written twice through an alias (runtime/arch: a function that
// returns a constant): the second result tells. FTJIT_CODE_WRITES=remap
// forces kRemapAfterWrite (tests run it on hardware); =alias forces the
// other.
enum class CodeWriteModel : uint8_t { kCoherentAlias, kRemapAfterWrite };
CodeWriteModel code_write_model();
const char* code_write_model_name(CodeWriteModel m);

// After runtime/ wrote code [addr, addr+n) through a writable alias of a
// TextAlias or a CodeArena: makes this thread's instruction fetch see it
// at once, and every other thread's once it passes through the kernel or
// the batch's sync has run (kRemapAfterWrite: at once too). Fails only
// where the remap does (the pages then keep their old translation).
Status publish_code(uint64_t addr, size_t n);
// Whether a publish_code ever failed in this process: a thread may then
// still run code that was replaced, so what it reaches is never freed.
bool code_publication_failed();

// A module's executable mapping, moved onto a memfd so that it gains a
// writable alias. Same bytes, same address, same protection where it runs.
class TextAlias {
 public:
  // Aliases the executable mapping [lo, hi) (page-aligned, as listed in
  // /proc/self/maps). `path`/`offset` name its file, to map back later.
  // `exec_prot`: the protection the range runs with, kept in every mapping
  // of it ftjit makes (arm64: PROT_BTI where the pages were guarded).
  static Result<std::unique_ptr<TextAlias>> create(uint64_t lo, uint64_t hi, std::string path,
                                                   uint64_t file_offset, int exec_prot);
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
  int exec_prot() const { return exec_prot_; }

 private:
  TextAlias() = default;
  uint64_t lo_ = 0, hi_ = 0, inode_ = 0;
  int exec_prot_ = 0;
  uint8_t* rw_ = nullptr;
  std::string path_;
  uint64_t file_offset_ = 0;
};

// In a child after fork(): replaces the shared mapping [lo, lo+size) by a
// private copy of its bytes (same address, `exec_prot`), so that the parent's
// later patching no longer reaches the child. Only where the range is still
// the executable mapping of the memfd `inode` (a library dlclosed since its
// alias was made is not). Async-signal-safe; the child is single-threaded
// when it runs.
void privatize_after_fork(uint64_t lo, size_t size, uint64_t inode, int exec_prot);

// Finds the executable mapping of /proc/self/maps that contains `addr`.
// A mapping (one VMA) is guarded as a whole: the kernel splits a range
// whose pages differ in PROT_BTI.
// `exec_prot` is the protection it runs with: PROT_READ|PROT_EXEC, plus
// PROT_BTI on arm64 where its pages are guarded (smaps' "bt" flag: the
// kernel keeps no other record of it, and a BTI-marked program's loader
// or the program itself sets it), which every later mapping of the range
// must keep: without it the pages silently stop checking landing pads.
struct ExecMapping {
  uint64_t lo = 0, hi = 0, offset = 0;
  std::string path;
  int exec_prot = 0;
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
  // Bytes from rx_ on filled with traps so far: the rest is the memfd's
  // fresh zeros, filled only as allocations reach it (filling the whole
  // arena up front faulted in all its pages: 256 for 1 MiB, 3.9 ms of an
  // attach here). Where zeros trap (arch::kZeroIsTrap), all of it.
  size_t trapped_ = 0;
  std::vector<Block> free_;   // sorted by addr
  std::vector<Block> used_;
};

}  // namespace ftjit
