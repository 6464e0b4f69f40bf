// SPDX-License-Identifier: MIT
// The file side of IFUNC relocation: IRELATIVE words (core/ifunc_slots.h)
// of Debian's x86-64 and arm64 libc and of the test library
// (ifunc_live_target.c); .eh_frame FDE ranges (core/eh_frame_index.h)
// against the symbols' sizes and against corruption; a function of the
// stripped library, known by its FDE alone, planned with the FDE's size;
// what `ftjit list --relocate` says of an IFUNC, of a file and of a process.
#include <dlfcn.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <iterator>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "core/eh_frame_index.h"
#include "core/elf_image.h"
#include "core/ifunc_slots.h"
#include "core/module_relocator.h"

namespace ftjit {
namespace {

constexpr char kX86Libc[] = "/lib/x86_64-linux-gnu/libc.so.6";
constexpr char kArm64Libc[] = "/usr/aarch64-linux-gnu/lib/libc.so.6";
constexpr uint32_t kX86Irelative = 37, kArm64Irelative = 1032;

std::vector<uint8_t> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

const ElfSymbol* symbol(const ElfImage& image, const std::string& name) {
  for (const ElfSymbol& s : image.functions())
    if (s.name == name) return &s;
  return nullptr;
}

struct Loaded {
  std::vector<uint8_t> bytes;
  std::optional<ElfImage> image;
};
Loaded load(const std::string& path) {
  Loaded l;
  l.bytes = read_file(path);
  if (auto image = ElfImage::parse(l.bytes)) l.image.emplace(std::move(image.value()));
  return l;
}

// How many of the file's IFUNC symbols (distinct resolvers) have an
// IRELATIVE word.
std::pair<size_t, size_t> ifuncs_with_words(const ElfImage& image, std::span<const IrelativeSlot> slots) {
  size_t ifuncs = 0, with = 0;
  uint64_t last = ~uint64_t{0};
  for (const ElfSymbol& s : image.functions()) {
    if (!s.ifunc || s.value == last) continue;
    last = s.value;
    ++ifuncs;
    with += irelative_slots_of(slots, s.value).empty() ? 0 : 1;
  }
  return {ifuncs, with};
}

TEST(IrelativeSlots, X86LibcHasWordsForMemcpyAndStrlen) {
  Loaded libc = load(kX86Libc);
  if (libc.bytes.empty()) GTEST_SKIP() << "no " << kX86Libc;
  ASSERT_TRUE(libc.image.has_value());
  auto slots = irelative_slots(libc.bytes, *libc.image, kX86Irelative);
  ASSERT_TRUE(slots.ok()) << slots.error().message;
  EXPECT_GE(slots->size(), 30u);  // Debian 12: 40
  for (const char* name : {"memcpy", "strlen", "strchrnul", "memmove"}) {
    const ElfSymbol* s = symbol(*libc.image, name);
    ASSERT_NE(s, nullptr) << name;
    EXPECT_TRUE(s->ifunc) << name;
    EXPECT_FALSE(irelative_slots_of(*slots, s->value).empty()) << name << ": no IRELATIVE word";
  }
  // Every word lies in the file's writable data, every addend is code.
  for (const IrelativeSlot& s : *slots) {
    bool code = false;
    for (const ElfImage::Segment& seg : libc.image->load_segments())
      code |= (seg.flags & 1) != 0 && s.resolver >= seg.vaddr && s.resolver < seg.vaddr + seg.memsz;
    EXPECT_TRUE(code) << std::hex << s.resolver;
  }
  // Another type finds nothing of these.
  auto none = irelative_slots(libc.bytes, *libc.image, kArm64Irelative);
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
  const auto [ifuncs, with] = ifuncs_with_words(*libc.image, *slots);
  std::printf("x86-64 libc: %zu IRELATIVE words; %zu of %zu IFUNC resolvers have one\n", slots->size(), with, ifuncs);
}

// arm64's libc calls most of its string functions directly: only memchr
// and strlen keep an IRELATIVE word; memcpy has none (a process resolves
// it for dlsym, the runtime's fallback).
TEST(IrelativeSlots, Arm64LibcHasAWordForStrlenNotMemcpy) {
  Loaded libc = load(kArm64Libc);
  if (libc.bytes.empty()) GTEST_SKIP() << "no " << kArm64Libc;
  ASSERT_TRUE(libc.image.has_value());
  auto slots = irelative_slots(libc.bytes, *libc.image, kArm64Irelative);
  ASSERT_TRUE(slots.ok()) << slots.error().message;
  EXPECT_FALSE(slots->empty());
  const ElfSymbol* strlen_sym = symbol(*libc.image, "strlen");
  const ElfSymbol* memcpy_sym = symbol(*libc.image, "memcpy");
  ASSERT_NE(strlen_sym, nullptr);
  ASSERT_NE(memcpy_sym, nullptr);
  EXPECT_FALSE(irelative_slots_of(*slots, strlen_sym->value).empty());
  EXPECT_TRUE(irelative_slots_of(*slots, memcpy_sym->value).empty());
  const auto [ifuncs, with] = ifuncs_with_words(*libc.image, *slots);
  std::printf("arm64 libc: %zu IRELATIVE words; %zu of %zu IFUNC resolvers have one\n", slots->size(), with, ifuncs);
}

TEST(IrelativeSlots, TheTestLibraryHasWordsForWhatItCalls) {
  Loaded lib = load(FTJIT_IFUNC_TARGET_STRIPPED);
  ASSERT_TRUE(lib.image.has_value());
  const IsaTraits& traits = backend_for(lib.image->isa())->traits();
  auto slots = irelative_slots(lib.bytes, *lib.image, traits.reloc_irelative);
  ASSERT_TRUE(slots.ok()) << slots.error().message;
  const ElfSymbol* mix = symbol(*lib.image, "ifl_mix");
  const ElfSymbol* twin = symbol(*lib.image, "ifl_twin");
  const ElfSymbol* lone = symbol(*lib.image, "ifl_lone");
  ASSERT_TRUE(mix && twin && lone);
  EXPECT_EQ(irelative_slots_of(*slots, mix->value).size(), 1u);
  EXPECT_EQ(irelative_slots_of(*slots, twin->value).size(), 1u);
  EXPECT_TRUE(irelative_slots_of(*slots, lone->value).empty());
  // A file cut inside its relocation table: an error, not a crash.
  std::vector<uint8_t> cut(lib.bytes.begin(), lib.bytes.begin() + 0x500);
  auto r = irelative_slots(cut, *lib.image, traits.reloc_irelative);
  EXPECT_TRUE(!r.ok() || r->empty());
}

// mix_impl and lone_impl are static: the stripped file has no symbol for
// them, only their FDEs, whose pc_range is the symbol's size.
TEST(FdeOnlyFunctions, PlannedWithTheFdesSize) {
  Loaded full = load(FTJIT_IFUNC_TARGET);
  ASSERT_TRUE(full.image.has_value());
  auto stripped = ModuleRelocator::open(FTJIT_IFUNC_TARGET_STRIPPED, decoder_for);
  ASSERT_TRUE(stripped.ok()) << stripped.error().message;
  const ElfImage& image = (*stripped)->image();
  auto ranges = eh_frame_function_ranges((*stripped)->file(), image);
  ASSERT_TRUE(ranges.ok()) << ranges.error().message;
  for (const char* name : {"mix_impl", "lone_impl"}) {
    const ElfSymbol* s = symbol(*full.image, name);
    ASSERT_NE(s, nullptr) << name;
    ASSERT_EQ(image.function_at(s->value), nullptr) << name << " has a symbol in the stripped file";
    const FdeRange* fde = fde_at(*ranges, s->value);
    ASSERT_NE(fde, nullptr) << name;
    EXPECT_EQ(fde->size, s->size) << name;
    const RelocationPlan plan = (*stripped)->plan(s->value);
    EXPECT_TRUE(plan.ok()) << name << ": " << relocation_refusal_name(plan.refusal) << ": " << plan.why;
    EXPECT_EQ(plan.entry, s->value);
    // One byte on: neither a symbol nor an FDE starts there.
    EXPECT_EQ((*stripped)->plan(s->value + 1).refusal, RelocationRefusal::kNoSize);
  }
  // The IFUNC symbol itself is still its resolver: refused, named so.
  const RelocationPlan resolver = (*stripped)->plan(symbol(image, "ifl_mix")->value);
  EXPECT_EQ(resolver.refusal, RelocationRefusal::kIfunc);
  EXPECT_NE(resolver.why.find("list -p PID --relocate"), std::string::npos) << resolver.why;
  EXPECT_EQ(ifunc_implementation_name(image, symbol(*full.image, "mix_impl")->value, "ifl_mix"),
            "ifl_mix implementation");
  EXPECT_EQ(ifunc_implementation_name(*full.image, symbol(*full.image, "mix_impl")->value, "ifl_mix"), "mix_impl");
}

// The FDE ranges of libc agree with its symbols' sizes, one per start.
TEST(FdeRanges, AgreeWithLibcsSymbolSizes) {
  for (const char* path : {kX86Libc, kArm64Libc}) {
    Loaded libc = load(path);
    if (libc.bytes.empty()) continue;
    ASSERT_TRUE(libc.image.has_value()) << path;
    auto starts = eh_frame_function_starts(libc.bytes, *libc.image);
    auto ranges = eh_frame_function_ranges(libc.bytes, *libc.image);
    ASSERT_TRUE(starts.ok() && ranges.ok()) << path;
    ASSERT_EQ(starts->size(), ranges->size()) << path;
    size_t sized = 0, with_fde = 0, agree = 0;
    for (const FdeRange& r : *ranges) sized += r.size != 0 ? 1 : 0;
    for (const ElfSymbol& s : libc.image->functions()) {
      const FdeRange* r = fde_at(*ranges, s.value);
      if (r == nullptr || s.size == 0) continue;
      ++with_fde;
      agree += r->size == s.size ? 1 : 0;
    }
    EXPECT_EQ(sized, ranges->size()) << path << ": an FDE of the linker's own could not be read";
    EXPECT_GT(agree * 100, with_fde * 95) << path << ": " << agree << " of " << with_fde;
    std::printf("%s: %zu FDEs; of %zu symbols with an FDE, %zu have its size\n", path, ranges->size(), with_fde, agree);
  }
}

// ---------------------------------------------------------------------------
// Corruption: each costs the FDEs it touches their size, nothing else, and
// never a crash.
// ---------------------------------------------------------------------------

class FdeCorruption : public ::testing::Test {
 protected:
  void SetUp() override {
    lib_ = load(FTJIT_IFUNC_TARGET);
    ASSERT_TRUE(lib_.image.has_value());
    const ElfSymbol* s = symbol(*lib_.image, "mix_impl");
    ASSERT_NE(s, nullptr);
    mix_ = s->value;
    auto good = eh_frame_function_ranges(lib_.bytes, *lib_.image);
    ASSERT_TRUE(good.ok());
    good_ = std::move(good.value());
    ASSERT_NE(fde_at(good_, mix_), nullptr);
    ASSERT_NE(fde_at(good_, mix_)->size, 0u);
    // The table: version, 3 encodings, eh_frame_ptr (sdata4), fde_count
    // (udata4), then {initial location, FDE} pairs, datarel sdata4.
    const ElfImage::Segment& hdr = lib_.image->eh_frame_hdr();
    const uint8_t* h = lib_.bytes.data() + hdr.offset;
    ASSERT_EQ(h[1], 0x1b);
    ASSERT_EQ(h[2], 0x03);
    uint32_t count;
    std::memcpy(&count, h + 8, 4);
    for (uint32_t i = 0; i < count; ++i) {
      int32_t loc, fde;
      std::memcpy(&loc, h + 12 + i * 8, 4);
      std::memcpy(&fde, h + 16 + i * 8, 4);
      if (hdr.vaddr + loc == mix_) fde_ = offset_of(hdr.vaddr + fde);
    }
    ASSERT_NE(fde_, 0u);
    int32_t cie_ptr;
    std::memcpy(&cie_ptr, lib_.bytes.data() + fde_ + 4, 4);
    cie_ = fde_ + 4 - cie_ptr;
  }
  uint64_t offset_of(uint64_t vaddr) const {
    for (const ElfImage::Segment& seg : lib_.image->load_segments())
      if (vaddr >= seg.vaddr && vaddr - seg.vaddr < seg.filesz) return seg.offset + (vaddr - seg.vaddr);
    return 0;
  }
  // The ranges of `bytes`, which must still index every start.
  std::vector<FdeRange> ranges(const std::vector<uint8_t>& bytes) const {
    auto r = eh_frame_function_ranges(bytes, *lib_.image);
    EXPECT_TRUE(r.ok());
    if (!r.ok()) return {};
    EXPECT_EQ(r->size(), good_.size());
    return std::move(r.value());
  }
  // mix_impl's FDE lost its size; every other one kept its own.
  void expect_only_mix_lost(const std::vector<uint8_t>& bytes, const char* what) {
    const std::vector<FdeRange> r = ranges(bytes);
    for (size_t i = 0; i < r.size() && i < good_.size(); ++i) {
      const uint64_t want = r[i].start == mix_ ? 0 : good_[i].size;
      EXPECT_EQ(r[i].size, want) << what << std::hex << " at " << r[i].start;
    }
  }
  void put32(std::vector<uint8_t>& b, uint64_t at, uint32_t v) { std::memcpy(b.data() + at, &v, 4); }

  Loaded lib_;
  uint64_t mix_ = 0, fde_ = 0, cie_ = 0;
  std::vector<FdeRange> good_;
};

TEST_F(FdeCorruption, AnFdesOwnFieldsCostItsSizeOnly) {
  std::vector<uint8_t> b = lib_.bytes;
  put32(b, fde_, 0xfffffff0);  // a length past the file
  expect_only_mix_lost(b, "length");
  b = lib_.bytes;
  put32(b, fde_, 0xffffffff);  // 64-bit length, whose 8 bytes say nonsense
  expect_only_mix_lost(b, "extended length");
  b = lib_.bytes;
  put32(b, fde_ + 4, 0);  // a CIE, not an FDE
  expect_only_mix_lost(b, "CIE id");
  b = lib_.bytes;
  put32(b, fde_ + 4, 0x7fffffff);  // a CIE before the file's start
  expect_only_mix_lost(b, "CIE pointer");
  b = lib_.bytes;
  put32(b, fde_ + 4, 4);  // "the CIE" is the FDE's own length field
  expect_only_mix_lost(b, "CIE pointer into itself");
  b = lib_.bytes;
  int32_t begin;
  std::memcpy(&begin, b.data() + fde_ + 8, 4);
  put32(b, fde_ + 8, static_cast<uint32_t>(begin + 1));  // pc_begin not the index's
  expect_only_mix_lost(b, "pc_begin");
  b = lib_.bytes;
  put32(b, fde_ + 12, 0x80000000);  // a negative pc_range
  expect_only_mix_lost(b, "pc_range");
}

TEST_F(FdeCorruption, ABadCieCostsItsFdesTheirSizes) {
  for (int field : {0, 1, 2}) {
    std::vector<uint8_t> b = lib_.bytes;
    if (field == 0) b[cie_ + 8] = 9;          // version
    if (field == 1) b[cie_ + 10] = 'Q';       // "zR" -> "zQ": an augmentation of unknown size
    if (field == 2) put32(b, cie_, 0xfffffff0);  // length
    const std::vector<FdeRange> r = ranges(b);
    EXPECT_EQ(fde_at(r, mix_)->size, 0u) << field;
  }
}

TEST_F(FdeCorruption, ACutFileOrRandomBytesNeverCrash) {
  // The file ends inside mix_impl's FDE (the image says it goes on).
  std::vector<uint8_t> cut(lib_.bytes.begin(), lib_.bytes.begin() + static_cast<long>(fde_ + 10));
  auto r = eh_frame_function_ranges(cut, *lib_.image);
  if (r.ok() && fde_at(*r, mix_) != nullptr) {
    EXPECT_EQ(fde_at(*r, mix_)->size, 0u);
  }
  // Random bytes over .eh_frame: sizes stay within the address space.
  const uint64_t lo = cie_, hi = std::min<uint64_t>(lib_.bytes.size(), fde_ + 256);
  std::mt19937 rng(7);
  for (int round = 0; round < 3000; ++round) {
    std::vector<uint8_t> b = lib_.bytes;
    for (int k = 0; k < 1 + round % 6; ++k) b[lo + rng() % (hi - lo)] = static_cast<uint8_t>(rng());
    auto got = eh_frame_function_ranges(b, *lib_.image);
    if (!got.ok()) continue;
    for (const FdeRange& f : *got) ASSERT_GE(f.start + f.size, f.start);
  }
}

// ---------------------------------------------------------------------------
// `ftjit list --relocate`
// ---------------------------------------------------------------------------

#ifdef FTJIT_CLI
std::string run(const std::string& command) {
  std::string out;
  if (std::FILE* p = popen(command.c_str(), "r")) {
    char buf[4096];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
    pclose(p);
  }
  return out;
}

// The line of `out` whose NAME column is `name`.
std::string line_of(const std::string& out, const std::string& name) {
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);)
    if (line.find("\t" + name + "\t") != std::string::npos) return line;
  return "";
}

// A file: an IFUNC is refused, and the line says where it is named.
TEST(ListRelocate, AFileSaysTheImplementationIsChosenAtRunTime) {
  const std::string out = run(std::string(FTJIT_CLI) + " list " + kX86Libc + " --relocate --filter 'libc.so.6!strlen' 2>&1");
  const std::string line = line_of(out, "strlen");
  EXPECT_NE(line.find("refused:ifunc"), std::string::npos) << out;
  EXPECT_NE(line.find("chosen at run time"), std::string::npos) << line;
  EXPECT_NE(line.find("list -p PID --relocate"), std::string::npos) << line;
  EXPECT_NE(out.find("ifunc 1"), std::string::npos) << out;  // the count line's column
}

// A process (a forked copy of this one: the same libc, where this one has
// it): strlen is listed at the implementation libc's own scope gives here
// (RTLD_DEFAULT may give a sanitizer's interceptor instead), named, with
// its verdict; strstr, which libc never calls itself, has no IRELATIVE word.
TEST(ListRelocate, AProcessNamesEachIfuncsImplementation) {
  const pid_t child = fork();
  if (child == 0) {
    for (;;) pause();
  }
  ASSERT_GT(child, 0);
  const std::string out = run(std::string(FTJIT_CLI) + " list -p " + std::to_string(child) +
                              " --relocate --filter 'libc.so.6!strlen' --filter 'libc.so.6!strstr' 2>&1");
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  void* libc = dlopen("libc.so.6", RTLD_LAZY | RTLD_NOLOAD);
  ASSERT_NE(libc, nullptr) << dlerror();
  char want[32];
  std::snprintf(want, sizeof want, "%#llx\t",
                static_cast<unsigned long long>(reinterpret_cast<uintptr_t>(dlsym(libc, "strlen"))));
  dlclose(libc);
  const std::string strlen_line = line_of(out, "strlen");
  EXPECT_EQ(strlen_line.rfind(want, 0), 0u) << "not at dlsym's strlen " << want << ": " << out;
  EXPECT_NE(strlen_line.find("\trelocate\tstrlen\tIFUNC, implementation "), std::string::npos) << strlen_line;
  EXPECT_NE(strlen_line.find("(libc.so.6+0x"), std::string::npos) << strlen_line;
  const std::string strstr_line = line_of(out, "strstr");
  EXPECT_NE(strstr_line.find("refused:ifunc"), std::string::npos) << out;
  EXPECT_NE(strstr_line.find("without an IRELATIVE word"), std::string::npos) << strstr_line;
  EXPECT_NE(out.find("1 IFUNCs listed at the implementation this process uses"), std::string::npos) << out;
}
#endif

}  // namespace
}  // namespace ftjit
