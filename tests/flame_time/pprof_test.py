#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""`flame --format pprof` against known times: the profile of flame_time_fixture.cpp.

usage: pprof_test.py FTJIT FIXTURE PROTOC PROTO

Runs the fixture under `ftjit run --plugin flame --format pprof -o FILE`, gunzips the file and
decodes it with protoc and our .proto (an oracle apart from the encoder, libprotobuf), and checks:
- string_table[0] is "", the sample types are samples/count and time/nanoseconds;
- one sample per stack, its locations leaf first, naming the fixture's stacks; each stack's
  calls exactly, its own time against what it sleeps (never less, not more than SLACK_MS over);
- the calls of all samples sum to the fixture's 9 calls, their own times to main's whole time:
  at least the 130 ms slept, at most SLACK_MS over per function;
- --format pprof of another plugin, or without -o, is refused with one line and status 1.
"""
import gzip
import os
import re
import subprocess
import sys
import tempfile

from fixture_oracle import FUNCS, SLACK_MS, WANT

failures = []


def check(ok, what):
    if not ok:
        failures.append(what)


def parse_text(text):
    """protoc's text format -> nested dicts of lists: {field: [value or dict, ...]}."""
    root = {}
    stack = [root]
    for line in text.splitlines():
        line = line.strip()
        if not line:
            continue
        if line == "}":
            stack.pop()
            continue
        m = re.match(r"(\w+) \{$", line)
        if m:
            child = {}
            stack[-1].setdefault(m.group(1), []).append(child)
            stack.append(child)
            continue
        m = re.match(r'(\w+): (.*)$', line)
        if not m:
            raise ValueError("a line protoc should not write: %r" % line)
        value = m.group(2)
        if value.startswith('"'):
            value = value[1:-1].encode().decode("unicode_escape")
        else:
            value = int(value)
        stack[-1].setdefault(m.group(1), []).append(value)
    return root


def one(msg, key, default=0):
    return msg.get(key, [default])[0]


def main():
    ftjit, fixture, protoc, proto = sys.argv[1:5]
    filters = [a for f in FUNCS for a in ("--filter", f)]
    with tempfile.TemporaryDirectory(prefix="ftjit-pprof-") as work:
        out = os.path.join(work, "flame.pb.gz")
        r = subprocess.run([ftjit, "run", "--plugin", "flame", "--format", "pprof", "-o", out, *filters, "--",
                            fixture], capture_output=True, text=True, timeout=100)
        check(r.returncode == 0, "ftjit run exited %d: %s" % (r.returncode, r.stderr[-800:]))
        with open(out, "rb") as f:
            raw = f.read()
        check(raw[:2] == b"\x1f\x8b", "not a gzip stream: %r" % raw[:8])
        decoded = subprocess.run([protoc, "--proto_path=" + os.path.dirname(proto), "--decode=ftjit.pprof.Profile",
                                  os.path.basename(proto)], input=gzip.decompress(raw), capture_output=True,
                                 timeout=60)
        check(decoded.returncode == 0, "protoc --decode: %s" % decoded.stderr.decode()[-500:])
        text = decoded.stdout.decode()

        # The refusals: one line on stderr, status 1, nothing written.
        for args in (["--plugin", "count", "--format", "pprof", "-o", os.path.join(work, "count.pb.gz")],
                     ["--plugin", "flame", "--format", "pprof"]):
            r = subprocess.run([ftjit, "run", *args, "--", fixture], capture_output=True, text=True, timeout=100)
            check(r.returncode == 1 and r.stderr.count("\n") == 1 and "pprof" in r.stderr and r.stdout == "",
                  "refusal of %s: %d %r" % (args, r.returncode, r.stderr))
        check(not os.path.exists(os.path.join(work, "count.pb.gz")), "a refused run left its -o file")

    profile = parse_text(text)
    strings = profile.get("string_table", [])
    check(strings[:1] == [""], "string_table[0]: %r" % strings[:1])
    types = [(strings[one(t, "type")], strings[one(t, "unit")]) for t in profile.get("sample_type", [])]
    check(types == [("samples", "count"), ("time", "nanoseconds")], "sample types: %s" % types)
    check(strings[one(profile, "default_sample_type")] == "time", "default sample type")
    functions = {one(f, "id"): strings[one(f, "name")] for f in profile.get("function", [])}
    locations = {one(l, "id"): functions[one(one(l, "line", {}), "function_id")] for l in profile.get("location", [])}
    check(len(set(functions.values())) == len(functions) == len(FUNCS), "one function per name: %s" % functions)
    check(len(locations) == len(FUNCS), "one location per function: %s" % locations)

    samples = {}
    for s in profile.get("sample", []):
        names = [locations.get(i, "?") for i in s.get("location_id", [])]
        stack = ";".join(reversed(names))  # leaf first in pprof
        check(stack not in samples, "two samples of %s" % stack)
        samples[stack] = s.get("value", [])
    check(set(samples) == set(WANT), "the stacks: %s" % sorted(samples))
    for stack, (calls, ms) in WANT.items():
        v = samples.get(stack)
        if v is None:
            continue
        check(len(v) == 2 and v[0] == calls, "%s: values %s, wanted %d calls" % (stack, v, calls))
        check(len(v) == 2 and ms * 1e6 <= v[1] <= (ms + SLACK_MS) * 1e6,
              "%s: own time %s ns, wanted %d to %d ms" % (stack, v[1:], ms, ms + SLACK_MS))
    calls = sum(v[0] for v in samples.values())
    total = sum(v[1] for v in samples.values() if len(v) == 2)
    check(calls == sum(c for c, _ in WANT.values()), "calls in all: %d" % calls)
    slept = sum(ms for _, ms in WANT.values())
    check(slept * 1e6 <= total <= (slept + SLACK_MS * len(WANT)) * 1e6,
          "own times sum to %.3f ms, wanted %d ms and a little" % (total / 1e6, slept))
    if failures:
        print("FAIL:\n  " + "\n  ".join(failures))
        print(text[:4000])
        return 1
    print("ok: %d samples, %.1f ms" % (len(samples), total / 1e6))
    return 0


if __name__ == "__main__":
    sys.exit(main())
