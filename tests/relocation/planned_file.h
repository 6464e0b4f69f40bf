// SPDX-License-Identifier: MIT
// A fixture (or system) file planned whole: its image, the sweep's
// references, each function's relocation plan by name. Shared by the
// relocation tests of every ISA.
#pragma once

#include <gtest/gtest.h>

#include <fstream>
#include <initializer_list>
#include <iterator>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "core/eh_frame_index.h"
#include "core/elf_image.h"
#include "core/relocation_plan.h"

namespace ftjit {

inline std::vector<uint8_t> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// One file planned: its image, its references, each function's plan by name.
struct Planned {
  std::vector<uint8_t> bytes;
  std::optional<ElfImage> image;
  std::map<std::string, RelocationPlan> plans;
  size_t references = 0;
};

inline Planned plan_file(const std::string& path) {
  Planned p;
  p.bytes = read_file(path);
  auto image = ElfImage::parse(p.bytes);
  EXPECT_TRUE(image.ok()) << path << ": " << (image.ok() ? "" : image.error().message);
  if (!image) return p;
  p.image = std::move(image.value());
  const InstructionDecoder* decoder = decoder_for(p.image->isa());
  EXPECT_NE(decoder, nullptr);
  if (decoder == nullptr) return p;
  auto starts = eh_frame_function_starts(p.bytes, *p.image);
  EXPECT_TRUE(starts.ok()) << (starts.ok() ? "" : starts.error().message);
  const CodeReferences refs = CodeReferences::sweep(p.bytes, *p.image, *decoder);
  p.references = refs.size();
  const std::vector<uint64_t> none;
  const std::vector<uint64_t>& known = starts.ok() ? starts.value() : none;
  for (const ElfSymbol& fn : p.image->functions())
    if (fn.in_code_section) p.plans.emplace(fn.name, plan_relocation(fn, p.bytes, *p.image, *decoder, refs, known));
  return p;
}

// How many plans of `p` have each verdict, and the same as one line
// ("relocatable 2092; ifunc 47; ...") for messages.
struct RefusalCounts {
  std::map<RelocationRefusal, int> of;
  std::string table;
};
inline RefusalCounts count_refusals(const Planned& p) {
  RefusalCounts c;
  for (const auto& [name, plan] : p.plans) ++c.of[plan.refusal];
  for (const auto& [r, n] : c.of) c.table += std::string(relocation_refusal_name(r)) + " " + std::to_string(n) + "; ";
  return c;
}

// A test suite over one fixture file's plans, made once for the suite:
// plan(name) is the plan of the function `name`.
template <const char* kPath>
class PlannedShapes : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { shapes_ = new Planned(plan_file(kPath)); }
  static void TearDownTestSuite() { delete shapes_; }
  const RelocationPlan& plan(const std::string& name) {
    auto it = shapes_->plans.find(name);
    EXPECT_NE(it, shapes_->plans.end()) << name;
    static const RelocationPlan none{0, 0, 0, {}, RelocationRefusal::kUndecodable, "not in the fixture"};
    return it == shapes_->plans.end() ? none : it->second;
  }
  // Each case refused for its reason, its detail a part of the message,
  // nothing moved.
  struct Refusal {
    const char* function;
    RelocationRefusal reason;
    const char* detail;
  };
  void expect_refusals(std::initializer_list<Refusal> cases) {
    for (const Refusal& c : cases) {
      const RelocationPlan& p = plan(c.function);
      EXPECT_EQ(p.refusal, c.reason) << c.function << ": " << relocation_refusal_name(p.refusal) << ", " << p.why;
      EXPECT_NE(p.why.find(c.detail), std::string::npos) << c.function << ": " << p.why;
      EXPECT_TRUE(p.moved.empty()) << c.function;
    }
  }
  static inline Planned* shapes_ = nullptr;
};

}  // namespace ftjit
