// SPDX-License-Identifier: MIT
// The pure part of patching: from what is attached to a site, decide what
// its entry must call and what its ops slot must hold, and which state
// change that is. No machine code, no memory: unit-tested on its own.
#pragma once

#include <cstdint>
#include <span>

#include "ftjit/ftjit.h"

namespace ftjit {

// How a site reaches its ops.
enum class Route : uint8_t {
  kNone,        // nothing attached: the entry holds the disabled NOP
  kGenerated,   // the one ops' own trampoline
  kCallOps,     // shared slot trampoline, slot = the one ops
  kCallOpsMux,  // shared slot trampoline, slot = the site's multiplexer ops
  kList,        // shared list trampoline: walk every list-visible ops
  kDirect,      // the one ops' caller-supplied trampoline
  kInline,      // the one ops' work compiled into the site's own
                // trampoline (backends/backend.h, InlineRequest)
  kInvalid,     // the attached strategies cannot be served at this site
};

const char* route_name(Route route);

// Chooses the route for a site from the (resolved) strategies of the ops
// attached to it, in attach order. `has_slot` = the site has an aligned ops
// slot before its entry.
//
//   attached   strategy            route
//   none       -                   kNone
//   one        auto, generated     kGenerated
//   one        call-ops            kCallOps (kInvalid without a slot)
//   one        list                kList
//   one        direct              kDirect
//   several    all list            kList
//   several    any other mix       kCallOpsMux with a slot, else kList
//
// `single_inline`: the one ops has inline work the engine compiles, which
// turns its generated route into kInline.
Route choose_route(bool has_slot, std::span<const ftjit_strategy> strategies,
                   bool single_inline = false);

// What a site's entry calls (0 = disabled) and what its slot holds (0 =
// whatever it held: the slot is only read by the call-ops trampoline).
// With kViaStub set in `call` (trampolines are aligned: the bit is free),
// an ops hooks the site's return: the entry jumps to the site's stub,
// whose word holds the trampoline (backends/backend.h, encode_stub).
struct SiteTarget {
  static constexpr uint64_t kViaStub = 1;
  uint64_t call = 0;
  uint64_t slot = 0;
  bool operator==(const SiteTarget&) const = default;
  bool via_stub() const { return (call & kViaStub) != 0; }
  uint64_t trampoline() const { return call & ~kViaStub; }
};

// The addresses a route resolves to, for one site.
struct RouteAddresses {
  uint64_t list_trampoline = 0;
  uint64_t call_ops_trampoline = 0;
  uint64_t single_ops = 0;              // the one attached ops
  uint64_t single_generated = 0;        // its generated trampoline
  uint64_t single_direct = 0;           // its direct trampoline
  uint64_t single_inline = 0;           // the site's inline trampoline
  uint64_t mux_ops = 0;                 // the site's multiplexer
  bool via_stub = false;                // an ops hooks the return
  // The ISA's sites reach every trampoline through their stubs, which the
  // trampoline cannot tell from the site's call (riscv64: StubUse::
  // kEverySite): a direct trampoline is then reached through one too.
  bool stubs_transparent = false;
};

SiteTarget target_for(Route route, const RouteAddresses& a);

// The state change from what a site has (applied) to what it should have.
enum class SiteAction : uint8_t {
  kLeave,     // nothing to write
  kEnable,    // nop -> call
  kDisable,   // call -> nop
  kRetarget,  // call -> another call (or jump to the stub, or back)
  kSlotOnly,  // same call, new slot value: one aligned store, no protocol
  kStubOnly,  // jump to the stub either way, which gets a new trampoline:
              // a store into the stub's word (and the slot if it changes)
};

SiteAction decide(const SiteTarget& applied, const SiteTarget& desired);

// Whether the slot must be written before the entry is (the call-ops
// trampoline must never read a stale slot).
inline bool slot_changes(const SiteTarget& applied, const SiteTarget& desired) {
  return desired.slot != 0 && desired.slot != applied.slot;
}

// Whether the site's stub word must be written before the entry is (the
// stub must never jump to a stale trampoline).
inline bool stub_changes(const SiteTarget& applied, const SiteTarget& desired) {
  return desired.via_stub() && desired.call != applied.call;
}

}  // namespace ftjit
