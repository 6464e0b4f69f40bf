// SPDX-License-Identifier: MIT
// Encoding and checked decoding of control messages (layout: protocol.h).
#include <algorithm>
#include <cstring>
#include <utility>

#include "runtime/control/protocol.h"

namespace ftjit::control {
namespace {

class Writer {
 public:
  template <typename T>
  void put(T v) {
    static_assert(std::is_integral_v<T>);
    char b[sizeof(T)];
    std::memcpy(b, &v, sizeof v);  // x86-64, arm64, riscv64: little endian
    out_.append(b, sizeof b);
  }
  void str(std::string_view s) {
    put<uint32_t>(static_cast<uint32_t>(s.size()));
    out_.append(s);
  }
  void strs(const std::vector<std::string>& v) {
    put<uint32_t>(static_cast<uint32_t>(v.size()));
    for (const auto& s : v) str(s);
  }
  std::string take() { return std::move(out_); }

 private:
  std::string out_;
};

// Reads fields in order; the first failure sticks and every later read
// returns a zero value, so a decoder reads everything and checks once.
class Reader {
 public:
  explicit Reader(std::string_view in) : in_(in) {}

  template <typename T>
  T get() {
    T v{};
    if (!need(sizeof(T))) return v;
    std::memcpy(&v, in_.data() + at_, sizeof v);
    at_ += sizeof v;
    return v;
  }
  std::string str() {
    uint32_t n = get<uint32_t>();
    if (n > kMaxString) return fail("string too long"), std::string();
    if (!need(n)) return {};
    std::string s(in_.substr(at_, n));
    at_ += n;
    return s;
  }
  uint32_t count(uint32_t max = kMaxList) {
    uint32_t n = get<uint32_t>();
    if (n > max) return fail("list too long"), 0;
    // Every item takes at least 4 bytes: a lying count fails here, before
    // anything is reserved for it.
    if (n > (in_.size() - at_) / 4) return fail("list longer than the message"), 0;
    return n;
  }
  std::vector<std::string> strs() {
    std::vector<std::string> v;
    uint32_t n = count();
    for (uint32_t i = 0; i < n && ok(); ++i) v.push_back(str());
    return v;
  }
  uint8_t flag() {
    uint8_t b = get<uint8_t>();
    if (b > 1) fail("flag out of range");
    return b;
  }
  void fail(const char* why) {
    if (error_ == nullptr) error_ = why;
  }
  bool ok() const { return error_ == nullptr; }

  template <typename T>
  Result<T> finish(const char* what, T value) {
    if (ok() && at_ != in_.size()) fail("trailing bytes");
    if (!ok()) {
      return make_error(FTJIT_E_INVALID_ARGUMENT,
                        std::string("malformed ") + what + " message: " + error_);
    }
    return value;
  }

 private:
  bool need(size_t n) {
    if (!ok()) return false;
    if (in_.size() - at_ < n) {
      fail("truncated");
      return false;
    }
    return true;
  }

  std::string_view in_;
  size_t at_ = 0;
  const char* error_ = nullptr;
};

// The argument capture (core/arg_capture_spec.h): types and places.
void put_enumerators(Writer& w, const std::vector<Enumerator>& v) {
  w.put<uint32_t>(static_cast<uint32_t>(v.size()));
  for (const Enumerator& e : v) {
    w.put(e.value);
    w.str(e.name);
  }
}

std::vector<Enumerator> get_enumerators(Reader& r) {
  std::vector<Enumerator> v;
  const uint32_t n = r.count();
  for (uint32_t i = 0; i < n && r.ok(); ++i) {
    Enumerator e;
    e.value = r.get<int64_t>();
    e.name = r.str();
    v.push_back(std::move(e));
  }
  return v;
}

ValueKind get_kind(Reader& r) {
  const uint8_t k = r.get<uint8_t>();
  if (k < static_cast<uint8_t>(ValueKind::kSigned) || k > static_cast<uint8_t>(ValueKind::kUnsupported)) {
    r.fail("value kind out of range");
    return ValueKind::kUnsupported;
  }
  return static_cast<ValueKind>(k);
}

void put_type(Writer& w, const ValueType& t) {
  w.put(static_cast<uint8_t>(t.kind));
  w.put(t.size);
  w.put(t.align);
  w.str(t.name);
  w.put<uint8_t>(t.is_signed ? 1 : 0);
  w.put<uint8_t>(t.opaque ? 1 : 0);
  put_enumerators(w, t.enumerators);
  w.put<uint32_t>(static_cast<uint32_t>(t.members.size()));
  for (const Member& m : t.members) {
    w.str(m.name);
    w.put(m.offset);
    w.put(static_cast<uint8_t>(m.kind));
    w.put(m.size);
    put_enumerators(w, m.enumerators);
  }
}

ValueType get_type(Reader& r) {
  ValueType t;
  t.kind = get_kind(r);
  t.size = r.get<uint32_t>();
  t.align = r.get<uint32_t>();
  t.name = r.str();
  t.is_signed = r.flag() != 0;
  t.opaque = r.flag() != 0;
  t.enumerators = get_enumerators(r);
  const uint32_t n = r.count();
  for (uint32_t i = 0; i < n && r.ok(); ++i) {
    Member m;
    m.name = r.str();
    m.offset = r.get<uint32_t>();
    m.kind = get_kind(r);
    m.size = r.get<uint8_t>();
    m.enumerators = get_enumerators(r);
    if (r.ok() && m.kind == ValueKind::kStruct) r.fail("a struct member that is a struct");
    if (r.ok() && static_cast<uint64_t>(m.offset) + m.size > t.size) r.fail("member past its struct");
    t.members.push_back(std::move(m));
  }
  return t;
}

void put_place(Writer& w, const ArgPlace& p) {
  w.put<uint32_t>(static_cast<uint32_t>(p.pieces.size()));
  for (const ArgPiece& piece : p.pieces) {
    w.put(static_cast<uint8_t>(piece.source));
    w.put(piece.index);
    w.put(piece.size);
    w.put(piece.offset);
  }
  w.put<uint8_t>(p.by_reference ? 1 : 0);
  w.put<uint8_t>(p.unavailable ? 1 : 0);
  w.str(p.why);
}

ArgPlace get_place(Reader& r) {
  ArgPlace p;
  const uint32_t n = r.count();
  for (uint32_t i = 0; i < n && r.ok(); ++i) {
    ArgPiece piece;
    const uint8_t source = r.get<uint8_t>();
    if (source < static_cast<uint8_t>(ArgSource::kIntReg) || source > static_cast<uint8_t>(ArgSource::kRetFp)) {
      r.fail("argument source out of range");
    }
    piece.source = static_cast<ArgSource>(source);
    piece.index = r.get<uint16_t>();
    piece.size = r.get<uint8_t>();
    piece.offset = r.get<uint16_t>();
    if (r.ok() && (piece.size == 0 || piece.size > 16)) r.fail("argument piece size out of range");
    p.pieces.push_back(piece);
  }
  p.by_reference = r.flag() != 0;
  p.unavailable = r.flag() != 0;
  p.why = r.str();
  return p;
}

void put_capture(Writer& w, const ArgCaptureSpec& spec) {
  w.put(spec.string_max);
  w.put<uint32_t>(static_cast<uint32_t>(spec.functions.size()));
  for (const CapturedFunction& f : spec.functions) {
    w.put(f.ip);
    w.put<uint8_t>(f.args ? 1 : 0);
    w.put<uint8_t>(f.retval ? 1 : 0);
    const FunctionSignature& sig = f.signature;
    w.str(sig.name);
    w.put(sig.entry);
    w.put<uint8_t>(sig.variadic ? 1 : 0);
    w.put<uint8_t>(sig.abi_changed ? 1 : 0);
    w.put<uint32_t>(static_cast<uint32_t>(sig.params.size()));
    for (size_t i = 0; i < sig.params.size(); ++i) {
      w.str(sig.params[i].name);
      w.put<uint8_t>(sig.params[i].artificial ? 1 : 0);
      put_type(w, sig.params[i].type);
      put_place(w, i < f.placed.params.size() ? f.placed.params[i] : ArgPlace{});
    }
    w.put<uint8_t>(sig.ret.has_value() ? 1 : 0);
    if (sig.ret) {
      put_type(w, *sig.ret);
      put_place(w, f.placed.ret.value_or(ArgPlace{}));
    }
  }
  w.put<uint32_t>(static_cast<uint32_t>(spec.conditions.size()));
  for (const ArgCondition& c : spec.conditions) {
    w.put(c.ip);
    w.put(c.param);
    w.put(static_cast<uint8_t>(c.op));
    w.put(c.number);
    w.str(c.text);
  }
  w.str(spec.by_arg);
}

void put_record(Writer& w, const RecordControl& rc) {
  w.put(rc.max_depth);
  w.put(rc.min_duration_ns);
  w.put(rc.sample_period);
  w.put(rc.start_after_ns);
  w.put(rc.stop_after_ns);
  w.put<int32_t>(rc.signal);
  w.put(static_cast<uint8_t>(rc.signal_action));
  w.put<uint32_t>(static_cast<uint32_t>(rc.triggers.size()));
  for (const RecordTrigger& t : rc.triggers) {
    w.put(static_cast<uint8_t>(t.action));
    w.str(t.function);
    w.put<uint8_t>(t.at_return ? 1 : 0);
    w.put(t.from_call);
  }
}

RecordControl get_record(Reader& r) {
  RecordControl rc;
  rc.max_depth = r.get<uint32_t>();
  rc.min_duration_ns = r.get<uint64_t>();
  rc.sample_period = r.get<uint32_t>();
  rc.start_after_ns = r.get<uint64_t>();
  rc.stop_after_ns = r.get<uint64_t>();
  rc.signal = r.get<int32_t>();
  const uint8_t signal_action = r.get<uint8_t>();
  if (signal_action < static_cast<uint8_t>(TriggerAction::kStart) ||
      signal_action > static_cast<uint8_t>(TriggerAction::kToggle)) {
    r.fail("signal action out of range");
  }
  rc.signal_action = static_cast<TriggerAction>(signal_action);
  const uint32_t n = r.count(64);
  for (uint32_t i = 0; i < n && r.ok(); ++i) {
    RecordTrigger t;
    const uint8_t action = r.get<uint8_t>();
    if (action < static_cast<uint8_t>(TriggerAction::kStart) ||
        action > static_cast<uint8_t>(TriggerAction::kDump)) {
      r.fail("trigger action out of range");
    }
    t.action = static_cast<RecordTrigger::Action>(action);
    t.function = r.str();
    t.at_return = r.flag() != 0;
    t.from_call = r.get<uint64_t>();
    rc.triggers.push_back(std::move(t));
  }
  // What no session could honour is refused by the session, which says why.
  return rc;
}

ArgCaptureSpec get_capture(Reader& r) {
  ArgCaptureSpec spec;
  spec.string_max = r.get<uint32_t>();
  if (r.ok() && spec.string_max > kMaxStringCapture) r.fail("string capture too long");
  const uint32_t n = r.count(kMaxCapturedFunctions);
  for (uint32_t i = 0; i < n && r.ok(); ++i) {
    CapturedFunction f;
    f.ip = r.get<uint64_t>();
    f.args = r.flag() != 0;
    f.retval = r.flag() != 0;
    FunctionSignature& sig = f.signature;
    sig.name = r.str();
    sig.entry = r.get<uint64_t>();
    sig.variadic = r.flag() != 0;
    sig.abi_changed = r.flag() != 0;
    const uint32_t n_params = r.count(kMaxCapturedParams);
    for (uint32_t j = 0; j < n_params && r.ok(); ++j) {
      Param p;
      p.name = r.str();
      p.artificial = r.flag() != 0;
      p.type = get_type(r);
      sig.params.push_back(std::move(p));
      f.placed.params.push_back(get_place(r));
    }
    if (r.flag() != 0) {
      sig.ret = get_type(r);
      f.placed.ret = get_place(r);
    }
    spec.functions.push_back(std::move(f));
  }
  const uint32_t n_conditions = r.count();
  for (uint32_t i = 0; i < n_conditions && r.ok(); ++i) {
    ArgCondition c;
    c.ip = r.get<uint64_t>();
    c.param = r.get<uint32_t>();
    const uint8_t op = r.get<uint8_t>();
    if (op < static_cast<uint8_t>(ConditionOp::kEq) || op > static_cast<uint8_t>(ConditionOp::kPrefix)) {
      r.fail("condition operator out of range");
    }
    c.op = static_cast<ConditionOp>(op);
    c.number = r.get<int64_t>();
    c.text = r.str();
    spec.conditions.push_back(std::move(c));
  }
  spec.by_arg = r.str();
  return spec;
}

}  // namespace

std::string encode(const Hello& m) {
  Writer w;
  w.put(m.version);
  w.put(m.pid);
  w.put(m.isa);
  w.put(m.attached);
  w.put(m.owner_pid);
  return w.take();
}

Result<Hello> decode_hello(std::string_view payload) {
  Reader r(payload);
  Hello m;
  m.version = r.get<uint32_t>();
  m.pid = r.get<int32_t>();
  m.isa = r.get<uint32_t>();
  m.attached = r.flag();
  m.owner_pid = r.get<int32_t>();
  if (r.ok() && m.isa > static_cast<uint32_t>(Isa::kUnknown)) r.fail("unknown ISA");
  return r.finish("hello", std::move(m));
}

std::string encode(const Attach& m) {
  Writer w;
  w.put<uint32_t>(static_cast<uint32_t>(m.plugins.size()));
  for (const auto& p : m.plugins) {
    w.str(p.path);
    w.put<uint32_t>(static_cast<uint32_t>(p.options.size()));
    for (const auto& [k, v] : p.options) {
      w.str(k);
      w.str(v);
    }
    w.str(p.format);
    w.put(p.output_fd);
  }
  w.strs(m.include);
  w.strs(m.exclude);
  w.put(m.strategy);
  w.str(m.format);
  w.put<uint32_t>(static_cast<uint32_t>(m.tids.size()));
  for (int32_t t : m.tids) w.put(t);
  w.str(m.thread_glob);
  w.put(m.main_thread);
  w.put(m.output_fd);
  w.put(m.owner_pid);
  w.put(m.saves);
  w.put(m.buffer_policy);
  w.put(m.buffer_bytes);
  w.put(m.buffer_wait_ms);
  w.put(m.relocate);
  put_capture(w, m.args);
  put_record(w, m.record);
  w.put(m.live);
  w.put<uint32_t>(static_cast<uint32_t>(m.producers.size()));
  for (const ModuleProducers& p : m.producers) {
    w.str(p.file.path);
    w.put(p.file.size);
    w.put(p.file.fingerprint);
    w.str(encode_producers(p.units));
  }
  return w.take();
}

Result<Attach> decode_attach(std::string_view payload) {
  Reader r(payload);
  Attach m;
  uint32_t n = r.count();
  for (uint32_t i = 0; i < n && r.ok(); ++i) {
    PluginRequest p;
    p.path = r.str();
    uint32_t n_opts = r.count();
    for (uint32_t j = 0; j < n_opts && r.ok(); ++j) {
      std::string k = r.str();
      std::string v = r.str();
      p.options.emplace_back(std::move(k), std::move(v));
    }
    p.format = r.str();
    p.output_fd = r.flag();
    m.plugins.push_back(std::move(p));
  }
  m.include = r.strs();
  m.exclude = r.strs();
  m.strategy = r.get<int32_t>();
  m.format = r.str();
  uint32_t n_tids = r.count();
  for (uint32_t i = 0; i < n_tids && r.ok(); ++i) {
    m.tids.push_back(r.get<int32_t>());
    if (m.tids.back() <= 0) r.fail("thread id out of range");
  }
  m.thread_glob = r.str();
  m.main_thread = r.flag();
  m.output_fd = r.flag();
  m.owner_pid = r.get<int32_t>();
  m.saves = r.get<int32_t>();
  m.buffer_policy = r.get<uint8_t>();
  m.buffer_bytes = r.get<uint64_t>();
  m.buffer_wait_ms = r.get<uint32_t>();
  m.relocate = r.flag();
  m.args = get_capture(r);
  m.record = get_record(r);
  m.live = r.flag();
  const uint32_t n_producers = r.count();
  for (uint32_t i = 0; i < n_producers && r.ok(); ++i) {
    ModuleProducers p;
    p.file.path = r.str();
    p.file.size = r.get<uint64_t>();
    p.file.fingerprint = r.get<uint64_t>();
    const std::string units = r.str();
    if (!r.ok()) break;
    auto decoded = decode_producers(units);
    if (!decoded) {
      r.fail("malformed module producers");
      break;
    }
    p.units = std::move(decoded.value());
    m.producers.push_back(std::move(p));
  }
  if (r.ok() && m.buffer_policy > 2) r.fail("buffer policy out of range");
  if (r.ok() && (m.saves < FTJIT_SAVES_AUTO || m.saves > FTJIT_SAVES_ALL)) r.fail("saves out of range");
  if (r.ok() && m.plugins.empty()) r.fail("no plugin");
  if (r.ok() && (m.strategy < FTJIT_STRATEGY_AUTO || m.strategy > FTJIT_STRATEGY_GENERATED)) {
    r.fail("strategy out of range");
  }
  for (const auto& p : m.plugins) {
    if (r.ok() && p.path.empty()) r.fail("empty plugin path");
  }
  return r.finish("attach", std::move(m));
}

std::string encode(const Detach& m) {
  Writer w;
  w.put(m.report);
  w.put(m.unload);
  return w.take();
}

Result<Detach> decode_detach(std::string_view payload) {
  Reader r(payload);
  Detach m;
  m.report = r.flag();
  m.unload = r.flag();
  return r.finish("detach", std::move(m));
}

std::string encode(const StatusQuery& m) {
  Writer w;
  w.put(m.sites);
  return w.take();
}

std::string encode(const Control& m) {
  Writer w;
  w.put(m.has_paused);
  w.put(m.paused);
  w.put(m.has_depth);
  w.put(m.depth);
  w.put(m.has_sample);
  w.put(m.sample);
  w.put(m.has_min_duration);
  w.put(m.min_duration_ns);
  w.put(m.has_filter);
  w.strs(m.include);
  w.strs(m.exclude);
  w.put(m.flush);
  return w.take();
}

Result<Control> decode_control(std::string_view payload) {
  Reader r(payload);
  Control m;
  m.has_paused = r.flag();
  m.paused = r.flag();
  m.has_depth = r.flag();
  m.depth = r.get<uint32_t>();
  m.has_sample = r.flag();
  m.sample = r.get<uint32_t>();
  m.has_min_duration = r.flag();
  m.min_duration_ns = r.get<uint64_t>();
  m.has_filter = r.flag();
  m.include = r.strs();
  m.exclude = r.strs();
  m.flush = r.flag();
  return r.finish("control", std::move(m));
}

Result<StatusQuery> decode_status(std::string_view payload) {
  Reader r(payload);
  StatusQuery m;
  m.sites = r.flag();
  return r.finish("status", std::move(m));
}

std::string encode(const Generate& m) {
  Writer w;
  w.put(static_cast<uint8_t>(m.kind));
  const TrampolineRequest& t = m.trampoline;
  w.put(static_cast<uint8_t>(t.source));
  w.put(t.ops);
  w.put(t.func);
  w.put<uint8_t>(t.save_fp);
  w.put<uint8_t>(t.honour_direct);
  w.put(t.counts_tls_offset);
  w.put(t.recursion_drops);
  w.put(t.exit_trampoline);
  w.put(t.real_return);
  w.put<uint8_t>(t.entered_by_stub);
  w.put(t.call_and_land);
  w.put(t.exit_record);
  w.put(t.shadow_tls_offset);
  w.put(t.shadow_prune);
  w.put(t.shadow_push);
  w.put(m.exit.pop);
  w.put(m.exit.counts_tls_offset);
  w.put(m.exit.landing_offset);
  w.put(m.exit.shadow_tls_offset);
  w.put(m.exit.block_tls_offset);
  w.put(m.exit.clock_mult);
  w.put(m.exit.latency_landing_offset);
  w.put(m.place);
  w.put(m.entry);
  w.put(static_cast<uint8_t>(m.inline_request.action));
  w.put(m.inline_request.block_tls_offset);
  w.put(m.inline_request.shadow_tls_offset);
  w.put(m.inline_request.exit_trampoline);
  w.put(m.inline_request.counts_tls_offset);
  w.put(m.inline_request.sample_period);
  w.put(m.inline_request.pending_tls_offset);
  w.put<uint8_t>(t.saves_all);
  w.str(m.relocation.path);
  w.put(m.relocation.load_bias);
  w.put(m.relocation.entry);
  w.put(m.relocation.place);
  w.put(m.relocation.max_bytes);
  w.put(m.relocation.stub);
  w.str(m.module.path);
  w.put(m.module.size);
  w.put(m.module.fingerprint);
  return w.take();
}

Result<Generate> decode_generate(std::string_view payload) {
  Reader r(payload);
  Generate m;
  const uint8_t kind = r.get<uint8_t>();
  if (kind > static_cast<uint8_t>(GenerateKind::kProducers)) r.fail("generate kind out of range");
  m.kind = static_cast<GenerateKind>(kind);
  TrampolineRequest& t = m.trampoline;
  uint8_t source = r.get<uint8_t>();
  if (source > static_cast<uint8_t>(OpsSource::kSiteSlot)) r.fail("ops source out of range");
  t.source = static_cast<OpsSource>(source);
  t.ops = r.get<uint64_t>();
  t.func = r.get<uint64_t>();
  t.save_fp = r.flag() != 0;
  t.honour_direct = r.flag() != 0;
  t.counts_tls_offset = r.get<int64_t>();
  t.recursion_drops = r.get<uint64_t>();
  t.exit_trampoline = r.get<uint64_t>();
  t.real_return = r.get<uint64_t>();
  t.entered_by_stub = r.flag() != 0;
  t.call_and_land = r.get<uint64_t>();
  t.exit_record = r.get<uint64_t>();
  t.shadow_tls_offset = r.get<int64_t>();
  t.shadow_prune = r.get<uint64_t>();
  t.shadow_push = r.get<uint64_t>();
  m.exit.pop = r.get<uint64_t>();
  m.exit.counts_tls_offset = r.get<int64_t>();
  m.exit.landing_offset = r.get<uint32_t>();
  m.exit.shadow_tls_offset = r.get<int64_t>();
  m.exit.block_tls_offset = r.get<int64_t>();
  m.exit.clock_mult = r.get<uint64_t>();
  m.exit.latency_landing_offset = r.get<uint32_t>();
  m.place = r.get<uint64_t>();
  m.entry = r.get<uint64_t>();
  const uint8_t action = r.get<uint8_t>();
  if (r.ok() && action != static_cast<uint8_t>(InlineAction::kCount) &&
      action != static_cast<uint8_t>(InlineAction::kLatency)) {
    r.fail("inline action out of range");
  }
  m.inline_request.action = static_cast<InlineAction>(action);
  m.inline_request.block_tls_offset = r.get<int64_t>();
  m.inline_request.shadow_tls_offset = r.get<int64_t>();
  m.inline_request.exit_trampoline = r.get<uint64_t>();
  m.inline_request.counts_tls_offset = r.get<int64_t>();
  m.inline_request.sample_period = r.get<uint32_t>();
  m.inline_request.pending_tls_offset = r.get<int64_t>();
  if (r.ok() && m.inline_request.sample_period > kMaxInlineSample) r.fail("inline sample period out of range");
  t.saves_all = r.flag() != 0;
  m.relocation.path = r.str();
  m.relocation.load_bias = r.get<uint64_t>();
  m.relocation.entry = r.get<uint64_t>();
  m.relocation.place = r.get<uint64_t>();
  m.relocation.max_bytes = r.get<uint32_t>();
  m.relocation.stub = r.get<uint64_t>();
  m.module.path = r.str();
  m.module.size = r.get<uint64_t>();
  m.module.fingerprint = r.get<uint64_t>();
  return r.finish("generate", std::move(m));
}

std::string encode(const Generated& m) {
  Writer w;
  w.put(m.code);
  w.str(m.message);
  w.str(m.bytes);
  return w.take();
}

std::string encode_site_code(const SiteCode& code) {
  Writer w;
  w.str(std::string(reinterpret_cast<const char*>(code.init.bytes), code.init.size));
  w.str(std::string(reinterpret_cast<const char*>(code.call.bytes), code.call.size));
  w.str(std::string(code.stub.begin(), code.stub.end()));
  return w.take();
}

Result<SiteCode> decode_site_code(std::string_view bytes) {
  Reader r(bytes);
  SiteCode code;
  const std::string init = r.str(), call = r.str(), stub = r.str();
  if (r.ok() && (init.size() > sizeof code.init.bytes || call.size() > sizeof code.call.bytes)) {
    r.fail("site instruction too long");
  }
  if (r.ok()) {
    std::memcpy(code.init.bytes, init.data(), init.size());
    code.init.size = static_cast<uint8_t>(init.size());
    std::memcpy(code.call.bytes, call.data(), call.size());
    code.call.size = static_cast<uint8_t>(call.size());
    code.stub.assign(stub.begin(), stub.end());
  }
  return r.finish("site code", std::move(code));
}

std::string encode_relocated_entry(const RelocatedEntry& e) {
  Writer w;
  w.put(e.patch_at);
  w.put(e.overwritten);
  w.str(std::string(e.original.begin(), e.original.end()));
  w.str(std::string(e.before_sled.begin(), e.before_sled.end()));
  w.str(std::string(e.bytes.begin(), e.bytes.end()));
  w.str(std::string(e.branch.begin(), e.branch.end()));
  w.put<uint32_t>(static_cast<uint32_t>(e.moved_to.size()));
  for (const auto& [from, to] : e.moved_to) {
    w.put(from);
    w.put(to);
  }
  return w.take();
}

Result<RelocatedEntry> decode_relocated_entry(std::string_view bytes) {
  Reader r(bytes);
  RelocatedEntry e;
  e.patch_at = r.get<uint64_t>();
  e.overwritten = r.get<uint32_t>();
  const std::string original = r.str(), before = r.str(), copy = r.str(), branch = r.str();
  const uint32_t n = r.get<uint32_t>();
  // An entry moves a few instructions: anything larger is not ours.
  if (r.ok() && (n > 64 || e.overwritten != original.size() || e.overwritten > 64 || branch.size() > e.overwritten))
    r.fail("relocated entry malformed");
  for (uint32_t i = 0; i < n && r.ok(); ++i) {
    const uint64_t from = r.get<uint64_t>();
    const uint64_t to = r.get<uint64_t>();
    e.moved_to.emplace_back(from, to);
  }
  e.original.assign(original.begin(), original.end());
  e.before_sled.assign(before.begin(), before.end());
  e.bytes.assign(copy.begin(), copy.end());
  e.branch.assign(branch.begin(), branch.end());
  return r.finish("relocated entry", std::move(e));
}

std::string encode_producers(const std::vector<CompileUnitProducer>& units) {
  std::vector<std::pair<const CompileUnitProducer*, uint32_t>> distinct;
  for (const CompileUnitProducer& u : units) {
    auto same = std::find_if(distinct.begin(), distinct.end(), [&u](const auto& d) {
      return d.first->producer == u.producer && d.first->version == u.version && d.first->has_code == u.has_code;
    });
    if (same != distinct.end()) {
      ++same->second;
    } else {
      distinct.emplace_back(&u, 1);
    }
  }
  Writer w;
  w.put<uint32_t>(static_cast<uint32_t>(distinct.size()));
  for (const auto& [u, n] : distinct) {
    w.str(u->producer);
    w.put(u->version);
    w.put<uint8_t>(u->has_code);
    w.put(n);
  }
  return w.take();
}

Result<std::vector<CompileUnitProducer>> decode_producers(std::string_view bytes) {
  Reader r(bytes);
  std::vector<CompileUnitProducer> units;
  const uint32_t distinct = r.get<uint32_t>();
  if (r.ok() && distinct > kMaxList) r.fail("too many producers");
  uint64_t total = 0;
  for (uint32_t i = 0; i < distinct && r.ok(); ++i) {
    CompileUnitProducer u;
    u.producer = r.str();
    u.version = r.get<uint16_t>();
    u.has_code = r.flag() != 0;
    const uint32_t n = r.get<uint32_t>();
    total += n;
    // A million units is beyond any binary's; a count past it is not ours.
    if (r.ok() && (n == 0 || total > (1u << 20))) r.fail("producer count out of range");
    if (r.ok()) units.insert(units.end(), n, u);
  }
  return r.finish("producers", std::move(units));
}

Result<Generated> decode_generated(std::string_view payload) {
  Reader r(payload);
  Generated m;
  m.code = r.get<int32_t>();
  m.message = r.str();
  m.bytes = r.str();
  if (r.ok() && m.code == 0 && m.bytes.empty()) r.fail("no code");
  // A trampoline is small; anything bigger is not one of ours.
  if (r.ok() && m.bytes.size() > 64 * 1024) r.fail("code too large");
  return r.finish("generated", std::move(m));
}

std::string encode(const Reply& m) {
  Writer w;
  w.put(m.code);
  w.str(m.message);
  w.str(m.text);
  w.put(m.sites);
  w.put(m.recursion_drops);
  w.put(m.events_dropped);
  w.put(m.events_overwritten);
  w.put(m.buffer_waits);
  w.put(m.buffer_wait_ns);
  w.put(m.buffer_timeouts);
  w.str(m.writer);
  w.put<uint32_t>(static_cast<uint32_t>(m.phases.size()));
  for (const auto& [name, micros] : m.phases) {
    w.str(name);
    w.put(micros);
  }
  w.strs(m.warnings);
  return w.take();
}

Result<Reply> decode_reply(std::string_view payload) {
  Reader r(payload);
  Reply m;
  m.code = r.get<int32_t>();
  m.message = r.str();
  m.text = r.str();
  m.sites = r.get<uint64_t>();
  m.recursion_drops = r.get<uint64_t>();
  m.events_dropped = r.get<uint64_t>();
  m.events_overwritten = r.get<uint64_t>();
  m.buffer_waits = r.get<uint64_t>();
  m.buffer_wait_ns = r.get<uint64_t>();
  m.buffer_timeouts = r.get<uint64_t>();
  m.writer = r.str();
  const uint32_t phases = r.count();
  for (uint32_t i = 0; i < phases && r.ok(); ++i) {
    std::string name = r.str();
    m.phases.emplace_back(std::move(name), r.get<uint64_t>());
  }
  m.warnings = r.strs();
  return r.finish("reply", std::move(m));
}

}  // namespace ftjit::control
