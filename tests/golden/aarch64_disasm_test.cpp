// SPDX-License-Identifier: MIT
// The differential check of the arm64 backend, on the x86-64 host: every
// a64 sequence the backend produces (each trampoline kind, the exit
// trampoline, the site words at several distances up to bl's reach) is
// disassembled by binutils' aarch64-linux-gnu-objdump, an encoder
// independent of asmjit and of ours, and compared with the instructions
// we mean. An encoding slip fails here, before any of it runs (the same
// code runs under qemu-aarch64 in tests/arm64).
//
// Listings are compared as text, one instruction a line, with addresses
// made symbolic: a branch inside the sequence reads `<+0x40>`, a branch or
// call to a known address `<name>`, a pc-relative literal load `=name`
// once the 8 bytes it loads were checked to hold that name's value.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "backends/arm64/arm64_backend.h"
#include "backends/arm64/arm64_encoding.h"
#include "ftjit/ftjit.h"

namespace ftjit {
namespace {

struct DisasmLine {
  uint64_t address = 0;
  std::string text;  // "mnemonic operands", spaces normalised, no comment
};

// objdump's listing of `bytes` as if they were at `vma`; empty (and a
// failure) if it cannot run.
std::vector<DisasmLine> disassemble(const std::vector<uint8_t>& bytes, uint64_t vma) {
  std::vector<DisasmLine> lines;
  char path[] = "/tmp/ftjit-a64-XXXXXX";
  const int fd = mkstemp(path);
  if (fd < 0 || write(fd, bytes.data(), bytes.size()) != static_cast<ssize_t>(bytes.size())) {
    ADD_FAILURE() << "cannot write " << path;
    return lines;
  }
  close(fd);
  char adjust[64];
  std::snprintf(adjust, sizeof adjust, "--adjust-vma=0x%llx", static_cast<unsigned long long>(vma));
  const std::string cmd = std::string(FTJIT_AARCH64_OBJDUMP) + " -D -b binary -m aarch64 " +
                          adjust + " " + path + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) {
    ADD_FAILURE() << "cannot run " << cmd;
    unlink(path);
    return lines;
  }
  static const std::regex kLine(R"(^\s*([0-9a-f]+):\s+[0-9a-f]{8}\s+(.*)$)");
  char buf[512];
  while (std::fgets(buf, sizeof buf, p) != nullptr) {
    std::string s(buf);
    while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
    std::smatch m;
    if (!std::regex_match(s, m, kLine)) continue;
    std::string text = m[2].str();
    if (const size_t c = text.find("//"); c != std::string::npos) text.erase(c);
    if (const size_t c = text.find(" ;"); c != std::string::npos) text.erase(c);
    for (char& ch : text) ch = ch == '\t' ? ' ' : ch;
    while (!text.empty() && text.back() == ' ') text.pop_back();
    lines.push_back(DisasmLine{std::stoull(m[1].str(), nullptr, 16), text});
  }
  const int status = pclose(p);
  unlink(path);
  EXPECT_EQ(status, 0) << cmd << ": install binutils-aarch64-linux-gnu (scripts/setup.sh)";
  EXPECT_FALSE(lines.empty()) << cmd << " printed no instructions";
  return lines;
}

// The listing of a sequence at `place`, addresses made symbolic with
// `names` (value -> name). The literal pool after the code is checked
// word by word: each 8-byte literal is loaded somewhere and holds a named
// value. A pool entry nobody loads, or a load of an unnamed value, shows
// in the listing (as `=?0x...`) or fails.
std::string render(const std::vector<uint8_t>& bytes, uint64_t place,
                   const std::map<uint64_t, std::string>& names) {
  const std::vector<DisasmLine> lines = disassemble(bytes, place);
  const uint64_t end = place + bytes.size();
  static const std::regex kAddress(R"((^|[^#\w])0x([0-9a-f]+))");
  auto value_at = [&](uint64_t at) {
    uint64_t v = 0;
    std::memcpy(&v, bytes.data() + (at - place), std::min<uint64_t>(8, end - at));
    return v;
  };
  // The pool starts at the first literal a pc-relative ldr reads.
  uint64_t pool = end;
  for (const DisasmLine& l : lines) {
    std::smatch m;
    if (l.text.rfind("ldr ", 0) == 0 && std::regex_search(l.text, m, kAddress)) {
      const uint64_t at = std::stoull(m[2].str(), nullptr, 16);
      if (at >= place && at < end) pool = std::min(pool, at);
    }
  }
  std::ostringstream out;
  std::map<uint64_t, bool> loaded;
  for (const DisasmLine& l : lines) {
    if (l.address >= pool) break;
    // The one zero word that aligns the pool to 8.
    if (pool != end && l.address + 4 == pool && pool % 8 == 0 && value_at(l.address) << 32 == 0 &&
        l.text == "udf #0") {
      continue;
    }
    std::string text = l.text;
    std::smatch m;
    if (std::regex_search(text, m, kAddress)) {
      const uint64_t at = std::stoull(m[2].str(), nullptr, 16);
      std::string symbol;
      if (text.rfind("ldr ", 0) == 0 && at >= pool && at + 8 <= end) {
        loaded[at] = true;
        const uint64_t v = value_at(at);
        const auto it = names.find(v);
        char unknown[40];
        std::snprintf(unknown, sizeof unknown, "?0x%llx", static_cast<unsigned long long>(v));
        symbol = "=" + (it != names.end() ? it->second : std::string(unknown));
      } else if (at >= place && at < end) {
        char rel[32];
        std::snprintf(rel, sizeof rel, "<+0x%llx>", static_cast<unsigned long long>(at - place));
        symbol = rel;
      } else if (const auto it = names.find(at); it != names.end()) {
        symbol = "<" + it->second + ">";
      }
      if (!symbol.empty()) text.replace(m.position(2) - 2, m.length(2) + 2, symbol);
    }
    out << text << "\n";
  }
  // Alignment padding (one word) at most before the first literal, then
  // only loaded literals.
  const uint64_t code_end = lines.empty() ? place : pool;
  for (uint64_t at = (code_end + 7) & ~uint64_t{7}; at < end; at += 8) {
    EXPECT_TRUE(loaded.count(at)) << "pool word at +0x" << std::hex << (at - place)
                                  << " is loaded by no instruction";
  }
  if (pool != end) {
    EXPECT_EQ(end % 8, 0u) << "the pool ends on a partial literal";
  }
  return out.str();
}

// A listing written one instruction a line, indentation ignored.
std::string listing(const char* text) {
  std::istringstream in(text);
  std::ostringstream out;
  std::string line;
  while (std::getline(in, line)) {
    const size_t b = line.find_first_not_of(' ');
    if (b == std::string::npos) continue;
    out << line.substr(b) << "\n";
  }
  return out.str();
}

const Backend& a64() { return arm64_backend(); }

// ---------------------------------------------------------------------------
// Site words
// ---------------------------------------------------------------------------

std::string insn_text(const Insn& insn, uint64_t at, const std::map<uint64_t, std::string>& names = {}) {
  return render(std::vector<uint8_t>(insn.bytes, insn.bytes + insn.size), at, names);
}

TEST(Aarch64Disasm, SiteWordsNopAndMovX9X30) {
  const uint64_t start = 0x555555554008;
  EXPECT_EQ(insn_text(a64().encode_nop(), start + 4), "nop\n");
  EXPECT_EQ(insn_text(arm64_init_word(), start), "mov x9, x30\n");
  EXPECT_EQ(insn_text(arm64_deinit_word(), start), "nop\n");
}

// bl and b at distances up to imm26's edges, both directions: objdump
// must read back the very target; one step beyond, or a target off the
// 4-byte grid, is refused.
TEST(Aarch64Disasm, BranchesAtEveryDistanceUpToTheEdgesOfReach) {
  const uint64_t live = 0x0000004000000000 + 0x10000004;
  const int64_t distances[] = {0, 4, -4, 0x1000, -0x1000, (int64_t{1} << 27) - 4, -(int64_t{1} << 27),
                               (int64_t{1} << 26), -(int64_t{1} << 26) + 12};
  for (int64_t d : distances) {
    const uint64_t target = live + static_cast<uint64_t>(d);
    const std::map<uint64_t, std::string> names = {{target, "target"}};
    const char* expected_for_d0 = "bl <+0x0>\n";
    Insn call, jump;
    ASSERT_TRUE(a64().encode_call(live, target, &call)) << d;
    ASSERT_TRUE(a64().encode_jump(live, target, &jump)) << d;
    if (d == 0) {
      EXPECT_EQ(insn_text(call, live, names), expected_for_d0);
      EXPECT_EQ(insn_text(jump, live, names), "b <+0x0>\n");
    } else {
      EXPECT_EQ(insn_text(call, live, names), "bl <target>\n") << d;
      EXPECT_EQ(insn_text(jump, live, names), "b <target>\n") << d;
    }
    // And the backend reads its own word back.
    uint8_t site[8];
    std::memcpy(site, arm64_init_word().bytes, 4);
    std::memcpy(site + 4, call.bytes, 4);
    const SledInfo info = a64().classify_entry(live - 4, site);
    EXPECT_EQ(info.kind, SledKind::kCall);
    EXPECT_EQ(info.call_target, target) << d;
  }
  Insn out;
  for (int64_t d : {int64_t{1} << 27, -(int64_t{1} << 27) - 4, int64_t{2}, int64_t{-6},
                    int64_t{1} << 40}) {
    EXPECT_FALSE(a64().encode_call(live, live + static_cast<uint64_t>(d), &out)) << d;
    EXPECT_FALSE(a64().encode_jump(live, live + static_cast<uint64_t>(d), &out)) << d;
  }
}

TEST(Aarch64Disasm, ClassifiesEverySledStateAndALandingPad) {
  auto words = [](std::initializer_list<uint32_t> ws) {
    std::vector<uint8_t> b;
    for (uint32_t w : ws) {
      b.resize(b.size() + 4);
      std::memcpy(b.data() + b.size() - 4, &w, 4);
    }
    return b;
  };
  using namespace arm64;
  const uint64_t sym = 0x400000;
  EXPECT_EQ(a64().classify_entry(sym, words({kNop, kNop})).kind, SledKind::kNopSled);
  EXPECT_EQ(a64().classify_entry(sym, words({kMovX9X30, kNop})).kind, SledKind::kNop);
  EXPECT_EQ(a64().classify_entry(sym, words({kNop, kMovX9X30})).kind, SledKind::kUnknown);
  EXPECT_EQ(a64().classify_entry(sym, words({kMovX9X30, 0x91000400})).kind, SledKind::kUnknown);
  EXPECT_EQ(a64().classify_entry(sym, words({kMovX9X30})).kind, SledKind::kUnknown);
  // After bti c, the sled is one word on, and so is the bl it holds.
  const SledInfo after_bti = a64().classify_entry(
      sym, words({kBtiC, kMovX9X30, encode_branch(kBlOpcode, sym + 8, sym + 0x1000)}));
  EXPECT_EQ(after_bti.kind, SledKind::kCall);
  EXPECT_EQ(after_bti.call_target, sym + 0x1000);
  EXPECT_EQ(a64().classify_entry(sym, words({kPaciasp, kNop, kNop})).kind, SledKind::kNopSled);
  const Arm64SledStart pad = find_arm64_sled(words({kBtiC, kNop, kNop}));
  EXPECT_TRUE(pad.found);
  EXPECT_EQ(pad.offset, 4u);
  EXPECT_EQ(pad.landing_pad, kBtiC);
  const Arm64SledStart plain = find_arm64_sled(words({kNop, kNop, 0xd65f03c0}));
  EXPECT_TRUE(plain.found);
  EXPECT_EQ(plain.offset, 0u);
  EXPECT_FALSE(find_arm64_sled(words({0xd65f03c0, kNop, kNop})).found);
  // The words the table names, read back by objdump.
  EXPECT_EQ(render(words({kBtiC, kBtiJc, kPaciasp, kPacibsp}), sym, {}),
            "bti c\nbti jc\npaciasp\npacibsp\n");
}

TEST(Aarch64Disasm, TraitsAndLiveProtocol) {
  const IsaTraits& t = a64().traits();
  EXPECT_EQ(t.isa, Isa::kArm64);
  EXPECT_EQ(t.call_bytes, 4u);
  EXPECT_EQ(t.live_offset, 4u);
  EXPECT_EQ(t.slot_bytes, 8u);
  EXPECT_EQ(t.slot_align, 8u);
  EXPECT_LT(t.branch_reach, int64_t{1} << 27);
  EXPECT_EQ(t.stub_bytes, 0u);
  // One step: the whole new word, no breakpoint.
  const LiveProtocol& p = a64().live_protocol();
  ASSERT_EQ(p.n_steps, 1);
  EXPECT_TRUE(p.steps[0].from_new);
  EXPECT_EQ(p.steps[0].offset, 0);
  EXPECT_EQ(p.steps[0].size, 0);
  uint8_t stub[32];
  EXPECT_FALSE(a64().encode_stub(0x1000, 0x2000, stub));
  EXPECT_EQ(backend_for(Isa::kArm64), &a64());
  EXPECT_NE(emitter_for(Isa::kArm64), nullptr);
}

// ---------------------------------------------------------------------------
// Trampolines
// ---------------------------------------------------------------------------

constexpr uint64_t kPlace = 0x7f0000000000;
constexpr uint64_t kNearFunc = 0x7f0000100000;   // within bl reach
constexpr uint64_t kFarFunc = 0x5555000000;       // not
constexpr uint64_t kOps = 0x1111222233334444;
constexpr uint64_t kDrops = 0x5555666677778888;
constexpr uint64_t kLanding = 0x7e0000000010;
constexpr uint64_t kRealReturn = 0x7e0000002000;
constexpr uint64_t kPrune = 0x7e0000003000;
constexpr uint64_t kPush = 0x7e0000004000;
constexpr uint64_t kRecord = 0x7e0000005000;
constexpr uint64_t kPop = 0x7e0000006000;

const std::map<uint64_t, std::string>& names() {
  static const std::map<uint64_t, std::string> n = {
      {kNearFunc, "func"}, {kFarFunc, "func"}, {kOps, "ops"}, {kDrops, "drops"},
      {kLanding, "landing"}, {kRealReturn, "real_return"}, {kPrune, "shadow_prune"},
      {kPush, "shadow_push"}, {kRecord, "exit_record"}, {kPop, "pop"}, {0, "zero"}};
  return n;
}

TrampolineRequest request() {
  TrampolineRequest r;
  r.recursion_drops = kDrops;
  r.counts_tls_offset = 0x10;
  return r;
}

std::string emitted(const TrampolineRequest& r) {
  auto code = arm64_emitter().emit_trampoline(r, kPlace);
  EXPECT_TRUE(code.ok()) << (code.ok() ? "" : code.error().message);
  return code.ok() ? render(*code, kPlace, names()) : "";
}

std::string format(const char* f, long a = 0, long b = 0, long c = 0, long d = 0, long e = 0) {
  char buf[1024];
  std::snprintf(buf, sizeof buf, f, a, b, c, d, e);
  return buf;
}

// The pieces of arm64_emitter.cpp (c), with the frame size R and the
// offset K of x8 x10-x15 x18 (208 with FP saves, 80 without).
std::string prologue(long frame, long kept) {
  return format(
             "stp x29, x9, [sp, #-16]!\n mov x29, sp\n stp x29, x30, [sp, #-16]!\n"
             "mov x29, sp\n sub sp, sp, #0x%lx\n stp x0, x1, [sp]\n"
             "stp x2, x3, [sp, #16]\n stp x4, x5, [sp, #32]\n stp x6, x7, [sp, #48]\n",
             frame) +
         format("str x8, [sp, #%ld]\n stp x10, x11, [sp, #%ld]\n stp x12, x13, [sp, #%ld]\n"
                "stp x14, x15, [sp, #%ld]\n str x18, [sp, #%ld]\n",
                kept, kept + 8, kept + 24, kept + 40, kept + 56) +
         // entries++, then the guard
         "mrs x16, tpidr_el0\n add x16, x16, #0x10\n"
         "ldxr x17, [x16]\n add x17, x17, #0x1\n stxr w15, x17, [x16]\n cbnz w15, <+0x40>\n"
         "ldr x10, [x16]\n ldr x11, [x16, #8]\n ldr x12, [x16]\n cmp x10, x12\n b.ne <+0x50>\n"
         "sub x10, x10, x11\n cmp x10, #0x1\n";
}

std::string restore_gprs(long kept) {
  return std::string("ldp x0, x1, [sp]\n ldp x2, x3, [sp, #16]\n ldp x4, x5, [sp, #32]\n"
                     "ldp x6, x7, [sp, #48]\n") +
         format("ldr x8, [sp, #%ld]\n ldp x10, x11, [sp, #%ld]\n ldp x12, x13, [sp, #%ld]\n"
                "ldp x14, x15, [sp, #%ld]\n ldr x18, [sp, #%ld]\n",
                kept, kept + 8, kept + 24, kept + 40, kept + 56);
}

const char* const kSaveQ =
    "stp q0, q1, [sp, #80]\n stp q2, q3, [sp, #112]\n stp q4, q5, [sp, #144]\n stp q6, q7, [sp, #176]\n";
const char* const kLoadQ =
    "ldp q0, q1, [sp, #80]\n ldp q2, q3, [sp, #112]\n ldp q4, q5, [sp, #144]\n ldp q6, q7, [sp, #176]\n";

// [x16] += delta with the status in `status`, retried at <+retry>.
std::string atomic_add(const char* value, const char* addr, const char* status, int delta,
                       long retry) {
  char buf[256];
  std::snprintf(buf, sizeof buf,
                "ldxr %s, [%s]\n %s %s, %s, #0x1\n stxr %s, %s, [%s]\n cbnz %s, <+0x%lx>\n",
                value, addr, delta > 0 ? "add" : "sub", value, value, status, value, addr,
                status, retry);
  return buf;
}

// Back to the site's state: x30 = the slot (then cleared: no stale
// landing address below S), x9 = start+8, sp = S.
std::string unwind(long frame) {
  return format("add sp, sp, #0x%lx\n ldr x9, [sp, #8]\n ldp x29, x30, [sp, #16]\n"
                "str xzr, [sp, #24]\n add sp, sp, #0x20\n",
                frame);
}

constexpr long kKeptFp = 208, kKeptNoFp = 80;

TEST(Aarch64Disasm, GeneratedTrampolineWithFpCallsItsCallbackByBl) {
  TrampolineRequest r = request();
  r.source = OpsSource::kImmediate;
  r.ops = kOps;
  r.func = kNearFunc;
  r.save_fp = true;
  EXPECT_EQ(emitted(r), listing((
      prologue(0x120, kKeptFp) + "b.ne <+0x104>\n" + kSaveQ +
      "add x10, x29, #0x20\n str x10, [sp, #72]\n"           // regs->sp = S
      "ldr x0, [x29, #8]\n sub x0, x0, #0x8\n mov x1, x9\n"   // ip, parent_ip
      "mov x3, sp\n ldr x2, =ops\n bl <func>\n" +
      kLoadQ + restore_gprs(kKeptFp) +
      "mrs x16, tpidr_el0\n add x16, x16, #0x18\n" + atomic_add("x17", "x16", "w9", 1, 0xdc) +
      unwind(0x120) + "ret x9\n"
      // nested: a drop counted, the entry taken back
      "ldr x10, =drops\n" + atomic_add("x11", "x10", "w12", 1, 0x108) +
      restore_gprs(kKeptFp) + atomic_add("x17", "x16", "w9", -1, 0x13c) +
      unwind(0x120) + "ret x9\n").c_str()));
}

// The exit count and the way out, from a given position of the exit
// count's ldxr.
std::string exit_count(long ldxr_at) {
  return "mrs x16, tpidr_el0\n add x16, x16, #0x18\n" + atomic_add("x17", "x16", "w9", 1, ldxr_at);
}

std::string nested(long frame, long kept, long at) {
  return "ldr x10, =drops\n" + atomic_add("x11", "x10", "w12", 1, at + 4) + restore_gprs(kept) +
         atomic_add("x17", "x16", "w9", -1, at + 0x38) + unwind(frame) + "ret x9\n";
}

TEST(Aarch64Disasm, GeneratedTrampolineWithoutFpCallsAFarCallbackThroughX16) {
  TrampolineRequest r = request();
  r.source = OpsSource::kImmediate;
  r.ops = kOps;
  r.func = kFarFunc;
  r.save_fp = false;
  EXPECT_EQ(emitted(r), listing((
      prologue(0xa0, kKeptNoFp) + "b.ne <+0xe8>\n"
      "add x10, x29, #0x20\n str x10, [sp, #72]\n"
      "ldr x0, [x29, #8]\n sub x0, x0, #0x8\n mov x1, x9\n"
      "mov x3, sp\n ldr x2, =ops\n ldr x16, =func\n blr x16\n" +
      restore_gprs(kKeptNoFp) + exit_count(0xc0) + unwind(0xa0) + "ret x9\n" +
      nested(0xa0, kKeptNoFp, 0xe8)).c_str()));
}

// The shared call-ops trampoline as the engine asks for it: ops from the
// literal at (x30 & ~7) - 16, its func, and on into a direct trampoline
// when a direct ops asked for one.
TEST(Aarch64Disasm, CallOpsTrampolineLoadsTheLiteralAndHonoursDirect) {
  TrampolineRequest r = request();
  r.source = OpsSource::kSiteSlot;
  r.func = 0;
  r.save_fp = true;
  r.honour_direct = true;
  EXPECT_EQ(emitted(r), listing((
      prologue(0x120, kKeptFp) + "b.ne <+0x12c>\n"
      "str xzr, [sp, #64]\n" + kSaveQ +
      "add x10, x29, #0x20\n str x10, [sp, #72]\n"
      "ldr x0, [x29, #8]\n sub x0, x0, #0x8\n mov x1, x9\n"
      "mov x3, sp\n"
      "ldr x10, [x29, #8]\n and x10, x10, #0xfffffffffffffff8\n ldur x2, [x10, #-16]\n"
      "ldr x16, [x2, #8]\n blr x16\n" +
      kLoadQ + restore_gprs(kKeptFp) + exit_count(0xec) +
      "ldr x16, [sp, #64]\n" + unwind(0x120) +
      "cbnz x16, <+0x11c>\n ret x9\n"
      "mov x17, x30\n mov x30, x9\n mov x9, x17\n br x16\n" +
      nested(0x120, kKeptFp, 0x12c)).c_str()));
}

// The list trampoline as the engine asks for it: a fixed dispatcher, and
// a parent_ip that is the landing replaced by the real one.
TEST(Aarch64Disasm, ListTrampolineAsksRealReturnWhenTheParentIsTheLanding) {
  TrampolineRequest r = request();
  r.source = OpsSource::kImmediate;
  r.func = kNearFunc;
  r.save_fp = true;
  r.honour_direct = true;
  r.exit_trampoline = kLanding;
  r.real_return = kRealReturn;
  EXPECT_EQ(emitted(r), listing((
      prologue(0x120, kKeptFp) + "b.ne <+0x144>\n"
      "str xzr, [sp, #64]\n" + kSaveQ +
      "add x10, x29, #0x20\n str x10, [sp, #72]\n"
      "ldr x0, [x29, #8]\n sub x0, x0, #0x8\n mov x1, x9\n"
      "ldr x10, =landing\n cmp x1, x10\n b.ne <+0xbc>\n"
      "add x0, x29, #0x18\n ldr x16, =real_return\n blr x16\n mov x1, x0\n"
      "ldr x0, [x29, #8]\n sub x0, x0, #0x8\n"
      "mov x3, sp\n ldr x2, =zero\n bl <func>\n" +
      kLoadQ + restore_gprs(kKeptFp) + exit_count(0x104) +
      "ldr x16, [sp, #64]\n" + unwind(0x120) +
      "cbnz x16, <+0x134>\n ret x9\n"
      "mov x17, x30\n mov x30, x9\n mov x9, x17\n br x16\n" +
      nested(0x120, kKeptFp, 0x144)).c_str()));
}

// A generated trampoline whose ops hooks returns: shadow_prune(slot)
// before the callback, shadow_push(slot, ip, record) after it; the slot
// is S-8 = x29+24.
TEST(Aarch64Disasm, GeneratedTrampolineKeepsTheShadowStackThroughTheRuntime) {
  TrampolineRequest r = request();
  r.source = OpsSource::kImmediate;
  r.ops = kOps;
  r.func = kNearFunc;
  r.save_fp = false;
  r.exit_trampoline = kLanding;
  r.real_return = kRealReturn;
  r.exit_record = kRecord;
  r.shadow_prune = kPrune;
  r.shadow_push = kPush;
  EXPECT_EQ(emitted(r), listing((
      prologue(0xa0, kKeptNoFp) + "b.ne <+0x130>\n"
      "add x10, x29, #0x20\n str x10, [sp, #72]\n"
      "ldr x0, [x29, #8]\n sub x0, x0, #0x8\n mov x1, x9\n"
      "ldr x10, =landing\n cmp x1, x10\n b.ne <+0xa8>\n"
      "add x0, x29, #0x18\n ldr x16, =real_return\n blr x16\n mov x1, x0\n"
      "ldr x0, [x29, #8]\n sub x0, x0, #0x8\n"
      "stp x0, x1, [sp, #144]\n add x0, x29, #0x18\n ldr x16, =shadow_prune\n blr x16\n"
      "ldp x0, x1, [sp, #144]\n"
      "mov x3, sp\n ldr x2, =ops\n bl <func>\n"
      "add x0, x29, #0x18\n ldr x1, [sp, #144]\n ldr x2, =exit_record\n"
      "ldr x16, =shadow_push\n blr x16\n" +
      restore_gprs(kKeptNoFp) + exit_count(0x108) + unwind(0xa0) + "ret x9\n" +
      nested(0xa0, kKeptNoFp, 0x130)).c_str()));
}

// Thread-pointer offsets: one add, two (imm12 and imm12 << 12), or the pool.
TEST(Aarch64Disasm, CounterAddressForEveryTlsOffset) {
  auto entry_count = [](int64_t tls) {
    TrampolineRequest r = request();
    r.ops = kOps;
    r.func = kNearFunc;
    r.counts_tls_offset = tls;
    auto code = arm64_emitter().emit_trampoline(r, kPlace);
    EXPECT_TRUE(code.ok());
    std::map<uint64_t, std::string> n = names();
    n[static_cast<uint64_t>(tls)] = "tls";
    const std::string all = render(*code, kPlace, n);
    const size_t from = all.find("mrs x16");
    return all.substr(from, all.find("ldxr", from) - from);
  };
  EXPECT_EQ(entry_count(0x10), "mrs x16, tpidr_el0\nadd x16, x16, #0x10\n");
  EXPECT_EQ(entry_count(0x12345), "mrs x16, tpidr_el0\nadd x16, x16, #0x12, lsl #12\n"
                                  "add x16, x16, #0x345\n");
  EXPECT_EQ(entry_count(0x3000), "mrs x16, tpidr_el0\nadd x16, x16, #0x3, lsl #12\n");
  EXPECT_EQ(entry_count(-0x40), "mrs x16, tpidr_el0\nldr x17, =tls\nadd x16, x16, x17\n");
}

TEST(Aarch64Disasm, RequestsArm64CannotServeAreRefused) {
  TrampolineRequest by_stub = request();
  by_stub.entered_by_stub = true;
  auto r1 = arm64_emitter().emit_trampoline(by_stub, kPlace);
  ASSERT_FALSE(r1.ok());
  EXPECT_EQ(r1.error().code, FTJIT_E_UNSUPPORTED);
  TrampolineRequest no_drops = request();
  no_drops.recursion_drops = 0;
  EXPECT_FALSE(arm64_emitter().emit_trampoline(no_drops, kPlace).ok());
  TrampolineRequest half_hooked = request();
  half_hooked.exit_record = kRecord;
  EXPECT_FALSE(arm64_emitter().emit_trampoline(half_hooked, kPlace).ok());
  EXPECT_FALSE(arm64_emitter().emit_trampoline(request(), kPlace + 2).ok());
}

// arm64_emitter.cpp (d): brk words where x86-64 has call-and-land, then the
// landing: frame, return registers, entry counted, pop (again for a
// chain), the exit counted or the entry taken back, ret x30.
TEST(Aarch64Disasm, ExitTrampolineLandingPopsThroughTheRuntime) {
  ExitTrampolineRequest r;
  r.pop = kPop;
  r.counts_tls_offset = 0x10;
  r.landing_offset = 16;
  auto code = arm64_emitter().emit_exit_trampoline(r, kPlace);
  ASSERT_TRUE(code.ok()) << code.error().message;
  const char* const save_or_load =
      "%s x0, x1, [sp]\n %s q0, q1, [sp, #16]\n %s q2, q3, [sp, #48]\n"
      "%s q4, q5, [sp, #80]\n %s q6, q7, [sp, #112]\n %s x2, x3, [sp, #144]\n"
      "%s x4, x5, [sp, #160]\n %s x6, x7, [sp, #176]\n %s x8, x10, [sp, #192]\n"
      "%s x11, x12, [sp, #208]\n %s x13, x14, [sp, #224]\n %s x15, x18, [sp, #240]\n";
  auto regs = [&](const char* op) {
    char buf[1024];
    std::snprintf(buf, sizeof buf, save_or_load, op, op, op, op, op, op, op, op, op, op, op, op);
    return std::string(buf);
  };
  const std::string leave = "ldr x30, [sp, #256]\n ldr x29, [sp, #272]\n add sp, sp, #0x130\n ret\n";
  EXPECT_EQ(render(*code, kPlace, names()), listing((
      std::string("brk #0xfa64\n brk #0xfa64\n brk #0xfa64\n brk #0xfa64\n")
      + "sub sp, sp, #0x130\n stp x29, x30, [sp, #272]\n add x29, sp, #0x110\n" + regs("stp") +
      "mrs x16, tpidr_el0\n add x16, x16, #0x10\n" + atomic_add("x17", "x16", "w9", 1, 0x54) +
      "add x0, sp, #0x128\n mov x1, sp\n ldr x16, =pop\n blr x16\n"
      "adr x16, <+0x10>\n cmp x0, x16\n b.eq <+0x64>\n"
      "str x0, [sp, #256]\n" + regs("ldp") +
      "mrs x16, tpidr_el0\n add x16, x16, #0x10\n"
      "ldr x17, [x16]\n ldr x9, [x16, #8]\n sub x17, x17, x9\n cmp x17, #0x1\n b.ne <+0xf4>\n"
      "add x16, x16, #0x8\n" + atomic_add("x17", "x16", "w9", 1, 0xd4) + leave +
      atomic_add("x17", "x16", "w9", -1, 0xf4) + leave).c_str()));
}

// The inline counter's template, copied to a place: it keeps x15 on the
// stack, counts with an exclusive pair, returns into the body with x30 the
// parent's, and its two pc-relative loads read the two words before it.
TEST(Aarch64Disasm, InlineTemplateReadsItsWordsAndReturnsIntoTheBody) {
  InlineRequest req;
  req.block_tls_offset = 0x28;
  auto code = arm64_emitter().emit_inline_template(req);
  ASSERT_TRUE(code) << code.error().message;
  const uint64_t words = 0x7f0000600000;
  const std::vector<DisasmLine> lines = disassemble(*code, words + kInlineWordsBytes);
  ASSERT_FALSE(lines.empty());
  EXPECT_EQ(lines.front().text, "str x15, [sp, #-16]!");
  std::string all;
  for (const DisasmLine& l : lines) all += l.text + "\n";
  EXPECT_NE(all.find("mrs x16, tpidr_el0\nadd x16, x16, #0x28\nldr x16, [x16]\n"), std::string::npos) << all;
  EXPECT_NE(all.find("ldxr x17, [x16]"), std::string::npos) << all;
  EXPECT_NE(all.find("stxr w15, x17, [x16]"), std::string::npos) << all;
  EXPECT_NE(all.find("mov x16, x30\nmov x30, x9\nret x16\n"), std::string::npos) << all;
  char offset_load[64], fallback_load[64];
  std::snprintf(offset_load, sizeof offset_load, "ldr x17, 0x%llx", static_cast<unsigned long long>(words));
  std::snprintf(fallback_load, sizeof fallback_load, "ldr x17, 0x%llx", static_cast<unsigned long long>(words + 8));
  EXPECT_NE(all.find(offset_load), std::string::npos) << all;
  EXPECT_NE(all.find(std::string(fallback_load) + "\nbr x17"), std::string::npos) << all;
  InlineRequest unknown;
  unknown.action = static_cast<InlineAction>(7);
  EXPECT_FALSE(arm64_emitter().emit_inline_template(unknown));
}

InlineRequest latency_request() {
  InlineRequest req;
  req.action = InlineAction::kLatency;
  req.block_tls_offset = 0x28;
  req.shadow_tls_offset = 0x30;
  req.counts_tls_offset = 0x10;
  req.exit_trampoline = 0x7f0000123410;
  return req;
}

// `req`'s inline template, disassembled where its words are kTemplateWords:
// its lines, and all of them one per line.
constexpr uint64_t kTemplateWords = 0x7f0000600000;
void disassemble_template(const InlineRequest& req, std::vector<DisasmLine>* lines, std::string* all) {
  auto code = arm64_emitter().emit_inline_template(req);
  ASSERT_TRUE(code) << code.error().message;
  ASSERT_LE(code->size(), kInlineTemplateMaxBytes);
  *lines = disassemble(*code, kTemplateWords + kInlineWordsBytes);
  for (const DisasmLine& l : *lines) *all += l.text + "\n";
}

size_t occurrences(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// The inline latency template: entries and exits counted with exclusive
// pairs under the guard, the counter read from cntvct_el0, the entry's
// slot S-8 (sp + 24 once 32 bytes are kept), the landing loaded into x30
// before returning into the body, the fallback read from the word before.
TEST(Aarch64Disasm, InlineLatencyTemplateHooksTheReturn) {
  InlineRequest req = latency_request();
  std::vector<DisasmLine> lines;
  std::string all;
  ASSERT_NO_FATAL_FAILURE(disassemble_template(req, &lines, &all));
  EXPECT_EQ(lines.front().text, "stp x14, x15, [sp, #-32]!");
  EXPECT_NE(all.find("mrs x14, cntvct_el0\nstr x14, [x13, #16]\n"), std::string::npos) << all;
  EXPECT_NE(all.find("add x14, sp, #0x18\n"), std::string::npos) << all;
  EXPECT_NE(all.find("str x9, [x13, #8]\n"), std::string::npos) << all;
  EXPECT_NE(all.find("mov x16, x30\nldr x30, "), std::string::npos) << all;
  EXPECT_NE(all.find("ret x16\n"), std::string::npos) << all;
  char fallback_load[64];
  std::snprintf(fallback_load, sizeof fallback_load, "ldr x17, 0x%llx", static_cast<unsigned long long>(kTemplateWords + 8));
  EXPECT_NE(all.find(std::string(fallback_load) + "\nbr x17"), std::string::npos) << all;
  EXPECT_EQ(occurrences(all, "stxr"), 3u) << all;  // entries, exits, entries back
  InlineRequest bare;
  bare.action = InlineAction::kLatency;
  EXPECT_FALSE(arm64_emitter().emit_inline_template(bare));
}

// Sampled: before the timed part, the countdown in the site's histogram
// (record word, its block offset, + 8 * kHistCountdown) taken down by an
// exclusive pair, its sign tested; a skip returns into the body as the
// counter's template does; with no block, the record goes to the pending
// word and the call to the fallback. Without the pending word: refused.
TEST(Aarch64Disasm, SampledInlineLatencyTemplateSkipsBetweenTurns) {
  InlineRequest req = latency_request();
  req.sample_period = 8;
  req.pending_tls_offset = 0x38;
  std::vector<DisasmLine> lines;
  std::string all;
  ASSERT_NO_FATAL_FAILURE(disassemble_template(req, &lines, &all));
  EXPECT_EQ(lines.front().text, "str x15, [sp, #-16]!");
  EXPECT_NE(all.find("ldr x17, [x17, #32]\nadd x16, x16, x17\nadd x16, x16, #0x220\n"), std::string::npos) << all;
  EXPECT_NE(all.find("sub x17, x17, #0x1\nstxr w15, x17, [x16]\n"), std::string::npos) << all;
  EXPECT_NE(all.find("tbz x17, #63, "), std::string::npos) << all;
  EXPECT_NE(all.find("mov x16, x30\nmov x30, x9\nret x16\n"), std::string::npos) << all;
  EXPECT_NE(all.find("add x16, x16, #0x38\n"), std::string::npos) << all;  // the pending word
  EXPECT_EQ(occurrences(all, "stxr"), 4u) << all;  // the countdown, entries, exits, entries back
  req.pending_tls_offset = 0;
  EXPECT_FALSE(arm64_emitter().emit_inline_template(req));
}

}  // namespace
}  // namespace ftjit
