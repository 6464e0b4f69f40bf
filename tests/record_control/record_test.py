#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# What `ftjit run --depth/--sample/--min-duration/--start-at/--stop-at/
# --start-after/--stop-after` record, on the record-control fixture
# (record_fixture.c: a known call tree on the main thread and four named
# threads, in phases; it prints every call it made, with its depth and its
# duration). For each option alone and combined, the calls the trace plugin
# recorded, per thread and in order, with their depths among recorded
# calls, must be exactly the ones an oracle keeps from the fixture's own
# log; count, flame and latency are checked against the same oracle.
#
#   record_test.py CLI FIXTURE [ENV=VALUE...]
#
# ENV=VALUE pairs go to `ftjit run`'s environment (a cross leg's agent).
import json
import os
import re
import subprocess
import sys
import tempfile

CLI, FIXTURE = sys.argv[1:3]
EXTRA_ENV = dict(a.split("=", 1) for a in sys.argv[3:])
MIN_MS = 10  # --min-duration of the cases: calls take µs or over 30 ms
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL: " + what)
    return cond


def ftjit(*args, env_extra=None):
    env = dict(os.environ)
    env.update(EXTRA_ENV)
    env.update(env_extra or {})
    return subprocess.run([CLI, *args], capture_output=True, text=True, timeout=240, env=env)


def fixture_log(stdout):
    """thread name -> tid; thread name -> [(fn, depth, phase, duration_ns)]."""
    tids, calls = {}, {}
    for line in stdout.splitlines():
        w = line.split()
        if w and w[0] == "thread":
            tids[w[1]] = int(w[2])
            calls[w[1]] = []
        elif w and w[0] == "call":
            calls[w[1]].append((w[3], int(w[4]), int(w[5]), int(w[6])))
    return tids, calls


class Opts:
    def __init__(self, depth=0, sample=0, min_ms=0, start=(), stop=()):
        # start/stop: (function, at_return, from_call)
        self.depth, self.sample, self.min_ms = depth, sample, min_ms
        self.start, self.stop = list(start), list(stop)

    def args(self):
        a = []
        if self.depth:
            a += ["--depth", str(self.depth)]
        if self.sample:
            a += ["--sample", str(self.sample)]
        if self.min_ms:
            a += ["--min-duration", "%dms" % self.min_ms]
        for option, triggers in (("--start-at", self.start), ("--stop-at", self.stop)):
            for fn, at_return, k in triggers:
                a += [option, fn + ("@return" if at_return else "") + ("#%d" % k if k > 1 else "")]
        return a


def oracle(calls, o, every_call=False):
    """thread -> [(fn, depth among recorded calls)] that must be recorded.

    The gate's order: recording on (triggers), depth, the function's turn
    (a per-thread count of the calls that passed so far), duration. The
    triggers are the main thread's markers, alone in their phases, and
    leaves: a return trigger fires right after the marker's own turn."""
    recording = 0 if o.start else 1
    fired = {}
    turns = {}
    out = {name: [] for name in calls}
    stacks = {name: [] for name in calls}
    for phase in range(10):
        for name, log in calls.items():
            for fn, depth, ph, dur in log:
                if ph != phase:
                    continue
                fired[fn] = fired.get(fn, 0) + 1
                for action, triggers in ((1, o.start), (0, o.stop)):
                    for tfn, at_return, k in triggers:
                        if tfn == fn and not at_return and fired[fn] >= k:
                            recording = action
                keep = recording == 1 and (o.depth == 0 or depth <= o.depth)
                if keep and o.sample > 1 and not every_call:
                    n = turns.get((name, fn), 0)
                    turns[(name, fn)] = n + 1
                    keep = n % o.sample == 0
                if keep and o.min_ms and not every_call:
                    check(abs(dur - o.min_ms * 1e6) > o.min_ms * 1e6 / 4,
                          "%s's %s took %.1f ms, too near --min-duration %d ms to tell" %
                          (name, fn, dur / 1e6, o.min_ms))
                    keep = dur >= o.min_ms * 1e6
                stack = stacks[name]
                del stack[depth - 1:]
                if keep:
                    out[name].append((fn, 1 + sum(stack)))
                stack.append(1 if keep else 0)
                for action, triggers in ((1, o.start), (0, o.stop)):
                    for tfn, at_return, k in triggers:
                        if tfn == fn and at_return and fired[fn] >= k:
                            recording = action
    return out


def latency_run(tmp, file_name, o):
    """`ftjit run --plugin latency` of the fixture with o's options, JSON
    into tmp/file_name: (report, function -> calls timed, the oracle's
    calls), or None if it failed (said)."""
    path = os.path.join(tmp, file_name)
    r = ftjit("run", "--plugin", "latency", "--format", "json", "-o", path, *o.args(), "--", FIXTURE)
    if not check(r.returncode == 0, "latency %s: %s" % (" ".join(o.args()), r.stderr.strip())):
        return None
    _, calls = fixture_log(r.stdout)
    want = {}
    for recorded in oracle(calls, o).values():
        for fn, _ in recorded:
            want[fn] = want.get(fn, 0) + 1
    report = json.load(open(path))
    return report, {f["name"]: f["count"] for f in report["functions"]}, want


def traced(tids, chrome, durations=None):
    """thread name -> [(fn, depth)] of the trace's entries, per thread;
    `durations`, if given, gets thread name -> each entry's duration (µs)."""
    names = {tid: name for name, tid in tids.items()}
    out = {name: [] for name in tids}
    if durations is not None:
        durations.update({name: [] for name in tids})
    open_frames = {}
    for e in chrome["traceEvents"]:
        if e["ph"] not in ("B", "E"):
            continue
        name = names.get(e["tid"])
        if not check(name is not None, "an event of unknown thread %s" % e["tid"]):
            continue
        frames = open_frames.setdefault(name, [])
        if e["ph"] == "B":
            frames.append((e["name"], len(out[name]), float(e["ts"])))
            out[name].append((e["name"], len(frames)))
            if durations is not None:
                durations[name].append(0.0)
        elif check(frames and frames[-1][0] == e["name"], "%s: exit of %s unmatched" % (name, e["name"])):
            _, index, begun = frames.pop()
            if durations is not None:
                durations[name][index] = float(e["ts"]) - begun
    for name, frames in open_frames.items():
        check(not frames, "%s: frames never exited: %s" % (name, frames))
    return out


def run_trace(tmp, label, o, extra=(), env_extra=None):
    path = os.path.join(tmp, "trace.json")
    r = ftjit("run", "--plugin", "trace", "--format", "chrome", "-o", path, *o.args(), *extra,
              "--", FIXTURE, env_extra=env_extra)
    if not check(r.returncode == 0, "%s: ftjit run failed: %s" % (label, r.stderr.strip())):
        return None, None, None, None
    tids, calls = fixture_log(r.stdout)
    durations = {}
    with open(path) as f:
        return tids, calls, traced(tids, json.load(f), durations), durations


def timed_longer(got, want, durations, floor_ms):
    """Under --min-duration, the calls recorded beyond the oracle's: each
    must be one the gate timed at least the floor, though the call's own
    clock (inside its body) said shorter: its thread was preempted in the
    trampoline, outside the body (seen under qemu-user on a loaded
    machine). None when `got` is not the oracle's calls plus such ones."""
    extra, j = [], 0
    for i, entry in enumerate(got):
        if j < len(want) and entry[0] == want[j][0]:
            j += 1
        elif durations[i] >= floor_ms * 1000:
            extra.append((entry[0], round(durations[i] / 1000, 1)))
        else:
            return None
    return extra if j == len(want) else None


def trace_case(tmp, label, o, extra=(), env_extra=None, like=None):
    """`like`: the options whose oracle this run must match (a signal
    trigger fires where a function trigger would)."""
    tids, calls, got, durations = run_trace(tmp, label, o, extra, env_extra)
    if got is None:
        return
    want = oracle(calls, like or o)
    min_ms = (like or o).min_ms
    for name in calls:
        if got[name] != want[name] and min_ms:
            longer = timed_longer(got[name], want[name], durations[name], min_ms)
            if longer is not None:
                print("  %s: %s also recorded, timed at least %d ms with the trampoline (ms)" % (
                    name, longer, min_ms))
                got[name] = want[name]
        if got[name] != want[name]:
            check(False, "%s: thread %s recorded %d calls, the oracle %d; first difference at %s" % (
                label, name, len(got[name]), len(want[name]),
                next((i for i, (a, b) in enumerate(zip(got[name], want[name])) if a != b),
                     min(len(got[name]), len(want[name])))))
            print("  got:  %s\n  want: %s" % (got[name][:30], want[name][:30]))
    total = sum(len(v) for v in want.values())
    print("ok %s: %d calls recorded, exactly the oracle's" % (label, total) if
          all(got[n] == want[n] for n in calls) else "FAIL %s" % label)
    return want


def stacks_of(calls, o):
    """'a;b;c' -> recorded calls of that recorded stack (flame weight=calls)."""
    out = {}
    for name, recorded in oracle(calls, o).items():
        path = []
        for fn, depth in recorded:
            del path[depth - 1:]
            path.append(fn)
            key = ";".join(path)
            out[key] = out.get(key, 0) + 1
    return out


def main():
    with tempfile.TemporaryDirectory(prefix="ftjit-record-") as tmp:
        everything = trace_case(tmp, "no option", Opts())
        if everything is not None:
            check(sum(len(v) for v in everything.values()) > 300, "the fixture made too few calls")
        trace_case(tmp, "--depth 2", Opts(depth=2))
        trace_case(tmp, "--sample 3", Opts(sample=3))
        trace_case(tmp, "--min-duration %dms" % MIN_MS, Opts(min_ms=MIN_MS))
        trace_case(tmp, "--start-at rc_start_marker --stop-at rc_stop_marker",
                   Opts(start=[("rc_start_marker", False, 1)], stop=[("rc_stop_marker", False, 1)]))
        trace_case(tmp, "--start-at rc_start_marker@return#2 --stop-at rc_stop_marker@return",
                   Opts(start=[("rc_start_marker", True, 2)], stop=[("rc_stop_marker", True, 1)]))
        trace_case(tmp, "--depth 3 --sample 2", Opts(depth=3, sample=2))
        trace_case(tmp, "--start-at rc_start_marker --stop-at rc_stop_marker#2 --depth 2 --sample 3",
                   Opts(depth=2, sample=3, start=[("rc_start_marker", False, 1)],
                        stop=[("rc_stop_marker", False, 2)]))
        trace_case(tmp, "--start-at rc_start_marker#2 --min-duration %dms --sample 2" % MIN_MS,
                   Opts(sample=2, min_ms=MIN_MS, start=[("rc_start_marker", False, 2)]))

        # A signal: the fixture raises SIGUSR2 just before phase 6's marker,
        # where --start-at rc_start_marker#2 starts.
        trace_case(tmp, "--on-signal USR2:start", Opts(), ["--on-signal", "USR2:start"], {"RC_RAISE": "12"},
                   like=Opts(start=[("rc_start_marker", False, 2)]))
        trace_case(tmp, "--on-signal SIGUSR2 (toggle)", Opts(), ["--on-signal", "SIGUSR2"], {"RC_RAISE": "12"},
                   like=Opts(stop=[("rc_start_marker", False, 2)]))

        # A dump: the flight recorder written at the first stop marker, then
        # at the end. Each thread's buffer holds its last 32 events: the
        # main thread's first start marker survives only in the dump. The
        # main thread runs on at once (RC_RUN_ON: 2,000 more calls, 60
        # rings' worth, before the trigger thread can have dumped): the
        # trigger itself freezes the rings, so the dump still holds what
        # came before it. It waits for that dump before phase 5
        # (RC_DUMP_WAIT): the rings drop what comes while they are copied
        # out, and the second start marker must not be among it.
        path = os.path.join(tmp, "dump.json")
        r = ftjit("run", "--plugin", "trace", "--format", "chrome", "-o", path, "--buffer-policy", "overwrite",
                  "--buffer-size", "1K", "--dump-at", "rc_stop_marker", "--", FIXTURE,
                  env_extra={"RC_RUN_ON": "200", "RC_DUMP_WAIT": path})
        if check(r.returncode == 0, "--dump-at: " + r.stderr.strip()):
            tids, calls = fixture_log(r.stdout)
            # What a ring holds starts anywhere in a call: the events are
            # counted, not nested.
            events = [e for e in json.load(open(path))["traceEvents"]
                      if e["ph"] == "B" and e["tid"] == tids["main"]]
            markers = [e for e in events if e["name"] == "rc_start_marker"]
            check(len(markers) == 2, "--dump-at rc_stop_marker: the main thread's start markers: %d, want 2 "
                  "(the first from the dump)" % len(markers))
            print("ok --dump-at rc_stop_marker: %d entries of the main thread" % len(events))

        # Time triggers: the fixture's phases take about 30 ms each (sleeps),
        # so 90 ms after the attach is past phase 0 and before phase 9.
        tids, calls, got, _ = run_trace(tmp, "--start-after 90ms", Opts(), ["--start-after", "90ms"])
        if got is not None:
            for name in calls:
                everything_here = [(fn, d) for fn, d, _, _ in calls[name]]
                kept = got[name]
                tail = [fn for fn, _ in everything_here[len(everything_here) - len(kept):]]
                check([fn for fn, _ in kept] == tail, "--start-after: %s's calls are not the last ones" % name)
            # Natively the program starts within milliseconds of the attach;
            # under qemu-user, when it will is less sure.
            if not EXTRA_ENV:
                check(len(got["main"]) < len(calls["main"]), "--start-after 90ms: phase 0 was recorded")
                check(all(len(got[n]) > 0 for n in calls if n != "main"), "--start-after 90ms: phase 9 not recorded")
            print("ok --start-after 90ms: %d calls, the last of each thread" % sum(len(v) for v in got.values()))
        tids, calls, got, _ = run_trace(tmp, "--start-after 100s", Opts(), ["--start-after", "100s"])
        if got is not None:
            check(all(not v for v in got.values()), "--start-after 100s recorded calls")

        # count: every call under --sample (it says so), but --depth
        # applies; beside trace, sampled, in the same run.
        o = Opts(depth=2, sample=3)
        r = ftjit("run", "--plugin", "count:output=" + os.path.join(tmp, "count.txt"),
                  "--plugin", "trace:format=chrome,output=" + os.path.join(tmp, "trace.json"), *o.args(),
                  "--", FIXTURE)
        if check(r.returncode == 0, "count --depth 2 --sample 3: " + r.stderr.strip()):
            tids, calls = fixture_log(r.stdout)
            with open(os.path.join(tmp, "trace.json")) as f:
                check(traced(tids, json.load(f)) == oracle(calls, o), "trace beside count: not the oracle's")
            want = {}
            for recorded in oracle(calls, o, every_call=True).values():
                for fn, _ in recorded:
                    want[fn] = want.get(fn, 0) + 1
            text = open(os.path.join(tmp, "count.txt")).read()
            got = {m.group(2): int(m.group(1)) for m in re.finditer(r"^\s+(\d+)\s+(rc_\w+)$", text, re.M)}
            check(got == want, "count --depth 2 --sample 3: %s, want %s" % (got, want))
            check("sample 1 call in 3" in text and "calls at most 2 traced frames deep" in text,
                  "count does not say what it was exempt from:\n" + text)
            print("ok count --depth 2 --sample 3: %s" % got)

        # flame by calls: the recorded stacks.
        o = Opts(depth=3, sample=2)
        path = os.path.join(tmp, "flame.folded")
        r = ftjit("run", "--plugin", "flame:weight=calls", "--format", "folded", "-o", path, *o.args(),
                  "--", FIXTURE)
        if check(r.returncode == 0, "flame --depth 3 --sample 2: " + r.stderr.strip()):
            _, calls = fixture_log(r.stdout)
            got = {}
            for line in open(path):
                stack, n = line.rsplit(" ", 1)
                got[stack] = got.get(stack, 0) + int(n)
            check(got == stacks_of(calls, o), "flame --depth 3 --sample 2: %s, want %s" % (got, stacks_of(calls, o)))
            print("ok flame --depth 3 --sample 2: %d stacks" % len(got))

        # latency: the recorded calls, and their times at least the floor.
        o = Opts(min_ms=MIN_MS)
        ran = latency_run(tmp, "latency.json", o)
        if ran is not None:
            report, got, want = ran
            # As for trace: a few calls more, each timed at least the floor
            # by the gate (preempted in the trampoline, outside the body).
            longest = {f["name"]: f["max_ns"] for f in report["functions"]}
            more = {fn: n - want.get(fn, 0) for fn, n in got.items() if n != want.get(fn, 0)}
            tolerated = all(n > 0 and longest[fn] >= MIN_MS * 1e6 for fn, n in more.items()) and \
                sum(more.values()) <= 3 and all(fn in got for fn in want)
            if more and tolerated:
                print("  latency also recorded %s, timed at least %d ms with the trampoline" % (more, MIN_MS))
            check(got == want or tolerated, "latency --min-duration %dms: %s, want %s" % (MIN_MS, got, want))
            shortest = min((f["total_ns"] / f["count"] for f in report["functions"]), default=0)
            check(shortest >= MIN_MS * 1e6, "latency --min-duration: a call shorter than %d ms" % MIN_MS)
            print("ok latency --min-duration %dms: %s" % (MIN_MS, got))

        # latency sampled, nothing else: its sites' code takes each
        # thread's turns (inline latency, sampled), the callbacks the
        # first calls: exactly the oracle's calls.
        ran = latency_run(tmp, "latency_sampled.json", Opts(sample=3))
        if ran is not None:
            _, got, want = ran
            check(got == want, "latency --sample 3: %s, want %s" % (got, want))
            print("ok latency --sample 3: %s" % got)

        # Each mistake: one line naming the option, nothing run.
        for args, words in (
            (["--depth", "0"], "--depth 0"),
            (["--min-duration", "10"], "--min-duration 10"),
            (["--sample", "0"], "--sample 0"),
            (["--sample", "1/x"], "--sample 1/x"),
            (["--start-at", "rc_start_marker@middle"], "@middle"),
            (["--start-at", "rc_start_marker#0"], "#K"),
            (["--start-at", "no_such_function_xyz"], "no patchable function matches"),
            (["--start-after", "2s", "--stop-after", "1s"], "--stop-after"),
            (["--start-at", "rc_start_marker", "--stop-at", "rc_start_marker"], "the same call"),
            (["--on-signal", "KILL"], "--on-signal KILL"),
            (["--on-signal", "USR2:pause"], "'pause' is not an action"),
        ):
            r = ftjit("run", "--plugin", "trace", *args, "--", FIXTURE)
            lines = [l for l in r.stderr.strip().splitlines() if l]
            check(r.returncode != 0 and words in r.stderr and "call rc-0" not in r.stdout,
                  "%s: not refused as expected (exit %d): %s" % (" ".join(args), r.returncode, r.stderr.strip()))
            check(len(lines) == 1, "%s: the error is not one line: %s" % (" ".join(args), lines))
        r = ftjit("run", "--plugin", "count", "--sample", "2", "--", FIXTURE)
        check(r.returncode != 0 and "count counts every call" in r.stderr,
              "count alone with --sample was not refused: %s" % r.stderr.strip())
        print("ok: the mistakes are refused")

    if failures:
        print("%d failure(s)" % len(failures))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
