// SPDX-License-Identifier: MIT
// Pure logic of core/: globs (against fnmatch(3) as an independent oracle),
// filters, and the planner's route and state-change decisions.
#include <fnmatch.h>
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "core/filter.h"
#include "core/glob.h"
#include "core/planner.h"

namespace ftjit {
namespace {

TEST(Glob, BasicCases) {
  EXPECT_TRUE(glob_match("*", ""));
  EXPECT_TRUE(glob_match("*", "anything"));
  EXPECT_TRUE(glob_match("foo", "foo"));
  EXPECT_FALSE(glob_match("foo", "foobar"));
  EXPECT_TRUE(glob_match("foo*", "foobar"));
  EXPECT_TRUE(glob_match("*bar", "foobar"));
  EXPECT_TRUE(glob_match("f?o", "fxo"));
  EXPECT_FALSE(glob_match("f?o", "fo"));
  EXPECT_TRUE(glob_match("[a-c]x", "bx"));
  EXPECT_FALSE(glob_match("[!a-c]x", "bx"));
  EXPECT_TRUE(glob_match("ns::*::frob(int)", "ns::widget::frob(int)"));
  EXPECT_TRUE(glob_match("a*b*c", "axxbyyc"));
  EXPECT_FALSE(glob_match("a*b*c", "axxbyy"));
  EXPECT_TRUE(glob_match("\\*", "*"));
  EXPECT_FALSE(glob_match("\\*", "x"));
  EXPECT_TRUE(glob_match("lib/*", "lib/x"));  // '/' is not special
}

TEST(Glob, AgreesWithFnmatchOnRandomInput) {
  std::mt19937 rng(7);
  const std::string alphabet = "ab_:";
  const std::string pattern_alphabet = "ab_:*?[]!-";
  auto random_string = [&](const std::string& from, int max) {
    std::string s;
    int n = static_cast<int>(rng() % (max + 1));
    for (int i = 0; i < n; ++i) s += from[rng() % from.size()];
    return s;
  };
  int compared = 0;
  for (int i = 0; i < 200000; ++i) {
    std::string p = random_string(pattern_alphabet, 6);
    std::string t = random_string(alphabet, 8);
    // Our malformed-set rule differs from fnmatch's: compare only patterns
    // whose brackets are balanced and non-empty.
    size_t open = p.find('['), close = p.find(']');
    if (open != std::string::npos || close != std::string::npos) {
      if (open == std::string::npos || close == std::string::npos || close < open + 2) continue;
      if (p.find('[', open + 1) != std::string::npos || p.find(']', close + 1) != std::string::npos) continue;
      if (p[open + 1] == '!' && close == open + 2) continue;
      if (p.substr(open, close - open).find('-') != std::string::npos) continue;
    }
    bool ours = glob_match(p, t);
    bool theirs = fnmatch(p.c_str(), t.c_str(), FNM_NOESCAPE) == 0;
    ASSERT_EQ(ours, theirs) << "pattern '" << p << "' text '" << t << "'";
    ++compared;
  }
  EXPECT_GT(compared, 100000);
}

TEST(Glob, LiteralDetection) {
  EXPECT_TRUE(glob_is_literal("main"));
  EXPECT_FALSE(glob_is_literal("ma*"));
  EXPECT_FALSE(glob_is_literal("m[a]"));
}

TEST(Filter, IncludeExcludeModuleAndDemangled) {
  auto f = Filter::compile({"libfoo.so*!foo_*", "ns::*"}, {"foo_skip"});
  ASSERT_TRUE(f.ok());
  EXPECT_TRUE(f->matches("libfoo.so.1", "foo_a", "foo_a"));
  EXPECT_FALSE(f->matches("libbar.so", "foo_a", "foo_a"));
  EXPECT_FALSE(f->matches("libfoo.so", "foo_skip", "foo_skip"));
  EXPECT_TRUE(f->matches("app", "_ZN2ns1fEv", "ns::f()"));
  EXPECT_FALSE(f->matches("app", "other", "other"));
  auto all = Filter::compile({}, {"x*"});
  ASSERT_TRUE(all.ok());
  EXPECT_TRUE(all->matches("m", "y", "y"));
  EXPECT_FALSE(all->matches("m", "xy", "xy"));
}

TEST(Filter, ShapeFastPathsAgreeWithFnmatch) {
  const char* patterns[] = {"*", "foo", "foo*", "*bar", "f*o", "fo?", "*", "[fb]oo*", "*_1"};
  const char* names[] = {"foo", "foobar", "bar", "foo_bar", "fo", "boo_1", "", "x_1", "f"};
  for (const char* p : patterns) {
    auto f = Filter::compile({p}, {});
    ASSERT_TRUE(f.ok());
    for (const char* n : names) {
      EXPECT_EQ(f->matches("m", n, n), fnmatch(p, n, 0) == 0) << p << " vs " << n;
    }
  }
  auto prefix = Filter::compile({"pre*"}, {});
  EXPECT_EQ(prefix->includes()[0].shape, NamePattern::Shape::kPrefix);
  auto suffix = Filter::compile({"*post"}, {});
  EXPECT_EQ(suffix->includes()[0].shape, NamePattern::Shape::kSuffix);
  auto literal = Filter::compile({"exact"}, {});
  EXPECT_EQ(literal->includes()[0].shape, NamePattern::Shape::kLiteral);
  auto glob = Filter::compile({"a*b"}, {});
  EXPECT_EQ(glob->includes()[0].shape, NamePattern::Shape::kGlob);
}

TEST(Filter, RejectsEmptyParts) {
  EXPECT_EQ(Filter::compile({""}, {}).error().code, FTJIT_E_INVALID_ARGUMENT);
  EXPECT_EQ(Filter::compile({"!x"}, {}).error().code, FTJIT_E_INVALID_ARGUMENT);
  EXPECT_EQ(Filter::compile({"m!"}, {}).error().code, FTJIT_E_INVALID_ARGUMENT);
  EXPECT_EQ(Filter::compile({"ok"}, {""}).error().code, FTJIT_E_INVALID_ARGUMENT);
}

TEST(Filter, Describe) {
  auto f = Filter::compile({"m!a*", "b"}, {"c"});
  EXPECT_EQ(f->describe(), "include: m!a*, b; exclude: c");
}

TEST(Planner, RouteTable) {
  using S = std::vector<ftjit_strategy>;
  auto route = [](bool slot, S s) { return choose_route(slot, s); };
  EXPECT_EQ(route(true, {}), Route::kNone);
  EXPECT_EQ(route(true, {FTJIT_STRATEGY_AUTO}), Route::kGenerated);
  EXPECT_EQ(route(false, {FTJIT_STRATEGY_GENERATED}), Route::kGenerated);
  EXPECT_EQ(route(true, {FTJIT_STRATEGY_CALL_OPS}), Route::kCallOps);
  EXPECT_EQ(route(false, {FTJIT_STRATEGY_CALL_OPS}), Route::kInvalid);
  EXPECT_EQ(route(false, {FTJIT_STRATEGY_LIST}), Route::kList);
  EXPECT_EQ(route(false, {FTJIT_STRATEGY_DIRECT}), Route::kDirect);
  EXPECT_EQ(route(true, {FTJIT_STRATEGY_LIST, FTJIT_STRATEGY_LIST}), Route::kList);
  EXPECT_EQ(route(true, {FTJIT_STRATEGY_LIST, FTJIT_STRATEGY_GENERATED}), Route::kCallOpsMux);
  EXPECT_EQ(route(false, {FTJIT_STRATEGY_LIST, FTJIT_STRATEGY_GENERATED}), Route::kList);
  EXPECT_EQ(route(true, {FTJIT_STRATEGY_DIRECT, FTJIT_STRATEGY_AUTO}), Route::kCallOpsMux);
  EXPECT_EQ(route(false, {FTJIT_STRATEGY_DIRECT, FTJIT_STRATEGY_AUTO}), Route::kList);
}

TEST(Planner, TargetsPerRoute) {
  RouteAddresses a;
  a.list_trampoline = 1;
  a.call_ops_trampoline = 2;
  a.single_ops = 3;
  a.single_generated = 4;
  a.single_direct = 5;
  a.mux_ops = 6;
  EXPECT_EQ(target_for(Route::kNone, a), (SiteTarget{0, 0}));
  EXPECT_EQ(target_for(Route::kGenerated, a), (SiteTarget{4, 0}));
  EXPECT_EQ(target_for(Route::kCallOps, a), (SiteTarget{2, 3}));
  EXPECT_EQ(target_for(Route::kCallOpsMux, a), (SiteTarget{2, 6}));
  EXPECT_EQ(target_for(Route::kList, a), (SiteTarget{1, 0}));
  EXPECT_EQ(target_for(Route::kDirect, a), (SiteTarget{5, 0}));
}

TEST(Planner, ExitHookedSitesGoThroughTheirStub) {
  RouteAddresses a;
  a.list_trampoline = 16;
  a.call_ops_trampoline = 32;
  a.single_ops = 3;
  a.single_generated = 48;
  a.single_direct = 64;
  a.mux_ops = 6;
  a.via_stub = true;
  const SiteTarget g = target_for(Route::kGenerated, a);
  EXPECT_TRUE(g.via_stub());
  EXPECT_EQ(g.trampoline(), 48u);
  EXPECT_EQ(target_for(Route::kCallOps, a), (SiteTarget{33, 3}));
  EXPECT_EQ(target_for(Route::kCallOpsMux, a), (SiteTarget{33, 6}));
  EXPECT_EQ(target_for(Route::kList, a), (SiteTarget{17, 0}));
  // A direct trampoline is the caller's: always called...
  EXPECT_FALSE(target_for(Route::kDirect, a).via_stub());
  // ...except through a stub it cannot tell from a call (riscv64's).
  a.stubs_transparent = true;
  EXPECT_EQ(target_for(Route::kDirect, a), (SiteTarget{64 | SiteTarget::kViaStub, 0}));
}

TEST(Planner, StubStateChanges) {
  const uint64_t s = SiteTarget::kViaStub;
  EXPECT_EQ(decide({0, 0}, {16 | s, 0}), SiteAction::kEnable);
  EXPECT_EQ(decide({16, 0}, {16 | s, 0}), SiteAction::kRetarget);   // call -> jump
  EXPECT_EQ(decide({16 | s, 0}, {16, 0}), SiteAction::kRetarget);   // jump -> call
  EXPECT_EQ(decide({16 | s, 0}, {32 | s, 0}), SiteAction::kStubOnly);
  EXPECT_EQ(decide({16 | s, 0}, {0, 0}), SiteAction::kDisable);
  EXPECT_EQ(decide({16 | s, 1}, {16 | s, 2}), SiteAction::kSlotOnly);
  EXPECT_TRUE(stub_changes({0, 0}, {16 | s, 0}));
  EXPECT_TRUE(stub_changes({16 | s, 0}, {32 | s, 0}));
  EXPECT_FALSE(stub_changes({16 | s, 0}, {16 | s, 0}));
  EXPECT_FALSE(stub_changes({16 | s, 0}, {32, 0}));  // the stub is left behind
}

TEST(Planner, StateChanges) {
  EXPECT_EQ(decide({0, 0}, {0, 0}), SiteAction::kLeave);
  EXPECT_EQ(decide({0, 0}, {7, 0}), SiteAction::kEnable);
  EXPECT_EQ(decide({7, 0}, {0, 0}), SiteAction::kDisable);
  EXPECT_EQ(decide({7, 0}, {8, 0}), SiteAction::kRetarget);
  EXPECT_EQ(decide({7, 1}, {7, 2}), SiteAction::kSlotOnly);
  EXPECT_EQ(decide({7, 1}, {7, 1}), SiteAction::kLeave);
  EXPECT_EQ(decide({7, 1}, {7, 0}), SiteAction::kLeave);  // slot 0: don't care
  EXPECT_TRUE(slot_changes({0, 0}, {2, 3}));
  EXPECT_FALSE(slot_changes({2, 3}, {2, 3}));
}

}  // namespace
}  // namespace ftjit
