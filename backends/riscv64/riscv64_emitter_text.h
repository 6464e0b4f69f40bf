// SPDX-License-Identifier: MIT
// The assembly text riscv64_emitter.cpp hands to LLVM MC: one function per
// kind of sequence, so that a test can set what was meant beside what the
// bytes disassemble to (tests/golden/riscv64_disasm_test.cpp).
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "backends/backend.h"

namespace ftjit::riscv64 {

// Assembly text with a pool of 64-bit constants, loaded pc-relative.
class Source {
 public:
  explicit Source(bool compressed) : compressed_(compressed) {}
  void line(const std::string& text);
  void label(const std::string& name);
  std::string new_label();
  // reg = value, from the pool (auipc + ld).
  void load(const std::string& reg, uint64_t value);
  // A call of an absolute address, through t1.
  void call(uint64_t target);
  // The whole snippet: the compression option, the code, the pool.
  std::string finish();

 private:
  bool compressed_;
  std::string text_;
  std::map<uint64_t, std::string> pool_;
  int labels_ = 0;
};

// The entry trampoline (riscv64_emitter.cpp, (c)).
Result<std::string> trampoline_source(const TrampolineRequest& req, bool compressed);
// The exit trampoline ((d)).
Result<std::string> exit_trampoline_source(const ExitTrampolineRequest& req, bool compressed);
// A site's auipc, nop and jalr (12 bytes) for a stub at `stub`, then the
// stub's own code (12 bytes): riscv64_backend.h, (a) and (b).
Result<std::string> site_code_source(uint64_t entry, uint64_t stub);
// Every inline trampoline's code ((i)), after its two words (zero here).
Result<std::string> inline_template_source(const InlineRequest& req, bool compressed);

}  // namespace ftjit::riscv64
