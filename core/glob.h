// SPDX-License-Identifier: MIT
// Shell-style glob matching over symbol and module names.
#pragma once

#include <string_view>

namespace ftjit {

// True if `text` matches `pattern`: `*` any run, `?` one character,
// `[abc]`, `[a-z]`, `[!a-z]` sets, `\x` a literal x. Unlike fnmatch, `/`
// is not special. A malformed set ("[abc" with no "]") matches literally.
bool glob_match(std::string_view pattern, std::string_view text);

// True if the pattern contains no wildcard, i.e. names one symbol exactly.
bool glob_is_literal(std::string_view pattern);

}  // namespace ftjit
