// SPDX-License-Identifier: MIT
// arm64 entries planned and relocated on the host (LLVM's AArch64 decoder
// is the host's): each shape of fixtures/arm64_shapes.S accepted or refused
// with its reason, Debian 12's arm64 libc against bounds, and each copy
// decoded again: every relocated instruction must point where the
// original pointed (ADR made ADRP+ADD, a far CBZ made CBNZ over a B, an LDR
// literal within reach re-encoded and beyond it refused).
#include <gtest/gtest.h>

#include <cstring>

#include "tests/relocation/planned_file.h"

namespace ftjit {
namespace {

constexpr char kArm64ShapesPath[] = FTJIT_RELOCATION_SHAPES_ARM64;
class Arm64Shapes : public PlannedShapes<kArm64ShapesPath> {
 protected:
  std::span<const uint8_t> code(const RelocationPlan& p) {
    return shapes_->image->code_in_file(shapes_->bytes, p.entry, 64);
  }
  // The copy of `name` at entry + distance, each instruction decoded again.
  std::vector<DecodedInsn> copy_decoded(const std::string& name, uint64_t distance, Status* status) {
    const RelocationPlan& p = plan(name);
    const InstructionDecoder& d = *decoder_for(Isa::kArm64);
    auto copy = relocated_copy(p, code(p), p.entry + distance, d);
    std::vector<DecodedInsn> out;
    if (!copy.ok()) {
      *status = copy.take_error();
      return out;
    }
    for (size_t at = 0; at + 4 <= copy->bytes.size(); at += 4)
      out.push_back(d.decode(p.entry + distance + at, std::span<const uint8_t>(copy->bytes).subspan(at)));
    return out;
  }
};

TEST_F(Arm64Shapes, OneWordMovesAndItsTargetIsKnown) {
  struct Case {
    const char* function;
    InsnClass cls;
    uint64_t target_offset;  // from the entry (ADRP: the page of `flag`, checked apart)
  } cases[] = {
      {"adr_first", InsnClass::kPcRelative, 12},     // adr x0, 7f: the .word after ldr, ret
      {"literal_first", InsnClass::kPcRelative, 8},  // ldr x0, 8f: the .quad after ret
      {"cbz_first", InsnClass::kCondBranch, 12},     // cbz x0, 9f
  };
  for (const Case& c : cases) {
    const RelocationPlan& p = plan(c.function);
    ASSERT_TRUE(p.ok()) << c.function << ": " << p.why;
    EXPECT_EQ(p.overwritten, 4u) << c.function;
    ASSERT_EQ(p.moved.size(), 1u) << c.function;
    EXPECT_EQ(p.moved[0].cls, c.cls) << c.function;
    EXPECT_EQ(p.moved[0].target, p.entry + c.target_offset) << c.function;
  }
  const RelocationPlan& adrp = plan("adrp_first");
  ASSERT_TRUE(adrp.ok()) << adrp.why;
  EXPECT_EQ(adrp.moved[0].cls, InsnClass::kPcRelative);
  EXPECT_EQ(adrp.moved[0].target & 0xfff, 0u);
  EXPECT_GT(adrp.moved[0].target, adrp.entry);  // .data follows .text
}

TEST_F(Arm64Shapes, BtiStaysAndTheBranchGoesAfterIt) {
  const RelocationPlan& p = plan("bti_first");
  ASSERT_TRUE(p.ok()) << p.why;
  EXPECT_EQ(p.patch_at, p.entry + 4);
  EXPECT_EQ(p.overwritten, 4u);
}

TEST_F(Arm64Shapes, RefusalsNameTheirReason) {
  EXPECT_EQ(plan("call_first").refusal, RelocationRefusal::kCallInside);
  EXPECT_EQ(plan("svc_first").refusal, RelocationRefusal::kSyscallInside);
  EXPECT_EQ(plan("exclusive_first").refusal, RelocationRefusal::kExclusive);
  // One word moves: a branch to +4 (arm64 setjmp's into __sigsetjmp)
  // lands after it, which x86-64's five bytes cannot say.
  EXPECT_TRUE(plan("entered_at_4").ok()) << plan("entered_at_4").why;
}

TEST_F(Arm64Shapes, AdrBecomesAdrpAndAddPointingAtTheSameByte) {
  Status status;
  const auto copy = copy_decoded("adr_first", 100 << 20, &status);
  ASSERT_TRUE(status.ok()) << status.error().message;
  ASSERT_EQ(copy.size(), 3u);  // adrp, add, b back
  const uint64_t target = plan("adr_first").moved[0].target;
  EXPECT_EQ(copy[0].cls, InsnClass::kPcRelative);
  EXPECT_EQ(copy[0].target, target & ~uint64_t{0xfff});
  uint32_t add;
  const RelocationPlan& p = plan("adr_first");
  auto bytes = relocated_copy(p, code(p), p.entry + (100 << 20), *decoder_for(Isa::kArm64));
  ASSERT_TRUE(bytes.ok());
  std::memcpy(&add, bytes->bytes.data() + 4, 4);
  EXPECT_EQ(add & 0xffc00000, 0x91000000u);          // add xd, xn, #imm12
  EXPECT_EQ((add >> 10) & 0xfff, target & 0xfff);
  EXPECT_EQ(add & 0x1f, 0u);                           // x0
  EXPECT_EQ(copy[2].cls, InsnClass::kJump);
  EXPECT_EQ(copy[2].target, p.entry + 4);
}

TEST_F(Arm64Shapes, AFarCbzBecomesTheInverseOverABranch) {
  Status status;
  const auto copy = copy_decoded("cbz_first", 100 << 20, &status);
  ASSERT_TRUE(status.ok()) << status.error().message;
  ASSERT_EQ(copy.size(), 3u);  // cbnz +8, b target, b back
  const RelocationPlan& p = plan("cbz_first");
  EXPECT_EQ(copy[0].cls, InsnClass::kCondBranch);
  EXPECT_EQ(copy[0].target, copy[0].address + 8);
  EXPECT_EQ(copy[1].cls, InsnClass::kJump);
  EXPECT_EQ(copy[1].target, p.moved[0].target);
  EXPECT_EQ(copy[2].target, p.entry + 4);
  // Near: the same instruction, its offset recomputed.
  const auto near = copy_decoded("cbz_first", 256 << 10, &status);
  ASSERT_TRUE(status.ok());
  ASSERT_EQ(near.size(), 2u);
  EXPECT_EQ(near[0].cls, InsnClass::kCondBranch);
  EXPECT_EQ(near[0].target, p.moved[0].target);
}

// Within 1 MiB the literal load keeps its form; beyond, its address is
// built in the register it loads: ADRP + ADD (+lo12) + LDR [x0]. (The
// live tests run both, arm64 under qemu: tests/relocation/live.)
TEST_F(Arm64Shapes, ALiteralLoadIsReEncodedWithinReachAndBuiltBeyond) {
  Status status;
  const auto near = copy_decoded("literal_first", 512 << 10, &status);
  ASSERT_TRUE(status.ok()) << status.error().message;
  ASSERT_EQ(near.size(), 2u);
  EXPECT_EQ(near[0].target, plan("literal_first").moved[0].target);
  const uint64_t literal = plan("literal_first").moved[0].target;
  const auto far = copy_decoded("literal_first", 100 << 20, &status);
  ASSERT_TRUE(status.ok()) << status.error().message;
  ASSERT_EQ(far.size(), 4u);  // adrp, add, ldr, b back
  EXPECT_EQ(far[0].cls, InsnClass::kPcRelative);
  EXPECT_EQ(far[0].target, literal & ~uint64_t{0xfff});  // its page
  EXPECT_EQ(far[2].cls, InsnClass::kPlain);
  EXPECT_EQ(far[3].cls, InsnClass::kJump);
}

TEST(Arm64LibcPlan, AlmostEveryFunctionIsRelocatable) {
  const std::string libc = "/usr/lib/aarch64-linux-gnu/libc.so.6";
  if (!std::ifstream(libc)) GTEST_SKIP() << "no " << libc << " (libc6:arm64, scripts/setup.sh)";
  const Planned p = plan_file(libc);
  ASSERT_TRUE(p.image.has_value());
  RefusalCounts c = count_refusals(p);
  auto& counts = c.of;
  const std::string& table = c.table;
  const int total = static_cast<int>(p.plans.size());
  std::printf("arm64 libc: %d symbols: %s%zu references\n", total, table.c_str(), p.references);
  EXPECT_GT(total, 2000);
  EXPECT_GT(counts[RelocationRefusal::kNone], total * 95 / 100) << table;
  EXPECT_LT(counts[RelocationRefusal::kBranchInside], 5) << table;  // Q10: none for 4 bytes
  EXPECT_EQ(counts[RelocationRefusal::kUndecodable], 0) << table;
  for (const char* fn : {"malloc", "free", "read", "write", "close", "__sigsetjmp", "pthread_mutex_lock"}) {
    auto it = p.plans.find(fn);
    ASSERT_NE(it, p.plans.end()) << fn;
    EXPECT_TRUE(it->second.ok()) << fn << ": " << relocation_refusal_name(it->second.refusal) << ", " << it->second.why;
  }
}

}  // namespace
}  // namespace ftjit
