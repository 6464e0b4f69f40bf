// SPDX-License-Identifier: MIT
// demangle: wraps abi::__cxa_demangle, which only the C++ runtime implements.
#include "core/demangle.h"

#include <cxxabi.h>

#include <cstdlib>
#include <memory>

namespace ftjit {

std::string demangle(std::string_view mangled) {
  // __cxa_demangle also accepts bare type encodings ("f" is "float"), so
  // only names that carry the function-name prefix are handed to it.
  if (!mangled.starts_with("_Z")) return std::string(mangled);

  // Versioned symbols ("_Z3fooi@@V1") are not valid mangled names as a
  // whole: demangle the name and keep the version as it is.
  const size_t at = mangled.find('@');
  const std::string name(mangled.substr(0, at));
  int status = 0;
  std::unique_ptr<char, decltype(&std::free)> out(
      abi::__cxa_demangle(name.c_str(), nullptr, nullptr, &status), &std::free);
  if (status != 0 || out == nullptr) return std::string(mangled);
  std::string result(out.get());
  if (at != std::string_view::npos) result += mangled.substr(at);
  return result;
}

}  // namespace ftjit
