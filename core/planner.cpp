// SPDX-License-Identifier: MIT
// Route choice and state-change decisions for sites.
#include "core/planner.h"

namespace ftjit {

const char* route_name(Route route) {
  switch (route) {
    case Route::kNone: return "none";
    case Route::kGenerated: return "generated";
    case Route::kCallOps: return "call-ops";
    case Route::kCallOpsMux: return "call-ops-mux";
    case Route::kList: return "list";
    case Route::kDirect: return "direct";
    case Route::kInline: return "inline";
    case Route::kInvalid: return "invalid";
  }
  return "?";
}

Route choose_route(bool has_slot, std::span<const ftjit_strategy> strategies,
                   bool single_inline) {
  if (strategies.empty()) return Route::kNone;
  if (strategies.size() == 1) {
    switch (strategies[0]) {
      case FTJIT_STRATEGY_AUTO:
      case FTJIT_STRATEGY_GENERATED: return single_inline ? Route::kInline : Route::kGenerated;
      case FTJIT_STRATEGY_CALL_OPS: return has_slot ? Route::kCallOps : Route::kInvalid;
      case FTJIT_STRATEGY_LIST: return Route::kList;
      case FTJIT_STRATEGY_DIRECT: return Route::kDirect;
    }
    return Route::kInvalid;
  }
  bool all_list = true;
  for (ftjit_strategy s : strategies) all_list &= s == FTJIT_STRATEGY_LIST;
  if (all_list) return Route::kList;
  return has_slot ? Route::kCallOpsMux : Route::kList;
}

SiteTarget target_for(Route route, const RouteAddresses& a) {
  // A direct trampoline is the caller's: entered as by the site's call
  // only (through a stub only where stubs are transparent).
  const uint64_t stub = a.via_stub ? SiteTarget::kViaStub : 0;
  const uint64_t direct_stub = a.stubs_transparent ? stub : 0;
  switch (route) {
    case Route::kNone:
    case Route::kInvalid: return {};
    case Route::kGenerated: return {a.single_generated | stub, 0};
    case Route::kCallOps: return {a.call_ops_trampoline | stub, a.single_ops};
    case Route::kCallOpsMux: return {a.call_ops_trampoline | stub, a.mux_ops};
    case Route::kList: return {a.list_trampoline | stub, 0};
    case Route::kDirect: return {a.single_direct | direct_stub, 0};
    case Route::kInline: return {a.single_inline | stub, 0};
  }
  return {};
}

SiteAction decide(const SiteTarget& applied, const SiteTarget& desired) {
  if (desired.call == 0) return applied.call == 0 ? SiteAction::kLeave : SiteAction::kDisable;
  if (applied.call == 0) return SiteAction::kEnable;
  if (applied.call != desired.call) {
    return applied.via_stub() && desired.via_stub() ? SiteAction::kStubOnly
                                                    : SiteAction::kRetarget;
  }
  return slot_changes(applied, desired) ? SiteAction::kSlotOnly : SiteAction::kLeave;
}

}  // namespace ftjit
