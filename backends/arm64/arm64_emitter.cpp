// SPDX-License-Identifier: MIT
// arm64 trampolines, emitted with asmjit's a64 Assembler (sites:
// arm64_backend.cpp). Runs on any host: the CLI on x86-64 emits them for
// an arm64 agent.
//
// (c) The entry trampoline's frame. The site's `bl` left x30 = start+8 and
//     the sled's mov left x9 = the parent's return address; sp = S, the
//     traced function's stack pointer at its entry (16-aligned). Two frame
//     records come first, so that an unwinder walking x29 sees the traced
//     function between us and its caller (as Linux's ftrace_caller does):
//
//     S-8       x9: the parent's return address  \ the traced function's
//     S-16      the caller's x29                 / record; S-8 is the slot
//     S-24      x30 = start+8                    \ ours; x29 = S-32
//     S-32      x29 = S-16                       /
//     sp+K+64   ip, parent_ip across shadow-stack calls
//     sp+K      x8 x10 x11 x12 x13 x14 x15 x18
//     sp+80     q0..q7 (16 B each)      (with FP) -+
//     sp+72     S: sp at the traced entry          |  ftjit_regs, passed
//     sp+64     direct (0 = none)                  |  as `regs`
//     sp+0      x0..x7                            -+
//     sp        = S-32-R; K = 208 with FP, 80 without; R = K+80
//
//     Kept: x0-x8 and x10-x15 (arguments, the indirect result, and what an
//     -fipa-ra caller might keep), x18, q0-q7 with save_fp (FP arguments),
//     x19-x28 and the low halves of v8-v15 by the callback (AAPCS64
//     callee-saved). x18 is the platform register, which no trampoline
//     writes; but GCC on Linux allocates it as a temporary (and passes the
//     static chain in it), so a callback may change it: it is kept. Clobbered: x9 (the sled's own), x16/x17
//     (IP0/IP1, any veneer's), the flags, and v16-v31 and the high halves
//     of v8-v15, which AAPCS64 lets every call clobber: with the
//     -fpatchable-function-entry flag GCC has -fipa-ra off (TOOLCHAIN Q6),
//     so no caller keeps values there across a traced call.
//
//     ip = x30 - 8, the site start (after any landing pad: see
//     arm64_backend.h); parent_ip = x9. The slot, where the return address
//     the function will return through is kept while the trampoline runs,
//     is S-8: an exit hook replaces it (shadow_push writes the landing
//     there) and the trampoline's last loads put it into x30.
//
//     Per-thread counters at tpidr_el0+tls (entries) and +8 (exits), as on
//     x86-64 (runtime/thread_control.h): counted with ldxr/stxr, which a
//     signal handler between the two cannot tear (an exception return
//     clears the exclusive monitor, so the stxr fails and we retry; a plain
//     load-add-store would lose the handler's own counts):
//
//         stp x29, x9, [sp, #-16]! ; mov x29, sp        ; the function's
//         stp x29, x30, [sp, #-16]! ; mov x29, sp       ; ours
//         sub sp, sp, #R ; stp x0..x15 (not x9)
//         mrs x16, tpidr_el0 ; add x16, x16, #tls
//      1: ldxr x17, [x16] ; add x17, x17, #1 ; stxr w15, x17, [x16]
//         cbnz w15, 1b                                  ; entries++
//      2: ldr x10, [x16] ; ldr x11, [x16, #8]           ; the guard: read
//         ldr x12, [x16] ; cmp x10, x12 ; b.ne 2b       ; past a handler
//         sub x10, x10, x11 ; cmp x10, #1 ; b.ne nested
//         ...  save q0-q7, call, restore
//         exits++ (as 1:, status in w9) ; ldr x16, [sp, #64] (direct)
//         add sp, sp, #R ; ldr x9, [sp, #8] ; ldp x29, x30, [sp, #16]
//         str xzr, [sp, #24]                            ; no stale landing
//         add sp, sp, #32
//         cbnz x16, to_direct                           ; honour_direct
//         ret x9                                        ; into start+8
//     to_direct:                        ; as if the site had called it:
//         mov x17, x30 ; mov x30, x9 ; mov x9, x17 ; br x16
//     nested:                           ; under a callback: count a drop,
//         drops++ (ldxr/stxr) ; restore ; entries-- ; unwind ; ret x9
//
// (d) The exit trampoline, one per process. A hooked function returns
//     (`ret` through x30 = the landing) with sp = S again; the landing
//     asks pop(slot = S-8, regs) for the real return address and returns
//     there through x30. The 16 bytes below S, the slot's, are never
//     written here (the shadow stack may read the slot until pop returns):
//
//     S-16..S   untouched; sp = S-304
//     sp+272    x29, x30: a frame record (x29 = sp+272)
//     sp+264    (pad)
//     sp+256    the real return address, across the restores
//     sp+144    x2..x8 x10..x15 x18
//     sp+48     q2..q7
//     sp+16     q0 q1                      -+ ftjit_ret_regs
//     sp+0      x0 x1                      -+
//
//     x0-x1 and q0-q3 are the return values (q0-q3: homogeneous FP
//     aggregates); the rest is kept as for (c). The landing counts an entry
//     and an exit (or takes its entry back when another of the thread's
//     is open), as on x86-64. A chain (pop returns the landing itself: the
//     frame was hooked twice) pops again.
//
//     Before the landing, where x86-64 has call-and-land (for sites
//     entered by a stub), arm64 has `brk` words: it has no stubs
//     (arm64_backend.cpp), and a jump there is a bug to stop at.
//
//     Not yet emitted on arm64 (each has a correct slower equivalent, used
//     instead): the landing's own pop of the common case (shadow_tls_offset
//     is ignored: pop() does the same work), and the generated trampoline's
//     inline prune check and push (shadow_prune and shadow_push are called:
//     they check and push the same way).
#include "backends/arm64/arm64_backend.h"

#include <asmjit/arm.h>
#include <asmjit/arm/a64assembler.h>

#include <cstddef>
#include <map>

#include "backends/arm64/arm64_encoding.h"
#include "backends/shadow_layout.h"
#include "ftjit/ftjit.h"

namespace ftjit {
namespace {

using namespace arm64;

// (c): offsets from sp inside an entry trampoline.
constexpr int32_t kRegsDirect = 64;
constexpr int32_t kRegsSp = 72;
constexpr int32_t kRegsFp = 80;
constexpr int32_t kKeptWithFp = 208;
constexpr int32_t kKeptNoFp = 80;
constexpr int32_t kKeptBytes = 64;        // x8 x10..x15 x18
constexpr int32_t kIpParentBytes = 16;
constexpr int32_t kRecordsBytes = 32;     // the two frame records
constexpr int32_t kOurReturn = 8;         // x29+8: start+8
constexpr int32_t kSlotFromOurFp = 24;    // x29+24 = S-8
static_assert(offsetof(ftjit_regs, direct) == kRegsDirect);
static_assert(offsetof(ftjit_regs, sp) == kRegsSp);
static_assert(offsetof(ftjit_regs, fp) == kRegsFp);
static_assert(kRegsFp + 8 * 16 == kKeptWithFp);
static_assert(offsetof(ftjit_ops, func) == 8);
// (d): offsets from sp inside the exit trampoline.
static_assert(sizeof(ftjit_ret_regs) == 48);
constexpr int32_t kExitQ2 = 48;
constexpr int32_t kExitGprs = 144;
constexpr int32_t kExitRealReturn = 256;
constexpr int32_t kExitRecord = 272;
constexpr int32_t kExitUntouched = 16;
constexpr int32_t kExitFrame = kExitRecord + 16 + kExitUntouched;
constexpr int32_t kSlotBelowSp = 8;       // the slot is S-8
// A jump into the exit trampoline's call-and-land area is a bug.
constexpr uint32_t kNoCallAndLandBrk = 0xfa64;

class Arm64Emitter final : public TrampolineEmitter {
 public:
  Result<std::vector<uint8_t>> emit_trampoline(const TrampolineRequest& req,
                                               uint64_t place) const override;
  Result<std::vector<uint8_t>> emit_exit_trampoline(const ExitTrampolineRequest& req,
                                                    uint64_t place) const override;
  Result<std::vector<uint8_t>> emit_inline_template(const InlineRequest& req) const override;
};

// ---------------------------------------------------------------------------
// Code holder, literal pool, small sequences
// ---------------------------------------------------------------------------

Status start_code(asmjit::CodeHolder& code, uint64_t place) {
  if (code.init(asmjit::Environment(asmjit::Arch::kAArch64), place) != asmjit::kErrorOk) {
    return make_error(FTJIT_E_INTERNAL, "asmjit: cannot init an a64 code holder");
  }
  return {};
}

// 64-bit constants (addresses of ops, callbacks, runtime functions) live
// in a pool after the code and are read with `ldr xN, <label>` (pc-relative,
// +-1 MiB): one instruction, where movz/movk would take four.
class LiteralPool {
 public:
  explicit LiteralPool(asmjit::a64::Assembler& a) : a_(a) {}

  void load(const asmjit::a64::Gp& dst, uint64_t value) {
    auto it = labels_.find(value);
    if (it == labels_.end()) it = labels_.emplace(value, a_.newLabel()).first;
    a_.ldr(dst, asmjit::a64::ptr(it->second));
  }

  void emit() {
    if (labels_.empty()) return;
    a_.align(asmjit::AlignMode::kData, 8);
    for (const auto& [value, label] : labels_) {
      a_.bind(label);
      a_.embedUInt64(value);
    }
  }

 private:
  asmjit::a64::Assembler& a_;
  std::map<uint64_t, asmjit::Label> labels_;
};

Result<std::vector<uint8_t>> finish(asmjit::a64::Assembler& a, LiteralPool& pool,
                                    asmjit::CodeHolder& code, uint64_t place) {
  using namespace asmjit;
  pool.emit();
  if (a.finalize() != kErrorOk || code.flatten() != kErrorOk ||
      code.resolveUnresolvedLinks() != kErrorOk || code.relocateToBase(place) != kErrorOk) {
    return make_error(FTJIT_E_INTERNAL, "asmjit: cannot relocate a64 trampoline");
  }
  std::vector<uint8_t> out(code.codeSize());
  if (code.copyFlattenedData(out.data(), out.size()) != kErrorOk) {
    return make_error(FTJIT_E_INTERNAL, "asmjit: cannot copy a64 trampoline");
  }
  return out;
}

// dst = tpidr_el0 + offset. Initial-exec TLS lies after the thread pointer
// on arm64 (a 16-byte TCB, then the blocks): small and positive, one or
// two adds; anything else through the pool.
void emit_tls_address(asmjit::a64::Assembler& a, LiteralPool& pool,
                      const asmjit::a64::Gp& dst, const asmjit::a64::Gp& scratch,
                      int64_t offset) {
  using namespace asmjit;
  using namespace asmjit::a64;
  a.mrs(dst, Imm(Predicate::SysReg::kTPIDR_EL0));
  if (offset >= 0 && offset < (int64_t{1} << 24)) {
    if (offset >> 12) a.add(dst, dst, Imm(offset >> 12), lsl(12));
    if (offset & 0xfff) a.add(dst, dst, Imm(offset & 0xfff));
  } else {
    pool.load(scratch, static_cast<uint64_t>(offset));
    a.add(dst, dst, scratch);
  }
}

// [addr] += delta, atomically with respect to this thread's signal
// handlers and to other threads (drops are shared): an exclusive pair,
// retried when anything came between.
void emit_atomic_add(asmjit::a64::Assembler& a, const asmjit::a64::Gp& addr,
                     const asmjit::a64::Gp& value, const asmjit::a64::Gp& status, int delta) {
  using namespace asmjit;
  Label retry = a.newLabel();
  a.bind(retry);
  a.ldxr(value, a64::ptr(addr));
  if (delta > 0) {
    a.add(value, value, Imm(delta));
  } else {
    a.sub(value, value, Imm(-delta));
  }
  a.stxr(status.w(), value, a64::ptr(addr));
  a.cbnz(status.w(), retry);
}

// Calls `target`: a direct `bl` when it is within reach from anywhere in a
// trampoline at `place`, else through x16 from the pool.
void emit_call(asmjit::a64::Assembler& a, LiteralPool& pool, uint64_t place, uint64_t target) {
  using namespace asmjit::a64;
  constexpr uint64_t kTrampolineSpan = 4096;
  if (branch_reaches(place, target - kTrampolineSpan) && branch_reaches(place, target + kTrampolineSpan)) {
    a.bl(asmjit::Imm(target));
  } else {
    pool.load(x16, target);
    a.blr(x16);
  }
}

// ---------------------------------------------------------------------------
// Entry trampolines (c)
// ---------------------------------------------------------------------------

struct EntryFrame {
  int32_t kept;   // x8 x10..x15 x18
  int32_t size;   // R
  int32_t ip_parent() const { return kept + kKeptBytes; }
};

EntryFrame entry_frame(bool save_fp) {
  EntryFrame f;
  f.kept = save_fp ? kKeptWithFp : kKeptNoFp;
  f.size = f.kept + kKeptBytes + kIpParentBytes;
  return f;
}

void emit_save_gprs(asmjit::a64::Assembler& a, const EntryFrame& f) {
  using namespace asmjit::a64;
  for (int i = 0; i < 8; i += 2) a.stp(x(i), x(i + 1), ptr(sp, i * 8));
  a.str(x8, ptr(sp, f.kept));
  a.stp(x10, x11, ptr(sp, f.kept + 8));
  a.stp(x12, x13, ptr(sp, f.kept + 24));
  a.stp(x14, x15, ptr(sp, f.kept + 40));
  a.str(x18, ptr(sp, f.kept + 56));
}

void emit_restore_gprs(asmjit::a64::Assembler& a, const EntryFrame& f) {
  using namespace asmjit::a64;
  for (int i = 0; i < 8; i += 2) a.ldp(x(i), x(i + 1), ptr(sp, i * 8));
  a.ldr(x8, ptr(sp, f.kept));
  a.ldp(x10, x11, ptr(sp, f.kept + 8));
  a.ldp(x12, x13, ptr(sp, f.kept + 24));
  a.ldp(x14, x15, ptr(sp, f.kept + 40));
  a.ldr(x18, ptr(sp, f.kept + 56));
}

void emit_fp_regs(asmjit::a64::Assembler& a, int32_t at, int first, int count, bool save) {
  using namespace asmjit::a64;
  for (int i = 0; i < count; i += 2) {
    const Mem m = ptr(sp, at + 16 * i);
    if (save) {
      a.stp(VecV(first + i), VecV(first + i + 1), m);
    } else {
      a.ldp(VecV(first + i), VecV(first + i + 1), m);
    }
  }
}

// From sp = S-32-R back to the site's state on return: x29 the caller's,
// x30 the slot (the parent's return address, or the landing), x9 =
// start+8, sp = S. The slot is cleared once read: left below S, a landing
// address would be a stale copy in the function's frame beside its own
// spill of x30, which a detach's put-back must find alone
// (runtime/shadow_stack.cpp, put_back_own_frames).
void emit_unwind_records(asmjit::a64::Assembler& a, const EntryFrame& f) {
  using namespace asmjit::a64;
  a.add(sp, sp, asmjit::Imm(f.size));
  a.ldr(x9, ptr(sp, kOurReturn));
  a.ldp(x29, x30, ptr(sp, 16));
  a.str(xzr, ptr(sp, 24));
  a.add(sp, sp, asmjit::Imm(kRecordsBytes));
}

// x0 = ip: the site start, 8 bytes before the return address into it.
void emit_ip(asmjit::a64::Assembler& a) {
  using namespace asmjit::a64;
  a.ldr(x0, ptr(x29, kOurReturn));
  a.sub(x0, x0, asmjit::Imm(kSiteBytes));
}

}  // namespace

Result<std::vector<uint8_t>> Arm64Emitter::emit_trampoline(const TrampolineRequest& req,
                                                           uint64_t place) const {
  using namespace asmjit;
  using namespace asmjit::a64;
  if (req.recursion_drops == 0) {
    return make_error(FTJIT_E_INTERNAL, "trampoline request without a drop counter");
  }
  if (req.entered_by_stub) {
    return make_error(FTJIT_E_UNSUPPORTED,
                      "arm64 trampolines are never entered by a stub: sites call them with bl "
                      "and hooked returns need no call-and-land (backends/arm64)");
  }
  if (req.exit_record != 0 && (req.exit_trampoline == 0 || req.shadow_prune == 0 ||
                               req.shadow_push == 0)) {
    return make_error(FTJIT_E_INTERNAL, "exit-hooking trampoline without its shadow-stack calls");
  }
  if ((place & 3) != 0) return make_error(FTJIT_E_INTERNAL, "a64 code must be 4-byte aligned");

  CodeHolder code;
  FTJIT_TRY(start_code(code, place));
  Assembler a(&code);
  LiteralPool pool(a);
  const EntryFrame f = entry_frame(req.save_fp);
  Label nested = a.newLabel();

  // Frame records, then everything the callback may clobber.
  a.stp(x29, x9, ptr_pre(sp, -16));
  a.mov(x29, sp);
  a.stp(x29, x30, ptr_pre(sp, -16));
  a.mov(x29, sp);
  a.sub(sp, sp, Imm(f.size));
  emit_save_gprs(a, f);

  // Our entry counted, then the guard.
  emit_tls_address(a, pool, x16, x17, req.counts_tls_offset);
  emit_atomic_add(a, x16, x17, x15, +1);
  Label again = a.newLabel();
  a.bind(again);
  a.ldr(x10, ptr(x16));
  a.ldr(x11, ptr(x16, 8));
  a.ldr(x12, ptr(x16));
  a.cmp(x10, x12);
  a.b_ne(again);
  a.sub(x10, x10, x11);
  a.cmp(x10, Imm(1));
  a.b_ne(nested);

  if (req.honour_direct) a.str(xzr, ptr(sp, kRegsDirect));
  if (req.save_fp) emit_fp_regs(a, kRegsFp, 0, 8, true);
  a.add(x10, x29, Imm(kRecordsBytes));
  a.str(x10, ptr(sp, kRegsSp));              // S
  emit_ip(a);
  a.mov(x1, x9);                             // parent_ip
  if (req.exit_trampoline != 0) {
    // parent_ip is the landing: this frame's return was hooked already
    // (a hooked function tail-called this one). The real one is on the
    // shadow stack.
    Label parent_ok = a.newLabel();
    pool.load(x10, req.exit_trampoline);
    a.cmp(x1, x10);
    a.b_ne(parent_ok);
    a.add(x0, x29, Imm(kSlotFromOurFp));
    emit_call(a, pool, place, req.real_return);
    a.mov(x1, x0);
    emit_ip(a);
    a.bind(parent_ok);
  }
  if (req.exit_record != 0) {
    // Frames a longjmp or an unwind left behind go first.
    a.stp(x0, x1, ptr(sp, f.ip_parent()));
    a.add(x0, x29, Imm(kSlotFromOurFp));
    emit_call(a, pool, place, req.shadow_prune);
    a.ldp(x0, x1, ptr(sp, f.ip_parent()));
  }
  a.mov(x3, sp);                             // regs
  if (req.source == OpsSource::kImmediate) {
    pool.load(x2, req.ops);
    emit_call(a, pool, place, req.func);
  } else {
    // The literal: 16 bytes below start+8 rounded down to 8. With a
    // landing pad before the sled the return address is literal+20, not
    // literal+16; rounding down covers both.
    a.ldr(x10, ptr(x29, kOurReturn));
    a.and_(x10, x10, Imm(~uint64_t{7}));
    a.ldur(x2, ptr(x10, -16));
    if (req.func != 0) {
      emit_call(a, pool, place, req.func);   // a fixed dispatcher, given the ops
    } else {
      a.ldr(x16, ptr(x2, 8));                // ops->func
      a.blr(x16);
    }
  }
  if (req.exit_record != 0) {
    // The return hooked: shadow_push writes the landing into the slot.
    a.add(x0, x29, Imm(kSlotFromOurFp));
    a.ldr(x1, ptr(sp, f.ip_parent()));
    pool.load(x2, req.exit_record);
    emit_call(a, pool, place, req.shadow_push);
  }

  if (req.save_fp) emit_fp_regs(a, kRegsFp, 0, 8, false);
  emit_restore_gprs(a, f);
  emit_tls_address(a, pool, x16, x17, req.counts_tls_offset + 8);
  emit_atomic_add(a, x16, x17, x9, +1);      // exits
  if (req.honour_direct) a.ldr(x16, ptr(sp, kRegsDirect));
  emit_unwind_records(a, f);
  Label to_direct = a.newLabel();
  if (req.honour_direct) a.cbnz(x16, to_direct);
  a.ret(x9);
  if (req.honour_direct) {
    a.bind(to_direct);
    a.mov(x17, x30);
    a.mov(x30, x9);
    a.mov(x9, x17);
    a.br(x16);
  }

  // Called from inside a callback: count it, run nothing (not even a
  // direct trampoline: it is tracer code too), take our entry back (exits
  // count outermost frames only).
  a.bind(nested);
  pool.load(x10, req.recursion_drops);
  emit_atomic_add(a, x10, x11, x12, +1);
  emit_restore_gprs(a, f);
  emit_atomic_add(a, x16, x17, x9, -1);      // x16: still &entries
  emit_unwind_records(a, f);
  a.ret(x9);
  return finish(a, pool, code, place);
}

// ---------------------------------------------------------------------------
// Exit trampoline (d)
// ---------------------------------------------------------------------------

namespace {

void emit_exit_save(asmjit::a64::Assembler& a, bool save) {
  using namespace asmjit::a64;
  auto pair = [&](const Gp& r0, const Gp& r1, int32_t at) {
    if (save) {
      a.stp(r0, r1, ptr(sp, at));
    } else {
      a.ldp(r0, r1, ptr(sp, at));
    }
  };
  pair(x0, x1, 0);
  emit_fp_regs(a, 16, 0, 2, save);
  emit_fp_regs(a, kExitQ2, 2, 6, save);
  pair(x2, x3, kExitGprs);
  pair(x4, x5, kExitGprs + 16);
  pair(x6, x7, kExitGprs + 32);
  pair(x8, x10, kExitGprs + 48);
  pair(x11, x12, kExitGprs + 64);
  pair(x13, x14, kExitGprs + 80);
  pair(x15, x18, kExitGprs + 96);
  static_assert(kExitGprs + 112 == kExitRealReturn);
}

// Back to the parent: x30 = the real return address, sp = S.
void emit_exit_leave(asmjit::a64::Assembler& a) {
  using namespace asmjit::a64;
  a.ldr(x30, ptr(sp, kExitRealReturn));
  a.ldr(x29, ptr(sp, kExitRecord));
  a.add(sp, sp, asmjit::Imm(kExitFrame));
  a.ret(x30);
}

// (i) An inline trampoline (backends/backend.h), a counter's. The site's
//     `bl` left x30 = start+8 and x9 = the parent's return address, as for
//     (c). It uses x16/x17 (IP0/IP1, any veneer's) and x15, kept on the
//     stack for the count's status;
//     the count is an exclusive pair, which an exception return between
//     the two makes retry (a same-thread signal handler's counts are kept):
//
//     start-16  offset of the site's counter in the block  (runtime's words)
//     start-8   fallback trampoline
//     start:    str   x15, [sp, #-16]!
//               mrs   x16, tpidr_el0 ; add x16, x16, #block_tls
//               ldr   x16, [x16]
//               cbz   x16, first
//               ldr   x17, start-16 ; add x16, x16, x17
//            1: ldxr  x17, [x16] ; add x17, x17, #1
//               stxr  w15, x17, [x16] ; cbnz w15, 1b
//               ldr   x15, [sp], #16
//               mov   x16, x30 ; mov x30, x9
//               ret   x16                 ; into start+8, x30 = the parent's
//     first:    ldr   x15, [sp], #16
//               ldr   x17, start-8
//               br    x17                 ; x30, x9 as the site left them
// (j) An inline latency trampoline (backends/backend.h, kLatency), called
//     as (i) is. It counts itself an entry and passes the guard as (c)
//     does (inside a callback it goes on to the fallback, which drops the
//     call: so a signal handler's traced calls cannot push between our
//     writes and our publish), pushes the shadow entry as shadow_push does
//     (slot S-8, the key (c) uses; the return address is in x9), counts
//     its exit and returns into the body with x30 = the landing, whose
//     pop() adds the duration. It keeps x12-x15 on the stack and uses
//     x16/x17:
//
//     start-16  the site's ExitRecord     (runtime's words)
//     start-8   fallback trampoline
//     start:    stp x14, x15, [sp, #-32]! ; stp x12, x13, [sp, #16]
//               x16 = &entries ; entries++ (exclusive pair)
//               guard: not our entry alone -> back
//               [tp + block] == 0 or (s = [tp + shadow]) == 0 -> back
//               d = s->depth ; d == capacity -> back
//               d and s->e[d-1].slot <= S-8 -> back      ; prune, chain
//               e = &s->e[d]
//               e->slot = S-8 ; e->ret = x9 ; e->rec = [start-16]
//               e->ip = cntvct_el0
//               s->depth = d+1 ; s->hooks += 1 ; exits++
//               restore ; mov x16, x30 ; x30 = landing ; ret x16
//     back:     entries-- ; restore ; br [start-8]   ; as the site entered us
//
//     Sampled (sample_period N > 1), before the above, which becomes
//     `timed`: a call that is not the thread's turn takes 1 from the
//     site's countdown (an exclusive pair, as (i)'s count) and returns
//     into the body at once, as (i) does:
//
//     start:    str x15, [sp, #-16]!
//               x16 = [tp + block] ; cbz x16, none
//               x17 = [start-16] ; x17 = [x17 + kBlockOffset]
//               x16 = x16 + x17 + countdown
//            1: ldxr x17, [x16] ; sub x17, x17, #1 ; stxr w15, x17, [x16] ; cbnz w15, 1b
//               tbz x17, #63, skip                     ; 0 or more left
//               x17 = N-1 ; str x17, [x16]             ; this call's turn
//               ldr x15, [sp], #16 ; b timed
//     skip:     ldr x15, [sp], #16
//               mov x16, x30 ; mov x30, x9 ; ret x16   ; into the body
//     none:     x16 = tp + pending ; x17 = [start-16] ; str x17, [x16]
//               ldr x15, [sp], #16
//               ldr x17, start-8 ; br x17              ; the first-call path
void emit_latency_sampling(asmjit::a64::Assembler& a, LiteralPool& pool, const InlineRequest& req,
                           const asmjit::Label& start, const asmjit::Label& timed) {
  using namespace asmjit;
  using namespace asmjit::a64;
  namespace layout = shadow_layout;
  Label skip = a.newLabel(), none = a.newLabel();
  a.str(x15, ptr_pre(sp, -16));
  emit_tls_address(a, pool, x16, x17, req.block_tls_offset);
  a.ldr(x16, ptr(x16));
  a.cbz(x16, none);
  a.ldr(x17, ptr(start, kInlineOffsetWord));
  a.ldr(x17, ptr(x17, layout::kBlockOffset));
  a.add(x16, x16, x17);
  a.add(x16, x16, Imm(8 * layout::kHistCountdown));
  emit_atomic_add(a, x16, x17, x15, -1);
  a.tbz(x17, 63, skip);
  pool.load(x17, req.sample_period - 1);
  a.str(x17, ptr(x16));
  a.ldr(x15, ptr_post(sp, 16));
  a.b(timed);
  a.bind(skip);
  a.ldr(x15, ptr_post(sp, 16));
  a.mov(x16, x30);
  a.mov(x30, x9);
  a.ret(x16);
  a.bind(none);
  emit_tls_address(a, pool, x16, x17, req.pending_tls_offset);
  a.ldr(x17, ptr(start, kInlineOffsetWord));
  a.str(x17, ptr(x16));
  a.ldr(x15, ptr_post(sp, 16));
  a.ldr(x17, ptr(start, kInlineFallbackWord));
  a.br(x17);
}

Result<std::vector<uint8_t>> emit_latency_template(const InlineRequest& req) {
  using namespace asmjit;
  using namespace asmjit::a64;
  namespace layout = shadow_layout;
  if (req.shadow_tls_offset == 0 || req.exit_trampoline == 0 || req.counts_tls_offset == 0) {
    return make_error(FTJIT_E_INTERNAL, "inline latency request without its shadow stack, counts or landing");
  }
  constexpr uint64_t kBase = 0x100000;  // any: the code is position-independent
  CodeHolder code;
  FTJIT_TRY(start_code(code, kBase));
  Assembler a(&code);
  LiteralPool pool(a);
  Label start = a.newLabel(), back = a.newLabel(), push = a.newLabel(), again = a.newLabel();
  Label timed = a.newLabel();
  constexpr int32_t kSaved = 32;
  a.bind(start);
  if (req.sample_period > 1) {
    if (req.sample_period > kMaxInlineSample || req.pending_tls_offset == 0) {
      return make_error(FTJIT_E_INTERNAL, "sampled inline latency request without its pending word, or too long a period");
    }
    emit_latency_sampling(a, pool, req, start, timed);
  }
  a.bind(timed);
  a.stp(x14, x15, ptr_pre(sp, -kSaved));
  a.stp(x12, x13, ptr(sp, 16));
  emit_tls_address(a, pool, x16, x17, req.counts_tls_offset);
  emit_atomic_add(a, x16, x17, x15, +1);     // entries
  a.bind(again);
  a.ldr(x12, ptr(x16));
  a.ldr(x13, ptr(x16, 8));
  a.ldr(x14, ptr(x16));
  a.cmp(x12, x14);
  a.b_ne(again);
  a.sub(x12, x12, x13);
  a.cmp(x12, Imm(1));
  a.b_ne(back);
  emit_tls_address(a, pool, x17, x12, req.block_tls_offset);
  a.ldr(x17, ptr(x17));
  a.cbz(x17, back);
  emit_tls_address(a, pool, x17, x12, req.shadow_tls_offset);
  a.ldr(x17, ptr(x17));
  a.cbz(x17, back);
  a.ldr(w12, ptr(x17, layout::kDepth));
  a.mov(w13, Imm(layout::kCapacity));
  a.cmp(w12, w13);
  a.b_hs(back);
  a.add(x14, sp, Imm(kSaved - 8));            // the slot: S-8
  a.cbz(w12, push);
  a.add(x13, x17, x12, lsl(5));
  a.ldr(x13, ptr(x13, layout::kEntries - layout::kEntryBytes + layout::kSlot));
  a.cmp(x13, x14);
  a.b_ls(back);
  a.bind(push);
  a.add(x13, x17, x12, lsl(5));
  a.add(x13, x13, Imm(layout::kEntries));
  a.str(x14, ptr(x13, layout::kSlot));
  a.str(x9, ptr(x13, layout::kRet));
  a.ldr(x14, ptr(start, kInlineOffsetWord));
  a.str(x14, ptr(x13, layout::kRecord));
  a.mrs(x14, Imm(Predicate::SysReg::kCNTVCT_EL0));
  a.str(x14, ptr(x13, layout::kIp));
  a.add(w12, w12, Imm(1));
  a.str(w12, ptr(x17, layout::kDepth));      // published
  a.ldr(x14, ptr(x17, layout::kHooks));
  a.add(x14, x14, Imm(1));
  a.str(x14, ptr(x17, layout::kHooks));
  a.add(x16, x16, Imm(8));
  emit_atomic_add(a, x16, x17, x15, +1);     // exits
  a.ldp(x12, x13, ptr(sp, 16));
  a.ldp(x14, x15, ptr_post(sp, kSaved));
  a.mov(x16, x30);
  pool.load(x30, req.exit_trampoline);       // the return hooked
  a.ret(x16);
  a.bind(back);
  emit_atomic_add(a, x16, x17, x15, -1);     // entries: x16 still points there
  a.ldp(x12, x13, ptr(sp, 16));
  a.ldp(x14, x15, ptr_post(sp, kSaved));
  a.ldr(x17, ptr(start, kInlineFallbackWord));
  a.br(x17);
  return finish(a, pool, code, kBase);
}

Result<std::vector<uint8_t>> Arm64Emitter::emit_inline_template(const InlineRequest& req) const {
  using namespace asmjit;
  using namespace asmjit::a64;
  FTJIT_TRY(inline_action_compiled(req, {InlineAction::kCount, InlineAction::kLatency}, "arm64"));
  if (req.action == InlineAction::kLatency) return emit_latency_template(req);
  constexpr uint64_t kBase = 0x100000;  // any: the code is position-independent
  CodeHolder code;
  FTJIT_TRY(start_code(code, kBase));
  Assembler a(&code);
  LiteralPool pool(a);
  Label start = a.newLabel(), first = a.newLabel();
  a.bind(start);
  a.str(x15, ptr_pre(sp, -16));
  emit_tls_address(a, pool, x16, x17, req.block_tls_offset);
  a.ldr(x16, ptr(x16));
  a.cbz(x16, first);
  a.ldr(x17, ptr(start, kInlineOffsetWord));
  a.add(x16, x16, x17);
  emit_atomic_add(a, x16, x17, x15, 1);
  a.ldr(x15, ptr_post(sp, 16));
  a.mov(x16, x30);
  a.mov(x30, x9);
  a.ret(x16);
  a.bind(first);
  a.ldr(x15, ptr_post(sp, 16));
  a.ldr(x17, ptr(start, kInlineFallbackWord));
  a.br(x17);
  return finish(a, pool, code, kBase);
}

}  // namespace

Result<std::vector<uint8_t>> Arm64Emitter::emit_exit_trampoline(const ExitTrampolineRequest& req,
                                                                uint64_t place) const {
  using namespace asmjit;
  using namespace asmjit::a64;
  if (req.landing_offset % kInsnBytes != 0 || (place & 3) != 0) {
    return make_error(FTJIT_E_INTERNAL, "a64 exit trampoline: landing must be 4-byte aligned");
  }
  if (req.pop == 0) return make_error(FTJIT_E_INTERNAL, "exit trampoline request without pop");
  CodeHolder code;
  FTJIT_TRY(start_code(code, place));
  Assembler a(&code);
  LiteralPool pool(a);
  for (uint32_t i = 0; i < req.landing_offset; i += kInsnBytes) a.brk(Imm(kNoCallAndLandBrk));

  Label landing = a.newLabel(), again = a.newLabel(), nested_end = a.newLabel();
  a.bind(landing);
  a.sub(sp, sp, Imm(kExitFrame));
  a.stp(x29, x30, ptr(sp, kExitRecord));
  a.add(x29, sp, Imm(kExitRecord));
  emit_exit_save(a, true);
  emit_tls_address(a, pool, x16, x17, req.counts_tls_offset);
  emit_atomic_add(a, x16, x17, x9, +1);      // entries

  a.bind(again);
  a.add(x0, sp, Imm(kExitFrame - kSlotBelowSp));  // the slot: S-8
  a.mov(x1, sp);                             // ftjit_ret_regs
  emit_call(a, pool, place, req.pop);
  // A chain: the entry popped returns to the landing itself. Pop again.
  a.adr(x16, landing);
  a.cmp(x0, x16);
  a.b_eq(again);
  a.str(x0, ptr(sp, kExitRealReturn));
  emit_exit_save(a, false);

  // pop() also runs when another of the thread's entries is open (a
  // signal handler's traced code returning under a callback): then our
  // entry is taken back rather than matched by an exit.
  emit_tls_address(a, pool, x16, x17, req.counts_tls_offset);
  a.ldr(x17, ptr(x16));
  a.ldr(x9, ptr(x16, 8));
  a.sub(x17, x17, x9);
  a.cmp(x17, Imm(1));
  a.b_ne(nested_end);
  a.add(x16, x16, Imm(8));
  emit_atomic_add(a, x16, x17, x9, +1);      // exits
  emit_exit_leave(a);
  a.bind(nested_end);
  emit_atomic_add(a, x16, x17, x9, -1);      // entries
  emit_exit_leave(a);
  return finish(a, pool, code, place);
}

const TrampolineEmitter& arm64_emitter() {
  static const Arm64Emitter emitter;
  return emitter;
}

const Backend& arm64_backend() {
  static const std::unique_ptr<Backend> backend = make_arm64_backend(arm64_emitter());
  return *backend;
}

}  // namespace ftjit
