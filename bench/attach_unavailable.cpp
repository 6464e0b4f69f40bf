// SPDX-License-Identifier: MIT
// "attach" section on arm64 and riscv64: not available. It times
// attach/detach over the generated site libraries (20k..1M functions), and
// gen_sites.cpp writes those as x86-64 assembly (x86-64 sleds, x86-64
// bodies), so other ISAs' builds have none to load. The section says so,
// in its table and on stderr, and is not a failure: `--section all` runs
// everything else.
#include <cstdio>
#include <string>

#include "bench/bench.h"
#include "bench_isa.h"

namespace ftjit_bench {

void run_attach_section(const BenchOptions &, Report &report) {
  Table &table =
      report.table("attach", "attach: one ops over every site of a generated library (ms)");
  table.notes.push_back(std::string("not available on ") + isa::kIsaName +
                        ": the generated site libraries (bench/gen_sites.cpp) are x86-64 "
                        "assembly and are built for x86-64 only");
  std::fprintf(stderr,
               "ftjit-bench: attach section skipped: not available on %s (its generated site "
               "libraries are x86-64 only)\n",
               isa::kIsaName);
}

}  // namespace ftjit_bench
