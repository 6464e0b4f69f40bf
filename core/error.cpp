// SPDX-License-Identifier: MIT
// make_error: the single construction point of ftjit::Error.
#include "core/error.h"

#include <cstdio>

namespace ftjit {

Error make_error(ftjit_status code, std::string message) {
  return Error{code, std::move(message)};
}

std::string format_hex(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "%#llx", static_cast<unsigned long long>(v));
  return buf;
}

}  // namespace ftjit
