// SPDX-License-Identifier: MIT
// One module's relocation planner: its file read once, its code swept once
// (the proof's references), then the plan and the copy of any of its
// functions without a sled, at run-time addresses. What the generator (the
// CLI for an agent, the embedding library in-process) keeps per module
// file; the runtime only receives RelocatedEntry values and carries them out.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/eh_frame_index.h"
#include "core/elf_image.h"
#include "core/error.h"
#include "core/relocation_plan.h"

namespace ftjit {

// What a function's relocation is, at run-time addresses:
//
//   entry      [ pad ][ overwritten: `original` bytes ............ ][ body
//                     ^ patch_at      the runtime writes one branch to the
//                                     stub here, traps after it
//   copy place [ `bytes`: each moved instruction relocated, branch back to
//                patch_at + overwritten ]
struct RelocatedEntry {
  uint64_t patch_at = 0;
  uint32_t overwritten = 0;
  std::vector<uint8_t> original;  // what [patch_at, +overwritten) holds in the file
  // What the stub runs just before its sled (in its landing pad's place,
  // at most as long) and, first in `bytes`, just after it:
  // InstructionDecoder::around_sled of the kept landing pad.
  std::vector<uint8_t> before_sled;
  // At the requested place: what runs after the sled, then the copy.
  std::vector<uint8_t> bytes;
  // {original instruction, its copy}, in order: where a thread's pc moves.
  std::vector<std::pair<uint64_t, uint64_t>> moved_to;
  // The branch written at patch_at, to the stub (the decoder's
  // append_branch): at most `overwritten` bytes, traps fill the rest.
  std::vector<uint8_t> branch;
};

// The whole file at `path` (FTJIT_E_SYSTEM if it cannot be read).
Result<std::vector<uint8_t>> read_file_bytes(const std::string& path);

class ModuleRelocator {
 public:
  // Reads and sweeps the ELF file at `path` with the decoder `decoder_for`
  // gives for its ISA (backends/backend.h's; FTJIT_E_UNSUPPORTED where it
  // gives none).
  using DecoderLookup = const InstructionDecoder* (*)(Isa isa);
  static Result<std::unique_ptr<ModuleRelocator>> open(const std::string& path, DecoderLookup decoder_for);

  const ElfImage& image() const { return image_; }
  // The sweep behind every plan (its size, for listings).
  const CodeReferences& references() const { return refs_; }
  // Whether the file has an FDE index (without one every function is
  // refused: no-fde).
  bool has_function_starts() const { return !fde_starts_.empty(); }
  // The plan of the function whose symbol is at link-time `link_entry`
  // or, where no function symbol starts, whose .eh_frame FDE starts there
  // (its pc_range is the size: a stripped file's local function, such as
  // an IFUNC's implementation); kNoSize when neither does. For a branch of
  // `branch_bytes` at its entry (0: the farthest stub's, the decoder's
  // entry_branch_bytes).
  RelocationPlan plan(uint64_t link_entry, uint32_t branch_bytes = 0) const;
  // The file's bytes (the image was parsed from them).
  std::span<const uint8_t> file() const { return *file_; }
  // The function at run-time `entry` of this module loaded at `load_bias`,
  // relocated to run at `place` in at most `max_bytes`, its entry branching
  // to `stub`. A refusal is FTJIT_E_NOT_PATCHABLE, its message
  // "<reason>: <detail>".
  Result<RelocatedEntry> relocate(uint64_t entry, uint64_t load_bias, uint64_t place, size_t max_bytes,
                                  uint64_t stub) const;

 private:
  ModuleRelocator(std::shared_ptr<const std::vector<uint8_t>> file, ElfImage image,
                  const InstructionDecoder& decoder)
      : file_(std::move(file)), image_(std::move(image)), decoder_(decoder) {}
  std::shared_ptr<const std::vector<uint8_t>> file_;  // shared with image_, which views it
  ElfImage image_;
  const InstructionDecoder& decoder_;
  std::vector<uint64_t> fde_starts_;
  std::vector<FdeRange> fde_ranges_;  // the same starts, with sizes
  CodeReferences refs_;
};

}  // namespace ftjit
