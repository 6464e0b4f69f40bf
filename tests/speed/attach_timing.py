#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Times `ftjit attach` and `ftjit run` on ftjit_speed_target (issue 16's
goal: attach <= 150 ms from start to sites patched; run <= 50 ms added
before main()). A measurement for people, not a test: it prints medians.

  attach_timing.py FTJIT SPEED_TARGET [RUNS]

attach: from starting `ftjit attach -p PID -v --duration 0.2` to its
"attached to N of N patchable functions" line (printed once the sites are
patched), and the -v phase lines of the median run.
run: `ftjit run -- SPEED_TARGET 0.01` start to the target's "ready" line,
minus the same for the target alone.
"""
import statistics
import subprocess
import sys
import time


def attach_once(ftjit, target):
    t = subprocess.Popen([target], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    pid = int(t.stdout.readline().split()[1])
    time.sleep(0.3)  # idle machine: let the loader's page faults settle
    start = time.monotonic()
    p = subprocess.Popen([ftjit, "attach", "-p", str(pid), "-v", "--duration", "0.2"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    attached = None
    lines = []
    for line in p.stderr:
        lines.append(line.rstrip("\n"))
        if attached is None and "attached to" in line:
            attached = (time.monotonic() - start) * 1000
    rc = p.wait()
    t.stdin.close()
    t.wait()
    if rc != 0 or attached is None:
        sys.exit("attach failed (%s): %s" % (rc, "\n".join(lines)))
    return attached, lines


def ready_ms(argv):
    start = time.monotonic()
    p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, text=True)
    line = p.stdout.readline()
    took = (time.monotonic() - start) * 1000
    p.stdout.read()
    p.wait()
    if not line.startswith("ready"):
        sys.exit("no ready line from %s" % argv)
    return took


def main():
    ftjit, target = sys.argv[1], sys.argv[2]
    runs = int(sys.argv[3]) if len(sys.argv) > 3 else 7
    results = [attach_once(ftjit, target) for _ in range(runs)]
    results.sort(key=lambda r: r[0])
    times = [r[0] for r in results]
    print("attach, start to sites patched: median %.1f ms (min %.1f, max %.1f, %d runs)" %
          (statistics.median(times), times[0], times[-1], runs))
    print("  phases of the median run:")
    for line in results[len(results) // 2][1]:
        print("    " + line)
    alone = sorted(ready_ms([target, "0.01"]) for _ in range(runs))
    traced = sorted(ready_ms([ftjit, "run", "--", target, "0.01"]) for _ in range(runs))
    print("run, start to main()'s ready line: median %.1f ms under ftjit run, %.1f ms alone: "
          "+%.1f ms" % (statistics.median(traced), statistics.median(alone),
                        statistics.median(traced) - statistics.median(alone)))


if __name__ == "__main__":
    main()
