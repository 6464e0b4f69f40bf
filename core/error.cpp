// SPDX-License-Identifier: MIT
// make_error: the single construction point of ftjit::Error.
#include "core/error.h"

namespace ftjit {

Error make_error(ftjit_status code, std::string message) {
  return Error{code, std::move(message)};
}

}  // namespace ftjit
