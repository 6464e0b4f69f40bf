// SPDX-License-Identifier: MIT
// What trampolines keep (ftjit_saves, TOOLCHAIN.md Q6): one caller keeping
// twelve doubles live across a call of a traced function, built each way
// Q6 names (tests/e2e/saves/hazard.c). Each module's evidence is read from
// its DWARF; traced by a callback that writes every vector register, the
// caller still computes what it computes untraced, with the engine's
// decision (saves auto) or, for the one hazard no binary shows, saves all.
// Forcing the psABI's set on the attribute-only build gives a wrong result:
// the hazard is real, and the test would see a trampoline that keeps too
// little.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "core/elf_image.h"
#include "core/register_evidence.h"
#include "ftjit/ftjit.h"

namespace {

struct HazardLib {
  const char* name;      // lib<name>.so
  bool evidence_abi;     // what its DWARF says
  const char* why_part;  // in the reason given
  ftjit_saves saves;     // what traces it correctly
};

const HazardLib kLibs[] = {
    {"saves_flag", true, "built by GCC with -fpatchable-function-entry", FTJIT_SAVES_AUTO},
    {"saves_attribute", false, "without -fpatchable-function-entry", FTJIT_SAVES_AUTO},
    {"saves_nodebug", false, "no DW_AT_producer", FTJIT_SAVES_AUTO},
    // An optimize attribute turns -fipa-ra back on, invisibly: saves all.
    {"saves_optimize", true, "built by GCC with -fpatchable-function-entry", FTJIT_SAVES_ALL},
#if FTJIT_SAVES_HAVE_CLANG
    {"saves_clang_ipra", false, "options are not recorded", FTJIT_SAVES_AUTO},
#endif
};

// Test names say the build, not the bytes of the parameter.
void PrintTo(const HazardLib& lib, std::ostream* os) { *os << lib.name; }

std::string path_of(const HazardLib& lib) { return std::string(FTJIT_SAVES_DIR) + "/lib" + lib.name + ".so"; }

// Writes every vector register, as a callback compiled with FP code may.
std::atomic<int> g_calls{0};
void clobber_vectors(uint64_t, uint64_t, ftjit_ops*, ftjit_regs*) {
  g_calls.fetch_add(1);
  asm volatile(
      "pcmpeqd %%xmm0, %%xmm0\n\tpcmpeqd %%xmm1, %%xmm1\n\tpcmpeqd %%xmm2, %%xmm2\n\t"
      "pcmpeqd %%xmm3, %%xmm3\n\tpcmpeqd %%xmm4, %%xmm4\n\tpcmpeqd %%xmm5, %%xmm5\n\t"
      "pcmpeqd %%xmm6, %%xmm6\n\tpcmpeqd %%xmm7, %%xmm7\n\tpcmpeqd %%xmm8, %%xmm8\n\t"
      "pcmpeqd %%xmm9, %%xmm9\n\tpcmpeqd %%xmm10, %%xmm10\n\tpcmpeqd %%xmm11, %%xmm11\n\t"
      "pcmpeqd %%xmm12, %%xmm12\n\tpcmpeqd %%xmm13, %%xmm13\n\tpcmpeqd %%xmm14, %%xmm14\n\t"
      "pcmpeqd %%xmm15, %%xmm15" ::
          : "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10",
            "xmm11", "xmm12", "xmm13", "xmm14", "xmm15");
}

class Saves : public ::testing::TestWithParam<HazardLib> {};

TEST_P(Saves, EvidenceIsReadFromTheModule) {
  const HazardLib& lib = GetParam();
  const ftjit::SavesEvidence e = ftjit::saves_evidence(ftjit::compile_unit_producers(path_of(lib)));
  EXPECT_EQ(e.abi_is_enough, lib.evidence_abi) << e.why;
  EXPECT_NE(e.why.find(lib.why_part), std::string::npos) << e.why;
}

double traced_result(const HazardLib& lib, ftjit_saves saves, int* calls) {
  void* handle = dlopen(path_of(lib).c_str(), RTLD_NOW | RTLD_LOCAL);
  EXPECT_NE(handle, nullptr) << dlerror();
  if (handle == nullptr) return 0;
  auto caller = reinterpret_cast<double (*)(double)>(dlsym(handle, "hz_caller"));
  ftjit_engine_options o;
  ftjit_engine_options_init(&o);
  o.saves = saves;
  ftjit_engine* engine = ftjit_engine_create(&o);
  EXPECT_NE(engine, nullptr) << ftjit_last_error();
  double r = 0;
  if (engine != nullptr) {
    ftjit_ops ops;
    ftjit_ops_init(&ops);
    ops.func = clobber_vectors;
    const std::string pattern = std::string("lib") + lib.name + ".so!hz_callee";
    const char* include[] = {pattern.c_str()};
    ftjit_filter filter{include, 1, nullptr, 0};
    EXPECT_EQ(ftjit_attach(engine, &ops, &filter), FTJIT_OK) << ftjit_last_error();
    g_calls = 0;
    double (*volatile fn)(double) = caller;
    r = fn(2.0);
    *calls = g_calls.load();
    EXPECT_EQ(ftjit_detach(engine, &ops), FTJIT_OK) << ftjit_last_error();
    ftjit_engine_destroy(engine);
  }
  dlclose(handle);
  return r;
}

double untraced_result(const HazardLib& lib) {
  void* handle = dlopen(path_of(lib).c_str(), RTLD_NOW | RTLD_LOCAL);
  auto caller = reinterpret_cast<double (*)(double)>(dlsym(handle, "hz_caller"));
  const double r = caller(2.0);
  dlclose(handle);
  return r;
}

TEST_P(Saves, CallerSurvivesACallbackThatWritesEveryVectorRegister) {
  const HazardLib& lib = GetParam();
  const double want = untraced_result(lib);
  int calls = 0;
  EXPECT_EQ(traced_result(lib, lib.saves, &calls), want);
  EXPECT_EQ(calls, 1);
}

INSTANTIATE_TEST_SUITE_P(Builds, Saves, ::testing::ValuesIn(kLibs),
                         [](const ::testing::TestParamInfo<HazardLib>& info) {
                           return std::string(info.param.name);
                         });

TEST(SavesHazard, ThePsabiSetAloneBreaksAnAttributeOnlyBuild) {
  const HazardLib& lib = kLibs[1];
  ASSERT_STREQ(lib.name, "saves_attribute");
  const double want = untraced_result(lib);
  int calls = 0;
  EXPECT_NE(traced_result(lib, FTJIT_SAVES_ABI, &calls), want)
      << "the caller kept nothing in xmm8-15 across the call: this test no longer shows the hazard";
  EXPECT_EQ(calls, 1);
}

TEST(SavesPolicy, UnknownPoliciesAreRefused) {
  ftjit_engine_options o;
  ftjit_engine_options_init(&o);
  EXPECT_EQ(o.saves, FTJIT_SAVES_AUTO);
  o.saves = 7;
  EXPECT_EQ(ftjit_engine_create(&o), nullptr);
  EXPECT_NE(std::string(ftjit_last_error()).find("saves"), std::string::npos) << ftjit_last_error();
  o.saves = FTJIT_SAVES_ALL;
  ftjit_engine* engine = ftjit_engine_create(&o);
  ASSERT_NE(engine, nullptr) << ftjit_last_error();
  EXPECT_EQ(ftjit_engine_set_saves(engine, static_cast<ftjit_saves>(9)), FTJIT_E_INVALID_ARGUMENT);
  EXPECT_EQ(ftjit_engine_set_saves(engine, FTJIT_SAVES_ABI), FTJIT_OK);
  EXPECT_EQ(ftjit_engine_set_saves(nullptr, FTJIT_SAVES_ABI), FTJIT_E_INVALID_ARGUMENT);
  ftjit_engine_destroy(engine);
}

}  // namespace
