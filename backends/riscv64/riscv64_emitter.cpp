// SPDX-License-Identifier: MIT
// riscv64 trampolines, site instructions and stubs, written as assembly
// text and assembled by LLVM MC (riscv64_assembler.cpp). Runs on any host
// with LLVM: the CLI on x86-64 emits them for a riscv64 agent, which has
// no LLVM (riscv64_backend.h).
//
// Everything emitted is position-independent: 64-bit constants (ops,
// callbacks, runtime functions) sit in a literal pool after the code and
// are loaded pc-relative (auipc + ld), calls go through t1 (`jalr t1`), so
// `place` matters only for alignment; and every snippet is assembled with
// relaxation off, so nothing is left for a linker.
//
// (c) The entry trampoline's frame. The stub jumped here with t0 = entry+8
//     (the site's jalr), ra = the parent's return address, t1 = our own
//     address; sp = S, the traced function's stack pointer at its entry
//     (16-aligned). Two frame records come first, so that an unwinder
//     walking s0 (the psABI's frame pointer: ra at s0-8, the caller's s0 at
//     s0-16) sees the traced function between us and its caller:
//
//     S-8       ra: the parent's return address  \ the traced function's
//     S-16      the caller's s0                  / record; S-8 is the slot
//     S-24      t0 = entry+8                     \ ours; s0 = S-16
//     S-32      S (the traced function's s0)     /
//     sp+K+48   ip, parent_ip across shadow-stack calls
//     sp+K      t2 t3 t4 t5 t6 (pad)
//     sp+80     fa0..fa7 (16 B apart)            -+
//     sp+72     S                                 |  ftjit_regs, passed
//     sp+64     direct (0 = none)                 |  as `regs`
//     sp+0      a0..a7                           -+
//     sp        = S-32-R; K = 208, R = K+64 = 272
//
//     Kept: a0-a7 and fa0-fa7 (arguments; the FP ones even for an ops with
//     FTJIT_OPS_F_NO_FP, whose callbacks riscv64 GCC cannot keep off the
//     FP registers: it has no -mgeneral-regs-only), t2 (the static chain) and
//     t3-t6 (what a caller built with IPA-RA might keep), s0-s11 and
//     fs0-fs11 by the callback (callee-saved). Clobbered: t1 (the stub's),
//     and ft0-ft11, which no caller keeps across a call of a function built
//     with the flag (TOOLCHAIN.md Q6).
//
//     ip = t0 - 8; parent_ip = the slot. The literal is at t0 - 16. An exit
//     hook replaces the slot (shadow_push writes the landing there) and the
//     trampoline's last loads put it into ra.
//
//     Per-thread counters at tp+tls (entries) and +8 (exits), as on the
//     other ISAs (runtime/thread_control.h), counted with amoadd.d: one
//     instruction, which a signal handler cannot split.
//
//         addi sp, sp, -32 ; sd ra, 24(sp) ; sd s0, 16(sp) ; sd t0, 8(sp)
//         addi t1, sp, 32 ; sd t1, 0(sp) ; addi s0, sp, 16   ; the records
//         addi sp, sp, -R ; sd a0..a7 ; sd t2..t6
//         t4 = tp + tls ; amoadd.d zero, (t3 = 1), (t4)      ; entries++
//      1: ld t3, 0(t4) ; ld t5, 8(t4) ; ld t6, 0(t4)         ; the guard,
//         bne t3, t6, 1b ; sub t3, t3, t5 ; bne t3, 1, nested ; past a handler
//         ...  save fa0-fa7, call, restore
//         exits++ ; ld t1, 64(sp) (direct) ; restore a0..a7, t2..t6
//         addi sp, sp, R ; ld t0, 8(sp) ; ld ra, 24(sp) ; ld s0, 16(sp)
//         sd zero, 24(sp)                                ; no stale landing
//         addi sp, sp, 32
//         bnez t1, to_direct                             ; honour_direct
//         jr t0                                          ; into entry+8
//     to_direct:                        ; as if the stub had jumped there:
//         jr t1                         ; t0 = entry+8, ra = the parent's
//     nested:                           ; under a callback: count a drop,
//         drops++ ; entries-- ; restore ; unwind ; jr t0
//
// (d) The exit trampoline, one per process. A hooked function returns
//     (`ret`: jalr through ra = the landing) with sp = S again; the landing
//     asks pop(slot = S-8, regs) for the real return address and returns
//     there through ra. The 16 bytes below S, the slot's, are never written
//     here (the shadow stack may read the slot until pop returns):
//
//     S-16..S   untouched; sp = S-80
//     sp+56     s0
//     sp+48     the real return address, across the restores
//     sp+32     fa1                         -+ ftjit_ret_regs
//     sp+16     fa0                          |
//     sp+0      a0 a1                       -+
//
//     a0-a1 and fa0-fa1 are the return values (psABI); the temporaries
//     are dead at a return. The landing counts an entry and an exit (or
//     takes its entry back when another of the thread's is open), as on
//     the other ISAs. A chain (pop returns the landing itself: the frame
//     was hooked twice) pops again. Before the landing, where x86-64 has
//     call-and-land, riscv64 has `unimp`: sites never jump into a
//     trampoline (their stubs are transparent), and a jump there is a bug
//     to stop at.
//
//     Not yet emitted (each has a correct slower equivalent, used instead):
//     the landing's own pop of the common case (shadow_tls_offset is
//     ignored: pop() does the same work), and the generated trampoline's
//     inline prune check and push (shadow_prune and shadow_push are called).
#include <cinttypes>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>

#include "backends/riscv64/riscv64_assembler.h"
#include "backends/riscv64/riscv64_backend.h"
#include "backends/riscv64/riscv64_emitter_text.h"
#include "backends/shadow_layout.h"
#include "backends/riscv64/riscv64_encoding.h"
#include "ftjit/ftjit.h"

namespace ftjit {
namespace {

// (c): offsets from sp inside an entry trampoline.
constexpr int32_t kRegsDirect = 64;
constexpr int32_t kRegsSp = 72;
constexpr int32_t kRegsFp = 80;
constexpr int32_t kKeptWithFp = 208;
constexpr int32_t kKeptNoFp = 80;
constexpr int32_t kKeptBytes = 48;        // t2..t6, pad
constexpr int32_t kIpParentBytes = 16;
constexpr int32_t kRecordsBytes = 32;     // the two frame records
static_assert(offsetof(ftjit_regs, direct) == kRegsDirect);
static_assert(offsetof(ftjit_regs, sp) == kRegsSp);
static_assert(offsetof(ftjit_regs, fp) == kRegsFp);
static_assert(kRegsFp + 8 * 16 == kKeptWithFp);
static_assert(offsetof(ftjit_ops, func) == 8);
// (d): offsets from sp inside the exit trampoline.
static_assert(sizeof(ftjit_ret_regs) == 48);
constexpr int32_t kExitRealReturn = 48;
constexpr int32_t kExitS0 = 56;
constexpr int32_t kExitFrame = 80;        // 16 of them below S untouched

std::string hex(uint64_t v) {
  char b[24];
  std::snprintf(b, sizeof b, "0x%" PRIx64, v);
  return b;
}

}  // namespace

namespace riscv64 {

// ---------------------------------------------------------------------------
// Assembly text with a literal pool
// ---------------------------------------------------------------------------

void Source::line(const std::string& text) {
  text_ += "  ";
  text_ += text;
  text_ += '\n';
}

void Source::label(const std::string& name) {
  text_ += name;
  text_ += ":\n";
}

std::string Source::new_label() { return ".Ll" + std::to_string(labels_++); }

void Source::load(const std::string& reg, uint64_t value) {
  auto it = pool_.find(value);
  if (it == pool_.end()) it = pool_.emplace(value, ".Lk" + std::to_string(pool_.size())).first;
  const std::string at = new_label();
  label(at);
  line("auipc " + reg + ", %pcrel_hi(" + it->second + ")");
  line("ld " + reg + ", %pcrel_lo(" + at + ")(" + reg + ")");
}

void Source::call(uint64_t target) {
  load("t1", target);
  line("jalr t1");
}

std::string Source::finish() {
  std::string out = compressed_ ? ".option rvc\n" : ".option norvc\n";
  out += ".text\n";
  out += text_;
  if (!pool_.empty()) {
    out += "  .p2align 3\n";
    for (const auto& [value, name] : pool_) out += name + ":\n  .quad " + hex(value) + "\n";
  }
  return out;
}

// dst = tp + offset (t3 scratch).
void emit_tls_address(Source& s, const std::string& dst, int64_t offset) {
  s.line("li t3, " + std::to_string(offset));
  s.line("add " + dst + ", tp, t3");
}

// [addr] += delta, one amoadd.d (t3 scratch).
void emit_atomic_add(Source& s, const std::string& addr, int delta) {
  s.line("li t3, " + std::to_string(delta));
  s.line("amoadd.d zero, t3, (" + addr + ")");
}

namespace {

struct EntryFrame {
  int32_t kept;   // t2..t6
  int32_t size;   // R
  int32_t ip_parent() const { return kept + kKeptBytes; }
};

EntryFrame entry_frame(bool save_fp) {
  EntryFrame f;
  f.kept = save_fp ? kKeptWithFp : kKeptNoFp;
  f.size = f.kept + kKeptBytes + kIpParentBytes;
  return f;
}

const char* const kArgs[8] = {"a0", "a1", "a2", "a3", "a4", "a5", "a6", "a7"};
const char* const kFpArgs[8] = {"fa0", "fa1", "fa2", "fa3", "fa4", "fa5", "fa6", "fa7"};
const char* const kTemps[5] = {"t2", "t3", "t4", "t5", "t6"};

std::string at_sp(int32_t offset) { return std::to_string(offset) + "(sp)"; }

void emit_gprs(Source& s, const EntryFrame& f, bool save) {
  const std::string op = save ? "sd " : "ld ";
  for (int i = 0; i < 8; ++i) s.line(op + kArgs[i] + ", " + at_sp(8 * i));
  for (int i = 0; i < 5; ++i) s.line(op + kTemps[i] + ", " + at_sp(f.kept + 8 * i));
}

void emit_fp_args(Source& s, bool save) {
  const std::string op = save ? "fsd " : "fld ";
  for (int i = 0; i < 8; ++i) s.line(op + kFpArgs[i] + ", " + at_sp(kRegsFp + 16 * i));
}

// From sp = S-32-R back to the site's state on return: t0 = entry+8, ra
// the slot (the parent's return address, or the landing), s0 the
// caller's, sp = S. The slot is cleared once read: left below S, a landing
// address would be a stale copy in the function's frame beside its own
// spill of ra, which a detach's put-back must find alone
// (runtime/shadow_stack.cpp, put_back_own_frames).
void emit_unwind_records(Source& s, const EntryFrame& f) {
  s.line("addi sp, sp, " + std::to_string(f.size));
  s.line("ld t0, 8(sp)");
  s.line("ld ra, 24(sp)");
  s.line("ld s0, 16(sp)");
  s.line("sd zero, 24(sp)");
  s.line("addi sp, sp, " + std::to_string(kRecordsBytes));
}

// a0 = ip: the site's entry, 8 bytes before the return address into it.
void emit_ip(Source& s) {
  s.line("ld a0, -8(s0)");
  s.line("addi a0, a0, -" + std::to_string(kSiteBytes));
}

}  // namespace

Result<std::string> trampoline_source(const TrampolineRequest& request, bool compressed) {
  if (request.recursion_drops == 0) {
    return make_error(FTJIT_E_INTERNAL, "trampoline request without a drop counter");
  }
  if (request.entered_by_stub) {
    return make_error(FTJIT_E_UNSUPPORTED,
                      "riscv64 trampolines are never entered by an x86-style stub: a site's stub "
                      "jumps to them with the site's own call state (backends/riscv64)");
  }
  if (request.exit_record != 0 && (request.exit_trampoline == 0 || request.shadow_prune == 0 ||
                               request.shadow_push == 0)) {
    return make_error(FTJIT_E_INTERNAL, "exit-hooking trampoline without its shadow-stack calls");
  }
  Source s(compressed);
  // FTJIT_OPS_F_NO_FP promises callbacks built to stay off the FP
  // registers, which riscv64 GCC has no flag for (-mgeneral-regs-only is
  // x86-64's and arm64's): fa0-fa7 are saved whatever the request says.
  TrampolineRequest req = request;
  req.save_fp = true;
  const EntryFrame f = entry_frame(req.save_fp);
  const std::string nested = s.new_label();
  const std::string again = s.new_label();

  // Frame records, then everything the callback may clobber.
  s.line("addi sp, sp, -" + std::to_string(kRecordsBytes));
  s.line("sd ra, 24(sp)");
  s.line("sd s0, 16(sp)");
  s.line("sd t0, 8(sp)");
  s.line("addi t1, sp, " + std::to_string(kRecordsBytes));
  s.line("sd t1, 0(sp)");
  s.line("addi s0, sp, 16");
  s.line("addi sp, sp, -" + std::to_string(f.size));
  emit_gprs(s, f, true);

  // Our entry counted, then the guard.
  emit_tls_address(s, "t4", req.counts_tls_offset);
  emit_atomic_add(s, "t4", +1);
  s.label(again);
  s.line("ld t3, 0(t4)");
  s.line("ld t5, 8(t4)");
  s.line("ld t6, 0(t4)");
  s.line("bne t3, t6, " + again);
  s.line("sub t3, t3, t5");
  s.line("li t6, 1");
  s.line("bne t3, t6, " + nested);

  if (req.honour_direct) s.line("sd zero, " + at_sp(kRegsDirect));
  if (req.save_fp) emit_fp_args(s, true);
  s.line("addi t1, s0, 16");
  s.line("sd t1, " + at_sp(kRegsSp));           // S
  emit_ip(s);
  s.line("ld a1, 8(s0)");                        // parent_ip: the slot
  if (req.exit_trampoline != 0) {
    // parent_ip is the landing: this frame's return was hooked already
    // (a hooked function tail-called this one). The real one is on the
    // shadow stack.
    const std::string parent_ok = s.new_label();
    s.load("t1", req.exit_trampoline);
    s.line("bne a1, t1, " + parent_ok);
    s.line("addi a0, s0, 8");
    s.call(req.real_return);
    s.line("mv a1, a0");
    emit_ip(s);
    s.label(parent_ok);
  }
  if (req.exit_record != 0) {
    // Frames a longjmp or an unwind left behind go first.
    s.line("sd a0, " + at_sp(f.ip_parent()));
    s.line("sd a1, " + at_sp(f.ip_parent() + 8));
    s.line("addi a0, s0, 8");
    s.call(req.shadow_prune);
    s.line("ld a0, " + at_sp(f.ip_parent()));
    s.line("ld a1, " + at_sp(f.ip_parent() + 8));
  }
  s.line("mv a3, sp");                           // regs
  if (req.source == OpsSource::kImmediate) {
    s.load("a2", req.ops);
    s.call(req.func);
  } else {
    // The literal: 16 bytes below entry+8.
    s.line("ld t1, -8(s0)");
    s.line("ld a2, -16(t1)");
    if (req.func != 0) {
      s.call(req.func);                          // a fixed dispatcher, given the ops
    } else {
      s.line("ld t1, 8(a2)");                    // ops->func
      s.line("jalr t1");
    }
  }
  if (req.exit_record != 0) {
    // The return hooked: shadow_push writes the landing into the slot.
    s.line("addi a0, s0, 8");
    s.line("ld a1, " + at_sp(f.ip_parent()));
    s.load("a2", req.exit_record);
    s.call(req.shadow_push);
  }

  if (req.save_fp) emit_fp_args(s, false);
  emit_tls_address(s, "t4", req.counts_tls_offset + 8);
  emit_atomic_add(s, "t4", +1);                  // exits
  if (req.honour_direct) s.line("ld t1, " + at_sp(kRegsDirect));
  emit_gprs(s, f, false);
  emit_unwind_records(s, f);
  const std::string to_direct = s.new_label();
  if (req.honour_direct) s.line("bnez t1, " + to_direct);
  s.line("jr t0");
  if (req.honour_direct) {
    s.label(to_direct);
    s.line("jr t1");
  }

  // Called from inside a callback: count it, run nothing (not even a
  // direct trampoline: it is tracer code too), take our entry back (exits
  // count outermost frames only).
  s.label(nested);
  s.load("t1", req.recursion_drops);
  emit_atomic_add(s, "t1", +1);
  emit_atomic_add(s, "t4", -1);                  // t4: still &entries
  emit_gprs(s, f, false);
  emit_unwind_records(s, f);
  s.line("jr t0");
  return s.finish();
}

Result<std::string> exit_trampoline_source(const ExitTrampolineRequest& req, bool compressed) {
  if (req.landing_offset % kInsnBytes != 0) {
    return make_error(FTJIT_E_INTERNAL, "riscv64 exit trampoline: landing must be 4-byte aligned");
  }
  if (req.pop == 0) return make_error(FTJIT_E_INTERNAL, "exit trampoline request without pop");
  Source s(compressed);
  // No call-and-land on riscv64: traps, 4 bytes each whatever the
  // compression, so that the landing is where it was asked for.
  s.line(".option push");
  s.line(".option norvc");
  for (uint32_t i = 0; i < req.landing_offset; i += kInsnBytes) s.line("unimp");
  s.line(".option pop");

  const std::string landing = s.new_label(), again = s.new_label(), nested_end = s.new_label();
  s.label(landing);
  s.line("addi sp, sp, -" + std::to_string(kExitFrame));
  s.line("sd a0, 0(sp)");
  s.line("sd a1, 8(sp)");
  s.line("fsd fa0, 16(sp)");
  s.line("fsd fa1, 32(sp)");
  s.line("sd s0, " + at_sp(kExitS0));
  emit_tls_address(s, "t4", req.counts_tls_offset);
  emit_atomic_add(s, "t4", +1);                  // entries

  s.label(again);
  s.line("addi a0, sp, " + std::to_string(kExitFrame - 8));  // the slot: S-8
  s.line("mv a1, sp");                           // ftjit_ret_regs
  s.call(req.pop);
  // A chain: the entry popped returns to the landing itself. Pop again.
  s.line("lla t1, " + landing);
  s.line("beq a0, t1, " + again);
  s.line("sd a0, " + at_sp(kExitRealReturn));
  s.line("ld a0, 0(sp)");
  s.line("ld a1, 8(sp)");
  s.line("fld fa0, 16(sp)");
  s.line("fld fa1, 32(sp)");

  // pop() also runs when another of the thread's entries is open (a
  // signal handler's traced code returning under a callback): then our
  // entry is taken back rather than matched by an exit.
  emit_tls_address(s, "t4", req.counts_tls_offset);
  s.line("ld t5, 0(t4)");
  s.line("ld t6, 8(t4)");
  s.line("sub t5, t5, t6");
  s.line("li t6, 1");
  s.line("bne t5, t6, " + nested_end);
  s.line("addi t4, t4, 8");
  emit_atomic_add(s, "t4", +1);                  // exits
  auto leave = [&] {
    s.line("ld ra, " + at_sp(kExitRealReturn));
    s.line("ld s0, " + at_sp(kExitS0));
    s.line("addi sp, sp, " + std::to_string(kExitFrame));
    s.line("ret");
  };
  leave();
  s.label(nested_end);
  emit_atomic_add(s, "t4", -1);                  // entries
  leave();
  return s.finish();
}

Result<std::string> site_code_source(uint64_t entry, uint64_t stub) {
  // auipc+jalr: entry + (hi << 12) + lo, lo in [-2048, 2047].
  const int64_t delta = static_cast<int64_t>(stub - entry);
  const int64_t hi = (delta + 0x800) >> 12;
  const int64_t lo = delta - (hi << 12);
  if (hi < -(int64_t{1} << 19) || hi >= (int64_t{1} << 19)) {
    return make_error(FTJIT_E_OUT_OF_RANGE, "the stub at " + hex(stub) + " is out of the auipc+jalr reach of " +
                                                "the site at " + hex(entry));
  }
  if ((stub & 7) != 0 || (entry & 7) != 0) {
    return make_error(FTJIT_E_INTERNAL, "riscv64 sites and stubs must be 8-byte aligned");
  }
  Source s(false);
  s.line("auipc t0, " + std::to_string(hi & 0xfffff));
  s.line("nop");
  s.line("jalr t0, " + std::to_string(lo) + "(t0)");
  // The stub, after the site's three words.
  s.line("auipc t1, 0");
  s.line("ld t1, -8(t1)");
  s.line("jr t1");
  return s.finish();
}

// (i) An inline trampoline (backends/backend.h), a counter's. The stub
//     jumped here as to any trampoline (t0 = entry+8, ra = the parent's
//     return address, t1 free); t3 is kept on the stack. amoadd.d is one
//     instruction: a signal handler on the same thread cannot split it.
//
//     start-16  offset of the site's counter in the block  (runtime's words)
//     start-8   fallback trampoline
//     start:    addi sp, sp, -16 ; sd t3, 0(sp)
//               t1 = tp + block_tls ; ld t1, 0(t1)
//               beqz t1, first
//               ld t3, start-16 (auipc) ; add t1, t1, t3
//               li t3, 1 ; amoadd.d zero, t3, (t1)
//               ld t3, 0(sp) ; addi sp, sp, 16
//               jr t0                    ; into entry+8
//     first:    ld t3, 0(sp) ; addi sp, sp, 16
//               ld t1, start-8 (auipc) ; jr t1   ; as the stub would have
//
//     Assembled with its two words in front (zero), for the pc-relative
//     loads to resolve without a linker; they are cut off after.
// reg = the inline trampoline's word at `offset` from .Lwords (the words
// assembled in front of it, cut off after), read pc-relative.
void load_word(Source& s, const std::string& reg, int offset) {
  const std::string at = s.new_label();
  s.label(at);
  s.line("auipc " + reg + ", %pcrel_hi(.Lwords+" + std::to_string(offset) + ")");
  s.line("ld " + reg + ", %pcrel_lo(" + at + ")(" + reg + ")");
}

// (j) An inline latency trampoline (backends/backend.h, kLatency), entered
//     as (i) is. It counts itself an entry and passes the guard as (c)
//     does (inside a callback it goes on to the fallback, which drops the
//     call: so a signal handler's traced calls cannot push between our
//     writes and our publish), pushes the shadow entry as shadow_push does
//     (slot S-8, the key (c) uses; the return address is in ra), counts
//     its exit and jumps into the body with ra = the landing, whose pop()
//     adds the duration. It keeps t3-t6 on the stack and uses t1:
//
//     start-16  the site's ExitRecord     (runtime's words)
//     start-8   fallback trampoline
//     start:    addi sp, sp, -32 ; sd t3..t6
//               t4 = tp + counts ; amoadd.d entries += 1
//               guard: not our entry alone -> back
//               [tp + block] == 0 or (t1 = s = [tp + shadow]) == 0 -> back
//               d = s->depth ; d == capacity -> back
//               d and s->e[d-1].slot <= S-8 -> back      ; prune, chain
//               e = &s->e[d]
//               e->slot = S-8 ; e->ret = ra ; e->rec = [start-16]
//               e->ip = rdtime
//               s->depth = d+1 ; s->hooks += 1 ; amoadd.d exits += 1
//               restore ; ra = landing ; jr t0            ; into entry+8
//     back:     amoadd.d entries -= 1 ; restore
//               ld t1, start-8 ; jr t1                    ; as the stub would have
//
//     Sampled (sample_period N > 1), before the above, which becomes
//     .Ltimed: a call that is not the thread's turn takes 1 from the
//     site's countdown (one amoadd.d: a same-thread signal handler's call
//     lands before or after it) and goes into the body at once, as (i):
//
//     start:    addi sp, sp, -16 ; sd t3
//               t1 = [tp + block] ; beqz t1, none
//               t3 = [start-16] ; t3 = [t3 + kBlockOffset]
//               t1 = t1 + t3 + countdown
//               amoadd.d t3, -1, (t1)                     ; t3: what was left
//               bgtz t3, skip
//               sd N-1, (t1) ; restore ; j .Ltimed        ; this call's turn
//     skip:     restore ; jr t0                           ; into entry+8
//     none:     [tp + pending] = [start-16] ; restore
//               ld t1, start-8 ; jr t1                    ; the first-call path
void emit_latency_sampling(Source& s, const InlineRequest& req) {
  namespace layout = shadow_layout;
  auto n = [](int64_t v) { return std::to_string(v); };
  const int record = static_cast<int>(kInlineWordsBytes) + kInlineOffsetWord;
  s.line("addi sp, sp, -16");
  s.line("sd t3, 0(sp)");
  emit_tls_address(s, "t1", req.block_tls_offset);
  s.line("ld t1, 0(t1)");
  s.line("beqz t1, .Lnone");
  load_word(s, "t3", record);
  s.line("ld t3, " + n(layout::kBlockOffset) + "(t3)");
  s.line("add t1, t1, t3");
  s.line("addi t1, t1, " + n(8 * layout::kHistCountdown));
  s.line("li t3, -1");
  s.line("amoadd.d t3, t3, (t1)");
  s.line("bgtz t3, .Lskip");
  s.line("li t3, " + n(req.sample_period - 1));
  s.line("sd t3, 0(t1)");
  s.line("ld t3, 0(sp)");
  s.line("addi sp, sp, 16");
  s.line("j .Ltimed");
  s.label(".Lskip");
  s.line("ld t3, 0(sp)");
  s.line("addi sp, sp, 16");
  s.line("jr t0");
  s.label(".Lnone");
  emit_tls_address(s, "t1", req.pending_tls_offset);
  load_word(s, "t3", record);
  s.line("sd t3, 0(t1)");
  s.line("ld t3, 0(sp)");
  s.line("addi sp, sp, 16");
  load_word(s, "t1", static_cast<int>(kInlineWordsBytes) + kInlineFallbackWord);
  s.line("jr t1");
  s.label(".Ltimed");
}

Result<std::string> latency_template_source(const InlineRequest& req, bool compressed) {
  namespace layout = shadow_layout;
  if (req.shadow_tls_offset == 0 || req.exit_trampoline == 0 || req.counts_tls_offset == 0) {
    return make_error(FTJIT_E_INTERNAL, "inline latency request without its shadow stack, counts or landing");
  }
  Source s(compressed);
  auto n = [](int64_t v) { return std::to_string(v); };
  constexpr int kSaved = 32;
  s.label(".Lwords");
  s.line(".quad 0");
  s.line(".quad 0");
  if (req.sample_period > 1) {
    if (req.sample_period > kMaxInlineSample || req.pending_tls_offset == 0) {
      return make_error(FTJIT_E_INTERNAL, "sampled inline latency request without its pending word, or too long a period");
    }
    emit_latency_sampling(s, req);
  }
  s.line("addi sp, sp, -" + n(kSaved));
  for (int i = 0; i < 4; ++i) s.line("sd t" + n(3 + i) + ", " + n(8 * i) + "(sp)");
  emit_tls_address(s, "t4", req.counts_tls_offset);
  emit_atomic_add(s, "t4", +1);                  // entries
  s.label(".Lguard");
  s.line("ld t3, 0(t4)");
  s.line("ld t5, 8(t4)");
  s.line("ld t6, 0(t4)");
  s.line("bne t3, t6, .Lguard");
  s.line("sub t3, t3, t5");
  s.line("li t6, 1");
  s.line("bne t3, t6, .Lback");
  emit_tls_address(s, "t1", req.block_tls_offset);
  s.line("ld t1, 0(t1)");
  s.line("beqz t1, .Lback");
  emit_tls_address(s, "t1", req.shadow_tls_offset);
  s.line("ld t1, 0(t1)");
  s.line("beqz t1, .Lback");
  s.line("lwu t5, " + n(layout::kDepth) + "(t1)");
  s.line("li t3, " + n(layout::kCapacity));
  s.line("bgeu t5, t3, .Lback");
  s.line("addi t6, sp, " + n(kSaved - 8));      // the slot: S-8
  s.line("beqz t5, .Lpush");
  s.line("slli t3, t5, 5");
  s.line("add t3, t1, t3");
  s.line("ld t3, " + n(layout::kEntries - layout::kEntryBytes + layout::kSlot) + "(t3)");
  s.line("bleu t3, t6, .Lback");
  s.label(".Lpush");
  static_assert(layout::kEntryBytes == 32);
  s.line("slli t3, t5, 5");
  s.line("add t3, t1, t3");
  s.line("addi t3, t3, " + n(layout::kEntries));
  s.line("sd t6, " + n(layout::kSlot) + "(t3)");
  s.line("sd ra, " + n(layout::kRet) + "(t3)");
  load_word(s, "t6", static_cast<int>(kInlineWordsBytes) + kInlineOffsetWord);
  s.line("sd t6, " + n(layout::kRecord) + "(t3)");
  s.line("rdtime t6");
  s.line("sd t6, " + n(layout::kIp) + "(t3)");
  s.line("addiw t5, t5, 1");
  s.line("sw t5, " + n(layout::kDepth) + "(t1)");  // published
  s.line("ld t6, " + n(layout::kHooks) + "(t1)");
  s.line("addi t6, t6, 1");
  s.line("sd t6, " + n(layout::kHooks) + "(t1)");
  s.line("addi t4, t4, 8");
  emit_atomic_add(s, "t4", +1);                  // exits
  for (int i = 0; i < 4; ++i) s.line("ld t" + n(3 + i) + ", " + n(8 * i) + "(sp)");
  s.line("addi sp, sp, " + n(kSaved));
  s.load("ra", req.exit_trampoline);             // the return hooked
  s.line("jr t0");
  s.label(".Lback");
  emit_atomic_add(s, "t4", -1);                  // entries: t4 still points there
  for (int i = 0; i < 4; ++i) s.line("ld t" + n(3 + i) + ", " + n(8 * i) + "(sp)");
  s.line("addi sp, sp, " + n(kSaved));
  load_word(s, "t1", static_cast<int>(kInlineWordsBytes) + kInlineFallbackWord);
  s.line("jr t1");
  return s.finish();
}

Result<std::string> inline_template_source(const InlineRequest& req, bool compressed) {
  FTJIT_TRY(inline_action_compiled(req, {InlineAction::kCount, InlineAction::kLatency}, "riscv64"));
  if (req.action == InlineAction::kLatency) return latency_template_source(req, compressed);
  Source s(compressed);
  s.label(".Lwords");
  s.line(".quad 0");
  s.line(".quad 0");
  s.line("addi sp, sp, -16");
  s.line("sd t3, 0(sp)");
  emit_tls_address(s, "t1", req.block_tls_offset);
  s.line("ld t1, 0(t1)");
  s.line("beqz t1, .Lfirst");
  load_word(s, "t3", static_cast<int>(kInlineWordsBytes) + kInlineOffsetWord);
  s.line("add t1, t1, t3");
  emit_atomic_add(s, "t1", 1);
  s.line("ld t3, 0(sp)");
  s.line("addi sp, sp, 16");
  s.line("jr t0");
  s.label(".Lfirst");
  s.line("ld t3, 0(sp)");
  s.line("addi sp, sp, 16");
  load_word(s, "t1", static_cast<int>(kInlineWordsBytes) + kInlineFallbackWord);
  s.line("jr t1");
  return s.finish();
}

}  // namespace riscv64

namespace {

class Riscv64Emitter final : public TrampolineEmitter {
 public:
  explicit Riscv64Emitter(bool compressed) : compressed_(compressed) {}

  Result<std::vector<uint8_t>> emit_trampoline(const TrampolineRequest& req, uint64_t place) const override {
    if ((place & 3) != 0) return make_error(FTJIT_E_INTERNAL, "riscv64 code must be 4-byte aligned");
    auto text = riscv64::trampoline_source(req, compressed_);
    if (!text) return text.take_error();
    return riscv64::assemble(*text, {compressed_});
  }

  Result<std::vector<uint8_t>> emit_exit_trampoline(const ExitTrampolineRequest& req,
                                                    uint64_t place) const override {
    if ((place & 3) != 0) return make_error(FTJIT_E_INTERNAL, "riscv64 code must be 4-byte aligned");
    auto text = riscv64::exit_trampoline_source(req, compressed_);
    if (!text) return text.take_error();
    return riscv64::assemble(*text, {compressed_});
  }

  Result<SiteCode> emit_site_code(uint64_t entry, uint64_t stub) const override {
    auto text = riscv64::site_code_source(entry, stub);
    if (!text) return text.take_error();
    auto bytes = riscv64::assemble(*text, {false});
    if (!bytes) return bytes.take_error();
    constexpr size_t kSite = 12, kStub = 12;
    if (bytes->size() != kSite + kStub) {
      return make_error(FTJIT_E_INTERNAL, "riscv64 site code: " + std::to_string(bytes->size()) +
                                              " bytes, want " + std::to_string(kSite + kStub));
    }
    SiteCode code;
    std::memcpy(code.init.bytes, bytes->data(), riscv64::kSiteBytes);
    code.init.size = riscv64::kSiteBytes;
    std::memcpy(code.call.bytes, bytes->data() + riscv64::kSiteBytes, riscv64::kInsnBytes);
    code.call.size = riscv64::kInsnBytes;
    code.stub.assign(bytes->begin() + kSite, bytes->end());
    return code;
  }

  Result<std::vector<uint8_t>> emit_inline_template(const InlineRequest& req) const override {
    auto text = riscv64::inline_template_source(req, compressed_);
    if (!text) return text.take_error();
    auto bytes = riscv64::assemble(*text, {compressed_});
    if (!bytes) return bytes.take_error();
    if (bytes->size() <= kInlineWordsBytes) return make_error(FTJIT_E_INTERNAL, "riscv64 inline template is empty");
    return std::vector<uint8_t>(bytes->begin() + kInlineWordsBytes, bytes->end());
  }

 private:
  bool compressed_;
};

}  // namespace

const TrampolineEmitter& riscv64_emitter() {
  static const Riscv64Emitter emitter(/*compressed=*/false);
  return emitter;
}

const TrampolineEmitter& riscv64_compressed_emitter() {
  static const Riscv64Emitter emitter(/*compressed=*/true);
  return emitter;
}

const Backend& riscv64_backend() {
  static const std::unique_ptr<Backend> backend = make_riscv64_backend(riscv64_emitter());
  return *backend;
}

}  // namespace ftjit
