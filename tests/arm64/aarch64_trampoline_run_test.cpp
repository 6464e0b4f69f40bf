// SPDX-License-Identifier: MIT
// The arm64 backend's own harness, run as arm64 code (natively, or under
// qemu-aarch64 from the x86-64 host: scripts/build_cross.sh arm64). It does by
// hand what the engine will do once the runtime seam serves arm64: reads a
// site's sled, writes `mov x9, x30` and the ops literal, emits trampolines
// with the backend into code memory within bl reach, writes the `bl`, and
// calls the traced functions (tests/common/traced.c, in a shared
// library of their own so that their page can be made writable while no
// code on it runs). Every write flips page protection (RW, then RX, never
// both): under qemu a write through an RW alias of code is never seen
// through its RX alias (TOOLCHAIN.md Q7).
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "backends/arm64/arm64_backend.h"
#include "backends/arm64/arm64_encoding.h"
#include "ftjit/ftjit.h"
#include "tests/common/traced.h"

extern "C" {
void a64_call_through();
extern char a64_call_return[];
void a64_direct_trampoline();
extern uint64_t a64_call_target;
extern uint64_t a64_call_sp;
extern uint64_t a64_callee_saved_broken;
extern uint64_t a64_direct_calls;
}

namespace ftjit {
namespace {

// ---------------------------------------------------------------------------
// What the runtime will provide: counters, code memory, site writes
// ---------------------------------------------------------------------------

struct TrampolineCounts {
  uint64_t entries;
  uint64_t exits;
};
__thread TrampolineCounts t_counts __attribute__((tls_model("initial-exec")));
uint64_t g_drops = 0;

int64_t counts_tls_offset() {
  return reinterpret_cast<char*>(&t_counts) - static_cast<char*>(__builtin_thread_pointer());
}

uint64_t page_size() { return static_cast<uint64_t>(sysconf(_SC_PAGESIZE)); }

// Writes code bytes at `addr`: the pages made RW, written, made RX again,
// the instruction cache cleaned. The caller guarantees no code on those
// pages runs meanwhile (one thread; the traced library's own page).
void write_code(uint64_t addr, const void* bytes, size_t n) {
  const uint64_t page = page_size();
  const uint64_t lo = addr & ~(page - 1);
  const uint64_t hi = (addr + n + page - 1) & ~(page - 1);
  void* p = reinterpret_cast<void*>(lo);
  ASSERT_EQ(mprotect(p, hi - lo, PROT_READ | PROT_WRITE), 0);
  std::memcpy(reinterpret_cast<void*>(addr), bytes, n);
  ASSERT_EQ(mprotect(p, hi - lo, PROT_READ | PROT_EXEC), 0);
  __builtin___clear_cache(reinterpret_cast<char*>(addr), reinterpret_cast<char*>(addr + n));
}

// Code memory within bl reach of `near`, filled a trampoline at a time.
class NearCode {
 public:
  explicit NearCode(uint64_t near) {
    const uint64_t page = page_size();
    // Below the traced library first (its neighbours above are likely
    // taken by the next libraries), 1 MiB steps, never past 64 MiB.
    for (int64_t step = 1; step <= 64 && base_ == 0; ++step) {
      for (int64_t sign : {-1, 1}) {
        const uint64_t hint = ((near & ~(page - 1)) + sign * step * (int64_t{1} << 20));
        void* m = mmap(reinterpret_cast<void*>(hint), kBytes, PROT_READ | PROT_EXEC,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
        if (m == MAP_FAILED) continue;
        // A kernel (or qemu) that ignores the hint maps elsewhere.
        const uint64_t at = reinterpret_cast<uint64_t>(m);
        if (arm64::branch_reaches(near & ~uint64_t{3}, at) &&
            arm64::branch_reaches(near & ~uint64_t{3}, at + kBytes)) {
          base_ = at;
          break;
        }
        munmap(m, kBytes);
      }
    }
  }
  ~NearCode() {
    if (base_ != 0) munmap(reinterpret_cast<void*>(base_), kBytes);
  }
  uint64_t base() const { return base_; }

  // The next 16-aligned address.
  uint64_t next() const { return base_ + used_; }

  uint64_t place(const std::vector<uint8_t>& code) {
    const uint64_t at = next();
    EXPECT_LE(used_ + code.size(), kBytes);
    write_code(at, code.data(), code.size());
    used_ = (used_ + code.size() + 15) & ~uint64_t{15};
    return at;
  }

 private:
  static constexpr uint64_t kBytes = 1 << 16;
  uint64_t base_ = 0;
  uint64_t used_ = 0;
};

// One traced function's site, taken through its states and back.
class PatchedSite {
 public:
  PatchedSite(void* fn, bool has_literal) : symbol_(reinterpret_cast<uint64_t>(fn)) {
    const Arm64SledStart s = find_arm64_sled(
        std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(symbol_), 12));
    EXPECT_TRUE(s.found);
    start_ = symbol_ + s.offset;
    landing_pad_ = s.landing_pad;
    literal_ = has_literal ? start_ - arm64::kLiteralBytes : 0;
    // With a pad the compiler's literal sits before the pad: 8-aligned all
    // the same, which is what the trampoline's rounding relies on.
    if (landing_pad_ != 0 && has_literal) literal_ = symbol_ - arm64::kLiteralBytes;
    std::memcpy(compiled_, reinterpret_cast<const void*>(start_), sizeof compiled_);
    if (literal_ != 0) std::memcpy(&compiled_literal_, reinterpret_cast<const void*>(literal_), 8);
  }
  ~PatchedSite() { restore(); }

  uint64_t start() const { return start_; }
  uint64_t symbol() const { return symbol_; }
  uint64_t literal() const { return literal_; }

  SledKind kind() const {
    SledInfo info = arm64_backend().classify_entry(
        symbol_, std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(symbol_), 12));
    return info.kind;
  }

  void init() {
    ASSERT_EQ(kind(), SledKind::kNopSled);
    const Insn mov = arm64_init_word();
    write_code(start_, mov.bytes, mov.size);
    ASSERT_EQ(kind(), SledKind::kNop);
  }

  void set_literal(const void* ops) {
    ASSERT_NE(literal_, 0u);
    ASSERT_EQ(literal_ % 8, 0u);
    const uint64_t v = reinterpret_cast<uint64_t>(ops);
    write_code(literal_, &v, 8);
  }

  void call(uint64_t trampoline) {
    const uint64_t live = start_ + arm64_backend().traits().live_offset;
    Insn bl;
    ASSERT_TRUE(arm64_backend().encode_call(live, trampoline, &bl));
    write_code(live, bl.bytes, bl.size);
    const SledInfo info = arm64_backend().classify_entry(
        symbol_, std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(symbol_), 12));
    ASSERT_EQ(info.kind, SledKind::kCall);
    ASSERT_EQ(info.call_target, trampoline);
  }

  void disable() {
    const Insn nop = arm64_backend().encode_nop();
    write_code(start_ + arm64_backend().traits().live_offset, nop.bytes, nop.size);
    ASSERT_EQ(kind(), SledKind::kNop);
  }

  // De-init: the compiler's bytes back, literal included.
  void restore() {
    if (std::memcmp(compiled_, reinterpret_cast<const void*>(start_), sizeof compiled_) != 0) {
      write_code(start_, compiled_, sizeof compiled_);
    }
    if (literal_ != 0 && std::memcmp(&compiled_literal_, reinterpret_cast<const void*>(literal_), 8) != 0) {
      write_code(literal_, &compiled_literal_, 8);
    }
  }

 private:
  uint64_t symbol_ = 0;
  uint64_t start_ = 0;
  uint64_t literal_ = 0;
  uint32_t landing_pad_ = 0;
  uint8_t compiled_[8] = {};
  uint64_t compiled_literal_ = 0;
};

// ---------------------------------------------------------------------------
// Callbacks: record, then clobber every register the ABI lets them
// ---------------------------------------------------------------------------

struct Seen {
  int calls = 0;
  uint64_t ip = 0, parent_ip = 0, sp = 0;
  ftjit_ops* ops = nullptr;
  uint64_t arg[8] = {};
  double fp[8] = {};
};

// Everything a callback may change on Linux: x0-x18 (GCC allocates x18,
// AAPCS64's platform register, as a temporary there) and all of v0-v31
// (the compiler keeps d8-d15 for us, as the ABI says).
__attribute__((noinline)) void clobber_caller_saved() {
  asm volatile(
      "mov x0, #-1\n mov x1, #-1\n mov x2, #-1\n mov x3, #-1\n mov x4, #-1\n"
      "mov x5, #-1\n mov x6, #-1\n mov x7, #-1\n mov x8, #-1\n mov x9, #-1\n"
      "mov x10, #-1\n mov x11, #-1\n mov x12, #-1\n mov x13, #-1\n mov x14, #-1\n"
      "mov x15, #-1\n mov x16, #-1\n mov x17, #-1\n mov x18, #-1\n"
      "movi v0.2d, #-1\n movi v1.2d, #-1\n movi v2.2d, #-1\n movi v3.2d, #-1\n"
      "movi v4.2d, #-1\n movi v5.2d, #-1\n movi v6.2d, #-1\n movi v7.2d, #-1\n"
      "movi v8.2d, #-1\n movi v9.2d, #-1\n movi v10.2d, #-1\n movi v11.2d, #-1\n"
      "movi v12.2d, #-1\n movi v13.2d, #-1\n movi v14.2d, #-1\n movi v15.2d, #-1\n"
      "movi v16.2d, #-1\n movi v17.2d, #-1\n movi v18.2d, #-1\n movi v19.2d, #-1\n"
      "movi v20.2d, #-1\n movi v21.2d, #-1\n movi v22.2d, #-1\n movi v23.2d, #-1\n"
      "movi v24.2d, #-1\n movi v25.2d, #-1\n movi v26.2d, #-1\n movi v27.2d, #-1\n"
      "movi v28.2d, #-1\n movi v29.2d, #-1\n movi v30.2d, #-1\n movi v31.2d, #-1\n" ::
          : "x0", "x1", "x2", "x3", "x4", "x5", "x6", "x7", "x8", "x9", "x10", "x11", "x12",
            "x13", "x14", "x15", "x16", "x17", "x18", "v0", "v1", "v2", "v3", "v4", "v5", "v6", "v7",
            "v8", "v9", "v10", "v11", "v12", "v13", "v14", "v15", "v16", "v17", "v18", "v19",
            "v20", "v21", "v22", "v23", "v24", "v25", "v26", "v27", "v28", "v29", "v30", "v31",
            "memory", "cc");
}

Seen g_seen;
void (*g_inside_callback)() = nullptr;  // runs inside the callback (nesting)
int64_t g_new_arg0 = 0;                 // nonzero: the callback rewrites arg[0]

void record_entry(uint64_t ip, uint64_t parent_ip, ftjit_ops* ops, ftjit_regs* regs) {
  ++g_seen.calls;
  g_seen.ip = ip;
  g_seen.parent_ip = parent_ip;
  g_seen.ops = ops;
  g_seen.sp = regs->sp;
  std::memcpy(g_seen.arg, regs->arg, sizeof g_seen.arg);
  for (int i = 0; i < 8; ++i) std::memcpy(&g_seen.fp[i], regs->fp[i], sizeof(double));
  if (g_new_arg0 != 0) regs->arg[0] = static_cast<uint64_t>(g_new_arg0);
  if (g_inside_callback != nullptr) g_inside_callback();
  clobber_caller_saved();
}

// A second callback, to tell ops apart on a shared trampoline.
Seen g_seen_other;
void record_other(uint64_t ip, uint64_t parent_ip, ftjit_ops* ops, ftjit_regs*) {
  ++g_seen_other.calls;
  g_seen_other.ip = ip;
  g_seen_other.parent_ip = parent_ip;
  g_seen_other.ops = ops;
  clobber_caller_saved();
}

// A direct ops as the runtime's dispatchers treat it: no callback of its
// own, it names the trampoline to continue to.
void ask_direct(uint64_t, uint64_t, ftjit_ops*, ftjit_regs* regs) {
  regs->direct = reinterpret_cast<uint64_t>(&a64_direct_trampoline);
  clobber_caller_saved();
}

// The list dispatcher: every registered ops whose site set holds ip.
struct ListEntry {
  ftjit_ops* ops;
  std::vector<uint64_t> ips;
};
std::vector<ListEntry> g_list;
void list_dispatch(uint64_t ip, uint64_t parent_ip, ftjit_ops*, ftjit_regs* regs) {
  for (ListEntry& e : g_list) {
    for (uint64_t s : e.ips) {
      if (s == ip) e.ops->func(ip, parent_ip, e.ops, regs);
    }
  }
}

ftjit_ops make_ops(ftjit_func_t func) {
  ftjit_ops ops;
  std::memset(&ops, 0, sizeof ops);
  ops.struct_size = sizeof ops;
  ops.func = func;
  return ops;
}

// Calls through a64_call_through, which knows the call's return address.
template <typename Fn, typename... Args>
auto call_traced(Fn* fn, Args... args) {
  a64_call_target = reinterpret_cast<uint64_t>(fn);
  auto through = reinterpret_cast<Fn*>(&a64_call_through);
  return through(args...);
}

class Aarch64TrampolineRun : public ::testing::Test {
 protected:
  void SetUp() override {
    g_seen = Seen{};
    g_seen_other = Seen{};
    g_inside_callback = nullptr;
    g_new_arg0 = 0;
    g_drops = 0;
    a64_callee_saved_broken = 0;
    a64_direct_calls = 0;
    t_counts = TrampolineCounts{0, 0};
    code_ = std::make_unique<NearCode>(reinterpret_cast<uint64_t>(&a64_slot_sum8));
    ASSERT_NE(code_->base(), 0u) << "no code memory within bl reach of the traced library";
  }
  void TearDown() override {
    EXPECT_EQ(a64_callee_saved_broken, 0u) << "x18-x28 changed across a traced call";
    EXPECT_EQ(t_counts.entries, t_counts.exits) << "a trampoline left its entry open";
  }


 public:  // for the helpers below, shared by several tests
  TrampolineRequest base_request() const {
    TrampolineRequest req;
    req.recursion_drops = reinterpret_cast<uint64_t>(&g_drops);
    req.counts_tls_offset = counts_tls_offset();
    return req;
  }

  uint64_t emit(const TrampolineRequest& req) {
    auto bytes = arm64_backend().emit_trampoline(req, code_->next());
    EXPECT_TRUE(bytes.ok()) << (bytes.ok() ? "" : bytes.error().message);
    return bytes.ok() ? code_->place(*bytes) : 0;
  }

  uint64_t generated(ftjit_ops* ops, bool save_fp = true) {
    TrampolineRequest req = base_request();
    req.source = OpsSource::kImmediate;
    req.ops = reinterpret_cast<uint64_t>(ops);
    req.func = reinterpret_cast<uint64_t>(ops->func);
    req.save_fp = save_fp;
    return emit(req);
  }

  // The entry checks every strategy shares: ip is the site start, the
  // parent the call's return address, sp the caller's at the call.
  void expect_entry(const Seen& seen, const PatchedSite& site) {
    EXPECT_EQ(seen.ip, site.start());
    EXPECT_EQ(seen.parent_ip, reinterpret_cast<uint64_t>(a64_call_return));
  }

  std::unique_ptr<NearCode> code_;
};

const int64_t kArgs[8] = {11, -22, 33, -44, 55, -66, 77, -88};
const double kFpArgs[8] = {1.5, -2.25, 3.125, -4.0, 5.5, -6.75, 7.0625, -8.5};

// The traced functions' results, computed here (calling them would be
// traced too).
int64_t sum8_expected() {
  int64_t r = 0;
  for (int i = 0; i < 8; ++i) r += (i + 1) * kArgs[i];
  return r;
}
double fsum8_expected() {
  return 1.5 + 2 * -2.25 + 3 * 3.125 + 4 * -4.0 + 5 * 5.5 + 6 * -6.75 + 7 * 7.0625 + 8 * -8.5;
}

// ---------------------------------------------------------------------------
// Strategies
// ---------------------------------------------------------------------------

void generated_on(Aarch64TrampolineRun* t, decltype(&a64_slot_sum8) sum8,
                  decltype(&a64_slot_fsum8) fsum8, decltype(&a64_slot_big) big,
                  bool has_literal) {
  ftjit_ops ops = make_ops(record_entry);
  const uint64_t tramp = t->generated(&ops);
  PatchedSite s_sum(reinterpret_cast<void*>(sum8), has_literal);
  PatchedSite s_fsum(reinterpret_cast<void*>(fsum8), has_literal);
  PatchedSite s_big(reinterpret_cast<void*>(big), has_literal);
  for (PatchedSite* s : {&s_sum, &s_fsum, &s_big}) {
    s->init();
    s->call(tramp);
  }

  EXPECT_EQ(call_traced(sum8, 11, -22, 33, -44, 55, -66, 77, -88), sum8_expected());
  EXPECT_EQ(g_seen.calls, 1);
  t->expect_entry(g_seen, s_sum);
  EXPECT_EQ(g_seen.ops, &ops);
  EXPECT_EQ(g_seen.sp, a64_call_sp);
  for (int i = 0; i < 8; ++i) EXPECT_EQ(static_cast<int64_t>(g_seen.arg[i]), kArgs[i]) << "x" << i;

  EXPECT_EQ(call_traced(fsum8, 1.5, -2.25, 3.125, -4.0, 5.5, -6.75, 7.0625, -8.5), fsum8_expected());
  EXPECT_EQ(g_seen.calls, 2);
  t->expect_entry(g_seen, s_fsum);
  for (int i = 0; i < 8; ++i) EXPECT_EQ(g_seen.fp[i], kFpArgs[i]) << "v" << i;

  // x8 (the indirect result's address) kept.
  const traced_big b = call_traced(big, int64_t{9});
  for (int i = 0; i < 5; ++i) EXPECT_EQ(b.v[i], 9 * (i + 1));
  EXPECT_EQ(g_seen.calls, 3);
  t->expect_entry(g_seen, s_big);

  // A callback's change to arg[0] is what the function sees.
  g_new_arg0 = 1000;
  EXPECT_EQ(call_traced(sum8, 11, -22, 33, -44, 55, -66, 77, -88), sum8_expected() - 11 + 1000);
  g_new_arg0 = 0;

  // Disabled: the function runs, the callback does not; then de-init gives
  // the compiler's bytes back.
  s_sum.disable();
  EXPECT_EQ(call_traced(sum8, 11, -22, 33, -44, 55, -66, 77, -88), sum8_expected());
  EXPECT_EQ(g_seen.calls, 4);
  s_sum.restore();
  EXPECT_EQ(s_sum.kind(), SledKind::kNopSled);
  EXPECT_EQ(t_counts.entries, 4u);
}

TEST_F(Aarch64TrampolineRun, GeneratedWithLiteralLayout) {
  generated_on(this, a64_slot_sum8, a64_slot_fsum8, a64_slot_big, true);
}

TEST_F(Aarch64TrampolineRun, GeneratedWithoutLiteralLayout) {
  generated_on(this, a64_noslot_sum8, a64_noslot_fsum8, a64_noslot_big, false);
}

TEST_F(Aarch64TrampolineRun, GeneratedAfterBtiLandingPad) {
  generated_on(this, a64_bti_sum8, a64_bti_fsum8, a64_bti_big, true);
}

// Without FP saves the callback promised to leave v0-v7 alone; integer
// arguments still arrive and come back.
TEST_F(Aarch64TrampolineRun, GeneratedWithoutFpSaves) {
  ftjit_ops ops = make_ops(record_other);
  const uint64_t tramp = generated(&ops, /*save_fp=*/false);
  PatchedSite s(reinterpret_cast<void*>(&a64_noslot_sum8), false);
  s.init();
  s.call(tramp);
  // record_other clobbers v0-v31 as well, which a no-FP callback must not:
  // only integer results are checked here.
  EXPECT_EQ(call_traced(&a64_noslot_sum8, 11, -22, 33, -44, 55, -66, 77, -88), sum8_expected());
  EXPECT_EQ(g_seen_other.calls, 1);
  EXPECT_EQ(g_seen_other.ip, s.start());
}

// One shared trampoline, each site's ops read from its literal.
void call_ops_on(Aarch64TrampolineRun* t, decltype(&a64_slot_sum8) sum8,
                 decltype(&a64_slot_fsum8) fsum8) {
  TrampolineRequest req = t->base_request();
  req.source = OpsSource::kSiteSlot;
  req.func = 0;  // ops->func
  const uint64_t tramp = t->emit(req);
  ftjit_ops first = make_ops(record_entry);
  ftjit_ops second = make_ops(record_other);
  PatchedSite s_sum(reinterpret_cast<void*>(sum8), true);
  PatchedSite s_fsum(reinterpret_cast<void*>(fsum8), true);
  s_sum.init();
  s_fsum.init();
  s_sum.set_literal(&first);
  s_fsum.set_literal(&second);
  s_sum.call(tramp);
  s_fsum.call(tramp);

  EXPECT_EQ(call_traced(sum8, 11, -22, 33, -44, 55, -66, 77, -88), sum8_expected());
  EXPECT_EQ(g_seen.calls, 1);
  EXPECT_EQ(g_seen.ops, &first);
  t->expect_entry(g_seen, s_sum);
  for (int i = 0; i < 8; ++i) EXPECT_EQ(static_cast<int64_t>(g_seen.arg[i]), kArgs[i]) << "x" << i;

  EXPECT_EQ(call_traced(fsum8, 1.5, -2.25, 3.125, -4.0, 5.5, -6.75, 7.0625, -8.5), fsum8_expected());
  EXPECT_EQ(g_seen_other.calls, 1);
  EXPECT_EQ(g_seen_other.ops, &second);
  t->expect_entry(g_seen_other, s_fsum);

  // Attach another ops: one literal store, no code change.
  s_sum.set_literal(&second);
  EXPECT_EQ(call_traced(sum8, 11, -22, 33, -44, 55, -66, 77, -88), sum8_expected());
  EXPECT_EQ(g_seen.calls, 1);
  EXPECT_EQ(g_seen_other.calls, 2);
  t->expect_entry(g_seen_other, s_sum);
}

TEST_F(Aarch64TrampolineRun, CallOpsThroughTheLiteral) {
  call_ops_on(this, a64_slot_sum8, a64_slot_fsum8);
}

// With a bti before the sled the return address is literal+20: the
// trampoline's rounding finds the literal all the same.
TEST_F(Aarch64TrampolineRun, CallOpsAfterBtiLandingPad) {
  call_ops_on(this, a64_bti_sum8, a64_bti_fsum8);
}

TEST_F(Aarch64TrampolineRun, ListDispatchAsksEveryOps) {
  TrampolineRequest req = base_request();
  req.source = OpsSource::kImmediate;
  req.func = reinterpret_cast<uint64_t>(&list_dispatch);
  req.honour_direct = true;
  const uint64_t tramp = emit(req);
  ftjit_ops relevant = make_ops(record_entry);
  ftjit_ops elsewhere = make_ops(record_other);
  PatchedSite s_sum(reinterpret_cast<void*>(&a64_noslot_sum8), false);
  PatchedSite s_leaf(reinterpret_cast<void*>(&a64_noslot_leaf), false);
  g_list = {ListEntry{&relevant, {s_sum.start()}}, ListEntry{&elsewhere, {s_leaf.start()}}};
  s_sum.init();
  s_leaf.init();
  s_sum.call(tramp);
  s_leaf.call(tramp);

  EXPECT_EQ(call_traced(&a64_noslot_sum8, 11, -22, 33, -44, 55, -66, 77, -88), sum8_expected());
  EXPECT_EQ(g_seen.calls, 1);
  EXPECT_EQ(g_seen_other.calls, 0);
  expect_entry(g_seen, s_sum);
  EXPECT_EQ(call_traced(&a64_noslot_leaf, int64_t{6}), 43);
  EXPECT_EQ(g_seen.calls, 1);
  EXPECT_EQ(g_seen_other.calls, 1);
  expect_entry(g_seen_other, s_leaf);
  g_list.clear();
}

// A direct ops on a call-ops site: the shared trampoline restores every
// register and continues into the direct trampoline as if the site had
// called it; the function still runs with its arguments.
TEST_F(Aarch64TrampolineRun, DirectCoexistsThroughHonourDirect) {
  TrampolineRequest req = base_request();
  req.source = OpsSource::kSiteSlot;
  req.honour_direct = true;
  const uint64_t tramp = emit(req);
  ftjit_ops direct = make_ops(ask_direct);
  ftjit_ops plain = make_ops(record_entry);
  PatchedSite s(reinterpret_cast<void*>(&a64_slot_sum8), true);
  s.init();
  s.set_literal(&direct);
  s.call(tramp);
  EXPECT_EQ(call_traced(&a64_slot_sum8, 11, -22, 33, -44, 55, -66, 77, -88), sum8_expected());
  EXPECT_EQ(a64_direct_calls, 1u);
  // Back to a plain ops: regs->direct starts at 0 on every call.
  s.set_literal(&plain);
  EXPECT_EQ(call_traced(&a64_slot_sum8, 11, -22, 33, -44, 55, -66, 77, -88), sum8_expected());
  EXPECT_EQ(a64_direct_calls, 1u);
  EXPECT_EQ(g_seen.calls, 1);
}

// A traced function called from inside a callback runs untraced and
// counts a drop; the outer call's counts still balance.
TEST_F(Aarch64TrampolineRun, NestedCallRunsUntracedAndCountsADrop) {
  ftjit_ops ops = make_ops(record_entry);
  const uint64_t tramp = generated(&ops);
  PatchedSite s_sum(reinterpret_cast<void*>(&a64_noslot_sum8), false);
  PatchedSite s_leaf(reinterpret_cast<void*>(&a64_noslot_leaf), false);
  s_sum.init();
  s_leaf.init();
  s_sum.call(tramp);
  s_leaf.call(tramp);
  static int64_t inner_result;
  g_inside_callback = [] { inner_result = a64_noslot_leaf(5); };
  EXPECT_EQ(call_traced(&a64_noslot_sum8, 11, -22, 33, -44, 55, -66, 77, -88), sum8_expected());
  g_inside_callback = nullptr;
  EXPECT_EQ(inner_result, 36);
  EXPECT_EQ(g_seen.calls, 1);  // the outer call only
  expect_entry(g_seen, s_sum);
  EXPECT_EQ(g_drops, 1u);
  EXPECT_EQ(t_counts.entries, 1u);
}

// ---------------------------------------------------------------------------
// Exit hooks: the generated trampoline keeps the shadow stack through
// prune/push, the landing pops through pop (a small shadow stack here,
// keeping the runtime's contract: backends/backend.h)
// ---------------------------------------------------------------------------

struct ShadowEntry {
  uint64_t slot, ret, ip, record;
};
std::vector<ShadowEntry> g_shadow;
uint64_t g_landing = 0;
int g_prunes = 0;
struct ExitSeen {
  int calls = 0;
  uint64_t ip = 0, parent_ip = 0, record = 0;
  ftjit_ret_regs regs = {};
} g_exit_seen;

extern "C" void test_shadow_prune(uint64_t slot) {
  ++g_prunes;
  while (!g_shadow.empty() && g_shadow.back().slot <= slot) g_shadow.pop_back();
}

extern "C" void test_shadow_push(uint64_t slot, uint64_t ip, uint64_t record) {
  auto* word = reinterpret_cast<uint64_t*>(slot);
  g_shadow.push_back(ShadowEntry{slot, *word, ip, record});
  *word = g_landing;
}

extern "C" uint64_t test_shadow_pop(uint64_t slot, ftjit_ret_regs* regs) {
  if (g_shadow.empty() || g_shadow.back().slot != slot) abort();
  const ShadowEntry e = g_shadow.back();
  g_shadow.pop_back();
  ++g_exit_seen.calls;
  g_exit_seen.ip = e.ip;
  g_exit_seen.parent_ip = e.ret;
  g_exit_seen.record = e.record;
  g_exit_seen.regs = *regs;
  clobber_caller_saved();
  return e.ret;
}

extern "C" uint64_t test_shadow_real_return(uint64_t slot) {
  for (size_t i = g_shadow.size(); i-- > 0;) {
    if (g_shadow[i].slot == slot) return g_shadow[i].ret;
  }
  return g_landing;
}

TEST_F(Aarch64TrampolineRun, ExitHookReturnsTheRightValuesThroughTheLanding) {
  constexpr uint32_t kLandingOffset = 16;
  ExitTrampolineRequest ereq;
  ereq.pop = reinterpret_cast<uint64_t>(&test_shadow_pop);
  ereq.counts_tls_offset = counts_tls_offset();
  ereq.landing_offset = kLandingOffset;
  auto exit_code = arm64_backend().emit_exit_trampoline(ereq, code_->next());
  ASSERT_TRUE(exit_code.ok()) << exit_code.error().message;
  g_landing = code_->place(*exit_code) + kLandingOffset;
  g_shadow.clear();
  g_prunes = 0;
  g_exit_seen = ExitSeen{};

  ftjit_ops ops = make_ops(record_entry);
  TrampolineRequest req = base_request();
  req.source = OpsSource::kImmediate;
  req.ops = reinterpret_cast<uint64_t>(&ops);
  req.func = reinterpret_cast<uint64_t>(&record_entry);
  req.exit_trampoline = g_landing;
  req.real_return = reinterpret_cast<uint64_t>(&test_shadow_real_return);
  static const uint64_t kRecord = 0xec0;  // opaque to the trampolines
  req.exit_record = reinterpret_cast<uint64_t>(&kRecord);
  req.shadow_prune = reinterpret_cast<uint64_t>(&test_shadow_prune);
  req.shadow_push = reinterpret_cast<uint64_t>(&test_shadow_push);
  const uint64_t tramp = emit(req);

  PatchedSite s_pair(reinterpret_cast<void*>(&a64_slot_pair), true);
  PatchedSite s_hfa(reinterpret_cast<void*>(&a64_slot_hfa4), true);
  PatchedSite s_sum(reinterpret_cast<void*>(&a64_slot_sum8), true);
  for (PatchedSite* s : {&s_pair, &s_hfa, &s_sum}) {
    s->init();
    s->call(tramp);
  }

  // x0, x1 back through the landing, and seen by the exit callback.
  const traced_pair p = call_traced(&a64_slot_pair, int64_t{7});
  EXPECT_EQ(p.lo, 21);
  EXPECT_EQ(p.hi, 36);
  EXPECT_EQ(g_seen.calls, 1);
  expect_entry(g_seen, s_pair);
  EXPECT_EQ(g_exit_seen.calls, 1);
  EXPECT_EQ(g_exit_seen.ip, s_pair.start());
  EXPECT_EQ(g_exit_seen.parent_ip, reinterpret_cast<uint64_t>(a64_call_return));
  EXPECT_EQ(g_exit_seen.record, reinterpret_cast<uint64_t>(&kRecord));
  EXPECT_EQ(static_cast<int64_t>(g_exit_seen.regs.ret[0]), 21);
  EXPECT_EQ(static_cast<int64_t>(g_exit_seen.regs.ret[1]), 36);
  EXPECT_TRUE(g_shadow.empty());
  EXPECT_GE(g_prunes, 1);

  // v0-v3 (a homogeneous FP aggregate) back although pop clobbered them.
  const traced_hfa4 h = call_traced(&a64_slot_hfa4, 3.0);
  EXPECT_EQ(h.a, 3.5);
  EXPECT_EQ(h.b, 6.0);
  EXPECT_EQ(h.c, -4.25);
  EXPECT_EQ(h.d, 9.0);
  EXPECT_EQ(g_exit_seen.calls, 2);
  double fp0, fp1;
  std::memcpy(&fp0, g_exit_seen.regs.fp[0], 8);
  std::memcpy(&fp1, g_exit_seen.regs.fp[1], 8);
  EXPECT_EQ(fp0, 3.5);
  EXPECT_EQ(fp1, 6.0);

  // Arguments still arrive whole when the return is hooked.
  EXPECT_EQ(call_traced(&a64_slot_sum8, 11, -22, 33, -44, 55, -66, 77, -88), sum8_expected());
  for (int i = 0; i < 8; ++i) EXPECT_EQ(static_cast<int64_t>(g_seen.arg[i]), kArgs[i]) << "x" << i;
  EXPECT_EQ(g_exit_seen.calls, 3);
  EXPECT_TRUE(g_shadow.empty());
  // Entries: 3 trampolines and 3 landings, each matched by an exit.
  EXPECT_EQ(t_counts.entries, 6u);
}

// ---------------------------------------------------------------------------
// Reach: bl is written only when it reaches
// ---------------------------------------------------------------------------

TEST_F(Aarch64TrampolineRun, CallOutOfReachIsRefused) {
  PatchedSite s(reinterpret_cast<void*>(&a64_slot_leaf), true);
  const uint64_t live = s.start() + arm64_backend().traits().live_offset;
  Insn bl;
  EXPECT_FALSE(arm64_backend().encode_call(live, live + (uint64_t{1} << 27), &bl));
  EXPECT_FALSE(arm64_backend().encode_call(live, live - (uint64_t{1} << 27) - 4, &bl));
  EXPECT_TRUE(arm64_backend().encode_call(live, code_->base(), &bl));
}

}  // namespace
}  // namespace ftjit
