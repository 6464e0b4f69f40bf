// SPDX-License-Identifier: MIT
// Plugin host, without an engine: plugin specs, option values, the search
// path, and loading/checking plugins (each defect refused with its cause).
#include <dlfcn.h>
#include <link.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include "runtime/plugin_host/host_internal.h"
#include "runtime/plugin_host/plugin_host.h"

namespace {

using ftjit::plugins::describe_plugin;
using ftjit::plugins::list_plugins;
using ftjit::plugins::parse_plugin_spec;
using ftjit::plugins::plugin_search_path;
using ftjit::plugins::PluginSpec;
using ftjit::plugins::detail::parse_option_value;
using ::testing::HasSubstr;

const std::string kDir = HOST_TEST_PLUGIN_DIR;

// Sets FTJIT_PLUGIN_PATH for one scope.
class ScopedPluginPath {
 public:
  explicit ScopedPluginPath(const std::string& value) {
    if (const char* old = std::getenv("FTJIT_PLUGIN_PATH")) old_ = old, had_ = true;
    setenv("FTJIT_PLUGIN_PATH", value.c_str(), 1);
  }
  ~ScopedPluginPath() {
    if (had_) {
      setenv("FTJIT_PLUGIN_PATH", old_.c_str(), 1);
    } else {
      unsetenv("FTJIT_PLUGIN_PATH");
    }
  }

 private:
  std::string old_;
  bool had_ = false;
};

// ---------------------------------------------------------------------------
// Specs
// ---------------------------------------------------------------------------

TEST(PluginSpec, NameOnly) {
  auto s = parse_plugin_spec("count");
  ASSERT_TRUE(s) << s.error().message;
  EXPECT_EQ(s->name, "count");
  EXPECT_FALSE(s->is_path());
  EXPECT_TRUE(s->options.empty());
}

TEST(PluginSpec, OptionsInOrder) {
  auto s = parse_plugin_spec("count:top=10,table_size=4096");
  ASSERT_TRUE(s) << s.error().message;
  EXPECT_EQ(s->name, "count");
  ASSERT_EQ(s->options.size(), 2u);
  EXPECT_EQ(s->options[0], (std::pair<std::string, std::string>{"top", "10"}));
  EXPECT_EQ(s->options[1], (std::pair<std::string, std::string>{"table_size", "4096"}));
}

TEST(PluginSpec, PathWithOptions) {
  auto s = parse_plugin_spec("/x/y.so:opt=v");
  ASSERT_TRUE(s) << s.error().message;
  EXPECT_EQ(s->name, "/x/y.so");
  EXPECT_TRUE(s->is_path());
  ASSERT_EQ(s->options.size(), 1u);
  EXPECT_EQ(s->options[0].second, "v");
}

TEST(PluginSpec, ColonsInDirectoriesBelongToThePath) {
  auto s = parse_plugin_spec("/a:b/c:d/p.so:k=v");
  ASSERT_TRUE(s) << s.error().message;
  EXPECT_EQ(s->name, "/a:b/c:d/p.so");
  ASSERT_EQ(s->options.size(), 1u);
  EXPECT_EQ(s->options[0].first, "k");
}

TEST(PluginSpec, ValuesMayHoldPathsAndColons) {
  auto s = parse_plugin_spec("trace:file=/tmp/a:b.so:c");
  ASSERT_TRUE(s) << s.error().message;
  EXPECT_EQ(s->name, "trace");
  ASSERT_EQ(s->options.size(), 1u);
  EXPECT_EQ(s->options[0].second, "/tmp/a:b.so:c");
  auto p = parse_plugin_spec("/x/y.so:file=/tmp/out,top=3");
  ASSERT_TRUE(p) << p.error().message;
  EXPECT_EQ(p->name, "/x/y.so");
  ASSERT_EQ(p->options.size(), 2u);
  EXPECT_EQ(p->options[0].second, "/tmp/out");
}

TEST(PluginSpec, BareSoFileIsAPath) {
  auto s = parse_plugin_spec("mine.so");
  ASSERT_TRUE(s) << s.error().message;
  EXPECT_TRUE(s->is_path());
}

TEST(PluginSpec, ValuesKeepEqualsAndEscapes) {
  auto s = parse_plugin_spec("trace:expr=a=b,label=x\\,y\\\\z,empty=");
  ASSERT_TRUE(s) << s.error().message;
  ASSERT_EQ(s->options.size(), 3u);
  EXPECT_EQ(s->options[0].second, "a=b");
  EXPECT_EQ(s->options[1].second, "x,y\\z");
  EXPECT_EQ(s->options[2].second, "");
}

// format= and output= are the host's (one report format and file per
// plugin of a run): kept out of the plugin's options.
TEST(PluginSpec, HostKeysAreNotPluginOptions) {
  auto s = parse_plugin_spec("latency:format=json,top=3,output=o\\,x.json");
  ASSERT_TRUE(s) << s.error().message;
  EXPECT_EQ(s->format, "json");
  EXPECT_EQ(s->output, "o,x.json");
  ASSERT_EQ(s->options.size(), 1u);
  EXPECT_EQ(s->options[0].first, "top");
  auto plain = parse_plugin_spec("count");
  ASSERT_TRUE(plain);
  EXPECT_EQ(plain->format, "");
  EXPECT_EQ(plain->output, "");
}

class MalformedSpec : public ::testing::TestWithParam<std::pair<const char*, const char*>> {};

TEST_P(MalformedSpec, IsRefusedWithTheCause) {
  auto [text, cause] = GetParam();
  auto s = parse_plugin_spec(text);
  ASSERT_FALSE(s) << text << " parsed as " << s->name;
  EXPECT_EQ(s.error().code, FTJIT_E_INVALID_ARGUMENT);
  EXPECT_THAT(s.error().message, HasSubstr(std::string("'") + text + "'"));
  EXPECT_THAT(s.error().message, HasSubstr(cause));
}

INSTANTIATE_TEST_SUITE_P(
    Cases, MalformedSpec,
    ::testing::Values(std::pair{"", "no plugin name"}, std::pair{":top=1", "no plugin name"},
                      std::pair{"Count", "neither a plugin name"},
                      std::pair{"co unt", "neither a plugin name"},
                      std::pair{"count:", "nothing after ':'"},
                      std::pair{"count:top", "has no '=value'"},
                      std::pair{"count:=5", "has no name"},
                      std::pair{"count:top=1,,x=2", "empty option"},
                      std::pair{"count:top=1,", "empty option"},
                      std::pair{"count:top=1,top=2", "given twice"},
                      std::pair{"count:format=json,format=tsv", "'format' given twice"},
                      std::pair{"trace:output=a,output=b", "'output' given twice"},
                      std::pair{"trace:output=", "needs a value"},
                      std::pair{"trace:format=", "needs a value"},
                      std::pair{"count:a=\\x", "must be followed by"}));

// ---------------------------------------------------------------------------
// Option values
// ---------------------------------------------------------------------------

TEST(OptionValue, Booleans) {
  for (const char* t : {"true", "yes", "on", "1", "TRUE", "Yes"}) {
    auto v = parse_option_value(FTJIT_OPTION_BOOL, t);
    ASSERT_TRUE(v) << t;
    EXPECT_TRUE(v->b) << t;
  }
  for (const char* f : {"false", "no", "off", "0", "Off"}) {
    auto v = parse_option_value(FTJIT_OPTION_BOOL, f);
    ASSERT_TRUE(v) << f;
    EXPECT_FALSE(v->b) << f;
  }
  for (const char* bad : {"", "2", "y", "truee"}) {
    auto v = parse_option_value(FTJIT_OPTION_BOOL, bad);
    ASSERT_FALSE(v) << bad;
    EXPECT_THAT(v.error().message, HasSubstr("wants a boolean"));
  }
}

TEST(OptionValue, Integers) {
  const std::pair<const char*, int64_t> good[] = {
      {"10", 10}, {"-5", -5}, {"+3", 3}, {"0x1f", 31}, {"0X10", 16}, {"-0x10", -16},
      {"010", 10},  // decimal, not octal
      {"9223372036854775807", INT64_MAX}, {"-9223372036854775808", INT64_MIN}};
  for (auto [text, want] : good) {
    auto v = parse_option_value(FTJIT_OPTION_INT, text);
    ASSERT_TRUE(v) << text << ": " << v.error().message;
    EXPECT_EQ(v->i, want) << text;
  }
  for (const char* bad : {"", "x", "1.5", "0x", "--1", "+-1", "9223372036854775808",
                          "-9223372036854775809", "10 ", " 10", "0xg"}) {
    auto v = parse_option_value(FTJIT_OPTION_INT, bad);
    ASSERT_FALSE(v) << "'" << bad << "' parsed as " << v->i;
    EXPECT_EQ(v.error().message, std::string("wants an integer, got '") + bad + "'");
  }
}

TEST(OptionValue, Doubles) {
  const std::pair<const char*, double> good[] = {{"2.5", 2.5}, {"-1e3", -1000.0}, {"7", 7.0},
                                                 {"+0.25", 0.25}};
  for (auto [text, want] : good) {
    auto v = parse_option_value(FTJIT_OPTION_DOUBLE, text);
    ASSERT_TRUE(v) << text;
    EXPECT_DOUBLE_EQ(v->d, want) << text;
  }
  for (const char* bad : {"", "abc", "1.0x", "inf", "nan", "1e999"}) {
    auto v = parse_option_value(FTJIT_OPTION_DOUBLE, bad);
    ASSERT_FALSE(v) << bad;
    EXPECT_THAT(v.error().message, HasSubstr("wants a number"));
  }
}

TEST(OptionValue, StringsTakeAnything) {
  auto v = parse_option_value(FTJIT_OPTION_STRING, "a b,=c");
  ASSERT_TRUE(v);
  EXPECT_EQ(v->s, "a b,=c");
}

// ---------------------------------------------------------------------------
// Search path, listing, describing
// ---------------------------------------------------------------------------

TEST(SearchPath, EnvironmentFirstThenBesideTheProgramThenBuildThenInstall) {
  ScopedPluginPath env("/first::/second:");
  auto dirs = plugin_search_path();
  ASSERT_EQ(dirs.size(), 5u);
  EXPECT_EQ(dirs[0], "/first");
  EXPECT_EQ(dirs[1], "/second");
  EXPECT_THAT(dirs[2], HasSubstr("/../lib"));
  EXPECT_THAT(dirs[2], HasSubstr("ftjit/plugins"));
  EXPECT_THAT(dirs[3], HasSubstr("plugins/lib"));
  EXPECT_THAT(dirs[4], HasSubstr("ftjit/plugins"));
}

TEST(Describe, GoodPluginByPath) {
  auto info = describe_plugin(PluginSpec{kDir + "/ftjit-plugin-hostgood.so", {}});
  ASSERT_TRUE(info) << info.error().message;
  EXPECT_EQ(info->name, "hostgood");
  EXPECT_EQ(info->path, kDir + "/ftjit-plugin-hostgood.so");
  EXPECT_EQ(info->description, "host test plugin: counts entries");
  ASSERT_EQ(info->options.size(), 8u);
  EXPECT_EQ(info->options[0].name, "top");
  EXPECT_EQ(info->options[0].type, FTJIT_OPTION_INT);
  EXPECT_EQ(info->options[0].default_value, "10");
  EXPECT_EQ(info->options[2].name, "verbose");
  EXPECT_EQ(info->options[2].default_value, "");
  EXPECT_EQ(info->formats, (std::vector<std::string>{"text", "tsv"}));
  EXPECT_FALSE(info->hooks_exit);
  EXPECT_STREQ(ftjit::plugins::option_type_name(info->options[1].type), "double");
}

TEST(Describe, BuiltinNameResolvedOnThePath) {
  ScopedPluginPath env("/nonexistent-dir:" + kDir);
  auto info = describe_plugin(PluginSpec{"hostexit", {}});
  ASSERT_TRUE(info) << info.error().message;
  EXPECT_EQ(info->path, kDir + "/ftjit-plugin-hostexit.so");
  EXPECT_TRUE(info->hooks_exit);
}

TEST(Describe, UnknownBuiltinNamesTheDirectories) {
  ScopedPluginPath env(kDir);
  auto info = describe_plugin(PluginSpec{"nosuch", {}});
  ASSERT_FALSE(info);
  EXPECT_THAT(info.error().message, HasSubstr("plugin 'nosuch' not found"));
  EXPECT_THAT(info.error().message, HasSubstr("ftjit-plugin-nosuch.so"));
  EXPECT_THAT(info.error().message, HasSubstr(kDir));
}

TEST(Describe, InitIsNotRunByDescribe) {
  auto info = describe_plugin(PluginSpec{kDir + "/bad-init-fails.so", {}});
  EXPECT_TRUE(info) << info.error().message;
}

TEST(List, FindsPluginsOnThePathAndSkipsTestNames) {
  ScopedPluginPath env(kDir);
  auto list = list_plugins();
  ASSERT_TRUE(list) << list.error().message;
  std::vector<std::string> names;
  for (const auto& p : *list) names.push_back(p.name);
  auto pos = [&](const char* n) { return std::find(names.begin(), names.end(), n) - names.begin(); };
  ASSERT_LT(pos("hostexit"), static_cast<long>(names.size()));
  ASSERT_LT(pos("hostgood"), static_cast<long>(names.size()));
  EXPECT_LT(pos("hostexit"), pos("hostgood"));  // sorted
  EXPECT_EQ(pos("test-hidden"), static_cast<long>(names.size()));
  for (const auto& p : *list) {
    if (p.name == "hostgood") {
      EXPECT_TRUE(p.error.empty()) << p.error;
      EXPECT_EQ(p.path, kDir + "/ftjit-plugin-hostgood.so");
    }
  }
}

// Where libm really is, from the loader rather than a guessed path.
std::string libm_path() {
  void* h = dlopen("libm.so.6", RTLD_NOW | RTLD_NOLOAD);
  if (h == nullptr) h = dlopen("libm.so.6", RTLD_NOW);
  if (h == nullptr) return {};
  link_map* map = nullptr;
  std::string path;
  if (dlinfo(h, RTLD_DI_LINKMAP, &map) == 0 && map != nullptr) path = map->l_name;
  dlclose(h);
  return path;
}

std::string write_text_file(const char* name) {
  std::string path = ::testing::TempDir() + name;
  std::ofstream(path) << "this is not a shared object\n";
  return path;
}

struct Refusal {
  std::string path;
  std::string cause;
};

std::vector<Refusal> refusals() {
  return {
      {kDir + "/bad-abi.so", "built for plugin ABI 99, this host speaks 1"},
      {kDir + "/bad-no-symbol.so", "not an ftjit plugin (no ftjit_plugin_v1 symbol)"},
      {kDir + "/bad-null.so", "ftjit_plugin_v1 returned NULL"},
      {kDir + "/bad-small.so", "struct_size"},
      {kDir + "/bad-no-callbacks.so", "has neither an entry nor an exit callback"},
      {kDir + "/bad-bad-default.so", "default of option 'size' wants an integer, got 'ten'"},
      {kDir + "/bad-bad-name.so", "invalid plugin name 'Bad Name'"},
      {kDir + "/bad-dup-option.so", "option 'size' is declared twice"},
      {kDir + "/bad-events-no-consume.so", "declares event_size but no consume callback"},
      {kDir + "/no-such-plugin.so", "no such file"},
      {write_text_file("ftjit-host-not-elf.so"), "not an ELF file"},
      {libm_path(), "not an ftjit plugin"},
      // A PIE executable is ET_DYN, but the loader refuses to dlopen it.
      {"/proc/self/exe", "cannot be loaded"},
  };
}

TEST(Describe, EveryDefectIsRefusedWithPathAndCause) {
  for (const Refusal& r : refusals()) {
    SCOPED_TRACE(r.path);
    ASSERT_FALSE(r.path.empty());
    auto info = describe_plugin(PluginSpec{r.path, {}});
    ASSERT_FALSE(info) << "loaded as " << info->name;
    EXPECT_THAT(info.error().message, HasSubstr(r.path));
    EXPECT_THAT(info.error().message, HasSubstr(r.cause));
  }
  std::remove((::testing::TempDir() + "ftjit-host-not-elf.so").c_str());
}

}  // namespace
