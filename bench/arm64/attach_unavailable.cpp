// SPDX-License-Identifier: MIT
// "attach" section on arm64: not available. It times attach/detach over
// the generated site libraries (20k..1M functions), and gen_sites.cpp
// writes those as x86-64 assembly (x86-64 sleds, x86-64 bodies), so an
// arm64 build has none to load. The section says so, in its table and on
// stderr, and is not a failure: `--section all` runs everything else.
#include <cstdio>

#include "bench/bench.h"

namespace ftjit_bench {

void run_attach_section(const BenchOptions &, Report &report) {
  Table &table =
      report.table("attach", "attach: one ops over every site of a generated library (ms)");
  table.notes.push_back(
      "not available on arm64: the generated site libraries (bench/gen_sites.cpp) are x86-64 "
      "assembly and are built for x86-64 only");
  std::fputs("ftjit-bench: attach section skipped: not available on arm64 (its generated site "
             "libraries are x86-64 only)\n",
             stderr);
}

}  // namespace ftjit_bench
