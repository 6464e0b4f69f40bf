#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""`flame` by time against known times: flame_time_fixture.cpp's functions sleep known times.

usage: flame_time_test.py FTJIT FIXTURE

Runs the fixture under `ftjit run --plugin flame`, folded and JSON, and checks:
- each function's own time (the folded weight of its stack) against what it sleeps: never
  less, and not more than SLACK_MS over (the sleeps' own overshoot on a loaded machine);
- the exception thrown by deep_throw through thrower and caught in work ends both frames at
  the unwind: deep_throw keeps its 15 ms, thrower has none of its own, and the call of
  leaf_a after the catch is under work again, not under thrower;
- the folded weights of the stacks under main sum exactly to main's total in the JSON, and
  every stack's JSON self time is its folded weight.
"""
import json
import os
import subprocess
import sys
import tempfile

from fixture_oracle import FUNCS, SLACK_MS, WANT

failures = []


def check(ok, what):
    if not ok:
        failures.append(what)


def run(ftjit, fixture, out, fmt):
    args = [ftjit, "run", "--plugin", "flame", "--format", fmt, "-o", out]
    for f in FUNCS:
        args += ["--filter", f]
    r = subprocess.run(args + ["--", fixture], capture_output=True, timeout=100)
    check(r.returncode == 0, "ftjit run (%s) exited %d: %s" % (fmt, r.returncode, r.stderr.decode()[-800:]))
    with open(out) as f:
        return f.read()


def main():
    ftjit, fixture = sys.argv[1], sys.argv[2]
    with tempfile.TemporaryDirectory(prefix="ftjit-flame-time-") as work:
        folded_text = run(ftjit, fixture, os.path.join(work, "out.folded"), "folded")
        json_text = run(ftjit, fixture, os.path.join(work, "out.json"), "json")
    folded = {}
    for line in folded_text.splitlines():
        stack, _, weight = line.rpartition(" ")
        folded[stack] = int(weight)
    check(set(folded) == set(WANT), "the stacks: %s, wanted %s" % (sorted(folded), sorted(WANT)))
    for stack, (_, ms) in WANT.items():
        ns = folded.get(stack)
        if ns is None:
            continue
        check(ms * 1e6 <= ns <= (ms + SLACK_MS) * 1e6,
              "%s: its own time %.3f ms, wanted %d to %d ms" % (stack, ns / 1e6, ms, ms + SLACK_MS))

    report = json.loads(json_text)
    check(report.get("unit") == "ns", "json unit: %r" % report.get("unit"))
    stacks = {";".join(s["frames"]): s for s in report.get("stacks", [])}
    check(set(stacks) == set(WANT), "json stacks: %s" % sorted(stacks))
    for stack, (calls, ms) in WANT.items():
        s = stacks.get(stack)
        if s is None:
            continue
        check(s["calls"] == calls, "%s: %d calls, wanted %d" % (stack, s["calls"], calls))
        check(s["self_ns"] <= s["total_ns"], "%s: self above total" % stack)
        check(ms * 1e6 <= s["self_ns"] <= (ms + SLACK_MS) * 1e6,
              "%s (json): its own time %.3f ms, wanted %d to %d ms" % (stack, s["self_ns"] / 1e6, ms, ms + SLACK_MS))
    # A frame's width is its calls' whole time: main's total is what every
    # stack under it weighs, to the nanosecond.
    if "main" in stacks:
        below = sum(s["self_ns"] for name, s in stacks.items() if name == "main" or name.startswith("main;"))
        check(below == stacks["main"]["total_ns"],
              "the self times under main sum to %d ns, its total is %d" % (below, stacks["main"]["total_ns"]))
        check(stacks["main"]["total_ns"] >= 130e6, "main's total %d ns, below the 130 ms slept" % stacks["main"]["total_ns"])
    if failures:
        print("FAIL:\n  " + "\n  ".join(failures))
        print("folded:\n" + folded_text + "json:\n" + json_text)
        return 1
    print("ok: " + ", ".join("%s %.1f ms" % (k, v / 1e6) for k, v in sorted(folded.items())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
