// SPDX-License-Identifier: MIT
// The seam between the engine and an ISA: what a site looks like, how to
// encode each of its states, how to flip between them live, and how to emit
// trampolines. Encoders return bytes and never touch memory: runtime/ does
// every write. (What the traced process needs of its ISA beyond encodings,
// registers, clock, caches, is runtime/arch/arch.h.)
//
// A site is a fixed part and a live part. The fixed part is written once,
// with every thread stopped (init), and taken away the same way when the
// site is given back (de-init); the live part is one instruction, toggled
// while other threads run:
//
//                 entry-8     entry                     entry+5/+8
//   x86-64 =5                 [ nop5 | call rel32 ]     [ body ...
//   x86-64 =13,8  [ ops slot ][ nop5 | call rel32 ]     [ body ...
//   arm64 =4,2    [ ops slot ][ mov x9, x30 ][ nop | bl ][ body ...
//                             `-- fixed ---' `- live --'
//
//   riscv64       [ ops slot ][ auipc t0,hi ][ nop | jalr t0,lo(t0) ][ body ...
//                             `-- fixed ---' `------- live -------'
//
//   x86-64: live_offset 0, site_bytes 5; arm64, riscv64: live_offset 4,
//   site_bytes 8
//
// On x86-64 the fixed part is the live instruction's own first state (the
// compiler's one-byte NOPs become one nop5); on arm64 it is the `mov`,
// which is no permitted live change there; on riscv64 the `auipc`, which
// with the live `jalr` reaches one address only: the site's stub (StubUse).
#pragma once

#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/module_relocator.h"
#include "core/instruction_decoder.h"
#include "core/site.h"

namespace ftjit {

// How sites use stubs: per-site code in memory of their module's, whose
// word holds a trampoline's address, so that changing a site's trampoline
// is a data store rather than a code change.
enum class StubUse : uint8_t {
  // arm64: none; sites call their trampolines.
  kNone,
  // x86-64: a site whose return is hooked jumps to its stub, which makes
  // the trampoline it jumps on to look called (Backend::encode_stub,
  // TrampolineRequest::entered_by_stub). Stubs are an array per module,
  // stub_bytes apart in site order.
  kHookedReturns,
  // riscv64: every enabled site calls its stub, which jumps on to the
  // trampoline in its word; trampolines see exactly the site's call. The
  // site's fixed part can reach one address only, and the live change is
  // one instruction: the stub is that address, and retargeting the site is
  // a store into the stub's word. Stubs mirror the module's text: each at
  // its site's entry + one distance per module, so that the site's
  // instructions are the same for all of the module's sites and come from
  // the emitter once per module (TrampolineEmitter::emit_site_code).
  kEverySite,
};

// Constant facts about one ISA, read by core and runtime (no #if ladders).
struct IsaTraits {
  Isa isa = Isa::kUnknown;
  uint32_t call_bytes = 0;     // size of the live instruction at the entry
  uint32_t slot_bytes = 0;     // size of the ops slot before the entry
  uint32_t slot_align = 0;     // alignment the slot needs for atomic stores
  int64_t branch_reach = 0;    // +- reach of the site's call instruction
  // +- reach of the shortest branch a relocated entry can be (riscv64: a
  // jal, 4 bytes where auipc+jalr takes 8), where a stub is tried first;
  // 0 where every entry branch is the same.
  int64_t short_entry_reach = 0;
  uint32_t code_align = 0;     // alignment of emitted trampolines
  // Stubs (StubUse): the code of one is stub_bytes long; the word that
  // holds its trampoline is at stub + stub_word_offset (before the code on
  // riscv64: negative).
  StubUse stub_use = StubUse::kNone;
  uint32_t stub_bytes = 0;
  int32_t stub_word_offset = 0;
  // The alignment every site's entry needs (riscv64: 8, for its stub's
  // word), 1 where any entry will do.
  uint32_t entry_align = 1;
  // Relocation types of GOT slots (exit hooks redirect a few of them).
  uint32_t reloc_jump_slot = 0;
  uint32_t reloc_glob_dat = 0;
  uint32_t reloc_abs64 = 0;   // a data word holding S + A (personality refs)
  // A word the loader fills with what the IFUNC resolver at the addend
  // returns (core/ifunc_slots.h): where a process's IFUNC implementation is.
  uint32_t reloc_irelative = 0;
  // Where the live instruction sits, from the site's start (x86-64 0;
  // arm64 4, after the `mov x9, x30` written once at init): live writes,
  // traps and encode_call/encode_jump happen at entry + live_offset.
  uint32_t live_offset = 0;
  // The bytes from the entry that make a site, fixed and live part: what
  // classify_entry reads, init writes (encode_init) and de-init restores
  // (the bytes discovery found). At most 8.
  uint32_t site_bytes = 0;
  // The compiler flags that make sites, for errors that name the fix: any
  // site, and a site with an ops slot (call-ops).
  const char* site_flags = "";
  const char* slot_flags = "";
  // The landing pad that starts every stub of a relocated entry (x86-64
  // endbr64, arm64 bti c): what an indirect branch may land on, where the
  // pages check it. Empty where the ISA has none.
  uint8_t landing_pad[4] = {};
  uint8_t landing_pad_bytes = 0;
};

// One instruction (or one fixed-size instruction group) as bytes. Eight
// bytes hold every site instruction we write (x86 call: 5, arm64: 4,
// riscv auipc+jalr: 8) and keep a million-site batch small.
struct Insn {
  uint8_t bytes[8] = {};
  uint8_t size = 0;
  bool operator==(const Insn& o) const {
    return size == o.size && std::memcmp(bytes, o.bytes, size) == 0;
  }
};

// What a site's site_bytes currently hold.
enum class SledKind : uint8_t {
  kNopSled,   // the compiler's NOPs: need the one-time init (encode_init),
              // done while no thread can stand inside the sled
  kNop,       // initialized (or needing no init), live part disabled
  kCall,      // initialized, live part a call: target in call_target
  kUnknown,   // anything else: someone else patched it, or not a sled
};

struct SledInfo {
  SledKind kind = SledKind::kUnknown;
  uint64_t call_target = 0;
};

// One step of a live rewrite, done for every site of a batch and followed by
// one core-serialising sync of all threads: write `size` bytes at
// entry+offset, either the constant `fill` bytes (e.g. a breakpoint) or the
// new instruction's own bytes at that offset. The same for every site, so a
// batch of a million sites costs no per-site planning.
struct WriteStep {
  uint8_t offset = 0;
  uint8_t size = 0;   // 0: up to the end of the new instruction
  bool from_new = true;
  uint8_t fill[4] = {};
};

// How a thread that runs a site while its live instruction changes is
// kept right.
enum class LiveChange : uint8_t {
  // x86-64: steps[0] plants a trap (its `fill`) over the live
  // instruction; a thread that reaches it traps, with its pc reported
  // trap_pc_offset past the instruction's start, and the SIGTRAP handler
  // runs what the site is becoming (Backend::emulate). Any bytes can turn
  // into any others this way, so de-init goes live too (which needs the
  // site to be its live instruction: live_offset 0, site_bytes ==
  // call_bytes).
  kTrap,
  // arm64, riscv64: the new instruction is one naturally aligned store of
  // call_bytes (steps[0], from_new, whole), the architecture's permitted
  // toggle (nop <-> bl); a thread runs the old or the new one, no trap, no
  // signal handler. Only that toggle goes live: init and de-init stop
  // the world.
  kAlignedStore,
};

struct LiveProtocol {
  WriteStep steps[3];
  uint8_t n_steps = 0;
  LiveChange change = LiveChange::kTrap;
  uint8_t trap_pc_offset = 0;  // kTrap: x86-64 int3 reports the next byte
};

// What a thread that traps at a site in the middle of a rewrite must do
// instead of running the instruction: continue at `pc`, after pushing
// `push_value` if `push` (the return address of an emulated call).
struct TrapFixup {
  uint64_t pc = 0;
  bool push = false;
  uint64_t push_value = 0;
};

// How a trampoline finds the ops it passes to the callback.
enum class OpsSource : uint8_t {
  kImmediate,  // ops and func baked in (generated, and the list dispatcher)
  kSiteSlot,   // ops loaded from the slot before the calling site (call-ops)
};

struct TrampolineRequest {
  OpsSource source = OpsSource::kImmediate;
  uint64_t ops = 0;    // kImmediate: passed as the callback's `ops`
  uint64_t func = 0;   // the callback; with kSiteSlot, 0 = ops->func
  bool save_fp = true;           // save/restore the FP argument registers
  // Keep every call-clobbered register, not only the psABI's argument
  // registers (ftjit.h, ftjit_saves): x86-64 then keeps xmm8-15 beside
  // xmm0-7 for callbacks that may use FP. (arm64 and riscv64 keep the
  // FP argument registers only either way: what else a callback may write
  // is callee-saved or, with the flag, kept by no caller.)
  bool saves_all = true;
  bool honour_direct = false;    // continue to regs->direct when it is set
  int64_t counts_tls_offset = 0;   // per-thread entry counter (the exit
                                   // counter follows it; together they
                                   // are the reentrancy guard), from the
                                   // thread pointer (runtime/thread_control.h)
  uint64_t recursion_drops = 0;    // a uint64_t incremented (atomically)
                                   // when the guard skips the callback
  // Entered from a site's stub (a jump, see Backend::encode_stub) rather
  // than by the site's call. Such a trampoline ends in the function by a
  // call, through `call_and_land`, when the callbacks hooked the return
  // (the return address slot holds `exit_trampoline`): the function's
  // return is then one the return-stack predictor expects. Otherwise it
  // jumps to entry+call_bytes, the return address untouched.
  bool entered_by_stub = false;
  uint64_t call_and_land = 0;
  // The exit trampoline (0: none). A parent_ip equal to it means this
  // frame's return address was replaced already (another ops hooked this
  // call, or a hooked function tail-called this one): the trampoline then
  // asks `real_return` (uint64_t real_return(uint64_t slot)) for the real
  // one, so callbacks never see the trampoline as their caller.
  uint64_t exit_trampoline = 0;
  uint64_t real_return = 0;
  // A generated trampoline whose ops hooks returns (exit_record != 0: the
  // runtime's ExitRecord*) calls `func` itself and keeps the shadow stack
  // itself (backends/shadow_layout.h): before the callback, if the newest
  // entry's slot is at or below this frame's, it calls shadow_prune(uint64_t
  // slot); after it, it pushes an entry, or calls shadow_push(uint64_t slot,
  // uint64_t ip, uint64_t record) when the thread has no shadow stack yet or
  // it is full.
  uint64_t exit_record = 0;
  int64_t shadow_tls_offset = 0;
  uint64_t shadow_prune = 0;
  uint64_t shadow_push = 0;
};

// The one exit trampoline a process needs. Two entries:
//  - at place + landing_offset, the landing: a traced function whose
//    return address was replaced returns into it; it saves the return
//    registers, asks `pop` (uint64_t pop(uint64_t slot, ftjit_ret_regs*))
//    for the real return address (slot: where the replaced one was),
//    restores them and returns there;
//  - at place, call-and-land, for trampolines entered by a stub: counts
//    the trampoline's exit and calls the function body (entry+call_bytes,
//    which the trampoline leaves on the stack just below the stack pointer
//    it jumps with), so that the call returns to the landing.
//
// With shadow_tls_offset set (the thread's ShadowStack pointer, from the
// thread pointer), the landing pops the common case itself and calls the
// exit callback directly (backends/shadow_layout.h); anything else (a
// chain, an entry put back for an exception, stale entries above, a
// callback already running on the thread) still goes to `pop`.
struct ExitTrampolineRequest {
  uint64_t pop = 0;
  int64_t counts_tls_offset = 0;
  uint32_t landing_offset = 0;
  int64_t shadow_tls_offset = 0;  // 0: always call pop
  // For the own pop of an inline latency entry (shadow_layout.h,
  // kKindInlineLatency): the thread's inline block, and the address of
  // the cycle counter's ns-per-tick words: 32.32, then 16.16
  // (runtime/cycle_clock.h). 0: left to pop.
  int64_t block_tls_offset = 0;
  uint64_t clock_mult = 0;
  // Where an emitter that compiles inline latency's own landing puts it
  // (from `place`; 0: nowhere): the return address inline latency
  // trampolines hook with, so that other exits pay nothing for it (x86-64:
  // with the body's call ending there, as call-and-land's ends at the
  // landing). Its code then runs past this offset; an emitter that has
  // none ends before it, and those trampolines hook with the landing.
  uint32_t latency_landing_offset = 0;
};

// The instructions of a site that calls its stub (StubUse::kEverySite),
// the same for every site of a module: its stub is at the same distance
// from its entry.
struct SiteCode {
  Insn init;   // the site_bytes init writes: fixed part, live part disabled
  Insn call;   // the live instruction enabled: a call of the site's stub
  std::vector<uint8_t> stub;  // the stub's code (traits().stub_bytes)
};

// Inline work (ftjit.h, ftjit_inline_action): what a plugin asks to run in
// the code a site calls instead of its callback. Numbered as the API's.
enum class InlineAction : uint8_t {
  kCount = 1,    // the thread's counter of the site += 1
  kLatency = 2,  // the cycle counter kept for the exit, which adds the
                 // duration to the site's histogram (shadow_layout.h)
};

// An inline trampoline: one per site, all the same code, told apart by two
// words just before it (the runtime writes them; the emitter's code reads
// them pc-relative). Nothing is saved (what it uses it gives back),
// nothing is called:
//
//   place-16   kCount: the site's counter, its byte offset in the block;
//              kLatency: the site's ExitRecord (shadow_layout.h)
//   place-8    fallback: the trampoline to go on to, entered exactly as the
//              site's call entered this one, when the thread has no block
//              yet (the runtime's first-call path makes one) or for work
//              this code leaves to a callback
//   place      the code: block = [thread pointer + block_tls_offset];
//              block == 0 ? go on to fallback :
//              kCount:   block[offset] += 1 (one update a signal handler on
//                        the same thread cannot split)
//              kLatency: counted as a trampoline entry (counts_tls_offset,
//                        runtime/thread_control.h) and under the same guard:
//                        inside a callback it goes on to the fallback, which
//                        drops the call as every trampoline does; so a signal
//                        handler's traced calls cannot push between our
//                        writes and our publish. s = [thread pointer +
//                        shadow_tls_offset]; unless s is 0, full, or its
//                        newest entry's slot is at or below this frame's
//                        (frames to prune, a chain: the fallback's work),
//                        push {slot, return address, cycle counter, record}
//                        as the generated trampolines do, the return hooked
//                        (exit_trampoline) before the depth publishes it,
//                        and leave as they do (x86-64: through the body's
//                        call that ends at exit_trampoline);
//              return as the site's trampolines return
//
// The code is position-independent (it refers to nothing outside itself
// but its words, the thread pointer and fixed addresses), so the runtime
// copies one emitted template to every site.
struct InlineRequest {
  InlineAction action = InlineAction::kCount;
  int64_t block_tls_offset = 0;
  // kLatency:
  int64_t shadow_tls_offset = 0;
  uint64_t exit_trampoline = 0;  // the landing
  int64_t counts_tls_offset = 0;
  // kLatency, 1 call in N timed (N > 1; 0, 1: every call). Before the
  // above, a call finds the site's countdown (shadow_layout.h,
  // kHistCountdown) in its histogram and takes 1 from it: 0 or more left,
  // it goes on into the body at once (as kCount's does), nothing timed,
  // the return not hooked; else the word becomes N-1 and the call is
  // timed as above. With no block yet, it writes its ExitRecord to
  // [thread pointer + pending_tls_offset] and goes on to the fallback
  // (the first-call path starts the new block's countdown from it).
  uint32_t sample_period = 0;
  int64_t pending_tls_offset = 0;
};
constexpr uint32_t kInlineWordsBytes = 16;
// The largest sample_period (an immediate of every ISA's code).
constexpr uint32_t kMaxInlineSample = 1u << 30;
// At most this long (it is copied to every site).
constexpr size_t kInlineTemplateMaxBytes = 512;

// FTJIT_E_UNSUPPORTED naming `isa` unless `request`'s action is one of
// `compiled`: what an emitter's emit_inline_template checks first.
Status inline_action_compiled(const InlineRequest& request, std::initializer_list<InlineAction> compiled,
                              const char* isa);
constexpr int32_t kInlineOffsetWord = -16;
constexpr int32_t kInlineFallbackWord = -8;

// Turns trampoline requests into bytes for a given address. In-process
// (asmjit, LLVM MC) for an embedder; for an agent, a proxy that asks the
// generator in the CLI: requests and bytes are plain data, addresses are
// the target's.
class TrampolineEmitter {
 public:
  virtual ~TrampolineEmitter() = default;

  // Emits a trampoline to run at address `place`.
  virtual Result<std::vector<uint8_t>> emit_trampoline(
      const TrampolineRequest& request, uint64_t place) const = 0;

  // Emits the exit trampoline (return-address replacement) at `place`.
  virtual Result<std::vector<uint8_t>> emit_exit_trampoline(
      const ExitTrampolineRequest& request, uint64_t place) const = 0;

  // The instructions of the site at `entry` whose stub is at `stub`
  // (StubUse::kEverySite ISAs; FTJIT_E_OUT_OF_RANGE beyond reach). Others
  // encode their sites without an emitter: FTJIT_E_UNSUPPORTED.
  virtual Result<SiteCode> emit_site_code(uint64_t entry, uint64_t stub) const;

  // The code of every inline trampoline of `request`'s action (above),
  // without its words; FTJIT_E_UNSUPPORTED for an action this ISA's
  // emitter does not compile.
  virtual Result<std::vector<uint8_t>> emit_inline_template(const InlineRequest& request) const;
};

// Relocated entries (functions without a sled, core/module_relocator.h):
// what the runtime asks of the generator, which reads the module's file,
// decodes and proves (in-process for an embedder; the CLI for an agent).
struct RelocationRequest {
  std::string path;        // the module's file as the process names it
  uint64_t load_bias = 0;
  uint64_t entry = 0;      // the function's run-time address
  uint64_t place = 0;      // where its copy will run
  uint32_t max_bytes = 0;  // room there
  uint64_t stub = 0;       // where the entry's branch goes (the stub's first
                           // instruction): decides its length (riscv64: jal
                           // or auipc+jalr) and so what moves
};

class EntryRelocator {
 public:
  virtual ~EntryRelocator() = default;
  // The copy of the function at request.entry, or why not: a refusal is
  // FTJIT_E_NOT_PATCHABLE with "<reason>: <detail>" (`ftjit list
  // --relocate`'s reasons).
  virtual Result<RelocatedEntry> relocate_entry(const RelocationRequest& request) const = 0;
};

// The in-process relocator over this build's decoders (decoder_for), each
// module file read and swept once; nullptr where ftjit was built without
// any decoder.
const EntryRelocator* local_entry_relocator();

// An ISA's sites (encodings, rewrite protocol: no code generator needed)
// and, through its emitter, its trampolines.
class Backend : public TrampolineEmitter {
 public:
  virtual const IsaTraits& traits() const = 0;

  // Classifies the bytes at a site's entry (traits().site_bytes of them).
  // Discovery asks once per site: a site that is not kNopSled or kNop is
  // left alone.
  virtual SledInfo classify_entry(uint64_t entry,
                                  std::span<const uint8_t> bytes) const = 0;

  // The site_bytes of an initialized site whose live part is disabled:
  // what the one-time init writes over a kNopSled site with every thread
  // stopped (x86-64: nop5 over the one-byte NOPs; arm64: mov x9, x30; nop).
  // De-init writes back what discovery found.
  virtual Insn encode_init() const = 0;

  // The live instruction's disabled state (at entry + live_offset).
  virtual Insn encode_nop() const = 0;

  // Encodes the live instruction at `at` (a site's entry + live_offset:
  // branches are relative to the instruction that holds them) as a call to
  // `target`, into *out; false if out of reach. (Not a Result: a batch
  // encodes a million of these, returning a 9-byte value stalled store
  // forwarding, and the caller words the error with the site's name.)
  virtual bool encode_call(uint64_t at, uint64_t target, Insn* out) const = 0;

  // The same as a jump (to the site's stub); false if out of reach.
  virtual bool encode_jump(uint64_t at, uint64_t target, Insn* out) const = 0;

  // The code of the stub at `stub` (traits().stub_bytes, into `out`) for
  // the site at `entry`: it makes the stack look as if the site had called
  // the trampoline (return address entry+call_bytes on top), without a
  // call, and jumps to the trampoline whose address the stub's word holds
  // (written separately, at stub_word_offset: changing trampolines is a
  // data store, not a code change). false if out of reach.
  virtual bool encode_stub(uint64_t stub, uint64_t entry, uint8_t* out) const = 0;

  // The ordered steps that turn one live instruction into another while
  // other threads may execute the site, and how those threads are kept
  // right meanwhile (LiveChange).
  virtual const LiveProtocol& live_protocol() const = 0;

  // What a thread trapped at the site at `entry` during a rewrite to `to`
  // must do. Asked of LiveChange::kTrap backends only.
  virtual TrapFixup emulate(uint64_t entry, const Insn& to) const = 0;
};

// The backend for `isa`, or nullptr if ftjit was built without it.
const Backend* backend_for(Isa isa);

// The instruction decoder for `isa` (relocating functions without a sled,
// core/relocation_plan.h), or nullptr where ftjit was built without one.
const InstructionDecoder* decoder_for(Isa isa);

// The code generator for `isa` alone (the CLI serving an agent).
const TrampolineEmitter* emitter_for(Isa isa);

// `isa`'s sites with trampolines from `emitter` (which outlives it), or
// nullptr if ftjit was built without that ISA (sites_registry.cpp: no code
// generator is linked for this).
std::unique_ptr<Backend> make_backend(Isa isa, const TrampolineEmitter& emitter);

// The ISA this code was compiled for.
Isa native_isa();

// The backend of the machine ftjit runs on.
const Backend* native_backend();

}  // namespace ftjit
