#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# Triggers on a real program: the bundled demo service (demo/), four
# threads processing batches, traced by `ftjit run` with recording started
# at the 50th call of demo_sort_batch and stopped at its 60th (counted
# over the process). The trace must hold the calls of that window only:
# between 1 and 10 sort calls (the threads race the triggers: a call that
# counted 59 may check the recording word after the 60th stopped it), the
# calls they made, and none of the thousands before and after; each
# recorded demo_sort_batch with its nested demo_compare calls and exits.
#
#   demo_triggers_test.py CLI DEMO_SERVICE
import json
import os
import subprocess
import sys
import tempfile

CLI, DEMO = sys.argv[1:3]
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL: " + what)


with tempfile.TemporaryDirectory(prefix="ftjit-demo-triggers-") as tmp:
    path = os.path.join(tmp, "trace.json")
    r = subprocess.run([CLI, "run", "--plugin", "trace", "--format", "chrome", "-o", path, "--filter", "demo_*",
                        "--start-at", "demo_sort_batch#50", "--stop-at", "demo_sort_batch#60", "--",
                        DEMO, "0.05"], capture_output=True, text=True, timeout=240)
    check(r.returncode == 0, "ftjit run: %s" % r.stderr.strip())
    check("checksum" in r.stdout, "the demo service did not finish: %r" % r.stdout)
    events = [e for e in json.load(open(path))["traceEvents"] if e["ph"] in ("B", "E")]
    sorts = [e for e in events if e["ph"] == "B" and e["name"] == "demo_sort_batch"]
    batches = [e for e in events if e["ph"] == "B" and e["name"] == "demo_process_batch"]
    check(1 <= len(sorts) <= 10, "%d demo_sort_batch calls recorded, want 1 to 10" % len(sorts))
    # Batches are recorded from their start only when begun inside the
    # window. A thread's batches begun there follow one another, and each
    # but its last sorts before the next begins, so inside the window: those
    # sorts are among the 11 counted 50 to 60 (the 60th stops recording),
    # and each of the 4 threads adds at most its last batch, whose sort may
    # come after the stop. At most 15, of 3000.
    threads = 4
    check(len(batches) <= 11 + threads,
          "%d demo_process_batch calls recorded, want at most %d" % (len(batches), 11 + threads))
    compares = [e for e in events if e["ph"] == "B" and e["name"] == "demo_compare"]
    check(len(compares) > 0, "no demo_compare inside the recorded sorts")
    # Every recorded entry has its exit, per thread, in order.
    stacks = {}
    for e in events:
        s = stacks.setdefault(e["tid"], [])
        if e["ph"] == "B":
            s.append(e["name"])
        else:
            check(s and s[-1] == e["name"], "thread %s: exit of %s unmatched" % (e["tid"], e["name"]))
            if s:
                s.pop()
    check(all(not s for s in stacks.values()), "frames never exited: %s" % stacks)
    print("ok: %d sorts, %d batches, %d compares recorded of 3000 batches" % (len(sorts), len(batches), len(compares)))

sys.exit(1 if failures else 0)
