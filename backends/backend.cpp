// SPDX-License-Identifier: MIT
// The defaults of the backend seam (backend.h).
#include "backends/backend.h"

#include <string>

namespace ftjit {

Result<SiteCode> TrampolineEmitter::emit_site_code(uint64_t, uint64_t) const {
  return make_error(FTJIT_E_UNSUPPORTED, "this ISA's sites are encoded without an emitter");
}

Status inline_action_compiled(const InlineRequest& request, std::initializer_list<InlineAction> compiled,
                              const char* isa) {
  for (InlineAction a : compiled) {
    if (a == request.action) return {};
  }
  return make_error(FTJIT_E_UNSUPPORTED,
                    std::string(isa) + " compiles no inline action " + std::to_string(static_cast<int>(request.action)));
}

Result<std::vector<uint8_t>> TrampolineEmitter::emit_inline_template(const InlineRequest&) const {
  return make_error(FTJIT_E_UNSUPPORTED, "this ISA's code generator compiles no inline work");
}

}  // namespace ftjit
