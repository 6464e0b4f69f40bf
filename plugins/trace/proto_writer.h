// SPDX-License-Identifier: MIT
// trace plugin: the protobuf wire format, encode side only, enough for
// Perfetto's trace protos (varint and length-delimited fields).
#ifndef FTJIT_PLUGIN_PROTO_WRITER_H
#define FTJIT_PLUGIN_PROTO_WRITER_H

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace ftjit_trace {

//! Writes `value` as a varint at `p`; returns the byte after it (at most
//! ten bytes are written).
inline uint8_t *put_varint(uint8_t *p, uint64_t value) {
  while (value >= 0x80) {
    *p++ = uint8_t(value) | 0x80;
    value >>= 7;
  }
  *p++ = uint8_t(value);
  return p;
}

//! Appends fields of one message; nested messages are encoded in their own
//! ProtoWriter first, because a length prefix precedes its bytes.
class ProtoWriter {
 public:
  enum WireType : uint32_t { kVarint = 0, kFixed64 = 1, kLengthDelimited = 2 };

  void varint_field(uint32_t field, uint64_t value) {
    tag(field, kVarint);
    varint(value);
  }
  //! int32 fields: negative values take ten bytes, as protobuf specifies.
  void int32_field(uint32_t field, int32_t value) {
    varint_field(field, uint64_t(int64_t(value)));
  }
  void double_field(uint32_t field, double value) {
    tag(field, kFixed64);
    char b[8];
    std::memcpy(b, &value, 8);  // little endian, as protobuf's fixed64
    bytes_.append(b, 8);
  }
  void bytes_field(uint32_t field, std::string_view bytes) {
    tag(field, kLengthDelimited);
    varint(bytes.size());
    bytes_.append(bytes);
  }
  void message_field(uint32_t field, const ProtoWriter &message) {
    bytes_field(field, message.bytes());
  }

  const std::string &bytes() const { return bytes_; }
  //! The bytes of the empty slot a tag of this kind takes (for encoders
  //! that write straight into a buffer: put_tag).
  static constexpr uint64_t tag_value(uint32_t field, WireType type) {
    return (uint64_t(field) << 3) | type;
  }
  void clear() { bytes_.clear(); }

 private:
  void tag(uint32_t field, WireType type) { varint((uint64_t(field) << 3) | type); }
  void varint(uint64_t value) {
    while (value >= 0x80) {
      bytes_.push_back(char(uint8_t(value) | 0x80));
      value >>= 7;
    }
    bytes_.push_back(char(value));
  }

  std::string bytes_;
};

//! Writes a field's tag at `p`; returns the byte after it.
inline uint8_t *put_tag(uint8_t *p, uint32_t field, ProtoWriter::WireType type) {
  return put_varint(p, ProtoWriter::tag_value(field, type));
}

}  // namespace ftjit_trace

#endif
