#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# `ftjit run` of programs of another ISA from the x86-64 CLI (issue 12 item
# 4 for arm64, issue 13 item 4 for riscv64): the program runs under
# qemu-user with that ISA's agent preloaded, and the CLI generates its
# trampolines (asmjit's a64 Assembler; LLVM MC for riscv64). One case per
# invocation:
#
#   guest_run_test.py CLI AGENT SYSROOT ISA CASE [ARGS...]
#     counts PROG STRATEGY   exact per-function counts, output unchanged
#     refused PROG STRATEGY  the attach is refused, nothing runs untraced
#     plugins PROG           trace, latency and flame report every function
#     put-back PROG          detach while a thread is blocked inside a frame
#                            whose return is hooked: its return address is
#                            put back (link register model), it returns
#                            normally once unblocked
#     bad-input PROG         no qemu, no sysroot, no agent, an agent of the
#                            wrong ISA, a machine without a backend, attach -p
#
# The target (tests/agent/agent_target.c) prints what its stdin asks, never
# anything timing-dependent, so the traced run's stdout must be the
# untraced run's, byte for byte.
import os
import shutil
import subprocess
import sys
import tempfile

CLI, AGENT, SYSROOT, ISA, CASE = sys.argv[1:6]
ARGS = sys.argv[6:]
# What differs per ISA: its emulator, its loader, the agent's variable, and
# what the refused case's attach must name.
GUEST = {
    "arm64": ("qemu-aarch64", "ld-linux-aarch64.so.1", "FTJIT_AGENT_ARM64",
              ("-fpatchable-function-entry=4,2", "nothing was patched")),
    # rv64gc built with =4,2: two c.nop after the entry, no site's 8 bytes.
    "riscv64": ("qemu-riscv64", "ld-linux-riscv64-lp64d.so.1", "FTJIT_AGENT_RISCV64",
                ("=8,4 (rv64gc) or =4,2 (rv64g)", "nothing was patched")),
}
QEMU, LOADER, AGENT_VAR, REFUSAL = GUEST[ISA]
SCRIPT = b"call 7\nexit 0\n"
WANT = {"fn_alpha": 7, "fn_beta": 14, "fn_gamma": 21}
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL: " + what)


def env(**extra):
    e = dict(os.environ)
    e[AGENT_VAR] = AGENT
    for k, v in extra.items():
        if v is None:
            e.pop(k, None)
        else:
            e[k] = v
    return e


def ftjit(*args, stdin=SCRIPT, **extra):
    return subprocess.run([CLI, *args], input=stdin, capture_output=True, timeout=120, env=env(**extra))


def untraced(prog):
    r = subprocess.run([QEMU, "-L", SYSROOT, "-E", "LD_LIBRARY_PATH=" + SYSROOT + "/lib", prog],
                       input=SCRIPT, capture_output=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return r.stdout


def tsv(path):
    out = {}
    with open(path) as f:
        for line in f:
            name, calls = line.rstrip("\n").split("\t")
            out[name] = int(calls)
    return out


def one_line_error(r, *words):
    err = r.stderr.decode()
    lines = [l for l in err.splitlines() if l.strip()]
    check(r.returncode != 0, "exit status non-zero: " + err)
    check(len(lines) == 1, "one line of error, got: " + repr(err))
    for w in words:
        check(w in err, repr(w) + " in " + repr(err))
    check(b"called" not in r.stdout, "the program did not run: " + repr(r.stdout))


with tempfile.TemporaryDirectory() as tmp:
    rep = os.path.join(tmp, "rep.tsv")
    if CASE == "counts":
        prog, strategy = ARGS
        r = ftjit("run", "--strategy", strategy, "--plugin", "count", "--format", "tsv",
                  "--filter", "fn_*", "-o", rep, "--", prog)
        check(r.returncode == 0, "ftjit run succeeds: " + r.stderr.decode())
        check(r.stdout == untraced(prog), "output unchanged: " + repr(r.stdout))
        if r.returncode == 0:
            check(tsv(rep) == WANT, "exact counts: " + repr(tsv(rep)))
    elif CASE == "refused":
        prog, strategy = ARGS
        r = ftjit("run", "--strategy", strategy, "--plugin", "count", "--", prog)
        one_line_error(r, *REFUSAL)
    elif CASE == "plugins":
        (prog,) = ARGS
        # flame weighs by time unless asked for calls: fn_alpha's own time,
        # in ns, is some positive number.
        for plugin, opts, needle in (("trace", [], "fn_gamma"), ("latency", [], "@fn_beta"),
                                     ("flame", ["--opt", "weight=calls"], "fn_alpha 7"),
                                     ("flame", [], "fn_alpha ")):
            r = ftjit("run", "--plugin", plugin, *opts, "--filter", "fn_*", "-o", rep, "--", prog)
            check(r.returncode == 0, plugin + ": " + r.stderr.decode())
            check(r.stdout == untraced(prog), plugin + ": output unchanged")
            text = open(rep).read() if os.path.exists(rep) else ""
            check(needle in text, plugin + ": " + needle + " in its report: " + text[:300])
            if plugin == "flame" and not opts:
                weights = [int(l.rsplit(" ", 1)[1]) for l in text.splitlines() if l.startswith("fn_alpha ")]
                check(weights and weights[0] > 0, "flame by time: fn_alpha's own time: " + text[:300])
    elif CASE == "put-back":
        (prog,) = ARGS
        import time
        p = subprocess.Popen([CLI, "run", "--plugin", "latency", "--filter", "fn_block", "--duration", "2",
                              "-o", rep, "-v", "--", prog],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env())
        check(p.stdout.readline() == b"ready\n", "the program started")
        p.stdin.write(b"block\n")
        p.stdin.flush()
        check(p.stdout.readline() == b"blocked\n", "a thread blocked inside fn_block")
        # ftjit detaches 2 s after the attach (before "ready"), while
        # fn_block's frame is still hooked; it is unblocked after that.
        time.sleep(4)
        out, err = p.communicate(b"unblock\nexit 0\n", timeout=120)
        err = err.decode()
        check(p.returncode == 0, "exit status %d: %s" % (p.returncode, err))
        check("ftjit run: detached\n" in err, "detached before the frame returned: " + err)
        check(b"unblocked" in out and b"done" in out, "fn_block returned normally: %r" % out)
        check("detached, but" not in err and "stays mapped" not in err, "put back: " + err)
    elif CASE == "bad-input":
        (prog,) = ARGS
        # The emulator not in PATH.
        r = ftjit("run", "--", prog, PATH="/nonexistent")
        one_line_error(r, QEMU, "apt-get install qemu-user")
        # A sysroot without the ISA's loader.
        r = ftjit("run", "--sysroot", tmp, "--", prog)
        one_line_error(r, "sysroot " + tmp, LOADER)
        # No agent of the ISA: a copy of ftjit with no lib/ftjit/ beside it
        # (the build tree's has the cross build's agent linked there).
        lone = os.path.join(tmp, "bin", "ftjit")
        os.makedirs(os.path.dirname(lone))
        shutil.copy(CLI, lone)
        r = subprocess.run([lone, "run", "--", prog], input=SCRIPT, capture_output=True, timeout=120,
                           env=env(**{AGENT_VAR: None}))
        check(r.returncode != 0 and AGENT_VAR in r.stderr.decode(), "no agent: " + r.stderr.decode())
        # An agent of the wrong ISA.
        r = ftjit("run", "--", prog, **{AGENT_VAR: "/bin/true"})
        one_line_error(r, "not an %s shared object" % ISA)
        # A machine ftjit has no backend for: a ppc64 ELF header.
        fake = os.path.join(tmp, "ppc64_prog")
        with open(fake, "wb") as f:
            f.write(b"\x7fELF\x02\x01\x01" + b"\0" * 9 + (2).to_bytes(2, "little") +
                    (21).to_bytes(2, "little") + b"\0" * 44)
        os.chmod(fake, 0o755)
        r = ftjit("run", "--", fake)
        one_line_error(r, "machine 21", "no backend")
        # attach -p to an emulated process: qemu-user has no ptrace.
        p = subprocess.Popen([QEMU, "-L", SYSROOT, "-E", "LD_LIBRARY_PATH=" + SYSROOT + "/lib", prog],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        assert p.stdout.readline() == b"ready\n"
        r = ftjit("attach", "-p", str(p.pid), "--duration", "0.2", stdin=b"")
        one_line_error(r, QEMU, "ftjit run")
        out, _ = p.communicate(SCRIPT, timeout=60)
        check(p.returncode == 0 and b"done" in out, "the emulated process ran on untouched")
    else:
        sys.exit("unknown case " + CASE)

print("%s %s: %s" % (CASE, " ".join(os.path.basename(a) for a in ARGS), "FAILED" if failures else "ok"))
sys.exit(1 if failures else 0)
