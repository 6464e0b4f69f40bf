// SPDX-License-Identifier: MIT
// Plugin specs ("count:top=10") and typed option values.
#include <cctype>
#include <charconv>
#include <cmath>
#include <string>

#include "runtime/plugin_host/host_internal.h"

namespace ftjit::plugins {

using detail::OptionValue;

namespace {

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

Error spec_error(std::string_view text, const std::string& why) {
  return make_error(FTJIT_E_INVALID_ARGUMENT,
                    "bad plugin spec '" + std::string(text) + "': " + why);
}

// Splits the options part at unescaped commas, undoing "\," and "\\".
Result<std::vector<std::string>> split_items(std::string_view text, std::string_view opts) {
  std::vector<std::string> items(1);
  for (size_t i = 0; i < opts.size(); ++i) {
    char c = opts[i];
    if (c == '\\') {
      if (i + 1 == opts.size() || (opts[i + 1] != ',' && opts[i + 1] != '\\')) {
        return spec_error(text, "'\\' must be followed by ',' or '\\'");
      }
      items.back() += opts[++i];
    } else if (c == ',') {
      items.emplace_back();
    } else {
      items.back() += c;
    }
  }
  return items;
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

}  // namespace

const char* buffer_policy_name(BufferPolicy policy) {
  switch (policy) {
    case BufferPolicy::kDrop: return "drop";
    case BufferPolicy::kOverwrite: return "overwrite";
    case BufferPolicy::kBlock: return "block";
  }
  return "?";
}

Result<BufferPolicy> parse_buffer_policy(std::string_view name) {
  for (BufferPolicy p : {BufferPolicy::kDrop, BufferPolicy::kOverwrite, BufferPolicy::kBlock}) {
    if (name == buffer_policy_name(p)) return p;
  }
  return make_error(FTJIT_E_INVALID_ARGUMENT,
                    "unknown buffer policy '" + std::string(name) +
                        "': use drop (a full buffer drops new events), overwrite (keeps the "
                        "last events of each thread) or block (threads wait for the writer)");
}

bool PluginSpec::is_path() const {
  return name.find('/') != std::string::npos || ends_with(name, ".so");
}

Result<PluginSpec> parse_plugin_spec(std::string_view text) {
  // Values may hold paths and ':' ("trace:file=/a:b"), so a built-in name
  // ends at the first ':'. A path ends at the first ".so:", which lets its
  // directories contain ':'; without one, at the first ':'.
  size_t colon = text.find(':');
  PluginSpec spec;
  spec.name = std::string(text.substr(0, colon));
  if (spec.is_path()) {
    if (size_t so = text.find(".so:"); so != std::string_view::npos) {
      colon = so + 3;
      spec.name = std::string(text.substr(0, colon));
    }
  }
  if (spec.name.empty()) return spec_error(text, "no plugin name");
  if (!spec.is_path() && !detail::valid_name(spec.name)) {
    return spec_error(text, "'" + spec.name +
                                "' is neither a plugin name ([a-z0-9_-]+) nor a path "
                                "(with '/' or ending in .so)");
  }
  if (colon == std::string_view::npos) return spec;

  std::string_view opts = text.substr(colon + 1);
  if (opts.empty()) return spec_error(text, "nothing after ':'");
  auto items = split_items(text, opts);
  if (!items) return items.take_error();
  for (const std::string& item : *items) {
    if (item.empty()) return spec_error(text, "empty option (two commas?)");
    size_t eq = item.find('=');
    if (eq == std::string::npos) {
      return spec_error(text, "option '" + item + "' has no '=value'");
    }
    std::string key = item.substr(0, eq);
    if (key.empty()) return spec_error(text, "option '" + item + "' has no name");
    std::string value = item.substr(eq + 1);
    std::string* host = key == "format" ? &spec.format : key == "output" ? &spec.output : nullptr;
    if (host != nullptr) {
      if (!host->empty()) return spec_error(text, "'" + key + "' given twice");
      if (value.empty()) {
        return spec_error(text, "'" + key + "=' needs a value (" +
                                    (key == "format" ? "a format of the plugin" : "a file") + ")");
      }
      *host = std::move(value);
      continue;
    }
    for (const auto& [k, v] : spec.options) {
      if (k == key) return spec_error(text, "option '" + key + "' given twice");
    }
    spec.options.emplace_back(std::move(key), std::move(value));
  }
  return spec;
}

const char* option_type_name(ftjit_option_type type) {
  switch (type) {
    case FTJIT_OPTION_BOOL: return "bool";
    case FTJIT_OPTION_INT: return "int";
    case FTJIT_OPTION_DOUBLE: return "double";
    case FTJIT_OPTION_STRING: return "string";
  }
  return "?";
}

namespace detail {

bool valid_name(std::string_view name) {
  if (name.empty() || name.size() > 64) return false;
  for (char c : name) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
    if (!ok) return false;
  }
  return true;
}

const char* option_type_wanted(ftjit_option_type type) {
  switch (type) {
    case FTJIT_OPTION_BOOL: return "a boolean (true/false, yes/no, on/off, 1/0)";
    case FTJIT_OPTION_INT: return "an integer";
    case FTJIT_OPTION_DOUBLE: return "a number";
    case FTJIT_OPTION_STRING: return "a string";
  }
  return "a value of an unknown type";
}

Result<OptionValue> parse_option_value(ftjit_option_type type, std::string_view text) {
  OptionValue v;
  v.type = type;
  auto wrong = [&] {
    return make_error(FTJIT_E_INVALID_ARGUMENT, std::string("wants ") + option_type_wanted(type) +
                                                    ", got '" + std::string(text) + "'");
  };
  switch (type) {
    case FTJIT_OPTION_BOOL: {
      std::string t = lower(text);
      if (t == "true" || t == "yes" || t == "on" || t == "1") {
        v.b = true;
      } else if (t == "false" || t == "no" || t == "off" || t == "0") {
        v.b = false;
      } else {
        return wrong();
      }
      return v;
    }
    case FTJIT_OPTION_INT: {
      // Decimal or 0x only: strtoll's base 0 would read "010" as octal.
      std::string_view digits = text;
      bool negative = !digits.empty() && digits[0] == '-';
      if (negative || (!digits.empty() && digits[0] == '+')) digits.remove_prefix(1);
      int base = 10;
      if (digits.size() > 2 && digits[0] == '0' && (digits[1] == 'x' || digits[1] == 'X')) {
        base = 16;
        digits.remove_prefix(2);
      }
      if (digits.empty() || digits[0] == '-' || digits[0] == '+') return wrong();
      uint64_t magnitude = 0;
      auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), magnitude, base);
      if (ec != std::errc() || end != digits.data() + digits.size()) return wrong();
      constexpr uint64_t kMaxPos = static_cast<uint64_t>(INT64_MAX);
      if (magnitude > kMaxPos + (negative ? 1 : 0)) return wrong();
      v.i = negative ? static_cast<int64_t>(0 - magnitude) : static_cast<int64_t>(magnitude);
      return v;
    }
    case FTJIT_OPTION_DOUBLE: {
      std::string_view t = text;
      if (!t.empty() && t[0] == '+') t.remove_prefix(1);
      auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), v.d);
      if (t.empty() || ec != std::errc() || end != t.data() + t.size() || !std::isfinite(v.d)) {
        return wrong();
      }
      return v;
    }
    case FTJIT_OPTION_STRING:
      v.s = std::string(text);
      return v;
  }
  return wrong();
}

}  // namespace detail
}  // namespace ftjit::plugins
