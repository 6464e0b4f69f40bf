#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Debian's libc relocated under a real multi-threaded workload.

    libc_workload.py FTJIT WORKLOAD

`ftjit run --relocate` traces the workload's most called libc functions
(getppid, getuid, write, malloc, free: none of them has a sled) and its
count plugin's figures are checked against an exact oracle:

- the kernel's uprobes (perf probe + perf stat) on an untraced run of the
  same program, where this kernel and perf allow them;
- else (no uprobes, or a program of another ISA that runs under
  qemu-user, whose libc the host's uprobes do not see) the program's own
  calls, for the functions nothing else in libc calls (getppid, getuid,
  write): kThreads * kIterations each.

The run must end as the untraced one does (status 0): a relocated entry
that broke anything would crash the workload or change its counts.

Counted by callbacks (--strategy list): an inline count also counts the
calls a tracer's own callbacks make (ftjit.h, "Inline work runs on every
call"), which no untraced run has. One free() is ftjit's own and allowed:
the agent's static libstdc++ frees its exception pool at exit (glibc
calls __gnu_cxx::__freeres on the program's thread).
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

FUNCTIONS = ["getppid", "getuid", "labs", "write", "malloc", "free"]
KNOWN = 4 * 20000  # libc_workload.c: kThreads * kIterations
ONLY_THE_PROGRAM_CALLS = {"getppid", "getuid", "labs", "write"}
# Refused where the ISA's entry branch covers the wrapper's system call:
# riscv64's getppid and getuid are `li a7, N; ecall; ret`, and the 8 bytes
# of auipc+jalr (4 of a jal) hold the ecall or leave no room.
REFUSED_BY_MACHINE = {243: {"getppid": "syscall-inside", "getuid": "syscall-inside"}}


def libc_path():
    out = subprocess.run(["ldd", "/bin/true"], capture_output=True, text=True).stdout
    for line in out.splitlines():
        if "libc.so.6" in line and "=>" in line:
            return line.split("=>")[1].split()[0]
    return "/lib/x86_64-linux-gnu/libc.so.6"


def machine(path):
    """The program's ELF e_machine."""
    with open(path, "rb") as f:
        header = f.read(20)
    return int.from_bytes(header[18:20], "little")


def native(path):
    """Whether the program is this machine's ISA."""
    return machine(path) == {"x86_64": 62, "aarch64": 183, "riscv64": 243}.get(os.uname().machine, -1)


def uprobe_counts(workload):
    """{function: calls} from uprobes on an untraced run, or None."""
    if not native(workload):
        print("a program of another ISA (qemu-user): using the program's own calls")
        return None
    perf = shutil.which("perf")
    if perf is None or os.geteuid() != 0:
        return None
    libc = libc_path()
    group = "ftjit_oracle_%d" % os.getpid()
    added = []
    try:
        for fn in FUNCTIONS:
            r = subprocess.run([perf, "probe", "-q", "-x", libc, "--add", "%s:%s=%s" % (group, "o_" + fn, fn)],
                               capture_output=True, text=True)
            if r.returncode != 0:
                print("uprobes unavailable (%s): using the program's own calls" % r.stderr.strip()[:200])
                return None
            added.append(fn)
        events = []
        for fn in FUNCTIONS:
            events += ["-e", "%s:o_%s" % (group, fn)]
        r = subprocess.run([perf, "stat", "-x,"] + events + [workload], capture_output=True, text=True)
        if r.returncode != 0:
            print("perf stat failed (%s): using the program's own calls" % r.stderr.strip()[:200])
            return None
        counts = {}
        for line in r.stderr.splitlines():
            parts = line.split(",")
            if len(parts) > 2 and parts[2].startswith(group + ":o_"):
                if not parts[0].isdigit():
                    return None
                counts[parts[2][len(group) + 3:]] = int(parts[0])
        return counts if len(counts) == len(FUNCTIONS) else None
    finally:
        if added:
            subprocess.run([perf, "probe", "-q", "-d", group + ":*"], capture_output=True)


def main():
    ftjit, workload = sys.argv[1], sys.argv[2]
    oracle = uprobe_counts(workload)
    source = "uprobes" if oracle is not None else "the program's calls"
    if oracle is None:
        oracle = {fn: KNOWN for fn in ONLY_THE_PROGRAM_CALLS}
    with tempfile.TemporaryDirectory() as tmp:
        report = os.path.join(tmp, "count.json")
        cmd = [ftjit, "run", "--relocate", "--strategy", "list", "--plugin", "count", "--format", "json", "-o", report]
        for fn in FUNCTIONS:
            cmd += ["--filter", "libc.so.6!" + fn]
        r = subprocess.run(cmd + ["--", workload], capture_output=True, text=True, timeout=300)
        if r.returncode != 0:
            print("FAIL: ftjit run exited %d\n%s%s" % (r.returncode, r.stdout, r.stderr))
            return 1
        with open(report) as f:
            data = json.load(f)
    traced = {}
    for entry in data.get("functions", []):
        traced[entry["name"]] = entry["calls"]
    failures = 0
    for fn, reason in sorted(REFUSED_BY_MACHINE.get(machine(workload), {}).items()):
        said = "%s: not relocated: %s" % (fn, reason) in r.stdout + r.stderr
        ok = said and traced.get(fn, 0) == 0
        failures += not ok
        print("%-8s %s: refused (%s)%s" % ("ok" if ok else "FAIL", fn, reason, "" if said else ", not said"))
        oracle.pop(fn, None)
    for fn, want in sorted(oracle.items()):
        # Not listed: never called (a sanitized build's workload calls its
        # sanitizer's malloc, not libc's; uprobes then count 0 too).
        got = traced.get(fn, 0)
        ok = got == want or (fn == "free" and got == want + 1)
        failures += not ok
        print("%-8s %s: ftjit %s, %s %d" % ("ok" if ok else "FAIL", fn, got, source, want))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
