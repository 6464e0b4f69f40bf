// SPDX-License-Identifier: MIT
// Writes code: one batch of live-instruction rewrites, in the backend's
// step order, with one sync per step for the whole batch (3 on x86-64's
// int3 protocol, 1 for an aligned store, whatever the batch size); and the
// fixed parts of sites, with every other thread stopped. No site runs its
// new instruction before every site has been verified; a site that fails
// leaves every site as it was.
#pragma once

#include <atomic>
#include <cstring>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "core/error.h"
#include "runtime/sync.h"

namespace ftjit {

// One site's live rewrite. The instructions travel as 8-byte words (the
// bytes in memory order; traits().call_bytes of them count): 32 bytes a
// site, copied with whole-word moves.
struct EntryWrite {
  uint64_t at = 0;        // the live instruction: entry + traits().live_offset
  uint8_t* rw = nullptr;  // writable alias of `at`
  uint64_t from = 0;      // what `at` must hold now
  uint64_t to = 0;        // what it will hold
};

inline uint64_t insn_word(const Insn& insn) {
  uint64_t w;
  std::memcpy(&w, insn.bytes, sizeof w);
  return w;
}

// One ops slot store (8 aligned bytes before an entry; never executed).
struct SlotWrite {
  uint64_t* rw = nullptr;
  uint64_t value = 0;
};

// One site's fixed part, written while every other thread is parked: the
// one-time init (Backend::encode_init) or the de-init (the bytes discovery
// found).
struct FixedPartWrite {
  uint64_t entry = 0;
  uint8_t* rw = nullptr;  // writable alias of `entry`
  uint32_t size = 0;      // traits().site_bytes
  uint64_t bytes = 0;     // what [entry, entry+size) becomes, memory order
};

class Patcher {
 public:
  Patcher(const Backend& backend, CoreSync& sync);

  // Installs the SIGTRAP handler that emulates sites trapped mid-rewrite
  // (LiveChange::kTrap); a SIGTRAP that is not ours goes to the handler
  // the program had.
  static Status install_trap_handler();
  // Gives SIGTRAP back to the handler it had before (an agent being
  // unloaded; after it the handler is never installed again).
  static void uninstall_trap_handler();

  // Verifies all, stores `slots` (before any site can reach them), then
  // rewrites the live instructions. `writes` must be sorted by `at`. When
  // the first step only plants a trap, verifying and planting are one
  // pass, and the traps are taken back if a site fails. On a verify
  // failure every site and slot is as it was, the error gives the
  // address, the expected and the found bytes, and *failed_at (if given)
  // the live instruction's address.
  Status apply(std::span<const EntryWrite> writes, std::span<const SlotWrite> slots,
               uint64_t* failed_at = nullptr);

  // Writes the sites' fixed parts while every other thread is parked; a
  // thread parked inside a site's bytes continues after them (the same
  // program state: init and de-init only run while the live part is
  // disabled). `sites` sorted by entry.
  Status write_fixed_parts(std::span<const FixedPartWrite> sites);

  uint64_t last_batch_syncs() const { return last_batch_syncs_; }
  static uint64_t traps_emulated();

 private:
  const Backend& backend_;
  CoreSync& sync_;
  uint64_t last_batch_syncs_ = 0;
};

// "90 90 90 90 90" for messages.
std::string hex_bytes(const uint8_t* p, size_t n);

}  // namespace ftjit
