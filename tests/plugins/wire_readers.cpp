// SPDX-License-Identifier: MIT
// Strict JSON and protobuf readers for the plugin tests.
#include "wire_readers.h"

#include <cstdlib>

namespace wire {
namespace {

class JsonParser {
 public:
  explicit JsonParser(std::string_view text) : text_(text) {}

  std::optional<Json> document(std::string *error) {
    Json value;
    skip_space();
    if (!parse_value(value, 0)) {
      if (error) *error = error_ + " at byte " + std::to_string(pos_);
      return std::nullopt;
    }
    skip_space();
    if (pos_ != text_.size()) {
      if (error) *error = "trailing bytes at " + std::to_string(pos_);
      return std::nullopt;
    }
    return value;
  }

 private:
  bool fail(const char *what) {
    error_ = what;
    return false;
  }
  void skip_space() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\n' ||
                                   text_[pos_] == '\t' || text_[pos_] == '\r'))
      ++pos_;
  }
  bool literal(std::string_view word) {
    if (text_.substr(pos_, word.size()) != word) return fail("bad literal");
    pos_ += word.size();
    return true;
  }

  bool parse_value(Json &value, int depth) {
    if (depth > 64) return fail("nested too deep");
    if (pos_ >= text_.size()) return fail("unexpected end");
    switch (text_[pos_]) {
      case '{': return parse_object(value, depth);
      case '[': return parse_array(value, depth);
      case '"': value.kind = Json::kString; return parse_string(value.text);
      case 't': value.kind = Json::kBool; value.boolean = true; return literal("true");
      case 'f': value.kind = Json::kBool; return literal("false");
      case 'n': value.kind = Json::kNull; return literal("null");
      default: return parse_number(value);
    }
  }

  bool parse_number(Json &value) {
    const size_t start = pos_;
    if (pos_ < text_.size() && text_[pos_] == '-') ++pos_;
    if (pos_ >= text_.size() || !isdigit(text_[pos_])) return fail("bad number");
    if (text_[pos_] == '0') ++pos_;
    else while (pos_ < text_.size() && isdigit(text_[pos_])) ++pos_;
    if (pos_ < text_.size() && text_[pos_] == '.') {
      ++pos_;
      if (pos_ >= text_.size() || !isdigit(text_[pos_])) return fail("bad fraction");
      while (pos_ < text_.size() && isdigit(text_[pos_])) ++pos_;
    }
    if (pos_ < text_.size() && (text_[pos_] == 'e' || text_[pos_] == 'E')) {
      ++pos_;
      if (pos_ < text_.size() && (text_[pos_] == '+' || text_[pos_] == '-')) ++pos_;
      if (pos_ >= text_.size() || !isdigit(text_[pos_])) return fail("bad exponent");
      while (pos_ < text_.size() && isdigit(text_[pos_])) ++pos_;
    }
    value.kind = Json::kNumber;
    value.text = std::string(text_.substr(start, pos_ - start));
    value.number = std::strtod(value.text.c_str(), nullptr);
    return true;
  }

  bool parse_string(std::string &out) {
    ++pos_;  // opening quote
    while (pos_ < text_.size()) {
      const unsigned char c = text_[pos_++];
      if (c == '"') return true;
      if (c < 0x20) return fail("control character in string");
      if (c != '\\') {
        out += char(c);
        continue;
      }
      if (pos_ >= text_.size()) break;
      const char escape = text_[pos_++];
      switch (escape) {
        case '"': case '\\': case '/': out += escape; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'u': {
          if (pos_ + 4 > text_.size()) return fail("short \\u escape");
          const std::string hex(text_.substr(pos_, 4));
          char *end = nullptr;
          const long code = std::strtol(hex.c_str(), &end, 16);
          if (end != hex.c_str() + 4) return fail("bad \\u escape");
          pos_ += 4;
          if (code < 0x80) out += char(code);
          else out += '?';  // the tests need no non-ASCII text
          break;
        }
        default: return fail("bad escape");
      }
    }
    return fail("unterminated string");
  }

  bool parse_array(Json &value, int depth) {
    value.kind = Json::kArray;
    ++pos_;
    skip_space();
    if (pos_ < text_.size() && text_[pos_] == ']') return ++pos_, true;
    for (;;) {
      skip_space();
      Json item;
      if (!parse_value(item, depth + 1)) return false;
      value.items.push_back(std::move(item));
      skip_space();
      if (pos_ >= text_.size()) return fail("unterminated array");
      if (text_[pos_] == ']') return ++pos_, true;
      if (text_[pos_++] != ',') return fail("expected , in array");
    }
  }

  bool parse_object(Json &value, int depth) {
    value.kind = Json::kObject;
    ++pos_;
    skip_space();
    if (pos_ < text_.size() && text_[pos_] == '}') return ++pos_, true;
    for (;;) {
      skip_space();
      if (pos_ >= text_.size() || text_[pos_] != '"') return fail("expected key");
      std::string key;
      if (!parse_string(key)) return false;
      skip_space();
      if (pos_ >= text_.size() || text_[pos_++] != ':') return fail("expected :");
      skip_space();
      Json member;
      if (!parse_value(member, depth + 1)) return false;
      value.members.emplace_back(std::move(key), std::move(member));
      skip_space();
      if (pos_ >= text_.size()) return fail("unterminated object");
      if (text_[pos_] == '}') return ++pos_, true;
      if (text_[pos_++] != ',') return fail("expected , in object");
    }
  }

  static bool isdigit(char c) { return c >= '0' && c <= '9'; }

  std::string_view text_;
  size_t pos_ = 0;
  std::string error_;
};

bool read_varint(std::string_view data, size_t &pos, uint64_t &value) {
  value = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    if (pos >= data.size()) return false;
    const uint8_t byte = uint8_t(data[pos++]);
    value |= uint64_t(byte & 0x7f) << shift;
    if ((byte & 0x80) == 0) return true;
  }
  return false;
}

}  // namespace

std::optional<Json> parse_json(std::string_view text, std::string *error) {
  return JsonParser(text).document(error);
}

std::optional<std::vector<ProtoField>> parse_proto(std::string_view message) {
  std::vector<ProtoField> fields;
  size_t pos = 0;
  while (pos < message.size()) {
    uint64_t tag;
    if (!read_varint(message, pos, tag)) return std::nullopt;
    ProtoField field;
    field.number = uint32_t(tag >> 3);
    field.wire_type = uint32_t(tag & 7);
    if (field.number == 0 || (tag >> 3) > 0x1fffffff) return std::nullopt;
    switch (field.wire_type) {
      case 0:
        if (!read_varint(message, pos, field.value)) return std::nullopt;
        break;
      case 1:
      case 5: {
        const size_t size = field.wire_type == 1 ? 8 : 4;
        if (message.size() - pos < size) return std::nullopt;
        for (size_t i = 0; i < size; ++i)
          field.value |= uint64_t(uint8_t(message[pos + i])) << (8 * i);
        pos += size;
        break;
      }
      case 2: {
        uint64_t length;
        if (!read_varint(message, pos, length)) return std::nullopt;
        if (length > message.size() - pos) return std::nullopt;
        field.bytes = message.substr(pos, size_t(length));
        pos += size_t(length);
        break;
      }
      default:
        return std::nullopt;
    }
    fields.push_back(field);
  }
  return fields;
}

std::vector<ProtoField> fields_numbered(const std::vector<ProtoField> &fields,
                                        uint32_t number) {
  std::vector<ProtoField> matching;
  for (const ProtoField &field : fields)
    if (field.number == number) matching.push_back(field);
  return matching;
}

}  // namespace wire
