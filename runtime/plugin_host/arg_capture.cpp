// SPDX-License-Identifier: MIT
// Planning and showing: the control thread and the writer thread. The
// event path is arg_capture_event.cpp.
#include <algorithm>
#include <charconv>
#include <cstring>

#include "runtime/plugin_host/arg_capture_plan.h"

namespace ftjit::plugins {
namespace {

using namespace capture;

// x86-64, arm64, riscv64: little endian, so a value's low bytes come first.
// Reads exactly min(size, 8) bytes: never past a value's own.
uint64_t unsigned_of(const uint8_t* p, uint32_t size) {
  uint64_t v = 0;
  std::memcpy(&v, p, size < 8 ? size : 8);
  return v;
}

int64_t signed_of(const uint8_t* p, uint32_t size) {
  const uint32_t n = size == 0 ? 8 : size < 8 ? size : 8;
  const unsigned shift = 64 - 8 * n;
  return static_cast<int64_t>(unsigned_of(p, n) << shift) >> shift;
}

std::string place_text(const ArgPlace& place) {
  if (place.unavailable) return place.why;
  std::string out = place.by_reference ? "address in " : "";
  for (size_t i = 0; i < place.pieces.size(); ++i) {
    const ArgPiece& p = place.pieces[i];
    if (i != 0) out += " + ";
    switch (p.source) {
      case ArgSource::kIntReg: out += "int arg " + std::to_string(p.index); break;
      case ArgSource::kFpReg: out += "fp arg " + std::to_string(p.index); break;
      case ArgSource::kStack: out += "stack+" + std::to_string(p.index); break;
      case ArgSource::kRetInt: out += "int return " + std::to_string(p.index); break;
      case ArgSource::kRetFp: out += "fp return " + std::to_string(p.index); break;
    }
  }
  return out;
}

// Lays out one value's slot at `*at` and adds the ops that fill it.
Slot lay_out(const std::string& name, const ValueType& type, const ArgPlace& place, uint32_t string_max,
             uint32_t* at, std::vector<Op>* ops, std::vector<Deref>* derefs, bool* reads_fp) {
  Slot s;
  s.name = name;
  s.type = type;
  s.place = place_text(place);
  if (place.unavailable || place.pieces.empty()) {
    s.why = place.unavailable && !place.why.empty() ? place.why : "optimised out";
    return s;
  }
  if (type.kind == ValueKind::kUnsupported) {
    s.why = type.name.empty() ? "unsupported type" : type.name;
    return s;
  }
  s.offset = static_cast<uint16_t>(*at);
  uint32_t value_limit;
  if (place.by_reference) {
    s.mode = SlotMode::kByAddress;
    s.bytes = static_cast<uint16_t>(std::min<uint32_t>(type.size, kMaxValueBytes));
    value_limit = 8;  // the pieces hold the address
    derefs->push_back({s.offset, s.bytes, SlotMode::kByAddress});
    // At least a word: a scalar is read as one.
    *at += kAddressHeader + round8(std::max<uint32_t>(s.bytes, 8));
  } else if (type.kind == ValueKind::kString) {
    s.mode = SlotMode::kString;
    s.bytes = static_cast<uint16_t>(string_max);
    value_limit = 8;
    derefs->push_back({s.offset, s.bytes, SlotMode::kString});
    *at += kStringHeader + round8(string_max);
  } else {
    s.mode = SlotMode::kValue;
    s.bytes = static_cast<uint16_t>(std::min<uint32_t>(type.size, kMaxValueBytes));
    value_limit = s.bytes;
    *at += round8(std::max<uint32_t>(s.bytes, 8));
  }
  for (const ArgPiece& p : place.pieces) {
    if (p.offset >= value_limit) continue;  // past what is kept of a big struct
    const uint8_t size = static_cast<uint8_t>(std::min<uint32_t>(p.size, value_limit - p.offset));
    const bool reg = p.source != ArgSource::kStack;
    if (reg && p.index >= 8) continue;  // refused below: no such register
    ops->push_back({p.source, size, p.index, static_cast<uint16_t>(s.offset + p.offset)});
    if (p.source == ArgSource::kFpReg) *reads_fp = true;
  }
  return s;
}

// A struct's bytes that its pieces may leave unwritten (padding, or
// members past what the convention put in registers) are zeroed at
// capture, so that nothing of an older event shows through; a scalar is
// read at its own size and a string or address slot by its header.
void add_holes(const Slot& s, std::vector<std::pair<uint16_t, uint16_t>>* zero) {
  if (s.type.kind != ValueKind::kStruct) return;
  if (s.mode == SlotMode::kValue) zero->push_back({s.offset, static_cast<uint16_t>(round8(s.bytes))});
}

// Whether a plan's entry (exit) is whole-word copies of integer registers
// into consecutive slots, and nothing else: then the event path copies
// words without interpreting ops.
void find_fast_paths(ArgCapturer::Plan& plan) {
  const bool plain = plan.entry_derefs.empty() && plan.entry_zero.empty() && plan.conditions.empty() &&
                     !plan.entry_ops.empty() && plan.entry_ops.size() <= ArgCapturer::Plan::kMaxFast &&
                     plan.entry_size == kArgRecordHeader + 8 * plan.entry_ops.size();
  bool fast = plain;
  for (size_t k = 0; fast && k < plan.entry_ops.size(); ++k) {
    const Op& op = plan.entry_ops[k];
    fast = op.source == ArgSource::kIntReg && op.size <= 8 && op.index < 8 && op.dst == kArgRecordHeader + 8 * k;
    plan.fast_regs[k] = static_cast<uint8_t>(op.index);
  }
  plan.fast_entry = fast ? static_cast<uint8_t>(plan.entry_ops.size()) : 0;
  plan.fast_exit = plan.exit_derefs.empty() && plan.exit_zero.empty() && plan.exit_ops.size() == 1 &&
                   plan.exit_size == kArgRecordHeader + 8 && plan.exit_ops[0].source == ArgSource::kRetInt &&
                   plan.exit_ops[0].index == 0 && plan.exit_ops[0].size <= 8 &&
                   plan.exit_ops[0].dst == kArgRecordHeader;
}

}  // namespace

uint64_t capture::fast_word(const ArgCapturer::Plan& plan) {
  uint64_t word = 0;
  if (plan.fast_entry != 0) {
    word = plan.entry_size | uint64_t{plan.fast_entry} << 16;
    bool in_order = true;
    for (unsigned k = 0; k < plan.fast_entry; ++k) {
      word |= uint64_t{plan.fast_regs[k] & 7u} << (20 + 3 * k);
      in_order = in_order && plan.fast_regs[k] == k;
    }
    if (in_order) word |= FTJIT_ARGS_FAST_IN_ORDER;
  }
  if (plan.entry_size == 0) word |= kNoEntryRecord;
  if (plan.fast_exit) word |= uint64_t{plan.exit_size} << 48;
  if (plan.exit_size == 0) word |= kNoExitRecord;
  return word;
}

namespace {

std::string hex(uint64_t v) {
  char b[24];
  auto r = std::to_chars(b, b + sizeof b, v, 16);
  return "0x" + std::string(b, r.ptr);
}

std::string number_text(double v) {
  char b[64];
  auto r = std::to_chars(b, b + sizeof b, v);
  return std::string(b, r.ptr);
}

std::string quoted(const uint8_t* p, size_t n) {
  std::string out = "\"";
  for (size_t i = 0; i < n; ++i) {
    const unsigned char c = p[i];
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      default:
        if (c < 0x20 || c >= 0x7f) {
          static const char kDigits[] = "0123456789abcdef";
          out += "\\x";
          out += kDigits[c >> 4];
          out += kDigits[c & 15];
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out + "\"";
}

std::string char_text(int64_t c) {
  const unsigned char u = static_cast<unsigned char>(c);
  if (u == '\'') return "'\\''";
  if (u >= 0x20 && u < 0x7f) return std::string("'") + static_cast<char>(u) + "'";
  std::string q = quoted(&u, 1);
  return "'" + q.substr(1, q.size() - 2) + "'";
}

const std::string* enumerator_of(const std::vector<Enumerator>& list, int64_t value) {
  for (const Enumerator& e : list) {
    if (e.value == value) return &e.name;
  }
  return nullptr;
}

// One scalar at `p` as shown (and, for writers that keep types, typed).
ShownValue scalar(const std::string& name, ValueKind kind, uint32_t size, bool is_signed,
                  const std::vector<Enumerator>& enumerators, const uint8_t* p) {
  ShownValue v;
  v.name = name;
  switch (kind) {
    case ValueKind::kSigned:
      v.type = ShownValue::Type::kInt;
      v.i = signed_of(p, size);
      v.text = std::to_string(v.i);
      break;
    case ValueKind::kUnsigned:
      v.type = ShownValue::Type::kUint;
      v.u = unsigned_of(p, size);
      v.text = std::to_string(v.u);
      break;
    case ValueKind::kBool:
      v.type = ShownValue::Type::kBool;
      v.u = p[0] != 0;
      v.text = v.u != 0 ? "true" : "false";
      break;
    case ValueKind::kChar:
      v.type = ShownValue::Type::kText;
      v.i = is_signed ? signed_of(p, 1) : static_cast<int64_t>(p[0]);
      v.text = char_text(v.i);
      break;
    case ValueKind::kEnum: {
      v.i = is_signed ? signed_of(p, size) : static_cast<int64_t>(unsigned_of(p, size));
      const std::string* e = enumerator_of(enumerators, v.i);
      v.type = ShownValue::Type::kText;
      v.text = e != nullptr ? *e : std::to_string(v.i);
      break;
    }
    case ValueKind::kFloat:
      v.type = ShownValue::Type::kDouble;
      if (size != 4 && size != 8) {
        v.type = ShownValue::Type::kText;
        v.text = "?";
      } else if (size == 4) {
        float f;
        std::memcpy(&f, p, 4);
        v.d = f;
        char b[32];
        auto r = std::to_chars(b, b + sizeof b, f);
        v.text.assign(b, r.ptr);
      } else {
        std::memcpy(&v.d, p, 8);
        v.text = number_text(v.d);
      }
      break;
    case ValueKind::kPointer:
    case ValueKind::kString:
      v.type = ShownValue::Type::kPointer;
      v.u = unsigned_of(p, 8);
      v.text = hex(v.u);
      break;
    default:
      v.type = ShownValue::Type::kText;
      v.text = "?";
  }
  return v;
}

ShownValue shown(const Slot& s, const uint8_t* record, uint32_t size) {
  ShownValue v;
  v.name = s.name;
  if (s.mode == SlotMode::kNone) {
    v.text = "<" + s.why + ">";
    return v;
  }
  const uint8_t* p = record + s.offset;
  const ValueType& t = s.type;
  if (s.mode == SlotMode::kString) {
    if (s.offset + kStringHeader + s.bytes > size) return v;
    const uint64_t address = unsigned_of(p, 8);
    uint16_t length;
    std::memcpy(&length, p + 8, 2);
    length = std::min<uint16_t>(length, s.bytes);
    const uint8_t state = p[10];
    if (state == kStateNull) {
      v.type = ShownValue::Type::kText;
      v.text = "NULL";
    } else if (state == kStateUnreadable && length == 0) {
      v.type = ShownValue::Type::kText;
      v.text = "<unreadable " + hex(address) + ">";
    } else {
      v.type = ShownValue::Type::kString;
      v.text = quoted(p + kStringHeader, length);
      if (state == kStateLonger) v.text += "...";
      if (state == kStateUnreadable) v.text += "<unreadable>";
      v.u = address;
    }
    return v;
  }
  const uint8_t* bytes = p;
  if (s.mode == SlotMode::kByAddress) {
    if (s.offset + kAddressHeader + s.bytes > size) return v;
    const uint64_t address = unsigned_of(p, 8);
    if (p[8] == kStateNull) {
      v.text = "<NULL>";
      return v;
    }
    if (p[8] != kStateRead) {
      v.text = "<unreadable " + hex(address) + ">";
      return v;
    }
    bytes = p + kAddressHeader;
  } else if (s.offset + s.bytes > size) {
    return v;
  }
  if (t.kind != ValueKind::kStruct) {
    ShownValue sv = scalar(s.name, t.kind, std::min<uint32_t>(t.size, 8), t.is_signed, t.enumerators, bytes);
    return sv;
  }
  v.type = ShownValue::Type::kText;
  if (t.opaque || t.members.empty()) {
    v.text = "{...}";
    return v;
  }
  v.text = "{";
  bool first = true;
  for (const Member& m : t.members) {
    if (m.offset + m.size > s.bytes) {
      v.text += first ? "..." : ", ...";
      break;
    }
    v.text += (first ? "" : ", ") + m.name + "=" +
              scalar(m.name, m.kind, m.size, m.kind == ValueKind::kChar || m.kind == ValueKind::kEnum,
                     m.enumerators, bytes + m.offset)
                  .text;
    first = false;
  }
  v.text += "}";
  return v;
}

}  // namespace

ArgCapturer::ArgCapturer(const ArgCaptureSpec& spec) : string_max_(spec.string_max) {
  for (const CapturedFunction& f : spec.functions) {
    if (f.ip == 0) continue;
    auto plan = std::make_unique<Plan>();
    plan->ip = f.ip;
    plan->name = f.signature.name;
    plan->variadic = f.signature.variadic;
    if (f.args) {
      uint32_t at = kArgRecordHeader;
      for (size_t i = 0; i < f.signature.params.size(); ++i) {
        const Param& p = f.signature.params[i];
        const ArgPlace place = i < f.placed.params.size() ? f.placed.params[i] : ArgPlace{};
        const std::string name = !p.name.empty() ? p.name : "arg" + std::to_string(i + 1);
        plan->params.push_back(
            lay_out(name, p.type, place, string_max_, &at, &plan->entry_ops, &plan->entry_derefs, &reads_fp_));
        add_holes(plan->params.back(), &plan->entry_zero);
      }
      plan->entry_size = at;
    }
    if (f.retval && f.signature.ret) {
      uint32_t at = kArgRecordHeader;
      bool unused_fp = false;
      plan->ret = lay_out("", *f.signature.ret, f.placed.ret.value_or(ArgPlace{}), string_max_, &at,
                          &plan->exit_ops, &plan->exit_derefs, &unused_fp);
      add_holes(plan->ret, &plan->exit_zero);
      plan->has_ret = true;
      plan->exit_size = at;
    }
    // A record's size is a u16, offsets too: a function whose record would
    // not fit is not captured.
    if (plan->entry_size > 0xffff || plan->exit_size > 0xffff) continue;
    if (plan->entry_size == 0 && plan->exit_size == 0) continue;
    max_record_ = std::max({max_record_, plan->entry_size, plan->exit_size});
    plans_.push_back(std::move(plan));
  }
  for (const ArgCondition& c : spec.conditions) {
    for (auto& plan : plans_) {
      if (plan->ip == c.ip && c.param < plan->params.size()) {
        plan->conditions.push_back({c.param, c.op, c.number, c.text});
      }
    }
  }
  // After the conditions: a plan with any is never the common case.
  for (auto& plan : plans_) find_fast_paths(*plan);
  table_.build(plans_, capture::fast_word);
  plan_keys(spec);
}

void ArgCapturer::plan_keys(const ArgCaptureSpec& spec) {
  key_name_ = spec.by_arg;
  if (key_name_.empty()) return;
  bool strings = false;
  for (const CapturedFunction& f : spec.functions) {
    if (f.ip == 0) continue;
    for (size_t i = 0; i < f.signature.params.size() && i < f.placed.params.size(); ++i) {
      const Param& p = f.signature.params[i];
      const std::string name = !p.name.empty() ? p.name : "arg" + std::to_string(i + 1);
      if (name != key_name_) continue;
      const ArgPlace& place = f.placed.params[i];
      const ValueKind k = p.type.kind;
      const bool scalar = k == ValueKind::kSigned || k == ValueKind::kUnsigned || k == ValueKind::kBool ||
                          k == ValueKind::kChar || k == ValueKind::kEnum || k == ValueKind::kPointer ||
                          k == ValueKind::kString;
      // What the CLI refuses, the host leaves out too: the function is then
      // one group, as one without the parameter.
      if (!scalar || place.unavailable || place.by_reference || place.pieces.size() != 1) break;
      const ArgPiece& piece = place.pieces[0];
      const uint32_t size = std::min<uint32_t>(p.type.size == 0 ? 8 : p.type.size, 8);
      if (piece.offset != 0 || piece.size < size) break;
      if (piece.source != ArgSource::kIntReg && piece.source != ArgSource::kStack) break;
      if (piece.source == ArgSource::kIntReg && piece.index >= 8) break;
      auto plan = std::make_unique<KeyPlan>();
      plan->ip = f.ip;
      plan->source = piece.source;
      plan->index = piece.index;
      plan->size = static_cast<uint8_t>(k == ValueKind::kString || k == ValueKind::kPointer ? 8 : size);
      plan->kind = k;
      plan->is_signed = k == ValueKind::kSigned || ((k == ValueKind::kEnum || k == ValueKind::kChar) && p.type.is_signed);
      plan->name = name;
      plan->enumerators = p.type.enumerators;
      strings = strings || k == ValueKind::kString;
      key_plans_.push_back(std::move(plan));
      break;
    }
  }
  if (strings) interned_.reset(new InternedString[kInternSlots]);
  key_table_.build(key_plans_);
}

bool ArgCapturer::key_value(uint64_t ip, uint64_t key, ShownValue* out) const {
  const KeyPlan* plan = find_key(ip);
  if (plan == nullptr || out == nullptr) return false;
  if (plan->kind != ValueKind::kString) {
    uint8_t bytes[8];
    std::memcpy(bytes, &key, 8);
    *out = scalar(plan->name, plan->kind, plan->size, plan->is_signed, plan->enumerators, bytes);
    return true;
  }
  ShownValue v;
  v.name = plan->name;
  v.type = ShownValue::Type::kText;
  if (key == 0) {
    v.text = "NULL";
  } else if (key == 1) {
    v.text = "<unreadable>";
  } else {
    v.text = "<a string of hash " + hex(key) + ">";  // not kept: the table was full
    for (uint32_t n = 0, i = key & (kInternSlots - 1); interned_ && n < kInternSlots; ++n, i = (i + 1) & (kInternSlots - 1)) {
      const InternedString& s = interned_[i];
      const uint64_t h = s.hash.load(std::memory_order_acquire);
      if (h == 0) break;
      if (h != key) continue;
      v.type = ShownValue::Type::kString;
      v.text = quoted(s.bytes, s.length) + (s.longer ? "..." : "");
      break;
    }
  }
  *out = std::move(v);
  return true;
}

ArgCapturer::~ArgCapturer() = default;

std::vector<ShownValue> ArgCapturer::values(uint64_t ip, const void* record, uint32_t size) const {
  std::vector<ShownValue> out;
  const Plan* plan = find(ip);
  if (plan == nullptr || record == nullptr || size < kArgRecordHeader) return out;
  const auto* r = static_cast<const uint8_t*>(record);
  uint16_t stored;
  std::memcpy(&stored, r, 2);
  if (stored != size) return out;
  if (r[2] == 1 && size == plan->entry_size) {
    for (const Slot& s : plan->params) out.push_back(shown(s, r, size));
  } else if (r[2] == 2 && plan->has_ret && size == plan->exit_size) {
    out.push_back(shown(plan->ret, r, size));
  }
  return out;
}

std::string ArgCapturer::text(uint64_t ip, const void* record, uint32_t size) const {
  const std::vector<ShownValue> v = values(ip, record, size);
  const Plan* plan = find(ip);
  const bool entry = size >= kArgRecordHeader && static_cast<const uint8_t*>(record)[2] == 1;
  std::string out;
  for (size_t i = 0; i < v.size(); ++i) {
    if (i != 0) out += ", ";
    out += entry ? v[i].name + "=" + v[i].text : v[i].text;
  }
  if (entry && plan != nullptr && plan->variadic) out += v.empty() ? "..." : ", ...";
  return out;
}

std::vector<ArgCapturer::ParamInfo> ArgCapturer::params(uint64_t ip) const {
  std::vector<ParamInfo> out;
  const Plan* plan = find(ip);
  if (plan == nullptr) return out;
  for (const Slot& s : plan->params) {
    out.push_back({s.name, s.type.name, s.mode == SlotMode::kNone ? "<" + s.why + ">" : s.place, s.type.kind,
                   s.type.size});
  }
  return out;
}

}  // namespace ftjit::plugins
