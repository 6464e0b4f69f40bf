// SPDX-License-Identifier: MIT
// memfd-backed dual mappings for module text and for trampolines.
#include "runtime/code_memory.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/auxv.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <mutex>
#include <sstream>
#include <vector>

#include "core/elf_properties.h"
#include "runtime/arch/arch.h"

#ifndef MFD_EXEC
#define MFD_EXEC 0x0010U
#endif
#ifndef MAP_FIXED_NOREPLACE
#define MAP_FIXED_NOREPLACE 0x100000
#endif
#if defined(__aarch64__) && !defined(PROT_BTI)
#define PROT_BTI 0x10
#endif
#if defined(__aarch64__)
constexpr unsigned long kHwcap2Bti = 1ul << 17;  // HWCAP2_BTI
#endif

namespace ftjit {
namespace {

Error sys_error(const std::string& what) {
  return make_error(FTJIT_E_SYSTEM, what + ": " + strerror(errno));
}

// A memfd that may be mapped executable. Newer kernels want MFD_EXEC said
// out loud when vm.memfd_noexec is set; older ones reject the flag.
int make_exec_memfd(const char* name, size_t size) {
  int fd = static_cast<int>(syscall(SYS_memfd_create, name, MFD_CLOEXEC | MFD_EXEC));
  if (fd < 0 && errno == EINVAL) fd = static_cast<int>(syscall(SYS_memfd_create, name, MFD_CLOEXEC));
  if (fd < 0) return -1;
  if (ftruncate(fd, static_cast<off_t>(size)) != 0) {
    int e = errno;
    close(fd);
    errno = e;
    return -1;
  }
  return fd;
}

size_t page_size() { return static_cast<size_t>(sysconf(_SC_PAGESIZE)); }

// Mappings of code (module text, trampolines near it) go to the kernel
// directly: sanitizer runtimes intercept mmap and reset their shadow memory
// for the range, which they do not map for module text (TSan crashes).
// Code is never instrumented data, so they need not know about it.
void* code_mmap(void* addr, size_t len, int prot, int flags, int fd, off_t off) {
  long r = syscall(SYS_mmap, addr, len, prot, flags, fd, off);
  if (r < 0 && r > -4096) {
    errno = static_cast<int>(-r);
    return MAP_FAILED;
  }
  return reinterpret_cast<void*>(r);
}

int code_munmap(void* addr, size_t len) { return static_cast<int>(syscall(SYS_munmap, addr, len)); }

// ---------------------------------------------------------------------------
// The code-write model (code_memory.h)
// ---------------------------------------------------------------------------

CodeWriteModel probe_code_write_model() {
  const char* forced = getenv("FTJIT_CODE_WRITES");
  if (forced != nullptr && strcmp(forced, "remap") == 0) return CodeWriteModel::kRemapAfterWrite;
  if (forced != nullptr && strcmp(forced, "alias") == 0) return CodeWriteModel::kCoherentAlias;
  // One page, mapped as the arenas are: run a function, rewrite it through
  // the writable alias (with the ISA's cache maintenance), run it again.
  const size_t size = page_size();
  int fd = make_exec_memfd("ftjit-probe", size);
  if (fd < 0) return CodeWriteModel::kCoherentAlias;
  void* rw = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  void* rx = code_mmap(nullptr, size, PROT_READ | PROT_EXEC, MAP_SHARED, fd, 0);
  close(fd);
  CodeWriteModel model = CodeWriteModel::kCoherentAlias;
  if (rw != MAP_FAILED && rx != MAP_FAILED) {
    auto* code = static_cast<uint8_t*>(rw);
    const uint64_t at = reinterpret_cast<uint64_t>(rx);
    using Probe = uint32_t (*)();
    const size_t n1 = arch::write_return_constant(code, 1);
    arch::flush_icache(at, n1);
    const uint32_t first = reinterpret_cast<Probe>(rx)();
    const size_t n2 = arch::write_return_constant(code, 2);
    arch::flush_icache(at, n2);
    const uint32_t second = reinterpret_cast<Probe>(rx)();
    if (first == 1 && second == 1) model = CodeWriteModel::kRemapAfterWrite;
  }
  if (rw != MAP_FAILED) munmap(rw, size);
  if (rx != MAP_FAILED) code_munmap(rx, size);
  return model;
}

// Under kRemapAfterWrite, the memfd behind each executable range of ftjit's
// code memory, kept open to map its pages again (closed with the range).
struct RemapSource {
  uint64_t lo, hi;
  int fd;
  int exec_prot;  // what the range runs with (PROT_BTI kept)
  dev_t dev;
  ino_t ino;  // the program may close our descriptor and reuse its number
};
std::mutex g_remap_mu;
std::vector<RemapSource> g_remap_sources;

// Keeps a duplicate of `fd` (the memfd mapped `exec_prot` at [lo, hi) from
// offset 0) for publish_code. False if the duplicate cannot be made.
bool keep_remap_source(uint64_t lo, uint64_t hi, int fd, int exec_prot) {
  if (code_write_model() != CodeWriteModel::kRemapAfterWrite) return true;
  // Out of the way of programs that use low descriptor numbers.
  int kept = fcntl(fd, F_DUPFD_CLOEXEC, 512);
  if (kept < 0) kept = fcntl(fd, F_DUPFD_CLOEXEC, 3);
  struct stat st;
  if (kept < 0 || fstat(kept, &st) != 0) {
    if (kept >= 0) close(kept);
    return false;
  }
  std::lock_guard<std::mutex> lock(g_remap_mu);
  g_remap_sources.push_back({lo, hi, kept, exec_prot, st.st_dev, st.st_ino});
  return true;
}

// Places for `size` bytes in the free gaps of this process's address
// space (/proc/self/maps), each as close to `near` as its gap allows and
// within `limit` of it, nearest first. A loader packs libraries one
// against the other (qemu-user's does), leaving gaps of some tens of KiB
// that fixed strides step over.
std::vector<uint64_t> gaps_near(uint64_t near, size_t size, uint64_t limit) {
  std::vector<std::pair<uint64_t, uint64_t>> by_distance;  // (distance, place)
  FILE* f = std::fopen("/proc/self/maps", "re");
  if (f == nullptr) return {};
  uint64_t prev_end = 1u << 16;  // below: mmap_min_addr's
  char line[512];
  auto consider = [&](uint64_t lo, uint64_t hi) {
    if (hi <= lo || hi - lo < size) return;
    if (hi <= near) {
      const uint64_t at = hi - size;
      if (near - at < limit) by_distance.emplace_back(near - at, at);
    } else if (lo >= near) {
      if (lo - near < limit) by_distance.emplace_back(lo - near, lo);
    }
  };
  while (std::fgets(line, sizeof line, f) != nullptr) {
    uint64_t lo = 0, hi = 0;
    if (std::sscanf(line, "%" SCNx64 "-%" SCNx64, &lo, &hi) != 2) continue;
    if (lo > prev_end) consider(prev_end, lo);
    prev_end = std::max(prev_end, hi);
  }
  std::fclose(f);
  std::sort(by_distance.begin(), by_distance.end());
  std::vector<uint64_t> places;
  for (const auto& [d, at] : by_distance) places.push_back(at);
  return places;
}

void forget_remap_source(uint64_t lo) {
  std::lock_guard<std::mutex> lock(g_remap_mu);
  for (size_t i = 0; i < g_remap_sources.size(); ++i) {
    if (g_remap_sources[i].lo == lo) {
      close(g_remap_sources[i].fd);
      g_remap_sources[i] = g_remap_sources.back();
      g_remap_sources.pop_back();
      return;
    }
  }
}

}  // namespace

CodeWriteModel code_write_model() {
  static const CodeWriteModel model = probe_code_write_model();
  return model;
}

const char* code_write_model_name(CodeWriteModel m) {
  return m == CodeWriteModel::kRemapAfterWrite ? "remap after write" : "coherent alias";
}

namespace {
std::atomic<bool> g_publication_failed{false};
}  // namespace

bool code_publication_failed() { return g_publication_failed.load(std::memory_order_acquire); }

Status publish_code(uint64_t addr, size_t n) {
  arch::flush_icache(addr, n);
  if (code_write_model() != CodeWriteModel::kRemapAfterWrite || n == 0) return {};
  const uint64_t mask = ~(uint64_t{page_size()} - 1);
  const uint64_t lo = addr & mask;
  const uint64_t hi = (addr + n + page_size() - 1) & mask;
  std::lock_guard<std::mutex> lock(g_remap_mu);
  for (const RemapSource& src : g_remap_sources) {
    if (lo < src.lo || hi > src.hi) continue;
    struct stat st;
    if (fstat(src.fd, &st) != 0 || st.st_dev != src.dev || st.st_ino != src.ino) {
      g_publication_failed.store(true, std::memory_order_release);
      return make_error(FTJIT_E_SYSTEM,
                        "the program closed the descriptor of ftjit's code memory: written "
                        "code cannot be mapped again");
    }
    // The same pages of the same memfd, over themselves: the translator
    // forgets what it made of them; a thread running there meanwhile
    // finds the same bytes (the kernel swaps the mapping in one step).
    void* p = code_mmap(reinterpret_cast<void*>(lo), hi - lo, src.exec_prot,
                        MAP_SHARED | MAP_FIXED, src.fd, static_cast<off_t>(lo - src.lo));
    if (p == MAP_FAILED) {
      g_publication_failed.store(true, std::memory_order_release);
      return sys_error("mapping written code again");
    }
    return {};
  }
  g_publication_failed.store(true, std::memory_order_release);
  return make_error(FTJIT_E_INTERNAL, "published code is not in ftjit's code memory");
}

namespace {

// Replaces [lo, hi) by a private copy of its bytes, mapped `exec_prot`.
void privatize_range(uint64_t lo, uint64_t hi, int exec_prot) {
  // Copy into a fresh private mapping, make it executable, then move it over
  // the shared one in one step (mremap replaces the old mapping): the bytes
  // at `lo` are never missing, and never writable and executable at once.
  const size_t size = hi - lo;
  void* copy = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (copy == MAP_FAILED) return;
  std::memcpy(copy, reinterpret_cast<const void*>(lo), size);
  if (mprotect(copy, size, exec_prot) != 0 ||
      syscall(SYS_mremap, copy, size, size, MREMAP_MAYMOVE | MREMAP_FIXED,
              reinterpret_cast<void*>(lo)) < 0) {
    munmap(copy, size);
    return;
  }
  arch::flush_icache(lo, size);
}

uint64_t memfd_inode(int fd) {
  struct stat st;
  return fstat(fd, &st) == 0 ? static_cast<uint64_t>(st.st_ino) : 0;
}

}  // namespace

void privatize_after_fork(uint64_t lo, size_t size, uint64_t inode, int exec_prot) {
  // Only the parts of [lo, lo+size) that are still our memfd's executable
  // mapping: the engine's lists may name a range that is not. A library
  // that a thread dlclosed stays in the list of text aliases until the next
  // code-change scope forgets it (nothing stops dlclose between scopes), so
  // its range may be unmapped at fork, or hold another library since:
  // copying from it killed the child (SIGSEGV in this handler), and moving
  // a copy over another object's code would be worse. What is not ours is
  // not shared with the parent either, so there is nothing to make private.
  // /proc/self/maps read with system calls into a stack buffer: this runs
  // in a fork child handler.
  if (inode == 0) return;
  const uint64_t hi = lo + size;
  int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  char buf[4096];
  char line[512];
  size_t len = 0;
  bool overlong = false;
  auto consider = [&] {
    line[len] = '\0';
    uint64_t mlo = 0, mhi = 0, off = 0, ino = 0;
    char perms[8] = {};
    unsigned dev_major = 0, dev_minor = 0;
    if (sscanf(line, "%" SCNx64 "-%" SCNx64 " %7s %" SCNx64 " %x:%x %" SCNu64, &mlo, &mhi, perms,
               &off, &dev_major, &dev_minor, &ino) != 7) {
      return;
    }
    if (ino != inode || perms[2] != 'x' || perms[3] != 's') return;
    const uint64_t a = std::max(mlo, lo), b = std::min(mhi, hi);
    if (a < b) privatize_range(a, b, exec_prot);
  };
  for (;;) {
    ssize_t n = read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    for (ssize_t i = 0; i < n; ++i) {
      if (buf[i] == '\n') {
        if (!overlong) consider();
        len = 0;
        overlong = false;
      } else if (len + 1 < sizeof line) {
        line[len++] = buf[i];
      } else {
        overlong = true;  // a long path: the fields we read come first
      }
    }
  }
  close(fd);
}

// ---------------------------------------------------------------------------
// TextAlias
// ---------------------------------------------------------------------------

namespace {

#if defined(__aarch64__)
// What the loader does when the kernel's record is not to be had: a file
// marked BTI, on a CPU with BTI, is mapped guarded (glibc's ld.so for
// libraries, the kernel or qemu-user's loader for the program).
int bti_guard_by_marking(const std::string& path) {
  if (path.empty() || path[0] != '/' || (getauxval(AT_HWCAP2) & kHwcap2Bti) == 0) return 0;
  std::ifstream file(path, std::ios::binary);
  std::vector<uint8_t> head(64 * 1024);
  file.read(reinterpret_cast<char*>(head.data()), static_cast<std::streamsize>(head.size()));
  head.resize(static_cast<size_t>(file.gcount()));
  return elf_marks_bti(head) ? PROT_BTI : 0;
}
#endif

// PROT_BTI if the executable mapping that starts at `lo` (of file `path`)
// is BTI-guarded, else 0; not an arm64 process: 0. The kernel says so in
// smaps' VmFlags ("bt"). An smaps whose flags for this executable mapping
// lack "ex" is not the kernel's (qemu-user writes the same few flags for
// every mapping): then the file's marking decides, as it did for the
// loader.
int bti_guard_of(uint64_t lo, const std::string& path) {
#if defined(__aarch64__)
  std::ifstream smaps("/proc/self/smaps");
  std::string line;
  bool inside = false;
  while (std::getline(smaps, line)) {
    uint64_t a = 0, b = 0;
    // A mapping's first line ("lo-hi perms ..."); its fields ("Name:  v").
    if (line.find(':') > line.find(' ') && sscanf(line.c_str(), "%" SCNx64 "-%" SCNx64, &a, &b) == 2) {
      inside = a == lo;
      continue;
    }
    if (!inside || line.compare(0, 8, "VmFlags:") != 0) continue;
    std::istringstream flags(line.substr(8));
    std::string flag;
    bool bt = false, ex = false;
    while (flags >> flag) {
      bt |= flag == "bt";
      ex |= flag == "ex";
    }
    if (!ex) return bti_guard_by_marking(path);
    return bt ? PROT_BTI : 0;
  }
  return bti_guard_by_marking(path);
#else
  (void)lo;
  (void)path;
  return 0;
#endif
}

}  // namespace

Result<ExecMapping> find_exec_mapping(uint64_t addr) {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line)) {
    uint64_t lo, hi, off;
    char perms[8] = {};
    int path_at = 0;
    if (sscanf(line.c_str(), "%" SCNx64 "-%" SCNx64 " %7s %" SCNx64 " %*s %*s %n", &lo, &hi,
               perms, &off, &path_at) < 4) {
      continue;
    }
    if (addr < lo || addr >= hi) continue;
    if (perms[2] != 'x') {
      return make_error(FTJIT_E_INTERNAL, "address is not in an executable mapping");
    }
    const std::string path = path_at > 0 ? line.substr(static_cast<size_t>(path_at)) : "";
    ExecMapping m{lo, hi, off, path, PROT_READ | PROT_EXEC | bti_guard_of(lo, path)};
    return m;
  }
  return make_error(FTJIT_E_INTERNAL, "address is not mapped");
}

Result<std::unique_ptr<TextAlias>> TextAlias::create(uint64_t lo, uint64_t hi, std::string path,
                                                     uint64_t file_offset, int exec_prot) {
  size_t size = hi - lo;
  int fd = make_exec_memfd("ftjit-text", size);
  if (fd < 0) return sys_error("memfd_create for module text");
  void* rw = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (rw == MAP_FAILED) {
    close(fd);
    return sys_error("mmap of the text alias");
  }
  std::memcpy(rw, reinterpret_cast<const void*>(lo), size);
  const uint64_t inode = memfd_inode(fd);
  if (!keep_remap_source(lo, hi, fd, exec_prot)) {
    close(fd);
    munmap(rw, size);
    return sys_error("keeping the text alias's memfd");
  }
  // Replacing the mapping is atomic for the other threads: a fault on the
  // range waits for the mmap lock and then finds identical bytes, guarded
  // as they were.
  void* rx = code_mmap(reinterpret_cast<void*>(lo), size, exec_prot, MAP_SHARED | MAP_FIXED, fd, 0);
  int e = errno;
  close(fd);
  if (rx == MAP_FAILED) {
    forget_remap_source(lo);
    munmap(rw, size);
    errno = e;
    return sys_error("mmap of module text onto its alias");
  }
  // The same bytes, but in new pages.
  arch::flush_icache(lo, size);
  std::unique_ptr<TextAlias> t(new TextAlias());
  t->lo_ = lo;
  t->hi_ = hi;
  t->rw_ = static_cast<uint8_t*>(rw);
  t->path_ = std::move(path);
  t->file_offset_ = file_offset;
  t->inode_ = inode;
  t->exec_prot_ = exec_prot;
  return t;
}

void TextAlias::restore_file_mapping() {
  if (path_.empty() || path_[0] != '/') return;
  int fd = open(path_.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  size_t size = hi_ - lo_;
  void* file = mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, static_cast<off_t>(file_offset_));
  if (file != MAP_FAILED) {
    if (std::memcmp(file, rw_, size) == 0) {
      code_mmap(reinterpret_cast<void*>(lo_), size, exec_prot_, MAP_PRIVATE | MAP_FIXED, fd,
                static_cast<off_t>(file_offset_));
    }
    munmap(file, size);
  }
  close(fd);
}

TextAlias::~TextAlias() {
  forget_remap_source(lo_);
  if (rw_ != nullptr) munmap(rw_, hi_ - lo_);
}

// ---------------------------------------------------------------------------
// CodeArena
// ---------------------------------------------------------------------------

Result<std::unique_ptr<CodeArena>> CodeArena::create_near(uint64_t near, int64_t reach,
                                                          size_t size) {
  size = (size + page_size() - 1) & ~(page_size() - 1);
  // Probe hints outwards from `near`, below first (where the gap before a
  // PIE or a library usually is), until within reach: in 32 MiB steps,
  // keeping 64 MiB of margin, for a reach of gigabytes (x86-64's call,
  // +-2 GiB); for a shorter one (arm64's bl, +-128 MiB; riscv64's jal,
  // +-1 MiB) in steps of a sixteenth of it, keeping a quarter. (arm64 had
  // 32 MiB steps: two places, both refused at once now and then under the
  // kernel leg's hazards.)
  const uint64_t r = static_cast<uint64_t>(reach);
  const bool short_reach = r < (1ull << 30);
  const uint64_t margin = short_reach ? r / 4 : 64ull << 20;
  if (r <= size + margin) {
    return make_error(FTJIT_E_OUT_OF_RANGE, "trampoline memory of " + std::to_string(size) +
                                                " bytes cannot lie within " + std::to_string(r) + " bytes");
  }
  const uint64_t limit = r - size - margin;
  const uint64_t step =
      short_reach ? std::max<uint64_t>(page_size(), (limit / 16) & ~(uint64_t{page_size()} - 1)) : 32ull << 20;
  int fd = make_exec_memfd("ftjit-trampolines", size);
  if (fd < 0) return sys_error("memfd_create for trampolines");
  void* rw = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (rw == MAP_FAILED) {
    close(fd);
    return sys_error("mmap of trampoline alias");
  }
  void* rx = MAP_FAILED;
  int probes = 0, taken = 0, last_errno = 0;
  auto probe_round = [&] {
    for (uint64_t dist = step; dist < limit && rx == MAP_FAILED; dist += step) {
      for (int dir = 0; dir < 2 && rx == MAP_FAILED; ++dir) {
        uint64_t hint = dir == 0 ? near - dist : near + dist;
        if (dir == 0 && dist > near) continue;
        hint &= ~(uint64_t{page_size()} - 1);
        void* p = code_mmap(reinterpret_cast<void*>(hint), size, PROT_READ | PROT_EXEC,
                            MAP_SHARED | MAP_FIXED_NOREPLACE, fd, 0);
        ++probes;
        if (p == MAP_FAILED) {
          if (errno == EEXIST) ++taken;
          last_errno = errno;
          continue;
        }
        if (p != reinterpret_cast<void*>(hint)) {  // old kernels treat it as a hint
          code_munmap(p, size);
          continue;
        }
        rx = p;
      }
    }
  };
  // A short reach first tries the free gaps nearest `near`, as the maps
  // show them; the strides follow where none was taken.
  if (short_reach) {
    for (uint64_t at : gaps_near(near, size, limit)) {
      void* p = code_mmap(reinterpret_cast<void*>(at), size, PROT_READ | PROT_EXEC,
                          MAP_SHARED | MAP_FIXED_NOREPLACE, fd, 0);
      ++probes;
      if (p == reinterpret_cast<void*>(at)) {
        rx = p;
        break;
      }
      if (p != MAP_FAILED) code_munmap(p, size);  // old kernels treat it as a hint
    }
  }
  // A round whose every refusal was something else than "taken" (EPERM,
  // seen from a kernel under load while another thread dlcloses) is tried
  // again after a moment, twice.
  if (rx == MAP_FAILED) probe_round();
  for (int round = 1; round < 3 && rx == MAP_FAILED && taken == 0; ++round) {
    const timespec pause{0, 2'000'000};
    nanosleep(&pause, nullptr);
    probe_round();
  }
  const uint64_t inode = memfd_inode(fd);
  // Every fixed placement refused with something else than "taken" (seen:
  // EPERM for each of them, from a kernel under load while another thread
  // dlcloses, though a mapping the kernel places itself works): take the
  // kernel's choice if it is within reach.
  if (rx == MAP_FAILED && taken == 0 && probes > 0) {
    void* p = code_mmap(nullptr, size, PROT_READ | PROT_EXEC, MAP_SHARED, fd, 0);
    if (p != MAP_FAILED) {
      const uint64_t at = reinterpret_cast<uint64_t>(p);
      const uint64_t dist = at > near ? at + size - near : near - at;
      if (dist < static_cast<uint64_t>(reach)) {
        rx = p;
      } else {
        code_munmap(p, size);
      }
    }
  }
  // Trampolines are entered by direct branches and leave by `ret` or
  // into other trampolines: their pages need no guard (arm64).
  if (rx != MAP_FAILED && !keep_remap_source(reinterpret_cast<uint64_t>(rx),
                                             reinterpret_cast<uint64_t>(rx) + size, fd,
                                             PROT_READ | PROT_EXEC)) {
    const int e = errno;
    close(fd);
    code_munmap(rx, size);
    munmap(rw, size);
    errno = e;
    return sys_error("keeping the trampoline memfd");
  }
  close(fd);
  if (rx == MAP_FAILED) {
    munmap(rw, size);
    char b[160];
    snprintf(b, sizeof b, "no free address range within branch reach of 0x%" PRIx64
             " (%d places tried, %d taken; last: %s)", near, probes, taken,
             last_errno != 0 ? strerror(last_errno) : "none");
    return make_error(FTJIT_E_OUT_OF_RANGE, b);
  }
  std::unique_ptr<CodeArena> a(new CodeArena());
  a->rx_ = reinterpret_cast<uint64_t>(rx);
  a->rw_ = static_cast<uint8_t*>(rw);
  a->size_ = size;
  a->inode_ = inode;
  a->free_.push_back({a->rx_, size});
  // Traps everywhere, so a stray jump into unused space stops loudly:
  // fresh pages are zeros, which trap on arm64 and riscv64; on x86-64
  // allocate() fills them with int3 as it first hands them out.
  a->trapped_ = arch::kZeroIsTrap ? size : 0;
  return a;
}

CodeArena::~CodeArena() {
  forget_remap_source(rx_);
  if (rw_ != nullptr) {
    munmap(rw_, size_);
    if (!keep_code_) code_munmap(reinterpret_cast<void*>(rx_), size_);
  }
}

bool CodeArena::reaches(uint64_t addr, int64_t reach) const {
  auto dist = [&](uint64_t a) {
    return a > addr ? static_cast<int64_t>(a - addr) : static_cast<int64_t>(addr - a);
  };
  return dist(rx_) < reach && dist(rx_ + size_) < reach;
}

uint64_t CodeArena::allocate(size_t n, size_t align) {
  n = (n + align - 1) & ~(align - 1);
  for (size_t i = 0; i < free_.size(); ++i) {
    Block& b = free_[i];
    uint64_t start = (b.addr + align - 1) & ~(uint64_t{align} - 1);
    if (start + n > b.addr + b.size) continue;
    uint64_t end = start + n;
    Block tail{end, static_cast<size_t>(b.addr + b.size - end)};
    if (start > b.addr) {
      b.size = start - b.addr;
      if (tail.size > 0) free_.insert(free_.begin() + static_cast<long>(i) + 1, tail);
    } else if (tail.size > 0) {
      b = tail;
    } else {
      free_.erase(free_.begin() + static_cast<long>(i));
    }
    used_.push_back({start, n});
    if (end - rx_ > trapped_) {
      // Whole 64 KiB steps: a few fills for an arena's life, not one a page.
      constexpr size_t kStep = size_t{64} << 10;
      const size_t upto = std::min(size_, (static_cast<size_t>(end - rx_) + kStep - 1) & ~(kStep - 1));
      arch::fill_with_traps(rw_ + trapped_, upto - trapped_);
      trapped_ = upto;
    }
    return start;
  }
  return 0;
}

void CodeArena::free(uint64_t addr) {
  auto it = std::find_if(used_.begin(), used_.end(), [&](const Block& b) { return b.addr == addr; });
  if (it == used_.end()) return;
  Block blk = *it;
  used_.erase(it);
  arch::fill_with_traps(rw(blk.addr), blk.size);
  (void)publish_code(blk.addr, blk.size);
  auto pos = std::lower_bound(free_.begin(), free_.end(), blk.addr,
                              [](const Block& b, uint64_t a) { return b.addr < a; });
  pos = free_.insert(pos, blk);
  // Coalesce with neighbours.
  if (pos + 1 != free_.end() && pos->addr + pos->size == (pos + 1)->addr) {
    pos->size += (pos + 1)->size;
    free_.erase(pos + 1);
  }
  if (pos != free_.begin() && (pos - 1)->addr + (pos - 1)->size == pos->addr) {
    (pos - 1)->size += pos->size;
    free_.erase(pos);
  }
}

}  // namespace ftjit
