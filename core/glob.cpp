// SPDX-License-Identifier: MIT
// Glob matching with one-star backtracking: linear in practice, no recursion.
#include "core/glob.h"

#include <cstddef>

namespace ftjit {
namespace {

// Matches a `[...]` set starting at pattern[p] (the '[') against c. Returns
// the index just past the set, or npos if the set is unterminated.
size_t match_set(std::string_view pattern, size_t p, char c, bool* matched) {
  size_t i = p + 1;
  bool negate = false;
  if (i < pattern.size() && (pattern[i] == '!' || pattern[i] == '^')) {
    negate = true;
    ++i;
  }
  bool hit = false;
  bool first = true;
  while (i < pattern.size() && (first || pattern[i] != ']')) {
    first = false;
    char lo = pattern[i];
    if (lo == '\\' && i + 1 < pattern.size()) lo = pattern[++i];
    char hi = lo;
    if (i + 2 < pattern.size() && pattern[i + 1] == '-' && pattern[i + 2] != ']') {
      hi = pattern[i + 2];
      if (hi == '\\' && i + 3 < pattern.size()) { hi = pattern[i + 3]; ++i; }
      i += 2;
    }
    if (static_cast<unsigned char>(lo) <= static_cast<unsigned char>(c) &&
        static_cast<unsigned char>(c) <= static_cast<unsigned char>(hi)) {
      hit = true;
    }
    ++i;
  }
  if (i >= pattern.size()) return std::string_view::npos;
  *matched = hit != negate;
  return i + 1;
}

}  // namespace

bool glob_match(std::string_view pattern, std::string_view text) {
  size_t p = 0, t = 0;
  // Where to resume after the last '*': the pattern index after it and the
  // text index it has consumed up to. One star of backtracking suffices
  // because a later star subsumes every earlier choice.
  size_t star_p = std::string_view::npos, star_t = 0;
  while (t < text.size()) {
    if (p < pattern.size()) {
      char pc = pattern[p];
      if (pc == '*') {
        star_p = ++p;
        star_t = t;
        continue;
      }
      if (pc == '?') {
        ++p; ++t;
        continue;
      }
      if (pc == '[') {
        bool matched = false;
        size_t next = match_set(pattern, p, text[t], &matched);
        if (next != std::string_view::npos) {
          if (matched) { p = next; ++t; continue; }
        } else if (text[t] == '[') {
          ++p; ++t;
          continue;
        }
      } else {
        if (pc == '\\' && p + 1 < pattern.size()) pc = pattern[p + 1];
        if (pc == text[t]) {
          p += (pattern[p] == '\\' && p + 1 < pattern.size()) ? 2 : 1;
          ++t;
          continue;
        }
      }
    }
    if (star_p == std::string_view::npos) return false;
    p = star_p;
    t = ++star_t;
  }
  while (p < pattern.size() && pattern[p] == '*') ++p;
  return p == pattern.size();
}

bool glob_is_literal(std::string_view pattern) {
  return pattern.find_first_of("*?[\\") == std::string_view::npos;
}

}  // namespace ftjit
