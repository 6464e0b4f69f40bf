// SPDX-License-Identifier: MIT
// demangle: C++ symbol names for people, through the C++ ABI's demangler.
#pragma once

#include <string>
#include <string_view>

namespace ftjit {

// Returns the demangled form of an Itanium C++ ABI name ("_Z...").
// A symbol version suffix ("@VERS" / "@@VERS") is kept after the demangled
// name. Returns the input unchanged if it is not a mangled name or the
// demangler rejects it; never fails.
std::string demangle(std::string_view mangled);

}  // namespace ftjit
