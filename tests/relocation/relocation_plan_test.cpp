// SPDX-License-Identifier: MIT
// The relocation planner (core/relocation_plan.h) over the x86-64 decoder:
// each entry shape of fixtures/x86_64_shapes.S accepted or refused with its
// reason, and Debian 12's libc planned whole, against bounds.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "core/eh_frame_index.h"
#include "core/elf_image.h"
#include "core/relocation_plan.h"
#include "tests/relocation/planned_file.h"

namespace ftjit {
namespace {

constexpr char kX86ShapesPath[] = FTJIT_RELOCATION_SHAPES_X86_64;
class X86Shapes : public PlannedShapes<kX86ShapesPath> {};

TEST_F(X86Shapes, PlainPushesMoveWholeInstructions) {
  const RelocationPlan& p = plan("plain_prologue");
  ASSERT_TRUE(p.ok()) << p.why;
  // push %r12 (2), push %rbp, push %rbx, sub $0x10,%rsp (4): 8 bytes, the
  // last instruction whole.
  EXPECT_EQ(p.overwritten, 8u);
  ASSERT_EQ(p.moved.size(), 4u);
  for (const DecodedInsn& i : p.moved) EXPECT_EQ(i.cls, InsnClass::kPlain) << std::hex << i.address;
  EXPECT_EQ(p.patch_at, p.entry);
}

TEST_F(X86Shapes, RipRelativeWithATrailingImmediateKnowsItsTarget) {
  const RelocationPlan& p = plan("rip_with_immediate");
  ASSERT_TRUE(p.ok()) << p.why;
  ASSERT_EQ(p.moved.size(), 1u);
  const DecodedInsn& cmpb = p.moved[0];
  EXPECT_EQ(cmpb.cls, InsnClass::kPcRelative);
  EXPECT_EQ(cmpb.size, 7u);  // 80 3d disp32 imm8
  // The oracle: the displacement read from the file, relative to the end
  // of the instruction (not of the displacement: the immediate follows it).
  const auto code = shapes_->image->code_in_file(shapes_->bytes, cmpb.address, 7);
  ASSERT_EQ(code.size(), 7u);
  ASSERT_EQ(code[0], 0x80);
  int32_t disp;
  std::memcpy(&disp, code.data() + 2, 4);
  EXPECT_TRUE(cmpb.has_target);
  EXPECT_EQ(cmpb.target, cmpb.address + 7 + static_cast<int64_t>(disp));
}

TEST_F(X86Shapes, AConditionalBranchMovesWithItsTarget) {
  const RelocationPlan& p = plan("branch_first");
  ASSERT_TRUE(p.ok()) << p.why;
  ASSERT_EQ(p.moved.size(), 2u);
  EXPECT_EQ(p.moved[1].cls, InsnClass::kCondBranch);
  // test (3), je rel32 (6), 200 NOPs, mov $1,%eax (5), ret
  EXPECT_EQ(p.moved[1].target, p.entry + 3 + 6 + 200 + 5 + 1);
}

TEST_F(X86Shapes, TheLandingPadStaysAndTheBranchGoesAfterIt) {
  const RelocationPlan& p = plan("landing_pad");
  ASSERT_TRUE(p.ok()) << p.why;
  EXPECT_EQ(p.patch_at, p.entry + 4);  // endbr64
  EXPECT_EQ(p.overwritten, 5u);        // push %rbp; mov %rsp,%rbp; pop %rbp
}

// Without an FDE, a symbol nothing runs into is a function's start (a
// file built without unwind tables); one the code before runs into is not.
TEST_F(X86Shapes, WithoutAnFdeASymbolNothingRunsIntoIsAStart) {
  const RelocationPlan& p = plan("no_fde_after_ret");
  EXPECT_TRUE(p.ok()) << p.why;
  EXPECT_EQ(plan("no_fde").refusal, RelocationRefusal::kNotFunctionStart);
  EXPECT_NE(plan("no_fde").why.find("run into it"), std::string::npos) << plan("no_fde").why;
}

TEST_F(X86Shapes, AJumpThatEndsTheBytesIsTheLastMoved) {
  const RelocationPlan& p = plan("tail_jump");
  ASSERT_TRUE(p.ok()) << p.why;
  ASSERT_EQ(p.moved.size(), 1u);
  EXPECT_EQ(p.moved[0].cls, InsnClass::kJump);
  EXPECT_EQ(p.moved[0].target, plan("plain_prologue").entry);
}

TEST_F(X86Shapes, EachRefusalNamesItsReason) {
  expect_refusals({
      {"too_short", RelocationRefusal::kTooShort, "flow leaves after 3 bytes"},
      {"loop_back", RelocationRefusal::kBranchInside, "(loop_back+0x6) lands at +0x2"},
      {"entered_at_4", RelocationRefusal::kBranchInside, "(enters_at_4+0) lands at +0x4"},
      {"ret_target", RelocationRefusal::kBranchInside, "lands at +0x4"},
      {"call_inside", RelocationRefusal::kCallInside, "a call at +0"},
      {"syscall_inside", RelocationRefusal::kSyscallInside, "a system call at +0x2"},
      {"trap_inside", RelocationRefusal::kUnhandled, "(0f 0b)"},
      {"no_fde", RelocationRefusal::kNotFunctionStart, "FDE"},
      {"no_size", RelocationRefusal::kNoSize, "no size"},
  });
}

TEST(EhFrameIndex, TruncatedOrForeignTablesAreErrorsNotCrashes) {
  std::vector<uint8_t> bytes = read_file(FTJIT_RELOCATION_SHAPES_X86_64);
  auto image = ElfImage::parse(bytes);
  ASSERT_TRUE(image.ok());
  const ElfImage::Segment& hdr = image->eh_frame_hdr();
  ASSERT_GT(hdr.filesz, 12u);
  auto good = eh_frame_function_starts(bytes, *image);
  ASSERT_TRUE(good.ok());
  EXPECT_GE(good->size(), 14u);  // every FUNC of the fixture
  std::vector<uint8_t> bad = bytes;
  bad[hdr.offset + 3] = 0x03;  // a table encoding no linker writes
  EXPECT_FALSE(eh_frame_function_starts(bad, *image).ok());
  bad = bytes;
  bad[hdr.offset + 8] = 0xff;  // fde_count far beyond the table
  bad[hdr.offset + 9] = 0xff;
  EXPECT_FALSE(eh_frame_function_starts(bad, *image).ok());
  bad = bytes;
  bad[hdr.offset] = 2;  // version
  EXPECT_FALSE(eh_frame_function_starts(bad, *image).ok());
  // Cut short: the file ends inside the header.
  bad.assign(bytes.begin(), bytes.begin() + static_cast<long>(hdr.offset + 2));
  EXPECT_FALSE(eh_frame_function_starts(bad, *image).ok());
}

// Debian 12's libc (TOOLCHAIN.md Q10: 22 functions shorter than 5 bytes, 3
// with a branch into their first 5): almost every function plans, the
// few refusals are the known shapes, and the functions a user traces first
// are relocatable.
TEST(LibcPlan, AlmostEveryFunctionIsRelocatableAndTheRefusalsAreTheKnownShapes) {
  const std::string libc = "/lib/x86_64-linux-gnu/libc.so.6";
  if (!std::ifstream(libc)) GTEST_SKIP() << "no " << libc;
  const Planned p = plan_file(libc);
  ASSERT_TRUE(p.image.has_value());
  RefusalCounts c = count_refusals(p);
  auto& counts = c.of;
  const std::string& table = c.table;
  const int total = static_cast<int>(p.plans.size());
  RecordProperty("counts", table);
  std::printf("libc: %d symbols: %s%zu references\n", total, table.c_str(), p.references);
  EXPECT_GT(total, 2000);
  EXPECT_GT(counts[RelocationRefusal::kNone], total * 85 / 100) << table;
  EXPECT_LT(counts[RelocationRefusal::kTooShort], 60) << table;
  EXPECT_LT(counts[RelocationRefusal::kBranchInside], 20) << table;
  EXPECT_EQ(counts[RelocationRefusal::kUndecodable], 0) << table;
  for (const char* fn : {"malloc", "free", "read", "write", "close", "calloc", "realloc", "pthread_mutex_lock"}) {
    auto it = p.plans.find(fn);
    ASSERT_NE(it, p.plans.end()) << fn;
    EXPECT_TRUE(it->second.ok()) << fn << ": " << relocation_refusal_name(it->second.refusal) << ", " << it->second.why;
  }
  // pthread_rwlock_tryrdlock loops back to +2 (Q10).
  auto rw = p.plans.find("pthread_rwlock_tryrdlock");
  ASSERT_NE(rw, p.plans.end());
  EXPECT_EQ(rw->second.refusal, RelocationRefusal::kBranchInside) << rw->second.why;
}

}  // namespace
}  // namespace ftjit
