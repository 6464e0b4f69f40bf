#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""`ftjit diff` on two runs of flame_time_fixture.cpp, the second with `slower`.

usage: diff_test.py FTJIT FIXTURE

The second run makes leaf_b twice as slow and calls leaf_a once more. Compared by flame's
JSON (own time, with --threshold 40 --min-ms 10), the diff must list exactly those two: leaf_b at about 2x its own time with the
same calls, leaf_a with 2 -> 3 calls; the five others unchanged, nothing only in one run.
Compared by count's JSON (calls only), only leaf_a. A file that is not a report, or is missing,
is refused with one line naming it.
"""
import os
import re
import subprocess
import sys
import tempfile

FUNCS = ["leaf_a", "leaf_b", "mid", "deep_throw", "thrower", "work", "main"]
failures = []


def check(ok, what):
    if not ok:
        failures.append(what)


def record(ftjit, fixture, plugin, out, *prog_args):
    args = [ftjit, "run", "--plugin", plugin, "--format", "json", "-o", out]
    for f in FUNCS:
        args += ["--filter", f]
    r = subprocess.run(args + ["--", fixture, *prog_args], capture_output=True, timeout=100)
    check(r.returncode == 0, "%s run %s: %s" % (plugin, prog_args, r.stderr.decode()[-500:]))


def listed(text):
    """function -> its row's columns, for the rows between the header and the tail lines."""
    rows = {}
    for line in text.splitlines()[2:]:
        if line.startswith(("only in", "unchanged:")):
            continue
        cols = line.split()
        rows[cols[0]] = cols
    return rows


def main():
    ftjit, fixture = sys.argv[1], sys.argv[2]
    with tempfile.TemporaryDirectory(prefix="ftjit-diff-") as work:
        p = lambda name: os.path.join(work, name)
        for plugin in ("flame", "count"):
            record(ftjit, fixture, plugin, p(plugin + "_a.json"))
            record(ftjit, fixture, plugin, p(plugin + "_b.json"), "slower")
        # Thresholds that a loaded machine's sleep overshoots (a few ms on a 10 ms sleep, seen
        # on 2 busy cores) stay under: leaf_b's +40 ms (+100%) and leaf_a's call are far above.
        r = subprocess.run([ftjit, "diff", "--threshold", "40", "--min-ms", "10", p("flame_a.json"),
                            p("flame_b.json")], capture_output=True, text=True, timeout=30)
        check(r.returncode == 0, "diff (flame): " + r.stderr)
        flame_text = r.stdout
        rows = listed(flame_text)
        check(sorted(rows) == ["leaf_a", "leaf_b"], "flame diff lists %s, wanted leaf_a and leaf_b" % sorted(rows))
        check(list(rows)[:1] == ["leaf_b"], "the largest change first: %s" % list(rows))
        if "leaf_b" in rows:
            cols = rows["leaf_b"]
            check(cols[1:3] == ["2", "2"], "leaf_b's calls: %s" % cols)
            ratio = float(cols[-1].rstrip("x"))
            check(1.8 <= ratio <= 2.2, "leaf_b's ratio %s" % cols[-1])
        if "leaf_a" in rows:
            check(rows["leaf_a"][1:3] == ["2", "3"], "leaf_a's calls: %s" % rows["leaf_a"])
        check("unchanged: 5 functions" in flame_text, "the unchanged count:\n" + flame_text)
        check("only in" not in flame_text, "nothing only in one run:\n" + flame_text)

        r = subprocess.run([ftjit, "diff", p("count_a.json"), p("count_b.json")], capture_output=True, text=True,
                           timeout=30)
        check(r.returncode == 0, "diff (count): " + r.stderr)
        count_rows = listed(r.stdout)
        check(sorted(count_rows) == ["leaf_a"], "count diff lists %s:\n%s" % (sorted(count_rows), r.stdout))

        with open(p("not_a_report.json"), "w") as f:
            f.write('{"hello": 1}')
        for bad in (p("not_a_report.json"), p("missing.json")):
            r = subprocess.run([ftjit, "diff", bad, p("count_b.json")], capture_output=True, text=True, timeout=30)
            check(r.returncode != 0 and r.stdout == "" and r.stderr.count("\n") == 1 and bad in r.stderr,
                  "refusal of %s: %d %r %r" % (bad, r.returncode, r.stdout, r.stderr))
    if failures:
        print("FAIL:\n  " + "\n  ".join(failures))
        print(flame_text)
        return 1
    print(flame_text)
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
