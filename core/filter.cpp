// SPDX-License-Identifier: MIT
// Filter parsing and matching.
#include "core/filter.h"

#include "core/glob.h"

namespace ftjit {
namespace {

Result<NamePattern> parse_pattern(const std::string& text) {
  NamePattern p;
  size_t bang = text.find('!');
  if (bang == std::string::npos) {
    p.name = text;
  } else {
    p.module = text.substr(0, bang);
    p.name = text.substr(bang + 1);
    if (p.module.empty()) {
      return make_error(FTJIT_E_INVALID_ARGUMENT,
                        "filter pattern '" + text + "' has an empty module before '!'");
    }
  }
  if (p.name.empty()) {
    return make_error(FTJIT_E_INVALID_ARGUMENT,
                      "filter pattern '" + text + "' has an empty name glob");
  }
  return p;
}

std::string join(const std::vector<NamePattern>& ps) {
  std::string out;
  for (const auto& p : ps) {
    if (!out.empty()) out += ", ";
    if (!p.module.empty()) out += p.module + "!";
    out += p.name;
  }
  return out;
}

}  // namespace

Result<Filter> Filter::compile(const std::vector<std::string>& include,
                               const std::vector<std::string>& exclude) {
  Filter f;
  for (const auto& s : include) {
    auto p = parse_pattern(s);
    if (!p) return p.take_error();
    f.include_.push_back(std::move(p.value()));
  }
  for (const auto& s : exclude) {
    auto p = parse_pattern(s);
    if (!p) return p.take_error();
    f.exclude_.push_back(std::move(p.value()));
  }
  return f;
}

bool Filter::match_one(const NamePattern& p, std::string_view module_base,
                       std::string_view name, std::string_view demangled) {
  if (!p.module.empty() && !glob_match(p.module, module_base)) return false;
  if (p.name == "*") return true;
  return glob_match(p.name, name) || (demangled != name && glob_match(p.name, demangled));
}

bool Filter::matches(std::string_view module_base, std::string_view name,
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

std::string Filter::describe() const {
  std::string out = "include: " + (include_.empty() ? std::string("*") : join(include_));
  if (!exclude_.empty()) out += "; exclude: " + join(exclude_);
  return out;
}

std::string_view path_basename(std::string_view path) {
  size_t slash = path.rfind('/');
  return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

}  // namespace ftjit
