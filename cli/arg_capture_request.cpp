// SPDX-License-Identifier: MIT
#include "cli/arg_capture_request.h"

#include <algorithm>
#include <charconv>
#include <map>
#include <optional>

#include "backends/calling_convention.h"
#include "cli/process_modules.h"
#if FTJIT_HAVE_LIBDW
#include "core/dwarf_signatures.h"
#endif
#include "core/filter.h"
#include "core/glob.h"

namespace ftjit::cli {
namespace {

#if !FTJIT_HAVE_LIBDW
struct DebugInfo {
  std::vector<FunctionSignature> functions;
};
#endif

std::string trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return std::string(s);
}

std::string base_name(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// The most sled bytes that follow a function's symbol (riscv64 =8,4:
// four c.nop; arm64 =4,2: two nop; x86-64 =13,8: five bytes).
constexpr uint64_t kSledAfterSymbol = 16;

// Integer argument registers each ISA's psABI has: without DWARF, that
// many raw words are shown.
uint16_t raw_register_count(Isa isa) { return isa == Isa::kX86_64 ? 6 : 8; }

// A module without DWARF: its functions' integer argument registers and
// integer return register, shown as they are.
CapturedFunction raw_function(uint64_t ip, const std::string& name, Isa isa) {
  CapturedFunction f;
  f.ip = ip;
  f.signature.name = name;
  ValueType word;
  word.kind = ValueKind::kPointer;
  word.size = 8;
  word.name = "register";
  for (uint16_t i = 0; i < raw_register_count(isa); ++i) {
    f.signature.params.push_back({"arg" + std::to_string(i + 1), word, false});
    ArgPlace place;
    place.pieces.push_back({ArgSource::kIntReg, i, 8, 0});
    f.placed.params.push_back(place);
  }
  f.signature.ret = word;
  ArgPlace ret;
  ret.pieces.push_back({ArgSource::kRetInt, 0, 8, 0});
  f.placed.ret = ret;
  return f;
}

std::string param_list(const FunctionSignature& sig) {
  std::string out;
  for (const Param& p : sig.params) {
    if (!out.empty()) out += ", ";
    out += p.type.name + " " + p.name;
  }
  return out.empty() ? "none" : out;
}

// Whether parameter `p` of `function` can be --by-arg's key: an error for a
// type whose values are not grouped; false (with a note) when it cannot be
// read at entry, the function then being one group.
Result<bool> by_arg_key_ok(const std::string& name, const std::string& function, const Param& p,
                           const ArgPlace& place, std::vector<std::string>* notes) {
  const std::string what = "--by-arg " + name + ": " + name + " of " + function + " is " +
                           (p.type.name.empty() ? std::string("of an unknown type") : "a " + p.type.name);
  switch (p.type.kind) {
    case ValueKind::kSigned: case ValueKind::kUnsigned: case ValueKind::kBool: case ValueKind::kChar:
    case ValueKind::kEnum: case ValueKind::kPointer: case ValueKind::kString:
      break;
    case ValueKind::kFloat:
      return make_error(FTJIT_E_INVALID_ARGUMENT, what + ": floating-point values are not grouped (integers, "
                                                         "bools, chars, enums, pointers and strings are; "
                                                         "--exclude the function to group the others)");
    case ValueKind::kStruct:
      return make_error(FTJIT_E_INVALID_ARGUMENT, what + ": structs are not grouped (integers, bools, chars, "
                                                         "enums, pointers and strings are; --exclude the "
                                                         "function to group the others)");
    default:
      return make_error(FTJIT_E_INVALID_ARGUMENT, what + ": its values are not shown, so not grouped "
                                                         "(--exclude the function to group the others)");
  }
  if (place.unavailable || place.by_reference || place.pieces.size() != 1 || p.type.size > 8) {
    if (notes != nullptr) {
      notes->push_back("--by-arg " + name + ": " + name + " of " + function + " cannot be read at entry (" +
                       (place.why.empty() ? std::string("not in one register or stack slot") : place.why) +
                       "): its calls are one group");
    }
    return false;
  }
  return true;
}

// VALUE of a term, for parameter `p` of kind `kind`: the number or text
// the condition compares with.
Status condition_value(const WhenTerm& term, const Param& p, ArgCondition* c) {
  const std::string& v = term.value;
  const std::string what = "--when: " + p.name + " (" + p.type.name + ")";
  const ValueKind kind = p.type.kind;
  if (kind == ValueKind::kString) {
    if (v.size() < 2 || v.front() != '"' || v.back() != '"') {
      return make_error(FTJIT_E_INVALID_ARGUMENT, what + " is a string: compare it with \"text\"");
    }
    if (term.op != ConditionOp::kEq && term.op != ConditionOp::kNe && term.op != ConditionOp::kPrefix) {
      return make_error(FTJIT_E_INVALID_ARGUMENT, what + " is a string: use ==, != or ^= (starts with)");
    }
    c->text = v.substr(1, v.size() - 2);
    return {};
  }
  if (term.op == ConditionOp::kPrefix) {
    return make_error(FTJIT_E_INVALID_ARGUMENT, what + ": ^= compares strings only");
  }
  switch (kind) {
    case ValueKind::kSigned:
    case ValueKind::kUnsigned:
    case ValueKind::kPointer:
    case ValueKind::kBool:
    case ValueKind::kChar:
    case ValueKind::kEnum:
      break;
    default:
      return make_error(FTJIT_E_INVALID_ARGUMENT,
                        what + ": --when compares integers, enums, bools, chars, pointers and strings");
  }
  if (kind == ValueKind::kBool && (v == "true" || v == "false")) {
    c->number = v == "true";
    return {};
  }
  if (kind == ValueKind::kChar && v.size() == 3 && v.front() == '\'' && v.back() == '\'') {
    c->number = static_cast<unsigned char>(v[1]);
    if (p.type.is_signed) c->number = static_cast<signed char>(v[1]);
    return {};
  }
  if (kind == ValueKind::kEnum) {
    for (const Enumerator& e : p.type.enumerators) {
      if (e.name == v) {
        c->number = e.value;
        return {};
      }
    }
  }
  // An integer: decimal, 0x hex, maybe negative.
  std::string_view text = v;
  bool negative = false;
  if (!text.empty() && text.front() == '-') {
    negative = true;
    text.remove_prefix(1);
  }
  int base = 10;
  if (text.size() > 2 && text[0] == '0' && (text[1] == 'x' || text[1] == 'X')) {
    base = 16;
    text.remove_prefix(2);
  }
  uint64_t magnitude = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), magnitude, base);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size()) {
    std::string hint;
    if (kind == ValueKind::kEnum) {
      hint = " (its enumerators:";
      for (const Enumerator& e : p.type.enumerators) hint += " " + e.name;
      hint += ")";
    }
    return make_error(FTJIT_E_INVALID_ARGUMENT, what + ": '" + v + "' is not a value of it" + hint);
  }
  c->number = negative ? -static_cast<int64_t>(magnitude) : static_cast<int64_t>(magnitude);
  return {};
}

}  // namespace

Result<WhenClause> parse_when(const std::string& text) {
  const size_t colon = text.find(':');
  if (colon == std::string::npos) {
    return make_error(FTJIT_E_INVALID_ARGUMENT,
                      "--when '" + text + "': expected FUNCTION: PARAM OP VALUE (e.g. 'db_get: key_len > 100')");
  }
  WhenClause clause;
  clause.function = trim(std::string_view(text).substr(0, colon));
  if (clause.function.empty()) {
    return make_error(FTJIT_E_INVALID_ARGUMENT, "--when '" + text + "': no function before ':'");
  }
  std::string_view rest = std::string_view(text).substr(colon + 1);
  static const std::pair<const char*, ConditionOp> kOps[] = {
      {"==", ConditionOp::kEq}, {"!=", ConditionOp::kNe}, {"<=", ConditionOp::kLe}, {">=", ConditionOp::kGe},
      {"^=", ConditionOp::kPrefix}, {"<", ConditionOp::kLt}, {">", ConditionOp::kGt}};
  while (true) {
    const size_t and_at = rest.find("&&");
    const std::string term_text = trim(rest.substr(0, and_at));
    // The operator: the first of them in the term (two-character ones first).
    size_t at = std::string::npos;
    const std::pair<const char*, ConditionOp>* found = nullptr;
    for (const auto& op : kOps) {
      const size_t p = term_text.find(op.first);
      if (p != std::string::npos && (at == std::string::npos || p < at)) {
        at = p;
        found = &op;
      }
    }
    if (found == nullptr) {
      return make_error(FTJIT_E_INVALID_ARGUMENT, "--when '" + text + "': '" + term_text +
                                                      "' has no operator (== != < <= > >= ^=)");
    }
    WhenTerm term;
    term.param = trim(std::string_view(term_text).substr(0, at));
    term.op = found->second;
    term.value = trim(std::string_view(term_text).substr(at + std::char_traits<char>::length(found->first)));
    if (term.param.empty() || term.value.empty()) {
      return make_error(FTJIT_E_INVALID_ARGUMENT, "--when '" + text + "': '" + term_text +
                                                      "' wants PARAM OP VALUE");
    }
    clause.terms.push_back(std::move(term));
    if (and_at == std::string_view::npos) break;
    rest = rest.substr(and_at + 2);
  }
  return clause;
}

Result<ArgCaptureSpec> build_arg_capture(pid_t pid, const ArgOptions& options,
                                         const std::vector<std::string>& include,
                                         const std::vector<std::string>& exclude,
                                         std::vector<std::string>* notes) {
  ArgCaptureSpec spec;
  spec.string_max = std::min<uint32_t>(options.string_max, kMaxStringCapture);
  if (!options.any()) return spec;
  auto filter = Filter::compile(include, exclude);
  if (!filter) return filter.take_error();
  std::optional<Filter> args_filter;
  if (!options.globs.empty()) {
    auto f = Filter::compile(options.globs, {});
    if (!f) return f.take_error();
    args_filter = std::move(f.value());
  }
  std::vector<WhenClause> clauses;
  for (const std::string& w : options.when) {
    auto clause = parse_when(w);
    if (!clause) return clause.take_error();
    clauses.push_back(std::move(clause.value()));
  }
  auto modules = process_modules(pid, /*guest_code=*/true);
  if (!modules) return modules.take_error();
  const std::string root = "/proc/" + std::to_string(pid) + "/root";
  // Names matched by --when, for its errors.
  std::vector<bool> clause_matched(clauses.size(), false);
  // --by-arg: the functions that have it, and every parameter seen, for
  // the error when none has.
  spec.by_arg = options.by_arg;
  size_t by_arg_functions = 0;
  std::vector<std::string> seen_params;
  for (const ProcessModule& m : *modules) {
    const DiscoveredModule& found = m.found;
    if (found.sites.empty()) continue;
    const std::string base = base_name(m.path);
    std::vector<const DiscoveredSite*> selected;
    for (const DiscoveredSite& site : found.sites) {
      if (!filter->matches(base, site.name, site.shown_name())) continue;
      if (args_filter && !args_filter->matches(base, site.name, site.shown_name())) continue;
      selected.push_back(&site);
    }
    if (selected.empty()) continue;
#if FTJIT_HAVE_LIBDW
    auto info = read_debug_info(root + m.path, root);
#else
    Result<DebugInfo> info =
        make_error(FTJIT_E_UNSUPPORTED, "this ftjit was built without libdw: no DWARF is read");
#endif
    std::map<uint64_t, const FunctionSignature*> by_entry;
    if (info) {
      for (const FunctionSignature& f : info->functions) by_entry.emplace(f.entry, &f);
    } else if (notes != nullptr) {
      notes->push_back(base + ": " + info.error().message + "; its functions show raw registers");
    }
    const uint64_t bias = found.load_bias;
    for (const DiscoveredSite* site : selected) {
      // GCC's DW_AT_low_pc of a function with a sled is the symbol, or
      // the first instruction after the sled's NOPs that follow it (arm64
      // and riscv64 with -fpatchable-function-entry=N,M): the first
      // function at or just after the symbol, before the next site's.
      const uint64_t symbol = (site->symbol() != 0 ? site->symbol() : site->entry) - bias;
      auto it = by_entry.lower_bound(symbol);
      const DiscoveredSite* next = site + 1 != found.sites.data() + found.sites.size() ? site + 1 : nullptr;
      if (it != by_entry.end() &&
          (it->first - symbol > kSledAfterSymbol || (next != nullptr && it->first + bias >= next->entry))) {
        it = by_entry.end();
      }
      CapturedFunction f;
      if (it != by_entry.end()) {
        f.ip = site->entry;
        f.signature = *it->second;
        f.placed = place_arguments(found.isa, f.signature);
      } else if (!info) {
        f = raw_function(site->entry, std::string(site->name), found.isa);
      } else {
        continue;  // DWARF without this function (assembly, say): nothing to show
      }
      if (!options.by_arg.empty()) {
        const auto& params = f.signature.params;
        for (size_t i = 0; i < params.size(); ++i) {
          const std::string name = !params[i].name.empty() ? params[i].name : "arg" + std::to_string(i + 1);
          if (name != options.by_arg) {
            const std::string shown = params[i].type.name + " " + name;
            if (std::find(seen_params.begin(), seen_params.end(), shown) == seen_params.end()) {
              seen_params.push_back(shown);
            }
            continue;
          }
          const ArgPlace place = i < f.placed.params.size() ? f.placed.params[i] : ArgPlace{};
          if (auto st = by_arg_key_ok(options.by_arg, std::string(site->shown_name()), params[i], place, notes); !st) {
            return st.take_error();
          } else if (*st) {
            ++by_arg_functions;
          }
          break;
        }
      }
      f.args = options.args || !options.globs.empty() || !options.when.empty();
      f.retval = options.retval || options.args;
      for (size_t k = 0; k < clauses.size(); ++k) {
        if (!glob_match(clauses[k].function, site->shown_name()) && !glob_match(clauses[k].function, site->name)) {
          continue;
        }
        clause_matched[k] = true;
        if (it == by_entry.end()) {
          return make_error(FTJIT_E_INVALID_ARGUMENT, "--when '" + options.when[k] + "': " + std::string(site->name) +
                                                          " has no DWARF in " + base + ": its parameters are not known");
        }
        f.args = true;
        for (const WhenTerm& term : clauses[k].terms) {
          const auto& params = f.signature.params;
          auto p = std::find_if(params.begin(), params.end(), [&](const Param& q) { return q.name == term.param; });
          if (p == params.end()) {
            return make_error(FTJIT_E_INVALID_ARGUMENT, "--when '" + options.when[k] + "': " + std::string(site->shown_name()) +
                                                            " has no parameter '" + term.param +
                                                            "'; its parameters: " + param_list(f.signature));
          }
          const size_t index = static_cast<size_t>(p - params.begin());
          if (f.placed.params[index].unavailable) {
            return make_error(FTJIT_E_INVALID_ARGUMENT, "--when '" + options.when[k] + "': " + term.param + " of " +
                                                            std::string(site->shown_name()) + " cannot be read at entry (" +
                                                            f.placed.params[index].why + ")");
          }
          ArgCondition c;
          c.ip = f.ip;
          c.param = static_cast<uint32_t>(index);
          c.op = term.op;
          if (auto st = condition_value(term, *p, &c); !st) return st.take_error();
          spec.conditions.push_back(std::move(c));
        }
      }
      spec.functions.push_back(std::move(f));
    }
  }
  if (!options.by_arg.empty() && by_arg_functions == 0) {
    std::string listed;
    constexpr size_t kListed = 60;
    for (size_t i = 0; i < seen_params.size() && i < kListed; ++i) listed += (i == 0 ? "" : ", ") + seen_params[i];
    if (seen_params.size() > kListed) listed += ", and " + std::to_string(seen_params.size() - kListed) + " more";
    return make_error(FTJIT_E_INVALID_ARGUMENT,
                      "--by-arg " + options.by_arg + ": no traced function has a parameter '" + options.by_arg +
                          "'" + (spec.functions.empty() ? std::string(" (no traced function has DWARF)")
                                                        : "; their parameters: " +
                                                              (listed.empty() ? std::string("none") : listed)));
  }
  for (size_t k = 0; k < clauses.size(); ++k) {
    if (!clause_matched[k]) {
      return make_error(FTJIT_E_INVALID_ARGUMENT, "--when '" + options.when[k] + "': no traced function matches '" +
                                                      clauses[k].function + "'");
    }
  }
  return spec;
}

}  // namespace ftjit::cli
