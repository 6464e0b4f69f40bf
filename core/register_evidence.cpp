// SPDX-License-Identifier: MIT
// The saves decision from compile-unit producers (register_evidence.h).
#include "core/register_evidence.h"

#include <string_view>

namespace ftjit {
namespace {

bool starts_with(std::string_view s, std::string_view prefix) { return s.substr(0, prefix.size()) == prefix; }

// The producer's first words: "GNU C17 12.2.0", "Debian clang version 16.0.6".
std::string compiler_of(std::string_view producer) {
  const size_t dash = producer.find(" -");
  std::string_view name = producer.substr(0, dash);
  if (name.size() > 60) name = name.substr(0, 60);
  return std::string(name);
}

bool has_option(std::string_view producer, std::string_view option) {
  for (size_t at = producer.find(option); at != std::string_view::npos; at = producer.find(option, at + 1)) {
    if (at > 0 && producer[at - 1] == ' ') return true;
  }
  return false;
}

}  // namespace

SavesEvidence saves_evidence(const std::vector<CompileUnitProducer>& units) {
  size_t gcc_units = 0;
  for (const CompileUnitProducer& u : units) {
    const std::string_view p = u.producer;
    if (p.empty()) continue;
    // Hand-written assembly keeps no value across calls it does not make;
    // a unit without code (a sanitizer's preinit array) makes no call. A
    // unit's -fipa-ra reaches only calls inside it (no LTO here: LTO units
    // are "GNU GIMPLE" and read like the others).
    if (starts_with(p, "GNU AS ") || !u.has_code) continue;
    if (!starts_with(p, "GNU ")) {
      return {false, "a compile unit by '" + compiler_of(p) +
                         "', whose options are not recorded (inter-procedural register "
                         "allocation would not show)"};
    }
    if (!has_option(p, "-fpatchable-function-entry=")) {
      return {false, "a compile unit by '" + compiler_of(p) +
                         "' without -fpatchable-function-entry on its command line (the "
                         "attribute alone leaves -fipa-ra on)"};
    }
    ++gcc_units;
  }
  if (gcc_units == 0) {
    return {false, "no DW_AT_producer (no debug info): nothing shows how it was built"};
  }
  return {true, std::to_string(gcc_units) + " compile unit" + (gcc_units == 1 ? "" : "s") +
                    " built by GCC with -fpatchable-function-entry (-fipa-ra off)"};
}

SavesEvidence saves_evidence(const Result<std::vector<CompileUnitProducer>>& units) {
  if (!units) return {false, "its DWARF was not read (" + units.error().message + ")"};
  return saves_evidence(units.value());
}

}  // namespace ftjit
