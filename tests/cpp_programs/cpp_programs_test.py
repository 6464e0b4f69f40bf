#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Counts a real C++ program exactly, against an oracle built from the same sources.

usage: cpp_programs_test.py --ftjit FTJIT --cxx COMPILER --sources DIR --work DIR VARIANT

VARIANT names the compiler and its flags:
  gcc12                    -O2 -fno-inline (GCC has no -finstrument-functions-after-inlining:
  gcc12_function_sections  inlining off keeps both builds' functions the same), the second
                           with -ffunction-sections
  clang16                  -O2, the oracle with -finstrument-functions-after-inlining

Two builds of tests/fixtures/cpp_program: one with -fpatchable-function-entry=5, run under
`ftjit run --plugin count --format tsv`; one with instrumentation and reference_counter.cc,
which writes the same TSV from the calls of __cyg_profile_func_enter. Every function must have
the same count in both (functions of the same name, such as two destructors, are compared as
their lists of counts), and the program the same output.

The GCC builds drop the records of whole files (GCC 12 links a file's records to one COMDAT
copy the linker discards): the test checks that `ftjit list` says sites were recovered, so
that it is about recovery and fails without it. clang keeps every record: nothing may be
recovered there.
"""
import argparse
import collections
import os
import re
import subprocess
import sys

# shapes.cc first: its COMDAT copies are kept. GCC 12 fails to link a
# program when a file's records are linked to a kept section but name a
# discarded copy; in this order every later file's records are linked to a
# discarded copy and dropped with it (see the README on building for ftjit).
SOURCES = ["shapes.cc", "main.cc", "stats.cc"]
SLED = ["-fpatchable-function-entry=5", "-fcf-protection=none"]

VARIANTS = {
    "gcc12": (["-O2", "-fno-inline"], ["-finstrument-functions"], True),
    "gcc12_function_sections": (["-O2", "-fno-inline", "-ffunction-sections"],
                                ["-finstrument-functions"], True),
    "clang16": (["-O2"], ["-finstrument-functions-after-inlining"], False),
}

RECOVERED = re.compile(r"^(\d+) sites? recovered without a record", re.M)


def run(argv, env=None):
    p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                       timeout=60)
    if p.returncode != 0:
        sys.exit("FAIL: %s exited %d\n%s%s" % (" ".join(argv), p.returncode, p.stdout, p.stderr))
    return p


def counts_of(tsv_text):
    """NAME<TAB>CALLS lines -> {name: sorted list of counts}."""
    counts = collections.defaultdict(list)
    for line in tsv_text.splitlines():
        if not line:
            continue
        name, calls = line.rsplit("\t", 1)
        counts[name].append(int(calls))
    return {name: sorted(c) for name, c in counts.items()}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ftjit", required=True)
    ap.add_argument("--cxx", required=True)
    ap.add_argument("--sources", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("variant", choices=sorted(VARIANTS))
    a = ap.parse_args()
    flags, instrument, expect_recovery = VARIANTS[a.variant]
    work = os.path.join(a.work, a.variant)
    os.makedirs(work, exist_ok=True)
    sources = [os.path.join(a.sources, s) for s in SOURCES]
    prog = os.path.join(work, "prog")
    oracle = os.path.join(work, "oracle")
    counter = os.path.join(work, "reference_counter.o")

    run([a.cxx] + flags + SLED + sources + ["-o", prog])
    run([a.cxx, "-O2", "-c", os.path.join(a.sources, "reference_counter.cc"), "-o", counter])
    run([a.cxx] + flags + instrument + sources + [counter, "-o", oracle])

    listed = run([a.ftjit, "list", prog]).stderr
    m = RECOVERED.search(listed)
    recovered = int(m.group(1)) if m else 0
    if expect_recovery and recovered == 0:
        sys.exit("FAIL: %s dropped no record here, so this test checks no recovery:\n%s"
                 % (a.cxx, listed))
    if not expect_recovery and recovered != 0:
        sys.exit("FAIL: %s keeps every record, yet %d sites were recovered:\n%s"
                 % (a.cxx, recovered, listed))

    expected_tsv = os.path.join(work, "oracle.tsv")
    env = dict(os.environ, CP_REFERENCE_OUT=expected_tsv)
    oracle_out = run([oracle], env=env).stdout
    counted_tsv = os.path.join(work, "count.tsv")
    traced = run([a.ftjit, "run", "--plugin", "count", "--format", "tsv", "-o", counted_tsv,
                  "--", prog])
    if traced.stdout != oracle_out:
        sys.exit("FAIL: the program printed %r traced, %r as the oracle" % (traced.stdout, oracle_out))

    with open(expected_tsv) as f:
        expected = counts_of(f.read())
    with open(counted_tsv) as f:
        counted = counts_of(f.read())
    problems = []
    for name in sorted(set(expected) | set(counted)):
        want, got = expected.get(name, []), counted.get(name, [])
        if want != got:
            problems.append("  %-60s oracle %s, ftjit %s" % (name, want or "-", got or "-"))
    if problems:
        print("FAIL: %d of %d functions counted differently (%d sites recovered):"
              % (len(problems), len(expected), recovered))
        print("\n".join(problems))
        return 1
    calls = sum(sum(c) for c in expected.values())
    print("ok: %d functions, %d calls, counted exactly (%d sites recovered without a record)"
          % (len(expected), calls, recovered))
    return 0


if __name__ == "__main__":
    sys.exit(main())
