// SPDX-License-Identifier: MIT
// Discovery on a cross leg's ISA fixtures, written once (isa_discovery_test.cpp)
// and compiled per ISA with that ISA's part (tests/unit/<prefix>_discovery_test.cpp):
// its fixture catalogue, what its compilers put at a site, and its backend's
// verdict on each sled. Built and run on the host and, cross-built, as the
// ISA's code under qemu-user.
#pragma once

#include <gtest/gtest.h>

#include <map>
#include <span>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "core/elf_image.h"
#include "core/site_discovery.h"
#include "discovery_fixtures.h"
#include "tests/common/isa_suite.h"

#ifndef FTJIT_ISA_FIXTURE_HAVE_CLANG
#define FTJIT_ISA_FIXTURE_HAVE_CLANG 0
#endif

namespace ftjit::isa_discovery {

using testing::FixtureKind;
using testing::TrustedElf;

// One fixture file and what its layout says about every site in it.
struct IsaFixture {
  std::string file;
  std::string compiler;
  std::string layout;   // the fixtures' layout tag: p4_2, p8_4, ...
  uint32_t pad;         // bytes between symbol and site start (a landing pad)
  bool literal;         // 8 bytes before the symbol: the ops literal
  bool off_grid;        // built with a smaller -falign-functions: some literals not 8-aligned
  FixtureKind kind;

  std::string path() const { return std::string(FTJIT_FIXTURE_DIR) + "/" + file; }
};

void PrintTo(const IsaFixture& f, std::ostream* os);

// ---- The ISA's part -------------------------------------------------------

extern const Isa kFixtureIsa;
extern const uint16_t kFixtureMachine;  // e_machine
// Every fixture file; `compilers` are gcc, and clang if its fixtures were built.
std::vector<IsaFixture> isa_fixtures(const std::vector<std::string>& compilers);
// What the compiler put at a discovered site (called for every site,
// named or not), checked in the file.
void check_compiler_sled(const IsaFixture& f, const TrustedElf& elf, const DiscoveredSite& s);
// The backends the engine would ask, each with how it was made.
struct NamedBackend {
  const char* how;
  const Backend* backend;
};
std::vector<NamedBackend> isa_backends();
// An instruction word that is no NOP of the ISA's sleds.
extern const uint32_t kForeignWord;
// What else the backend must say about a named site's sled (`site`: the
// traits' site_bytes from the entry, a NOP sled).
void check_backend_at_site(const IsaFixture& f, const Backend& backend, const TrustedElf& elf,
                           const DiscoveredSite& s, const std::vector<uint8_t>& site);

// ---- Shared ---------------------------------------------------------------

std::vector<IsaFixture> fixtures();
// Function symbols by name from .symtab, or .dynsym in a stripped file.
std::map<std::string, uint64_t> symbols_by_name(const TrustedElf& elf);
// `n` bytes of the file at link-time address vaddr (empty if unmapped).
std::vector<uint8_t> code_at(const TrustedElf& elf, uint64_t vaddr, size_t n);

}  // namespace ftjit::isa_discovery

// A fixture file, parsed and discovered.
class ISA_SUITE(DiscoveryTest) : public ::testing::TestWithParam<ftjit::isa_discovery::IsaFixture> {
 protected:
  void SetUp() override;

  std::vector<uint8_t> bytes_;
  ftjit::ElfImage img_;
  ftjit::DiscoveredModule module_;
};
