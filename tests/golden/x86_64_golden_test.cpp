// SPDX-License-Identifier: MIT
// Golden bytes of the x86-64 backend, on every host: site encodings checked
// against asmjit, the live-rewrite steps, trap emulation, and a whole
// trampoline byte for byte.
#include <asmjit/x86.h>
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "backends/backend.h"

namespace ftjit {
namespace {

const Backend& x86() { return *backend_for(Isa::kX86_64); }

std::string hex(const uint8_t* p, size_t n) {
  static const char* d = "0123456789abcdef";
  std::string s;
  for (size_t i = 0; i < n; ++i) {
    s += d[p[i] >> 4];
    s += d[p[i] & 15];
  }
  return s;
}
std::string hex(const Insn& i) { return hex(i.bytes, i.size); }

Insn call_at(uint64_t at, uint64_t target) {
  Insn call;
  EXPECT_TRUE(x86().encode_call(at, target, &call));
  return call;
}

// What asmjit assembles for `call target` placed at `at`.
std::string asmjit_call(uint64_t at, uint64_t target) {
  asmjit::CodeHolder code;
  code.init(asmjit::Environment(asmjit::Arch::kX64), at);
  asmjit::x86::Assembler a(&code);
  a.call(asmjit::imm(target));
  code.flatten();
  code.resolveUnresolvedLinks();
  code.relocateToBase(at);
  std::vector<uint8_t> out(code.codeSize());
  code.copyFlattenedData(out.data(), out.size());
  return hex(out.data(), out.size());
}

TEST(X86Golden, DisabledSiteIsTheFiveByteNop) {
  EXPECT_EQ(hex(x86().encode_nop()), "0f1f440000");  // nopl 0x0(%rax,%rax,1)
}

TEST(X86Golden, CallMatchesAsmjitForwardAndBackward) {
  const uint64_t site = 0x555555554000ull;
  for (uint64_t target : {site + 0x1000, site - 0x1000, site + 5, site + 0x7fff0000,
                          site - 0x7fff0000}) {
    Insn call;
    ASSERT_TRUE(x86().encode_call(site, target, &call));
    EXPECT_EQ(hex(call), asmjit_call(site, target)) << std::hex << target;
  }
  EXPECT_EQ(hex(call_at(0x1000, 0x2000)), "e8fb0f0000");  // call +0xffb
}

TEST(X86Golden, CallOutOfReachIsAnError) {
  Insn call;
  EXPECT_FALSE(x86().encode_call(0x555555554000, 0x7f0000000000, &call));
}

TEST(X86Golden, ClassifiesWhatCompilersEmit) {
  const uint8_t gcc[] = {0x90, 0x90, 0x90, 0x90, 0x90};
  const uint8_t clang[] = {0x0f, 0x1f, 0x44, 0x00, 0x00};
  const uint8_t clang14[] = {0x0f, 0x1f, 0x44, 0x00, 0x08};
  const uint8_t call[] = {0xe8, 0xfb, 0x0f, 0x00, 0x00};
  const uint8_t endbr[] = {0xf3, 0x0f, 0x1e, 0xfa, 0x90};  // endbr64: not a sled
  EXPECT_EQ(x86().classify_entry(0x1000, gcc).kind, SledKind::kNopSled);
  EXPECT_EQ(x86().classify_entry(0x1000, clang).kind, SledKind::kNop);
  EXPECT_EQ(x86().classify_entry(0x1000, clang14).kind, SledKind::kNop);
  SledInfo c = x86().classify_entry(0x1000, call);
  EXPECT_EQ(c.kind, SledKind::kCall);
  EXPECT_EQ(c.call_target, 0x2000u);
  EXPECT_EQ(x86().classify_entry(0x1000, endbr).kind, SledKind::kUnknown);
  EXPECT_EQ(x86().classify_entry(0x1000, std::span<const uint8_t>(gcc, 3)).kind,
            SledKind::kUnknown);
}

// Applies the protocol step by step to a byte buffer.
std::vector<std::string> run_protocol(const Insn& from, const Insn& to) {
  const LiveProtocol& p = x86().live_protocol();
  uint8_t site[16];
  std::memcpy(site, from.bytes, from.size);
  std::vector<std::string> states;
  for (uint8_t i = 0; i < p.n_steps; ++i) {
    const WriteStep& s = p.steps[i];
    uint8_t n = s.size ? s.size : static_cast<uint8_t>(to.size - s.offset);
    std::memcpy(site + s.offset, s.from_new ? to.bytes + s.offset : s.fill, n);
    states.push_back(hex(site, to.size));
  }
  return states;
}

TEST(X86Golden, LiveRewriteIsInt3ThenTailThenHead) {
  Insn nop = x86().encode_nop();
  Insn call = call_at(0x1000, 0x2000);
  EXPECT_EQ(run_protocol(nop, call),
            (std::vector<std::string>{"cc1f440000", "ccfb0f0000", "e8fb0f0000"}));
  EXPECT_EQ(run_protocol(call, nop),
            (std::vector<std::string>{"ccfb0f0000", "cc1f440000", "0f1f440000"}));
}

TEST(X86Golden, TrapEmulationOfCallAndNop) {
  Insn call = call_at(0x1000, 0x2000);
  TrapFixup f = x86().emulate(0x1000, call);
  EXPECT_EQ(f.pc, 0x2000u);
  EXPECT_TRUE(f.push);
  EXPECT_EQ(f.push_value, 0x1005u);
  f = x86().emulate(0x1000, x86().encode_nop());
  EXPECT_EQ(f.pc, 0x1005u);
  EXPECT_FALSE(f.push);
}

// The generated trampoline without FP saves, ops and callback immediate:
//   64 48 ff 04 25 c0 ff ff ff   incq   %fs:-0x40          entries++
//   4c 89 5c 24 f8               mov    %r11,-0x8(%rsp)    the caller's r11
//   49 89 e3                     mov    %rsp,%r11          the site's rsp
//   48 83 ec 70                  sub    $0x70,%rsp         (24 bytes below the
//   48 83 e4 f0                  and    $-16,%rsp          arrival kept: r11..)
//   4c 89 5c 24 50               mov    %r11,0x50(%rsp)
//   48 89 3c 24 ... 4c 89 54 24 38   mov rdi..r10 -> 0..0x38(%rsp)
// again:                                                   the guard:
//   64 48 8b 04 25 c0 ff ff ff   mov    %fs:-0x40,%rax     entries
//   64 48 8b 14 25 c8 ff ff ff   mov    %fs:-0x38,%rdx     exits
//   64 48 3b 04 25 c0 ff ff ff   cmp    %fs:-0x40,%rax     a signal handler
//   75 e3                        jne    again              ran trampolines?
//   48 29 d0 / 48 83 f8 01       sub %rdx,%rax / cmp $1,%rax
//   0f 85 <rel32>                jne    nested             not the only one
//   49 8b 3b                     mov    (%r11),%rdi        return address
//   48 83 ef 05                  sub    $0x5,%rdi          ip
//   49 8b 73 08                  mov    0x8(%r11),%rsi     parent_ip
//   4d 8d 5b 08                  lea    0x8(%r11),%r11
//   4c 89 5c 24 48               mov    %r11,0x48(%rsp)    sp at entry
//   48 89 e1                     mov    %rsp,%rcx          regs
//   48 ba <ops>                  movabs $ops,%rdx
//   e8 <rel32>                   call   func
//   48 8b 3c 24 ... 4c 8b 54 24 38   restore rdi..r10
//   48 8b 64 24 50               mov    0x50(%rsp),%rsp
//   4c 8b 5c 24 f8               mov    -0x8(%rsp),%r11    the caller's r11
//   64 48 ff 04 25 c8 ff ff ff   incq   %fs:-0x38          exits++
//   c3                           ret
// nested:
//   48 b8 <drops>                movabs $drops,%rax
//   f0 48 ff 00                  lock incq (%rax)
//   48 8b 44 24 30 / 48 8b 54 24 10  restore rax, rdx (all the guard used)
//   48 8b 64 24 50 / 4c 8b 5c 24 f8  rsp, r11
//   64 48 ff 0c 25 c0 ff ff ff   decq   %fs:-0x40          entries--: exits
//   c3                           ret                        count outermost only
TEST(X86Golden, GeneratedTrampolineWithoutFp) {
  TrampolineRequest r;
  r.recursion_drops = 0x7f0000200000ull;
  r.source = OpsSource::kImmediate;
  r.ops = 0x1122334455667788ull;
  r.func = 0x7f0000001000ull;
  r.save_fp = false;
  r.counts_tls_offset = -0x40;
  auto code = x86().emit_trampoline(r, 0x7f0000100000ull);
  ASSERT_TRUE(code.ok());
  EXPECT_EQ(hex(code->data(), code->size()),
            "6448ff0425c0ffffff4c895c24f84989e34883ec704883e4f04c895c2450"
            "48893c244889742408488954241048894c24184c894424204c894c242848894424304c89542438"
            "64488b0425c0ffffff64488b1425c8ffffff64483b0425c0ffffff75e3"
            "4829d04883f8010f8561000000"
            "498b3b4883ef05498b73084d8d5b084c895c24484889e148ba8877665544332211e86b0ff0ff"
            "488b3c24488b742408488b542410488b4c24184c8b4424204c8b4c2428488b4424304c8b542438"
            "488b6424504c8b5c24f86448ff0425c8ffffffc3"
            "48b800002000007f0000f048ff00488b442430488b542410"
            "488b6424504c8b5c24f86448ff0c25c0ffffffc3");
}

// The exit trampoline: call-and-land, then the landing at +16.
//   90 90 90                     nop x3                     (padding)
//   64 48 ff 04 25 c8 ff ff ff   incq   %fs:-0x38           call-and-land:
//   ff 54 24 f0                  call   *-0x10(%rsp)        the body (entry+5)
// landing (+16):
//   64 48 ff 04 25 c0 ff ff ff   incq   %fs:-0x40
//   4c 89 5c 24 f0               mov    %r11,-0x10(%rsp)    kept below the slot
//   49 89 e3                     mov    %rsp,%r11           rsp on arrival
//   48 81 ec 60 01 00 00         sub    $0x160,%rsp         (16 more than the
//   48 83 e4 f0                  and    $-16,%rsp           frame: slot, r11)
//   4c 89 9c 24 48 01 00 00      mov    %r11,0x148(%rsp)
//   48 89 04 24 / 48 89 54 24 08 mov    %rax,(%rsp) / %rdx,0x8(%rsp)
//   0f 29 44 24 10 / 0f 29 4c 24 20   movaps %xmm0,%xmm1 -> 0x10,0x20(%rsp)
//   48 89 8c 24 10 01 00 00 ...  mov    %rcx %rsi %rdi %r8 %r9 %r10 -> 0x110..
// again:
//   48 8b bc 24 48 01 00 00      mov    0x148(%rsp),%rdi
//   48 83 ef 08                  sub    $0x8,%rdi           the replaced slot
//   48 89 e6                     mov    %rsp,%rsi
//   48 b8 <pop>                  movabs $pop,%rax
//   0f 29 54 24 30 ...           movaps %xmm2..15 -> 0x30..0x100(%rsp): pop()
//   ff d0                        call   *%rax               is C++
//   0f 28 54 24 30 ...           movaps 0x30..0x100(%rsp) -> %xmm2..15
//   4c 8d 1d a5 fe ff ff         lea    landing(%rip),%r11
//   4c 39 d8 / 0f 84 <again>     cmp %r11,%rax / je again   a chain: pop again
//   48 8b bc 24 48 01 00 00      mov    0x148(%rsp),%rdi
//   48 89 47 f8                  mov    %rax,-0x8(%rdi)     real address -> slot
//   ... restore ...              rax rdx xmm0 xmm1 rcx..r10
//   48 8b a4 24 48 01 00 00      mov    0x148(%rsp),%rsp
//   64 4c 8b 1c 25 c0 ff ff ff   mov    %fs:-0x40,%r11      pop() may have run
//   64 4c 2b 1c 25 c8 ff ff ff   sub    %fs:-0x38,%r11      nested: another
//   49 83 fb 01 / 0f 85 <nested> cmp $1,%r11 ; jne nested   entry is open
//   4c 8b 5c 24 f0               mov    -0x10(%rsp),%r11
//   64 48 ff 04 25 c8 ff ff ff   incq   %fs:-0x38           exits++
//   48 8d 64 24 f8               lea    -0x8(%rsp),%rsp     onto the slot
//   c3                           ret
// nested:
//   4c 8b 5c 24 f0 / 64 48 ff 0c 25 c0 ff ff ff   r11 ; entries--
//   48 8d 64 24 f8 / c3
TEST(X86Golden, ExitTrampoline) {
  ExitTrampolineRequest r;
  r.pop = 0x7f0000003000ull;
  r.counts_tls_offset = -0x40;
  r.landing_offset = 16;
  auto code = x86().emit_exit_trampoline(r, 0x7f0000100000ull);
  ASSERT_TRUE(code.ok());
  EXPECT_EQ(hex(code->data(), code->size()),
            "9090906448ff0425c8ffffffff5424f0"
            "6448ff0425c0ffffff4c895c24f04989e34881ec600100004883e4f04c899c2448010000"
            "4889042448895424080f294424100f294c2420"
            "48898c24100100004889b424180100004889bc24200100004c89842428010000"
            "4c898c24300100004c89942438010000"
            "488bbc24480100004883ef084889e648b800300000007f0000"
            "0f295424300f295c24400f296424500f296c24600f297424700f29bc2480000000440f29842490"
            "000000440f298c24a0000000440f299424b0000000440f299c24c0000000440f29a424d0000000"
            "440f29ac24e0000000440f29b424f0000000440f29bc2400010000"
            "ffd0"
            "0f285424300f285c24400f286424500f286c24600f287424700f28bc2480000000440f28842490"
            "000000440f288c24a0000000440f289424b0000000440f289c24c0000000440f28a424d0000000"
            "440f28ac24e0000000440f28b424f0000000440f28bc2400010000"
            "4c8d1da5feffff4c39d80f8403ffffff"
            "488bbc2448010000488947f8"
            "488b0424488b5424080f284424100f284c2420488b8c2410010000488bb42418010000488bbc24"
            "200100004c8b8424280100004c8b8c24300100004c8b942438010000"
            "488ba42448010000"
            "644c8b1c25c0ffffff644c2b1c25c8ffffff4983fb010f8514000000"
            "4c8b5c24f06448ff0425c8ffffff488d6424f8c3"
            "4c8b5c24f06448ff0c25c0ffffff488d6424f8c3");
  r.landing_offset = 8;  // call-and-land does not fit before it
  EXPECT_FALSE(x86().emit_exit_trampoline(r, 0x7f0000100000ull).ok());
}

// With the shadow stack's TLS offset, the landing pops the common case
// itself (emitter (g)) before falling back to pop():
//   64 48 8b 04 25 00 ff ff ff   mov    %fs:-0x100,%rax     the ShadowStack
//   48 85 c0 / 0f 84 <slow>      test %rax,%rax ; je slow
//   8b 10 / 85 d2 / 0f 84 <slow> mov (%rax),%edx ; test ; je slow   depth
//   48 8d 4a ff / 48 c1 e1 05 / 48 8d 4c 08 20   &e[depth-1]
//   48 39 39 / 0f 85 <slow>      cmp %rdi,(%rcx) ; jne slow  this slot's?
//   4c 8b 41 18 / 49 f7 c0 01 00 00 00 / 0f 85   record, not put back
//   4c 8b 49 08 / 4c 8d 15 <landing> / 4d 39 d1 / 0f 84   not a chain
//   41 80 78 11 00 / 0f 84       cmpb $0,0x11(%r8) ; je     save_fp?
//   0f 29 54 24 30 ...           xmm2..15 -> 0x30..0x100(%rsp), then as below
//                                to the tail that restores them too
//   ... the guard on r10, r11 ...
//   4c 8b 51 10 / ff ca / 89 10  ip ; depth - 1
//   4c 89 8c 24 40 01 00 00      mov    %r9,0x140(%rsp)     real return
//   41 80 78 10 00 / 0f 84       cmpb $0,0x10(%r8) ; je     live?
//   4c 89 d7 4c 89 ce 49 8b 50 08 48 89 e1 41 ff 10   func(ip, ret, ops, regs)
//   48 8b 84 24 40 01 00 00 / e9 <rel32>   mov 0x140(%rsp),%rax ; jmp tail
// slow: mov %rsp,%rsi ; movabs $pop,%rax ; xmm2..15 ; call ; xmm2..15 back
//       the chain check, the tail; then the tail that restores xmm2..15
TEST(X86Golden, ExitTrampolinePopsTheCommonCaseItself) {
  ExitTrampolineRequest r;
  r.pop = 0x7f0000003000ull;
  r.counts_tls_offset = -0x40;
  r.landing_offset = 16;
  r.shadow_tls_offset = -0x100;
  auto code = x86().emit_exit_trampoline(r, 0x7f0000100000ull);
  ASSERT_TRUE(code.ok());
  const std::string h = hex(code->data(), code->size());
  EXPECT_NE(h.find("4883ef0864488b042500ffffff4885c00f84"), std::string::npos) << h;
  EXPECT_NE(h.find("8b1085d20f84"), std::string::npos) << h;
  EXPECT_NE(h.find("488d4aff48c1e105488d4c082048393"), std::string::npos) << h;
  EXPECT_NE(h.find("4c8b411849f7c001000000"), std::string::npos) << h;
  EXPECT_NE(h.find("4d39d10f84"), std::string::npos) << h;
  EXPECT_NE(h.find("41807811000f84"), std::string::npos) << h;           // save_fp?
  EXPECT_NE(h.find("000f295424300f295c2440"), std::string::npos) << h;  // then xmm2..
  EXPECT_NE(h.find("4c8b5110ffca89104c898c2440010000"), std::string::npos) << h;
  // The callback, twice (with and without xmm2-15 kept), each on to its tail.
  const std::string call = "4c89d74c89ce498b50084889e141ff10488b842440010000e9";
  ASSERT_NE(h.find(call), std::string::npos) << h;
  EXPECT_NE(h.find(call, h.find(call) + 1), std::string::npos) << h;
  // The slow path follows: pop() with xmm2-15 kept, then the chain check.
  EXPECT_NE(h.find("4889e648b800300000007f00000f29542430"), std::string::npos) << h;
  EXPECT_NE(h.find("440f29bc2400010000ffd00f28542430"), std::string::npos) << h;
  EXPECT_NE(h.find("440f28bc24000100004c8d1d"), std::string::npos) << h;
  EXPECT_NE(h.find("0f284c24200f28542430"), std::string::npos) << h;  // tail: xmm1, xmm2..
}

// A generated trampoline without FP saves, entered by a site's stub, with
// the exit trampoline's addresses it needs.
TrampolineRequest stub_entered_request() {
  TrampolineRequest r;
  r.recursion_drops = 0x7f0000200000ull;
  r.ops = 0x1122334455667788ull;
  r.func = 0x7f0000001000ull;
  r.save_fp = false;
  r.counts_tls_offset = -0x40;
  r.entered_by_stub = true;
  r.exit_trampoline = 0x7f0000300010ull;
  r.call_and_land = 0x7f0000300000ull;
  r.real_return = 0x7f0000400000ull;
  return r;
}

// A trampoline entered by a site's stub decides its way out while rax and
// rdx are free, then ends by calling the body through call-and-land when
// the return was hooked, else jumps to it:
//   48 8b 54 24 50               mov    0x50(%rsp),%rdx     the arrival rsp
//   48 b8 <landing>              movabs $landing,%rax
//   48 39 42 08                  cmp    %rax,0x8(%rdx)      the slot hooked?
//   0f 94 42 e8                  sete   -0x18(%rdx)         kept below arrival
//   ... restore rdi..r10, rsp, r11 ...
//   80 7c 24 e8 00               cmpb   $0x0,-0x18(%rsp)
//   0f 84 <rel32>                je     plain
//   48 83 c4 10                  add    $0x10,%rsp          entry+5 and the slot
//   ff 25 <rel32>                jmp    *word(%rip)         call-and-land
// plain:
//   64 48 ff 04 25 c8 ff ff ff   incq   %fs:-0x38           exits++
//   48 83 c4 08 / ff 64 24 f8    add $8,%rsp ; jmp *-0x8(%rsp)   on to entry+5
// ... nested: its entry taken back (decq %fs:-0x40), the same jump; then
// the word: call-and-land's address.
TEST(X86Golden, StubEnteredTrampolineEndsThroughCallAndLand) {
  TrampolineRequest r = stub_entered_request();
  auto code = x86().emit_trampoline(r, 0x7f0000100000ull);
  ASSERT_TRUE(code.ok());
  const std::string h = hex(code->data(), code->size());
  EXPECT_NE(h.find("488b54245048b810003000007f0000483942080f9442e8"), std::string::npos) << h;
  EXPECT_NE(h.find("807c24e8000f840a0000004883c410ff2544000000"
                   "6448ff0425c8ffffff4883c408ff6424f8"),
            std::string::npos)
      << h;
  // The nested path jumps on too, and the word follows.
  EXPECT_EQ(h.substr(h.size() - 50), "6448ff0c25c0ffffff4883c408ff6424f800003000007f0000");
}

// A generated trampoline whose ops hooks returns calls the user's callback
// and keeps the shadow stack itself (emitter (h)):
//   64 48 8b 04 25 00 ff ff ff   mov    %fs:-0x100,%rax     the ShadowStack
//   ... newest entry's slot <= this frame's (0x48(%rsp)): ...
//   57 56 4c 89 c7 48 b8 <prune> ff d0 5e 5f   push ip, parent ; prune(slot)
//   48 89 e1 / 48 ba <user ops> / e8 <user func>
//   4c 8b 4c 24 48 / 4d 8b 41 f8 / 49 83 e8 05  slot, ip
//   ... depth < capacity: ...
//   4c 89 09 / 4d 8b 11 / 4c 89 51 08 / 4c 89 41 10   e = {slot, [slot], ip,
//   49 ba <record> 4c 89 51 18                          record}
//   49 ba <landing> 4d 89 11     mov %r10,(%r9)             the return hooked
//   ff c2 / 89 10 / 48 ff 40 08  depth++ (publishes it) ; hooks++
// slow: push(slot, ip, record)
TEST(X86Golden, GeneratedTrampolineKeepsTheShadowStackItself) {
  TrampolineRequest r = stub_entered_request();
  r.exit_record = 0x7f0000500000ull;
  r.shadow_tls_offset = -0x100;
  r.shadow_prune = 0x7f0000600000ull;
  r.shadow_push = 0x7f0000700000ull;
  auto code = x86().emit_trampoline(r, 0x7f0000100000ull);
  ASSERT_TRUE(code.ok());
  const std::string h = hex(code->data(), code->size());
  EXPECT_NE(h.find("488b4c08204c8b4424484c39c10f87"), std::string::npos) << h;
  EXPECT_NE(h.find("57564c89c748b800006000007f0000ffd05e5f4889e148ba8877665544332211e8"),
            std::string::npos)
      << h;
  EXPECT_NE(h.find("4c8b4c24484d8b41f84983e805"), std::string::npos) << h;
  EXPECT_NE(h.find("4c89094d8b114c8951084c89411049ba00005000007f00004c895118"
                   "49ba10003000007f00004d8911ffc2891048ff4008"),
            std::string::npos)
      << h;
  EXPECT_NE(h.find("4c89cf4c89c648ba00005000007f000048b800007000007f0000ffd0"),
            std::string::npos)
      << h;
}

// A site's stub: the site's return address pushed as if the site had
// called, then on through the word; no register touched.
//   ff 35 0a 00 00 00            push   *0x10(stub)         entry+5, at +16
//   ff 25 0c 00 00 00            jmp    *0x18(stub)         the word, at +24
//   cc cc cc cc
TEST(X86Golden, StubPushesTheReturnAddressAndJumpsThroughItsWord) {
  EXPECT_EQ(x86().traits().stub_bytes, 32u);
  EXPECT_EQ(x86().traits().stub_word_offset, 24u);
  uint8_t stub[32];
  ASSERT_TRUE(x86().encode_stub(0x7f0000100000ull, 0x7f0000000000ull, stub));
  EXPECT_EQ(hex(stub, 32),
            "ff350a000000ff250c000000cccccccc"
            "05000000007f0000"    // entry+5
            "0000000000000000");  // the word: written by the engine
  // What asmjit assembles for the same.
  asmjit::CodeHolder code;
  code.init(asmjit::Environment(asmjit::Arch::kX64), 0x7f0000100000ull);
  asmjit::x86::Assembler a(&code);
  a.push(asmjit::x86::qword_ptr(0x7f0000100010ull));
  a.jmp(asmjit::x86::qword_ptr(0x7f0000100018ull));
  code.flatten();
  code.resolveUnresolvedLinks();
  code.relocateToBase(0x7f0000100000ull);
  std::vector<uint8_t> out(code.codeSize());
  code.copyFlattenedData(out.data(), out.size());
  EXPECT_EQ(hex(out.data(), out.size()), hex(stub, 12));
}

TEST(X86Golden, JumpToTheStubIsE9AndEmulatedWithoutPush) {
  Insn jump;
  ASSERT_TRUE(x86().encode_jump(0x1000, 0x2000, &jump));
  EXPECT_EQ(hex(jump), "e9fb0f0000");
  EXPECT_FALSE(x86().encode_jump(0x1000, 0x100001000ull, &jump));
  ASSERT_TRUE(x86().encode_jump(0x1000, 0x2000, &jump));
  TrapFixup f = x86().emulate(0x1000, jump);
  EXPECT_EQ(f.pc, 0x2000u);
  EXPECT_FALSE(f.push);
  EXPECT_EQ(run_protocol(call_at(0x1000, 0x3000), jump),
            (std::vector<std::string>{"ccfb1f0000", "ccfb0f0000", "e9fb0f0000"}));
}

// With an exit trampoline known, a parent_ip equal to it (this frame's
// return address was replaced already: a hooked function tail-called this
// one) is swapped for the real one from the shadow stack:
//   48 b8 <tramp> 48 39 c6 0f 85 <rel32>  movabs $tramp,%rax ; cmp %rax,%rsi ; jne ok
//   4c 89 df 48 b8 <real_return> ff d0 48 89 c6
//                                  mov %r11,%rdi ; call real_return ; mov %rax,%rsi
TEST(X86Golden, ParentIpThatIsTheExitTrampolineIsLookedUp) {
  TrampolineRequest r;
  r.recursion_drops = 0x7f0000200000ull;
  r.func = 0x7f0000001000ull;
  r.save_fp = false;
  r.exit_trampoline = 0x7f0000300000ull;
  r.real_return = 0x7f0000400000ull;
  auto code = x86().emit_trampoline(r, 0x7f0000100000ull);
  ASSERT_TRUE(code.ok());
  const std::string h = hex(code->data(), code->size());
  EXPECT_NE(h.find("48b800003000007f00004839c60f85"), std::string::npos) << h;
  EXPECT_NE(h.find("4c89df48b800004000007f0000ffd04889c6"), std::string::npos) << h;
  r.exit_trampoline = 0;  // none yet: no check
  auto plain = x86().emit_trampoline(r, 0x7f0000100000ull);
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(hex(plain->data(), plain->size()).find("4839c6"), std::string::npos);
}

TEST(X86Golden, FarCallbackGoesThroughRegister) {
  TrampolineRequest r;
  r.recursion_drops = 0x7f0000200000ull;
  r.func = 0x100000000000ull;  // far from the trampoline
  r.save_fp = false;
  auto code = x86().emit_trampoline(r, 0x7f0000100000ull);
  ASSERT_TRUE(code.ok());
  // movabs $func,%rax ; call *%rax
  EXPECT_NE(hex(code->data(), code->size()).find("48b80000000000100000ffd0"), std::string::npos);
}

TEST(X86Golden, SlotTrampolineLoadsOpsAndFuncFromTheSite) {
  TrampolineRequest r;
  r.recursion_drops = 0x7f0000200000ull;
  r.source = OpsSource::kSiteSlot;
  r.save_fp = true;
  r.honour_direct = true;
  auto code = x86().emit_trampoline(r, 0x7f0000100000ull);
  ASSERT_TRUE(code.ok());
  std::string h = hex(code->data(), code->size());
  // The slot, 8 bytes below the ip rounded down to 8 (behind a landing pad):
  // mov %rdi,%rdx ; and $-8,%rdx ; mov -0x8(%rdx),%rdx
  EXPECT_NE(h.find("4889fa4883e2f8488b52f8"), std::string::npos);
  EXPECT_NE(h.find("ff5208"), std::string::npos);    // call *0x8(%rdx): ops->func
  // The direct path: kept below the arrival rsp, tested, jumped through.
  EXPECT_NE(h.find("488b442440488942f0"), std::string::npos);  // mov 0x40(%rsp),%rax ; mov %rax,-0x10(%rdx)
  EXPECT_NE(h.find("48837c24f000"), std::string::npos);        // cmpq $0,-0x10(%rsp)
  EXPECT_NE(h.find("ff6424f0"), std::string::npos);            // jmp *-0x10(%rsp)
  // The nested path last: count the drop, restore, count the exit, return.
  EXPECT_NE(h.find("48b800002000007f0000f048ff00"), std::string::npos);
  EXPECT_EQ(code->back(), 0xc3);
}

}  // namespace
}  // namespace ftjit
