// SPDX-License-Identifier: MIT
#include "core/relocation_plan.h"

#include <elf.h>

#include <algorithm>
#include <cstdio>

namespace ftjit {
namespace {


// "0x4f1c (pthread_rwlock_tryrdlock+0x40)": the symbol whose range holds
// `addr`, when there is one.
std::string describe(const ElfImage& image, uint64_t addr) {
  const auto& fns = image.functions();
  auto it = std::upper_bound(fns.begin(), fns.end(), addr,
                             [](uint64_t a, const ElfSymbol& s) { return a < s.value; });
  std::string out = format_hex(addr);
  if (it != fns.begin()) {
    const ElfSymbol& s = *std::prev(it);
    if (addr < s.value + std::max<uint64_t>(s.size, 1)) out += " (" + std::string(s.name) + "+" + format_hex(addr - s.value) + ")";
  }
  return out;
}

std::string bytes_of(std::span<const uint8_t> code, uint64_t at, uint32_t n) {
  std::string out;
  for (uint32_t i = 0; i < n && at + i < code.size(); ++i) {
    char b[4];
    std::snprintf(b, sizeof b, "%s%02x", i ? " " : "", code[at + i]);
    out += b;
  }
  return out;
}

bool is_code_reference(InsnClass c) {
  switch (c) {
    case InsnClass::kPcRelative:
    case InsnClass::kCondBranch:
    case InsnClass::kJump:
    case InsnClass::kCall:
    case InsnClass::kUnknown:  // a short-only branch still has a target
      return true;
    default:
      return false;
  }
}

}  // namespace

const char* relocation_refusal_name(RelocationRefusal r) {
  switch (r) {
    case RelocationRefusal::kNone: return "relocatable";
    case RelocationRefusal::kNoSize: return "no-size";
    case RelocationRefusal::kNotFunctionStart: return "no-fde";
    case RelocationRefusal::kIfunc: return "ifunc";
    case RelocationRefusal::kTooShort: return "too-short";
    case RelocationRefusal::kBranchInside: return "branch-inside";
    case RelocationRefusal::kCallInside: return "call-inside";
    case RelocationRefusal::kSyscallInside: return "syscall-inside";
    case RelocationRefusal::kExclusive: return "exclusive";
    case RelocationRefusal::kUnhandled: return "unhandled";
    case RelocationRefusal::kUndecodable: return "undecodable";
  }
  return "?";
}

CodeReferences CodeReferences::sweep(std::span<const uint8_t> file, const ElfImage& image,
                                     const InstructionDecoder& decoder, std::span<const FdeRange> fdes) {
  CodeReferences out;
  // [start, end) of executable, file-backed bytes, from the first function
  // to the end of the last: an executable segment may begin with the
  // file's headers, symbols and relocations (arm64's libc does), whose
  // bytes decode to nonsense references.
  std::vector<std::pair<uint64_t, uint64_t>> code;
  for (const ElfImage::Segment& seg : image.load_segments()) {
    if ((seg.flags & PF_X) == 0 || seg.filesz == 0) continue;
    uint64_t lo = ~uint64_t{0}, hi = 0;
    for (const ElfSymbol& s : image.functions()) {
      if (s.value < seg.vaddr || s.value - seg.vaddr >= seg.filesz) continue;
      lo = std::min(lo, s.value);
      hi = std::max(hi, std::min(s.value + std::max<uint64_t>(s.size, 1), seg.vaddr + seg.filesz));
    }
    for (const FdeRange& f : fdes) {
      if (f.start < seg.vaddr || f.start - seg.vaddr >= seg.filesz) continue;
      lo = std::min(lo, f.start);
      hi = std::max(hi, f.start + std::min(std::max<uint64_t>(f.size, 1), seg.vaddr + seg.filesz - f.start));
    }
    if (lo < hi) code.emplace_back(lo, hi);
  }
  auto in_code = [&](uint64_t a) {
    for (const auto& [lo, hi] : code)
      if (a >= lo && a < hi) return true;
    return false;
  };
  // Where a decode starts again: every function symbol, every FDE.
  std::vector<uint64_t> starts;
  for (const ElfSymbol& s : image.functions()) starts.push_back(s.value);
  for (const FdeRange& f : fdes) starts.push_back(f.start);
  std::sort(starts.begin(), starts.end());
  for (const auto& [lo, hi] : code) {
    const std::span<const uint8_t> bytes = image.code_in_file(file, lo, hi - lo);
    if (bytes.empty()) continue;
    const uint64_t end = lo + bytes.size();
    auto next_start = std::upper_bound(starts.begin(), starts.end(), lo);
    uint64_t pc = lo;
    // Whether the flow may run on from the last instruction decoded (past
    // any padding): unknown after bytes that decode to none.
    bool flowing = false;
    while (pc < end) {
      if (flowing && pc != lo && std::binary_search(starts.begin(), starts.end(), pc)) out.falls_into_.push_back(pc);
      while (next_start != starts.end() && *next_start <= pc) ++next_start;
      const uint64_t stop = next_start != starts.end() ? std::min(*next_start, end) : end;
      const DecodedInsn insn = decoder.decode(pc, bytes.subspan(pc - lo, std::min<uint64_t>(16, end - pc)));
      if (insn.size == 0 || pc + insn.size > stop) {
        // Not an instruction, or one running over a function's start: the
        // next candidate, or that start.
        pc = insn.size == 0 ? std::min(pc + decoder.resync_bytes(), stop) : stop;
        flowing = true;
        continue;
      }
      ++out.instructions_;
      if (insn.has_target && is_code_reference(insn.cls) && in_code(insn.target))
        out.refs_.push_back({insn.target, pc});
      if (!insn.padding) {
        flowing = insn.cls != InsnClass::kJump && insn.cls != InsnClass::kReturn &&
                  insn.cls != InsnClass::kIndirectJump && insn.cls != InsnClass::kTrap && insn.cls != InsnClass::kCall;
      }
      pc += insn.size;
    }
  }
  std::sort(out.refs_.begin(), out.refs_.end(), [](const CodeReference& a, const CodeReference& b) {
    return a.target != b.target ? a.target < b.target : a.from < b.from;
  });
  std::sort(out.falls_into_.begin(), out.falls_into_.end());
  out.falls_into_.erase(std::unique(out.falls_into_.begin(), out.falls_into_.end()), out.falls_into_.end());
  return out;
}

const CodeReference* CodeReferences::first_into(uint64_t lo, uint64_t hi) const {
  auto it = std::lower_bound(refs_.begin(), refs_.end(), lo,
                             [](const CodeReference& r, uint64_t v) { return r.target < v; });
  return it != refs_.end() && it->target < hi ? &*it : nullptr;
}

RelocationPlan plan_relocation(const ElfSymbol& fn, std::span<const uint8_t> file, const ElfImage& image,
                               const InstructionDecoder& decoder, const CodeReferences& refs,
                               std::span<const uint64_t> fde_starts, uint32_t branch_bytes) {
  RelocationPlan plan;
  plan.entry = fn.value;
  plan.patch_at = fn.value;
  auto refuse = [&](RelocationRefusal r, std::string why) {
    plan.refusal = r;
    plan.why = std::move(why);
    plan.moved.clear();
    plan.overwritten = 0;
    return plan;
  };
  if (fn.ifunc)
    return refuse(RelocationRefusal::kIfunc, "an IFUNC: its implementation is chosen at run time, and traced there in "
                                             "a process (`ftjit list -p PID --relocate` names it)");
  if (fn.size == 0) return refuse(RelocationRefusal::kNoSize, "the symbol has no size");
  if (!std::binary_search(fde_starts.begin(), fde_starts.end(), fn.value)) {
    // Without an FDE (a file built without unwind tables, as Debian's
    // riscv64 libc mostly is) the symbol says where a function starts when
    // nothing can arrive there but a branch: no sized function symbol's
    // range holds it, and the code before it ends in a return, a jump or
    // a trap or a direct call (past any padding: CodeReferences::
    // may_fall_into), so no flow runs into it.
    for (const ElfSymbol& s : image.functions()) {
      if (s.value >= fn.value) break;
      if (s.value + s.size > fn.value)
        return refuse(RelocationRefusal::kNotFunctionStart,
                      "no .eh_frame FDE starts at the symbol, which lies inside " + std::string(s.name));
    }
    if (refs.may_fall_into(fn.value))
      return refuse(RelocationRefusal::kNotFunctionStart,
                    "no .eh_frame FDE starts at the symbol, and the code before it may run into it");
  }
  const std::span<const uint8_t> code = image.code_in_file(file, fn.value, fn.size);
  if (code.size() != fn.size) return refuse(RelocationRefusal::kNoSize, "the symbol's size runs past its code");

  const uint32_t need = branch_bytes != 0 ? branch_bytes : decoder.entry_branch_bytes();
  uint64_t at = 0;  // from the entry
  bool flow_left = false;
  while (at - (plan.patch_at - fn.value) < need) {
    if (flow_left)
      return refuse(RelocationRefusal::kTooShort,
                    "its flow leaves after " + std::to_string(at - (plan.patch_at - fn.value)) + " bytes; the branch needs " +
                        std::to_string(need));
    if (at >= code.size())
      return refuse(RelocationRefusal::kTooShort,
                    std::to_string(code.size()) + " bytes; the branch needs " + std::to_string(need) +
                        (plan.patch_at != fn.value ? " after the landing pad" : ""));
    const DecodedInsn insn = decoder.decode(fn.value + at, code.subspan(at));
    const std::string where = "+" + format_hex(at);
    switch (insn.cls) {
      case InsnClass::kInvalid:
        return refuse(RelocationRefusal::kUndecodable, "no instruction at " + where + " (" + bytes_of(code, at, 4) + ")");
      case InsnClass::kLandingPad:
        if (at == 0) {
          plan.patch_at = fn.value + insn.size;
          at += insn.size;
          continue;
        }
        return refuse(RelocationRefusal::kUnhandled, "a landing pad at " + where);
      case InsnClass::kCall:
      case InsnClass::kIndirectCall:
        return refuse(RelocationRefusal::kCallInside, "a call at " + where);
      case InsnClass::kSyscall:
        return refuse(RelocationRefusal::kSyscallInside, "a system call at " + where);
      case InsnClass::kExclusive:
        return refuse(RelocationRefusal::kExclusive, "an exclusive access at " + where);
      case InsnClass::kTrap:
      case InsnClass::kUnknown:
        return refuse(RelocationRefusal::kUnhandled,
                      std::string("an instruction the relocator does not handle at ") + where + " (" +
                          bytes_of(code, at, insn.size) + ")");
      case InsnClass::kReturn:
      case InsnClass::kIndirectJump:
      case InsnClass::kJump:
        flow_left = true;
        break;
      case InsnClass::kPlain:
      case InsnClass::kPcRelative:
      case InsnClass::kCondBranch:
        break;
    }
    plan.moved.push_back(insn);
    at += insn.size;
  }
  plan.overwritten = static_cast<uint32_t>(fn.value + at - plan.patch_at);
  if (at > fn.size)
    return refuse(RelocationRefusal::kTooShort, "its first instructions run past its size");
  if (const CodeReference* r = refs.first_into(plan.patch_at + 1, plan.patch_at + plan.overwritten))
    return refuse(RelocationRefusal::kBranchInside, "a reference from " + describe(image, r->from) + " lands at +" +
                                                        format_hex(r->target - fn.value));
  return plan;
}

Result<RelocatedCopy> relocated_copy(const RelocationPlan& plan, std::span<const uint8_t> code, uint64_t copy_at,
                                     const InstructionDecoder& decoder) {
  if (!plan.ok()) return make_error(FTJIT_E_INVALID_ARGUMENT, "a refused plan has no copy: " + plan.why);
  RelocatedCopy copy;
  bool left = false;
  for (const DecodedInsn& insn : plan.moved) {
    const uint64_t at = insn.address - plan.entry;
    if (at + insn.size > code.size()) return make_error(FTJIT_E_INVALID_ARGUMENT, "the code given is shorter than the plan");
    const uint64_t to = copy_at + copy.bytes.size();
    copy.moved_to.emplace_back(insn.address, to);
    if (!decoder.relocate(insn, code.subspan(at, insn.size), to, &copy.bytes))
      return make_error(FTJIT_E_OUT_OF_RANGE, "the " + std::string(insn_class_name(insn.cls)) + " at +" +
                                                  format_hex(at) + " cannot reach its target from " + format_hex(to));
    left = insn.cls == InsnClass::kJump || insn.cls == InsnClass::kReturn || insn.cls == InsnClass::kIndirectJump;
  }
  if (!left && !decoder.append_branch(copy_at + copy.bytes.size(), plan.patch_at + plan.overwritten, &copy.bytes))
    return make_error(FTJIT_E_OUT_OF_RANGE, "the copy at " + format_hex(copy_at) + " cannot branch back to " +
                                                format_hex(plan.patch_at + plan.overwritten));
  return copy;
}

}  // namespace ftjit
