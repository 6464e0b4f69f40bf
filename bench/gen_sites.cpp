// SPDX-License-Identifier: MIT
// gen_sites: writes an x86-64 GNU assembler file with N tiny patchable functions
// laid out exactly as GCC or clang lay out -fpatchable-function-entry=N,M.
//
// The bench links the output into bench_sites_*.so to time attach/detach over
// 20k..1M sites without compiling a million C functions. The layout must match
// a real compiler's byte for byte, otherwise the engine's sled verification
// (or worse, its one-time sled rewrite) is measured on code nobody ships.
//
// One function, style "gcc", layout "13,8" (16 bytes, so no padding):
//
//   +0x0  90 90 90 90 90 90 90 90   8 prefix NOPs   <- record, 16-aligned
//   +0x8  90 90 90 90 90            5 entry NOPs    <- ftjit_site_<i>
//   +0xd  31 c0                     xor  %eax, %eax
//   +0xf  c3                        ret
//
// Style "clang" keeps the prefix as one-byte NOPs but emits the entry part as
// ONE multi-byte NOP (`0f 1f 44 00 00` for 5), see TOOLCHAIN.md Q4. Style
// "clang14" is what Debian 12's clang 14 really emits for 5 entry bytes,
// whatever M is: `0f 1f 44 00 08` (nopl 0x8(%rax,%rax,1)), a NOP with a
// non-zero displacement that a byte-exact sled check would reject. The record
// in __patchable_function_entries is the address of the first NOP: entry - M
// when M > 0, the entry itself when M == 0.
//
// The file uses one assembler macro per function instead of spelling every
// NOP out: 1M functions then cost ~38 MB of text instead of ~250 MB, and gas
// expands the macro about as fast as it parses the expanded lines. gas slows
// down more than linearly past ~200k functions per file, so the build splits
// large libraries into chunks (--first/--count) assembled in parallel; each
// chunk is one "translation unit" with its own record section, as in a
// library built from many .c files.

#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>

namespace {

// The multi-byte NOPs clang and GCC pick for 2..8 bytes (Intel SDM's
// recommended forms). Only the 5-byte one is used by the bench; the others
// keep the tool honest for other `N,M` layouts.
constexpr const char *kMultiNop[9] = {
    "",
    "0x90",                                     // nop
    "0x66,0x90",                                // xchg %ax,%ax
    "0x0f,0x1f,0x00",                           // nopl (%rax)
    "0x0f,0x1f,0x40,0x00",                      // nopl 0x0(%rax)
    "0x0f,0x1f,0x44,0x00,0x00",                 // nopl 0x0(%rax,%rax,1)
    "0x66,0x0f,0x1f,0x44,0x00,0x00",            // nopw 0x0(%rax,%rax,1)
    "0x0f,0x1f,0x80,0x00,0x00,0x00,0x00",       // nopl 0x0(%rax)
    "0x0f,0x1f,0x84,0x00,0x00,0x00,0x00,0x00",  // nopl 0x0(%rax,%rax,1)
};

enum class Style { kGcc, kClang, kClang14 };

const char *style_name(Style style) {
  switch (style) {
    case Style::kGcc:
      return "gcc";
    case Style::kClang:
      return "clang";
    case Style::kClang14:
      return "clang14";
  }
  return "?";
}

// clang 14's 5-byte patchable-entry NOP (checked with clang-14 -c).
constexpr const char *kClang14Nop5 = "0x0f,0x1f,0x44,0x00,0x08";  // nopl 0x8(%rax,%rax,1)

struct Options {
  unsigned long first = 0;  // index of the first function in this file
  unsigned long count = 0;
  Style style = Style::kGcc;
  unsigned total_nops = 13;  // N of -fpatchable-function-entry=N,M
  unsigned prefix_nops = 8;  // M
  std::string output;
};

[[noreturn]] void usage_error(const char *message) {
  std::fprintf(stderr,
               "gen_sites: %s\n"
               "usage: gen_sites --count N [--first I] [--style gcc|clang|clang14] "
               "[--layout N[,M]] --output FILE.S\n",
               message);
  std::exit(2);
}

bool parse_unsigned(std::string_view text, unsigned long &out) {
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  return ec == std::errc() && end == text.data() + text.size();
}

// "13,8" -> N=13, M=8; "5" -> N=5, M=0. Same spelling as the compiler flag.
bool parse_layout(std::string_view text, Options &opts) {
  unsigned long n = 0;
  unsigned long m = 0;
  const auto comma = text.find(',');
  if (!parse_unsigned(text.substr(0, comma), n)) return false;
  if (comma != std::string_view::npos && !parse_unsigned(text.substr(comma + 1), m)) {
    return false;
  }
  if (n == 0 || m >= n || n > 64) return false;
  opts.total_nops = static_cast<unsigned>(n);
  opts.prefix_nops = static_cast<unsigned>(m);
  return true;
}

Options parse_args(int argc, char **argv) {
  Options opts;
  bool have_count = false;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (i + 1 >= argc) usage_error("missing value after an option");
    const std::string_view value = argv[++i];
    if (arg == "--count") {
      have_count = parse_unsigned(value, opts.count) && opts.count > 0;
      if (!have_count) usage_error("--count wants a positive integer");
    } else if (arg == "--first") {
      if (!parse_unsigned(value, opts.first)) usage_error("--first wants an integer");
    } else if (arg == "--style") {
      if (value == "gcc") {
        opts.style = Style::kGcc;
      } else if (value == "clang") {
        opts.style = Style::kClang;
      } else if (value == "clang14") {
        opts.style = Style::kClang14;
      } else {
        usage_error("--style is gcc, clang or clang14");
      }
    } else if (arg == "--layout") {
      if (!parse_layout(value, opts)) usage_error("--layout is N or N,M with M < N <= 64");
    } else if (arg == "--output" || arg == "-o") {
      opts.output = value;
    } else {
      usage_error("unknown option");
    }
  }
  if (!have_count) usage_error("--count is required");
  if (opts.output.empty()) usage_error("--output is required");
  const unsigned entry_nops = opts.total_nops - opts.prefix_nops;
  if (opts.style == Style::kClang && entry_nops > 8) {
    usage_error("clang style supports at most 8 entry bytes (one NOP)");
  }
  if (opts.style == Style::kClang14 && entry_nops != 5) {
    usage_error("clang14 style knows only the 5-byte entry NOP (layouts 5 and N+5,N)");
  }
  return opts;
}

// One-byte NOPs spelled as the compilers spell them (`nop`, i.e. 0x90).
void emit_one_byte_nops(std::string &out, unsigned n) {
  for (unsigned i = 0; i < n; ++i) out += "\tnop\n";
}

// The macro body for one function; \i is the function's index.
std::string site_macro(const Options &opts) {
  const unsigned entry_nops = opts.total_nops - opts.prefix_nops;
  std::string m;
  m += "\t.macro FTJIT_SITE i\n";
  // Alignment applies to the start of the patch area, not to the symbol.
  m += "\t.p2align 4\n";
  m += "\t.globl ftjit_site_\\i\n";
  m += ".Lpfe\\i:\n";
  emit_one_byte_nops(m, opts.prefix_nops);
  m += "\t.type ftjit_site_\\i, @function\n";
  m += "ftjit_site_\\i:\n";
  if (opts.style == Style::kGcc) {
    emit_one_byte_nops(m, entry_nops);
  } else {
    m += "\t.byte ";
    m += opts.style == Style::kClang14 ? kClang14Nop5 : kMultiNop[entry_nops];
    m += "\n";
  }
  m += "\txorl %eax, %eax\n";
  m += "\tret\n";
  m += "\t.size ftjit_site_\\i, .-ftjit_site_\\i\n";
  m += "\t.endm\n";
  return m;
}

bool write_file(const Options &opts) {
  std::FILE *f = std::fopen(opts.output.c_str(), "w");
  if (f == nullptr) {
    std::perror(opts.output.c_str());
    return false;
  }
  // A large stdio buffer: a 250k chunk is ~9 MB of short lines.
  static char buffer[1 << 20];
  std::setvbuf(f, buffer, _IOFBF, sizeof buffer);

  std::fprintf(f,
               "/* Generated by ftjit gen_sites: functions %lu..%lu, style %s, "
               "-fpatchable-function-entry=%u,%u. Do not edit. */\n",
               opts.first, opts.first + opts.count - 1, style_name(opts.style), opts.total_nops,
               opts.prefix_nops);
  std::fputs(site_macro(opts).c_str(), f);
  std::fputs("\t.text\n", f);
  const unsigned long end = opts.first + opts.count;
  for (unsigned long i = opts.first; i < end; ++i) {
    std::fprintf(f, "\tFTJIT_SITE %lu\n", i);
  }
  // One record section for the whole file, linked (SHF_LINK_ORDER) to .text
  // through its first function, as GCC does; the linker then keeps records
  // and code together, and in a .so each .quad becomes R_X86_64_RELATIVE.
  std::fprintf(f,
               "\t.section __patchable_function_entries,\"awo\",@progbits,"
               "ftjit_site_%lu\n\t.p2align 3\n",
               opts.first);
  for (unsigned long i = opts.first; i < end; ++i) {
    std::fprintf(f, "\t.quad .Lpfe%lu\n", i);
  }
  std::fputs("\t.section .note.GNU-stack,\"\",@progbits\n", f);

  const bool ok = std::ferror(f) == 0;
  if (std::fclose(f) != 0 || !ok) {
    std::perror(opts.output.c_str());
    return false;
  }
  return true;
}

}  // namespace

int main(int argc, char **argv) {
  const Options opts = parse_args(argc, argv);
  return write_file(opts) ? 0 : 1;
}
