// SPDX-License-Identifier: MIT
// A compiled site filter: include and exclude globs, each optionally scoped
// to a module ("libfoo.so!bar_*").
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "core/glob.h"

namespace ftjit {

struct NamePattern {
  std::string module;  // glob over the module's basename; empty = any
  std::string name;    // glob over the mangled or the demangled name
  // The shape of `name`, so that the common cases ("*", "exact",
  // "prefix*", "*suffix") cost a compare, not a glob walk, per site.
  enum class Shape : uint8_t { kAny, kLiteral, kPrefix, kSuffix, kGlob };
  Shape shape = Shape::kGlob;
  std::string fixed;   // the literal part for kLiteral/kPrefix/kSuffix

  // Classifies `name`; called by Filter::compile.
  void classify();
  bool name_matches(std::string_view text) const;
};

class Filter {
 public:
  // Parses "GLOB" and "MODULE!GLOB" patterns. An empty pattern is an error.
  static Result<Filter> compile(const std::vector<std::string>& include,
                                const std::vector<std::string>& exclude);

  // True if the site passes: some include matches (or there are none) and
  // no exclude matches.
  bool matches(std::string_view module_base, std::string_view name,
               std::string_view demangled) const;

  const std::vector<NamePattern>& includes() const { return include_; }
  const std::vector<NamePattern>& excludes() const { return exclude_; }

  // "include: a, b; exclude: c" for messages.
  std::string describe() const;

 private:
  static bool match_one(const NamePattern& p, std::string_view module_base,
                        std::string_view name, std::string_view demangled);
  std::vector<NamePattern> include_;
  std::vector<NamePattern> exclude_;
};

// Inline: a selection calls these once per site of a module (a million
// times), and out of line the third string_view goes through the stack,
// where a 16-byte reload of two 8-byte stores cannot be forwarded. Inlined,
// selecting 1M sites of bench_sites_1m.so took 9-11 ms instead of 14.
inline bool NamePattern::name_matches(std::string_view text) const {
  switch (shape) {
    case Shape::kAny: return true;
    case Shape::kLiteral: return text == fixed;
    case Shape::kPrefix: return text.starts_with(fixed);
    case Shape::kSuffix: return text.ends_with(fixed);
    case Shape::kGlob: break;
  }
  return glob_match(name, text);
}

inline bool Filter::match_one(const NamePattern& p, std::string_view module_base,
                              std::string_view name, std::string_view demangled) {
  if (!p.module.empty() && !glob_match(p.module, module_base)) return false;
  if (p.name_matches(name)) return true;
  // C names demangle to themselves: skip the second test when it is the
  // same text (same storage, or equal).
  return !demangled.empty() && demangled.data() != name.data() && demangled != name &&
         p.name_matches(demangled);
}

inline bool Filter::matches(std::string_view module_base, std::string_view name,
                            std::string_view demangled) const {
  bool in = include_.empty();
  for (const auto& p : include_) {
    if (match_one(p, module_base, name, demangled)) {
      in = true;
      break;
    }
  }
  if (!in) return false;
  for (const auto& p : exclude_) {
    if (match_one(p, module_base, name, demangled)) return false;
  }
  return true;
}

// The file name part of a path ("/usr/lib/libc.so.6" -> "libc.so.6").
std::string_view path_basename(std::string_view path);

}  // namespace ftjit
