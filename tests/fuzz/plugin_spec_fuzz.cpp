// SPDX-License-Identifier: MIT
// libFuzzer target for what users type after --plugin: the spec parser
// ("NAME:key=value,...", paths, escapes) and the typed option values. Any
// input must give a value or an error, never a crash, and what parses must
// hold up: a name, keys that are not empty and not repeated.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <set>
#include <string>
#include <string_view>

#include "runtime/plugin_host/host_internal.h"
#include "runtime/plugin_host/plugin_host.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
  auto spec = ftjit::plugins::parse_plugin_spec(text);
  if (spec.ok()) {
    if (spec->name.empty()) abort();
    std::set<std::string> keys;
    for (const auto& [key, value] : spec->options) {
      if (key.empty() || !keys.insert(key).second) abort();
    }
  }
  static const ftjit_option_type kTypes[] = {FTJIT_OPTION_BOOL, FTJIT_OPTION_INT,
                                             FTJIT_OPTION_DOUBLE, FTJIT_OPTION_STRING};
  auto value = ftjit::plugins::detail::parse_option_value(kTypes[data[0] % 4], text);
  if (value.ok() && value->type != kTypes[data[0] % 4]) abort();
  return 0;
}
