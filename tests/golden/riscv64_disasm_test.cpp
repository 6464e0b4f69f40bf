// SPDX-License-Identifier: MIT
// The differential check of the riscv64 backend, on the x86-64 host. Every
// sequence the backend emits (each trampoline kind, with and without the C
// extension; the exit trampoline; the site's instructions and its stub at
// distances up to the auipc+jalr reach) is
//  - assembled a second time, from the same text, by binutils
//    (riscv64-linux-gnu-as, linked with ld at the same address): an
//    assembler independent of LLVM MC must give the same bytes;
//  - disassembled by riscv64-linux-gnu-objdump, where the site's words
//    and the stub are compared with the instructions they must be.
// An encoding slip fails here, before any of it runs (the same code runs
// under qemu-riscv64 in tests/riscv64).
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <regex>
#include <string>
#include <vector>

#include "backends/riscv64/riscv64_backend.h"
#include "backends/riscv64/riscv64_emitter_text.h"
#include "backends/riscv64/riscv64_encoding.h"
#include "ftjit/ftjit.h"

namespace ftjit {
namespace {

std::string run(const std::string& cmd, int* status) {
  std::string out;
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  if (p == nullptr) {
    *status = -1;
    return out;
  }
  char buf[512];
  while (std::fgets(buf, sizeof buf, p) != nullptr) out += buf;
  *status = pclose(p);
  return out;
}

class TempDir {
 public:
  TempDir() {
    char dir[] = "/tmp/ftjit-rv64-XXXXXX";
    path_ = mkdtemp(dir) != nullptr ? dir : "";
  }
  ~TempDir() {
    if (!path_.empty()) (void)!system(("rm -rf " + path_).c_str());
  }
  std::string operator/(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// `text` assembled by binutils at address `place`: as, then ld (which
// resolves the pc-relative pairs gas leaves as relocations), then the
// bytes of .text.
std::vector<uint8_t> binutils_bytes(const std::string& text, bool compressed, uint64_t place) {
  TempDir dir;
  {
    std::ofstream(dir / "t.S") << text;
  }
  char addr[32];
  std::snprintf(addr, sizeof addr, "0x%llx", static_cast<unsigned long long>(place));
  const std::string march = compressed ? "rv64imafdc" : "rv64imafd";
  int status = 0;
  const std::string out =
      run(std::string(FTJIT_RISCV64_AS) + " -march=" + march + " -mno-relax " + (dir / "t.S") + " -o " +
              (dir / "t.o") + " && " + FTJIT_RISCV64_LD + " --no-relax -Ttext=" + addr + " -e " + addr +
              " " + (dir / "t.o") + " -o " + (dir / "t.elf") + " && " + FTJIT_RISCV64_OBJCOPY +
              " -O binary -j .text " + (dir / "t.elf") + " " + (dir / "t.bin"),
          &status);
  EXPECT_EQ(status, 0) << out << "\n(install binutils-riscv64-linux-gnu: scripts/setup.sh)";
  std::ifstream bin(dir / "t.bin", std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(bin), {});
}

// objdump's instructions of `bytes` at `vma`: "mnemonic operands", one a line.
std::vector<std::string> disassemble(const std::vector<uint8_t>& bytes, uint64_t vma) {
  TempDir dir;
  {
    std::ofstream f(dir / "t.bin", std::ios::binary);
    f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  }
  char adjust[64];
  std::snprintf(adjust, sizeof adjust, "--adjust-vma=0x%llx", static_cast<unsigned long long>(vma));
  int status = 0;
  const std::string out = run(std::string(FTJIT_RISCV64_OBJDUMP) + " -D -b binary -m riscv:rv64 -M no-aliases,numeric " +
                                  adjust + " " + (dir / "t.bin"),
                              &status);
  EXPECT_EQ(status, 0) << out;
  std::vector<std::string> lines;
  static const std::regex kLine(R"(^\s*[0-9a-f]+:\s+[0-9a-f]+\s+(.*)$)");
  size_t at = 0;
  while (at < out.size()) {
    size_t end = out.find('\n', at);
    if (end == std::string::npos) end = out.size();
    std::string s = out.substr(at, end - at);
    at = end + 1;
    std::smatch m;
    if (!std::regex_match(s, m, kLine)) continue;
    std::string text = m[1].str();
    if (const size_t c = text.find('#'); c != std::string::npos) text.erase(c);
    for (char& ch : text) ch = ch == '\t' ? ' ' : ch;
    while (!text.empty() && text.back() == ' ') text.pop_back();
    lines.push_back(text);
  }
  return lines;
}

TrampolineRequest base_request() {
  TrampolineRequest r;
  r.recursion_drops = 0x7f00000a1000;
  r.counts_tls_offset = 0x1f0;
  r.exit_trampoline = 0x7f00000b2000;
  r.real_return = 0x7f00000c3000;
  return r;
}

struct Case {
  const char* name;
  TrampolineRequest req;
};

std::vector<Case> trampoline_cases() {
  std::vector<Case> cases;
  TrampolineRequest gen = base_request();
  gen.ops = 0x7f1234567890;
  gen.func = 0x7f0000101000;
  cases.push_back({"generated", gen});
  TrampolineRequest gen_nofp = gen;
  gen_nofp.save_fp = false;
  cases.push_back({"generated_no_fp", gen_nofp});
  TrampolineRequest list = base_request();
  list.func = 0x7f0000102000;
  list.honour_direct = true;
  cases.push_back({"list", list});
  TrampolineRequest call_ops = base_request();
  call_ops.source = OpsSource::kSiteSlot;
  call_ops.honour_direct = true;
  cases.push_back({"call_ops", call_ops});
  TrampolineRequest call_ops_nofp = call_ops;
  call_ops_nofp.save_fp = false;
  call_ops_nofp.honour_direct = false;
  cases.push_back({"call_ops_no_fp", call_ops_nofp});
  TrampolineRequest hooked = gen;
  hooked.exit_record = 0x7f00000d4000;
  hooked.shadow_prune = 0x7f00000e5000;
  hooked.shadow_push = 0x7f00000f6000;
  cases.push_back({"generated_exit_hook", hooked});
  return cases;
}

// Each trampoline kind: LLVM MC's bytes are binutils' bytes, and what
// objdump reads back is all instructions up to the pool.
TEST(Riscv64Disasm, TrampolinesMatchBinutils) {
  for (bool compressed : {false, true}) {
    const TrampolineEmitter& emitter = compressed ? riscv64_compressed_emitter() : riscv64_emitter();
    for (const Case& c : trampoline_cases()) {
      SCOPED_TRACE(std::string(c.name) + (compressed ? " (rvc)" : " (norvc)"));
      const uint64_t place = 0x7f0000200000;
      auto bytes = emitter.emit_trampoline(c.req, place);
      ASSERT_TRUE(bytes) << bytes.error().message;
      auto text = riscv64::trampoline_source(c.req, compressed);
      ASSERT_TRUE(text);
      EXPECT_EQ(*bytes, binutils_bytes(*text, compressed, place)) << *text;
      // The code, without the pool of constants after it (8 bytes each).
      size_t quads = 0;
      for (size_t at = text->find(".quad"); at != std::string::npos; at = text->find(".quad", at + 1)) ++quads;
      ASSERT_GT(bytes->size(), 8 * quads);
      const std::vector<uint8_t> code(bytes->begin(), bytes->end() - static_cast<ptrdiff_t>(8 * quads));
      const auto lines = disassemble(code, place);
      ASSERT_FALSE(lines.empty());
      EXPECT_EQ(lines.front(), compressed ? "c.addi x2,-32" : "addi x2,x2,-32");
      for (const std::string& l : lines) EXPECT_EQ(l.find("unknown"), std::string::npos) << l;
      // With the C extension some instructions shrink; without, none may.
      const bool any_compressed = std::any_of(lines.begin(), lines.end(),
                                              [](const std::string& l) { return l.rfind("c.", 0) == 0; });
      EXPECT_EQ(any_compressed, compressed);
    }
  }
}

TEST(Riscv64Disasm, ExitTrampolineMatchesBinutils) {
  for (bool compressed : {false, true}) {
    SCOPED_TRACE(compressed ? "rvc" : "norvc");
    const TrampolineEmitter& emitter = compressed ? riscv64_compressed_emitter() : riscv64_emitter();
    ExitTrampolineRequest req;
    req.pop = 0x7f0000301000;
    req.counts_tls_offset = 0x1f0;
    req.landing_offset = 16;
    const uint64_t place = 0x7f0000400000;
    auto bytes = emitter.emit_exit_trampoline(req, place);
    ASSERT_TRUE(bytes) << bytes.error().message;
    auto text = riscv64::exit_trampoline_source(req, compressed);
    ASSERT_TRUE(text);
    EXPECT_EQ(*bytes, binutils_bytes(*text, compressed, place)) << *text;
    const auto lines = disassemble(*bytes, place);
    ASSERT_GE(lines.size(), 5u);
    // Traps up to the landing, 4 bytes each: the landing is at +16.
    for (int i = 0; i < 4; ++i) EXPECT_EQ(lines[i].rfind("unimp", 0) == 0 || lines[i].rfind("csrrw", 0) == 0, true) << lines[i];
    EXPECT_EQ(lines[4], compressed ? "c.addi16sp x2,-80" : "addi x2,x2,-80");  // the landing
  }
}

// The site's words and its stub, at distances over the whole reach (both
// signs, at the edges of the jalr's 12 bits): objdump reads the intended
// instructions, and they call exactly the stub.
// The inline counter's template: binutils' bytes (its two words cut off
// the front), and it reads both words before it, pc-relative: copied
// anywhere, it still finds them.
TEST(Riscv64Disasm, InlineTemplateMatchesBinutilsAndReadsItsWords) {
  for (bool compressed : {false, true}) {
    SCOPED_TRACE(compressed ? "rvc" : "norvc");
    const TrampolineEmitter& emitter = compressed ? riscv64_compressed_emitter() : riscv64_emitter();
    InlineRequest req;
    req.block_tls_offset = 0x1f8;
    auto bytes = emitter.emit_inline_template(req);
    ASSERT_TRUE(bytes) << bytes.error().message;
    auto text = riscv64::inline_template_source(req, compressed);
    ASSERT_TRUE(text);
    const uint64_t place = 0x7f0000500000;  // where the words are
    const std::vector<uint8_t> whole = binutils_bytes(*text, compressed, place);
    ASSERT_EQ(whole.size(), bytes->size() + kInlineWordsBytes);
    EXPECT_EQ(std::vector<uint8_t>(whole.begin() + kInlineWordsBytes, whole.end()), *bytes);
    const auto lines = disassemble(*bytes, place + kInlineWordsBytes);
    ASSERT_FALSE(lines.empty());
    EXPECT_EQ(lines.front(), compressed ? "c.addi x2,-16" : "addi x2,x2,-16");
    const auto has = [&](const std::string& what) {
      return std::any_of(lines.begin(), lines.end(), [&](const std::string& l) { return l.find(what) != std::string::npos; });
    };
    EXPECT_TRUE(has("amoadd.d")) << *text;
    // Every auipc + ld pair, decoded: the words it reads.
    std::vector<uint64_t> read;
    const uint64_t code_at = place + kInlineWordsBytes;
    for (size_t at = 0; at + 8 <= bytes->size();) {
      uint32_t insn = 0, next = 0;
      std::memcpy(&insn, bytes->data() + at, 4);
      if ((insn & 3) != 3) {  // a compressed instruction
        at += 2;
        continue;
      }
      std::memcpy(&next, bytes->data() + at + 4, 4);
      const bool auipc = (insn & 0x7f) == 0x17;
      const bool ld = (next & 0x7f) == 0x03 && ((next >> 12) & 7) == 3 && ((next >> 15) & 31) == ((insn >> 7) & 31);
      if (auipc && ld) {
        const int64_t hi = static_cast<int32_t>(insn & 0xfffff000u);
        const int64_t lo = static_cast<int32_t>(next) >> 20;
        read.push_back(code_at + at + static_cast<uint64_t>(hi + lo));
      }
      at += 4;
    }
    EXPECT_EQ(read, (std::vector<uint64_t>{place, place + 8})) << "the offset word, then the fallback word";
  }
  InlineRequest unknown;
  unknown.action = static_cast<InlineAction>(7);
  auto refused = riscv64_emitter().emit_inline_template(unknown);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code, FTJIT_E_UNSUPPORTED);
}

InlineRequest latency_request() {
  InlineRequest req;
  req.action = InlineAction::kLatency;
  req.block_tls_offset = 0x1f8;
  req.shadow_tls_offset = 0x200;
  req.counts_tls_offset = 0x210;
  req.exit_trampoline = 0x7f0000123410;
  return req;
}

// `req`'s inline template, its bytes checked against what binutils makes
// of its text: the text, and the code's disassembly.
void emit_as_binutils(const TrampolineEmitter& emitter, const InlineRequest& req, bool compressed,
                      std::string* text, std::vector<std::string>* lines) {
  auto bytes = emitter.emit_inline_template(req);
  ASSERT_TRUE(bytes) << bytes.error().message;
  auto source = riscv64::inline_template_source(req, compressed);
  ASSERT_TRUE(source);
  *text = *source;
  const uint64_t place = 0x7f0000500000;
  const std::vector<uint8_t> whole = binutils_bytes(*text, compressed, place);
  ASSERT_EQ(whole.size(), bytes->size() + kInlineWordsBytes);
  EXPECT_EQ(std::vector<uint8_t>(whole.begin() + kInlineWordsBytes, whole.end()), *bytes);
  // The pool follows the code: the template still fits what the engine copies.
  EXPECT_LE(bytes->size(), kInlineTemplateMaxBytes);
  *lines = disassemble(*bytes, place + kInlineWordsBytes);
}

long lines_with(const std::vector<std::string>& lines, const std::string& what) {
  return std::count_if(lines.begin(), lines.end(), [&](const std::string& l) { return l.find(what) != std::string::npos; });
}

// The inline latency template: binutils' bytes, the guard's count and the
// exit's as amoadd.d, the counter read with rdtime, the landing loaded into
// ra before the jump into the body, and a request without its shadow stack
// refused.
TEST(Riscv64Disasm, InlineLatencyTemplateMatchesBinutils) {
  for (bool compressed : {false, true}) {
    SCOPED_TRACE(compressed ? "rvc" : "norvc");
    const TrampolineEmitter& emitter = compressed ? riscv64_compressed_emitter() : riscv64_emitter();
    std::string text;
    std::vector<std::string> lines;
    ASSERT_NO_FATAL_FAILURE(emit_as_binutils(emitter, latency_request(), compressed, &text, &lines));
    EXPECT_EQ(lines_with(lines, "amoadd.d"), 3) << text;  // entries, exits, entries back
    EXPECT_EQ(lines_with(lines, "time"), 1) << text;      // rdtime: csrr of the time CSR
    EXPECT_NE(text.find(".quad 0x7f0000123410"), std::string::npos) << text;
  }
  InlineRequest bare;
  bare.action = InlineAction::kLatency;
  EXPECT_FALSE(riscv64_emitter().emit_inline_template(bare));
}

// Sampled: binutils' bytes; the countdown taken down by a fourth amoadd.d
// whose old value decides (bgtz: a skip, `jr t0` into the body), N-1
// written back at a turn; without the pending word: refused.
TEST(Riscv64Disasm, SampledInlineLatencyTemplateMatchesBinutils) {
  for (bool compressed : {false, true}) {
    SCOPED_TRACE(compressed ? "rvc" : "norvc");
    const TrampolineEmitter& emitter = compressed ? riscv64_compressed_emitter() : riscv64_emitter();
    InlineRequest req = latency_request();
    req.sample_period = 8;
    req.pending_tls_offset = 0x218;
    std::string text;
    std::vector<std::string> lines;
    ASSERT_NO_FATAL_FAILURE(emit_as_binutils(emitter, req, compressed, &text, &lines));
    EXPECT_EQ(lines_with(lines, "amoadd.d"), 4) << text;  // the countdown, entries, exits, entries back
    EXPECT_NE(text.find("amoadd.d t3, t3, (t1)\n  bgtz t3, .Lskip\n  li t3, 7\n"), std::string::npos) << text;
    req.pending_tls_offset = 0;
    EXPECT_FALSE(emitter.emit_inline_template(req));
  }
}

TEST(Riscv64Disasm, SiteCodeReachesItsStub) {
  const uint64_t entry = 0x40000000000;
  const int64_t distances[] = {8,      2040,      2048,     4096 - 8, -2048, -2056,
                               1 << 20, -(1 << 20), (int64_t{1} << 31) - 4096, -(int64_t{1} << 31) + 4096};
  for (int64_t d : distances) {
    SCOPED_TRACE("distance " + std::to_string(d));
    const uint64_t stub = entry + static_cast<uint64_t>(d);
    auto code = riscv64_emitter().emit_site_code(entry, stub);
    ASSERT_TRUE(code) << code.error().message;
    ASSERT_EQ(code->init.size, 8);
    ASSERT_EQ(code->call.size, 4);
    ASSERT_EQ(code->stub.size(), 12u);
    uint32_t auipc, nop, jalr;
    std::memcpy(&auipc, code->init.bytes, 4);
    std::memcpy(&nop, code->init.bytes + 4, 4);
    std::memcpy(&jalr, code->call.bytes, 4);
    EXPECT_EQ(nop, riscv64::kNop);
    EXPECT_EQ(auipc & riscv64::kAuipcT0Mask, riscv64::kAuipcT0);
    EXPECT_EQ(jalr & riscv64::kJalrT0T0Mask, riscv64::kJalrT0T0);
    EXPECT_EQ(riscv64::pair_target(entry, auipc, jalr), stub);
    std::vector<uint8_t> site(12);
    std::memcpy(site.data(), code->init.bytes, 8);
    std::memcpy(site.data() + 8, code->call.bytes, 4);
    const auto lines = disassemble(site, entry);
    ASSERT_EQ(lines.size(), 3u);
    EXPECT_EQ(lines[0].rfind("auipc x5,", 0), 0u) << lines[0];
    EXPECT_EQ(lines[1], "addi x0,x0,0");
    EXPECT_EQ(lines[2].rfind("jalr x5,", 0), 0u) << lines[2];
    EXPECT_NE(lines[2].find("(x5)"), std::string::npos) << lines[2];
    const auto stub_lines = disassemble(code->stub, stub);
    EXPECT_EQ(stub_lines, (std::vector<std::string>{"auipc x6,0x0", "ld x6,-8(x6)", "jalr x0,0(x6)"}));
    auto text = riscv64::site_code_source(entry, stub);
    ASSERT_TRUE(text);
    std::vector<uint8_t> all(site);
    all.insert(all.end(), code->stub.begin(), code->stub.end());
    EXPECT_EQ(all, binutils_bytes(*text, false, entry));
  }
  // Out of reach, or misaligned: refused, never a wrong call.
  auto far = riscv64_emitter().emit_site_code(entry, entry + (uint64_t{1} << 31));
  ASSERT_FALSE(far);
  EXPECT_EQ(far.error().code, FTJIT_E_OUT_OF_RANGE);
  EXPECT_FALSE(riscv64_emitter().emit_site_code(entry + 4, entry + 4096));
}

// The sled as each compiler leaves it, and what init and enable make of it.
TEST(Riscv64Disasm, ClassifiesSleds) {
  const Backend& b = riscv64_backend();
  const uint8_t cnops[8] = {0x01, 0, 0x01, 0, 0x01, 0, 0x01, 0};
  const uint8_t nops[8] = {0x13, 0, 0, 0, 0x13, 0, 0, 0};
  EXPECT_EQ(b.classify_entry(0x1000, cnops).kind, SledKind::kNopSled);
  EXPECT_EQ(b.classify_entry(0x1000, nops).kind, SledKind::kNopSled);
  auto code = riscv64_emitter().emit_site_code(0x1000, 0x5000);
  ASSERT_TRUE(code);
  // Disabled by someone else's init: not ours to take.
  EXPECT_EQ(b.classify_entry(0x1000, {code->init.bytes, 8}).kind, SledKind::kUnknown);
  uint8_t enabled[8];
  std::memcpy(enabled, code->init.bytes, 4);
  std::memcpy(enabled + 4, code->call.bytes, 4);
  const SledInfo info = b.classify_entry(0x1000, enabled);
  EXPECT_EQ(info.kind, SledKind::kCall);
  EXPECT_EQ(info.call_target, 0x5000u);
  const uint8_t other[8] = {0x13, 0, 0, 0, 0x01, 0, 0x01, 0};  // nop, c.nop c.nop: not a layout
  EXPECT_EQ(b.classify_entry(0x1000, other).kind, SledKind::kUnknown);
}

}  // namespace
}  // namespace ftjit
