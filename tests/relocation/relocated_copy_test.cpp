// SPDX-License-Identifier: MIT
// Relocated copies run: each accepted shape of fixtures/x86_64_shapes.S,
// loaded, its first instructions relocated far away (about a GiB, where a
// RIP-relative field or a rel32 branch must be recomputed and a rel8 one
// cannot reach), and the copy called in place of the function: it must
// return what the function returns, on both sides of every branch.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <sys/mman.h>

#include <cstring>
#include <fstream>
#include <iterator>
#include <vector>

#include "backends/backend.h"
#include "core/eh_frame_index.h"
#include "core/elf_image.h"
#include "core/relocation_plan.h"

namespace ftjit {
namespace {

class RelocatedCopy86 : public ::testing::Test {
 protected:
  void SetUp() override {
    std::ifstream in(FTJIT_RELOCATION_SHAPES_X86_64, std::ios::binary);
    bytes_.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    auto image = ElfImage::parse(bytes_);
    ASSERT_TRUE(image.ok());
    image_.emplace(std::move(image.value()));
    decoder_ = decoder_for(Isa::kX86_64);
    ASSERT_NE(decoder_, nullptr);
    auto starts = eh_frame_function_starts(bytes_, *image_);
    ASSERT_TRUE(starts.ok());
    starts_ = std::move(starts.value());
    refs_.emplace(CodeReferences::sweep(bytes_, *image_, *decoder_));
    handle_ = dlopen(FTJIT_RELOCATION_SHAPES_X86_64, RTLD_NOW | RTLD_LOCAL);
    ASSERT_NE(handle_, nullptr) << dlerror();
  }
  void TearDown() override {
    for (auto [p, n] : maps_) munmap(p, n);
    if (handle_ != nullptr) dlclose(handle_);
  }

  // The function `name`'s copy, placed about `distance` bytes from it.
  void* copy_of(const char* name, int64_t distance) {
    void* fn = dlsym(handle_, name);
    EXPECT_NE(fn, nullptr) << name;
    const ElfSymbol* sym = nullptr;
    for (const ElfSymbol& s : image_->functions())
      if (s.name == name) sym = &s;
    EXPECT_NE(sym, nullptr) << name;
    if (fn == nullptr || sym == nullptr) return nullptr;
    RelocationPlan plan = plan_relocation(*sym, bytes_, *image_, *decoder_, *refs_, starts_);
    EXPECT_TRUE(plan.ok()) << name << ": " << plan.why;
    if (!plan.ok()) return nullptr;
    // From link-time addresses to the loaded ones: every address of the
    // plan lies in the module.
    const uint64_t bias = reinterpret_cast<uint64_t>(fn) - sym->value;
    plan.entry += bias;
    plan.patch_at += bias;
    for (DecodedInsn& i : plan.moved) {
      i.address += bias;
      if (i.has_target) i.target += bias;
    }
    const size_t page = 4096, length = 2 * page;
    void* at = nullptr;
    for (int64_t d = distance; d > 0 && at == nullptr; d -= 64 * page) {
      void* want = reinterpret_cast<void*>((reinterpret_cast<uint64_t>(fn) + static_cast<uint64_t>(d)) & ~(page - 1));
      void* p = mmap(want, length, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
      if (p != MAP_FAILED) at = p;
    }
    EXPECT_NE(at, nullptr);
    if (at == nullptr) return nullptr;
    maps_.emplace_back(at, length);
    const uint64_t copy_at = reinterpret_cast<uint64_t>(at) + 64;
    auto copy = relocated_copy(plan, {static_cast<const uint8_t*>(fn), 64}, copy_at, *decoder_);
    EXPECT_TRUE(copy.ok()) << name << ": " << (copy.ok() ? "" : copy.error().message);
    if (!copy.ok()) return nullptr;
    EXPECT_EQ(copy->moved_to.size(), plan.moved.size());
    std::memset(at, 0xcc, length);
    std::memcpy(reinterpret_cast<void*>(copy_at), copy->bytes.data(), copy->bytes.size());
    EXPECT_EQ(mprotect(at, length, PROT_READ | PROT_EXEC), 0);
    __builtin___clear_cache(static_cast<char*>(at), static_cast<char*>(at) + length);
    return reinterpret_cast<void*>(copy_at);
  }

  std::vector<uint8_t> bytes_;
  std::optional<ElfImage> image_;
  const InstructionDecoder* decoder_ = nullptr;
  std::vector<uint64_t> starts_;
  std::optional<CodeReferences> refs_;
  void* handle_ = nullptr;
  std::vector<std::pair<void*, size_t>> maps_;
};

using IntFn = int (*)(long);
constexpr int64_t kOneGiB = int64_t{1} << 30;

TEST_F(RelocatedCopy86, RipRelativeWithAnImmediateReadsTheSameByteFromAGiBAway) {
  auto original = reinterpret_cast<IntFn>(dlsym(handle_, "rip_with_immediate"));
  auto copy = reinterpret_cast<IntFn>(copy_of("rip_with_immediate", kOneGiB));
  ASSERT_NE(copy, nullptr);
  auto* flag = static_cast<volatile uint8_t*>(dlsym(handle_, "flag"));
  ASSERT_NE(flag, nullptr);
  for (uint8_t v : {0, 1, 0}) {
    *flag = v;
    EXPECT_EQ(copy(0), original(0)) << "flag " << int(v);
    EXPECT_EQ(copy(0), v);
  }
}

TEST_F(RelocatedCopy86, ConditionalBranchesTakeBothWaysFromTheCopy) {
  for (const char* name : {"branch_first", "short_branch"}) {
    auto original = reinterpret_cast<IntFn>(dlsym(handle_, name));
    auto copy = reinterpret_cast<IntFn>(copy_of(name, kOneGiB));
    ASSERT_NE(copy, nullptr) << name;
    for (long arg : {0L, 1L, 7L}) EXPECT_EQ(copy(arg), original(arg)) << name << "(" << arg << ")";
    EXPECT_NE(copy(0), copy(1)) << name << ": one side only";
  }
}

TEST_F(RelocatedCopy86, JumpsAndPlainProloguesRunFromTheCopy) {
  for (const char* name : {"short_jump", "tail_jump", "plain_prologue", "landing_pad"}) {
    auto original = reinterpret_cast<IntFn>(dlsym(handle_, name));
    auto copy = reinterpret_cast<IntFn>(copy_of(name, kOneGiB / 2));
    ASSERT_NE(copy, nullptr) << name;
    if (std::string(name) == "short_jump") {
      for (long arg : {0L, 5L, -3L}) EXPECT_EQ(copy(arg), original(arg)) << name << "(" << arg << ")";
      EXPECT_EQ(copy(5), 12);  // (5 + 1) * 2
    } else {
      copy(0);  // returns, the stack as it was
    }
  }
}

TEST_F(RelocatedCopy86, ACopyBeyondRel32ReachIsRefusedNotWrong) {
  const ElfSymbol* sym = nullptr;
  for (const ElfSymbol& s : image_->functions())
    if (s.name == "rip_with_immediate") sym = &s;
  ASSERT_NE(sym, nullptr);
  const RelocationPlan plan = plan_relocation(*sym, bytes_, *image_, *decoder_, *refs_, starts_);
  ASSERT_TRUE(plan.ok());
  auto code = image_->code_in_file(bytes_, sym->value, sym->size);
  auto copy = relocated_copy(plan, code, sym->value + (uint64_t{3} << 31), *decoder_);
  ASSERT_FALSE(copy.ok());
  EXPECT_EQ(copy.error().code, FTJIT_E_OUT_OF_RANGE);
}

}  // namespace
}  // namespace ftjit
