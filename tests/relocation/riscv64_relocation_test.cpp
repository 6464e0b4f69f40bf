// SPDX-License-Identifier: MIT
// riscv64 entries planned and relocated on the host (LLVM's RISC-V decoder
// is the host's): each shape of fixtures/riscv64_shapes.S accepted or
// refused with its reason, Debian 12's riscv64 libc against bounds, and each
// copy decoded again: every relocated instruction must point where the
// original pointed (an auipc made auipc+addi giving the same register value,
// a far branch made the inverted test over auipc t0 + jalr), and a copy
// beyond auipc's +-2 GiB is refused. (The copies run under qemu-riscv64 in
// tests/relocation/live.)
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <memory>

#include "tests/relocation/planned_file.h"

namespace ftjit {
namespace {

constexpr uint64_t kGiB = uint64_t{1} << 30;

constexpr char kRiscv64ShapesPath[] = FTJIT_RELOCATION_SHAPES_RISCV64;
class Riscv64Shapes : public PlannedShapes<kRiscv64ShapesPath> {
 protected:
  static const InstructionDecoder& decoder() { return *decoder_for(Isa::kRiscv64); }
  std::span<const uint8_t> code(const RelocationPlan& p) {
    return shapes_->image->code_in_file(shapes_->bytes, p.entry, 16);
  }
  // The copy of `name` at entry + distance (mod 2^64), each instruction
  // decoded again (an auipc with the instruction after it: its pair).
  std::vector<DecodedInsn> copy_decoded(const std::string& name, uint64_t distance, Status* status) {
    const RelocationPlan& p = plan(name);
    auto copy = relocated_copy(p, code(p), p.entry + distance, decoder());
    std::vector<DecodedInsn> out;
    if (!copy.ok()) {
      *status = copy.take_error();
      return out;
    }
    *status = Status();
    const std::span<const uint8_t> bytes(copy->bytes);
    for (size_t at = 0; at < bytes.size();) {
      out.push_back(decoder().decode(p.entry + distance + at, bytes.subspan(at)));
      if (out.back().size == 0) break;
      at += out.back().size;
    }
    return out;
  }
  // What an auipc alone puts in its register: its target without a pair.
  uint64_t auipc_value(uint64_t address, std::span<const uint8_t> word) {
    const DecodedInsn d = decoder().decode(address, word.first(4));
    EXPECT_TRUE(d.has_target);
    return d.target;
  }
};

TEST(Riscv64Decoder, ClassifiesEachFormFromItsBytes) {
  const InstructionDecoder* d = decoder_for(Isa::kRiscv64);
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(d->resync_bytes(), 2u);
  EXPECT_EQ(d->entry_branch_bytes(), 8u);
  struct Case {
    std::vector<uint8_t> bytes;
    InsnClass cls;
    uint8_t size;
    int64_t target;  // from the instruction; 0: none checked
  } cases[] = {
      {{0x63, 0x06, 0xb5, 0x00}, InsnClass::kCondBranch, 4, 12},    // beq a0, a1, +12
      {{0xe3, 0x00, 0xb5, 0xfe}, InsnClass::kCondBranch, 4, -32},   // beq a0, a1, -32
      {{0x09, 0xc5}, InsnClass::kCondBranch, 2, 10},                // c.beqz a0, +10
      {{0xfd, 0xfd}, InsnClass::kCondBranch, 2, -2},                // c.bnez a1, -2
      {{0xf5, 0xbf}, InsnClass::kJump, 2, -4},                      // c.j -4
      {{0x21, 0xa0}, InsnClass::kJump, 2, 8},                       // c.j +8
      {{0x6f, 0xf0, 0x5f, 0xfa}, InsnClass::kJump, 4, -92},         // jal x0, -92
      {{0xef, 0xf0, 0x9f, 0xf4}, InsnClass::kCall, 4, -184},        // jal ra, -184
      {{0xef, 0x02, 0x00, 0x01}, InsnClass::kCall, 4, 16},          // jal t0, +16 (millicode)
      {{0x67, 0x80, 0x00, 0x00}, InsnClass::kReturn, 4, 0},         // jalr x0, 0(ra)
      {{0x82, 0x80}, InsnClass::kReturn, 2, 0},                     // c.jr ra
      {{0x67, 0x00, 0x03, 0x00}, InsnClass::kIndirectJump, 4, 0},   // jr t1
      {{0x02, 0x83}, InsnClass::kIndirectJump, 2, 0},               // c.jr t1
      {{0xe7, 0x80, 0x07, 0x00}, InsnClass::kIndirectCall, 4, 0},   // jalr ra, 0(a5)
      {{0x82, 0x97}, InsnClass::kIndirectCall, 2, 0},               // c.jalr a5
      {{0x73, 0x00, 0x00, 0x00}, InsnClass::kSyscall, 4, 0},        // ecall
      {{0x73, 0x00, 0x10, 0x00}, InsnClass::kTrap, 4, 0},           // ebreak
      {{0x02, 0x90}, InsnClass::kTrap, 2, 0},                       // c.ebreak
      {{0x00, 0x00}, InsnClass::kTrap, 2, 0},                       // c.unimp
      {{0x73, 0x10, 0x00, 0xc0}, InsnClass::kTrap, 4, 0},           // unimp
      {{0x2f, 0xa7, 0x06, 0x10}, InsnClass::kExclusive, 4, 0},      // lr.w a4, (a3)
      {{0xaf, 0xa7, 0xc6, 0x18}, InsnClass::kExclusive, 4, 0},      // sc.w a5, a2, (a3)
      {{0xaf, 0x37, 0xb5, 0x00}, InsnClass::kPlain, 4, 0},          // amoadd.d a5, a1, (a0)
      {{0x17, 0x25, 0x00, 0x00}, InsnClass::kPcRelative, 4, 0x2000},  // auipc a0, 2
      {{0x17, 0x05, 0x00, 0x00}, InsnClass::kPcRelative, 4, 0},     // auipc a0, 0
      {{0x17, 0x00, 0x00, 0x00}, InsnClass::kPlain, 4, 0},          // auipc x0, 0
      {{0x95, 0x42}, InsnClass::kUnknown, 2, 0},                    // c.li t0, 5 (writes t0)
      {{0x83, 0x32, 0x05, 0x00}, InsnClass::kUnknown, 4, 0},        // ld t0, 0(a0)
      {{0x97, 0x02, 0x00, 0x00}, InsnClass::kUnknown, 4, 0},        // auipc t0, 0
      {{0xd3, 0x72, 0xb5, 0x02}, InsnClass::kPlain, 4, 0},          // fadd.d ft5, fa0, fa1 (f5, not x5)
      {{0x83, 0x32, 0x05}, InsnClass::kInvalid, 0, 0},              // 3 bytes of a word
      {{0xff, 0xff, 0xff, 0xff}, InsnClass::kInvalid, 0, 0},        // no instruction
  };
  const uint64_t at = 0x10000;
  for (const Case& c : cases) {
    const DecodedInsn insn = d->decode(at, c.bytes);
    SCOPED_TRACE(testing::Message() << "bytes " << std::hex << int(c.bytes[0]) << " " << int(c.bytes[1]));
    EXPECT_EQ(insn.cls, c.cls) << insn_class_name(insn.cls);
    EXPECT_EQ(insn.size, c.size);
    if (c.target != 0 || c.cls == InsnClass::kPcRelative) {
      EXPECT_TRUE(insn.has_target);
      EXPECT_EQ(insn.target, at + static_cast<uint64_t>(c.target));
    }
  }
}

// The sweep's target of an auipc is its pair's address: the next
// instruction's low 12 bits added when it is addi/load/store/jalr on rd.
TEST(Riscv64Decoder, AnAuipcPointsWhereItsPairDoes) {
  const InstructionDecoder& d = *decoder_for(Isa::kRiscv64);
  const uint64_t at = 0x10000;
  struct Case {
    std::vector<uint8_t> bytes;
    int64_t target;
  } cases[] = {
      {{0x17, 0x25, 0x00, 0x00, 0x13, 0x05, 0x85, 0x9c}, 0x2000 - 1592},  // auipc a0, 2; addi a0, a0, -1592
      {{0x17, 0x25, 0x00, 0x00, 0x03, 0x35, 0x85, 0x9b}, 0x2000 - 1608},  // auipc a0, 2; ld a0, -1608(a0)
      {{0x97, 0x00, 0x00, 0x00, 0xe7, 0x80, 0x00, 0xf4}, -192},           // auipc ra, 0; jalr ra, -192(ra)
      {{0x17, 0x25, 0x00, 0x00, 0x23, 0x38, 0xb5, 0x00}, 0x2000 + 16},    // auipc a0, 2; sd a1, 16(a0)
      {{0x17, 0x25, 0x00, 0x00, 0x07, 0x30, 0x85, 0x00}, 0x2000 + 8},     // auipc a0, 2; fld ft0, 8(a0)
      {{0x17, 0x25, 0x00, 0x00, 0x93, 0x85, 0x85, 0x00}, 0x2000},         // addi a1, a1, 8: not a0's pair
      {{0x17, 0x25, 0x00, 0x00, 0x05, 0x05}, 0x2000},                     // c.addi a0, 1: not a pair
  };
  for (const Case& c : cases) {
    const DecodedInsn insn = d.decode(at, c.bytes);
    EXPECT_EQ(insn.cls, InsnClass::kPcRelative);
    EXPECT_EQ(insn.target, at + static_cast<uint64_t>(c.target)) << std::hex << insn.target;
  }
}

TEST(Riscv64Decoder, BranchesAreWrittenShortWhenInReach) {
  const InstructionDecoder& d = *decoder_for(Isa::kRiscv64);
  const uint64_t at = 0x40000000;
  EXPECT_EQ(d.branch_bytes(at, at + (1 << 20) - 2), 4u);
  EXPECT_EQ(d.branch_bytes(at, at - (1 << 20)), 4u);
  EXPECT_EQ(d.branch_bytes(at, at + (1 << 20)), 8u);
  EXPECT_EQ(d.branch_bytes(at, at - kGiB), 8u);
  for (const int64_t rel : {int64_t{-(1 << 20)}, int64_t{(1 << 20) - 2}, int64_t{1 << 20}, -int64_t{kGiB},
                            int64_t{2 * kGiB} - 4096, -int64_t{2 * kGiB}}) {
    std::vector<uint8_t> out;
    const uint64_t target = at + static_cast<uint64_t>(rel);
    ASSERT_TRUE(d.append_branch(at, target, &out)) << rel;
    EXPECT_EQ(out.size(), d.branch_bytes(at, target)) << rel;
    const DecodedInsn b = d.decode(at, out);
    EXPECT_EQ(b.target, target) << rel;  // jal, or auipc t0 with its jalr
    EXPECT_EQ(b.cls, out.size() == 4 ? InsnClass::kJump : InsnClass::kUnknown) << rel;
  }
  std::vector<uint8_t> out;
  EXPECT_FALSE(d.append_branch(at, at + 2 * kGiB, &out));
  EXPECT_FALSE(d.append_branch(at, at - 2 * kGiB - 4096, &out));
  EXPECT_FALSE(d.append_branch(at, at + 3, &out));
}

TEST_F(Riscv64Shapes, EachRefusalNamesItsReason) {
  expect_refusals({
      {"too_short", RelocationRefusal::kTooShort, "flow leaves after 2 bytes"},
      {"cas_retry", RelocationRefusal::kExclusive, "at +0x2"},
      {"loop_to_4", RelocationRefusal::kBranchInside, "(loop_to_4+0xc) lands at +0x4"},
      {"entered_at_4", RelocationRefusal::kBranchInside, "(enters_at_4+0) lands at +0x4"},
      {"ret_target", RelocationRefusal::kBranchInside, "(ret_target+0x2) lands at +0x6"},
      {"jal_first", RelocationRefusal::kCallInside, "a call at +0"},
      {"call_first", RelocationRefusal::kCallInside, "a call at +0x4"},
      {"ecall_inside", RelocationRefusal::kSyscallInside, "a system call at +0x2"},
      {"writes_t0", RelocationRefusal::kUnhandled, "at +0 (95 42)"},
      {"loads_t0", RelocationRefusal::kUnhandled, "at +0x4 (83 32 05 00)"},
      {"trap_inside", RelocationRefusal::kUnhandled, "at +0x4 (73 00 10 00)"},
      {"no_fde", RelocationRefusal::kNotFunctionStart, "FDE"},
      {"no_size", RelocationRefusal::kNoSize, "no size"},
  });
}

TEST_F(Riscv64Shapes, AcceptedShapesMoveWholeInstructionsCoveringEightBytes) {
  struct Case {
    const char* function;
    std::vector<InsnClass> moved;
    int64_t first_target;  // from the entry; 0: none
  } cases[] = {
      {"auipc_addi", {InsnClass::kPcRelative, InsnClass::kPlain}, 0},
      {"auipc_ld", {InsnClass::kPcRelative, InsnClass::kPlain}, 0},
      {"ret_last", {InsnClass::kPlain, InsnClass::kPlain, InsnClass::kReturn}, 0},
      {"beq_forward", {InsnClass::kCondBranch, InsnClass::kPlain}, 12},
      {"beq_backward", {InsnClass::kCondBranch, InsnClass::kPlain}, 0},
      {"c_beqz_first", {InsnClass::kCondBranch, InsnClass::kPlain, InsnClass::kPlain}, 10},
      {"c_bnez_first", {InsnClass::kCondBranch, InsnClass::kPlain, InsnClass::kPlain}, 10},
      {"c_j_last", {InsnClass::kPlain, InsnClass::kPlain, InsnClass::kJump}, 0},
      {"jal_x0_last", {InsnClass::kPlain, InsnClass::kJump}, 0},
      // No FDE (Debian's riscv64 libc mostly has none), nothing runs into it.
      {"no_fde_after_ret", {InsnClass::kPlain, InsnClass::kPlain}, 0},
  };
  for (const Case& c : cases) {
    const RelocationPlan& p = plan(c.function);
    ASSERT_TRUE(p.ok()) << c.function << ": " << p.why;
    EXPECT_EQ(p.overwritten, 8u) << c.function;
    ASSERT_EQ(p.moved.size(), c.moved.size()) << c.function;
    for (size_t i = 0; i < c.moved.size(); ++i) EXPECT_EQ(p.moved[i].cls, c.moved[i]) << c.function << " " << i;
    if (c.first_target != 0) {
      EXPECT_EQ(p.moved[0].target, p.entry + c.first_target) << c.function;
    }
  }
  // The pairs point at flag (the first .data word); the branches at ret_last.
  const uint64_t flag = plan("auipc_addi").moved[0].target;
  EXPECT_GT(flag, plan("auipc_addi").entry);
  EXPECT_EQ(plan("auipc_ld").moved[0].target, flag);
  const uint64_t ret_last = plan("ret_last").entry;
  EXPECT_EQ(plan("beq_backward").moved[0].target, ret_last);
  EXPECT_EQ(plan("c_j_last").moved[2].target, ret_last);
  EXPECT_EQ(plan("jal_x0_last").moved[1].target, ret_last);
}

// An auipc becomes auipc+addi giving its register the value it had; the
// instruction that paired with it follows unchanged. Both sides, ~1 GiB.
TEST_F(Riscv64Shapes, AnAuipcGivesItsRegisterTheSameValueFromTheCopy) {
  for (const char* fn : {"auipc_addi", "auipc_ld"}) {
    const RelocationPlan& p = plan(fn);
    const uint64_t value = auipc_value(p.entry, code(p));  // the original's register
    for (const uint64_t distance : {kGiB + 0x123c, -kGiB - 0x7f4, uint64_t{0x1000}, -uint64_t{0x800}}) {
      Status status;
      const auto copy = copy_decoded(fn, distance, &status);
      ASSERT_TRUE(status.ok()) << fn << ": " << status.error().message;
      ASSERT_GE(copy.size(), 4u) << fn;
      // auipc rd (with its addi: the pair's value), addi, the moved pair's
      // second half, the branch back.
      EXPECT_EQ(copy[0].cls, InsnClass::kPcRelative) << fn;
      EXPECT_EQ(copy[0].target, value) << fn << std::hex << " at distance " << distance;
      EXPECT_EQ(copy[1].cls, InsnClass::kPlain) << fn;
      EXPECT_EQ(copy[2].cls, InsnClass::kPlain) << fn;
      EXPECT_EQ(copy[3].target, p.entry + 8) << fn;  // back: jal or auipc t0 + jalr
    }
  }
}

// Each branch form relocated ~1 GiB away on both sides: its target decoded
// from the copy is the original's.
TEST_F(Riscv64Shapes, AFarBranchIsTheInvertedTestOverAJump) {
  for (const char* fn : {"beq_forward", "beq_backward", "c_beqz_first", "c_bnez_first"}) {
    const RelocationPlan& p = plan(fn);
    const uint64_t target = p.moved[0].target;
    for (const uint64_t distance : {kGiB, -kGiB, kGiB + 0x802, -kGiB - 0x7fe}) {
      Status status;
      const auto copy = copy_decoded(fn, distance, &status);
      ASSERT_TRUE(status.ok()) << fn << ": " << status.error().message;
      ASSERT_GE(copy.size(), 3u) << fn;
      // b!cc +12; auipc t0, hi; jalr x0, lo(t0); ...
      EXPECT_EQ(copy[0].cls, InsnClass::kCondBranch) << fn;
      EXPECT_EQ(copy[0].size, 4u) << fn;
      EXPECT_EQ(copy[0].target, copy[0].address + 12) << fn;
      EXPECT_EQ(copy[1].target, target) << fn << std::hex << " at distance " << distance;
      EXPECT_EQ(copy[2].cls, InsnClass::kIndirectJump) << fn;
      // The inverted test on the same registers: beq <-> bne.
      const std::span<const uint8_t> orig = code(p);
      const RelocationPlan& again = plan(fn);
      auto bytes = relocated_copy(again, orig, again.entry + distance, decoder());
      ASSERT_TRUE(bytes.ok());
      uint32_t w;
      std::memcpy(&w, bytes->bytes.data(), 4);
      const bool was_eq = std::string(fn) != "c_bnez_first";
      EXPECT_EQ((w >> 12) & 7, was_eq ? 1u : 0u) << fn;  // funct3: bne / beq
      EXPECT_EQ((w >> 15) & 31, 10u) << fn;              // rs1 = a0
    }
  }
}

TEST_F(Riscv64Shapes, InReachBranchesKeepTheShortForm) {
  for (const char* fn : {"beq_forward", "beq_backward", "c_beqz_first", "c_bnez_first"}) {
    const RelocationPlan& p = plan(fn);
    Status status;
    const auto copy = copy_decoded(fn, 0x400, &status);
    ASSERT_TRUE(status.ok()) << fn << ": " << status.error().message;
    ASSERT_GE(copy.size(), 2u) << fn;
    EXPECT_EQ(copy[0].cls, InsnClass::kCondBranch) << fn;
    EXPECT_EQ(copy[0].target, p.moved[0].target) << fn;
    // The next is the moved plain instruction, not a jump: no far form.
    EXPECT_EQ(copy[1].cls, InsnClass::kPlain) << fn;
    EXPECT_EQ(copy.back().cls, InsnClass::kJump) << fn;  // back: one jal
    EXPECT_EQ(copy.back().target, p.entry + 8) << fn;
  }
  for (const char* fn : {"c_j_last", "jal_x0_last"}) {
    const RelocationPlan& p = plan(fn);
    Status status;
    const auto near = copy_decoded(fn, 0x10000, &status);
    ASSERT_TRUE(status.ok()) << fn << ": " << status.error().message;
    EXPECT_EQ(near.back().cls, InsnClass::kJump) << fn;  // jal x0: nothing after it
    EXPECT_EQ(near.back().size, 4u) << fn;
    EXPECT_EQ(near.back().target, p.moved.back().target) << fn;
    for (const uint64_t distance : {kGiB, -kGiB}) {
      const auto far = copy_decoded(fn, distance, &status);
      ASSERT_TRUE(status.ok()) << fn << ": " << status.error().message;
      ASSERT_GE(far.size(), 2u) << fn;
      // auipc t0 (its pair's target) + jalr x0, the copy's last two.
      EXPECT_EQ(far[far.size() - 2].target, p.moved.back().target) << fn;
      EXPECT_EQ(far.back().cls, InsnClass::kIndirectJump) << fn;
    }
  }
}

TEST_F(Riscv64Shapes, ACopyBeyondTwoGibIsRefused) {
  for (const char* fn : {"auipc_addi", "auipc_ld", "beq_forward", "c_beqz_first", "c_j_last", "jal_x0_last"}) {
    Status status;
    copy_decoded(fn, 3 * kGiB, &status);
    EXPECT_FALSE(status.ok()) << fn;
    copy_decoded(fn, -3 * kGiB, &status);
    EXPECT_FALSE(status.ok()) << fn;
  }
  // Nothing of ret_last points anywhere, and it leaves by its ret: its
  // copy is its bytes, anywhere.
  Status status;
  const auto copy = copy_decoded("ret_last", 3 * kGiB, &status);
  ASSERT_TRUE(status.ok()) << status.error().message;
  ASSERT_EQ(copy.size(), 3u);
  EXPECT_EQ(copy[2].cls, InsnClass::kReturn);
}

// Debian 12's riscv64 glibc is built without asynchronous unwind tables:
// only about a quarter of its functions have an FDE (malloc, free and
// pthread_mutex_lock do not). The others are starts where nothing runs
// into them (relocation_plan.h); then the entry's 8 bytes decide, and the
// syscall wrappers (li a7, N; ecall) are the largest refusal.
TEST(Riscv64LibcPlan, EveryFunctionIsPlannedAndMostAreRelocatable) {
  const std::string libc = "/usr/riscv64-linux-gnu/lib/libc.so.6";
  if (!std::ifstream(libc)) GTEST_SKIP() << "no " << libc << " (libc6-riscv64-cross, scripts/setup.sh)";
  const Planned p = plan_file(libc);
  ASSERT_TRUE(p.image.has_value());
  RefusalCounts c = count_refusals(p);
  auto& counts = c.of;
  const std::string& table = c.table;
  const int total = static_cast<int>(p.plans.size());
  std::printf("riscv64 libc: %d symbols: %s%zu references\n", total, table.c_str(), p.references);
  EXPECT_GT(total, 2000);
  EXPECT_GT(counts[RelocationRefusal::kNone], total * 78 / 100) << table;
  EXPECT_LT(counts[RelocationRefusal::kNotFunctionStart], 20) << table;
  EXPECT_LT(counts[RelocationRefusal::kSyscallInside], total / 8) << table;
  EXPECT_LT(counts[RelocationRefusal::kBranchInside], 30) << table;
  EXPECT_LT(counts[RelocationRefusal::kUnhandled], 20) << table;
  EXPECT_EQ(counts[RelocationRefusal::kUndecodable], 0) << table;
  for (const char* fn : {"malloc", "free", "calloc", "pthread_mutex_lock", "memcpy", "strlen", "read", "write",
                         "printf", "fwrite", "fclose", "qsort_r", "pthread_join", "pthread_cond_wait"}) {
    auto it = p.plans.find(fn);
    ASSERT_NE(it, p.plans.end()) << fn;
    EXPECT_TRUE(it->second.ok()) << fn << ": " << relocation_refusal_name(it->second.refusal) << ", " << it->second.why;
  }
  for (const char* fn : {"getpid", "getppid", "getuid"}) {
    auto it = p.plans.find(fn);
    ASSERT_NE(it, p.plans.end()) << fn;
    EXPECT_EQ(it->second.refusal, RelocationRefusal::kSyscallInside) << fn << ": " << it->second.why;
  }
}

}  // namespace
}  // namespace ftjit
