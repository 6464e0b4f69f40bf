// SPDX-License-Identifier: MIT
// Site discovery tests: names, prefixes and addresses from fixture files and from modules dlopen()ed at run time.
#include "core/site_discovery.h"

#include <dlfcn.h>
#include <link.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <set>

#include "core/demangle.h"
#include "discovery_fixtures.h"
#include "runtime/module_scan.h"

namespace ftjit {
namespace {

using testing::ElfWriter;
using testing::Fixture;
using testing::FixtureKind;
using testing::as_span;
using testing::read_file;

// ============================================================================
// demangle
// ============================================================================

TEST(DemangleTest, CxxNamesAreDemangledAndEverythingElseIsKept) {
  EXPECT_EQ(demangle("_ZN2ns6widget4frobEi"), "ns::widget::frob(int)");
  EXPECT_EQ(demangle("_Z8fx_twiceIiET_S0_"), "int fx_twice<int>(int)");
  EXPECT_EQ(demangle("_Z7fx_overPKc"), "fx_over(char const*)");
  EXPECT_EQ(demangle("_Z3fooi.isra.0"), "foo(int) [clone .isra.0]");
  EXPECT_EQ(demangle("_Z3fooi@@VERS_1"), "foo(int)@@VERS_1");
  EXPECT_EQ(demangle("fx_add"), "fx_add");
  EXPECT_EQ(demangle("f"), "f");  // a bare type code ("float"), not a function name
  EXPECT_EQ(demangle("i"), "i");
  EXPECT_EQ(demangle("_Z"), "_Z");
  EXPECT_EQ(demangle("_Zgarbage!!"), "_Zgarbage!!");
  EXPECT_EQ(demangle(""), "");
}

// ============================================================================
// Fixture files
// ============================================================================

class SiteDiscoveryFixtureTest : public ::testing::TestWithParam<Fixture> {
 protected:
  void SetUp() override {
    if (!testing::file_exists(GetParam().path())) {
      if (GetParam().kind == FixtureKind::kStripped) GTEST_SKIP() << "no strip tool";
      FAIL() << "fixture missing: " << GetParam().path();
    }
    auto module = discover_file(GetParam().path());
    ASSERT_TRUE(module.ok()) << module.error().message;
    module_ = std::move(module.value());
  }
  DiscoveredModule module_;
};

TEST_P(SiteDiscoveryFixtureTest, ModuleIsDescribed) {
  EXPECT_EQ(module_.path, GetParam().path());
  EXPECT_EQ(module_.load_bias, 0u);
  EXPECT_EQ(module_.isa, Isa::kX86_64);
  EXPECT_TRUE(module_.has_patchable_section);
  EXPECT_TRUE(std::is_sorted(module_.sites.begin(), module_.sites.end(),
                             [](const auto& a, const auto& b) { return a.entry < b.entry; }));
}

// Compares against the hand-written list of the fixture source, not
// against anything derived from the ELF file.
TEST_P(SiteDiscoveryFixtureTest, SitesAreExactlyThePatchableFunctionsOfTheSource) {
  const Fixture& f = GetParam();
  std::map<std::string, std::string> expected;  // name -> demangled
  size_t expected_unnamed = 0;
  for (const auto& fn : testing::expected_functions(f)) {
    if (f.kind == FixtureKind::kStripped && !fn.exported) {
      ++expected_unnamed;
    } else {
      expected[fn.name] = fn.demangled;
    }
  }
  std::map<std::string, std::string> found;
  size_t unnamed = 0;
  for (const auto& s : module_.sites) {
    if (s.name.empty()) {
      ++unnamed;
      EXPECT_EQ(s.entry, s.record());
      EXPECT_EQ(s.prefix_bytes, 0u);
      EXPECT_TRUE(s.demangled.empty());
      continue;
    }
    EXPECT_TRUE(found.emplace(s.name, s.shown_name()).second) << "duplicate site " << s.name;
    EXPECT_EQ(s.prefix_bytes, f.prefix_bytes) << s.name;
    EXPECT_EQ(s.entry - s.record(), s.prefix_bytes) << s.name;
  }
  EXPECT_EQ(found, expected);
  EXPECT_EQ(unnamed, expected_unnamed);
  EXPECT_EQ(module_.sites.size(), testing::expected_functions(f).size());
}

TEST_P(SiteDiscoveryFixtureTest, EntriesAreTheSymbolAddresses) {
  auto bytes = read_file(GetParam().path());
  auto img = ElfImage::parse(as_span(bytes));
  ASSERT_TRUE(img.ok()) << img.error().message;
  for (const auto& s : module_.sites) {
    if (s.name.empty()) continue;
    const ElfSymbol* sym = img->function_at(s.entry);
    ASSERT_NE(sym, nullptr) << s.name;
    EXPECT_EQ(sym->name, s.name);
  }
}

TEST_P(SiteDiscoveryFixtureTest, LoadBiasShiftsEveryAddress) {
  auto bytes = read_file(GetParam().path());
  auto img = ElfImage::parse(as_span(bytes));
  ASSERT_TRUE(img.ok()) << img.error().message;
  constexpr uint64_t kBias = 0x7f1234560000;
  auto shifted = discover_sites(img.value(), "shifted", kBias);
  ASSERT_TRUE(shifted.ok());
  ASSERT_EQ(shifted->sites.size(), module_.sites.size());
  EXPECT_EQ(shifted->load_bias, kBias);
  EXPECT_EQ(shifted->path, "shifted");
  for (size_t i = 0; i < module_.sites.size(); ++i) {
    EXPECT_EQ(shifted->sites[i].record(), module_.sites[i].record() + kBias);
    EXPECT_EQ(shifted->sites[i].entry, module_.sites[i].entry + kBias);
    EXPECT_EQ(shifted->sites[i].prefix_bytes, module_.sites[i].prefix_bytes);
    EXPECT_EQ(shifted->sites[i].name, module_.sites[i].name);
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, SiteDiscoveryFixtureTest,
                         ::testing::ValuesIn(testing::sled_fixtures()),
                         [](const auto& p) { return testing::fixture_test_name(p.param); });

TEST(SiteDiscoveryTest, ModuleWithoutSectionHasNoSitesAndIsNoError) {
  auto module = discover_file(std::string(FTJIT_FIXTURE_DIR) + "/libfx_noflag.so");
  ASSERT_TRUE(module.ok()) << module.error().message;
  EXPECT_FALSE(module->has_patchable_section);
  EXPECT_TRUE(module->sites.empty());
  EXPECT_EQ(module->isa, Isa::kX86_64);
}

TEST(SiteDiscoveryTest, OptedOutFunctionHasNoSite) {
  std::vector<std::string> compilers = {"gcc"};
  if (FTJIT_FIXTURE_HAVE_CLANG) compilers.push_back("clang");
  for (const auto& cc : compilers) {
    SCOPED_TRACE(cc);
    auto module = discover_file(std::string(FTJIT_FIXTURE_DIR) + "/libfx_optout_" + cc + ".so");
    ASSERT_TRUE(module.ok()) << module.error().message;
    std::vector<std::string> names;
    for (const auto& s : module->sites) names.emplace_back(s.name);
    EXPECT_EQ(names, (std::vector<std::string>{"fx_before", "fx_after"}));
  }
}

TEST(SiteDiscoveryTest, PieFixturesRun) {
  for (const auto& f : testing::sled_fixtures()) {
    if (f.kind != FixtureKind::kExecutable) continue;
    EXPECT_EQ(std::system(f.path().c_str()), 0) << f.path();
  }
}

TEST(SiteDiscoveryTest, FileErrorsCarryThePath) {
  auto missing = discover_file("/nonexistent/ftjit/libnothing.so");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().code, FTJIT_E_SYSTEM);
  EXPECT_NE(missing.error().message.find("/nonexistent/ftjit/libnothing.so"), std::string::npos);

  auto dir = discover_file(FTJIT_FIXTURE_DIR);
  ASSERT_FALSE(dir.ok());
  EXPECT_EQ(dir.error().code, FTJIT_E_SYSTEM);

  const std::string not_elf = std::string(FTJIT_FIXTURE_DIR) + "/../discovery_not_elf.txt";
  { std::ofstream(not_elf) << "not an ELF file\n"; }
  auto bad = discover_file(not_elf);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().code, FTJIT_E_ELF);
  EXPECT_EQ(bad.error().message.rfind(not_elf + ": ", 0), 0u) << bad.error().message;
}

// ============================================================================
// Synthetic records: the ownership rule
// ============================================================================

// Records at text+0, text+16, text+48 and text+96; symbols "second" at
// text+16, "third" at text+56 and "far" at text+113 (17 bytes after the
// last record). text+0 must not take "second": text+16 is that symbol's
// own record.
TEST(SiteDiscoverySyntheticTest, NearestSymbolOwnedByNoCloserRecordNamesTheSite) {
  ElfWriter w;
  const uint64_t text = ElfWriter::kFirstSectionOffset;
  w.add_section({".text", SHT_PROGBITS, SHF_ALLOC | SHF_EXECINSTR, 0, 0, 0, 0,
                 std::vector<uint8_t>(160, 0x90)});
  w.add_section({"__patchable_function_entries", SHT_PROGBITS, SHF_ALLOC | SHF_WRITE, 0, 1, 0,
                 8, ElfWriter::words({text + 96, text, text + 48, text + 16})});
  w.add_section({".symtab", SHT_SYMTAB, 0, 0, 4, 0, sizeof(Elf64_Sym),
                 ElfWriter::symbols({testing::function_symbol(1, text + 16, 1),
                                     testing::function_symbol(8, text + 56, 1),
                                     testing::function_symbol(14, text + 113, 1)})});
  const std::string strings("\0second\0third\0far\0", 18);
  w.add_section({".strtab", SHT_STRTAB, 0, 0, 0, 0, 0,
                 std::vector<uint8_t>(strings.begin(), strings.end())});
  auto bytes = w.build();
  auto img = ElfImage::parse(as_span(bytes));
  ASSERT_TRUE(img.ok()) << img.error().message;
  auto module = discover_sites(img.value(), "synthetic", 0x1000);
  ASSERT_TRUE(module.ok());
  ASSERT_EQ(module->sites.size(), 4u);
  struct Want { uint64_t record, entry; uint32_t prefix; const char* name; };
  const Want want[] = {{text, text, 0, ""},
                       {text + 16, text + 16, 0, "second"},
                       {text + 48, text + 56, 8, "third"},
                       {text + 96, text + 96, 0, ""}};
  for (size_t i = 0; i < 4; ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(module->sites[i].record(), want[i].record + 0x1000);
    EXPECT_EQ(module->sites[i].entry, want[i].entry + 0x1000);
    EXPECT_EQ(module->sites[i].prefix_bytes, want[i].prefix);
    EXPECT_EQ(module->sites[i].name, want[i].name);
    EXPECT_EQ(module->sites[i].shown_name(), want[i].name);
  }
}

// ============================================================================
// Modules loaded in this process
// ============================================================================

std::string canonical(const std::string& path) {
  std::error_code ec;
  auto p = std::filesystem::canonical(path, ec);
  return ec ? path : p.string();
}

TEST(ModuleScanTest, DlopenedFixturesAreFoundAtTheirRunTimeAddresses) {
  std::vector<Fixture> libs;
  for (const auto& f : testing::sled_fixtures()) {
    if (f.kind == FixtureKind::kLibrary) libs.push_back(f);
  }
  const uint64_t generation_before = loaded_modules_generation();
  std::vector<void*> handles;
  for (const auto& f : libs) {
    void* h = dlopen(f.path().c_str(), RTLD_NOW | RTLD_LOCAL);
    ASSERT_NE(h, nullptr) << dlerror();
    handles.push_back(h);
  }
  EXPECT_GT(loaded_modules_generation(), generation_before);

  auto modules = discover_loaded_modules();
  ASSERT_TRUE(modules.ok()) << modules.error().message;
  ASSERT_FALSE(modules->empty());
  EXPECT_EQ(canonical(modules->front().path), canonical("/proc/self/exe"));
  for (const auto& m : *modules) EXPECT_EQ(m.path.find("vdso"), std::string::npos) << m.path;

  for (size_t i = 0; i < libs.size(); ++i) {
    const Fixture& f = libs[i];
    SCOPED_TRACE(f.file);
    auto it = std::find_if(modules->begin(), modules->end(),
                           [&](const DiscoveredModule& m) { return m.path == f.path(); });
    ASSERT_NE(it, modules->end());
    link_map* map = nullptr;
    ASSERT_EQ(dlinfo(handles[i], RTLD_DI_LINKMAP, &map), 0);
    EXPECT_EQ(it->load_bias, map->l_addr);
    EXPECT_TRUE(it->has_patchable_section);
    EXPECT_EQ(it->sites.size(), testing::expected_functions(f).size());

    auto file = read_file(f.path());
    auto img = ElfImage::parse(as_span(file));
    ASSERT_TRUE(img.ok());
    testing::TrustedElf elf(file);
    size_t resolved = 0;
    for (const auto& s : it->sites) {
      // The sled in memory is the sled in the file: nothing patched it.
      auto off = elf.file_offset(s.record() - it->load_bias);
      ASSERT_TRUE(off.has_value()) << s.name;
      EXPECT_EQ(std::memcmp(reinterpret_cast<const void*>(s.record()), file.data() + *off,
                            f.sled_bytes),
                0)
          << s.name;
      void* sym = dlsym(handles[i], std::string(s.name).c_str());
      if (sym == nullptr) continue;  // static functions are not exported
      EXPECT_EQ(s.entry, reinterpret_cast<uint64_t>(sym)) << s.name;
      ++resolved;
    }
    EXPECT_EQ(resolved, it->sites.size() - 1);  // all but fx_local
  }

  const uint64_t generation_loaded = loaded_modules_generation();
  for (void* h : handles) dlclose(h);
  EXPECT_GT(loaded_modules_generation(), generation_loaded);
}

}  // namespace
}  // namespace ftjit
