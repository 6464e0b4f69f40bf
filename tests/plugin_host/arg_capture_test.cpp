// SPDX-License-Identifier: MIT
// ArgCapturer (runtime/plugin_host/arg_capture.h) on registers and stacks
// made up here: what each kind of value records and shows, bad pointers,
// bounds, --when conditions, and the capture spec's trip through the
// Attach message (its decoder refuses what it cannot trust).
#include <sys/mman.h>

#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "runtime/control/protocol.h"
#include "runtime/plugin_host/arg_capture.h"
#include "runtime/plugin_host/arg_capture_plan.h"
#include "runtime/plugin_host/host_internal.h"

namespace ftjit::plugins {
namespace {

ValueType scalar(ValueKind kind, uint32_t size, const char* name, bool is_signed = false) {
  ValueType t;
  t.kind = kind;
  t.size = size;
  t.align = size;
  t.name = name;
  t.is_signed = is_signed;
  return t;
}

ArgPlace reg(ArgSource source, uint16_t index, uint8_t size = 8) {
  ArgPlace p;
  p.pieces.push_back({source, index, size, 0});
  return p;
}

// f(int8_t a, unsigned short b, bool ok, char c, enum color e, double d,
//   const char *s, struct point p, long on_stack) -> long
CapturedFunction sample(uint64_t ip) {
  CapturedFunction f;
  f.ip = ip;
  FunctionSignature& sig = f.signature;
  sig.name = "sample";
  ValueType color = scalar(ValueKind::kEnum, 4, "enum color");
  color.enumerators = {{0, "RED"}, {5, "GREEN"}};
  ValueType point = scalar(ValueKind::kStruct, 8, "struct point");
  point.members = {{"x", 0, ValueKind::kSigned, 4, {}}, {"y", 4, ValueKind::kSigned, 4, {}}};
  sig.params = {{"a", scalar(ValueKind::kSigned, 1, "int8_t"), false},
                {"b", scalar(ValueKind::kUnsigned, 2, "unsigned short"), false},
                {"ok", scalar(ValueKind::kBool, 1, "bool"), false},
                {"c", scalar(ValueKind::kChar, 1, "char", true), false},
                {"e", color, false},
                {"d", scalar(ValueKind::kFloat, 8, "double"), false},
                {"s", scalar(ValueKind::kString, 8, "const char *"), false},
                {"p", point, false},
                {"on_stack", scalar(ValueKind::kSigned, 8, "long", true), false},
                {"gone", scalar(ValueKind::kSigned, 4, "int", true), false}};
  sig.ret = scalar(ValueKind::kSigned, 8, "long", true);
  f.placed.params = {reg(ArgSource::kIntReg, 0, 1), reg(ArgSource::kIntReg, 1, 2), reg(ArgSource::kIntReg, 2, 1),
                     reg(ArgSource::kIntReg, 3, 1), reg(ArgSource::kIntReg, 4, 4), reg(ArgSource::kFpReg, 0),
                     reg(ArgSource::kIntReg, 5), reg(ArgSource::kIntReg, 6), reg(ArgSource::kStack, 8)};
  ArgPlace gone;
  gone.unavailable = true;
  gone.why = "optimised out";
  f.placed.params.push_back(gone);
  f.placed.ret = reg(ArgSource::kRetInt, 0);
  return f;
}

struct Frame {
  ftjit_regs regs{};
  // [0]: the return address (x86-64). As deep as the capture reads a
  // caller's frame directly (kDirectStackBytes): a plan decoded from
  // random bytes may ask for any slot up to there.
  uint64_t stack[capture::kDirectStackBytes / 8 + 4] = {};
};

Frame frame_for(const char* s) {
  Frame f;
  f.regs.arg[0] = 0xfd;  // -3 in its low byte; the rest is junk the ABI allows
  f.regs.arg[1] = 0xdead0000ffffull;
  f.regs.arg[2] = 1;
  f.regs.arg[3] = 'q';
  f.regs.arg[4] = 5;
  const double d = -0.75;
  std::memcpy(f.regs.fp[0], &d, 8);
  f.regs.arg[5] = reinterpret_cast<uint64_t>(s);
  f.regs.arg[6] = (uint64_t{static_cast<uint32_t>(-4)} << 32) | 3u;
  f.stack[1] = static_cast<uint64_t>(-77);
  f.regs.sp = reinterpret_cast<uint64_t>(&f.stack[0]);
  return f;
}

TEST(ArgCapture, EachKindIsShownByItsType) {
  ArgCaptureSpec spec;
  spec.functions.push_back(sample(0x1000));
  ArgCapturer capturer(spec);
  ASSERT_FALSE(capturer.empty());
  EXPECT_TRUE(capturer.reads_fp_at_entry());
  std::vector<uint8_t> record(capturer.max_record());
  Frame f = frame_for("hi\n\"there\"");
  const uint32_t n = capturer.capture_entry(0x1000, &f.regs, record.data(), record.size());
  ASSERT_GT(n, 0u);
  EXPECT_EQ(capturer.text(0x1000, record.data(), n),
            "a=-3, b=65535, ok=true, c='q', e=GREEN, d=-0.75, s=\"hi\\n\\\"there\\\"\", p={x=3, y=-4}, "
            "on_stack=-77, gone=<optimised out>");
  ftjit_ret_regs ret{};
  ret.ret[0] = static_cast<uint64_t>(-12345);
  const uint32_t m = capturer.capture_exit(0x1000, &ret, record.data(), record.size());
  ASSERT_GT(m, 0u);
  EXPECT_EQ(capturer.text(0x1000, record.data(), m), "-12345");
  // Not a captured function: nothing.
  EXPECT_EQ(capturer.capture_entry(0x2000, &f.regs, record.data(), record.size()), 0u);
  // No room: nothing, never a write past `cap`.
  EXPECT_EQ(capturer.capture_entry(0x1000, &f.regs, record.data(), n - 1), 0u);
}

// Integers and pointers in registers take the event path's fast copy
// (whole words): a narrow value is still read back at its own size.
TEST(ArgCapture, RegisterWordsShowAtTheirOwnWidth) {
  CapturedFunction f;
  f.ip = 0x3000;
  f.signature.params = {{"i", scalar(ValueKind::kSigned, 4, "int", true), false},
                        {"u", scalar(ValueKind::kUnsigned, 2, "unsigned short"), false},
                        {"p", scalar(ValueKind::kPointer, 8, "void *"), false},
                        {"l", scalar(ValueKind::kSigned, 8, "long", true), false}};
  f.signature.ret = scalar(ValueKind::kSigned, 4, "int", true);
  f.placed.params = {reg(ArgSource::kIntReg, 0, 4), reg(ArgSource::kIntReg, 1, 2), reg(ArgSource::kIntReg, 2),
                     reg(ArgSource::kIntReg, 3)};
  f.placed.ret = reg(ArgSource::kRetInt, 0, 4);
  ArgCaptureSpec spec;
  spec.functions.push_back(f);
  ArgCapturer capturer(spec);
  ftjit_regs regs{};
  regs.arg[0] = 0xabcdef01fffffff6ull;  // -10 in the low 32 bits
  regs.arg[1] = 0x1234000000010007ull;  // 7 in the low 16
  regs.arg[2] = 0x7ffd1000;
  regs.arg[3] = static_cast<uint64_t>(-5);
  std::vector<uint8_t> record(capturer.max_record());
  const uint32_t n = capturer.capture_entry(0x3000, &regs, record.data(), record.size());
  ASSERT_EQ(n, kArgRecordHeader + 32);
  EXPECT_EQ(capturer.text(0x3000, record.data(), n), "i=-10, u=7, p=0x7ffd1000, l=-5");
  ftjit_ret_regs ret{};
  ret.ret[0] = 0xffffffff00000029ull;
  const uint32_t m = capturer.capture_exit(0x3000, &ret, record.data(), record.size());
  EXPECT_EQ(capturer.text(0x3000, record.data(), m), "41");
}

TEST(ArgCapture, BadStringsAreStatesNotFaults) {
  ArgCaptureSpec spec;
  spec.string_max = 8;
  spec.functions.push_back(sample(0x1000));
  ArgCapturer capturer(spec);
  std::vector<uint8_t> record(capturer.max_record());
  void* page = mmap(nullptr, 8192, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(page, MAP_FAILED);
  auto* bytes = static_cast<char*>(page);
  ASSERT_EQ(mprotect(bytes + 4096, 4096, PROT_NONE), 0);
  auto shown_string = [&](const char* s) {
    Frame f = frame_for(s);
    const uint32_t n = capturer.capture_entry(0x1000, &f.regs, record.data(), record.size());
    for (const ShownValue& v : capturer.values(0x1000, record.data(), n)) {
      if (v.name == "s") return v.text;
    }
    return std::string("(none)");
  };
  EXPECT_EQ(shown_string(nullptr), "NULL");
  EXPECT_EQ(shown_string(bytes + 4096), "<unreadable " + [&] {
    char b[32];
    std::snprintf(b, sizeof b, "%p", static_cast<void*>(bytes + 4096));
    return std::string(b) + ">";
  }());
  std::memcpy(bytes, "0123456789", 11);
  EXPECT_EQ(shown_string(bytes), "\"01234567\"...");  // longer than the bound
  // Three readable bytes, no NUL, then the unreadable page.
  std::memcpy(bytes + 4093, "abc", 3);
  EXPECT_EQ(shown_string(bytes + 4093), "\"abc\"<unreadable>");
  munmap(page, 8192);
}

TEST(ArgCapture, ConditionsSelectCalls) {
  ArgCaptureSpec spec;
  spec.functions.push_back(sample(0x1000));
  spec.conditions.push_back({0x1000, 0, ConditionOp::kLt, -2, ""});        // a < -2
  spec.conditions.push_back({0x1000, 6, ConditionOp::kPrefix, 0, "he"});   // s ^= "he"
  spec.conditions.push_back({0x1000, 4, ConditionOp::kEq, 5, ""});         // e == GREEN
  ArgCapturer capturer(spec);
  std::vector<uint8_t> record(capturer.max_record());
  Frame yes = frame_for("hello");
  EXPECT_NE(capturer.capture_entry(0x1000, &yes.regs, record.data(), record.size()), kArgsFiltered);
  Frame no = frame_for("world");
  EXPECT_EQ(capturer.capture_entry(0x1000, &no.regs, record.data(), record.size()), kArgsFiltered);
  Frame small = frame_for("hello");
  small.regs.arg[0] = 0x05;  // a = 5
  EXPECT_EQ(capturer.capture_entry(0x1000, &small.regs, record.data(), record.size()), kArgsFiltered);
  Frame null = frame_for(nullptr);
  EXPECT_EQ(capturer.capture_entry(0x1000, &null.regs, record.data(), record.size()), kArgsFiltered);
}

TEST(ArgCapture, TheSpecTravelsInTheAttachRequest) {
  control::Attach a;
  a.plugins.push_back({"/x/trace.so", {}});
  a.args.string_max = 48;
  a.args.functions.push_back(sample(0x1000));
  a.args.conditions.push_back({0x1000, 6, ConditionOp::kPrefix, 0, "he"});
  const std::string bytes = control::encode(a);
  auto back = control::decode_attach(bytes);
  ASSERT_TRUE(back.ok()) << back.error().message;
  ASSERT_EQ(back->args.functions.size(), 1u);
  ArgCapturer original(a.args), decoded(back->args);
  Frame f = frame_for("hello");
  std::vector<uint8_t> r1(original.max_record()), r2(decoded.max_record());
  const uint32_t n1 = original.capture_entry(0x1000, &f.regs, r1.data(), r1.size());
  const uint32_t n2 = decoded.capture_entry(0x1000, &f.regs, r2.data(), r2.size());
  ASSERT_EQ(n1, n2);
  EXPECT_EQ(original.text(0x1000, r1.data(), n1), decoded.text(0x1000, r2.data(), n2));
  // Every truncation fails cleanly; random bytes never crash the decoder,
  // and whatever it accepts compiles into plans that stay in their records.
  for (size_t cut = 0; cut < bytes.size(); cut += 7) EXPECT_FALSE(control::decode_attach(bytes.substr(0, cut)).ok());
  std::mt19937 rng(11);
  for (int round = 0; round < 3000; ++round) {
    std::string b = bytes;
    for (int k = 0; k < 1 + round % 5; ++k) b[rng() % b.size()] = static_cast<char>(rng());
    auto got = control::decode_attach(b);
    if (!got.ok()) continue;
    ArgCapturer c(got->args);
    std::vector<uint8_t> r(c.max_record() + 1);
    Frame g = frame_for("hello");
    for (const CapturedFunction& fn : got->args.functions) {
      const uint32_t n = c.capture_entry(fn.ip, &g.regs, r.data(), static_cast<uint32_t>(r.size()));
      if (n != 0 && n != kArgsFiltered) {
        ASSERT_LE(n, r.size());
        (void)c.text(fn.ip, r.data(), n);
      }
    }
  }
}

// --by-arg: the key of each kind is the value's own bits (junk above a
// narrow value's width ignored), shown back by the parameter's type.
TEST(ArgKey, EachKindKeysByItsValue) {
  auto keyed = [](const char* name) {
    ArgCaptureSpec spec;
    spec.functions.push_back(sample(0x1000));
    spec.by_arg = name;
    return std::make_unique<ArgCapturer>(spec);
  };
  auto shown = [](const ArgCapturer& c, uint64_t key) {
    ShownValue v;
    EXPECT_TRUE(c.key_value(0x1000, key, &v));
    return v;
  };
  Frame f = frame_for("hello");
  uint64_t key = 99;
  {
    auto c = keyed("a");  // int8_t in the low byte of a register
    ASSERT_TRUE(c->has_keys());
    EXPECT_EQ(c->key_name(), "a");
    ASSERT_TRUE(c->key_of(0x1000, &f.regs, &key));
    EXPECT_EQ(key, 0xfdu);
    Frame junk = f;
    junk.regs.arg[0] = 0x1234567800ffeefdull;  // the same -3, other bits above it
    uint64_t key2 = 0;
    ASSERT_TRUE(c->key_of(0x1000, &junk.regs, &key2));
    EXPECT_EQ(key2, key);
    const ShownValue v = shown(*c, key);
    EXPECT_EQ(v.name, "a");
    EXPECT_EQ(v.text, "-3");
    EXPECT_EQ(v.type, ShownValue::Type::kInt);
    EXPECT_EQ(v.i, -3);
    // Not a function with it: false, key 0.
    EXPECT_FALSE(c->key_of(0x2000, &f.regs, &key));
    EXPECT_EQ(key, 0u);
    ShownValue none;
    EXPECT_FALSE(c->key_value(0x2000, 0, &none));
  }
  {
    auto c = keyed("b");
    ASSERT_TRUE(c->key_of(0x1000, &f.regs, &key));
    EXPECT_EQ(key, 0xffffu);
    EXPECT_EQ(shown(*c, key).text, "65535");
  }
  {
    auto c = keyed("ok");  // a bool's byte, whatever is above it
    Frame t = f;
    t.regs.arg[2] = 0xff00000001ull;
    ASSERT_TRUE(c->key_of(0x1000, &t.regs, &key));
    EXPECT_EQ(key, 1u);
    EXPECT_EQ(shown(*c, key).text, "true");
    t.regs.arg[2] = 0x100;
    ASSERT_TRUE(c->key_of(0x1000, &t.regs, &key));
    EXPECT_EQ(shown(*c, key).text, "false");
  }
  {
    auto c = keyed("c");
    ASSERT_TRUE(c->key_of(0x1000, &f.regs, &key));
    EXPECT_EQ(shown(*c, key).text, "'q'");
  }
  {
    auto c = keyed("e");  // an enum by its enumerator's name, else its number
    ASSERT_TRUE(c->key_of(0x1000, &f.regs, &key));
    EXPECT_EQ(key, 5u);
    EXPECT_EQ(shown(*c, key).text, "GREEN");
    EXPECT_EQ(shown(*c, 7).text, "7");
  }
  {
    auto c = keyed("on_stack");  // a stack slot above the entry's sp
    ASSERT_TRUE(c->key_of(0x1000, &f.regs, &key));
    EXPECT_EQ(shown(*c, key).text, "-77");
  }
  // What cannot be a key leaves the function one group: a double, a
  // struct, a parameter the convention cannot place, a name it lacks.
  for (const char* name : {"d", "p", "gone", "nope"}) {
    auto c = keyed(name);
    EXPECT_FALSE(c->has_keys()) << name;
    EXPECT_FALSE(c->key_of(0x1000, &f.regs, &key)) << name;
  }
  // No --by-arg: no keys.
  ArgCaptureSpec plain;
  plain.functions.push_back(sample(0x1000));
  EXPECT_FALSE(ArgCapturer(plain).has_keys());
}

TEST(ArgKey, StringsKeyByTheirContent) {
  ArgCaptureSpec spec;
  spec.functions.push_back(sample(0x1000));
  spec.by_arg = "s";
  ArgCapturer c(spec);
  ASSERT_TRUE(c.has_keys());
  auto key_of = [&](const char* s) {
    Frame f = frame_for(s);
    uint64_t key = 0;
    EXPECT_TRUE(c.key_of(0x1000, &f.regs, &key));
    return key;
  };
  auto text_of = [&](uint64_t key) {
    ShownValue v;
    EXPECT_TRUE(c.key_value(0x1000, key, &v));
    return v.text;
  };
  char one[] = "alpha", two[] = "alpha", other[] = "beta";
  const uint64_t k1 = key_of(one), k2 = key_of(two), k3 = key_of(other);
  EXPECT_EQ(k1, k2);  // other addresses, the same bytes
  EXPECT_NE(k1, k3);
  EXPECT_GE(k1, 2u);
  EXPECT_EQ(text_of(k1), "\"alpha\"");
  EXPECT_EQ(text_of(k3), "\"beta\"");
  // The bytes were kept at the first call: changing them after does not
  // change what the key shows.
  std::memcpy(one, "gamma", 6);
  EXPECT_EQ(text_of(k1), "\"alpha\"");
  EXPECT_EQ(key_of(nullptr), 0u);
  EXPECT_EQ(text_of(0), "NULL");
  void* page = mmap(nullptr, 8192, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(page, MAP_FAILED);
  auto* bytes = static_cast<char*>(page);
  ASSERT_EQ(mprotect(bytes + 4096, 4096, PROT_NONE), 0);
  EXPECT_EQ(key_of(bytes + 4096), 1u);  // unreadable: a key, never a fault
  EXPECT_EQ(text_of(1), "<unreadable>");
  std::memcpy(bytes + 4093, "abc", 3);  // no NUL before the unreadable page
  EXPECT_EQ(key_of(bytes + 4093), 1u);
  // Past kStringKeyBytes: the first 64 bytes are the key.
  std::memset(bytes, 'x', 200);
  bytes[200] = 0;
  const uint64_t long1 = key_of(bytes);
  bytes[100] = 'y';
  EXPECT_EQ(key_of(bytes), long1);
  EXPECT_EQ(text_of(long1), "\"" + std::string(kStringKeyBytes, 'x') + "\"...");
  bytes[64] = 0;  // exactly 64 bytes, then the NUL: not the longer one
  EXPECT_NE(key_of(bytes), long1);
  munmap(page, 8192);
}

// The host service plugins call (ftjit_host::arg_key, arg_key_name,
// arg_key_value) over an instance whose session groups by `e`.
TEST(ArgKey, HostServicesGiveAndShowKeys) {
  ArgCaptureSpec spec;
  spec.functions.push_back(sample(0x1000));
  spec.by_arg = "e";
  ArgCapturer capturer(spec);
  const ftjit_host* host = detail::host_table();
  ASSERT_GE(host->struct_size, offsetof(ftjit_host, arg_key_value) + sizeof(host->arg_key_value));
  detail::Instance inst;
  inst.ctx.instance = &inst;
  Frame f = frame_for("x");
  uint64_t key = 99;
  // A session without --by-arg: no name, no key.
  EXPECT_EQ(host->arg_key_name(&inst.ctx), nullptr);
  EXPECT_EQ(host->arg_key(&inst.ctx, 0x1000, reinterpret_cast<const ftjit_plugin_regs*>(&f.regs), &key), 0);
  EXPECT_EQ(key, 0u);
  inst.keys = &capturer;
  EXPECT_STREQ(host->arg_key_name(&inst.ctx), "e");
  EXPECT_EQ(host->arg_key(&inst.ctx, 0x1000, reinterpret_cast<const ftjit_plugin_regs*>(&f.regs), &key), 1);
  EXPECT_EQ(key, 5u);
  EXPECT_EQ(host->arg_key(&inst.ctx, 0x2000, reinterpret_cast<const ftjit_plugin_regs*>(&f.regs), &key), 0);
  struct Seen {
    std::string name, text;
    uint32_t type = 0;
    int visits = 0;
  } seen;
  auto visit = [](const ftjit_arg_value* v, void* arg) {
    auto* s = static_cast<Seen*>(arg);
    s->name = v->name;
    s->text = v->text;
    s->type = v->type;
    ++s->visits;
  };
  EXPECT_EQ(host->arg_key_value(&inst.ctx, 0x1000, 5, visit, &seen), 1);
  EXPECT_EQ(seen.visits, 1);
  EXPECT_EQ(seen.name, "e");
  EXPECT_EQ(seen.text, "GREEN");
  EXPECT_EQ(seen.type, uint32_t{FTJIT_ARG_TEXT});
  EXPECT_EQ(host->arg_key_value(&inst.ctx, 0x2000, 5, visit, &seen), 0);
  EXPECT_EQ(seen.visits, 1);
}

// args_capture_hint / retval_capture_hint (one lookup per call): the
// entry's hint leads to the same records as the lookups; no hint (0) and a
// hint of another function cost a lookup, never a wrong record; a function
// that captures nothing gets FTJIT_ARGS_HINT_NONE, and no record at exit.
TEST(ArgCapture, HintedServicesGiveTheLookupsRecords) {
  ArgCaptureSpec spec;
  spec.functions.push_back(sample(0x1000));
  CapturedFunction plain;  // whole integer words: the fast copy
  plain.ip = 0x3000;
  plain.signature.name = "plain";
  plain.signature.params = {{"x", scalar(ValueKind::kSigned, 8, "long", true), false}};
  plain.signature.ret = scalar(ValueKind::kSigned, 8, "long", true);
  plain.placed.params = {reg(ArgSource::kIntReg, 0)};
  plain.placed.ret = reg(ArgSource::kRetInt, 0);
  spec.functions.push_back(plain);
  ArgCapturer capturer(spec);
  const ftjit_host* host = detail::host_table();
  ASSERT_GE(host->struct_size, offsetof(ftjit_host, retval_capture_hint) + sizeof(host->retval_capture_hint));
  detail::Instance inst;
  inst.ctx.instance = &inst;
  inst.bind_args(capturer);
  Frame f = frame_for("hint");
  const auto* regs = reinterpret_cast<const ftjit_plugin_regs*>(&f.regs);
  ftjit_ret_regs ret{};
  ret.ret[0] = 41;
  const auto* ret_regs = reinterpret_cast<const ftjit_plugin_ret*>(&ret);
  std::vector<uint8_t> want(inst.args_room), got(inst.args_room);
  for (const uint64_t ip : {uint64_t{0x1000}, uint64_t{0x3000}}) {
    SCOPED_TRACE(ip);
    uint64_t hint = 0;
    const uint32_t n = host->args_capture_hint(&inst.ctx, ip, regs, got.data(), &hint);
    ASSERT_GT(n, 0u);
    EXPECT_NE(hint, 0u);
    EXPECT_NE(hint, FTJIT_ARGS_HINT_NONE);
    ASSERT_EQ(capturer.capture_entry(ip, &f.regs, want.data(), static_cast<uint32_t>(want.size())), n);
    EXPECT_EQ(capturer.text(ip, got.data(), n), capturer.text(ip, want.data(), n));
    const uint32_t m = capturer.capture_exit(ip, &ret, want.data(), static_cast<uint32_t>(want.size()));
    ASSERT_GT(m, 0u);
    const uint64_t other = ip == 0x1000 ? 0x3000 : 0x1000;
    uint64_t other_hint = 0;
    host->args_capture_hint(&inst.ctx, other, regs, got.data(), &other_hint);
    for (const uint64_t h : {hint, uint64_t{0}, other_hint, uint64_t{1} << 40}) {
      std::fill(got.begin(), got.end(), 0xee);
      EXPECT_EQ(host->retval_capture_hint(&inst.ctx, ip, h, ret_regs, got.data()), m) << h;
      EXPECT_EQ(capturer.text(ip, got.data(), m), "41") << h;
    }
  }
  uint64_t hint = 0;
  EXPECT_EQ(host->args_capture_hint(&inst.ctx, 0x2000, regs, got.data(), &hint), 0u);
  EXPECT_EQ(hint, FTJIT_ARGS_HINT_NONE);
  EXPECT_EQ(host->retval_capture_hint(&inst.ctx, 0x2000, hint, ret_regs, got.data()), 0u);
  EXPECT_EQ(host->retval_capture_hint(&inst.ctx, 0x2000, 0, ret_regs, got.data()), 0u);
  // The hint is optional.
  EXPECT_GT(host->args_capture_hint(&inst.ctx, 0x3000, regs, got.data(), nullptr), 0u);
}

// The SDK's own captures (ftjit_args_fast_*, what the trace plugin makes
// without calling the host) on the host's table: the same hints as
// args_capture_hint, byte for byte the same records, and
// FTJIT_ARGS_ASK_HOST for every case they do not make (a string, an FP or
// stack argument, a --when condition, a hint that is not the function's).
TEST(ArgCapture, PluginsOwnCapturesMatchTheHosts) {
  ArgCaptureSpec spec;
  spec.functions.push_back(sample(0x1000));  // strings, FP, the stack: the host's
  auto ints = [](uint64_t ip, std::vector<uint16_t> regs, bool returns) {
    CapturedFunction f;
    f.ip = ip;
    f.signature.name = "f" + std::to_string(ip);
    for (size_t k = 0; k < regs.size(); ++k) {
      f.signature.params.push_back({"x" + std::to_string(k), scalar(ValueKind::kSigned, 8, "long", true), false});
      f.placed.params.push_back(reg(ArgSource::kIntReg, regs[k]));
    }
    if (returns) {
      f.signature.ret = scalar(ValueKind::kSigned, 8, "long", true);
      f.placed.ret = reg(ArgSource::kRetInt, 0);
    }  // else void: no signature.ret
    return f;
  };
  spec.functions.push_back(ints(0x3000, {0, 1, 2, 3}, true));           // in order
  spec.functions.push_back(ints(0x4000, {2, 0}, true));                 // out of order
  spec.functions.push_back(ints(0x5000, {0, 1}, true));                 // a --when below
  spec.functions.push_back(ints(0x6000, {0, 1, 2, 3, 4, 5, 6, 7}, false));  // void, eight
  spec.conditions.push_back({0x5000, 0, ConditionOp::kGt, 0, ""});
  // Enough more that the table's probes wrap and collide.
  std::mt19937_64 rng(5);
  std::vector<uint64_t> ips = {0x1000, 0x3000, 0x4000, 0x5000, 0x6000};
  for (int k = 0; k < 300; ++k) {
    const uint64_t ip = 0x7f0000000000ull + (rng() & 0xffffff) * 16;
    spec.functions.push_back(ints(ip, {0, 1}, k % 3 != 0));
    ips.push_back(ip);
  }
  ArgCapturer capturer(spec);
  const ftjit_host* host = detail::host_table();
  ASSERT_GE(host->struct_size, offsetof(ftjit_host, args_fast_table) + sizeof(host->args_fast_table));
  detail::Instance inst;
  inst.ctx.instance = &inst;
  EXPECT_EQ(host->args_fast_table(&inst.ctx), nullptr);  // nothing captured
  inst.bind_args(capturer);
  const ftjit_args_fast_table* table = host->args_fast_table(&inst.ctx);
  ASSERT_NE(table, nullptr);

  Frame f = frame_for("fast");
  for (uint64_t& a : f.regs.arg) a ^= rng();
  const auto* regs = reinterpret_cast<const ftjit_plugin_regs*>(&f.regs);
  ftjit_ret_regs ret{};
  ret.ret[0] = rng();
  const auto* ret_regs = reinterpret_cast<const ftjit_plugin_ret*>(&ret);
  std::vector<uint8_t> want(inst.args_room), got(inst.args_room);
  int made[2] = {0, 0};  // entries, returns made by the plugin's own code
  for (const uint64_t ip : ips) {
    SCOPED_TRACE(ip);
    uint64_t host_hint = 0;
    std::fill(want.begin(), want.end(), 0xaa);
    std::fill(got.begin(), got.end(), 0xaa);
    const uint32_t n = host->args_capture_hint(&inst.ctx, ip, regs, want.data(), &host_hint);
    const uint64_t hint = ftjit_args_fast_find(table, ip);
    ASSERT_EQ(hint, host_hint);
    const uint32_t fast = ftjit_args_fast_entry(table, hint, regs, got.data());
    const bool own = ip == 0x3000 || ip == 0x4000 || ip == 0x6000 || ip > 0x7000;
    EXPECT_EQ(fast == FTJIT_ARGS_ASK_HOST, !own);
    if (fast != FTJIT_ARGS_ASK_HOST) {
      ++made[0];
      EXPECT_EQ(fast, n);
      EXPECT_EQ(want, got);
    }
    std::fill(want.begin(), want.end(), 0xaa);
    std::fill(got.begin(), got.end(), 0xaa);
    const uint32_t m = host->retval_capture_hint(&inst.ctx, ip, host_hint, ret_regs, want.data());
    const uint32_t fast_exit = ftjit_args_fast_exit(table, hint, ip, ret_regs, got.data());
    ASSERT_NE(fast_exit, FTJIT_ARGS_ASK_HOST);  // each of these returns a word, or nothing
    ++made[1];
    EXPECT_EQ(fast_exit, m);
    EXPECT_EQ(want, got);
    if (m != 0) {
      EXPECT_EQ(capturer.text(ip, got.data(), m), capturer.text(ip, want.data(), m));
    }
    // Hints it cannot trust go to the host.
    const uint64_t other = ftjit_args_fast_find(table, ip == 0x3000 ? 0x4000 : 0x3000);
    for (const uint64_t h : {uint64_t{0}, other, table->mask + 2}) {
      EXPECT_EQ(ftjit_args_fast_exit(table, h, ip, ret_regs, got.data()), FTJIT_ARGS_ASK_HOST) << h;
    }
  }
  EXPECT_EQ(made[0], static_cast<int>(ips.size()) - 2);
  EXPECT_EQ(made[1], static_cast<int>(ips.size()));
  // In order and not: both copy the registers they name.
  ftjit_args_fast_entry(table, ftjit_args_fast_find(table, 0x4000), regs, got.data());
  uint64_t words[3];
  std::memcpy(words, got.data(), sizeof words);
  EXPECT_EQ(words[1], f.regs.arg[2]);
  EXPECT_EQ(words[2], f.regs.arg[0]);
  // Not traced with --args: nothing, and nothing at its return.
  const uint64_t none = ftjit_args_fast_find(table, 0x2000);
  EXPECT_EQ(none, FTJIT_ARGS_HINT_NONE);
  EXPECT_EQ(ftjit_args_fast_exit(table, none, 0x2000, ret_regs, got.data()), 0u);
  // The --when of a function of whole integer words still decides (it
  // once took the common copy, its condition unread).
  Frame negative = frame_for("x");
  negative.regs.arg[0] = static_cast<uint64_t>(-1);
  EXPECT_EQ(capturer.capture_entry(0x5000, &negative.regs, got.data(), static_cast<uint32_t>(got.size())),
            kArgsFiltered);
}

TEST(ArgKey, TheNameTravelsInTheAttachRequest) {
  control::Attach a;
  a.plugins.push_back({"/x/count.so", {}});
  a.args.functions.push_back(sample(0x1000));
  a.args.by_arg = "e";
  auto back = control::decode_attach(control::encode(a));
  ASSERT_TRUE(back.ok()) << back.error().message;
  EXPECT_EQ(back->args.by_arg, "e");
  ArgCapturer decoded(back->args);
  Frame f = frame_for("x");
  uint64_t key = 0;
  ASSERT_TRUE(decoded.key_of(0x1000, &f.regs, &key));
  EXPECT_EQ(key, 5u);
}

}  // namespace
}  // namespace ftjit::plugins
