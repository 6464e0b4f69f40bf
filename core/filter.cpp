// SPDX-License-Identifier: MIT
// Filter parsing and matching.
#include "core/filter.h"

#include "core/glob.h"

namespace ftjit {
namespace {

bool has_wildcard(std::string_view s) { return !glob_is_literal(s); }

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
  p.classify();
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

void NamePattern::classify() {
  std::string_view n = name;
  if (n == "*") {
    shape = Shape::kAny;
  } else if (!has_wildcard(n)) {
    shape = Shape::kLiteral;
    fixed = name;
  } else if (n.back() == '*' && !has_wildcard(n.substr(0, n.size() - 1))) {
    shape = Shape::kPrefix;
    fixed = name.substr(0, n.size() - 1);
  } else if (n.front() == '*' && !has_wildcard(n.substr(1))) {
    shape = Shape::kSuffix;
    fixed = name.substr(1);
  } else {
    shape = Shape::kGlob;
  }
}

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
