// SPDX-License-Identifier: MIT
// x86-64 trampolines, emitted with asmjit (sites: x86_64_backend.cpp).
//
// (c) The trampoline frame. r11 keeps the stack pointer the site's call
//     left (the caller's r11 goes below it first), then rsp goes down by
//     F+8+24 and is rounded down to 16:
//
//     r11+8     parent return address    -> parent_ip
//     r11       return into entry+5      -> ip = it - 5
//     r11-8     the caller's r11          \  outside the frame, inside
//     r11-16    direct to continue to      | the arrival's red zone: read
//     r11-24    return hooked? (by stub)  /  after rsp is back at r11
//     ...       (0 or 8 bytes of alignment)
//     rsp+F     r11, to restore rsp from
//     rsp+208   xmm8..xmm15      (with FP, saves all)
//     rsp+80    xmm0..xmm7 (16 B each)   -+
//     rsp+72    sp at the traced entry    |  ftjit_regs, passed as `regs`
//     rsp+64    direct (0 = none)         |  F = 336 / 208 (saves all /
//                                          |  abi) with FP, 80 without
//     rsp+0     rdi rsi rdx rcx r8 r9 rax r10 -+
//
//     Every register comes back, r11 and xmm8-15 included: GCC's -fipa-ra
//     lets a caller keep values in call-clobbered registers across a call
//     to a function it saw not write them. Where the module shows it was
//     built without (saves abi: TrampolineRequest::saves_all false),
//     xmm8-15 are left to the callback, as the psABI lets any callee.
//     (Without FP saves the callbacks promise to leave vector registers
//     alone.)
//
//     Per-thread counters at fs:[tls] (entries) and fs:[tls+8] (exits):
//     the first instruction counts an entry and the last but one an exit
//     (or takes the entry back, nested: runtime/thread_control.h);
//     runtime/grace reads them to know when no thread can still be inside
//     a trampoline to be freed. They are the reentrancy guard too: a
//     thread already running ftjit code (a callback calling traced code, a
//     signal handler running traced code inside one) has entries - exits
//     > 1 once it has counted this entry, and only counts a drop:
//
//         inc   fs:[tls]              ; entries
//         ...   frame, save rdi..r10
//     again:
//         mov   rax, fs:[tls]         ; entries - exits, read so that a
//         mov   rdx, fs:[tls+8]       ; signal handler's trampolines in
//         cmp   rax, fs:[tls]         ; between (both counters moved
//         jne   again                 ; alike) are seen and read past
//         sub   rax, rdx
//         cmp   rax, 1
//         jne   nested
//         ...   save FP, call, restore
//         mov   rsp, [rsp+F]
//         inc   fs:[tls+8]            ; exits
//         ret
//     nested:
//         reload rax, rdx ; mov rsp, [rsp+F] ; lock inc [drops]
//         dec fs:[tls] ; ret           ; our entry taken back: exits
//                                      ; count outermost frames only
//
//     No guard byte is set and cleared around the callback: two stores
//     fewer a call, for the store ports a trampoline is short of.
//
// (d) Why sites with exit hooks are entered by a jump. A return address
//     replaced in place makes the function's `ret` go where the CPU's
//     return-stack buffer did not predict (10-12 ns a call here: the
//     hooks bench's floor). So nothing calls the trampoline: the site
//     jumps to its stub (x86_64_backend.cpp, (c)), which pushes entry+5 and
//     jumps to the trampoline; the trampoline runs as in (c) and, if the
//     callbacks hooked the return, calls the body itself:
//
//       parent:  call f        RSB: ..., parent
//       f:       jmp  stub     (no call: nothing pushed on the RSB)
//       stub:    push entry+5 ; jmp [word] -> trampoline (e)
//       (e):     ... ; jmp call-and-land
//       (f):     call entry+5  RSB: ..., parent, landing
//       f body:  ret           -> landing, predicted
//       landing: ... ; ret     -> parent, predicted
//
// (e) The end of a trampoline entered by a stub. Before the registers are
//     restored, it notes below the arrival whether the return address slot
//     holds the landing (a callback hooked the return); then, with every
//     register restored and rsp back at its arrival ([rsp] = entry+5,
//     [rsp+8] = the slot):
//
//         cmp   byte [rsp-24], 0
//         je    plain
//         add   rsp, 16               ; entry+5 and the slot: the shadow
//                                     ; stack has the real return address
//         jmp   [call_and_land]       ; (f) counts our exit, calls entry+5
//     plain:
//         inc   fs:[tls+8]
//         add   rsp, 8
//         jmp   [rsp-8]               ; into the body, return untouched
//
// (f) The exit trampoline, one per process, never unmapped (hooked frames
//     can outlive any engine): call-and-land, then the landing where every
//     hooked frame returns (ftrace function_graph's return_to_handler):
//
//     place+0      nop padding
//                  inc  fs:[tls+8]    ; the calling trampoline's exit
//                  call [rsp-16]      ; the body (entry+5); returns to:
//     place+16     landing:
//
//     r11-8     the slot that held the replaced return address: never
//               written here until pop returned, the shadow stack reads it
//     r11-16    r11 as the function returned it
//     ...       (alignment)
//     rsp+328   r11: the stack pointer on arrival
//     rsp+320   the real return address, across the callback of (g)
//     rsp+272   rcx rsi rdi r8 r9 r10
//     rsp+48    xmm2..xmm15, kept only around pop() and, from its record
//               to the last tail, for a callback without FTJIT_OPS_F_NO_FP
//               (ExitRecord::save_fp): 14 stores fewer a return for the
//               callbacks that promise to leave them
//     rsp+16    xmm0 xmm1                -+
//     rsp+0     rax rdx                  -+ ftjit_ret_regs
//
//     Every call-clobbered register is kept, not just the return values:
//     GCC's -fipa-ra lets a caller keep values in registers its callee was
//     seen not to write, across the call. The landing pops the common case
//     itself ((g)); otherwise pop(slot, regs) returns the real return
//     address, and a chain (the frame hooked twice) pops again. The
//     address goes back into the slot and a `ret` takes it, consuming the
//     parent's own return-stack entry.
#include "backends/x86_64/x86_64_backend.h"

#include <asmjit/x86.h>

#include <cstddef>
#include <cstring>

#include "backends/shadow_layout.h"
#include "backends/x86_64/x86_64_encoding.h"
#include "ftjit/ftjit.h"

namespace ftjit {
namespace {

using namespace x86_64;

constexpr int32_t kFrameWithFp = 336;   // ftjit_regs, then xmm8..xmm15
constexpr int32_t kFrameWithFpAbi = 208; // ftjit_regs: xmm0..xmm7 only (saves abi)
constexpr int32_t kFrameNoFp = 80;
// Below a trampoline's arrival stack pointer, outside its frame: the
// caller's r11, the direct trampoline to continue to (0: none), and whether
// the return was hooked (stub-entered trampolines). Within the 128-byte red
// zone of the arrival, so a signal frame never lands on them after rsp is
// back there.
constexpr int32_t kR11Below = -8;
constexpr int32_t kDirectBelow = -16;
constexpr int32_t kHookedBelow = -24;
constexpr int32_t kKeepBelow = 24;
static_assert(offsetof(ftjit_regs, direct) == 64);
static_assert(offsetof(ftjit_regs, sp) == 72);
static_assert(offsetof(ftjit_regs, fp) == 80);
static_assert(sizeof(ftjit_regs) + 8 * 16 == kFrameWithFp);
static_assert(sizeof(ftjit_regs) == kFrameWithFpAbi);
static_assert(offsetof(ftjit_ops, func) == 8);
static_assert(sizeof(ftjit_ret_regs) == 48);
// The exit frame: ftjit_ret_regs (rax rdx xmm0 xmm1), xmm2-15, then rcx
// rsi rdi r8 r9 r10, the real return address (the landing's own pop), then
// the saved rsp.
constexpr int32_t kExitGprs = 16 + 16 * 16;
constexpr int32_t kExitRealReturn = kExitGprs + 6 * 8;
constexpr int32_t kExitFrame = kExitRealReturn + 8;
constexpr int32_t kSlotBytes = 8;    // the replaced return address, below the exit's arrival
// `call [rsp-16]` (ff 54 24 f0): call-and-land's, and inline latency's
// before its landing; (j) jumps to the one before where it hooks returns.
constexpr uint64_t kCallBodyBytes = 4;

class X86_64Emitter final : public TrampolineEmitter {
 public:
  Result<std::vector<uint8_t>> emit_trampoline(const TrampolineRequest& req,
                                               uint64_t place) const override;
  Result<std::vector<uint8_t>> emit_exit_trampoline(const ExitTrampolineRequest& req,
                                                    uint64_t place) const override;
  Result<std::vector<uint8_t>> emit_inline_template(const InlineRequest& req) const override;
};
// ---------------------------------------------------------------------------
// Trampoline emission
// ---------------------------------------------------------------------------

Result<std::vector<uint8_t>> finish(asmjit::CodeHolder& code, uint64_t place) {
  using namespace asmjit;
  if (code.flatten() != kErrorOk || code.resolveUnresolvedLinks() != kErrorOk ||
      code.relocateToBase(place) != kErrorOk) {
    return make_error(FTJIT_E_INTERNAL, "asmjit: cannot relocate trampoline");
  }
  std::vector<uint8_t> out(code.codeSize());
  if (code.copyFlattenedData(out.data(), out.size()) != kErrorOk) {
    return make_error(FTJIT_E_INTERNAL, "asmjit: cannot copy trampoline");
  }
  return out;
}

Status start_code(asmjit::CodeHolder& code, uint64_t place) {
  if (code.init(asmjit::Environment(asmjit::Arch::kX64), place) != asmjit::kErrorOk) {
    return make_error(FTJIT_E_INTERNAL, "asmjit: cannot init code holder");
  }
  return {};
}

asmjit::x86::Mem tls_word(int64_t offset) {
  asmjit::x86::Mem m = asmjit::x86::ptr_abs(static_cast<uint64_t>(offset), 8);
  m.setSegment(asmjit::x86::fs);
  return m;
}

// The guard, once the argument registers are saved (rax and rdx are free):
// goes to `nested` unless this trampoline's entry is the thread's only one
// in progress. A signal handler between two loads may run trampolines of
// its own, which leave both counters advanced by the same amount: reading
// entries again tells whether that happened, and then we read again.
void emit_guard(asmjit::x86::Assembler& a, int64_t tls, asmjit::Label nested,
                const asmjit::x86::Gp& entries = asmjit::x86::rax,
                const asmjit::x86::Gp& exits = asmjit::x86::rdx) {
  asmjit::Label again = a.newLabel();
  a.bind(again);
  a.mov(entries, tls_word(tls));
  a.mov(exits, tls_word(tls + 8));
  a.cmp(entries, tls_word(tls));
  a.jne(again);
  a.sub(entries, exits);
  a.cmp(entries, 1);
  a.jne(nested);
}

// The frame of (c) or (d): realigned to 16 below the arrival stack
// pointer, which stays in r11 and at rsp+frame. The `keep` bytes just below
// the arrival are left untouched (the exit trampoline's slot: the shadow
// stack reads it until pop returns).
void emit_frame_enter(asmjit::x86::Assembler& a, int32_t frame, int32_t keep) {
  using namespace asmjit::x86;
  a.mov(r11, rsp);
  a.sub(rsp, frame + 8 + keep);
  a.and_(rsp, -16);
  a.mov(qword_ptr(rsp, frame), r11);
}

void emit_frame_leave(asmjit::x86::Assembler& a, int32_t frame) {
  a.mov(asmjit::x86::rsp, asmjit::x86::qword_ptr(asmjit::x86::rsp, frame));
}

// The newest entry of the thread's shadow stack, for (g) and (h): rax = the
// ShadowStack, edx = its depth, rcx = (depth - 1) * entry bytes; to `none`
// if the thread has no stack or it is empty.
void emit_newest_entry(asmjit::x86::Assembler& a, int64_t shadow_tls_offset, asmjit::Label none) {
  using namespace asmjit::x86;
  a.mov(rax, tls_word(shadow_tls_offset));
  a.test(rax, rax);
  a.jz(none);
  a.mov(edx, dword_ptr(rax, shadow_layout::kDepth));
  a.test(edx, edx);
  a.jz(none);
  a.lea(rcx, qword_ptr(rdx, -1));
  a.shl(rcx, 5);
  static_assert(shadow_layout::kEntryBytes == 32);
}

// (h) A generated trampoline whose ops hooks returns keeps the shadow stack
//     itself (backends/shadow_layout.h), around the callback it calls:
//
//     before: if s = fs:[shadow], s->depth and s->e[depth-1].slot <= slot
//               shadow_prune(slot)        ; frames longjmp'd over, unwound
//     after:  if !s or s->depth == capacity
//               shadow_push(slot, ip, rec)  ; makes the stack, or counts
//             else
//               s->e[depth] = {slot, [slot], ip, rec}
//               [slot] = landing          ; before depth publishes it
//               s->depth++ ; s->hooks++
//
//     slot = regs->sp, the traced function's stack pointer at its entry.
void emit_prune_check(asmjit::x86::Assembler& a, const TrampolineRequest& req) {
  using namespace asmjit::x86;
  namespace layout = shadow_layout;
  asmjit::Label done = a.newLabel();
  emit_newest_entry(a, req.shadow_tls_offset, done);
  a.mov(rcx, qword_ptr(rax, rcx, 0, layout::kEntries + layout::kSlot));
  a.mov(r8, qword_ptr(rsp, 72));           // this frame's slot
  a.cmp(rcx, r8);
  a.ja(done);                              // the newest hooked frame is above: alive
  a.push(rdi);                             // ip, parent_ip (rsp stays 16-aligned)
  a.push(rsi);
  a.mov(rdi, r8);
  a.mov(rax, asmjit::imm(req.shadow_prune));
  a.call(rax);
  a.pop(rsi);
  a.pop(rdi);
  a.bind(done);
}

void emit_shadow_push(asmjit::x86::Assembler& a, const TrampolineRequest& req) {
  using namespace asmjit::x86;
  namespace layout = shadow_layout;
  asmjit::Label slow = a.newLabel(), done = a.newLabel();
  a.mov(r9, qword_ptr(rsp, 72));           // the slot
  a.mov(r8, qword_ptr(r9, -8));            // entry+5, the site's return address
  a.sub(r8, kSiteBytes);                   // ip
  a.mov(rax, tls_word(req.shadow_tls_offset));
  a.test(rax, rax);
  a.jz(slow);
  a.mov(edx, dword_ptr(rax, layout::kDepth));
  a.cmp(edx, layout::kCapacity);
  a.jae(slow);
  a.mov(rcx, rdx);
  a.shl(rcx, 5);
  a.lea(rcx, qword_ptr(rax, rcx, 0, layout::kEntries));
  a.mov(qword_ptr(rcx, layout::kSlot), r9);
  a.mov(r10, qword_ptr(r9));
  a.mov(qword_ptr(rcx, layout::kRet), r10);
  a.mov(qword_ptr(rcx, layout::kIp), r8);
  a.mov(r10, asmjit::imm(req.exit_record));
  a.mov(qword_ptr(rcx, layout::kRecord), r10);
  a.mov(r10, asmjit::imm(req.exit_trampoline));
  a.mov(qword_ptr(r9), r10);               // the return hooked
  a.inc(edx);
  a.mov(dword_ptr(rax, layout::kDepth), edx);  // then published
  a.inc(qword_ptr(rax, layout::kHooks));
  a.jmp(done);
  a.bind(slow);
  a.mov(rdi, r9);
  a.mov(rsi, r8);
  a.mov(rdx, asmjit::imm(req.exit_record));
  a.mov(rax, asmjit::imm(req.shadow_push));
  a.call(rax);
  a.bind(done);
}

// On into the body at entry+5 (on top of the stack, the stub's push)
// without a return: nothing called us, no return-stack entry is ours.
void emit_jump_to_body(asmjit::x86::Assembler& a) {
  using namespace asmjit::x86;
  a.add(rsp, 8);
  a.jmp(qword_ptr(rsp, -8));
}

// The end of a trampoline entered by a stub ((e)): every register
// restored, rsp back at its arrival ([rsp] = entry+5, the stub's push;
// [rsp+8] = the return address slot). `land_word` labels the word holding
// call-and-land's address (emit_call_and_land_word).
void emit_stub_tail(asmjit::x86::Assembler& a, const asmjit::x86::Mem& exits,
                    asmjit::Label land_word, asmjit::Label* to_direct) {
  using namespace asmjit::x86;
  if (to_direct != nullptr) {
    a.cmp(qword_ptr(rsp, kDirectBelow), 0);
    a.jne(*to_direct);
  }
  asmjit::Label plain = a.newLabel();
  a.cmp(byte_ptr(rsp, kHookedBelow), 0);
  a.je(plain);
  // Hooked: the slot holds the landing, the real return address is on the
  // shadow stack. Drop both words and call the body (entry+5, now at
  // [rsp-16]) from call-and-land, which counts our exit.
  a.add(rsp, 16);
  a.jmp(ptr(land_word));
  // Not hooked (a thread filter said no, the shadow stack was full).
  a.bind(plain);
  a.inc(exits);
  emit_jump_to_body(a);
}

// The word that jmp above reads: call-and-land is in the exit trampoline's
// page, anywhere in the address space.
void emit_call_and_land_word(asmjit::x86::Assembler& a, const TrampolineRequest& req,
                             asmjit::Label land_word) {
  a.align(asmjit::AlignMode::kData, 8);
  a.bind(land_word);
  a.embedUInt64(req.call_and_land);
}

Result<std::vector<uint8_t>> X86_64Emitter::emit_trampoline(
    const TrampolineRequest& req, uint64_t place) const {
  using namespace asmjit;
  using namespace asmjit::x86;

  CodeHolder code;
  FTJIT_TRY(start_code(code, place));
  Assembler a(&code);
  if (req.recursion_drops == 0) {
    return make_error(FTJIT_E_INTERNAL, "trampoline request without a drop counter");
  }

  // FP registers kept around the callback: none for a NO_FP ops; the
  // argument ones (xmm0-7, in ftjit_regs) where callers keep nothing else
  // across the call (saves abi); all sixteen otherwise.
  const int n_xmm = !req.save_fp ? 0 : req.saves_all ? 16 : 8;
  const int32_t frame = !req.save_fp ? kFrameNoFp : req.saves_all ? kFrameWithFp : kFrameWithFpAbi;
  Mem exits = tls_word(req.counts_tls_offset + 8);
  static const Gp kArgRegs[8] = {rdi, rsi, rdx, rcx, r8, r9, rax, r10};
  Label nested = a.newLabel();

  a.inc(tls_word(req.counts_tls_offset));
  a.mov(qword_ptr(rsp, kR11Below), r11);
  emit_frame_enter(a, frame, kKeepBelow);
  for (int i = 0; i < 8; ++i) a.mov(qword_ptr(rsp, i * 8), kArgRegs[i]);
  emit_guard(a, req.counts_tls_offset, nested);
  if (req.honour_direct) a.mov(qword_ptr(rsp, 64), imm(0));
  for (int i = 0; i < n_xmm; ++i) a.movaps(xmmword_ptr(rsp, 80 + 16 * i), xmm(i));

  a.mov(rdi, qword_ptr(r11));              // return address = entry + 5
  a.sub(rdi, kSiteBytes);                  // ip
  a.mov(rsi, qword_ptr(r11, 8));           // parent_ip
  a.lea(r11, qword_ptr(r11, 8));
  a.mov(qword_ptr(rsp, 72), r11);          // sp at the traced entry
  if (req.exit_trampoline != 0) {
    // parent_ip is the exit trampoline: the real one is on the shadow
    // stack. rax and the argument registers are saved already; rsp is
    // aligned for the call.
    Label parent_ok = a.newLabel();
    a.mov(rax, imm(req.exit_trampoline));
    a.cmp(rsi, rax);
    a.jne(parent_ok);
    a.mov(rdi, r11);                       // the slot
    a.mov(rax, imm(req.real_return));
    a.call(rax);
    a.mov(rsi, rax);
    a.mov(rdi, qword_ptr(rsp, 72));
    a.mov(rdi, qword_ptr(rdi, -8));
    a.sub(rdi, kSiteBytes);                // ip again
    a.bind(parent_ok);
  }
  if (req.exit_record != 0) emit_prune_check(a, req);
  a.mov(rcx, rsp);                         // regs
  if (req.source == OpsSource::kImmediate) {
    a.mov(rdx, imm(req.ops));
    // Near enough for a rel32 call from anywhere in this trampoline?
    const int64_t lo = static_cast<int64_t>(req.func - place) - 4096;
    const int64_t hi = static_cast<int64_t>(req.func - place) + 4096;
    if (fits_rel32(lo) && fits_rel32(hi)) {
      a.call(imm(req.func));
    } else {
      a.mov(rax, imm(req.func));
      a.call(rax);
    }
  } else {
    // The site's ops slot: the 8 bytes before the symbol, 8-aligned (the
    // engine uses no other). The ip is the symbol, or 4 bytes past it
    // behind an endbr64 (a CET build's sled, a relocated entry's stub):
    // rounded down to 8 it is the symbol either way.
    //   symbol-8 [ ops slot ] symbol [ endbr64 ]? ip [ call ] ...
    a.mov(rdx, rdi);
    a.and_(rdx, imm(~int64_t{7}));
    a.mov(rdx, qword_ptr(rdx, -8));
    if (req.func != 0) {
      a.mov(rax, imm(req.func));           // a fixed dispatcher, given the ops
      a.call(rax);
    } else {
      a.call(qword_ptr(rdx, 8));           // ops->func
    }
  }

  if (req.exit_record != 0) emit_shadow_push(a, req);
  for (int i = 0; i < n_xmm; ++i) a.movaps(xmm(i), xmmword_ptr(rsp, 80 + 16 * i));
  // The way out, decided while rax and rdx are free, kept just below the
  // return address where the end reads it once rsp is back there.
  if (req.honour_direct || req.entered_by_stub) a.mov(rdx, qword_ptr(rsp, frame));
  if (req.honour_direct) {
    a.mov(rax, qword_ptr(rsp, 64));
    a.mov(qword_ptr(rdx, kDirectBelow), rax);
  }
  if (req.entered_by_stub) {
    a.mov(rax, imm(req.exit_trampoline));
    a.cmp(qword_ptr(rdx, 8), rax);          // the slot holds the landing?
    a.sete(byte_ptr(rdx, kHookedBelow));
  }
  for (int i = 0; i < 8; ++i) a.mov(kArgRegs[i], qword_ptr(rsp, i * 8));
  emit_frame_leave(a, frame);
  a.mov(r11, qword_ptr(rsp, kR11Below));
  Label to_direct = a.newLabel();
  Label land_word = a.newLabel();
  if (req.entered_by_stub) {
    emit_stub_tail(a, exits, land_word, req.honour_direct ? &to_direct : nullptr);
  } else {
    a.inc(exits);
    if (req.honour_direct) {
      a.cmp(qword_ptr(rsp, kDirectBelow), 0);
      a.jne(to_direct);
    }
    a.ret();
  }
  if (req.honour_direct) {
    a.bind(to_direct);
    // Continue into the direct trampoline as if the site had called it:
    // the return address into entry+5 is on top of the stack again.
    if (req.entered_by_stub) a.inc(exits);
    a.jmp(qword_ptr(rsp, kDirectBelow));
  }

  // Called from inside a callback: count it, run nothing (not even a
  // direct trampoline: it is tracer code too). Only rax and rdx changed.
  // Our entry is taken back rather than matched by an exit: exits count the
  // outermost frames only, so a nested call cannot make a grace period
  // believe the frame it runs under has returned.
  a.bind(nested);
  a.mov(rax, imm(req.recursion_drops));
  a.lock().inc(qword_ptr(rax));
  a.mov(rax, qword_ptr(rsp, 48));
  a.mov(rdx, qword_ptr(rsp, 16));
  emit_frame_leave(a, frame);
  a.mov(r11, qword_ptr(rsp, kR11Below));
  a.dec(tls_word(req.counts_tls_offset));
  if (req.entered_by_stub) {
    emit_jump_to_body(a);
    emit_call_and_land_word(a, req, land_word);
  } else {
    a.ret();
  }
  return finish(code, place);
}

// xmm2-15, for a call that may use them (xmm0-1 are in ftjit_ret_regs,
// saved on arrival whatever the callback).
void emit_exit_fp_save(asmjit::x86::Assembler& a) {
  for (int i = 2; i < 16; ++i) {
    a.movaps(asmjit::x86::xmmword_ptr(asmjit::x86::rsp, 16 + 16 * i), asmjit::x86::xmm(i));
  }
}

void emit_exit_fp_restore(asmjit::x86::Assembler& a) {
  for (int i = 2; i < 16; ++i) {
    a.movaps(asmjit::x86::xmm(i), asmjit::x86::xmmword_ptr(asmjit::x86::rsp, 16 + 16 * i));
  }
}

// The common case once the newest entry is known to be this frame's (rax,
// rcx, edx, r8, r9 as emit_own_pop leaves them): the guard, the pop, the
// callback, then on to `done` with the real return address in rax.
void emit_pop_and_call(asmjit::x86::Assembler& a, const ExitTrampolineRequest& req,
                       asmjit::Label slow, asmjit::Label done) {
  using namespace asmjit::x86;
  namespace layout = shadow_layout;
  asmjit::Label skip_callback = a.newLabel();
  // The guard, as the entry trampolines read it: our own entry only.
  emit_guard(a, req.counts_tls_offset, slow, r10, r11);
  // Popped: the entry is in registers before the depth lets it go.
  a.mov(r10, qword_ptr(rcx, layout::kIp));
  a.dec(edx);
  a.mov(dword_ptr(rax, layout::kDepth), edx);
  a.mov(qword_ptr(rsp, kExitRealReturn), r9);
  a.cmp(byte_ptr(r8, layout::kLive), 0);
  a.je(skip_callback);
  a.mov(rdi, r10);                        // ip
  a.mov(rsi, r9);                         // parent_ip: the real return address
  a.mov(rdx, qword_ptr(r8, layout::kOps));
  a.mov(rcx, rsp);                        // ftjit_ret_regs
  a.call(qword_ptr(r8, layout::kFunc));
  a.bind(skip_callback);
  a.mov(rax, qword_ptr(rsp, kExitRealReturn));
  a.jmp(done);
}

// (g') Inline latency's own landing, at latency_landing_offset: (j) hooks
//      returns with it, so that the other exits pay nothing for it. The
//      newest entry is an inline latency trampoline's (its record's kind
//      says so, its kIp word holds the counter read at the entry), this
//      frame's, not put back for an exception: else on to (g), as if the
//      frame had returned there. Then no callback runs, so no guard and no frame: seven
//      registers kept in the red zone below the slot (which a signal frame
//      skips; four for the checks, which every other exit pays too), the
//      entry read into registers before the depth lets it go (a signal
//      handler's traced calls push above it until then):
//
//         s = fs:[shadow] ; d = s->depth ; e = &s->e[d-1]
//         e->slot != slot or rec = e->rec unhooked or not kInlineLatency
//           -> registers back, on to (g)
//         start = e->ip ; [slot] = e->ret ; s->depth = d-1
//         if rec->live and (h = fs:[block]):
//           h += rec->block_offset
//           ticks = rdtsc - start (< 0: 0)
//           ticks < 2^32: p = ticks * [clock_mult + 8] (16.16), ns = p >> 16,
//                         h[buckets + bsr(p | 2^15) - 15] += 1
//           else:         ns = ticks * [clock_mult] >> 32 (32.32, 128 bits),
//                         h[buckets + bsr(2 ns + 1)] += 1
//                         (either: 0 ns in [0], else in [bsr(ns) + 1])
//           h[total] += ns ; h[max] = max(h[max], ns)
//         registers back ; return through the slot
//
//      Each histogram update is one instruction (a signal handler on this
//      thread cannot split it); the max is a compare and a store, which a
//      handler between the two can only leave below its own call's.
void emit_latency_landing(asmjit::x86::Assembler& a, const ExitTrampolineRequest& req,
                          asmjit::Label landing) {
  using namespace asmjit::x86;
  namespace layout = shadow_layout;
  // The first four are all the checks use (what every other exit pays).
  static const Gp kUsed[7] = {rcx, rsi, rdi, r9, rax, rdx, r8};
  auto at = [](int i) { return qword_ptr(rsp, -kSlotBytes - 8 * (i + 1)); };
  asmjit::Label generic = a.newLabel(), done = a.newLabel(), wide = a.newLabel(),
                have_ns = a.newLabel(), zero = a.newLabel();
  for (int i = 0; i < 4; ++i) a.mov(at(i), kUsed[i]);
  a.mov(rsi, tls_word(req.shadow_tls_offset));
  a.test(rsi, rsi);
  a.jz(generic);
  a.mov(ecx, dword_ptr(rsi, layout::kDepth));
  a.sub(ecx, 1);
  a.jb(generic);
  a.mov(r9d, ecx);
  a.shl(r9, 5);
  a.lea(r9, qword_ptr(rsi, r9, 0, layout::kEntries));
  a.lea(rdi, qword_ptr(rsp, -kSlotBytes));
  a.cmp(qword_ptr(r9, layout::kSlot), rdi);
  a.jne(generic);
  a.mov(rdi, qword_ptr(r9, layout::kRecord));
  a.test(dil, asmjit::imm(layout::kUnhooked));
  a.jnz(generic);
  a.cmp(byte_ptr(rdi, layout::kKind), layout::kKindInlineLatency);
  a.jne(generic);
  for (int i = 4; i < 7; ++i) a.mov(at(i), kUsed[i]);
  a.rdtsc();                                // edx:eax, the end
  a.mov(r8, qword_ptr(r9, layout::kRet));
  a.mov(qword_ptr(rsp, -kSlotBytes), r8);   // what we return through
  a.mov(r8d, dword_ptr(r9, layout::kIp + 4));  // the start, in the two
  a.mov(r9d, dword_ptr(r9, layout::kIp));      // halves (j) wrote
  a.mov(dword_ptr(rsi, layout::kDepth), ecx);  // popped
  a.cmp(byte_ptr(rdi, layout::kLive), 0);
  a.je(done);
  a.mov(rsi, tls_word(req.block_tls_offset));
  a.test(rsi, rsi);
  a.jz(done);
  a.add(rsi, qword_ptr(rdi, layout::kBlockOffset));
  a.mov(rcx, asmjit::imm(req.clock_mult));
  // ticks = edx:eax - start as two halves: below 2^32 (some seconds) the
  // high half is 0 and the low one is all there is. Then a 64-bit product
  // p with the 16.16 factor (it cannot overflow) and ns = p >> 16; the
  // bucket of ns straight from p: bsr(p | 2^15) - 15 (0 ns: [0]; else
  // [bsr(ns) + 1]). The chain from the counter to the bucket: sub, imul,
  // or, bsr.
  a.sub(eax, r9d);
  a.sbb(edx, r8d);
  a.jnz(wide);
  a.imul(rax, qword_ptr(rcx, 8));
  a.mov(rdx, rax);
  a.or_(rdx, 0x8000);
  a.bsr(rdx, rdx);
  a.inc(qword_ptr(rsi, rdx, 3, 8 * (layout::kHistBuckets - 15)));
  a.shr(rax, 16);
  a.bind(have_ns);
  a.add(qword_ptr(rsi, 8 * layout::kHistTotalNs), rax);
  a.cmp(qword_ptr(rsi, 8 * layout::kHistMaxNs), rax);
  a.jae(done);
  a.mov(qword_ptr(rsi, 8 * layout::kHistMaxNs), rax);
  a.jmp(done);
  // 2^32 ticks or more, or a counter read on another CPU, behind (< 0):
  // ns = ticks * mult >> 32 in 128 bits, bucket bsr(2 ns + 1).
  a.bind(wide);
  a.shl(rdx, 32);
  a.or_(rax, rdx);
  a.js(zero);
  a.mul(qword_ptr(rcx));
  a.shrd(rax, rdx, 32);
  a.lea(rdx, qword_ptr(rax, rax, 0, 1));
  a.bsr(rdx, rdx);
  a.inc(qword_ptr(rsi, rdx, 3, 8 * layout::kHistBuckets));
  a.jmp(have_ns);
  a.bind(zero);
  a.xor_(eax, eax);
  a.inc(qword_ptr(rsi, 8 * layout::kHistBuckets));
  a.jmp(have_ns);
  a.bind(done);
  for (int i = 0; i < 7; ++i) a.mov(kUsed[i], at(i));
  a.lea(rsp, qword_ptr(rsp, -kSlotBytes));
  a.ret();
  a.bind(generic);
  for (int i = 0; i < 4; ++i) a.mov(kUsed[i], at(i));
  a.jmp(landing);
}

// (g) The landing's own pop, before anything calls into the runtime
//     (rdi = the slot; every register saved; rsp the aligned frame):
//
//         s = fs:[shadow]; d = s->depth
//         e = &s->e[d-1]
//         e->slot == slot, rec = e->rec not put back for an exception,
//         e->ret not the landing (a chain), this landing's entry the
//         thread's only open one (no callback running under it)
//           -> else: pop() as before
//         if rec->save_fp: keep xmm2-15 (restored by the last tail)
//         s->depth = d-1                  ; the entry read first
//         if rec->live: rec->func(e->ip, e->ret, rec->ops, regs)
//         real return address = e->ret
void emit_own_pop(asmjit::x86::Assembler& a, const ExitTrampolineRequest& req,
                  asmjit::Label landing, asmjit::Label have_return,
                  asmjit::Label have_return_fp) {
  using namespace asmjit::x86;
  namespace layout = shadow_layout;
  asmjit::Label slow = a.newLabel(), without_fp = a.newLabel();
  emit_newest_entry(a, req.shadow_tls_offset, slow);
  a.lea(rcx, qword_ptr(rax, rcx, 0, layout::kEntries));
  a.cmp(qword_ptr(rcx, layout::kSlot), rdi);
  a.jne(slow);
  a.mov(r8, qword_ptr(rcx, layout::kRecord));
  a.test(r8, asmjit::imm(layout::kUnhooked));
  a.jnz(slow);
  a.mov(r9, qword_ptr(rcx, layout::kRet));
  a.lea(r10, ptr(landing));
  a.cmp(r9, r10);
  a.je(slow);
  // Inline latency entries are (g')'s; one here is not the newest.
  a.cmp(byte_ptr(r8, layout::kKind), layout::kKindCallback);
  a.jne(slow);
  // A callback that may use xmm2-15: kept from here to the end, as early
  // and as late as they can be (the slow path keeps them itself).
  a.cmp(byte_ptr(r8, layout::kSaveFp), 0);
  a.je(without_fp);
  emit_exit_fp_save(a);
  emit_pop_and_call(a, req, slow, have_return_fp);
  a.bind(without_fp);                     // the callback promised FTJIT_OPS_F_NO_FP
  emit_pop_and_call(a, req, slow, have_return);
  a.bind(slow);
}

// (f)'s first entry: counts the exit of the trampoline that jumped here and
// calls the body at [rsp-16], returning to the landing.
// Returns the call's size.
size_t emit_call_and_land(asmjit::x86::Assembler& a, const ExitTrampolineRequest& req) {
  a.inc(tls_word(req.counts_tls_offset + 8));
  const size_t at = a.offset();
  a.call(asmjit::x86::qword_ptr(asmjit::x86::rsp, -16));  // entry+5
  return a.offset() - at;
}

Result<std::vector<uint8_t>> X86_64Emitter::emit_exit_trampoline(
    const ExitTrampolineRequest& req, uint64_t place) const {
  using namespace asmjit;
  using namespace asmjit::x86;

  // Call-and-land must end exactly at the landing: measure it, pad before.
  size_t prefix = 0;
  {
    CodeHolder scratch;
    FTJIT_TRY(start_code(scratch, place));
    Assembler s(&scratch);
    emit_call_and_land(s, req);
    prefix = s.offset();
  }
  if (prefix > req.landing_offset) {
    return make_error(FTJIT_E_INTERNAL, "exit trampoline: landing offset too small");
  }
  CodeHolder code;
  FTJIT_TRY(start_code(code, place));
  Assembler a(&code);
  Mem entries = tls_word(req.counts_tls_offset);
  Mem exits = tls_word(req.counts_tls_offset + 8);
  for (size_t i = prefix; i < req.landing_offset; ++i) a.nop();
  if (emit_call_and_land(a, req) != kCallBodyBytes) {
    return make_error(FTJIT_E_INTERNAL, "exit trampoline: call-and-land's call is not the size (j) expects");
  }

  // Every register a caller may expect to survive: GCC's -fipa-ra lets a
  // caller keep values in call-clobbered registers across a call to a
  // function it saw clobber none of them, and the callbacks may.
  static const Gp kKept[6] = {rcx, rsi, rdi, r8, r9, r10};
  Label landing = a.newLabel(), again = a.newLabel();
  a.bind(landing);
  a.inc(entries);
  a.mov(qword_ptr(rsp, -kSlotBytes - 8), r11);
  emit_frame_enter(a, kExitFrame, kSlotBytes + 8);
  a.mov(qword_ptr(rsp, 0), rax);
  a.mov(qword_ptr(rsp, 8), rdx);
  a.movaps(xmmword_ptr(rsp, 16), xmm0);
  a.movaps(xmmword_ptr(rsp, 32), xmm1);
  for (int i = 0; i < 6; ++i) a.mov(qword_ptr(rsp, kExitGprs + 8 * i), kKept[i]);
  a.bind(again);
  a.mov(rdi, qword_ptr(rsp, kExitFrame));
  a.sub(rdi, kSlotBytes);                // the replaced slot
  Label have_return = a.newLabel(), have_return_fp = a.newLabel();
  if (req.shadow_tls_offset != 0) emit_own_pop(a, req, landing, have_return, have_return_fp);
  a.mov(rsi, rsp);
  a.mov(rax, imm(req.pop));
  emit_exit_fp_save(a);                  // pop() is C++: it may use them
  a.call(rax);
  emit_exit_fp_restore(a);
  // A chain (the frame was hooked twice: two ops, a tail call): the entry
  // popped returns to the landing itself, with this very slot. Pop again.
  a.lea(r11, ptr(landing));
  a.cmp(rax, r11);
  a.je(again);
  // The real return address back into the slot, which we return through:
  // where the caller's own call left its return-stack entry. Three tails:
  // after pop() (the slow path falls in here), after the own pop, and after
  // the own pop of a callback that may use xmm2-15 (restored here too).
  enum class Tail { kSlow, kOwn, kOwnFp };
  for (const Tail tail : {Tail::kSlow, Tail::kOwn, Tail::kOwnFp}) {
    if (tail != Tail::kSlow && req.shadow_tls_offset == 0) break;  // no own pop
    if (tail == Tail::kOwn) a.bind(have_return);
    if (tail == Tail::kOwnFp) a.bind(have_return_fp);
    a.mov(rdi, qword_ptr(rsp, kExitFrame));
    a.mov(qword_ptr(rdi, -kSlotBytes), rax);
    a.mov(rax, qword_ptr(rsp, 0));
    a.mov(rdx, qword_ptr(rsp, 8));
    a.movaps(xmm0, xmmword_ptr(rsp, 16));
    a.movaps(xmm1, xmmword_ptr(rsp, 32));
    if (tail == Tail::kOwnFp) emit_exit_fp_restore(a);
    for (int i = 0; i < 6; ++i) a.mov(kKept[i], qword_ptr(rsp, kExitGprs + 8 * i));
    emit_frame_leave(a, kExitFrame);
    Label nested_end = a.newLabel();
    if (tail == Tail::kSlow) {
      // pop() also runs when another of the thread's entries is open (its
      // own pop's guard said so): then our entry is taken back rather than
      // matched by an exit, as the entry trampolines' nested path does.
      // Flags are dead at a return.
      a.mov(r11, entries);
      a.sub(r11, exits);
      a.cmp(r11, 1);
      a.jne(nested_end);
    }
    a.mov(r11, qword_ptr(rsp, -kSlotBytes - 8));
    a.inc(exits);
    a.lea(rsp, qword_ptr(rsp, -kSlotBytes));
    a.ret();
    if (tail == Tail::kSlow) {
      a.bind(nested_end);
      a.mov(r11, qword_ptr(rsp, -kSlotBytes - 8));
      a.dec(entries);
      a.lea(rsp, qword_ptr(rsp, -kSlotBytes));
      a.ret();
    }
  }
  if (req.latency_landing_offset != 0 && req.shadow_tls_offset != 0 && req.block_tls_offset != 0 &&
      req.clock_mult != 0) {
    if (a.offset() > req.latency_landing_offset) {
      return make_error(FTJIT_E_INTERNAL, "exit trampoline: latency landing offset too small");
    }
    // Its own call of the body ((j) jumps there), ending exactly at it.
    while (a.offset() < req.latency_landing_offset - kCallBodyBytes) a.int3();
    const size_t call_at = a.offset();
    a.call(qword_ptr(rsp, -16));           // entry+5
    if (a.offset() - call_at != kCallBodyBytes) {
      return make_error(FTJIT_E_INTERNAL, "exit trampoline: the body's call is not the size (j) expects");
    }
    emit_latency_landing(a, req, landing);
  }
  return finish(code, place);
}

// (j) An inline latency trampoline (backends/backend.h, kLatency). Its ops
//     hooks returns, so its site jumps to the site's stub ((e)): [rsp] =
//     entry+5 (the stub's push), [rsp+8] = the return address, the slot.
//     It counts itself an entry and passes the guard as (c) does, pushes
//     the shadow entry as (h) does, counts its exit, and leaves through
//     the `call [rsp-16]` that ends where it hooked the return (inline
//     latency's own landing (g'), or the landing: call-and-land's), so
//     that the body returns there with the return-stack predictor still
//     matched. It uses rax rcx rdx rsi, given back, and the flags:
//
//     start-16  the site's ExitRecord     (runtime's words)
//     start-8   fallback trampoline
//     start:    entries++ ; push rax, rcx, rdx, rsi   ; the slot is rsp+40
//               guard: not our entry alone -> back     ; under a callback
//               fs:[block] == 0 or (s = fs:[shadow]) == 0 -> back
//               d = s->depth ; d == capacity -> back
//               d and s->e[d-1].slot <= slot -> back   ; prune, chain
//               e = &s->e[d]
//               e->slot = slot ; e->ret = [slot] ; e->rec = [start-16]
//               e->ip = rdtsc
//               [slot] = landing ; s->depth = d+1 ; s->hooks += 1
//               pop rsi, rdx, rcx, rax ; exits++
//               add rsp, 16 ; jmp [landing - 4]        ; call [rsp-16]: entry+5
//     back:     pop rsi, rdx, rcx, rax ; entries--
//               jmp [start-8]                          ; as the stub entered us
//
//     Sampled (sample_period N > 1), before the above, which becomes
//     `timed`: a call that is not the thread's turn takes 1 from the
//     site's countdown and goes into the body at once, as (e)'s plain
//     exit does (nothing pushed on the return-stack buffer, so nothing to
//     pop). `sub` is one instruction: a same-thread signal handler's call
//     lands before or after it.
//
//     start:    push rax
//               mov rax, fs:[block] ; test rax, rax ; jz none
//               push rcx ; mov rcx, [start-16] ; add rax, [rcx+kBlockOffset] ; pop rcx
//               sub qword [rax+countdown], 1
//               jge skip                               ; 0 or more left
//               mov qword [rax+countdown], N-1         ; this call's turn
//               pop rax ; jmp timed
//     skip:     pop rax ; add rsp, 8 ; jmp [rsp-8]     ; into entry+5
//     none:     mov rax, [start-16] ; mov fs:[pending], rax
//               pop rax ; jmp [start-8]                ; the first-call path
void emit_latency_sampling(asmjit::x86::Assembler& a, const InlineRequest& req, const asmjit::Label& start,
                           const asmjit::Label& timed) {
  using namespace asmjit;
  using namespace asmjit::x86;
  namespace layout = shadow_layout;
  Label skip = a.newLabel(), none = a.newLabel();
  const Mem countdown = qword_ptr(rax, 8 * layout::kHistCountdown);
  a.push(rax);
  a.mov(rax, tls_word(req.block_tls_offset));
  a.test(rax, rax);
  a.jz(none);
  a.push(rcx);
  a.mov(rcx, qword_ptr(start, kInlineOffsetWord));
  a.add(rax, qword_ptr(rcx, layout::kBlockOffset));
  a.pop(rcx);
  a.sub(countdown, 1);
  a.jge(skip);
  a.mov(countdown, imm(static_cast<int32_t>(req.sample_period - 1)));
  a.pop(rax);
  a.jmp(timed);
  a.bind(skip);
  a.pop(rax);
  a.add(rsp, 8);
  a.jmp(qword_ptr(rsp, -8));
  a.bind(none);
  a.mov(rax, qword_ptr(start, kInlineOffsetWord));
  a.mov(tls_word(req.pending_tls_offset), rax);
  a.pop(rax);
  a.jmp(qword_ptr(start, kInlineFallbackWord));
}

Result<std::vector<uint8_t>> emit_latency_template(const InlineRequest& req) {
  using namespace asmjit;
  using namespace asmjit::x86;
  namespace layout = shadow_layout;
  if (req.shadow_tls_offset == 0 || req.exit_trampoline == 0 || req.counts_tls_offset == 0) {
    return make_error(FTJIT_E_INTERNAL, "inline latency request without its shadow stack, counts or landing");
  }
  CodeHolder code;
  FTJIT_TRY(start_code(code, 0x100000));
  Assembler a(&code);
  Label start = a.newLabel(), back = a.newLabel(), push = a.newLabel(), land_word = a.newLabel();
  Label timed = a.newLabel();
  Mem entries = tls_word(req.counts_tls_offset);
  constexpr int32_t kSlot = 40;
  a.bind(start);
  if (req.sample_period > 1) {
    if (req.sample_period > kMaxInlineSample || req.pending_tls_offset == 0) {
      return make_error(FTJIT_E_INTERNAL, "sampled inline latency request without its pending word, or too long a period");
    }
    emit_latency_sampling(a, req, start, timed);
  }
  a.bind(timed);
  a.inc(entries);
  a.push(rax);
  a.push(rcx);
  a.push(rdx);
  a.push(rsi);
  emit_guard(a, req.counts_tls_offset, back);
  a.cmp(tls_word(req.block_tls_offset), 0);
  a.je(back);
  a.mov(rsi, tls_word(req.shadow_tls_offset));
  a.test(rsi, rsi);
  a.jz(back);
  a.mov(ecx, dword_ptr(rsi, layout::kDepth));
  a.cmp(ecx, layout::kCapacity);
  a.jae(back);
  a.lea(rax, qword_ptr(rsp, kSlot));
  a.test(ecx, ecx);
  a.jz(push);
  a.mov(edx, ecx);
  a.shl(rdx, 5);
  a.cmp(qword_ptr(rsi, rdx, 0, layout::kEntries - layout::kEntryBytes + layout::kSlot), rax);
  a.jbe(back);
  a.bind(push);
  a.shl(rcx, 5);
  a.lea(rcx, qword_ptr(rsi, rcx, 0, layout::kEntries));
  a.mov(qword_ptr(rcx, layout::kSlot), rax);
  a.mov(rax, qword_ptr(rsp, kSlot));
  a.mov(qword_ptr(rcx, layout::kRet), rax);
  a.mov(rax, qword_ptr(start, kInlineOffsetWord));
  a.mov(qword_ptr(rcx, layout::kRecord), rax);
  a.rdtsc();                               // as two halves: no shift on the way
  a.mov(dword_ptr(rcx, layout::kIp), eax);
  a.mov(dword_ptr(rcx, layout::kIp + 4), edx);
  a.mov(rax, imm(req.exit_trampoline));
  a.mov(qword_ptr(rsp, kSlot), rax);       // the return hooked
  a.inc(dword_ptr(rsi, layout::kDepth));   // then published
  a.inc(qword_ptr(rsi, layout::kHooks));
  a.pop(rsi);
  a.pop(rdx);
  a.pop(rcx);
  a.pop(rax);
  a.inc(tls_word(req.counts_tls_offset + 8));  // exits
  a.add(rsp, 16);
  a.jmp(qword_ptr(land_word));
  a.bind(back);
  a.pop(rsi);
  a.pop(rdx);
  a.pop(rcx);
  a.pop(rax);
  a.dec(entries);
  a.jmp(qword_ptr(start, kInlineFallbackWord));
  a.align(AlignMode::kData, 8);
  a.bind(land_word);
  a.embedUInt64(req.exit_trampoline - kCallBodyBytes);
  return finish(code, 0x100000);
}

// (i) An inline trampoline (backends/backend.h), a counter's: called by
//     the site like any trampoline, it touches rax (given back) and the
//     flags (dead at a call) only. `inc` is one instruction: a signal
//     handler on the same thread cannot split it, and no other thread
//     writes this thread's block.
//
//     start-16  offset of the site's counter in the block  (runtime's words)
//     start-8   fallback trampoline
//     start:    push  rax
//               mov   rax, fs:[block_tls]
//               test  rax, rax
//               jz    first
//               add   rax, [rip start-16]
//               inc   qword [rax]
//               pop   rax
//               ret
//     first:    pop   rax
//               jmp   [rip start-8]     ; as if the site had called it
Result<std::vector<uint8_t>> X86_64Emitter::emit_inline_template(const InlineRequest& req) const {
  using namespace asmjit;
  using namespace asmjit::x86;
  FTJIT_TRY(inline_action_compiled(req, {InlineAction::kCount, InlineAction::kLatency}, "x86-64"));
  if (req.action == InlineAction::kLatency) return emit_latency_template(req);
  CodeHolder code;
  // Any base: the code is position-independent (its words are reached
  // rip-relative from `start`).
  FTJIT_TRY(start_code(code, 0x100000));
  Assembler a(&code);
  Label start = a.newLabel(), first = a.newLabel();
  a.bind(start);
  a.push(rax);
  a.mov(rax, tls_word(req.block_tls_offset));
  a.test(rax, rax);
  a.jz(first);
  a.add(rax, qword_ptr(start, kInlineOffsetWord));
  a.inc(qword_ptr(rax));
  a.pop(rax);
  a.ret();
  a.bind(first);
  a.pop(rax);
  a.jmp(qword_ptr(start, kInlineFallbackWord));
  return finish(code, 0x100000);
}

}  // namespace

const TrampolineEmitter& x86_64_emitter() {
  static const X86_64Emitter emitter;
  return emitter;
}

const Backend& x86_64_backend() {
  static const std::unique_ptr<Backend> backend = make_x86_64_backend(x86_64_emitter());
  return *backend;
}

}  // namespace ftjit
