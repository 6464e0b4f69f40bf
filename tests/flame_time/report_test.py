#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""`ftjit report` on a trace of flame_time_fixture.cpp, against count and latency reports.

usage: report_test.py FTJIT FIXTURE

The fixture is run once under three plugins, each with its report format and file
(`--plugin trace:format=chrome,output=T --plugin count:format=json,output=C --plugin
latency:format=json,output=L`): the report of that trace must give every function count's
calls of the same run exactly, latency's total time to within SLACK_MS (latency leaves
unwound calls untimed; the report ends them at the unwind: deep_throw's 15 ms), and each
function's own time its sleeps (within SLACK_MS above). --graph work must be the tree of the calls under work, with their
calls; --sort and --filter must order and select; a function that never ran, a file that is
not a trace, and a missing file are refused with one line.
"""
import json
import os
import re
import subprocess
import sys
import tempfile

SLACK_MS = 40
FUNCS = ["leaf_a", "leaf_b", "mid", "deep_throw", "thrower", "work", "main"]
OWN_MS = {"main": 0, "work": 5, "leaf_a": 60, "mid": 10, "leaf_b": 40, "thrower": 0, "deep_throw": 15}
GRAPH = [("1", "work"), ("2", "├─ leaf_a"), ("1", "├─ mid"), ("2", "│  └─ leaf_b"), ("1", "└─ thrower"),
         ("1", "└─ deep_throw")]
failures = []


def check(ok, what):
    if not ok:
        failures.append(what)


def ftjit(*args):
    return subprocess.run([FTJIT, *args], capture_output=True, text=True, timeout=100)


def spec_value(text):
    """A value as a plugin spec takes it: its commas and backslashes escaped."""
    return text.replace("\\", "\\\\").replace(",", "\\,")


def record(outputs):
    """One run of the fixture; outputs: [(plugin, format, file)], each plugin's report in its file."""
    args = ["run"]
    for plugin, fmt, out in outputs:
        args += ["--plugin", "%s:format=%s,output=%s" % (plugin, fmt, spec_value(out))]
    for f in FUNCS:
        args += ["--filter", f]
    r = ftjit(*args, "--", FIXTURE)
    check(r.returncode == 0 and r.stdout == "", "run: %d %r %s" % (r.returncode, r.stdout[-200:], r.stderr[-500:]))


UNITS = {"ns": 1, "us": 1e3, "ms": 1e6, "s": 1e9}


def ns(value, unit):
    return float(value) * UNITS[unit]


def table(text):
    """function -> (calls, total, self, avg, max) in ns, from the report's rows."""
    rows = {}
    for line in text.splitlines()[2:]:
        m = re.match(r"\s*(\d+)\s+([\d.]+) (\w+)\s+([\d.]+) (\w+)\s+([\d.]+) (\w+)\s+([\d.]+) (\w+)\s+(\S+)$", line)
        check(m is not None, "a row of the report: %r" % line)
        if m:
            g = m.groups()
            rows[g[9]] = (int(g[0]), ns(g[1], g[2]), ns(g[3], g[4]), ns(g[5], g[6]), ns(g[7], g[8]))
    return rows


def main():
    with tempfile.TemporaryDirectory(prefix="ftjit-report-") as work:
        p = lambda name: os.path.join(work, name)
        record([("trace", "chrome", p("trace.json")), ("count", "json", p("count.json")),
                ("latency", "json", p("latency.json"))])
        count = {f["name"]: f["calls"] for f in json.load(open(p("count.json")))["functions"]}
        # latency does not time unwound calls (thrower's and deep_throw's, left by the
        # exception): the report does, ending them at the unwind, as flame does.
        latency = {f["name"]: f["total_ns"] for f in json.load(open(p("latency.json")))["functions"]
                   if f["count"] == count.get(f["name"])}

        r = ftjit("report", p("trace.json"))
        check(r.returncode == 0, "report: " + r.stderr)
        rows = table(r.stdout)
        check(sorted(rows) == sorted(FUNCS), "functions: %s" % sorted(rows))
        check(list(rows)[:2] == ["main", "work"], "sorted by total: %s" % list(rows))
        for name, (calls, total, own, avg, longest) in rows.items():
            check(calls == count.get(name), "%s: %d calls, count says %s" % (name, calls, count.get(name)))
            if name in ("thrower", "deep_throw"):
                check(name not in latency, "%s: latency timed an unwound call" % name)
                check(15e6 <= total <= (15 + SLACK_MS) * 1e6, "%s: total %.3f ms, wanted 15" % (name, total / 1e6))
            else:
                check(abs(total - latency.get(name, -1e12)) <= SLACK_MS * 1e6,
                      "%s: total %.3f ms, latency says %.3f" % (name, total / 1e6, latency.get(name, 0) / 1e6))
            want = OWN_MS[name]
            check(want * 1e6 <= own + 1e3 <= (want + SLACK_MS) * 1e6,  # the report rounds to 1 us
                  "%s: own %.3f ms, wanted %d ms" % (name, own / 1e6, want))
            check(own <= total + 1e3 and longest <= total + 1e3, "%s: own or max above total" % name)

        r = ftjit("report", p("trace.json"), "--sort", "calls", "--filter", "leaf_*", "--filter", "mid")
        picked = table(r.stdout)
        check(list(picked)[:2] in (["leaf_a", "leaf_b"], ["leaf_b", "leaf_a"]) and list(picked)[2:] == ["mid"],
              "--sort calls --filter: %s" % list(picked))

        r = ftjit("report", p("trace.json"), "--graph", "work")
        check(r.returncode == 0, "--graph: " + r.stderr)
        tree = []
        for line in r.stdout.splitlines()[2:]:
            m = re.match(r"\s*(\d+)\s+[\d.]+ \w+\s+[\d.]+ \w+  (.*)$", line)
            check(m is not None, "a row of the graph: %r" % line)
            if m:
                tree.append((m.group(1), m.group(2).strip()))
        check(tree == GRAPH, "--graph work:\n%s" % r.stdout)

        with open(p("not_a_trace.json"), "w") as f:
            f.write("[1, 2")
        for args in (["report", p("trace.json"), "--graph", "nothing"], ["report", p("not_a_trace.json")],
                     ["report", p("missing.json")], ["report", p("trace.json"), "--filter", "nothing*"]):
            r = ftjit(*args)
            check(r.returncode != 0 and r.stdout == "" and r.stderr.count("\n") == 1,
                  "refusal of %s: %d %r %r" % (args[1:], r.returncode, r.stdout, r.stderr))
    if failures:
        print("FAIL:\n  " + "\n  ".join(failures))
        return 1
    print("ok")
    return 0


if __name__ == "__main__":
    FTJIT, FIXTURE = sys.argv[1], sys.argv[2]
    sys.exit(main())
