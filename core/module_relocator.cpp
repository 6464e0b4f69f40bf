// SPDX-License-Identifier: MIT
#include "core/module_relocator.h"

#include <cstdio>

#include "core/eh_frame_index.h"

namespace ftjit {

Result<std::vector<uint8_t>> read_file_bytes(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rbe");
  if (f == nullptr) return make_error(FTJIT_E_SYSTEM, "cannot open " + path);
  std::vector<uint8_t> bytes;
  uint8_t buf[1 << 16];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) bytes.insert(bytes.end(), buf, buf + n);
  const bool failed = std::ferror(f) != 0;
  std::fclose(f);
  if (failed) return make_error(FTJIT_E_SYSTEM, "cannot read " + path);
  return bytes;
}

namespace {

// The plan moved by `bias`: link-time addresses become run-time ones.
RelocationPlan rebased(RelocationPlan plan, uint64_t bias) {
  plan.entry += bias;
  plan.patch_at += bias;
  for (DecodedInsn& insn : plan.moved) {
    insn.address += bias;
    if (insn.has_target) insn.target += bias;
  }
  return plan;
}

}  // namespace

Result<std::unique_ptr<ModuleRelocator>> ModuleRelocator::open(const std::string& path, DecoderLookup decoder_for) {
  auto read = read_file_bytes(path);
  if (!read) return read.take_error();
  auto file = std::make_shared<const std::vector<uint8_t>>(std::move(read.value()));
  auto image = ElfImage::parse(*file, file);
  if (!image) return make_error(FTJIT_E_ELF, path + ": " + image.error().message);
  const InstructionDecoder* decoder = decoder_for(image->isa());
  if (decoder == nullptr)
    return make_error(FTJIT_E_UNSUPPORTED, path + ": this ftjit cannot decode " + std::string(isa_name(image->isa())) +
                                               " code, so it relocates no entry");
  std::unique_ptr<ModuleRelocator> r(new ModuleRelocator(std::move(file), std::move(image.value()), *decoder));
  // No FDE index: every function is refused (no-fde), none is guessed.
  if (auto ranges = eh_frame_function_ranges(*r->file_, r->image_)) {
    r->fde_ranges_ = std::move(ranges.value());
    for (const FdeRange& f : r->fde_ranges_) r->fde_starts_.push_back(f.start);
  }
  r->refs_ = CodeReferences::sweep(*r->file_, r->image_, r->decoder_, r->fde_ranges_);
  return r;
}

RelocationPlan ModuleRelocator::plan(uint64_t link_entry, uint32_t branch_bytes) const {
  const ElfSymbol* fn = image_.function_at(link_entry);
  if (fn == nullptr) {
    // No symbol: the unwind tables still say where a function starts and
    // how long it is.
    if (const FdeRange* fde = fde_at(fde_ranges_, link_entry); fde != nullptr && fde->size != 0) {
      ElfSymbol unnamed;
      unnamed.value = fde->start;
      unnamed.size = fde->size;
      unnamed.in_code_section = true;
      return plan_relocation(unnamed, *file_, image_, decoder_, refs_, fde_starts_, branch_bytes);
    }
    RelocationPlan refused;
    refused.entry = refused.patch_at = link_entry;
    refused.refusal = RelocationRefusal::kNoSize;
    refused.why = "no function symbol or .eh_frame FDE starts at " + format_hex(link_entry);
    return refused;
  }
  return plan_relocation(*fn, *file_, image_, decoder_, refs_, fde_starts_, branch_bytes);
}

Result<RelocatedEntry> ModuleRelocator::relocate(uint64_t entry, uint64_t load_bias, uint64_t place,
                                                 size_t max_bytes, uint64_t stub) const {
  // The entry's branch's length decides what moves (riscv64: a jal to a
  // stub within 1 MiB, else auipc+jalr); it is written after the landing
  // pad, which the plan finds: planned again if that changes its length.
  std::vector<uint8_t> branch;
  RelocationPlan link_plan = plan(entry - load_bias, decoder_.branch_bytes(entry, stub));
  for (int tries = 0; link_plan.ok() && tries < 2; ++tries) {
    const uint64_t patch_at = link_plan.patch_at + load_bias;
    branch.clear();
    if (!decoder_.append_branch(patch_at, stub, &branch))
      return make_error(FTJIT_E_OUT_OF_RANGE, "no-reach: the stub at " + format_hex(stub) +
                                                  " is out of branch reach of " + format_hex(patch_at));
    if (branch.size() <= link_plan.overwritten) break;
    link_plan = plan(entry - load_bias, static_cast<uint32_t>(branch.size()));
  }
  if (!link_plan.ok())
    return make_error(FTJIT_E_NOT_PATCHABLE,
                      std::string(relocation_refusal_name(link_plan.refusal)) + ": " + link_plan.why);
  const std::span<const uint8_t> code =
      image_.code_in_file(*file_, link_plan.entry, link_plan.patch_at - link_plan.entry + link_plan.overwritten);
  RelocatedEntry out;
  decoder_.around_sled(code.first(link_plan.patch_at - link_plan.entry), &out.before_sled, &out.bytes);
  auto copy = relocated_copy(rebased(link_plan, load_bias), code, place + out.bytes.size(), decoder_);
  if (!copy) return make_error(FTJIT_E_OUT_OF_RANGE, "no-reach: " + copy.error().message);
  if (out.bytes.size() + copy->bytes.size() > max_bytes)
    return make_error(FTJIT_E_INTERNAL, "the copy takes " + std::to_string(copy->bytes.size()) + " bytes, more than the " +
                                            std::to_string(max_bytes) + " of a stub");
  out.patch_at = link_plan.patch_at + load_bias;
  out.overwritten = link_plan.overwritten;
  out.original.assign(code.begin() + static_cast<ptrdiff_t>(link_plan.patch_at - link_plan.entry), code.end());
  out.bytes.insert(out.bytes.end(), copy->bytes.begin(), copy->bytes.end());
  out.moved_to = std::move(copy->moved_to);
  out.branch = std::move(branch);
  if (out.branch.size() > out.overwritten)
    return make_error(FTJIT_E_INTERNAL, "the entry's branch is longer than the bytes it replaces");
  return out;
}

}  // namespace ftjit
