// SPDX-License-Identifier: MIT
// core/elf_section_probe.h: the module scan's shortcut must agree with the
// full parser wherever it answers, and answer "unknown" otherwise.
#include "core/elf_section_probe.h"

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <vector>

#include "core/elf_image.h"
#include "discovery_fixtures.h"

namespace ftjit {
namespace {

using testing::fixture_bytes;

// The probe reads an fd: the bytes go into a memfd.
SectionProbe probe_bytes(const std::vector<uint8_t>& bytes) {
  const int fd = memfd_create("ftjit-probe-test", MFD_CLOEXEC);
  if (fd < 0) return {};
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n <= 0) break;
    done += static_cast<size_t>(n);
  }
  const SectionProbe p = probe_elf_section(fd, kPatchableSectionName);
  ::close(fd);
  return p;
}


TEST(ElfSectionProbe, FindsTheRecordsSectionOrItsAbsence) {
  const auto with = fixture_bytes("libfx_gcc_p5.so");
  const auto without = fixture_bytes("libfx_noflag.so");
  ASSERT_FALSE(with.empty());
  ASSERT_FALSE(without.empty());
  const SectionProbe a = probe_bytes(with);
  EXPECT_EQ(a.state, SectionProbe::kPresent);
  EXPECT_EQ(a.isa, Isa::kX86_64);
  const SectionProbe b = probe_bytes(without);
  EXPECT_EQ(b.state, SectionProbe::kAbsent);
  EXPECT_EQ(b.isa, Isa::kX86_64);
  // Another name, for the same reading: absent from both.
  const int fd = memfd_create("ftjit-probe-test", MFD_CLOEXEC);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::write(fd, with.data(), with.size()), static_cast<ssize_t>(with.size()));
  EXPECT_EQ(probe_elf_section(fd, "__no_such_section").state, SectionProbe::kAbsent);
  EXPECT_EQ(probe_elf_section(fd, ".text").state, SectionProbe::kPresent);
  ::close(fd);
}

TEST(ElfSectionProbe, WhatItCannotVouchForIsUnknown) {
  EXPECT_EQ(probe_bytes({}).state, SectionProbe::kUnknown);
  const std::string text = "not an ELF file at all, but long enough to hold a header of sixty-four bytes";
  EXPECT_EQ(probe_bytes(std::vector<uint8_t>(text.begin(), text.end())).state, SectionProbe::kUnknown);
  auto bytes = fixture_bytes("libfx_noflag.so");
  ASSERT_GE(bytes.size(), 64u);
  // The section-name table's index past the table.
  auto bad = bytes;
  const uint16_t past = 0xfffe;
  std::memcpy(bad.data() + 62, &past, 2);  // e_shstrndx
  EXPECT_EQ(probe_bytes(bad).state, SectionProbe::kUnknown);
  // A relocatable object (ET_REL): the parser's to refuse.
  bad = bytes;
  const uint16_t rel = 1;
  std::memcpy(bad.data() + 16, &rel, 2);  // e_type
  EXPECT_EQ(probe_bytes(bad).state, SectionProbe::kUnknown);
}

// Every truncation and a sweep of single-byte corruptions: where the probe
// answers, the full parser (when it accepts the file) says the same.
TEST(ElfSectionProbe, AgreesWithTheParserOnDamagedFiles) {
  for (const char* name : {"libfx_gcc_p5.so", "libfx_noflag.so"}) {
    const auto bytes = fixture_bytes(name);
    ASSERT_FALSE(bytes.empty()) << name;
    auto check = [&](const std::vector<uint8_t>& b, const std::string& what) {
      const SectionProbe p = probe_bytes(b);
      if (p.state == SectionProbe::kUnknown) return;
      auto img = ElfImage::parse_for_sites({b.data(), b.size()});
      if (!img) return;  // the scan parses it whole when the probe says present; absent skips it
      const bool present = p.state == SectionProbe::kPresent;
      // The parser's has_patchable_section needs records too; the section's name is what both see.
      if (!present) EXPECT_FALSE(img->has_patchable_section()) << name << ": " << what;
    };
    for (size_t len = 0; len < bytes.size(); len += 211) {
      check(std::vector<uint8_t>(bytes.begin(), bytes.begin() + static_cast<long>(len)),
            "truncated to " + std::to_string(len));
    }
    for (size_t at = 0; at < bytes.size(); at += 37) {
      auto b = bytes;
      b[at] ^= 0xff;
      check(b, "byte " + std::to_string(at) + " flipped");
    }
  }
}

}  // namespace
}  // namespace ftjit
