#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""ftjit attach, detach and unload, cycle after cycle, around the hazard
target (every hazard at once: exceptions through traced frames, dlopen and
dlclose of a patchable library, a 2 kHz SIGPROF handler running traced code,
forked children running traced code, longjmp out of traced frames):

  hazard_cli.py --ftjit FTJIT --target TARGET [--strategy S] [--unload-every N]
                [--pace US] CYCLES_PER_PLUGIN

Each cycle is one `ftjit attach --duration` with one of the four built-in
plugins (count: entry only; latency, flame, trace: exit hooks too; latency
twice, every call and --sample 3, whose sites skip between turns), the
agent injected, attached, detached and unloaded; with --unload-every N,
only every Nth cycle (and the last) unloads it, the others keep it
(--keep-agent) and the next attach reuses it: injections and unloads are
most of a cycle's time under TCG (the arm64 kernel leg). --pace US is the
target's (each hazard thread rests that long after each round). Every cycle must exit 0;
the target must survive them all, end with "hazard ok" (every child
exited 0, caught == thrown, every longjmp landed), its code bytes as before
the first cycle, and no mapping of ftjit left after an unload. The agent
may stay loaded (inert) only where the CLI says which thread kept it.
Exits 0 (pass) or 1 (fail).
"""
import argparse
import os
import subprocess
import sys
import time

PLUGINS = (("count",), ("latency",), ("latency", "--sample", "3"), ("flame",), ("trace",))


def executable_ranges(pid, path):
    real = os.path.realpath(path)
    out = []
    with open("/proc/%d/maps" % pid) as f:
        for line in f:
            fields = line.split(None, 5)
            if len(fields) == 6 and "x" in fields[1] and os.path.realpath(fields[5].strip()) == real:
                lo, hi = (int(x, 16) for x in fields[0].split("-"))
                out.append((lo, hi))
    return out


def code_bytes(pid, ranges):
    with open("/proc/%d/mem" % pid, "rb") as mem:
        out = []
        for lo, hi in ranges:
            mem.seek(lo)
            out.append(mem.read(hi - lo))
        return out


def ftjit_mappings(pid):
    with open("/proc/%d/maps" % pid) as f:
        return [l.strip() for l in f if "ftjit" in l.split(None, 5)[-1] and "hazard" not in l]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ftjit", required=True)
    ap.add_argument("--target", required=True)
    ap.add_argument("--strategy", default="auto")
    ap.add_argument("--unload-every", type=int, default=1)
    ap.add_argument("--pace", type=int, default=0)
    ap.add_argument("cycles", type=int)
    args = ap.parse_args()
    cycles = int(os.environ.get("FTJIT_HAZARD_CYCLES", args.cycles))
    failures = []

    def fail(msg):
        failures.append(msg)
        print("FAIL: " + msg, flush=True)

    pace = ["--pace", str(args.pace)] if args.pace else []
    target = subprocess.Popen([args.target] + pace, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE)
    line = target.stdout.readline().decode()
    if not line.startswith("pid "):
        print("FAIL: the target printed %r" % line)
        return 1
    pid = int(line.split()[1])
    ranges = executable_ranges(pid, args.target)
    before = code_bytes(pid, ranges)
    stayed = 0
    ran = 0  # cycles begun: a failure stops the loop
    started = time.monotonic()
    try:
        for i in range(cycles * len(PLUGINS)):
            ran = i + 1
            plugin = " ".join(PLUGINS[i % len(PLUGINS)])
            argv = [args.ftjit, "attach", "-p", str(pid), "--plugin", *PLUGINS[i % len(PLUGINS)], "--filter",
                    "hazard_*", "--strategy", args.strategy, "--duration", "0.05", "-o", os.devnull]
            unloads = (i + 1) % args.unload_every == 0 or i + 1 == cycles * len(PLUGINS)
            if not unloads:
                argv.append("--keep-agent")
            try:
                r = subprocess.run(argv, capture_output=True, text=True, timeout=60)
            except subprocess.TimeoutExpired:
                fail("cycle %d (%s): ftjit attach did not end within 60 s" % (i, plugin))
                break
            if target.poll() is not None:
                fail("cycle %d (%s): the target died (status %s); ftjit said %r" %
                     (i, plugin, target.returncode, r.stderr))
                break
            if r.returncode != 0:
                if "stays loaded (inert)" in r.stderr:
                    stayed += 1  # said which thread kept it; the next attach reuses it
                    if stayed <= 3:
                        print("cycle %d (%s): %s" % (i, plugin, r.stderr.strip()), flush=True)
                else:
                    fail("cycle %d (%s): exit %d: %r" % (i, plugin, r.returncode, r.stderr))
                    break
            elif unloads and ftjit_mappings(pid):
                fail("cycle %d (%s): unloaded, yet mapped: %r" % (i, plugin, ftjit_mappings(pid)))
                break
        print("%d of %d cycles in %.1f s, the agent stayed loaded after %d" %
              (ran, cycles * len(PLUGINS), time.monotonic() - started, stayed), flush=True)
        if not failures:
            if stayed:
                r = subprocess.run([args.ftjit, "detach", "-p", str(pid)], capture_output=True,
                                   text=True, timeout=60)
                if r.returncode != 0 and "no ftjit agent" not in r.stderr:
                    fail("final detach: %r" % r.stderr)
            now = code_bytes(pid, ranges)
            if now != before:
                fail("the target's code differs from before the first attach")
    finally:
        # End of its stdin ends the target.
        target.stdin.close()
        target.stdin = None
        try:
            out, err = target.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            target.kill()
            out, err = target.communicate()
            fail("the target did not end")
    out, err = out.decode(), err.decode()
    if target.returncode != 0 or out.strip() != "hazard ok":
        fail("the target ended with status %s: %r %r" % (target.returncode, out, err[-500:]))
    else:
        print(err.strip())
    if failures:
        print("%d failure(s)" % len(failures))
        return 1
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
