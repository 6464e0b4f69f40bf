// SPDX-License-Identifier: MIT
// Strict readers for what the plugins write: a JSON parser and a protobuf
// wire-format decoder. Written for the tests, so that a check fails on any
// byte a real reader would reject.
#ifndef FTJIT_TESTS_PLUGINS_WIRE_READERS_H
#define FTJIT_TESTS_PLUGINS_WIRE_READERS_H

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace wire {

// ---------------------------------------------------------------------------
// JSON
// ---------------------------------------------------------------------------

struct Json {
  enum Kind { kNull, kBool, kNumber, kString, kArray, kObject } kind = kNull;
  bool boolean = false;
  double number = 0;
  std::string text;  // kString; kNumber: as written
  std::vector<Json> items;
  std::vector<std::pair<std::string, Json>> members;  // in file order

  //! The member `key` of an object, nullptr if absent.
  const Json *get(std::string_view key) const {
    for (const auto &[name, value] : members)
      if (name == key) return &value;
    return nullptr;
  }
};

//! The document, or nullopt (with `error` set) if it is not strict JSON.
std::optional<Json> parse_json(std::string_view text, std::string *error);

// ---------------------------------------------------------------------------
// Protobuf wire format
// ---------------------------------------------------------------------------

struct ProtoField {
  uint32_t number = 0;
  uint32_t wire_type = 0;  // 0 varint, 1 fixed64, 2 length-delimited, 5 fixed32
  uint64_t value = 0;      // varint and fixed
  std::string_view bytes;  // length-delimited
};

//! The fields of one message, or nullopt if a byte is malformed: truncated
//! varint or payload, field number 0, group or unknown wire types.
std::optional<std::vector<ProtoField>> parse_proto(std::string_view message);

//! The fields of `fields` numbered `number`, in order.
std::vector<ProtoField> fields_numbered(const std::vector<ProtoField> &fields,
                                        uint32_t number);

}  // namespace wire

#endif
